"""Composite metadata codec (``Extensions/CompositeMetadata.md``).

Each entry on the wire::

    |M| MIME ID/Len |  MIME type (M clear: 1..128 ASCII bytes, length stored as len - 1)
    |        Metadata Length (24 bits, bytes)        |
    |  Metadata Payload ...

:func:`decode_composite` is total: it never raises.  A problem is reported on the entry it
affects (:attr:`CompositeEntry.error`); entries whose framing is intact (an unknown well-known
id, a non-ASCII MIME type) are skipped over so that later entries stay readable, as the spec
intends ("if a consumer of the metadata is unaware of a particular type, it can be safely skipped
and the next one read").  A truncated entry ends the composite: nothing after it can be framed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .mimetypes import AUTHENTICATION as _AUTHENTICATION
from .mimetypes import (
    MIME_ID_BY_NAME,
    MIME_NAME_BY_ID,
    WELL_KNOWN_HEADERS,
    encode_type_header,
)

__all__ = ["CompositeEntry", "encode_composite", "decode_composite", "MAX_ENTRY_LENGTH"]

#: Largest metadata payload of one entry, in bytes (24-bit length field).
MAX_ENTRY_LENGTH = 0xFFFFFF

_BYTES_LIKE = (bytes, bytearray, memoryview)


@dataclass(frozen=True, slots=True)
class CompositeEntry:
    """One entry of composite metadata.

    :param mime_type: the entry's MIME type; well-known ids are resolved to their names.  ``None``
        when the entry used a well-known id the spec does not name yet (see ``mime_id``) or its
        MIME type could not be read.
    :param content: the entry's metadata payload (``bytes``); empty when the entry was truncated.
        ``repr`` hides it for authentication entries.
    :param mime_id: the well-known id (0..127) when the entry was written with one, else ``None``.
    :param error: why the entry could not be read (unknown well-known id, truncated, non-ASCII
        MIME type), else ``None``.  Only :func:`decode_composite` sets it.
    """

    mime_type: str | None
    content: bytes
    mime_id: int | None = None
    error: str | None = None

    def __repr__(self) -> str:
        # Authentication entries carry credentials: keep them out of logs.
        if self.mime_type == _AUTHENTICATION:
            content = f"<{len(self.content)} bytes hidden>"
        else:
            content = repr(self.content)
        return (
            f"CompositeEntry(mime_type={self.mime_type!r}, content={content}, "
            f"mime_id={self.mime_id!r}, error={self.error!r})"
        )


def encode_composite(entries: Iterable[CompositeEntry | tuple[str, bytes]]) -> bytes:
    """Encode composite metadata (``Extensions/CompositeMetadata.md``).

    Well-known MIME type names (exact match, see
    :func:`~rsocket_tx.extensions.mime_type_id`) are written as their 1-byte id; other names as
    a length byte holding ``len - 1`` followed by the ASCII name, as every RSocket implementation
    does.  A :class:`CompositeEntry` with ``mime_type=None`` and a ``mime_id`` is written with that
    raw id (0..127), which lets a proxy forward ids it does not know.

    :param entries: :class:`CompositeEntry` objects or ``(mime_type, content)`` tuples, in wire
        order.  ``content`` is ``bytes``, ``bytearray`` or ``memoryview``.
    :returns: the encoded metadata (``b""`` for no entries).
    :raises TypeError: an entry is neither a ``CompositeEntry`` nor a 2-tuple, a MIME type is not a
        ``str`` or content is not bytes-like.
    :raises ValueError: a custom MIME type is empty, not US-ASCII or longer than 128 bytes; content
        is longer than 16,777,215 bytes; a ``mime_id`` is outside 0..127; an entry carries an
        ``error`` from decoding or has neither ``mime_type`` nor ``mime_id``.
    """
    parts: list[bytes] = []
    append = parts.append
    for index, entry in enumerate(entries):
        try:
            if isinstance(entry, tuple):
                if len(entry) != 2:
                    raise TypeError(
                        f"a tuple entry must be (mime_type, content), got {len(entry)} items"
                    )
                name, content = entry
                header = encode_type_header(name, "MIME type", MIME_ID_BY_NAME)
            elif isinstance(entry, CompositeEntry):
                if entry.error is not None:
                    raise ValueError(
                        f"cannot encode an entry that failed to decode ({entry.error})"
                    )
                content = entry.content
                if entry.mime_type is not None:
                    header = encode_type_header(entry.mime_type, "MIME type", MIME_ID_BY_NAME)
                elif entry.mime_id is not None:
                    mime_id = entry.mime_id
                    if not isinstance(mime_id, int) or not 0 <= mime_id <= 0x7F:
                        raise ValueError(f"mime_id must be an int in 0..127, got {mime_id!r}")
                    header = WELL_KNOWN_HEADERS[mime_id]
                else:
                    raise ValueError("an entry needs a mime_type or a mime_id")
            else:
                raise TypeError(
                    "an entry must be a CompositeEntry or a (mime_type, content) tuple, not "
                    f"{type(entry).__name__}"
                )
            if content.__class__ is not bytes:
                if not isinstance(content, _BYTES_LIKE):
                    raise TypeError(
                        f"content must be bytes, bytearray or memoryview, not "
                        f"{type(content).__name__}"
                    )
                content = bytes(content)
            size = len(content)
            if size > MAX_ENTRY_LENGTH:
                raise ValueError(
                    f"content is {size} bytes; an entry holds at most {MAX_ENTRY_LENGTH} bytes"
                )
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"composite metadata entry {index}: {exc}") from None
        append(header)
        append(size.to_bytes(3, "big"))
        append(content)
    return b"".join(parts)


def decode_composite(data: bytes) -> list[CompositeEntry]:
    """Decode composite metadata (``Extensions/CompositeMetadata.md``).  Never raises.

    :param data: the metadata bytes (``bytes``, ``bytearray`` or ``memoryview``).
    :returns: every entry in wire order.  An entry that could not be read has
        :attr:`CompositeEntry.error` set: an unknown well-known id (``mime_type`` ``None``,
        ``mime_id`` set, ``content`` intact) or a non-ASCII MIME type (``content`` intact) is
        skipped and decoding goes on; a truncated entry (``content`` empty) is the last one.
        Anything other than bytes-like input yields one entry with ``error`` set.
    """
    if data.__class__ is not bytes:
        if isinstance(data, (bytes, bytearray, memoryview)):
            data = bytes(data)
        else:
            return [
                CompositeEntry(
                    None, b"", error=f"composite metadata must be bytes, not {type(data).__name__}"
                )
            ]
    entries: list[CompositeEntry] = []
    append = entries.append
    names = MIME_NAME_BY_ID
    size = len(data)
    offset = 0
    while offset < size:
        start = offset
        first = data[offset]
        error = None
        if first & 0x80:
            mime_id = first & 0x7F
            name = names.get(mime_id)
            if name is None:
                error = f"unknown well-known MIME type id 0x{mime_id:02x} at byte {start}"
            offset += 1
        else:
            mime_id = None
            end = offset + 2 + first  # length byte + (first + 1) name bytes
            if end > size:
                append(
                    CompositeEntry(
                        None,
                        b"",
                        error=f"truncated entry at byte {start}: the MIME type needs {first + 1} "
                        f"bytes but only {size - offset - 1} remain",
                    )
                )
                break
            raw = data[offset + 1 : end]
            if raw.isascii():
                name = raw.decode("ascii")
            else:
                name = None
                error = f"MIME type {raw!r} at byte {start} is not US-ASCII"
            offset = end
        if offset + 3 > size:
            append(
                CompositeEntry(
                    name,
                    b"",
                    mime_id,
                    f"truncated entry at byte {start}: the 3-byte metadata length is missing "
                    f"({size - offset} bytes remain)",
                )
            )
            break
        length = int.from_bytes(data[offset : offset + 3], "big")
        offset += 3
        end = offset + length
        if end > size:
            append(
                CompositeEntry(
                    name,
                    b"",
                    mime_id,
                    f"truncated entry at byte {start}: metadata length is {length} bytes but "
                    f"only {size - offset} remain",
                )
            )
            break
        append(CompositeEntry(name, data[offset:end], mime_id, error))
        offset = end
    return entries
