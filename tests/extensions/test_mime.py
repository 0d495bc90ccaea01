"""Per-stream data MIME type and accept-MIME-types golden vectors
(``Extensions/PerStreamDataMimeTypesDefinition.md``).

Each MIME type is ``|M| MIME ID/Len (7)| [MIME type]``: ``0x80 | id`` for a well-known type,
else ``len - 1`` and the ASCII name (as rsocket-java's ``MimeTypeMetadataCodec`` reads and writes).
"""

from __future__ import annotations

import pytest

from rsocket_tx.extensions import (
    MetadataDecodeError,
    decode_accept_mime_types,
    decode_mime_type,
    encode_accept_mime_types,
    encode_mime_type,
)

from .helpers import h

MIME_GOLDEN = [
    pytest.param("application/json", h("85"), id="json-0x05"),
    pytest.param("application/cbor", h("81"), id="cbor-0x01"),
    pytest.param("message/x.rsocket.composite-metadata.v0", h("ff"), id="composite-0x7f"),
    # 'application/x.foo' is 17 bytes, stored as 16 = 0x10
    pytest.param("application/x.foo", h("10") + b"application/x.foo", id="custom"),
    # parameters make it a custom string: 'text/plain; charset=utf-8' is 25 bytes -> 0x18
    pytest.param(
        "text/plain; charset=utf-8", h("18") + b"text/plain; charset=utf-8", id="with-params"
    ),
]


@pytest.mark.parametrize(("mime", "wire"), MIME_GOLDEN)
def test_mime_type_golden(mime: str, wire: bytes) -> None:
    assert encode_mime_type(mime) == wire
    assert decode_mime_type(wire) == mime


def test_accept_mime_types_golden() -> None:
    # application/json 0x85, text/plain 0x80|0x21 = 0xA1, 'x/y' (3 bytes -> 0x02)
    wire = h("85", "a1", "02") + b"x/y"
    assert encode_accept_mime_types(["application/json", "text/plain", "x/y"]) == wire
    assert decode_accept_mime_types(wire) == ["application/json", "text/plain", "x/y"]
    assert decode_accept_mime_types(b"") == []


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"", "no bytes left"),
        (h("d0"), "unknown well-known MIME type id 0x50"),
        (h("05") + b"abc", "announces 6 bytes but only 3 remain"),
        (h("01", "ff41"), "not US-ASCII"),
        (h("85", "85"), "1 bytes after the MIME type"),
    ],
)
def test_decode_mime_type_rejects(wire: bytes, message: str) -> None:
    with pytest.raises(MetadataDecodeError, match=message):
        decode_mime_type(wire)


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (h("85", "d0"), "unknown well-known MIME type id 0x50"),
        (h("85", "05") + b"ab", "truncated"),
    ],
)
def test_decode_accept_rejects(wire: bytes, message: str) -> None:
    with pytest.raises(MetadataDecodeError, match=message):
        decode_accept_mime_types(wire)


@pytest.mark.parametrize(
    ("call", "exc", "message"),
    [
        (lambda: encode_mime_type(""), ValueError, "must not be empty"),
        (lambda: encode_mime_type("x/" + "y" * 127), ValueError, "at most 128"),
        (lambda: encode_mime_type("tëxt/plain"), ValueError, "US-ASCII"),
        (lambda: encode_mime_type(None), TypeError, "must be a str, not NoneType"),
        (lambda: encode_accept_mime_types([]), ValueError, "at least one MIME type"),
        (lambda: encode_accept_mime_types("text/plain"), TypeError, "wrap one MIME type"),
        (lambda: encode_accept_mime_types([5]), TypeError, "must be a str, not int"),
    ],
)
def test_encode_rejects(call, exc: type, message: str) -> None:
    with pytest.raises(exc, match=message):
        call()
