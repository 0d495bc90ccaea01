"""Per-stream data MIME type and accept-MIME-types codecs
(``Extensions/PerStreamDataMimeTypesDefinition.md``; MIME types
``message/x.rsocket.mime-type.v0`` and ``message/x.rsocket.accept-mime-types.v0``).

Each MIME type is ``|M| MIME ID/Len | MIME type ...``: a well-known id with M set, else
``len - 1`` and 1..128 ASCII bytes (as rsocket-java's ``MimeTypeMetadataCodec`` writes and reads
it).  The data MIME type metadata holds exactly one; the accept metadata holds one or more.
"""

from __future__ import annotations

from collections.abc import Iterable

from .mimetypes import (
    MIME_ID_BY_NAME,
    MIME_NAME_BY_ID,
    MetadataDecodeError,
    as_bytes,
    decode_type_header,
    encode_type_header,
)

__all__ = [
    "encode_mime_type",
    "decode_mime_type",
    "encode_accept_mime_types",
    "decode_accept_mime_types",
]


def encode_mime_type(mime: str) -> bytes:
    """Encode the per-stream data MIME type metadata.

    :param mime: the MIME type (well-known names are written as their id).
    :raises TypeError: ``mime`` is not a ``str``.
    :raises ValueError: a custom MIME type that is empty, not US-ASCII or longer than 128 bytes.
    """
    return encode_type_header(mime, "MIME type", MIME_ID_BY_NAME)


def _read_one(data: bytes, offset: int) -> tuple[str, int]:
    id_, name, offset = decode_type_header(data, offset, "MIME type")
    if id_ is not None:
        name = MIME_NAME_BY_ID.get(id_)
        if name is None:
            raise MetadataDecodeError(f"unknown well-known MIME type id 0x{id_:02x}")
    else:
        assert name is not None  # decode_type_header gives a name when it gives no id
    return name, offset


def decode_mime_type(data: bytes) -> str:
    """Decode the per-stream data MIME type metadata.

    :param data: the metadata (``bytes``, ``bytearray`` or ``memoryview``).
    :returns: the MIME type name.
    :raises MetadataDecodeError: empty metadata, a truncated or non-ASCII MIME type, an unknown
        well-known id, or bytes after the single MIME type.
    :raises TypeError: ``data`` is not bytes-like.
    """
    data = as_bytes(data)
    name, offset = _read_one(data, 0)
    if offset != len(data):
        raise MetadataDecodeError(
            f"data MIME type metadata holds {len(data) - offset} bytes after the MIME type"
        )
    return name


def encode_accept_mime_types(mimes: Iterable[str]) -> bytes:
    """Encode the accept-MIME-types metadata.

    :param mimes: one or more MIME types, in order of preference.
    :raises TypeError: ``mimes`` is a single ``str``, or an item is not a ``str``.
    :raises ValueError: no MIME types; a custom MIME type that is empty, not US-ASCII or longer
        than 128 bytes.
    """
    if isinstance(mimes, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            f"mimes must be an iterable of str, not a single {type(mimes).__name__}; "
            "wrap one MIME type in a list"
        )
    out = b"".join([encode_type_header(mime, "MIME type", MIME_ID_BY_NAME) for mime in mimes])
    if not out:
        raise ValueError("accept-MIME-types metadata needs at least one MIME type")
    return out


def decode_accept_mime_types(data: bytes) -> list[str]:
    """Decode the accept-MIME-types metadata.

    :param data: the metadata (``bytes``, ``bytearray`` or ``memoryview``).
    :returns: the MIME types in wire order (``[]`` for empty metadata).
    :raises MetadataDecodeError: a truncated or non-ASCII MIME type or an unknown well-known id.
    :raises TypeError: ``data`` is not bytes-like.
    """
    data = as_bytes(data)
    result: list[str] = []
    size = len(data)
    offset = 0
    while offset < size:
        name, offset = _read_one(data, offset)
        result.append(name)
    return result
