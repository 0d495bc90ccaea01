"""RSocket 1.0 frame codec (spec §Framing, §Frame Header Format, §Frame Types).

Pure functions over bytes: :func:`encode` turns a frame object into the frame's bytes and
:func:`decode` turns the bytes of exactly one frame back into a frame object. The 24-bit length
prefix that stream transports need is *not* part of a frame: it belongs to
:mod:`rsocket_tx.core.framing`.

Every frame class is a slotted dataclass built with keyword arguments; ``frame_type`` is a class
attribute and ``stream_id`` is 0 on connection frames. All integers are big endian.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from struct import Struct
from typing import Any, ClassVar

from .errors import FrameDecodeError, UnknownFrameTypeError

__all__ = [
    "FrameType",
    "FLAG_IGNORE",
    "FLAG_METADATA",
    "FLAG_FOLLOWS",
    "FLAG_COMPLETE",
    "FLAG_NEXT",
    "FLAG_RESUME_ENABLE",
    "FLAG_LEASE",
    "FLAG_RESPOND",
    "MAX_U31",
    "MAX_U63",
    "MAX_METADATA_LENGTH",
    "HEADER_SIZE",
    "Frame",
    "SetupFrame",
    "LeaseFrame",
    "KeepaliveFrame",
    "RequestResponseFrame",
    "RequestFnfFrame",
    "RequestStreamFrame",
    "RequestChannelFrame",
    "RequestNFrame",
    "CancelFrame",
    "PayloadFrame",
    "ErrorFrame",
    "MetadataPushFrame",
    "ResumeFrame",
    "ResumeOkFrame",
    "ExtFrame",
    "encode",
    "decode",
    "REQUEST_FRAME_TYPES",
]


class FrameType(enum.IntEnum):
    """The 6-bit frame type (spec §Frame Types)."""

    RESERVED = 0x00
    SETUP = 0x01
    LEASE = 0x02
    KEEPALIVE = 0x03
    REQUEST_RESPONSE = 0x04
    REQUEST_FNF = 0x05
    REQUEST_STREAM = 0x06
    REQUEST_CHANNEL = 0x07
    REQUEST_N = 0x08
    CANCEL = 0x09
    PAYLOAD = 0x0A
    ERROR = 0x0B
    METADATA_PUSH = 0x0C
    RESUME = 0x0D
    RESUME_OK = 0x0E
    EXT = 0x3F

    @property
    def can_have_metadata(self) -> bool:
        """True for frame types that define the (M)etadata flag."""
        return self in _METADATA_TYPES

    @property
    def is_fragmentable(self) -> bool:
        """True for frame types that define the (F)ollows flag (spec §Fragmentation)."""
        return self in _FRAGMENTABLE_TYPES

    @property
    def has_initial_request_n(self) -> bool:
        """True for REQUEST_STREAM and REQUEST_CHANNEL."""
        return self is FrameType.REQUEST_STREAM or self is FrameType.REQUEST_CHANNEL

    @property
    def is_request(self) -> bool:
        """True for the four REQUEST_* frame types that open a stream."""
        return self in REQUEST_FRAME_TYPES


REQUEST_FRAME_TYPES = frozenset(
    {
        FrameType.REQUEST_RESPONSE,
        FrameType.REQUEST_FNF,
        FrameType.REQUEST_STREAM,
        FrameType.REQUEST_CHANNEL,
    }
)
_FRAGMENTABLE_TYPES = REQUEST_FRAME_TYPES | {FrameType.PAYLOAD}
_METADATA_TYPES = _FRAGMENTABLE_TYPES | {
    FrameType.SETUP,
    FrameType.LEASE,
    FrameType.METADATA_PUSH,
    FrameType.EXT,
}

FLAG_IGNORE = 0x200
FLAG_METADATA = 0x100
FLAG_FOLLOWS = 0x80
FLAG_COMPLETE = 0x40
FLAG_NEXT = 0x20
FLAG_RESUME_ENABLE = 0x80
FLAG_LEASE = 0x40
FLAG_RESPOND = 0x80

MAX_U31 = 0x7FFFFFFF
MAX_U63 = 0x7FFFFFFFFFFFFFFF
MAX_METADATA_LENGTH = 0xFFFFFF
HEADER_SIZE = 6
_U32_HIGH = 0x80000000
_U64_HIGH = 0x8000000000000000

_HEADER = Struct(">IH")
_HEADER_N = Struct(">IHI")  # header + one 32-bit field
_HEADER_Q = Struct(">IHQ")  # header + one 64-bit field
_U32 = Struct(">I")
_SETUP_FIXED = Struct(">IHHHII")  # header, major, minor, keepalive, lifetime
_U16 = Struct(">H")
_U64 = Struct(">Q")
_U64_PAIR = Struct(">QQ")


class Frame:
    """Base class of every frame; ``frame_type`` names the type, ``stream_id`` the stream."""

    __slots__ = ()
    frame_type: ClassVar[FrameType]
    stream_id: int


@dataclass(slots=True, kw_only=True)
class SetupFrame(Frame):
    """SETUP (0x01): the client's connection parameters (spec §SETUP Frame).

    Times are milliseconds; MIME types are US-ASCII bytes; the R flag is set exactly when
    ``resume_token`` is not None.
    """

    frame_type: ClassVar[FrameType] = FrameType.SETUP
    keepalive_interval: int
    max_lifetime: int
    metadata_mime_type: bytes
    data_mime_type: bytes
    major_version: int = 1
    minor_version: int = 0
    data: bytes = b""
    metadata: bytes | None = None
    resume_token: bytes | None = None
    lease: bool = False
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class LeaseFrame(Frame):
    """LEASE (0x02): ``number_of_requests`` allowed within ``ttl`` milliseconds (spec §LEASE)."""

    frame_type: ClassVar[FrameType] = FrameType.LEASE
    ttl: int
    number_of_requests: int
    metadata: bytes | None = None
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class KeepaliveFrame(Frame):
    """KEEPALIVE (0x03): liveness probe; ``respond`` is the R flag (spec §KEEPALIVE Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.KEEPALIVE
    respond: bool
    last_received_position: int = 0
    data: bytes = b""
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class RequestResponseFrame(Frame):
    """REQUEST_RESPONSE (0x04) (spec §REQUEST_RESPONSE Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_RESPONSE
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False


@dataclass(slots=True, kw_only=True)
class RequestFnfFrame(Frame):
    """REQUEST_FNF (0x05): fire-and-forget (spec §REQUEST_FNF Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_FNF
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False


@dataclass(slots=True, kw_only=True)
class RequestStreamFrame(Frame):
    """REQUEST_STREAM (0x06) with its initial request-n (spec §REQUEST_STREAM Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_STREAM
    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False


@dataclass(slots=True, kw_only=True)
class RequestChannelFrame(Frame):
    """REQUEST_CHANNEL (0x07); ``complete`` is the C flag (spec §REQUEST_CHANNEL Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_CHANNEL
    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    complete: bool = False


@dataclass(slots=True, kw_only=True)
class RequestNFrame(Frame):
    """REQUEST_N (0x08): grant ``request_n`` more items (spec §REQUEST_N Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_N
    stream_id: int
    request_n: int


@dataclass(slots=True, kw_only=True)
class CancelFrame(Frame):
    """CANCEL (0x09) (spec §CANCEL Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.CANCEL
    stream_id: int


@dataclass(slots=True, kw_only=True)
class PayloadFrame(Frame):
    """PAYLOAD (0x0A); flags F, C, N as booleans (spec §PAYLOAD Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.PAYLOAD
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    follows: bool = False
    complete: bool = False
    next: bool = False


@dataclass(slots=True, kw_only=True)
class ErrorFrame(Frame):
    """ERROR (0x0B): a 32-bit ``error_code`` and UTF-8 ``data`` (spec §ERROR Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.ERROR
    stream_id: int
    error_code: int
    data: bytes = b""


@dataclass(slots=True, kw_only=True)
class MetadataPushFrame(Frame):
    """METADATA_PUSH (0x0C): connection-level metadata (spec §METADATA_PUSH Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.METADATA_PUSH
    metadata: bytes
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class ResumeFrame(Frame):
    """RESUME (0x0D): resume a session by token (spec §RESUME Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.RESUME
    token: bytes
    last_received_server_position: int
    first_available_client_position: int
    major_version: int = 1
    minor_version: int = 0
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class ResumeOkFrame(Frame):
    """RESUME_OK (0x0E) (spec §RESUME_OK Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.RESUME_OK
    last_received_client_position: int
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class ExtFrame(Frame):
    """EXT (0x3F): an extension frame; the body after the extended type is opaque (spec §EXT)."""

    frame_type: ClassVar[FrameType] = FrameType.EXT
    stream_id: int
    extended_type: int
    ignore: bool = False
    has_metadata: bool = False
    body: bytes = b""


# --------------------------------------------------------------------------------------------
# encoding


def _check_u31(name: str, value: int, minimum: int = 0) -> None:
    if not minimum <= value <= MAX_U31:
        raise ValueError(f"{name} must be in [{minimum}, {MAX_U31}], got {value!r}")


def _check_u63(name: str, value: int) -> None:
    if not 0 <= value <= MAX_U63:
        raise ValueError(f"{name} must be in [0, {MAX_U63}], got {value!r}")


def _check_u16(name: str, value: int) -> None:
    if not 0 <= value <= 0xFFFF:
        raise ValueError(f"{name} must be in [0, 65535], got {value!r}")


def _type_flags(frame_type: int, flags: int) -> int:
    return (frame_type << 10) | flags


def _data_metadata(data: bytes, metadata: bytes | None) -> tuple[int, bytes]:
    """Return the M flag and the bytes of [metadata length, metadata,] data."""
    if metadata is None:
        return 0, data
    n = len(metadata)
    if n > MAX_METADATA_LENGTH:
        raise ValueError(f"metadata is {n} bytes; the limit is {MAX_METADATA_LENGTH}")
    return FLAG_METADATA, n.to_bytes(3, "big") + metadata + data


def _encode_request(frame, frame_type: int, extra_flags: int, fixed: bytes) -> bytes:
    _check_u31("stream_id", frame.stream_id)
    m, body = _data_metadata(frame.data, frame.metadata)
    flags = m | extra_flags | (FLAG_FOLLOWS if frame.follows else 0)
    return _HEADER.pack(frame.stream_id, (frame_type << 10) | flags) + fixed + body


def _enc_setup(f: SetupFrame) -> bytes:
    _check_u16("major_version", f.major_version)
    _check_u16("minor_version", f.minor_version)
    _check_u31("keepalive_interval", f.keepalive_interval, 1)
    _check_u31("max_lifetime", f.max_lifetime, 1)
    flags = FLAG_LEASE if f.lease else 0
    parts = []
    if f.resume_token is not None:
        flags |= FLAG_RESUME_ENABLE
        _check_u16("len(resume_token)", len(f.resume_token))
        parts.append(_U16.pack(len(f.resume_token)))
        parts.append(f.resume_token)
    for name, mime in (("metadata_mime_type", f.metadata_mime_type),
                       ("data_mime_type", f.data_mime_type)):
        if len(mime) > 0xFF:
            raise ValueError(f"{name} is {len(mime)} bytes; the limit is 255")
        parts.append(bytes((len(mime),)))
        parts.append(mime)
    m, body = _data_metadata(f.data, f.metadata)
    flags |= m
    head = _SETUP_FIXED.pack(0, _type_flags(FrameType.SETUP, flags), f.major_version,
                             f.minor_version, f.keepalive_interval, f.max_lifetime)
    return head + b"".join(parts) + body


def _enc_lease(f: LeaseFrame) -> bytes:
    _check_u31("ttl", f.ttl)
    _check_u31("number_of_requests", f.number_of_requests)
    flags = 0 if f.metadata is None else FLAG_METADATA
    head = _HEADER_N.pack(0, _type_flags(FrameType.LEASE, flags), f.ttl)
    tail = b"" if f.metadata is None else f.metadata
    return head + _U32.pack(f.number_of_requests) + tail


def _enc_keepalive(f: KeepaliveFrame) -> bytes:
    _check_u63("last_received_position", f.last_received_position)
    flags = FLAG_RESPOND if f.respond else 0
    return _HEADER_Q.pack(0, _type_flags(FrameType.KEEPALIVE, flags),
                          f.last_received_position) + f.data


def _enc_request_response(f: RequestResponseFrame) -> bytes:
    return _encode_request(f, FrameType.REQUEST_RESPONSE, 0, b"")


def _enc_request_fnf(f: RequestFnfFrame) -> bytes:
    return _encode_request(f, FrameType.REQUEST_FNF, 0, b"")


def _enc_request_stream(f: RequestStreamFrame) -> bytes:
    _check_u31("initial_request_n", f.initial_request_n, 1)
    return _encode_request(f, FrameType.REQUEST_STREAM, 0, _U32.pack(f.initial_request_n))


def _enc_request_channel(f: RequestChannelFrame) -> bytes:
    _check_u31("initial_request_n", f.initial_request_n, 1)
    return _encode_request(f, FrameType.REQUEST_CHANNEL, FLAG_COMPLETE if f.complete else 0,
                           _U32.pack(f.initial_request_n))


def _enc_request_n(f: RequestNFrame) -> bytes:
    _check_u31("stream_id", f.stream_id)
    _check_u31("request_n", f.request_n, 1)
    return _HEADER_N.pack(f.stream_id, FrameType.REQUEST_N << 10, f.request_n)


def _enc_cancel(f: CancelFrame) -> bytes:
    _check_u31("stream_id", f.stream_id)
    return _HEADER.pack(f.stream_id, FrameType.CANCEL << 10)


def _enc_payload(f: PayloadFrame) -> bytes:
    return _encode_request(
        f, FrameType.PAYLOAD,
        (FLAG_COMPLETE if f.complete else 0) | (FLAG_NEXT if f.next else 0), b"")


def _enc_error(f: ErrorFrame) -> bytes:
    _check_u31("stream_id", f.stream_id)
    if not 0 <= f.error_code <= 0xFFFFFFFF:
        raise ValueError(f"error_code must be a 32-bit unsigned value, got {f.error_code!r}")
    return _HEADER_N.pack(f.stream_id, FrameType.ERROR << 10, f.error_code) + f.data


def _enc_metadata_push(f: MetadataPushFrame) -> bytes:
    return _HEADER.pack(0, _type_flags(FrameType.METADATA_PUSH, FLAG_METADATA)) + f.metadata


def _enc_resume(f: ResumeFrame) -> bytes:
    _check_u16("major_version", f.major_version)
    _check_u16("minor_version", f.minor_version)
    _check_u16("len(token)", len(f.token))
    _check_u63("last_received_server_position", f.last_received_server_position)
    _check_u63("first_available_client_position", f.first_available_client_position)
    return b"".join((
        _HEADER.pack(0, FrameType.RESUME << 10),
        _U16.pack(f.major_version), _U16.pack(f.minor_version),
        _U16.pack(len(f.token)), f.token,
        _U64_PAIR.pack(f.last_received_server_position, f.first_available_client_position),
    ))


def _enc_resume_ok(f: ResumeOkFrame) -> bytes:
    _check_u63("last_received_client_position", f.last_received_client_position)
    return _HEADER_Q.pack(0, FrameType.RESUME_OK << 10, f.last_received_client_position)


def _enc_ext(f: ExtFrame) -> bytes:
    _check_u31("stream_id", f.stream_id)
    _check_u31("extended_type", f.extended_type, 1)
    flags = (FLAG_IGNORE if f.ignore else 0) | (FLAG_METADATA if f.has_metadata else 0)
    return _HEADER_N.pack(f.stream_id, _type_flags(FrameType.EXT, flags), f.extended_type) + f.body


# (each encoder takes its own frame class: Any, as a dict cannot pair key and value types)
_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    SetupFrame: _enc_setup,
    LeaseFrame: _enc_lease,
    KeepaliveFrame: _enc_keepalive,
    RequestResponseFrame: _enc_request_response,
    RequestFnfFrame: _enc_request_fnf,
    RequestStreamFrame: _enc_request_stream,
    RequestChannelFrame: _enc_request_channel,
    RequestNFrame: _enc_request_n,
    CancelFrame: _enc_cancel,
    PayloadFrame: _enc_payload,
    ErrorFrame: _enc_error,
    MetadataPushFrame: _enc_metadata_push,
    ResumeFrame: _enc_resume,
    ResumeOkFrame: _enc_resume_ok,
    ExtFrame: _enc_ext,
}


def encode(frame: Frame) -> bytes:
    """Encode one frame, without the 24-bit length prefix.

    :param frame: any frame object of this module.
    :returns: the frame's bytes (header first).
    :raises ValueError: a field is out of its range (31-bit ids and counts, 63-bit positions,
        16-bit versions and token length, 8-bit MIME lengths, 24-bit metadata length, values the
        spec requires to be > 0).
    :raises TypeError: ``frame`` is not a frame object.
    """
    try:
        encoder = _ENCODERS[frame.__class__]
    except KeyError:
        raise TypeError(f"not an RSocket frame: {frame!r}") from None
    return encoder(frame)


# --------------------------------------------------------------------------------------------
# decoding: every decoder gets (buffer, stream_id, flags) and the buffer is exactly one frame


def _u31(buf, offset: int, name: str, minimum: int = 0) -> int:
    value = _U32.unpack_from(buf, offset)[0]
    if value & _U32_HIGH:
        raise FrameDecodeError(f"reserved bit set in {name}")
    if value < minimum:
        raise FrameDecodeError(f"{name} must be > 0, got {value}")
    return value


def _u63(buf, offset: int, name: str) -> int:
    value = _U64.unpack_from(buf, offset)[0]
    if value & _U64_HIGH:
        raise FrameDecodeError(f"reserved bit set in {name}")
    return value


def _need(buf, size: int, what: str) -> None:
    if len(buf) < size:
        raise FrameDecodeError(f"{what} frame too short: {len(buf)} bytes, needs {size}")


def _split_metadata(buf, offset: int, flags: int) -> tuple[bytes, bytes | None]:
    """Split [metadata length, metadata,] data starting at ``offset``."""
    if flags & FLAG_METADATA:
        end = len(buf)
        if end - offset < 3:
            raise FrameDecodeError("metadata flag set but no room for the metadata length")
        mlen = (buf[offset] << 16) | (buf[offset + 1] << 8) | buf[offset + 2]
        mstart = offset + 3
        if mstart + mlen > end:
            raise FrameDecodeError(
                f"metadata length {mlen} exceeds the {end - mstart} bytes left in the frame")
        return bytes(buf[mstart + mlen:]), bytes(buf[mstart:mstart + mlen])
    return bytes(buf[offset:]), None


def _dec_setup(buf, stream_id: int, flags: int) -> SetupFrame:
    _need(buf, 18, "SETUP")
    major, minor = _U16.unpack_from(buf, 6)[0], _U16.unpack_from(buf, 8)[0]
    keepalive = _u31(buf, 10, "keepalive interval", 1)
    lifetime = _u31(buf, 14, "max lifetime", 1)
    offset = 18
    token = None
    if flags & FLAG_RESUME_ENABLE:
        _need(buf, offset + 2, "SETUP")
        tlen = _U16.unpack_from(buf, offset)[0]
        offset += 2
        _need(buf, offset + tlen, "SETUP")
        token = bytes(buf[offset:offset + tlen])
        offset += tlen
    mimes = []
    for _ in range(2):
        _need(buf, offset + 1, "SETUP")
        mlen = buf[offset]
        offset += 1
        _need(buf, offset + mlen, "SETUP")
        mimes.append(bytes(buf[offset:offset + mlen]))
        offset += mlen
    data, metadata = _split_metadata(buf, offset, flags)
    return SetupFrame(major_version=major, minor_version=minor, keepalive_interval=keepalive,
                      max_lifetime=lifetime, resume_token=token, lease=bool(flags & FLAG_LEASE),
                      metadata_mime_type=mimes[0], data_mime_type=mimes[1], data=data,
                      metadata=metadata, stream_id=stream_id)


def _dec_lease(buf, stream_id: int, flags: int) -> LeaseFrame:
    _need(buf, 14, "LEASE")
    ttl = _u31(buf, 6, "time-to-live")
    number = _u31(buf, 10, "number of requests")
    metadata = bytes(buf[14:]) if flags & FLAG_METADATA else None
    return LeaseFrame(ttl=ttl, number_of_requests=number, metadata=metadata, stream_id=stream_id)


def _dec_keepalive(buf, stream_id: int, flags: int) -> KeepaliveFrame:
    _need(buf, 14, "KEEPALIVE")
    return KeepaliveFrame(respond=bool(flags & FLAG_RESPOND),
                          last_received_position=_u63(buf, 6, "last received position"),
                          data=bytes(buf[14:]), stream_id=stream_id)


def _dec_request_response(buf, stream_id: int, flags: int) -> RequestResponseFrame:
    data, metadata = _split_metadata(buf, 6, flags)
    return RequestResponseFrame(stream_id=stream_id, data=data, metadata=metadata,
                                follows=bool(flags & FLAG_FOLLOWS))


def _dec_request_fnf(buf, stream_id: int, flags: int) -> RequestFnfFrame:
    data, metadata = _split_metadata(buf, 6, flags)
    return RequestFnfFrame(stream_id=stream_id, data=data, metadata=metadata,
                           follows=bool(flags & FLAG_FOLLOWS))


def _dec_request_stream(buf, stream_id: int, flags: int) -> RequestStreamFrame:
    _need(buf, 10, "REQUEST_STREAM")
    n = _u31(buf, 6, "initial request n", 1)
    data, metadata = _split_metadata(buf, 10, flags)
    return RequestStreamFrame(stream_id=stream_id, initial_request_n=n, data=data,
                              metadata=metadata, follows=bool(flags & FLAG_FOLLOWS))


def _dec_request_channel(buf, stream_id: int, flags: int) -> RequestChannelFrame:
    _need(buf, 10, "REQUEST_CHANNEL")
    n = _u31(buf, 6, "initial request n", 1)
    data, metadata = _split_metadata(buf, 10, flags)
    return RequestChannelFrame(stream_id=stream_id, initial_request_n=n, data=data,
                               metadata=metadata, follows=bool(flags & FLAG_FOLLOWS),
                               complete=bool(flags & FLAG_COMPLETE))


def _dec_request_n(buf, stream_id: int, flags: int) -> RequestNFrame:
    _need(buf, 10, "REQUEST_N")
    return RequestNFrame(stream_id=stream_id, request_n=_u31(buf, 6, "request n", 1))


def _dec_cancel(buf, stream_id: int, flags: int) -> CancelFrame:
    return CancelFrame(stream_id=stream_id)


def _dec_payload(buf, stream_id: int, flags: int) -> PayloadFrame:
    data, metadata = _split_metadata(buf, 6, flags)
    return PayloadFrame(stream_id=stream_id, data=data, metadata=metadata,
                        follows=bool(flags & FLAG_FOLLOWS), complete=bool(flags & FLAG_COMPLETE),
                        next=bool(flags & FLAG_NEXT))


def _dec_error(buf, stream_id: int, flags: int) -> ErrorFrame:
    _need(buf, 10, "ERROR")
    return ErrorFrame(stream_id=stream_id, error_code=_U32.unpack_from(buf, 6)[0],
                      data=bytes(buf[10:]))


def _dec_metadata_push(buf, stream_id: int, flags: int) -> MetadataPushFrame:
    return MetadataPushFrame(metadata=bytes(buf[6:]), stream_id=stream_id)


def _dec_resume(buf, stream_id: int, flags: int) -> ResumeFrame:
    _need(buf, 12, "RESUME")
    major, minor = _U16.unpack_from(buf, 6)[0], _U16.unpack_from(buf, 8)[0]
    tlen = _U16.unpack_from(buf, 10)[0]
    _need(buf, 12 + tlen + 16, "RESUME")
    token = bytes(buf[12:12 + tlen])
    return ResumeFrame(
        major_version=major, minor_version=minor, token=token,
        last_received_server_position=_u63(buf, 12 + tlen, "last received server position"),
        first_available_client_position=_u63(buf, 20 + tlen, "first available client position"),
        stream_id=stream_id)


def _dec_resume_ok(buf, stream_id: int, flags: int) -> ResumeOkFrame:
    _need(buf, 14, "RESUME_OK")
    return ResumeOkFrame(
        last_received_client_position=_u63(buf, 6, "last received client position"),
        stream_id=stream_id)


def _dec_ext(buf, stream_id: int, flags: int) -> ExtFrame:
    _need(buf, 10, "EXT")
    return ExtFrame(stream_id=stream_id, extended_type=_u31(buf, 6, "extended type", 1),
                    ignore=bool(flags & FLAG_IGNORE), has_metadata=bool(flags & FLAG_METADATA),
                    body=bytes(buf[10:]))


_DECODERS = {
    FrameType.SETUP: _dec_setup,
    FrameType.LEASE: _dec_lease,
    FrameType.KEEPALIVE: _dec_keepalive,
    FrameType.REQUEST_RESPONSE: _dec_request_response,
    FrameType.REQUEST_FNF: _dec_request_fnf,
    FrameType.REQUEST_STREAM: _dec_request_stream,
    FrameType.REQUEST_CHANNEL: _dec_request_channel,
    FrameType.REQUEST_N: _dec_request_n,
    FrameType.CANCEL: _dec_cancel,
    FrameType.PAYLOAD: _dec_payload,
    FrameType.ERROR: _dec_error,
    FrameType.METADATA_PUSH: _dec_metadata_push,
    FrameType.RESUME: _dec_resume,
    FrameType.RESUME_OK: _dec_resume_ok,
    FrameType.EXT: _dec_ext,
}
# plain-int keyed table for the hot path (IntEnum hashing equals int hashing)
_DECODERS_BY_INT = {int(k): v for k, v in _DECODERS.items()}


def decode(buf: bytes | bytearray | memoryview) -> Frame:
    """Decode exactly one frame (no length prefix).

    :param buf: the frame's bytes.
    :returns: the frame object.
    :raises UnknownFrameTypeError: the frame type is not one of spec §Frame Types; its
        ``ignore`` attribute tells whether the (I)gnore flag was set.
    :raises FrameDecodeError: the frame is shorter than its fixed fields, a reserved bit is set
        in a stream id or a 31/63-bit field, a metadata length exceeds the frame, or a field the
        spec requires to be > 0 is 0. Unknown flag bits are ignored (spec §Handling the
        Unexpected).
    """
    if len(buf) < HEADER_SIZE:
        raise FrameDecodeError(f"frame too short: {len(buf)} bytes, a header needs 6")
    stream_id, type_flags = _HEADER.unpack_from(buf, 0)
    if stream_id & _U32_HIGH:
        raise FrameDecodeError("reserved bit set in stream id")
    decoder = _DECODERS_BY_INT.get(type_flags >> 10)
    if decoder is None:
        raise UnknownFrameTypeError(type_flags >> 10, bool(type_flags & FLAG_IGNORE))
    return decoder(buf, stream_id, type_flags & 0x3FF)
