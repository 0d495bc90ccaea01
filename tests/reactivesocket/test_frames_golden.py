"""Golden byte vectors of the 2015 ReactiveSocket draft, written by hand from the seed text
(seed 001, §Frame Header Format, §Metadata Optional Header, §Frame Types and each frame's
section). Every vector is spelled out field by field in hex; nothing is computed with our
encoder. Flags byte: I=0x80, M=0x40, SETUP's L=0x20, RESPONSE's F=0x20 and C=0x10."""

from __future__ import annotations

import pytest

from rsocket_tx.core.errors import FrameDecodeError, FrameTooLargeError, UnknownFrameTypeError
from rsocket_tx.reactivesocket import frames as F


def h(*fields: str) -> bytes:
    return bytes.fromhex("".join(fields).replace(" ", ""))


def test_frame_type_values():
    # draft §Frame Types
    assert [(t.name, t.value) for t in F.FrameType] == [
        ("RESERVED", 0x0000), ("SETUP", 0x0001), ("SETUP_ERROR", 0x0002), ("LEASE", 0x0003),
        ("REQUEST_RESPONSE", 0x0011), ("REQUEST_FNF", 0x0012), ("REQUEST_STREAM", 0x0013),
        ("REQUEST_SUB", 0x0014), ("REQUEST_N", 0x0015), ("CANCEL", 0x0016),
        ("RESPONSE", 0x0020), ("ERROR", 0x0021), ("METADATA_PUSH", 0x0031), ("EXT", 0xFFFF)]


def test_setup_error_codes():
    # draft §Setup Error Frame, Error Codes
    assert F.SetupErrorCode.INVALID_SETUP == 0x0001
    assert F.SetupErrorCode.UNSUPPORTED_SETUP == 0x0010
    assert F.SetupErrorCode.REJECTED_SETUP == 0x0100


def test_flags():
    assert (F.FLAG_IGNORE, F.FLAG_METADATA, F.FLAG_LEASE, F.FLAG_FOLLOWS, F.FLAG_COMPLETE) == \
        (0x80, 0x40, 0x20, 0x20, 0x10)


STREAM0 = "00000000 00000000"

# (frame, bytes without the TCP length word)
VECTORS = [
    pytest.param(
        F.SetupFrame(metadata_mime_type=b"text/plain", data_mime_type=b"text/plain",
                     lease=True, data=b"hi"),
        h("00", "20", "0001", STREAM0, "0a", b"text/plain".hex(), "0a", b"text/plain".hex(),
          "6869"),
        id="SETUP with L"),
    pytest.param(
        F.SetupFrame(metadata_mime_type=b"", data_mime_type=b"a/b", data=b"x",
                     metadata=b"md", metadata_type=5),
        # M; metadata header: type 05, length 6 (4-byte header + 2), then "md", then data "x"
        h("00", "40", "0001", STREAM0, "00", "03", b"a/b".hex(), "05 000006 6d64", "78"),
        id="SETUP with metadata"),
    pytest.param(
        F.SetupErrorFrame(error_code=0x0100, data=b"no"),
        h("00", "00", "0002", STREAM0, "00000100", "6e6f"),
        id="SETUP_ERROR REJECTED_SETUP"),
    pytest.param(
        F.LeaseFrame(time=1_000_000_000, number_of_requests=10),
        # time: 10^9 ns = 0x3B9ACA00; count 10
        h("00", "00", "0003", STREAM0, "00000000 3b9aca00", "00000000 0000000a"),
        id="LEASE"),
    pytest.param(
        F.LeaseFrame(time=0, number_of_requests=0, metadata=b"", metadata_type=0xff),
        h("00", "40", "0003", STREAM0, "00000000 00000000", "00000000 00000000", "ff 000004"),
        id="LEASE with empty metadata"),
    pytest.param(
        F.RequestResponseFrame(stream_id=1, data=b"d", metadata=b"m"),
        h("00", "40", "0011", "00000000 00000001", "00 000005 6d", "64"),
        id="REQUEST_RESPONSE"),
    pytest.param(
        F.RequestFnfFrame(stream_id=3, data=b"fire"),
        h("00", "00", "0012", "00000000 00000003", b"fire".hex()),
        id="REQUEST_FNF"),
    pytest.param(
        F.RequestStreamFrame(stream_id=5, initial_request_n=1 << 32, data=b"s"),
        h("00", "00", "0013", "00000000 00000005", "00000001 00000000", "73"),
        id="REQUEST_STREAM 64-bit n"),
    pytest.param(
        F.RequestSubFrame(stream_id=0x7FFFFFFFFFFFFFFF, initial_request_n=0xFFFFFFFFFFFFFFFF),
        h("00", "00", "0014", "7fffffff ffffffff", "ffffffff ffffffff"),
        id="REQUEST_SUB"),
    pytest.param(
        F.RequestNFrame(stream_id=1, request_n=5),
        h("00", "00", "0015", "00000000 00000001", "00000000 00000005"),
        id="REQUEST_N"),
    pytest.param(
        F.CancelFrame(stream_id=2),
        h("00", "00", "0016", "00000000 00000002"),
        id="CANCEL"),
    pytest.param(
        F.ResponseFrame(stream_id=2, data=b"ok", follows=True, complete=True),
        h("00", "30", "0020", "00000000 00000002", "6f6b"),
        id="RESPONSE F and C"),
    pytest.param(
        F.ResponseFrame(stream_id=2, metadata=b"\x01\x02", metadata_type=9, complete=True),
        h("00", "50", "0020", "00000000 00000002", "09 000006 0102"),
        id="RESPONSE M and C"),
    pytest.param(
        F.ResponseFrame(stream_id=4, complete=True),
        h("00", "10", "0020", "00000000 00000004"),
        id="bare COMPLETE"),
    pytest.param(
        F.ErrorFrame(stream_id=1, data=b"oops"),
        h("00", "00", "0021", "00000000 00000001", b"oops".hex()),
        id="ERROR"),
    pytest.param(
        F.MetadataPushFrame(metadata=b"abc", metadata_type=7),
        h("00", "40", "0031", STREAM0, "07 000007", b"abc".hex()),
        id="METADATA_PUSH"),
    pytest.param(
        F.ExtFrame(stream_id=0, extended_type=1, flags=0x80, body=b"zz"),
        h("00", "80", "ffff", STREAM0, "00000001", "7a7a"),
        id="EXT with I"),
]


@pytest.mark.parametrize("frame, wire", VECTORS)
def test_encode(frame, wire):
    assert F.encode(frame) == wire


@pytest.mark.parametrize("frame, wire", VECTORS)
def test_decode(frame, wire):
    assert F.decode(wire) == frame


def test_tcp_length_counts_the_whole_frame():
    # draft §Frame Header Format: "Length of Frame. Including header."
    cancel = h("00", "00", "0016", "00000000 00000002")
    assert F.frame_with_length(cancel) == h("00000010") + cancel
    reader = F.FrameReader(1024)
    stream = h("00000010") + cancel + h("00000014", "00", "00", "0015", "00000000 00000001",
                                        "00000000")
    assert reader.feed(stream[:20]) == [cancel]
    assert reader.feed(stream[20:-1]) == []
    assert reader.feed(stream[-1:]) == [h("00", "00", "0015", "00000000 00000001", "00000000")]
    assert reader.buffered == 0


@pytest.mark.parametrize("word, error", [
    ("80000010", "reserved R bit"),
    ("0000000f", "shorter than the 16-byte header"),
    ("00000000", "shorter than the 16-byte header"),
])
def test_bad_length_words(word, error):
    with pytest.raises(FrameDecodeError, match=error):
        F.FrameReader(1024).feed(h(word) + bytes(16))


def test_a_frame_over_the_limit():
    cancel = h("00000010", "00", "00", "0016", "00000000 00000002")
    with pytest.raises(FrameTooLargeError) as info:
        F.FrameReader(100).feed(cancel + h("00000069"))  # 105 - 4 > 100
    assert info.value.frames == [cancel[4:]]
    assert F.FrameReader(100).feed(h("00000068") + bytes(100)) == [bytes(100)]


@pytest.mark.parametrize("wire, error", [
    pytest.param(h("00", "00", "0016", "00000000 000000"), "shorter than the 12-byte header",
                 id="short header"),
    pytest.param(h("01", "00", "0016", "00000000 00000002"), "unsupported version 1",
                 id="version"),
    pytest.param(h("00", "00", "0013", "00000000 00000001", "00000000"),
                 "shorter than its 20-byte", id="REQUEST_STREAM without its n"),
    pytest.param(h("00", "40", "0011", "00000000 00000001", "00 0000"), "ends before",
                 id="cut metadata header"),
    pytest.param(h("00", "40", "0011", "00000000 00000001", "00 000003"), "less than its own",
                 id="metadata length under 4"),
    pytest.param(h("00", "40", "0011", "00000000 00000001", "00 000009 00"), "runs past",
                 id="metadata past the end"),
    pytest.param(h("00", "00", "0016", "00000000 00000001", "00"), "after its metadata",
                 id="CANCEL with data"),
    pytest.param(h("00", "00", "0031", STREAM0), "without the M flag",
                 id="METADATA_PUSH without M"),
    pytest.param(h("00", "00", "0001", STREAM0, "05", "6162"), "shorter than",
                 id="SETUP MIME past the end"),
])
def test_malformed(wire, error):
    with pytest.raises(FrameDecodeError, match=error):
        F.decode(wire)


@pytest.mark.parametrize("type_hex, flags, ignore", [
    ("0000", "00", False), ("0004", "80", True), ("0030", "00", False), ("fffe", "80", True)])
def test_unknown_types(type_hex, flags, ignore):
    with pytest.raises(UnknownFrameTypeError) as info:
        F.decode(h("00", flags, type_hex, STREAM0))
    assert info.value.ignore is ignore


def test_encode_refuses_out_of_range_fields():
    with pytest.raises(ValueError, match="stream_id"):
        F.encode(F.CancelFrame(stream_id=1 << 64))
    with pytest.raises(ValueError, match="request_n"):
        F.encode(F.RequestNFrame(stream_id=1, request_n=-1))
    with pytest.raises(ValueError, match="24-bit metadata length"):
        F.encode(F.RequestResponseFrame(stream_id=1, metadata=bytes(0xFFFFFC)))
    with pytest.raises(ValueError, match="255"):
        F.encode(F.SetupFrame(metadata_mime_type=b"x" * 256, data_mime_type=b""))
