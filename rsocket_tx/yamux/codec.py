"""The yamux wire format (HashiCorp's ``spec.md``, "Framing"): a 12-byte header, big-endian,
then (Data only) ``length`` bytes of data.

=========  =====  ==========================================================================
field      bytes  meaning
=========  =====  ==========================================================================
Version    1      always 0 (:data:`VERSION`)
Type       1      :class:`FrameType`: 0 Data, 1 Window Update, 2 Ping, 3 Go Away
Flags      2      :class:`Flags`: SYN 1, ACK 2, FIN 4, RST 8
StreamID   4      the stream; 0 is the session's (Ping and Go Away use it, nothing else does)
Length     4      Data: bytes that follow; Window Update: the delta added to the window;
                  Ping: an opaque value echoed back; Go Away: the :class:`GoAwayCode`
=========  =====  ==========================================================================

Sans-IO: no Twisted, no clock. :class:`FrameDecoder` cuts a byte stream into :class:`Frame`\\ s
and refuses (:class:`~rsocket_tx.yamux.errors.ProtocolError`) anything outside that table: a
version other than 0, an unknown type, a flag bit other than the four, a Ping or Go Away with a
stream id other than 0, a Data or Window Update on stream 0, a Ping with neither or both of SYN
and ACK, and a Data longer than its ``max_frame_length`` (checked on the header, before its body
is held). :func:`sniff` tells a yamux client's first bytes apart on a shared port.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from ..mux import Sniff
from .errors import ProtocolError

__all__ = [
    "HEADER_SIZE",
    "INITIAL_WINDOW",
    "MAX_U32",
    "SNIFF_SIZE",
    "VERSION",
    "WEBSOCKET_SUBPROTOCOL",
    "Flags",
    "Frame",
    "FrameDecoder",
    "FrameType",
    "GoAwayCode",
    "encode",
    "encode_header",
    "sniff",
]

#: The protocol version (spec.md "Version Field"): always 0.
VERSION = 0
#: Bytes of a frame header.
HEADER_SIZE = 12
#: Every stream's window at its start, both ways (spec.md "Flow Control": 256 KiB), bytes.
INITIAL_WINDOW = 256 * 1024
#: The largest value of a 32-bit field (a stream id, a length, a window).
MAX_U32 = 0xFFFFFFFF
#: Bytes :func:`sniff` needs to decide: one header.
SNIFF_SIZE = HEADER_SIZE
#: The WebSocket subprotocol name yamux is served under (one-port server; not in the spec).
WEBSOCKET_SUBPROTOCOL = "yamux"

_HEADER = struct.Struct(">BBHII")


class FrameType(enum.IntEnum):
    """spec.md "Type Field"."""

    DATA = 0
    WINDOW_UPDATE = 1
    PING = 2
    GO_AWAY = 3


class Flags(enum.IntFlag):
    """spec.md "Flag Field"."""

    NONE = 0
    #: opens a stream (Data, Window Update); a Ping request
    SYN = 0x1
    #: accepts a stream (Data, Window Update); a Ping response
    ACK = 0x2
    #: half-closes a stream: the sender sends no more data
    FIN = 0x4
    #: resets a stream at once
    RST = 0x8


#: every flag bit the spec defines
_ALL_FLAGS = 0xF


class GoAwayCode(enum.IntEnum):
    """spec.md "Session termination": the Length of a Go Away."""

    NORMAL = 0
    PROTOCOL_ERROR = 1
    INTERNAL_ERROR = 2


@dataclass(slots=True)
class Frame:
    """One frame.

    :ivar type: the :class:`FrameType`.
    :ivar flags: the :class:`Flags` (an int of them).
    :ivar stream_id: the stream (0: the session), 0 .. 2^32-1.
    :ivar length: the header's Length field (Data: ``len(data)``; see the module docstring).
    :ivar data: Data only: the bytes that follow the header; ``b""`` otherwise.
    """

    type: FrameType
    flags: int
    stream_id: int
    length: int
    data: bytes = b""


def encode_header(frame_type: int, flags: int, stream_id: int, length: int) -> bytes:
    """The 12 bytes of one header.

    :param frame_type: a :class:`FrameType`.
    :param flags: :class:`Flags` bits.
    :param stream_id: 0 .. 2^32-1.
    :param length: 0 .. 2^32-1 (Data: the bytes that follow).
    :raises struct.error: a field out of its range.
    """
    return _HEADER.pack(VERSION, frame_type, flags, stream_id, length)


def encode(frame: Frame) -> bytes:
    """The bytes of ``frame`` (header, then its data).

    :raises ValueError: a Data whose ``length`` is not ``len(data)``, or data on another type.
    """
    if frame.type is FrameType.DATA:
        if frame.length != len(frame.data):
            raise ValueError(f"a Data frame's length ({frame.length}) must be len(data) "
                             f"({len(frame.data)})")
    elif frame.data:
        raise ValueError(f"only Data frames carry data, not {frame.type.name}")
    return encode_header(frame.type, frame.flags, frame.stream_id, frame.length) + frame.data


def check_header(frame_type: int, flags: int, stream_id: int, length: int,
                 max_frame_length: int) -> FrameType:
    """Check one received header against spec.md's table.

    :returns: its :class:`FrameType`.
    :raises ProtocolError: what is wrong, in words.
    """
    if frame_type > FrameType.GO_AWAY:
        raise ProtocolError(f"unknown frame type {frame_type}")
    kind = FrameType(frame_type)
    if flags & ~_ALL_FLAGS:
        raise ProtocolError(f"{kind.name} with undefined flag bits 0x{flags:04x}")
    if kind in (FrameType.PING, FrameType.GO_AWAY):
        if stream_id != 0:
            raise ProtocolError(f"{kind.name} on stream {stream_id} (spec.md: always stream 0)")
        if kind is FrameType.PING and (flags & (Flags.SYN | Flags.ACK)) not in (Flags.SYN,
                                                                                 Flags.ACK):
            raise ProtocolError(f"PING with flags 0x{flags:04x}: it needs SYN (a request) or "
                                f"ACK (a response), one of them")
        if flags & ~(Flags.SYN | Flags.ACK) or (kind is FrameType.GO_AWAY and flags):
            raise ProtocolError(f"{kind.name} with stream flags 0x{flags:04x}")
    elif stream_id == 0:
        raise ProtocolError(f"{kind.name} on stream 0 (the session's id)")
    if kind is FrameType.DATA and length > max_frame_length:
        raise ProtocolError(f"DATA of {length} bytes on stream {stream_id} exceeds the "
                            f"max_frame_length of {max_frame_length} bytes")
    return kind


class FrameDecoder:
    """Cuts a byte stream into frames (any split of the input).

    :param max_frame_length: the longest Data body accepted, bytes (checked on the header:
        a longer one is a :class:`~rsocket_tx.yamux.errors.ProtocolError` before any of its
        body is held).
    :param stream_data: hand a Data frame's body on as it arrives, in pieces: each piece is a
        :class:`Frame` of type Data whose ``length`` is its own; the first piece carries the
        flags that open (SYN, ACK), the last those that close (FIN, RST), and the pieces of one
        frame join to its body. A session needs no Data whole (hashicorp/yamux sends frames as
        large as the window): its data reaches the application, and the window comes back,
        while the rest is on the way. False (the default): whole frames only.

    :ivar buffered: bytes held (an incomplete frame, or a header), at most ``HEADER_SIZE +
        max_frame_length``.
    :ivar error: the :class:`~rsocket_tx.yamux.errors.ProtocolError` the stream broke with,
        once it has (the frames before it were returned); None until then.
    """

    __slots__ = ("max_frame_length", "stream_data", "error", "_buffer", "_header", "_started")

    def __init__(self, max_frame_length: int, stream_data: bool = False) -> None:
        self.max_frame_length = max_frame_length
        self.stream_data = stream_data
        self.error: ProtocolError | None = None
        self._buffer = bytearray()
        # a Data header whose body is still to come: (type, flags, stream id, bytes left)
        self._header: tuple[FrameType, int, int, int] | None = None
        self._started = False  # (stream_data) a piece of the current Data was handed on

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[Frame]:
        """Take ``data``; return the frames it completes, in order.

        Bytes that are no yamux frame (see the module docstring) break the stream: the frames
        before them are returned and :attr:`error` is set; the decoder is then unusable.

        :raises ProtocolError: the stream broke before any frame of this call (or broke
            before, in an earlier call).
        """
        if self.error is not None:
            raise self.error
        buf = self._buffer
        buf += data
        frames: list[Frame] = []
        pos = 0
        end = len(buf)
        header = self._header
        try:
            while True:
                if header is None:
                    if end - pos < HEADER_SIZE:
                        break
                    version, frame_type, flags, stream_id, length = _HEADER.unpack_from(buf,
                                                                                         pos)
                    if version != VERSION:
                        raise ProtocolError(f"unsupported version {version} (spec.md: always "
                                            f"0)")
                    kind = check_header(frame_type, flags, stream_id, length,
                                        self.max_frame_length)
                    pos += HEADER_SIZE
                    if kind is not FrameType.DATA:
                        frames.append(Frame(kind, flags, stream_id, length))
                        continue
                    header = (kind, flags, stream_id, length)
                length = header[3]
                if end - pos < length:
                    if not self.stream_data or end == pos:
                        break
                    # a piece: the flags that open on the first, none after
                    piece = end - pos
                    flags = 0 if self._started else header[1] & (Flags.SYN | Flags.ACK)
                    frames.append(Frame(header[0], flags, header[2], piece,
                                        bytes(buf[pos:end])))
                    pos = end
                    self._started = True
                    header = (header[0], header[1], header[2], length - piece)
                    break
                flags = header[1] & (Flags.FIN | Flags.RST) if self._started else header[1]
                frames.append(Frame(header[0], flags, header[2], length,
                                    bytes(buf[pos:pos + length])))
                pos += length
                header = None
                self._started = False
        except ProtocolError as error:
            self.error = error
            buf.clear()
            if not frames:
                raise
            return frames
        self._header = header
        if pos:
            del buf[:pos]
        return frames


def sniff(prefix: bytes) -> Sniff:
    """Could ``prefix`` begin a yamux connection from a client (the contract of
    :mod:`rsocket_tx.mux.sniff`)?

    yamux has no magic and no handshake; its first frame from a client is what the rule
    recognises, byte by byte: Version 0; Type Data (0), Window Update (1) or Ping (2); Flags
    exactly SYN (``00 01``, or ``00 05``: SYN with FIN on a Data or Window Update); for Data
    and Window Update an odd stream id (spec.md "StreamID Field": the client's), for Ping
    stream id 0. It decides on the full 12-byte header (the Length is not checked).

    Limits: a client whose first frame is anything else (a Go Away, a Window Update without
    SYN, a stream of the server's parity) is not recognised, and neither is a yamux *server*
    speaking first. It never collides with the other protocols of the one-port server: byte 3
    (the low byte of the flags, 1 or 5) is 0 in an RSocket 1.0 SETUP or RESUME (its stream id),
    byte 0 rules out TLS (``16``), Jini (``4A``), the RS-network draft (``F1``) and HTTP
    (ASCII). The 2015 draft's sniffer decides on 16 bytes, and a yamux client's first 16
    bytes can pass it (``00 01 00 01 00 00 00 01 00 00 00 00`` then a Data header with no
    flags reads as a SETUP of length 65,537 on stream 0); the one-port server takes the first
    MATCH, and this rule gives it at 12 bytes, before that sniffer can. The other way round a
    2015 SETUP is never yamux: its length (at least 18, bytes 0-3) has byte 3 of 1 or 5 only
    when byte 2 is not 0.

    :param prefix: the first bytes the client sent (any length, possibly empty).
    :returns: :attr:`~rsocket_tx.mux.Sniff.MATCH`, :attr:`~rsocket_tx.mux.Sniff.NO_MATCH`
        or :attr:`~rsocket_tx.mux.Sniff.NEED_MORE`. Never raises.
    """
    n = len(prefix)
    if n >= 1 and prefix[0] != VERSION:
        return Sniff.NO_MATCH
    if n >= 2 and prefix[1] > FrameType.PING:
        return Sniff.NO_MATCH
    if n >= 3 and prefix[2] != 0:
        return Sniff.NO_MATCH
    if n >= 4:
        allowed = (Flags.SYN,) if prefix[1] == FrameType.PING else (Flags.SYN,
                                                                      Flags.SYN | Flags.FIN)
        if prefix[3] not in allowed:
            return Sniff.NO_MATCH
    if n >= 8:
        stream_id = int.from_bytes(prefix[4:8], "big")
        if prefix[1] == FrameType.PING:
            if stream_id != 0:
                return Sniff.NO_MATCH
        elif not stream_id & 1:
            return Sniff.NO_MATCH
    return Sniff.MATCH if n >= SNIFF_SIZE else Sniff.NEED_MORE
