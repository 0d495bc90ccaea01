"""Composite metadata golden vectors and per-entry error reporting.

Spec: ``Extensions/CompositeMetadata.md`` §Metadata Contents.  Each entry is
``|M| MIME ID/Len (7)| [MIME type] | Metadata Length (24 bits) | payload``.  With M set the first
byte is ``0x80 | id``; with M clear it is ``len - 1`` (INTEROP.md: every implementation writes a
25-byte type as ``0x18``).  Vectors are spelled out field by field, never produced by our encoder.
"""

from __future__ import annotations

import pytest

from rsocket_tx.extensions import CompositeEntry, decode_composite, encode_composite

from .helpers import h

CUSTOM = "application/x.rsocket.tx1"  # 12 + 13 = 25 ASCII bytes -> length byte 25 - 1 = 0x18


def test_custom_type_used_here_is_25_bytes() -> None:
    assert len(CUSTOM) == 25


# (entries given to the encoder, the wire bytes derived by hand)
GOLDEN = [
    pytest.param(
        [("application/json", b"{}")],
        # M=1, id 0x05 -> 0x85 | length 2 -> 00 00 02 | '{' '}' -> 7b 7d
        h("85", "000002", "7b7d"),
        id="well-known-json",
    ),
    pytest.param(
        [("message/x.rsocket.routing.v0", h("08") + b"orders.7")],
        # M=1, id 0x7E -> 0xFE | length 9 | tag length 8, 'orders.7'
        h("fe", "000009", "08") + b"orders.7",
        id="well-known-routing",
    ),
    pytest.param(
        [(CUSTOM, b"abc")],
        # M=0, 25 bytes stored as 24 = 0x18 | ASCII name | length 3 | 'abc'
        h("18") + CUSTOM.encode() + h("000003") + b"abc",
        id="custom-25-bytes-written-0x18",
    ),
    pytest.param(
        [("a/b", b"")],
        # M=0, 3 bytes stored as 0x02 | 'a/b' | length 0, no payload
        h("02") + b"a/b" + h("000000"),
        id="custom-empty-content",
    ),
    pytest.param(
        [("text/plain", b"hi"), ("x/y", b"\x00"), ("application/octet-stream", b"")],
        # 0x80|0x21 = 0xA1, len 2, 'hi' | 0x02 'x/y' len 1, 00 | 0x80|0x06 = 0x86, len 0
        h("a1", "000002", "6869", "02") + b"x/y" + h("000001", "00", "86", "000000"),
        id="three-entries-in-order",
    ),
    pytest.param([], b"", id="no-entries"),
]


@pytest.mark.parametrize(("entries", "wire"), GOLDEN)
def test_encode_golden(entries: list[tuple[str, bytes]], wire: bytes) -> None:
    assert encode_composite(entries) == wire


@pytest.mark.parametrize(("entries", "wire"), GOLDEN)
def test_decode_golden(entries: list[tuple[str, bytes]], wire: bytes) -> None:
    decoded = decode_composite(wire)
    assert [(e.mime_type, e.content) for e in decoded] == entries
    assert all(e.error is None for e in decoded)


def test_decode_reports_the_well_known_id() -> None:
    (json_entry, custom_entry) = decode_composite(
        h("85", "000000", "02") + b"x/y" + h("000000")
    )
    assert json_entry == CompositeEntry("application/json", b"", mime_id=0x05)
    assert custom_entry == CompositeEntry("x/y", b"", mime_id=None)


def test_custom_type_spelled_like_a_well_known_one_decodes_to_that_name() -> None:
    # The spec allows the string form of a well-known type: 16 bytes -> 0x0F.
    (entry,) = decode_composite(h("0f") + b"application/json" + h("000001") + b"1")
    assert entry.mime_type == "application/json"
    assert entry.mime_id is None


def test_length_byte_boundaries() -> None:
    # 1 byte -> 0x00; 128 bytes -> 0x7F (the largest a 7-bit length - 1 can say).
    assert encode_composite([("a", b"")]) == h("00") + b"a" + h("000000")
    long_name = "x/" + "y" * 126
    assert encode_composite([(long_name, b"")]) == h("7f") + long_name.encode() + h("000000")
    assert decode_composite(h("7f") + long_name.encode() + h("000000"))[0].mime_type == long_name


def test_raw_mime_id_entry_is_written_with_that_id() -> None:
    # A proxy can forward an id it does not know: 0x80 | 0x50 = 0xD0.
    wire = encode_composite([CompositeEntry(None, b"z", mime_id=0x50)])
    assert wire == h("d0", "000001") + b"z"


def test_maximum_content_length_is_24_bits() -> None:
    content = bytes(0xFFFFFF)
    wire = encode_composite([("application/json", content)])
    assert wire[:4] == h("85", "ffffff")
    assert decode_composite(wire)[0].content == content
    with pytest.raises(ValueError, match="16777215"):
        encode_composite([("application/json", bytes(0x1000000))])


@pytest.mark.parametrize(
    ("entry", "exc", "message"),
    [
        (("", b""), ValueError, "must not be empty"),
        (("x/" + "y" * 127, b""), ValueError, "129 bytes.*at most 128"),
        (("text/plaïn", b""), ValueError, "US-ASCII"),
        ((b"text/plain", b""), TypeError, "MIME type must be a str, not bytes"),
        (("text/plain", "str"), TypeError, "content must be bytes.*not str"),
        (("text/plain",), TypeError, r"\(mime_type, content\)"),
        ("text/plain", TypeError, "CompositeEntry or a .* not str"),
        (CompositeEntry(None, b""), ValueError, "mime_type or a mime_id"),
        (CompositeEntry(None, b"", mime_id=128), ValueError, "0..127"),
        (CompositeEntry(None, b"", mime_id=0x50, error="x"), ValueError, "failed to decode"),
    ],
)
def test_encode_rejects_bad_entries(entry: object, exc: type, message: str) -> None:
    with pytest.raises(exc, match=message) as info:
        encode_composite([("application/json", b""), entry])  # type: ignore[list-item]
    assert "entry 1" in str(info.value)


def test_encode_accepts_bytes_like_content() -> None:
    assert encode_composite([("x/y", bytearray(b"ab")), ("x/y", memoryview(b"c"))]) == (
        h("02") + b"x/y" + h("000002") + b"ab" + h("02") + b"x/y" + h("000001") + b"c"
    )


# ---------------------------------------------------------------------------------------------
# Per-entry error reporting: decode_composite never raises
# ---------------------------------------------------------------------------------------------


def test_unknown_well_known_id_in_the_middle_leaves_neighbours_readable() -> None:
    wire = (
        h("85", "000002", "7b7d")  # application/json, '{}'
        + h("d0", "000003", "616263")  # 0x80 | 0x50: id 0x50 is not in the table
        + h("a1", "000002", "6869")  # text/plain, 'hi'
    )
    first, middle, last = decode_composite(wire)
    assert first == CompositeEntry("application/json", b"{}", mime_id=5)
    assert last == CompositeEntry("text/plain", b"hi", mime_id=0x21)
    assert middle.mime_type is None
    assert middle.mime_id == 0x50
    assert middle.content == b"abc"  # skipped over intact
    assert middle.error is not None and "0x50" in middle.error


def test_truncated_last_entry_is_reported_and_earlier_ones_survive() -> None:
    wire = h("85", "000002", "7b7d") + h("a1", "000005", "6869")  # says 5 bytes, has 2
    first, last = decode_composite(wire)
    assert first == CompositeEntry("application/json", b"{}", mime_id=5)
    assert last.mime_type == "text/plain"
    assert last.content == b""
    assert last.error is not None and "5 bytes" in last.error and "2 remain" in last.error


@pytest.mark.parametrize(
    ("tail", "expected"),
    [
        (h("a1", "0000"), "3-byte metadata length is missing"),  # length field cut short
        (h("a1"), "3-byte metadata length is missing"),  # only the id byte
        (h("18") + b"applic", "needs 25 bytes but only 6 remain"),  # custom name cut short
    ],
)
def test_truncated_headers_are_reported(tail: bytes, expected: str) -> None:
    entries = decode_composite(h("85", "000000") + tail)
    assert entries[0] == CompositeEntry("application/json", b"", mime_id=5)
    assert len(entries) == 2
    assert entries[1].error is not None and expected in entries[1].error


def test_non_ascii_mime_type_is_reported_and_skipped() -> None:
    wire = h("02", "ffff2f", "000001", "00") + h("85", "000000")
    bad, good = decode_composite(wire)
    assert bad.mime_type is None and bad.error is not None and "US-ASCII" in bad.error
    assert bad.content == b"\x00"
    assert good == CompositeEntry("application/json", b"", mime_id=5)


def test_decode_accepts_bytes_like_and_reports_other_input() -> None:
    wire = h("85", "000000")
    assert decode_composite(bytearray(wire)) == decode_composite(memoryview(wire))
    (entry,) = decode_composite("85000000")  # type: ignore[arg-type]
    assert entry.error is not None and "must be bytes" in entry.error
    assert decode_composite(b"") == []


def test_repr_hides_authentication_content() -> None:
    # 0x80 | 0x7C = 0xFC, length 1 + 2 + 8 = 11 = 0x0b | simple (0x80), username length 4
    entry = decode_composite(h("fc", "00000b", "80", "0004") + b"userpass")[0]
    assert "pass" not in repr(entry)
    assert "11 bytes hidden" in repr(entry)
    assert "hi" in repr(CompositeEntry("text/plain", b"hi"))
