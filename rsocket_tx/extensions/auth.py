"""Authentication metadata codec (``Extensions/Security/Authentication.md``, MIME type
``message/x.rsocket.authentication.v0``), with the ``simple`` (``Security/Simple.md``) and
``bearer`` (``Security/Bearer.md``) types and any custom type.

Wire format::

    |A| Auth ID/Len |  Auth type (A clear: 1..128 ASCII bytes, length stored as len - 1)
    |  Authentication payload ...

``simple`` payload: ``|Username Length (16 bits, bytes)| Username (UTF-8) | Password (UTF-8)|``.
``bearer`` payload: the UTF-8 token.

Unlike rsocket-py 0.4.20 (whose decoder raises ``KeyError`` on any type other than simple and
bearer), custom auth types decode to :class:`CustomAuth`; so do well-known ids the spec does not
name yet (``auth_type`` is then the ``int`` id).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from .mimetypes import (
    WELL_KNOWN_HEADERS,
    MetadataDecodeError,
    as_bytes,
    decode_type_header,
    encode_type_header,
)

__all__ = [
    "WELL_KNOWN_AUTH_TYPES",
    "SimpleAuth",
    "BearerAuth",
    "CustomAuth",
    "Credentials",
    "encode_auth",
    "decode_auth",
    "MAX_USERNAME_LENGTH",
]

#: id -> name, ``Extensions/Security/WellKnownAuthTypes.md``.
WELL_KNOWN_AUTH_TYPES: Mapping[int, str] = MappingProxyType({0x00: "simple", 0x01: "bearer"})
_AUTH_ID_BY_NAME: dict[str, int] = {name: id_ for id_, name in WELL_KNOWN_AUTH_TYPES.items()}

_SIMPLE = 0x00
_BEARER = 0x01

#: Longest ``simple`` username, in UTF-8 bytes (16-bit length field).
MAX_USERNAME_LENGTH = 0xFFFF


@dataclass(frozen=True, slots=True)
class SimpleAuth:
    """``simple`` credentials (``Extensions/Security/Simple.md``).

    :param username: the user name (``str``, at most 65,535 UTF-8 bytes).
    :param password: the password (``str``); hidden from ``repr``.
    """

    username: str
    password: str

    def __repr__(self) -> str:
        return f"SimpleAuth(username={self.username!r}, password=<hidden>)"


@dataclass(frozen=True, slots=True)
class BearerAuth:
    """``bearer`` credentials (``Extensions/Security/Bearer.md``).

    :param token: the bearer token (``str``); hidden from ``repr``.
    """

    token: str

    def __repr__(self) -> str:
        return "BearerAuth(token=<hidden>)"


@dataclass(frozen=True, slots=True)
class CustomAuth:
    """Credentials of any other authentication type (``Extensions/Security/Authentication.md``).

    :param auth_type: the type string (US-ASCII, 1..128 bytes), or the ``int`` well-known id
        (0..127) of a type the spec does not name yet.
    :param payload: the raw authentication payload (``bytes``); only its length is shown by
        ``repr``.
    """

    auth_type: str | int
    payload: bytes

    def __repr__(self) -> str:
        return f"CustomAuth(auth_type={self.auth_type!r}, payload=<{len(self.payload)} bytes>)"


#: Any credentials :func:`encode_auth` accepts and :func:`decode_auth` returns.
Credentials = SimpleAuth | BearerAuth | CustomAuth


def _utf8(value: object, what: str) -> bytes:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, not {type(value).__name__}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"{what} is not encodable as UTF-8: {exc}") from None


def encode_auth(credentials: Credentials) -> bytes:
    """Encode authentication metadata (``Extensions/Security/Authentication.md``).

    ``simple`` and ``bearer`` (also as ``CustomAuth("simple", ...)``) are written with their
    well-known ids; other types as ``len - 1`` plus the ASCII name, as rsocket-java's
    ``AuthMetadataCodec`` and rsocket-js do.

    :param credentials: a :class:`SimpleAuth`, :class:`BearerAuth` or :class:`CustomAuth`.
    :returns: the authentication metadata bytes.
    :raises TypeError: ``credentials`` is none of those, or one of its fields has the wrong type.
    :raises ValueError: a username longer than 65,535 UTF-8 bytes; a custom type that is empty,
        not US-ASCII or longer than 128 bytes; an ``int`` type outside 0..127; text that is not
        encodable as UTF-8.
    """
    if isinstance(credentials, SimpleAuth):
        username = _utf8(credentials.username, "SimpleAuth.username")
        password = _utf8(credentials.password, "SimpleAuth.password")
        size = len(username)
        if size > MAX_USERNAME_LENGTH:
            raise ValueError(
                f"SimpleAuth.username is {size} UTF-8 bytes; the limit is "
                f"{MAX_USERNAME_LENGTH} bytes"
            )
        return b"".join((WELL_KNOWN_HEADERS[_SIMPLE], size.to_bytes(2, "big"), username, password))
    if isinstance(credentials, BearerAuth):
        return WELL_KNOWN_HEADERS[_BEARER] + _utf8(credentials.token, "BearerAuth.token")
    if isinstance(credentials, CustomAuth):
        payload = credentials.payload
        if payload.__class__ is not bytes:
            if not isinstance(payload, (bytearray, memoryview)):
                raise TypeError(
                    "CustomAuth.payload must be bytes, bytearray or memoryview, not "
                    f"{type(payload).__name__}"
                )
            payload = bytes(payload)
        auth_type = credentials.auth_type
        if isinstance(auth_type, int) and not isinstance(auth_type, bool):
            if not 0 <= auth_type <= 0x7F:
                raise ValueError(
                    f"CustomAuth.auth_type id must be in 0..127, got {auth_type}"
                )
            header = WELL_KNOWN_HEADERS[auth_type]
        elif isinstance(auth_type, str):
            header = encode_type_header(auth_type, "auth type", _AUTH_ID_BY_NAME)
        else:
            raise TypeError(f"auth type must be a str, not {type(auth_type).__name__}")
        return header + payload
    raise TypeError(
        "credentials must be SimpleAuth, BearerAuth or CustomAuth, not "
        f"{type(credentials).__name__}"
    )


def decode_auth(data: bytes) -> Credentials:
    """Decode authentication metadata (``Extensions/Security/Authentication.md``).

    The ``simple`` and ``bearer`` types, by id or by name, decode to :class:`SimpleAuth` and
    :class:`BearerAuth`; any other type string to ``CustomAuth(name, payload)``; an unnamed
    well-known id to ``CustomAuth(id, payload)``.

    :param data: the authentication metadata (``bytes``, ``bytearray`` or ``memoryview``).
    :raises MetadataDecodeError: empty metadata; a type string running past the end or not
        US-ASCII; a ``simple`` payload shorter than its 2-byte username length or than the
        username it announces; ``simple``/``bearer`` text that is not valid UTF-8.
    :raises TypeError: ``data`` is not bytes-like.
    """
    data = as_bytes(data)
    if not data:
        raise MetadataDecodeError("authentication metadata is empty (no auth type)")
    id_, name, offset = decode_type_header(data, 0, "auth type")
    if id_ is None:
        assert name is not None  # decode_type_header gives a name when it gives no id
        id_ = _AUTH_ID_BY_NAME.get(name)
        if id_ is None:
            return CustomAuth(name, data[offset:])
    if id_ == _SIMPLE:
        size = len(data)
        if size < offset + 2:
            raise MetadataDecodeError(
                f"simple authentication payload is {size - offset} bytes; it needs at least the "
                "2-byte username length"
            )
        length = int.from_bytes(data[offset : offset + 2], "big")
        start = offset + 2
        end = start + length
        if end > size:
            raise MetadataDecodeError(
                f"simple authentication username length is {length} bytes but only "
                f"{size - start} remain"
            )
        try:
            username = data[start:end].decode("utf-8")
            password = data[end:].decode("utf-8")
        except UnicodeDecodeError:
            raise MetadataDecodeError(
                "simple authentication username or password is not valid UTF-8"
            ) from None
        return SimpleAuth(username, password)
    if id_ == _BEARER:
        try:
            return BearerAuth(data[offset:].decode("utf-8"))
        except UnicodeDecodeError:
            raise MetadataDecodeError("bearer token is not valid UTF-8") from None
    return CustomAuth(id_, data[offset:])
