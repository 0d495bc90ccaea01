"""Tests for the 24-bit length-prefix framing (spec §Framing Format, §Max Frame Size).

"Frame Length: (24 bits = max value 16,777,215) Unsigned 24-bit integer representing the length
of Frame in bytes. Excluding the Frame Length field."  Byte order is big endian.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import FrameDecodeError, FrameTooLargeError, ProtocolError
from rsocket_tx.core.framing import MAX_FRAME_LENGTH, FrameReader, frame_with_length


def h(*fields: str) -> bytes:
    return bytes.fromhex("".join(fields))


CANCEL_5 = h("00000005", "2400")  # CANCEL on stream 5: 6 bytes
REQUEST_N_5 = h("00000005", "2000", "0000000a")  # REQUEST_N 10 on stream 5: 10 bytes
PAYLOAD_1 = h("00000001", "2860") + b"hello"  # PAYLOAD N|C "hello" on stream 1: 11 bytes


def test_max_frame_length_constant() -> None:
    assert MAX_FRAME_LENGTH == 16_777_215
    assert issubclass(FrameTooLargeError, ProtocolError)


# ---------------------------------------------------------------------------------------------
# frame_with_length
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "expected"),
    [
        pytest.param(CANCEL_5, h("000006", "00000005", "2400"), id="cancel-6"),
        pytest.param(REQUEST_N_5, h("00000a", "00000005", "2000", "0000000a"), id="request-n-10"),
        pytest.param(PAYLOAD_1, h("00000b", "00000001", "2860") + b"hello", id="payload-11"),
        pytest.param(b"", h("000000"), id="empty"),
        pytest.param(b"\x01" * 0x0102, h("000102") + b"\x01" * 0x0102, id="258-bytes"),
        pytest.param(b"\x02" * 0x010000, h("010000") + b"\x02" * 0x010000, id="65536-bytes"),
    ],
)
def test_frame_with_length(frame: bytes, expected: bytes) -> None:
    assert frame_with_length(frame) == expected


def test_frame_with_length_max() -> None:
    body = b"\x00" * MAX_FRAME_LENGTH
    out = frame_with_length(body)
    assert out[:3] == h("ffffff")
    assert len(out) == 3 + MAX_FRAME_LENGTH


def test_frame_with_length_too_large() -> None:
    # spec §Max Frame Size: frames MUST be limited to 16,777,215 bytes; a 24-bit prefix cannot
    # express more, so it must not be silently truncated.  (The contract does not name the
    # exception; ValueError or OverflowError are both accepted here.)
    with pytest.raises((ValueError, OverflowError)):
        frame_with_length(b"\x00" * (MAX_FRAME_LENGTH + 1))


# ---------------------------------------------------------------------------------------------
# FrameReader
# ---------------------------------------------------------------------------------------------


def test_one_frame() -> None:
    reader = FrameReader()
    frames = reader.feed(h("000006", "00000005", "2400"))
    assert frames == [CANCEL_5]
    assert all(isinstance(f, bytes) for f in frames)
    assert F.decode(frames[0]) == F.CancelFrame(stream_id=5)


def test_several_frames_in_one_feed() -> None:
    reader = FrameReader()
    data = (
        h("000006", "00000005", "2400")
        + h("00000a", "00000005", "2000", "0000000a")
        + h("00000b", "00000001", "2860")
        + b"hello"
    )
    assert reader.feed(data) == [CANCEL_5, REQUEST_N_5, PAYLOAD_1]


def test_empty_feed() -> None:
    reader = FrameReader()
    assert reader.feed(b"") == []
    assert reader.feed(h("000006", "00000005", "2400")) == [CANCEL_5]
    assert reader.feed(b"") == []


def test_frame_split_one_byte_at_a_time() -> None:
    reader = FrameReader()
    data = h("00000b", "00000001", "2860") + b"hello"
    out: list[bytes] = []
    for i in range(len(data)):
        got = reader.feed(data[i : i + 1])
        if i < len(data) - 1:
            assert got == []
        out.extend(got)
    assert out == [PAYLOAD_1]


def test_frames_straddling_feeds() -> None:
    reader = FrameReader()
    data = h("000006", "00000005", "2400") + h("00000a", "00000005", "2000", "0000000a")
    # first feed: whole first frame + 2 bytes of the second prefix
    assert reader.feed(data[:11]) == [CANCEL_5]
    # second: rest of the prefix and part of the body
    assert reader.feed(data[11:15]) == []
    # third: the rest + the start of a third frame
    assert reader.feed(data[15:] + h("0000")) == [REQUEST_N_5]
    assert reader.feed(h("06", "00000005", "2400")) == [CANCEL_5]


@settings(deadline=None)
@given(st.lists(st.binary(min_size=6, max_size=40), max_size=8), st.data())
def test_arbitrary_chunking(bodies: list[bytes], data: st.DataObject) -> None:
    # Hand-made prefixes (3-byte big endian), arbitrary split points.
    stream = b"".join(len(b).to_bytes(3, "big") + b for b in bodies)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=10)))
    reader = FrameReader()
    out: list[bytes] = []
    prev = 0
    for c in [*cuts, len(stream)]:
        out.extend(reader.feed(stream[prev:c]))
        prev = c
    assert out == bodies


def test_frame_of_exactly_max_frame_size_is_accepted() -> None:
    reader = FrameReader(max_frame_size=10)
    assert reader.feed(h("00000a", "00000005", "2000", "0000000a")) == [REQUEST_N_5]


def test_frame_of_max_plus_one_is_rejected_on_prefix() -> None:
    reader = FrameReader(max_frame_size=10)
    # only the 3 prefix bytes: 11 > 10 -> rejected before any body byte arrives
    with pytest.raises(FrameTooLargeError):
        reader.feed(h("00000b"))


def test_frame_too_large_detected_when_prefix_completes_byte_by_byte() -> None:
    reader = FrameReader(max_frame_size=10)
    assert reader.feed(h("00")) == []
    assert reader.feed(h("00")) == []
    with pytest.raises(FrameTooLargeError):
        reader.feed(h("0b"))


def test_frame_too_large_after_good_frame_in_same_feed() -> None:
    reader = FrameReader(max_frame_size=10)
    with pytest.raises(FrameTooLargeError):
        reader.feed(h("000006", "00000005", "2400") + h("ffffff"))


def test_default_max_accepts_largest_prefix() -> None:
    # 0xFFFFFF == 16,777,215 is the largest legal frame; with the default limit the prefix alone
    # is not an error (the body has not arrived yet).
    reader = FrameReader()
    assert reader.feed(h("ffffff")) == []
    assert reader.feed(b"\x00" * 100) == []


def test_default_max_accepts_frame_of_exactly_max_length() -> None:
    reader = FrameReader()
    body = h("00000001", "2820") + b"\x00" * (MAX_FRAME_LENGTH - 6)
    assert reader.feed(h("ffffff") + body) == [body]


def test_frame_too_large_is_protocol_error() -> None:
    reader = FrameReader(max_frame_size=6)
    with pytest.raises(ProtocolError):
        reader.feed(h("000007"))


def test_zero_length_frame_is_rejected() -> None:
    # A frame needs at least the 6-byte header (§Frame Header Format).  The reader may reject it
    # itself, or hand b"" on to decode, which must raise FrameDecodeError.
    reader = FrameReader()
    try:
        frames = reader.feed(h("000000"))
    except ProtocolError:
        return
    assert frames == [b""]
    with pytest.raises(FrameDecodeError):
        F.decode(frames[0])


def test_short_frame_reaches_decode_error() -> None:
    # 5 bytes: shorter than the header.
    reader = FrameReader()
    try:
        frames = reader.feed(h("000005", "0000000124"))
    except ProtocolError:
        return
    assert frames == [h("0000000124")]
    with pytest.raises(FrameDecodeError):
        F.decode(frames[0])


def test_roundtrip_with_codec() -> None:
    frames = [
        F.RequestResponseFrame(stream_id=1, data=b"ping", metadata=b"m"),
        F.PayloadFrame(stream_id=1, data=b"pong", next=True, complete=True),
        F.KeepaliveFrame(respond=True, data=b"k"),
    ]
    stream = b"".join(frame_with_length(F.encode(f)) for f in frames)
    reader = FrameReader()
    got = [F.decode(b) for i in range(len(stream)) for b in reader.feed(stream[i : i + 1])]
    assert got == frames
