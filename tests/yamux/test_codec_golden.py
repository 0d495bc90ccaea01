"""The yamux wire format against golden vectors written by hand from spec.md ("Framing"), and
the decoder's refusals; sniff rules for the one-port server."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sniff_support import assert_monotonic

from rsocket_tx.mux import Sniff
from rsocket_tx.yamux.codec import (
    HEADER_SIZE,
    INITIAL_WINDOW,
    Flags,
    Frame,
    FrameDecoder,
    FrameType,
    GoAwayCode,
    encode,
    sniff,
)
from rsocket_tx.yamux.errors import ProtocolError

#: (frame, bytes): version, type, flags (2), stream id (4), length (4), big-endian
GOLDEN = [
    (Frame(FrameType.DATA, Flags.SYN, 1, 5, b"hello"),
     bytes.fromhex("00 00 0001 00000001 00000005") + b"hello"),
    (Frame(FrameType.WINDOW_UPDATE, Flags.ACK, 2, 0x40000),
     bytes.fromhex("00 01 0002 00000002 00040000")),
    (Frame(FrameType.WINDOW_UPDATE, Flags.FIN, 7, 0),
     bytes.fromhex("00 01 0004 00000007 00000000")),
    (Frame(FrameType.WINDOW_UPDATE, Flags.RST, 0xFFFFFFFE, 0),
     bytes.fromhex("00 01 0008 fffffffe 00000000")),
    (Frame(FrameType.PING, Flags.SYN, 0, 0xDEADBEEF),
     bytes.fromhex("00 02 0001 00000000 deadbeef")),
    (Frame(FrameType.PING, Flags.ACK, 0, 0xDEADBEEF),
     bytes.fromhex("00 02 0002 00000000 deadbeef")),
    (Frame(FrameType.GO_AWAY, 0, 0, GoAwayCode.PROTOCOL_ERROR),
     bytes.fromhex("00 03 0000 00000000 00000001")),
    (Frame(FrameType.DATA, Flags.FIN, 3, 0), bytes.fromhex("00 00 0004 00000003 00000000")),
]


def test_constants_are_the_specs() -> None:
    assert HEADER_SIZE == 12 and INITIAL_WINDOW == 262_144
    assert [int(f) for f in (Flags.SYN, Flags.ACK, Flags.FIN, Flags.RST)] == [1, 2, 4, 8]
    assert [int(c) for c in GoAwayCode] == [0, 1, 2]


@pytest.mark.parametrize(("frame", "wire"), GOLDEN)
def test_golden_encode_and_decode(frame: Frame, wire: bytes) -> None:
    assert encode(frame) == wire
    assert FrameDecoder(1 << 20).feed(wire) == [frame]


def test_decoder_takes_any_split() -> None:
    wire = b"".join(w for _, w in GOLDEN)
    decoder = FrameDecoder(1 << 20)
    frames = []
    for i in range(len(wire)):
        frames += decoder.feed(wire[i:i + 1])
    assert frames == [f for f, _ in GOLDEN] and decoder.buffered == 0


@pytest.mark.parametrize(("wire", "words"), [
    (bytes.fromhex("01 00 0000 00000001 00000000"), "unsupported version 1"),
    (bytes.fromhex("00 04 0000 00000001 00000000"), "unknown frame type 4"),
    (bytes.fromhex("00 00 0010 00000001 00000000"), "undefined flag bits"),
    (bytes.fromhex("00 02 0001 00000003 00000000"), "PING on stream 3"),
    (bytes.fromhex("00 03 0000 00000001 00000000"), "GO_AWAY on stream 1"),
    (bytes.fromhex("00 02 0000 00000000 00000000"), "needs SYN"),
    (bytes.fromhex("00 02 0003 00000000 00000000"), "needs SYN"),
    (bytes.fromhex("00 02 0005 00000000 00000000"), "stream flags"),
    (bytes.fromhex("00 03 0001 00000000 00000000"), "stream flags"),
    (bytes.fromhex("00 00 0000 00000000 00000000"), "on stream 0"),
    (bytes.fromhex("00 01 0001 00000000 00000000"), "on stream 0"),
    (bytes.fromhex("00 00 0000 00000001 00000401"), "exceeds the max_frame_length of 1024"),
])
def test_the_decoder_refuses_what_is_not_in_the_table(wire: bytes, words: str) -> None:
    with pytest.raises(ProtocolError, match=words):
        FrameDecoder(1024).feed(wire)


def test_an_overlong_data_is_refused_on_its_header_before_its_body() -> None:
    decoder = FrameDecoder(1024)
    with pytest.raises(ProtocolError):
        decoder.feed(bytes.fromhex("00 00 0000 00000001 ffffffff"))


def test_encode_refuses_inconsistent_frames() -> None:
    with pytest.raises(ValueError, match="len"):
        encode(Frame(FrameType.DATA, 0, 1, 3, b"ab"))
    with pytest.raises(ValueError, match="only Data"):
        encode(Frame(FrameType.PING, Flags.SYN, 0, 0, b"x"))


@given(st.lists(st.tuples(st.sampled_from([FrameType.DATA, FrameType.WINDOW_UPDATE]),
                          st.sampled_from([0, 1, 2, 4, 8, 5]),
                          st.integers(1, 2**32 - 1), st.binary(max_size=64),
                          st.integers(0, 2**32 - 1)), max_size=8),
       st.integers(1, 40))
def test_round_trip_any_split(specs, step) -> None:
    frames = [Frame(kind, flags, sid, len(data) if kind is FrameType.DATA else n,
                    data if kind is FrameType.DATA else b"")
              for kind, flags, sid, data, n in specs]
    wire = b"".join(map(encode, frames))
    decoder = FrameDecoder(64)
    got = []
    for i in range(0, len(wire), step):
        got += decoder.feed(wire[i:i + step])
    assert got == frames


# -- sniff -----------------------------------------------------------------------------------

GO_CLIENT_FIRST = bytes.fromhex("00 01 0001 00000001 00000000")  # hashicorp/yamux OpenStream
RUST_CLIENT_FIRST = bytes.fromhex("00 00 0001 00000001 00000005") + b"hello"


@pytest.mark.parametrize("first", [GO_CLIENT_FIRST, RUST_CLIENT_FIRST,
                                   bytes.fromhex("00 01 0005 00000003 00000000"),
                                   bytes.fromhex("00 02 0001 00000000 00000007")])
def test_sniff_matches_a_clients_first_frame_on_its_header(first: bytes) -> None:
    verdicts = assert_monotonic(sniff, first)
    assert verdicts[HEADER_SIZE - 1] is Sniff.NEED_MORE
    assert verdicts[HEADER_SIZE] is Sniff.MATCH


@pytest.mark.parametrize("first", [
    bytes.fromhex("00 01 0000 00000001 00000000"),  # no SYN
    bytes.fromhex("00 01 0003 00000001 00000000"),  # SYN and ACK
    bytes.fromhex("00 01 0001 00000002 00000000"),  # the server's parity
    bytes.fromhex("00 03 0000 00000000 00000000"),  # Go Away first
    bytes.fromhex("00 02 0001 00000001 00000000"),  # Ping on a stream
    bytes.fromhex("01 00 0001 00000001 00000000"),  # version 1
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\x00",  # TLS
    b"GET / HTTP/1.1\r\n",
    bytes.fromhex("00 00 1c 00000000 0400 0100 0000"),  # an RSocket SETUP
])
def test_sniff_refuses_anything_else(first: bytes) -> None:
    assert assert_monotonic(sniff, first)[-1] is Sniff.NO_MATCH


def test_sniff_never_raises_and_decides_on_twelve_bytes() -> None:
    for b in range(256):
        assert sniff(bytes([0, 1, 0, 1, 0, 0, 0, b]) + bytes(4)) in (Sniff.MATCH,
                                                                      Sniff.NO_MATCH)


def test_frames_before_a_broken_one_in_the_same_read_are_returned() -> None:
    decoder = FrameDecoder(1024)
    good = GOLDEN[0][1]
    assert decoder.feed(good + bytes.fromhex("07 00 0000 00000001 00000000")) == [GOLDEN[0][0]]
    assert "unsupported version 7" in str(decoder.error)
    with pytest.raises(ProtocolError, match="version 7"):
        decoder.feed(good)


@pytest.mark.parametrize("first", [GO_CLIENT_FIRST, RUST_CLIENT_FIRST])
def test_no_other_protocol_of_the_shared_port_claims_a_yamux_header(first: bytes) -> None:
    from rsocket_tx.transports.oneport import PROTOCOLS, sniff_tls, sniff_websocket

    others = [d.sniff for name, d in PROTOCOLS.items() if name != "yamux"]
    for other in others + [sniff_tls, sniff_websocket]:
        # at 12 bytes yamux says MATCH; no other may have said MATCH by then
        assert all(other(first[:n]) is not Sniff.MATCH for n in range(HEADER_SIZE + 1))


def test_yamux_claims_no_other_protocols_first_bytes() -> None:
    from rsocket_tx.rsnet.codec import CLIENT_HELLO_PREFIX

    setup = bytes.fromhex("00 00 2a 00000000 0400 0001 0000 00007530 0001d4c0") + bytes(20)
    for first in (setup, b"Jmux\x00\x01" + bytes(10), CLIENT_HELLO_PREFIX + bytes(8),
                  bytes.fromhex("0000001c 00 00 0001 0000000000000000") + bytes(12),
                  b"\x16\x03\x01\x00\xa5\x01" + bytes(10), b"GET /rsocket HTTP/1.1\r\n"):
        assert assert_monotonic(sniff, first)[-1] is Sniff.NO_MATCH, first


@given(st.lists(st.tuples(st.sampled_from([FrameType.DATA, FrameType.WINDOW_UPDATE]),
                          st.sampled_from([0, 1, 2, 4, 8, 5, 9]),
                          st.integers(1, 9), st.binary(max_size=40)), max_size=8),
       st.integers(1, 30))
def test_stream_data_hands_bodies_on_in_pieces_that_join_to_the_frames(specs, step) -> None:
    frames = [Frame(kind, flags, sid, len(data) if kind is FrameType.DATA else 3,
                    data if kind is FrameType.DATA else b"") for kind, flags, sid, data in specs]
    wire = b"".join(map(encode, frames))
    decoder = FrameDecoder(64, stream_data=True)
    pieces = []
    for i in range(0, len(wire), step):
        pieces += decoder.feed(wire[i:i + step])
    opening, closing = Flags.SYN | Flags.ACK, Flags.FIN | Flags.RST
    for frame in frames:
        if frame.type is not FrameType.DATA:
            assert pieces.pop(0) == frame
            continue
        got, flags, first = b"", 0, True
        while True:
            piece = pieces.pop(0)
            assert (piece.type, piece.stream_id) == (frame.type, frame.stream_id)
            assert piece.length == len(piece.data)
            assert first or not piece.flags & opening  # opening flags on the first piece only
            got += piece.data
            flags |= piece.flags
            first = False
            if len(got) == frame.length:
                break
            assert not piece.flags & closing  # closing flags on the last piece only
        assert (got, flags) == (frame.data, frame.flags)
    assert pieces == []


def test_stream_data_gives_a_large_frames_bytes_as_they_come() -> None:
    decoder = FrameDecoder(1 << 20, stream_data=True)
    wire = encode(Frame(FrameType.DATA, Flags.SYN | Flags.FIN, 1, 100_000, bytes(100_000)))
    first = decoder.feed(wire[:40_012])
    assert first == [Frame(FrameType.DATA, Flags.SYN, 1, 40_000, bytes(40_000))]
    assert decoder.buffered == 0  # nothing of the body held
    assert decoder.feed(wire[40_012:]) == [Frame(FrameType.DATA, Flags.FIN, 1, 60_000,
                                                 bytes(60_000))]
