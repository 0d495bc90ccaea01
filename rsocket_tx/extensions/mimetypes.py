"""Well-known MIME types (``Extensions/WellKnownMimeTypes.md``) and the shared MIME header codec.

The table maps the 7-bit identifiers that composite metadata, per-stream data MIME types and
accept-MIME types use in place of a MIME type string.  Every row of the spec's table is here.

The "MIME header" is the one-byte-or-more field those extensions share::

    |M| MIME ID/Len |   MIME Type (only when M is clear) ...

With M set the low 7 bits are a well-known id.  With M clear the low 7 bits are the length of an
ASCII MIME type string *minus one*: a length of zero is impossible, so every implementation
(rsocket-java ``CompositeMetadataCodec``/``MimeTypeMetadataCodec``, rsocket-js, rsocket-py)
writes ``len - 1`` and reads ``stored + 1``, giving 1..128 bytes.  A 25-byte type is written
``0x18``.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import MappingProxyType

__all__ = [
    "MetadataDecodeError",
    "WELL_KNOWN_MIME_TYPES",
    "mime_type_id",
    "mime_type_name",
    "COMPOSITE_METADATA",
    "ROUTING",
    "AUTHENTICATION",
    "MIME_TYPE",
    "ACCEPT_MIME_TYPES",
    "TRACING_ZIPKIN",
    "APPLICATION_JSON",
    "APPLICATION_CBOR",
    "OCTET_STREAM",
    "TEXT_PLAIN",
]


class MetadataDecodeError(ValueError):
    """Extension metadata bytes that cannot be decoded (truncated, bad length, bad text, unknown
    well-known id where one is required).  Raised by the ``decode_*`` functions; never by
    :func:`~rsocket_tx.extensions.decode_composite` or
    :func:`~rsocket_tx.extensions.parse_metadata`."""


#: id -> MIME type name, every row of ``Extensions/WellKnownMimeTypes.md``.
WELL_KNOWN_MIME_TYPES: Mapping[int, str] = MappingProxyType(
    {
        0x00: "application/avro",
        0x01: "application/cbor",
        0x02: "application/graphql",
        0x03: "application/gzip",
        0x04: "application/javascript",
        0x05: "application/json",
        0x06: "application/octet-stream",
        0x07: "application/pdf",
        0x08: "application/vnd.apache.thrift.binary",
        0x09: "application/vnd.google.protobuf",
        0x0A: "application/xml",
        0x0B: "application/zip",
        0x0C: "audio/aac",
        0x0D: "audio/mp3",
        0x0E: "audio/mp4",
        0x0F: "audio/mpeg3",
        0x10: "audio/mpeg",
        0x11: "audio/ogg",
        0x12: "audio/opus",
        0x13: "audio/vorbis",
        0x14: "image/bmp",
        0x15: "image/gif",
        0x16: "image/heic-sequence",
        0x17: "image/heic",
        0x18: "image/heif-sequence",
        0x19: "image/heif",
        0x1A: "image/jpeg",
        0x1B: "image/png",
        0x1C: "image/tiff",
        0x1D: "multipart/mixed",
        0x1E: "text/css",
        0x1F: "text/csv",
        0x20: "text/html",
        0x21: "text/plain",
        0x22: "text/xml",
        0x23: "video/H264",
        0x24: "video/H265",
        0x25: "video/VP8",
        0x26: "application/x-hessian",
        0x27: "application/x-java-object",
        0x28: "application/cloudevents+json",
        0x29: "application/x-capnp",
        0x2A: "application/x-flatbuffers",
        0x7A: "message/x.rsocket.mime-type.v0",
        0x7B: "message/x.rsocket.accept-mime-types.v0",
        0x7C: "message/x.rsocket.authentication.v0",
        0x7D: "message/x.rsocket.tracing-zipkin.v0",
        0x7E: "message/x.rsocket.routing.v0",
        0x7F: "message/x.rsocket.composite-metadata.v0",
    }
)

#: well-known MIME type name -> id (0..127), the compression table of ``|M| ID/Len`` headers
MIME_ID_BY_NAME: dict[str, int] = {name: id_ for id_, name in WELL_KNOWN_MIME_TYPES.items()}
#: well-known MIME type id -> name (ids the spec reserves without a name are absent)
MIME_NAME_BY_ID: dict[int, str] = dict(WELL_KNOWN_MIME_TYPES)

COMPOSITE_METADATA = "message/x.rsocket.composite-metadata.v0"
ROUTING = "message/x.rsocket.routing.v0"
AUTHENTICATION = "message/x.rsocket.authentication.v0"
MIME_TYPE = "message/x.rsocket.mime-type.v0"
ACCEPT_MIME_TYPES = "message/x.rsocket.accept-mime-types.v0"
TRACING_ZIPKIN = "message/x.rsocket.tracing-zipkin.v0"
APPLICATION_JSON = "application/json"
APPLICATION_CBOR = "application/cbor"
OCTET_STREAM = "application/octet-stream"
TEXT_PLAIN = "text/plain"

#: Longest custom MIME type (or custom auth type) string, in bytes: 7 bits store ``len - 1``.
MAX_CUSTOM_TYPE_LENGTH = 128


def mime_type_id(name: str) -> int | None:
    """Return the well-known id (0..127) of the MIME type ``name``, or ``None``.

    The match is exact (as in rsocket-java's ``WellKnownMimeType.fromString``): ``video/H264``
    is well known, ``video/h264`` and ``application/json; charset=utf-8`` are not.

    :param name: a MIME type string.
    :returns: the identifier from ``Extensions/WellKnownMimeTypes.md`` or ``None``.
    """
    return MIME_ID_BY_NAME.get(name)


def mime_type_name(id: int) -> str | None:
    """Return the MIME type name of the well-known id ``id`` (0..127), or ``None`` when the spec
    reserves ``id`` without naming a type yet.

    :param id: a well-known MIME type identifier.
    """
    return MIME_NAME_BY_ID.get(id)


def encode_type_header(name: str, what: str, well_known: Mapping[str, int]) -> bytes:
    """Encode the ``|M| ID/Len | type...`` header shared by the MIME and auth extensions.

    A name in ``well_known`` is written as ``0x80 | id``; any other name as one byte
    ``len - 1`` followed by the ASCII bytes (1..128 bytes).

    :param name: the type string.
    :param what: what the name is, for error messages (``"MIME type"``, ``"auth type"``).
    :param well_known: name -> id table to compress with.
    :raises TypeError: ``name`` is not a ``str``.
    :raises ValueError: ``name`` is empty, not US-ASCII, or longer than 128 bytes.
    """
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a str, not {type(name).__name__}")
    id_ = well_known.get(name)
    if id_ is not None:
        return WELL_KNOWN_HEADERS[id_]
    return _custom_header(name, what)


#: the one-byte header ``0x80 | id`` of each well-known id 0..127 (MIME and auth types)
WELL_KNOWN_HEADERS = tuple(bytes((0x80 | i,)) for i in range(128))


@lru_cache(maxsize=512)
def _custom_header(name: str, what: str) -> bytes:
    if not name.isascii():
        raise ValueError(f"{what} {name!r} must be US-ASCII characters only")
    size = len(name)
    if size == 0:
        raise ValueError(f"{what} must not be empty (1 to {MAX_CUSTOM_TYPE_LENGTH} bytes)")
    if size > MAX_CUSTOM_TYPE_LENGTH:
        raise ValueError(
            f"{what} {name[:40]!r}... is {size} bytes; a custom {what} is at most "
            f"{MAX_CUSTOM_TYPE_LENGTH} bytes"
        )
    # The 7-bit field stores length - 1 (a zero length is impossible): 25 bytes -> 0x18.
    return bytes((size - 1,)) + name.encode("ascii")


def decode_type_header(data: bytes, offset: int, what: str) -> tuple[int | None, str | None, int]:
    """Read one ``|M| ID/Len | type...`` header at ``data[offset:]``.

    :returns: ``(id, None, next_offset)`` for a well-known id (the caller resolves it) or
        ``(None, name, next_offset)`` for an ASCII string.
    :raises MetadataDecodeError: nothing to read, the string runs past the end of ``data``, or it
        is not US-ASCII.
    """
    size = len(data)
    if offset >= size:
        raise MetadataDecodeError(f"{what} header missing: no bytes left")
    first = data[offset]
    if first & 0x80:
        return first & 0x7F, None, offset + 1
    length = first + 1  # stored as length - 1
    end = offset + 1 + length
    if end > size:
        raise MetadataDecodeError(
            f"{what} is truncated: its length byte 0x{first:02x} announces {length} bytes but "
            f"only {size - offset - 1} remain"
        )
    raw = data[offset + 1 : end]
    if not raw.isascii():
        raise MetadataDecodeError(f"{what} {bytes(raw)!r} is not US-ASCII")
    return None, raw.decode("ascii"), end


def as_bytes(data: object) -> bytes:
    """Return ``data`` (``bytes``, ``bytearray`` or ``memoryview``) as ``bytes``.

    :raises TypeError: anything else (a ``str``, ``None``, an ``int``...).
    """
    if data.__class__ is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"metadata must be bytes, bytearray or memoryview, not {type(data).__name__}")
