"""The frames of the 2015 ReactiveSocket draft (seed 001, "ReactiveSocket Protocol", August
2015): layouts, codes, an encoder and a total decoder.

This is a different wire format from RSocket 1.0 (:mod:`rsocket_tx.core.frames`), not a
version of it. Every frame starts with the same header; on TCP a 32-bit word with the frame
length comes first (draft §Frame Header Format)::

     0                   1                   2                   3
     0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
    +-+-------------------------------------------------------------+
    |R|                 Frame Length (for TCP only)                 |
    +---------------+-+-+-----------+-------------------------------+
    |    Version    |I|M|  Flags    |         Frame Type            |
    +---------------+-+-+-----------+-------------------------------+
    |                           Stream ID                           |
    |                            (64 bits)                          |
    +---------------------------------------------------------------+
    |      fixed fields of the frame type (see the table below)     |
    +---------------+-----------------------------------------------+
    | Metadata Type |  Metadata Length (24, includes these 4 bytes) |   only when M is set
    +---------------+-----------------------------------------------+
    |                       Metadata Payload                       ...
    +---------------------------------------------------------------+
    |                         Data (to the end of the frame)       ...
    +---------------------------------------------------------------+

- **Frame Length** counts the whole frame, the length word itself included (the draft: "Length
  of Frame. Including header"): at least 16. **R** is reserved and must be 0. Message transports
  (WebSocket) carry one frame per message with no length word; :func:`encode` and
  :func:`decode` work on that form, :func:`frame_with_length` and :class:`FrameReader` add and
  remove the length word.
- **Version** is 0. **I** (0x80 of the flags byte): ignore the frame if not understood.
  **M** (0x40): a metadata header follows the fixed fields. SETUP's **L** (0x20): the client
  honours LEASE. RESPONSE's **F** (0x20, follows) and **C** (0x10, complete). Flag bits a frame
  type does not define are sent as 0 and ignored on receipt.
- Fixed fields (big-endian): SETUP: metadata MIME length (8) and type, data MIME length (8) and
  type; SETUP_ERROR: error code (32); LEASE: time (64, nanoseconds) and number of requests (64);
  REQUEST_STREAM / REQUEST_SUB: initial request n (64); REQUEST_N: request n (64); EXT:
  extended type (32). 64-bit counts are unsigned.
- LEASE, REQUEST_N, CANCEL and METADATA_PUSH carry metadata only (the draft draws no data):
  bytes after their metadata are an invalid frame. METADATA_PUSH must have M set.

Decoding is total: :func:`decode` returns a frame or raises
:class:`~rsocket_tx.core.errors.FrameDecodeError`
(:class:`~rsocket_tx.core.errors.UnknownFrameTypeError` for a type not in :class:`FrameType`,
with the frame's I flag), and :class:`FrameReader` raises
only :class:`~rsocket_tx.core.errors.FrameDecodeError` or
:class:`~rsocket_tx.core.errors.FrameTooLargeError`: no other exception, whatever the bytes.

:func:`sniff` tells a connection that begins with a 2015 SETUP apart from every other protocol
rsocket_tx serves (:mod:`rsocket_tx.mux.sniff`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from struct import Struct
from typing import ClassVar

from ..core.errors import FrameDecodeError, FrameTooLargeError, UnknownFrameTypeError
from ..mux.sniff import Sniff

__all__ = [
    "FLAG_COMPLETE",
    "FLAG_FOLLOWS",
    "FLAG_IGNORE",
    "FLAG_LEASE",
    "FLAG_METADATA",
    "HEADER_SIZE",
    "LENGTH_SIZE",
    "MAX_FRAME_LENGTH",
    "MAX_METADATA_LENGTH",
    "MAX_STREAM_ID",
    "MAX_U64",
    "SNIFF_SIZE",
    "VERSION",
    "CancelFrame",
    "ErrorFrame",
    "ExtFrame",
    "Frame",
    "FrameLengthError",
    "FrameReader",
    "FrameType",
    "LeaseFrame",
    "MetadataPushFrame",
    "RequestFnfFrame",
    "RequestNFrame",
    "RequestResponseFrame",
    "RequestStreamFrame",
    "RequestSubFrame",
    "ResponseFrame",
    "SetupErrorCode",
    "SetupErrorFrame",
    "SetupFrame",
    "decode",
    "encode",
    "frame_with_length",
    "sniff",
    "with_stream_id",
]

#: The draft's protocol version (the Version byte).
VERSION = 0
#: Bytes of the header without the TCP length word: version, flags, type, stream id.
HEADER_SIZE = 12
#: Bytes of the TCP length word.
LENGTH_SIZE = 4
#: The largest Frame Length (31 bits), in bytes, length word included.
MAX_FRAME_LENGTH = 0x7FFFFFFF
#: The largest Metadata Length (24 bits), in bytes, the 4-byte metadata header included.
MAX_METADATA_LENGTH = 0xFFFFFF
#: The largest value of a 64-bit field (LEASE time and count, request n).
MAX_U64 = 0xFFFFFFFFFFFFFFFF
#: The largest stream id rsocket_tx allocates: 2^63-1 (the top bit stays 0).
MAX_STREAM_ID = 0x7FFFFFFFFFFFFFFF

#: Bytes :func:`sniff` needs to say MATCH: the header with its length word.
SNIFF_SIZE = 16

FLAG_IGNORE = 0x80
FLAG_METADATA = 0x40
FLAG_LEASE = 0x20  # SETUP
FLAG_FOLLOWS = 0x20  # RESPONSE
FLAG_COMPLETE = 0x10  # RESPONSE

_HEADER = Struct(">BBHQ")
_U32 = Struct(">I")
_U64 = Struct(">Q")
_U64X2 = Struct(">QQ")


class FrameType(enum.IntEnum):
    """Frame types (draft §Frame Types). 0x0001-0x000F pertain to the connection, requesters
    send 0x0010-0x001F, responders 0x0020-0x002F."""

    RESERVED = 0x0000
    SETUP = 0x0001
    SETUP_ERROR = 0x0002
    LEASE = 0x0003
    REQUEST_RESPONSE = 0x0011
    REQUEST_FNF = 0x0012
    REQUEST_STREAM = 0x0013
    REQUEST_SUB = 0x0014
    REQUEST_N = 0x0015
    CANCEL = 0x0016
    RESPONSE = 0x0020
    ERROR = 0x0021
    METADATA_PUSH = 0x0031
    EXT = 0xFFFF


class SetupErrorCode(enum.IntEnum):
    """SETUP_ERROR codes (draft §Setup Error Frame, Error Codes)."""

    INVALID_SETUP = 0x0001
    UNSUPPORTED_SETUP = 0x0010
    REJECTED_SETUP = 0x0100


class Frame:
    """Base class of every frame: ``frame_type`` names the type, ``stream_id`` the stream
    (0..2^64-1). Frames that may carry metadata have ``metadata`` (bytes, or None: the M flag
    is clear) and ``metadata_type`` (0..255, application-defined, not interpreted)."""

    __slots__ = ()
    frame_type: ClassVar[FrameType]
    stream_id: int


@dataclass(slots=True, kw_only=True)
class SetupFrame(Frame):
    """SETUP (0x0001, stream 0): the client's MIME types, the L flag and the setup payload
    (draft §Setup Frame). MIME types are US-ASCII bytes, at most 255 each."""

    frame_type: ClassVar[FrameType] = FrameType.SETUP
    metadata_mime_type: bytes
    data_mime_type: bytes
    lease: bool = False
    data: bytes = b""
    metadata: bytes | None = None
    metadata_type: int = 0
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class SetupErrorFrame(Frame):
    """SETUP_ERROR (0x0002, stream 0): the server refuses the SETUP (draft §Setup Error
    Frame); ``error_code`` a :class:`SetupErrorCode` (32 bits on the wire), ``data`` the
    reason (UTF-8 text when rsocket_tx sends it)."""

    frame_type: ClassVar[FrameType] = FrameType.SETUP_ERROR
    error_code: int
    data: bytes = b""
    metadata: bytes | None = None
    metadata_type: int = 0
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class LeaseFrame(Frame):
    """LEASE (0x0003, stream 0): ``number_of_requests`` may be sent within ``time``
    nanoseconds of the frame's reception (draft §Lease Frame); both 64-bit unsigned."""

    frame_type: ClassVar[FrameType] = FrameType.LEASE
    time: int
    number_of_requests: int
    metadata: bytes | None = None
    metadata_type: int = 0
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class RequestResponseFrame(Frame):
    """REQUEST_RESPONSE (0x0011) (draft §Request Response Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_RESPONSE
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    metadata_type: int = 0


@dataclass(slots=True, kw_only=True)
class RequestFnfFrame(Frame):
    """REQUEST_FNF (0x0012): fire-and-forget (draft §Request Fire-n-Forget Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_FNF
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    metadata_type: int = 0


@dataclass(slots=True, kw_only=True)
class RequestStreamFrame(Frame):
    """REQUEST_STREAM (0x0013) with its 64-bit initial request n (draft §Request Stream
    Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_STREAM
    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    metadata_type: int = 0


@dataclass(slots=True, kw_only=True)
class RequestSubFrame(Frame):
    """REQUEST_SUB (0x0014): a subscription, an endless stream, with its 64-bit initial
    request n (draft §Request Subscription Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_SUB
    stream_id: int
    initial_request_n: int
    data: bytes = b""
    metadata: bytes | None = None
    metadata_type: int = 0


@dataclass(slots=True, kw_only=True)
class RequestNFrame(Frame):
    """REQUEST_N (0x0015): ``request_n`` (64-bit) more items (draft §Request N Frame; its
    diagram says "Frame Type = SETUP", a slip of the draft)."""

    frame_type: ClassVar[FrameType] = FrameType.REQUEST_N
    stream_id: int
    request_n: int
    metadata: bytes | None = None
    metadata_type: int = 0


@dataclass(slots=True, kw_only=True)
class CancelFrame(Frame):
    """CANCEL (0x0016) (draft §Cancel Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.CANCEL
    stream_id: int
    metadata: bytes | None = None
    metadata_type: int = 0


@dataclass(slots=True, kw_only=True)
class ResponseFrame(Frame):
    """RESPONSE (0x0020): an item (NEXT), with ``complete`` (C) a COMPLETE too, with
    ``follows`` (F) a fragment that more fragments follow (draft §Response Frame)."""

    frame_type: ClassVar[FrameType] = FrameType.RESPONSE
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    metadata_type: int = 0
    follows: bool = False
    complete: bool = False


@dataclass(slots=True, kw_only=True)
class ErrorFrame(Frame):
    """ERROR (0x0021): a stream error from a responder to a requester, with no error code:
    ``data`` is the error information (UTF-8 text when rsocket_tx sends it) (draft §Error
    Frame). On stream 0 it ends the connection (rsocket_tx's rule, see the docs)."""

    frame_type: ClassVar[FrameType] = FrameType.ERROR
    stream_id: int
    data: bytes = b""
    metadata: bytes | None = None
    metadata_type: int = 0


@dataclass(slots=True, kw_only=True)
class MetadataPushFrame(Frame):
    """METADATA_PUSH (0x0031): metadata alone, for the connection (stream 0) or one stream
    (draft §Metadata Push Frame). The M flag is always set."""

    frame_type: ClassVar[FrameType] = FrameType.METADATA_PUSH
    metadata: bytes
    metadata_type: int = 0
    stream_id: int = 0


@dataclass(slots=True, kw_only=True)
class ExtFrame(Frame):
    """EXT (0xFFFF): ``extended_type`` (32 bits) and what follows it, kept as ``body``
    (draft §Extension Frame). ``flags`` is the whole flags byte (I, M and the rest) as
    received; the header's stream id is kept (the draft's drawing leaves it out; the general
    header has it)."""

    frame_type: ClassVar[FrameType] = FrameType.EXT
    stream_id: int
    extended_type: int
    flags: int = 0
    body: bytes = b""

    @property
    def ignore(self) -> bool:
        """The I flag: the frame may be ignored if not understood."""
        return bool(self.flags & FLAG_IGNORE)


# --------------------------------------------------------------------------- encoding

#: the frames with optional metadata (all but METADATA_PUSH, whose metadata is required, and EXT)
_WITH_METADATA = (SetupFrame, SetupErrorFrame, LeaseFrame, RequestResponseFrame, RequestFnfFrame,
                  RequestStreamFrame, RequestSubFrame, RequestNFrame, CancelFrame, ResponseFrame,
                  ErrorFrame)


def _check_u(name: str, value: int, bits: int) -> None:
    if not isinstance(value, int) or not 0 <= value < (1 << bits):
        raise ValueError(f"{name} must be in [0, 2^{bits}-1], got {value!r}")


def _metadata_block(metadata: bytes | None, metadata_type: int) -> bytes:
    if metadata is None:
        return b""
    _check_u("metadata_type", metadata_type, 8)
    n = len(metadata) + 4
    if n > MAX_METADATA_LENGTH:
        raise ValueError(f"metadata of {len(metadata)} bytes does not fit the 24-bit metadata "
                         f"length ({MAX_METADATA_LENGTH - 4} bytes at most)")
    return bytes((metadata_type, n >> 16, (n >> 8) & 0xFF, n & 0xFF)) + metadata


def encode(frame: Frame) -> bytes:
    """Encode ``frame`` without the TCP length word (the form a WebSocket message carries).

    :param frame: any frame of this module.
    :returns: the frame's bytes, header first.
    :raises ValueError: a field out of range (stream id past 64 bits, metadata over 16 MiB,
        a MIME type over 255 bytes, ...), or the frame over :data:`MAX_FRAME_LENGTH`.
    """
    _check_u("stream_id", frame.stream_id, 64)
    flags = 0
    fixed = b""
    data = b""
    metadata: bytes | None = None
    metadata_type = 0
    if isinstance(frame, ExtFrame):
        _check_u("extended_type", frame.extended_type, 32)
        _check_u("flags", frame.flags, 8)
        out = _HEADER.pack(VERSION, frame.flags, FrameType.EXT, frame.stream_id) + \
            _U32.pack(frame.extended_type) + frame.body
        return _checked_length(out)
    if isinstance(frame, MetadataPushFrame):
        metadata, metadata_type = frame.metadata, frame.metadata_type
    else:
        assert isinstance(frame, _WITH_METADATA), f"not a frame of this module: {frame!r}"
        metadata, metadata_type = frame.metadata, frame.metadata_type
    if isinstance(frame, SetupFrame):
        for name, mime in (("metadata_mime_type", frame.metadata_mime_type),
                           ("data_mime_type", frame.data_mime_type)):
            if len(mime) > 255:
                raise ValueError(f"{name} is {len(mime)} bytes; at most 255")
        fixed = bytes((len(frame.metadata_mime_type),)) + frame.metadata_mime_type + \
            bytes((len(frame.data_mime_type),)) + frame.data_mime_type
        flags |= FLAG_LEASE if frame.lease else 0
        data = frame.data
    elif isinstance(frame, SetupErrorFrame):
        _check_u("error_code", frame.error_code, 32)
        fixed = _U32.pack(frame.error_code)
        data = frame.data
    elif isinstance(frame, LeaseFrame):
        _check_u("time", frame.time, 64)
        _check_u("number_of_requests", frame.number_of_requests, 64)
        fixed = _U64X2.pack(frame.time, frame.number_of_requests)
    elif isinstance(frame, (RequestStreamFrame, RequestSubFrame)):
        _check_u("initial_request_n", frame.initial_request_n, 64)
        fixed = _U64.pack(frame.initial_request_n)
        data = frame.data
    elif isinstance(frame, RequestNFrame):
        _check_u("request_n", frame.request_n, 64)
        fixed = _U64.pack(frame.request_n)
    elif isinstance(frame, ResponseFrame):
        flags |= (FLAG_FOLLOWS if frame.follows else 0) | \
            (FLAG_COMPLETE if frame.complete else 0)
        data = frame.data
    elif isinstance(frame, (RequestResponseFrame, RequestFnfFrame, ErrorFrame)):
        data = frame.data
    elif not isinstance(frame, (CancelFrame, MetadataPushFrame)):
        raise ValueError(f"not a frame of the 2015 draft: {frame!r}")
    if metadata is not None:
        flags |= FLAG_METADATA
    out = b"".join((_HEADER.pack(VERSION, flags, frame.frame_type, frame.stream_id), fixed,
                    _metadata_block(metadata, metadata_type), data))
    return _checked_length(out)


def with_stream_id(frame_bytes: bytes, stream_id: int) -> bytes:
    """``frame_bytes`` (an encoded frame, without the length word) with its Stream ID
    replaced: the same frame on another stream, without encoding it again.

    :param frame_bytes: a frame as :func:`encode` returns it.
    :param stream_id: the new Stream ID, in [0, 2^64-1].
    :raises ValueError: ``stream_id`` out of range, or ``frame_bytes`` shorter than a header.
    """
    _check_u("stream_id", stream_id, 64)
    if len(frame_bytes) < HEADER_SIZE:
        raise ValueError(f"a frame is at least {HEADER_SIZE} bytes, got {len(frame_bytes)}")
    return frame_bytes[:4] + _U64.pack(stream_id) + frame_bytes[12:]


def _checked_length(out: bytes) -> bytes:
    if len(out) + LENGTH_SIZE > MAX_FRAME_LENGTH:
        raise ValueError(f"a frame of {len(out)} bytes does not fit the 31-bit frame length")
    return out


def frame_with_length(frame_bytes: bytes) -> bytes:
    """Prefix an encoded frame with its TCP length word (R = 0, Frame Length = the frame's
    bytes + 4).

    :param frame_bytes: what :func:`encode` returned.
    :raises ValueError: the frame does not fit the 31-bit length.
    """
    n = len(frame_bytes) + LENGTH_SIZE
    if n > MAX_FRAME_LENGTH:
        raise ValueError(f"a frame of {n} bytes does not fit the 31-bit frame length")
    return _U32.pack(n) + frame_bytes


# --------------------------------------------------------------------------- decoding

def _split_metadata(buf: bytes, offset: int, flags: int, what: str
                    ) -> tuple[bytes | None, int, int]:
    """(metadata or None, metadata type, offset of what follows) at ``offset``."""
    if not flags & FLAG_METADATA:
        return None, 0, offset
    if len(buf) < offset + 4:
        raise FrameDecodeError(f"{what}: the M flag is set but the frame ends before the "
                               "4-byte metadata header")
    n = (buf[offset + 1] << 16) | (buf[offset + 2] << 8) | buf[offset + 3]
    if n < 4:
        raise FrameDecodeError(f"{what}: metadata length {n} is less than its own 4-byte "
                               "header")
    end = offset + n
    if end > len(buf):
        raise FrameDecodeError(f"{what}: metadata length {n} runs past the end of the frame "
                               f"({len(buf) - offset} bytes left)")
    return buf[offset + 4:end], buf[offset], end


def _need(buf: bytes, size: int, what: str) -> None:
    if len(buf) < size:
        raise FrameDecodeError(f"{what} frame of {len(buf)} bytes is shorter than its "
                               f"{size}-byte header and fixed fields")


def _metadata_only(buf: bytes, offset: int, flags: int, what: str
                   ) -> tuple[bytes | None, int]:
    metadata, metadata_type, end = _split_metadata(buf, offset, flags, what)
    if end != len(buf):
        raise FrameDecodeError(f"{what}: {len(buf) - end} bytes after its metadata (this "
                               "frame carries metadata only)")
    return metadata, metadata_type


def decode(buf: bytes) -> Frame:
    """Decode one frame given without the TCP length word.

    :param buf: the frame's bytes (version byte first).
    :returns: the frame.
    :raises UnknownFrameTypeError: the type is not in :class:`FrameType` (or is RESERVED);
        ``ignore`` tells whether the I flag was set.
    :raises FrameDecodeError: anything else malformed: shorter than the 12-byte header or the
        type's fixed fields, a version other than 0, a metadata length under 4 or past the
        frame's end, bytes after the metadata of a metadata-only frame, METADATA_PUSH without
        M. Never another exception, whatever ``buf`` holds.
    """
    if len(buf) < HEADER_SIZE:
        raise FrameDecodeError(f"a frame of {len(buf)} bytes is shorter than the 12-byte header")
    version, flags, ft, sid = _HEADER.unpack_from(buf, 0)
    if version != VERSION:
        raise FrameDecodeError(f"unsupported version {version} (the 2015 draft is version 0)")
    try:
        kind = FrameType(ft)
    except ValueError:
        raise UnknownFrameTypeError(ft, bool(flags & FLAG_IGNORE)) from None
    if kind == FrameType.RESERVED:
        raise UnknownFrameTypeError(ft, bool(flags & FLAG_IGNORE))
    what = kind.name
    o = HEADER_SIZE
    if kind == FrameType.SETUP:
        mimes = []
        for _ in range(2):
            _need(buf, o + 1, what)
            end = o + 1 + buf[o]
            _need(buf, end, what)
            mimes.append(bytes(buf[o + 1:end]))
            o = end
        metadata, mtype, o = _split_metadata(buf, o, flags, what)
        return SetupFrame(metadata_mime_type=mimes[0], data_mime_type=mimes[1],
                          lease=bool(flags & FLAG_LEASE), data=bytes(buf[o:]),
                          metadata=metadata, metadata_type=mtype, stream_id=sid)
    if kind == FrameType.SETUP_ERROR:
        _need(buf, o + 4, what)
        code = _U32.unpack_from(buf, o)[0]
        metadata, mtype, o = _split_metadata(buf, o + 4, flags, what)
        return SetupErrorFrame(error_code=code, data=bytes(buf[o:]), metadata=metadata,
                               metadata_type=mtype, stream_id=sid)
    if kind == FrameType.LEASE:
        _need(buf, o + 16, what)
        time, count = _U64X2.unpack_from(buf, o)
        metadata, mtype = _metadata_only(buf, o + 16, flags, what)
        return LeaseFrame(time=time, number_of_requests=count, metadata=metadata,
                          metadata_type=mtype, stream_id=sid)
    if kind == FrameType.REQUEST_STREAM or kind == FrameType.REQUEST_SUB:
        _need(buf, o + 8, what)
        n = _U64.unpack_from(buf, o)[0]
        metadata, mtype, o = _split_metadata(buf, o + 8, flags, what)
        cls = RequestStreamFrame if kind == FrameType.REQUEST_STREAM else RequestSubFrame
        return cls(stream_id=sid, initial_request_n=n, data=bytes(buf[o:]), metadata=metadata,
                   metadata_type=mtype)
    if kind == FrameType.REQUEST_N:
        _need(buf, o + 8, what)
        n = _U64.unpack_from(buf, o)[0]
        metadata, mtype = _metadata_only(buf, o + 8, flags, what)
        return RequestNFrame(stream_id=sid, request_n=n, metadata=metadata, metadata_type=mtype)
    if kind == FrameType.CANCEL:
        metadata, mtype = _metadata_only(buf, o, flags, what)
        return CancelFrame(stream_id=sid, metadata=metadata, metadata_type=mtype)
    if kind == FrameType.METADATA_PUSH:
        if not flags & FLAG_METADATA:
            raise FrameDecodeError("METADATA_PUSH without the M flag (metadata is always "
                                   "present in it)")
        metadata, mtype = _metadata_only(buf, o, flags, what)
        assert metadata is not None  # (M is set)
        return MetadataPushFrame(metadata=metadata, metadata_type=mtype, stream_id=sid)
    if kind == FrameType.EXT:
        _need(buf, o + 4, what)
        return ExtFrame(stream_id=sid, extended_type=_U32.unpack_from(buf, o)[0], flags=flags,
                        body=bytes(buf[o + 4:]))
    # REQUEST_RESPONSE, REQUEST_FNF, RESPONSE, ERROR: metadata and data
    metadata, mtype, o = _split_metadata(buf, o, flags, what)
    data = bytes(buf[o:])
    if kind == FrameType.RESPONSE:
        return ResponseFrame(stream_id=sid, data=data, metadata=metadata, metadata_type=mtype,
                             follows=bool(flags & FLAG_FOLLOWS),
                             complete=bool(flags & FLAG_COMPLETE))
    if kind == FrameType.ERROR:
        return ErrorFrame(stream_id=sid, data=data, metadata=metadata, metadata_type=mtype)
    if kind == FrameType.REQUEST_RESPONSE:
        return RequestResponseFrame(stream_id=sid, data=data, metadata=metadata,
                                    metadata_type=mtype)
    return RequestFnfFrame(stream_id=sid, data=data, metadata=metadata, metadata_type=mtype)


class FrameLengthError(FrameDecodeError):
    """A TCP length word that cannot be: the R bit set, or a Frame Length under 16.

    :param message: the reason.
    :param frames: the complete frames (without length words) that came before it in the
        bytes fed, to be handled as if they had arrived alone.
    """

    def __init__(self, message: str, frames: list[bytes]) -> None:
        super().__init__(message)
        self.frames = frames


class FrameReader:
    """Splits a TCP byte stream into frames by their 32-bit length words.

    :param max_frame_size: the largest frame accepted, in bytes, counted without the 4-byte
        length word (Frame Length - 4); 12..2^31-5.
    :param first_frame_size: the largest *first* frame accepted (a server's SETUP), in bytes
        likewise; None: ``max_frame_size``. A larger value counts as ``max_frame_size``.
    :raises ValueError: ``max_frame_size`` out of range.
    """

    __slots__ = ("max_frame_size", "first_frame_size", "_buffer", "_first")

    def __init__(self, max_frame_size: int, first_frame_size: int | None = None) -> None:
        if not HEADER_SIZE <= max_frame_size <= MAX_FRAME_LENGTH - LENGTH_SIZE:
            raise ValueError(f"max_frame_size must be in [{HEADER_SIZE}, "
                             f"{MAX_FRAME_LENGTH - LENGTH_SIZE}] bytes, got {max_frame_size!r}")
        self.max_frame_size = max_frame_size
        self.first_frame_size = max_frame_size if first_frame_size is None else \
            min(first_frame_size, max_frame_size)
        self._buffer = bytearray()
        self._first = True

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned in a frame."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """Add bytes; return the frames now complete, without their length words.

        :raises FrameLengthError: (a :class:`~rsocket_tx.core.errors.FrameDecodeError`) a
            length word with the R bit set, or a Frame Length under 16 (a frame cannot be
            shorter than its header); its ``frames`` holds the complete frames before it.
        :raises FrameTooLargeError: a Frame Length past ``max_frame_size`` + 4; its
            ``frames`` holds the complete frames that came before it.
        """
        buf = self._buffer
        buf += data
        frames: list[bytes] = []
        o = 0
        while len(buf) - o >= LENGTH_SIZE:
            word = _U32.unpack_from(buf, o)[0]
            if word & 0x80000000:
                del buf[:o]
                raise FrameLengthError("the reserved R bit of the frame length is set", frames)
            if word < LENGTH_SIZE + HEADER_SIZE:
                del buf[:o]
                raise FrameLengthError(
                    f"frame length {word} is shorter than the 16-byte header", frames)
            limit = self.first_frame_size if self._first else self.max_frame_size
            if word - LENGTH_SIZE > limit:
                del buf[:o]
                what = "first frame" if self._first else "frame"
                raise FrameTooLargeError(
                    f"{what} length {word} exceeds the max {what} size of {limit} "
                    "bytes (+4 for the length word)", frames)
            if len(buf) - o < word:
                break
            frames.append(bytes(buf[o + LENGTH_SIZE:o + word]))
            self._first = False
            o += word
        del buf[:o]
        return frames


# --------------------------------------------------------------------------- sniffing

def sniff(prefix: bytes) -> Sniff:
    """Whether a TCP connection's first bytes begin a 2015-draft SETUP frame (the contract of
    :mod:`rsocket_tx.mux.sniff`).

    Checked byte by byte, deciding on the first 16 (the header with its length word):
    R = 0 and Frame Length >= 18 (the smallest SETUP: header and two empty MIME types),
    Version 0, the I flag clear, Frame Type 0x0001 and a stream id of eight zero bytes.

    An RSocket 1.0 SETUP or RESUME differs at byte 7 at the latest (0x04-0x07 or 0x34-0x37
    there, where this SETUP has 0x01); the Jini "Jmux" header at byte 4 (version 1); a TLS
    ClientHello and an HTTP request (``GET /...``) have a non-zero byte among 4-6 or 8-15.

    :param prefix: the bytes received so far (any length).
    :returns: :attr:`~rsocket_tx.mux.sniff.Sniff.MATCH`,
        :attr:`~rsocket_tx.mux.sniff.Sniff.NO_MATCH` or
        :attr:`~rsocket_tx.mux.sniff.Sniff.NEED_MORE` (fewer than 16 bytes, all plausible).
    """
    n = len(prefix)
    if n >= 1 and prefix[0] & 0x80:
        return Sniff.NO_MATCH
    if n >= 4 and _U32.unpack_from(prefix, 0)[0] < LENGTH_SIZE + HEADER_SIZE + 2:
        return Sniff.NO_MATCH
    if n >= 5 and prefix[4] != VERSION:
        return Sniff.NO_MATCH
    if n >= 6 and prefix[5] & FLAG_IGNORE:
        return Sniff.NO_MATCH
    if n >= 7 and prefix[6] != 0:
        return Sniff.NO_MATCH
    if n >= 8 and prefix[7] != FrameType.SETUP:
        return Sniff.NO_MATCH
    if any(prefix[8:SNIFF_SIZE]):
        return Sniff.NO_MATCH
    return Sniff.MATCH if n >= SNIFF_SIZE else Sniff.NEED_MORE
