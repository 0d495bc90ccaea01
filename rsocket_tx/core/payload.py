"""The Payload: the unit of application data in RSocket (spec §Data And Metadata)."""

from __future__ import annotations

__all__ = ["Payload"]


class Payload:
    """Application data and metadata carried by a request or a PAYLOAD frame.

    :param data: the data, as bytes (``b""`` for none); a bytearray or memoryview is copied.
    :param metadata: the metadata as bytes (likewise), or ``None`` for *no metadata*. ``None``
        and ``b""`` differ on the wire: ``None`` sends no (M)etadata flag, ``b""`` sends the M
        flag with a metadata length of 0 (spec §Metadata Optional Header).
    :raises TypeError: if ``data`` or ``metadata`` is not bytes-like.
    """

    __slots__ = ("data", "metadata")

    def __init__(self, data: bytes | bytearray | memoryview = b"",
                 metadata: bytes | bytearray | memoryview | None = None) -> None:
        # bytes as they are (the common case: one type test), bytearray and memoryview copied
        self.data: bytes = data if type(data) is bytes else _to_bytes(data, "data")
        self.metadata: bytes | None = (
            metadata if metadata is None or type(metadata) is bytes
            else _to_bytes(metadata, "metadata"))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Payload):
            return NotImplemented
        return self.data == other.data and self.metadata == other.metadata

    def __hash__(self) -> int:
        return hash((self.data, self.metadata))

    def __repr__(self) -> str:
        return f"Payload(data={_short(self.data)}, metadata={_short(self.metadata)})"


def _to_bytes(value: object, name: str) -> bytes:
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"Payload {name} must be bytes, not {type(value).__name__}")


def _short(value: bytes | None) -> str:
    if value is None or len(value) <= 64:
        return repr(value)
    return f"{value[:48]!r}...<{len(value)} bytes>"
