"""Routing metadata codec (``Extensions/Routing.md``, MIME type
``message/x.rsocket.routing.v0``).

Wire format: any number of ``|Tag Length (8 bits, bytes)| Tag (UTF-8) ...|``.
"""

from __future__ import annotations

from collections.abc import Iterable

from .mimetypes import MetadataDecodeError, as_bytes

__all__ = ["encode_routing", "decode_routing", "MAX_TAG_LENGTH"]

#: Longest routing tag, in UTF-8 bytes (8-bit length field).
MAX_TAG_LENGTH = 255


def encode_routing(tags: Iterable[str]) -> bytes:
    """Encode routing tags (``Extensions/Routing.md``).

    :param tags: one or more tags (``str``), in order; the first is the route.
    :returns: the routing metadata bytes.
    :raises TypeError: ``tags`` is a ``str``/``bytes`` (wrap a single tag in a list) or a tag is
        not a ``str``.
    :raises ValueError: no tags; a tag is empty, longer than 255 UTF-8 bytes or not encodable as
        UTF-8 (lone surrogates).
    """
    if isinstance(tags, (str, bytes, bytearray, memoryview)):
        raise TypeError(
            f"tags must be an iterable of str, not a single {type(tags).__name__}; "
            "wrap one tag in a list"
        )
    parts: list[bytes] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise TypeError(f"routing tag must be a str, not {type(tag).__name__}")
        try:
            raw = tag.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"routing tag {tag!r} is not encodable as UTF-8: {exc}") from None
        size = len(raw)
        if size == 0:
            raise ValueError("routing tag must not be empty (1 to 255 UTF-8 bytes)")
        if size > MAX_TAG_LENGTH:
            raise ValueError(
                f"routing tag {tag[:40]!r}... is {size} UTF-8 bytes; the limit is "
                f"{MAX_TAG_LENGTH} bytes"
            )
        parts.append(bytes((size,)))
        parts.append(raw)
    if not parts:
        raise ValueError("routing metadata needs at least one tag")
    return b"".join(parts)


def decode_routing(data: bytes) -> list[str]:
    """Decode routing tags (``Extensions/Routing.md``).

    :param data: the routing metadata (``bytes``, ``bytearray`` or ``memoryview``).
    :returns: the tags in wire order (``[]`` for empty metadata; a zero-length tag decodes as
        ``""``).
    :raises MetadataDecodeError: a tag runs past the end of ``data`` or is not valid UTF-8.
    :raises TypeError: ``data`` is not bytes-like.
    """
    if data.__class__ is not bytes:
        data = as_bytes(data)
    tags: list[str] = []
    size = len(data)
    offset = 0
    while offset < size:
        length = data[offset]
        offset += 1
        end = offset + length
        if end > size:
            raise MetadataDecodeError(
                f"routing tag {len(tags)} is truncated: its length byte says {length} bytes but "
                f"only {size - offset} remain"
            )
        try:
            tags.append(data[offset:end].decode("utf-8"))
        except UnicodeDecodeError:
            raise MetadataDecodeError(
                f"routing tag {len(tags)} is not valid UTF-8: {data[offset:end]!r}"
            ) from None
        offset = end
    return tags

