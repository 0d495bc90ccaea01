"""Zipkin tracing metadata codec (``Extensions/Tracing-Zipkin.md``, MIME type
``message/x.rsocket.tracing-zipkin.v0``).

Wire format::

    |I|D|S|N|T|P| reserved (2) |        flags, 1 byte (I = 0x80 ... P = 0x04)
    Trace ID     (64 bits, or 128 bits when T is set)   } only when I is set
    Span ID      (64 bits)                              }
    Parent Span ID (64 bits, only when P is set)        }

All integers are unsigned big-endian.  The flag values match rsocket-java's
``TracingMetadataCodec``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .mimetypes import MetadataDecodeError, as_bytes

__all__ = ["ZipkinTrace", "encode_tracing", "decode_tracing"]

FLAG_IDS_SET = 0x80
FLAG_DEBUG = 0x40
FLAG_SAMPLED = 0x20
FLAG_NOT_SAMPLED = 0x10
FLAG_TRACE_ID_128 = 0x08
FLAG_PARENT_ID = 0x04

_MAX64 = (1 << 64) - 1
_MAX128 = (1 << 128) - 1


@dataclass(frozen=True, slots=True)
class ZipkinTrace:
    """Zipkin (B3) trace context carried by ``Extensions/Tracing-Zipkin.md`` metadata.

    :param trace_id: unsigned 64-bit trace id (128-bit with ``trace_id_128``); ``None`` sends
        the sampling flags only (I flag clear), and then ``span_id`` and ``parent_span_id`` must
        be ``None`` too.
    :param span_id: unsigned 64-bit span id; required with a ``trace_id``.
    :param parent_span_id: unsigned 64-bit parent span id, or ``None`` for a root span.
    :param sampled: ``True`` (S flag), ``False`` (N flag) or ``None`` (no decision).
    :param debug: force tracing (D flag).
    :param trace_id_128: write the trace id as 128 bits (T flag).
    """

    trace_id: int | None = None
    span_id: int | None = None
    parent_span_id: int | None = None
    sampled: bool | None = None
    debug: bool = False
    trace_id_128: bool = False


def _check_id(value: object, name: str, limit: int, bits: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"ZipkinTrace.{name} must be an int, not {type(value).__name__}")
    if not 0 <= value <= limit:
        raise ValueError(
            f"ZipkinTrace.{name} must be an unsigned {bits}-bit integer (0..{limit:#x}), "
            f"got {value:#x}"
        )
    return value


def encode_tracing(trace: ZipkinTrace) -> bytes:
    """Encode Zipkin tracing metadata.

    :param trace: the trace context.
    :returns: 1 byte (flags only) or 17 to 33 bytes.
    :raises TypeError: ``trace`` is not a :class:`ZipkinTrace`, an id is not an ``int`` or
        ``sampled`` is not ``True``/``False``/``None``.
    :raises ValueError: an id out of range (negative, or over 64 bits; trace id over 128 bits,
        or over 64 bits without ``trace_id_128``); a ``trace_id`` without ``span_id``; a span id,
        parent span id or ``trace_id_128`` without ``trace_id``.
    """
    if not isinstance(trace, ZipkinTrace):
        raise TypeError(f"trace must be a ZipkinTrace, not {type(trace).__name__}")
    flags = FLAG_DEBUG if trace.debug else 0
    sampled = trace.sampled
    if sampled is True:
        flags |= FLAG_SAMPLED
    elif sampled is False:
        flags |= FLAG_NOT_SAMPLED
    elif sampled is not None:
        raise TypeError(
            f"ZipkinTrace.sampled must be True, False or None, not {type(sampled).__name__}"
        )
    if trace.trace_id is None:
        if trace.span_id is not None or trace.parent_span_id is not None or trace.trace_id_128:
            raise ValueError(
                "ZipkinTrace.span_id, parent_span_id and trace_id_128 need a trace_id; "
                "without one only the sampling flags are sent"
            )
        return bytes((flags,))
    flags |= FLAG_IDS_SET
    if trace.trace_id_128:
        flags |= FLAG_TRACE_ID_128
        trace_id = _check_id(trace.trace_id, "trace_id", _MAX128, 128).to_bytes(16, "big")
    else:
        if isinstance(trace.trace_id, int) and trace.trace_id > _MAX64:
            raise ValueError(
                f"ZipkinTrace.trace_id {trace.trace_id:#x} does not fit in 64 bits; "
                "set trace_id_128=True to send a 128-bit trace id"
            )
        trace_id = _check_id(trace.trace_id, "trace_id", _MAX64, 64).to_bytes(8, "big")
    if trace.span_id is None:
        raise ValueError("ZipkinTrace.span_id is required with a trace_id")
    span_id = _check_id(trace.span_id, "span_id", _MAX64, 64).to_bytes(8, "big")
    if trace.parent_span_id is None:
        return bytes((flags,)) + trace_id + span_id
    flags |= FLAG_PARENT_ID
    parent = _check_id(trace.parent_span_id, "parent_span_id", _MAX64, 64).to_bytes(8, "big")
    return b"".join((bytes((flags,)), trace_id, span_id, parent))


def decode_tracing(data: bytes) -> ZipkinTrace:
    """Decode Zipkin tracing metadata.

    ``sampled`` is ``True`` when S is set, else ``False`` when N is set, else ``None`` (the spec
    ignores N when S is set).  Without the I flag, the T and P flags are ignored.

    :param data: the metadata (``bytes``, ``bytearray`` or ``memoryview``).
    :raises MetadataDecodeError: empty metadata, or a length other than the flags announce
        (1 byte without I; 17, 25 or 33 bytes with it).
    :raises TypeError: ``data`` is not bytes-like.
    """
    data = as_bytes(data)
    if not data:
        raise MetadataDecodeError("tracing metadata is empty (no flags byte)")
    flags = data[0]
    debug = bool(flags & FLAG_DEBUG)
    if flags & FLAG_SAMPLED:
        sampled: bool | None = True
    elif flags & FLAG_NOT_SAMPLED:
        sampled = False
    else:
        sampled = None
    size = len(data)
    if not flags & FLAG_IDS_SET:
        if size != 1:
            raise MetadataDecodeError(
                f"tracing metadata without ids (I flag clear) is 1 byte, got {size} bytes"
            )
        return ZipkinTrace(sampled=sampled, debug=debug)
    wide = bool(flags & FLAG_TRACE_ID_128)
    has_parent = bool(flags & FLAG_PARENT_ID)
    trace_len = 16 if wide else 8
    expected = 1 + trace_len + 8 + (8 if has_parent else 0)
    if size != expected:
        raise MetadataDecodeError(
            f"tracing metadata with flags 0x{flags:02x} is {expected} bytes, got {size} bytes"
        )
    end = 1 + trace_len
    return ZipkinTrace(
        trace_id=int.from_bytes(data[1:end], "big"),
        span_id=int.from_bytes(data[end : end + 8], "big"),
        parent_span_id=int.from_bytes(data[end + 8 :], "big") if has_parent else None,
        sampled=sampled,
        debug=debug,
        trace_id_128=wide,
    )
