"""Data codecs by MIME type (``rsocket_tx.codecs``).

Golden vectors: JSON per RFC 8259 written compactly; CBOR per RFC 8949 §3 (major type in the top
3 bits, argument in the low 5); text as UTF-8.
"""

from __future__ import annotations

import pytest

from rsocket_tx import codecs
from rsocket_tx.codecs import (
    BYTES,
    CBOR,
    JSON,
    TEXT,
    BytesCodec,
    Codec,
    DataDecodeError,
    JsonCodec,
    codec_for,
    register_codec,
)

# ---------------------------------------------------------------------------------------------
# Resolution by MIME type
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mime", "codec"),
    [
        ("application/json", JSON),
        ("application/json; charset=utf-8", JSON),
        ("Application/JSON", JSON),
        ("application/cbor", CBOR),
        ("text/plain", TEXT),
        ("text/plain; charset=utf-8", TEXT),
        (" text/plain ;format=flowed", TEXT),
        ("application/octet-stream", BYTES),
        ("application/x-unknown", BYTES),
        ("", BYTES),
        (None, BYTES),
    ],
)
def test_codec_for(mime: str | None, codec: Codec) -> None:
    assert codec_for(mime) is codec


def test_json_suffix_types_use_json() -> None:
    codec = codec_for("application/cloudevents+json")
    assert isinstance(codec, JsonCodec)
    assert codec.mime_type == "application/cloudevents+json"
    assert codec.encode({"a": 1}) == b'{"a":1}'
    assert codec_for("application/vnd.api+json; v=2").decode(b"[1]") == [1]


def test_codec_for_rejects_non_strings() -> None:
    with pytest.raises(TypeError, match="must be a str or None, not bytes"):
        codec_for(b"application/json")  # type: ignore[arg-type]


def test_register_codec_for_a_custom_type(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(codecs, "_REGISTRY", dict(codecs._REGISTRY))
    monkeypatch.setattr(codecs, "_CACHE", {})

    class Upper(Codec):
        __slots__ = ()

        def __init__(self) -> None:
            super().__init__("application/x.upper")

        def encode(self, obj: object) -> bytes:
            return str(obj).upper().encode()

        def decode(self, data: bytes) -> object:
            return data.decode().lower()

    assert codec_for("application/x.upper") is BYTES  # looked up (and cached) before
    upper = Upper()
    register_codec(upper)
    assert codec_for("application/x.upper") is upper
    assert codec_for("APPLICATION/X.UPPER; q=1") is upper
    assert upper.encode("abc") == b"ABC"


def test_register_codec_rejects_non_codecs() -> None:
    with pytest.raises(TypeError, match="encode\\(\\) and decode\\(\\)"):
        register_codec("application/json")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="must not be empty"):
        register_codec(BytesCodec(" "))


# ---------------------------------------------------------------------------------------------
# JSON
# ---------------------------------------------------------------------------------------------


def test_json_golden() -> None:
    # compact separators, non-ASCII written as UTF-8 ('é' = c3 a9), key order kept
    assert JSON.encode({"id": "7", "q": [1, 2.5, None, True], "n": "é"}) == (
        b'{"id":"7","q":[1,2.5,null,true],"n":"\xc3\xa9"}'
    )
    assert JSON.decode(b'{"id":"7","n":"\xc3\xa9"}') == {"id": "7", "n": "é"}
    assert JSON.decode(b" [1, {\"a\" : null}] ") == [1, {"a": None}]
    assert JSON.decode(b"") is None
    assert JSON.decode(memoryview(b"1")) == 1


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"{", "malformed application/json data"),
        (b'{"a":1} x', "malformed application/json data"),
        (b'"\xff"', "not valid UTF-8"),
        (b"\xfe\xff\x00[", "not valid UTF-8"),
        (b"[" * 100_000, "nested too deeply|malformed"),
    ],
)
def test_json_decode_errors(data: bytes, message: str) -> None:
    with pytest.raises(DataDecodeError, match=message):
        JSON.decode(data)


def test_json_encode_errors() -> None:
    with pytest.raises(TypeError, match="cannot encode set as application/json"):
        JSON.encode({1, 2})
    with pytest.raises(ValueError, match="cannot encode float as application/json"):
        JSON.encode(float("nan"))
    with pytest.raises(ValueError, match="not encodable as UTF-8"):
        JSON.encode("\ud800")


# ---------------------------------------------------------------------------------------------
# CBOR
# ---------------------------------------------------------------------------------------------


def test_cbor_golden() -> None:
    # {"a": 1}: map(1) = 0xa1, text(1) = 0x61 'a', unsigned 1 = 0x01
    assert CBOR.encode({"a": 1}) == bytes.fromhex("a1616101")
    assert CBOR.decode(bytes.fromhex("a1616101")) == {"a": 1}
    # [1, "é"]: array(2) = 0x82, 0x01, text(2) = 0x62 c3 a9
    assert CBOR.decode(bytes.fromhex("820162c3a9")) == [1, "é"]
    # bytes h'00ff': major type 2, length 2 = 0x42
    assert CBOR.encode(b"\x00\xff") == bytes.fromhex("4200ff")
    assert CBOR.decode(b"") is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (bytes.fromhex("a161"), "malformed application/cbor data"),  # truncated
        (bytes.fromhex("0101"), "1 bytes after the data item"),  # two items
        (bytes.fromhex("5affffffff"), "malformed application/cbor data"),  # 4 GiB promised
        (bytes.fromhex("81") * 100_000, "malformed application/cbor data"),  # too deep
        (bytes.fromhex("62c328"), "malformed application/cbor data"),  # text not UTF-8
    ],
)
def test_cbor_decode_errors(data: bytes, message: str) -> None:
    with pytest.raises(DataDecodeError, match=message):
        CBOR.decode(data)


def test_cbor_encode_errors() -> None:
    with pytest.raises(TypeError, match="cannot encode object as application/cbor"):
        CBOR.encode(object())


# ---------------------------------------------------------------------------------------------
# text/plain and bytes
# ---------------------------------------------------------------------------------------------


def test_text() -> None:
    assert TEXT.encode("héllo") == b"h\xc3\xa9llo"
    assert TEXT.decode(b"h\xc3\xa9llo") == "héllo"
    assert TEXT.decode(b"") == ""
    with pytest.raises(TypeError, match="text/plain data must be a str, not bytes"):
        TEXT.encode(b"x")
    with pytest.raises(DataDecodeError, match="text/plain data is not valid UTF-8"):
        TEXT.decode(b"\xc3\x28")


def test_bytes() -> None:
    assert BYTES.encode(b"\x00\x01") == b"\x00\x01"
    assert BYTES.encode(bytearray(b"ab")) == b"ab"
    assert BYTES.encode(memoryview(b"cd")) == b"cd"
    assert type(BYTES.encode(bytearray(b"ab"))) is bytes
    assert BYTES.decode(b"\xff") == b"\xff"
    for value in ("text", {"a": 1}, 5, None):
        with pytest.raises(TypeError, match=f"not {type(value).__name__}"):
            BYTES.encode(value)


def test_decode_rejects_non_bytes_input() -> None:
    for codec in (JSON, CBOR, TEXT, BYTES):
        with pytest.raises(TypeError, match="must be bytes"):
            codec.decode("1")  # type: ignore[arg-type]


def test_data_decode_error_is_a_value_error() -> None:
    assert issubclass(DataDecodeError, ValueError)
