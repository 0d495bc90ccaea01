"""Authentication metadata golden vectors (``Extensions/Security/``).

``Authentication.md``: ``|A| Auth ID/Len (7)| [auth type] | payload``; A set: ``0x80 | id``
(``WellKnownAuthTypes.md``: simple 0x00, bearer 0x01); A clear: ``len - 1`` then the ASCII type
(INTEROP.md: custom auth type lengths are written length - 1 like custom MIME types).
``Simple.md``: ``|Username Length (16 bits)| Username | Password|``.  ``Bearer.md``: the token.
"""

from __future__ import annotations

import pytest

from rsocket_tx.extensions import (
    WELL_KNOWN_AUTH_TYPES,
    BearerAuth,
    CustomAuth,
    MetadataDecodeError,
    SimpleAuth,
    decode_auth,
    encode_auth,
)

from .helpers import h

GOLDEN = [
    pytest.param(
        SimpleAuth("user", "pass"),
        # 0x80 | 0x00 = 0x80 | username length 4 on 16 bits: 00 04 | 'user' | 'pass'
        h("80", "0004") + b"user" + b"pass",
        id="simple",
    ),
    pytest.param(
        SimpleAuth("", ""),
        # empty username and password: just the type and a zero length
        h("80", "0000"),
        id="simple-empty",
    ),
    pytest.param(
        SimpleAuth("zoë", "pässwörd"),
        # 'zoë' is 7a 6f c3 ab (4 bytes); the password is the rest, UTF-8
        h("80", "0004", "7a6fc3ab") + "pässwörd".encode(),
        id="simple-utf8",
    ),
    pytest.param(
        BearerAuth("tok"),
        # 0x80 | 0x01 = 0x81 | 'tok'
        h("81") + b"tok",
        id="bearer",
    ),
    pytest.param(
        CustomAuth("x-api-key", b"\x01\x02"),
        # A clear, 9-byte type stored as 8 = 0x08 | 'x-api-key' | payload
        h("08") + b"x-api-key" + h("0102"),
        id="custom-type-length-minus-one",
    ),
    pytest.param(
        CustomAuth("k", b""),
        # 1-byte type stored as 0x00 (no clash with 'simple': that has A set)
        h("00") + b"k",
        id="custom-one-byte",
    ),
    pytest.param(
        CustomAuth(0x05, b"abc"),
        # an id the spec reserves but does not name: 0x80 | 0x05 = 0x85
        h("85") + b"abc",
        id="unknown-well-known-id",
    ),
]


@pytest.mark.parametrize(("credentials", "wire"), GOLDEN)
def test_encode_golden(credentials: object, wire: bytes) -> None:
    assert encode_auth(credentials) == wire  # type: ignore[arg-type]


@pytest.mark.parametrize(("credentials", "wire"), GOLDEN)
def test_decode_golden(credentials: object, wire: bytes) -> None:
    assert decode_auth(wire) == credentials


def test_well_known_auth_types() -> None:
    assert dict(WELL_KNOWN_AUTH_TYPES) == {0x00: "simple", 0x01: "bearer"}


def test_custom_type_of_128_bytes_is_stored_as_0x7f() -> None:
    name = "t" * 128
    wire = h("7f") + name.encode() + b"p"
    assert encode_auth(CustomAuth(name, b"p")) == wire
    assert decode_auth(wire) == CustomAuth(name, b"p")


def test_string_forms_of_well_known_types() -> None:
    # 'simple' / 'bearer' as strings are the same auth types (WellKnownAuthTypes.md)
    assert decode_auth(h("05") + b"simple" + h("0001") + b"ab") == SimpleAuth("a", "b")
    assert decode_auth(h("05") + b"bearer" + b"t") == BearerAuth("t")
    # and are compressed to their ids when encoding, as rsocket-java's
    # encodeMetadataWithCompression does
    assert encode_auth(CustomAuth("bearer", b"t")) == h("81") + b"t"


def test_username_length_is_16_bits() -> None:
    name = "u" * 65535
    wire = encode_auth(SimpleAuth(name, "p"))
    assert wire[:3] == h("80", "ffff")
    assert decode_auth(wire) == SimpleAuth(name, "p")
    with pytest.raises(ValueError, match="65536 UTF-8 bytes; the limit is 65535"):
        encode_auth(SimpleAuth("u" * 65536, "p"))


@pytest.mark.parametrize(
    ("credentials", "exc", "message"),
    [
        (SimpleAuth(b"user", "p"), TypeError, "SimpleAuth.username must be a str, not bytes"),  # type: ignore[arg-type]
        (SimpleAuth("u", None), TypeError, "SimpleAuth.password must be a str"),  # type: ignore[arg-type]
        (BearerAuth("\udc80"), ValueError, "BearerAuth.token is not encodable as UTF-8"),
        (CustomAuth("", b""), ValueError, "must not be empty"),
        (CustomAuth("t" * 129, b""), ValueError, "129 bytes.*at most 128"),
        (CustomAuth("clé", b""), ValueError, "US-ASCII"),
        (CustomAuth(128, b""), ValueError, "0..127"),
        (CustomAuth("x", "payload"), TypeError, "CustomAuth.payload must be bytes"),  # type: ignore[arg-type]
        (("user", "pass"), TypeError, "SimpleAuth, BearerAuth or CustomAuth, not tuple"),
    ],
)
def test_encode_rejects(credentials: object, exc: type, message: str) -> None:
    with pytest.raises(exc, match=message):
        encode_auth(credentials)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("wire", "message"),
    [
        (b"", "empty"),
        (h("80"), "needs at least the 2-byte username length"),
        (h("80", "00"), "needs at least the 2-byte username length"),
        (h("80", "0005") + b"abc", "username length is 5 bytes but only 3 remain"),
        (h("80", "0001", "ff"), "not valid UTF-8"),
        (h("81", "c328"), "bearer token is not valid UTF-8"),
        (h("08") + b"x-api", "announces 9 bytes but only 5 remain"),
        (h("01", "ff41"), "not US-ASCII"),
    ],
)
def test_decode_rejects(wire: bytes, message: str) -> None:
    with pytest.raises(MetadataDecodeError, match=message):
        decode_auth(wire)


def test_repr_hides_secrets() -> None:
    assert "hunter2" not in repr(SimpleAuth("alice", "hunter2"))
    assert "alice" in repr(SimpleAuth("alice", "hunter2"))
    assert "s3cret" not in repr(BearerAuth("s3cret"))
    assert "s3cret" not in repr(CustomAuth("x", b"s3cret"))
    assert "6 bytes" in repr(CustomAuth("x", b"s3cret"))


def test_credentials_are_immutable_and_comparable() -> None:
    creds = SimpleAuth("a", "b")
    with pytest.raises(AttributeError):
        creds.password = "c"  # type: ignore[misc]
    assert creds == SimpleAuth("a", "b") and creds != SimpleAuth("a", "c")
    assert hash(BearerAuth("t")) == hash(BearerAuth("t"))
