"""Data codecs by MIME type: turn application objects into payload data and back.

* ``application/json`` and any ``+json`` structured-suffix type (RFC 6839): compact JSON, UTF-8;
* ``application/cbor``: CBOR (RFC 8949) via ``cbor2``;
* ``text/plain``: ``str`` as UTF-8;
* anything else, and no MIME type at all: :data:`BYTES`, bytes in, bytes out.

MIME types resolve by their base type: parameters and case are ignored
(``text/plain; charset=utf-8`` is ``text/plain``; only UTF-8 is supported).  The data MIME type
comes from SETUP (``shared/specs/rsocket-1.0/Protocol.md`` §SETUP, "MIME Type for Data") or per
stream (``Extensions/PerStreamDataMimeTypesDefinition.md``).

This module is sans-IO and never imports Twisted.
"""

from __future__ import annotations

import io
import json

try:
    import cbor2
except ImportError:  # pragma: no cover - cbor2 is an install requirement
    _HAVE_CBOR2 = False
else:
    _HAVE_CBOR2 = True

__all__ = [
    "Codec",
    "DataDecodeError",
    "JsonCodec",
    "CborCodec",
    "TextCodec",
    "BytesCodec",
    "JSON",
    "CBOR",
    "TEXT",
    "BYTES",
    "codec_for",
    "register_codec",
]


class DataDecodeError(ValueError):
    """Payload data that is malformed for its MIME type (raised by :meth:`Codec.decode`)."""


class Codec:
    """Base class of data codecs.  Subclass it, set ``mime_type`` through ``__init__`` and
    implement :meth:`encode` and :meth:`decode`, then :func:`register_codec` an instance.

    :param mime_type: the MIME type this codec reads and writes.
    """

    __slots__ = ("mime_type",)

    def __init__(self, mime_type: str) -> None:
        self.mime_type = mime_type

    def encode(self, obj: object) -> bytes:
        """Return ``obj`` as payload data.

        :raises TypeError: ``obj`` has a type this codec cannot write.
        :raises ValueError: ``obj`` has a value this codec cannot write.
        """
        raise NotImplementedError

    def decode(self, data: bytes) -> object:
        """Return the object that payload ``data`` holds.

        :raises DataDecodeError: ``data`` is malformed for this MIME type.
        """
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.mime_type}>"


def _as_bytes(data: object, what: str = "payload data", hint: str = "") -> bytes:
    if data.__class__ is bytes:
        return data
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(f"{what} must be bytes, bytearray or memoryview, not "
                    f"{type(data).__name__}{hint}")


class JsonCodec(Codec):
    """JSON (RFC 8259): compact separators, UTF-8, non-ASCII written as is, NaN and infinities
    refused.  Empty data decodes as ``None`` (no value)."""

    __slots__ = ()

    def __init__(self, mime_type: str = "application/json") -> None:
        super().__init__(mime_type)

    def encode(self, obj: object) -> bytes:
        """:raises TypeError: ``obj`` (or something inside it) is not JSON serializable.
        :raises ValueError: NaN or infinity, or a circular reference."""
        try:
            text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"cannot encode {type(obj).__name__} as {self.mime_type}: {exc}") \
                from None
        except RecursionError:
            raise ValueError(f"cannot encode {type(obj).__name__} as {self.mime_type}: nested "
                             "too deeply") from None
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"cannot encode {type(obj).__name__} as {self.mime_type}: a string "
                             f"is not encodable as UTF-8 ({exc})") from None

    def decode(self, data: bytes) -> object:
        """:raises DataDecodeError: not UTF-8, not JSON, or nested too deeply."""
        data = _as_bytes(data)
        if not data:
            return None
        try:
            return json.loads(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise DataDecodeError(f"{self.mime_type} data is not valid UTF-8: {exc}") from None
        except ValueError as exc:
            raise DataDecodeError(f"malformed {self.mime_type} data: {exc}") from None
        except RecursionError:
            raise DataDecodeError(f"{self.mime_type} data is nested too deeply") from None


class CborCodec(Codec):
    """CBOR (RFC 8949) via ``cbor2``: exactly one data item.  Empty data decodes as ``None``."""

    __slots__ = ()

    def __init__(self, mime_type: str = "application/cbor") -> None:
        super().__init__(mime_type)

    @staticmethod
    def _require_cbor2() -> None:
        if not _HAVE_CBOR2:  # pragma: no cover - cbor2 is an install requirement
            raise RuntimeError("application/cbor needs the cbor2 package: pip install cbor2")

    def encode(self, obj: object) -> bytes:
        """:raises TypeError: ``obj`` (or something inside it) has no CBOR encoding.
        :raises ValueError: a value CBOR cannot represent (e.g. an integer over 64 bits without
            the bignum tag, a circular reference)."""
        self._require_cbor2()
        try:
            return cbor2.dumps(obj)
        except cbor2.CBOREncodeError as exc:
            kind = ValueError if "Value" in type(exc).__name__ else TypeError
            raise kind(f"cannot encode {type(obj).__name__} as {self.mime_type}: {exc}") from None
        except RecursionError:
            raise ValueError(f"cannot encode {type(obj).__name__} as {self.mime_type}: nested "
                             "too deeply") from None

    def decode(self, data: bytes) -> object:
        """Decode one CBOR data item; empty data is None.

        :raises DataDecodeError: not one well-formed CBOR data item (truncated, invalid,
            nested too deeply, or followed by more bytes).
        """
        data = _as_bytes(data)
        if not data:
            return None
        self._require_cbor2()
        stream = io.BytesIO(data)
        try:
            value = cbor2.CBORDecoder(stream).decode()
        except Exception as exc:  # cbor2 raises CBORDecodeError, and more on hostile input
            raise DataDecodeError(f"malformed {self.mime_type} data: {exc}") from None
        if stream.tell() != len(data):
            raise DataDecodeError(
                f"malformed {self.mime_type} data: {len(data) - stream.tell()} bytes after the "
                "data item"
            )
        return value


class TextCodec(Codec):
    """Text as ``str``, UTF-8."""

    __slots__ = ()

    def __init__(self, mime_type: str = "text/plain") -> None:
        super().__init__(mime_type)

    def encode(self, obj: object) -> bytes:
        """:raises TypeError: ``obj`` is not a ``str``.
        :raises ValueError: ``obj`` holds lone surrogates (not encodable as UTF-8)."""
        if not isinstance(obj, str):
            raise TypeError(f"{self.mime_type} data must be a str, not {type(obj).__name__}")
        try:
            return obj.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(f"{self.mime_type} data is not encodable as UTF-8: {exc}") from None

    def decode(self, data: bytes) -> str:
        """:raises DataDecodeError: ``data`` is not valid UTF-8."""
        try:
            return _as_bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataDecodeError(f"{self.mime_type} data is not valid UTF-8: {exc}") from None


class BytesCodec(Codec):
    """Raw bytes: any MIME type without a codec of its own."""

    __slots__ = ()

    def __init__(self, mime_type: str = "application/octet-stream") -> None:
        super().__init__(mime_type)

    def encode(self, obj: object) -> bytes:
        """:raises TypeError: ``obj`` is not ``bytes``, ``bytearray`` or ``memoryview``."""
        return _as_bytes(obj, "data without a codec for its MIME type",
                         " (register a codec with rsocket_tx.codecs.register_codec)")

    def decode(self, data: bytes) -> bytes:
        """Return ``data`` as ``bytes``; never raises :class:`DataDecodeError`."""
        return _as_bytes(data)


#: The built-in codecs.
JSON = JsonCodec()
CBOR = CborCodec()
TEXT = TextCodec()
BYTES = BytesCodec()

# Registered codecs by normalized base type, and a bounded cache of every spelling looked up.
_REGISTRY: dict[str, Codec] = {}
_CACHE: dict[str | None, Codec] = {}
_CACHE_LIMIT = 256  # MIME types come from peers: never let them grow memory without bound


def _base(mime_type: str) -> str:
    return mime_type.partition(";")[0].strip().lower()


def _resolve(mime_type: str) -> Codec:
    base = _base(mime_type)
    codec = _REGISTRY.get(base)
    if codec is not None:
        return codec
    if base.endswith("+json"):
        return JsonCodec(base)
    return BYTES


def codec_for(mime_type: str | None) -> Codec:
    """Return the codec for a data MIME type.

    :param mime_type: a MIME type, parameters allowed (``text/plain; charset=utf-8``), or
        ``None`` (no data MIME type known).
    :returns: the registered codec of the base type; a JSON codec for any ``+json`` type;
        otherwise :data:`BYTES` (the same object every time, also for ``None``).
    :raises TypeError: ``mime_type`` is neither a ``str`` nor ``None``.
    """
    if mime_type.__class__ is str:
        codec = _CACHE.get(mime_type)
        if codec is not None:
            return codec
    elif mime_type is None:
        return BYTES
    elif not isinstance(mime_type, str):
        raise TypeError(f"mime_type must be a str or None, not {type(mime_type).__name__}")
    codec = _resolve(mime_type)
    if len(_CACHE) < _CACHE_LIMIT:
        _CACHE[mime_type] = codec
    return codec


def register_codec(codec: Codec) -> None:
    """Use ``codec`` for its ``mime_type`` (by base type, case-insensitively), replacing any
    codec registered for it before, built-in ones included.

    :param codec: a :class:`Codec` (or an object with ``mime_type``, ``encode`` and ``decode``).
    :raises TypeError: ``codec`` lacks those, or its ``mime_type`` is not a ``str``.
    :raises ValueError: its ``mime_type`` is empty.
    """
    mime_type = getattr(codec, "mime_type", None)
    if not (callable(getattr(codec, "encode", None)) and callable(getattr(codec, "decode", None))):
        raise TypeError(
            f"codec must have encode() and decode() methods, got {type(codec).__name__}"
        )
    if not isinstance(mime_type, str):
        raise TypeError(f"codec.mime_type must be a str, not {type(mime_type).__name__}")
    base = _base(mime_type)
    if not base:
        raise ValueError("codec.mime_type must not be empty")
    _REGISTRY[base] = codec
    _CACHE.clear()


for _codec in (JSON, CBOR, TEXT):
    register_codec(_codec)
del _codec
