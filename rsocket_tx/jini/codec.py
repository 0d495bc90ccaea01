"""Codec of the Jini ERI multiplexing protocol ("Jmux").

Implements Jini ERI Multiplexing Protocol §Message Structure, §ClientConnectionHeader Message,
§ServerConnectionHeader Message and the section of every message type. All integers are
unsigned and big endian.

Each stream (client to server, server to client) is an 8-byte connection header followed by
messages. A message is a 4-byte header, optionally followed by ``length`` bytes::

    connection header (8 bytes)        message (4 bytes + length)
    +------+------+------+------+      +--------+--------+--------+--------+---------
    | 'J'  | 'm'  | 'u'  | 'x'  |      | type   | 0 sid  |   16-bit field  | data...
    +------+------+------+------+      +--------+--------+--------+--------+---------
    | 0x01 | initialRation| 0x00 |
    +------+------+------+------+

The first byte of a message must match exactly one bit pattern of the table (``x``: a bit
that may be 0 or 1); any other value is a protocol violation:

==============  ============  =================  =========================================
bit pattern     hexadecimal   message            bytes 1 .. 3, body
==============  ============  =================  =========================================
``00000000``    00            NoOperation        0x00, length, data (ignored)
``00000010``    02            Shutdown           0x00, length, detail (UTF-8)
``00000100``    04            Ping               0x00, cookie
``00000110``    06            PingAck            0x00, cookie
``00001000``    08            Error              0x00, length, detail (UTF-8)
``0001sss0``    10-1E         IncrementRation    sessionID, increment (<< 2 * shift)
``001000p0``    20, 22        Abort              sessionID, length, detail (UTF-8)
``00110000``    30            Close              sessionID, 0x0000
``01000000``    40            Acknowledgment     sessionID, 0x0000
``100ocea0``    80-9E         Data               sessionID, length, data
==============  ============  =================  =========================================

``p`` is Abort's ``partial`` flag; ``o``, ``c``, ``e``, ``a`` are Data's ``open``, ``close``,
``eof`` and ``ackRequired`` flags (``close`` and ``ackRequired`` only with ``eof``). A session
identifier is 7 bits: the top bit of its byte is reserved and must be 0 (a fork of River uses
it for 256 sessions; a conforming endpoint refuses it). Reserved bytes must be 0.

Which *side* may send a message, and in which session state, is the connection's business
(:mod:`rsocket_tx.jini.connection`); this module only knows bit patterns.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from struct import Struct
from typing import ClassVar

from ..mux.sniff import Sniff
from .errors import MessageDecodeError

__all__ = [
    "MAGIC",
    "VERSION",
    "CONNECTION_HEADER_SIZE",
    "MESSAGE_HEADER_SIZE",
    "MAX_SESSION_ID",
    "MAX_SESSIONS",
    "MAX_LENGTH",
    "MAX_RATION",
    "RATION_UNIT",
    "MessageType",
    "DATA_OPEN",
    "DATA_CLOSE",
    "DATA_EOF",
    "DATA_ACK_REQUIRED",
    "ABORT_PARTIAL",
    "ConnectionHeader",
    "ClientConnectionHeader",
    "ServerConnectionHeader",
    "Message",
    "NoOperation",
    "Shutdown",
    "Ping",
    "PingAck",
    "Error",
    "IncrementRation",
    "Abort",
    "Close",
    "Acknowledgment",
    "Data",
    "encode",
    "decode",
    "decode_connection_header",
    "split_increment",
    "MessageDecoder",
    "WEBSOCKET_SUBPROTOCOL",
    "sniff",
]

#: The magic number that starts both connection headers (ASCII "Jmux").
MAGIC = b"Jmux"
#: The only protocol version defined.
VERSION = 1
#: Bytes of a connection header.
CONNECTION_HEADER_SIZE = 8
#: Bytes of a message header (the body, if any, follows).
MESSAGE_HEADER_SIZE = 4
#: The largest session identifier (7 bits).
MAX_SESSION_ID = 0x7F
#: Sessions that can be established at once over one connection.
MAX_SESSIONS = MAX_SESSION_ID + 1
#: The largest ``length`` (and ``cookie``, ``increment``) of a message: 16 bits.
MAX_LENGTH = 0xFFFF
#: The largest ration value, in bytes (Jini ERI Multiplexing Protocol §Flow Control).
MAX_RATION = 0x7FFFFFFF
#: A connection header's ``initialRation`` counts units of this many bytes.
RATION_UNIT = 256


class MessageType(enum.IntEnum):
    """The first byte of a message header with every flag and field bit clear
    (Jini ERI Multiplexing Protocol §Message Structure)."""

    NO_OPERATION = 0x00
    SHUTDOWN = 0x02
    PING = 0x04
    PING_ACK = 0x06
    ERROR = 0x08
    INCREMENT_RATION = 0x10
    ABORT = 0x20
    CLOSE = 0x30
    ACKNOWLEDGMENT = 0x40
    DATA = 0x80


#: Data flag bits of the first byte.
DATA_OPEN = 0x10
DATA_CLOSE = 0x08
DATA_EOF = 0x04
DATA_ACK_REQUIRED = 0x02
#: Abort's partial flag bit of the first byte.
ABORT_PARTIAL = 0x02

_HEADER = Struct(">BBH")
_CONN_HEADER = Struct(">4sBHB")


# --------------------------------------------------------------------------------------------
# connection headers


@dataclass(slots=True, frozen=True)
class ConnectionHeader:
    """A connection header (8 bytes: "Jmux", version 1, ``initialRation``, reserved 0).

    :ivar initial_ration: the 16-bit ``initialRation`` item: the initial ration of every new
        session is ``initial_ration * 256`` bytes, or unlimited when it is 0.
    """

    initial_ration: int

    @property
    def ration(self) -> int | None:
        """The initial ration in bytes (``initial_ration * 256``), or None for unlimited."""
        return self.initial_ration * RATION_UNIT if self.initial_ration else None

    @classmethod
    def for_ration(cls, ration: int | None) -> ConnectionHeader:
        """Build the header that announces ``ration`` bytes.

        :param ration: bytes, a multiple of 256 in [256, 16,776,960]; None or 0 for unlimited.
        :raises ValueError: the ration is not representable.
        """
        if not ration:
            return cls(0)
        if ration % RATION_UNIT or not RATION_UNIT <= ration <= MAX_LENGTH * RATION_UNIT:
            raise ValueError(
                f"an initial ration must be a multiple of {RATION_UNIT} in "
                f"[{RATION_UNIT}, {MAX_LENGTH * RATION_UNIT}] bytes, or 0/None for unlimited, "
                f"got {ration!r}")
        return cls(ration // RATION_UNIT)

    def encode(self) -> bytes:
        """The 8 bytes of this header.

        :raises ValueError: ``initial_ration`` is not a 16-bit integer.
        """
        _check_u16("initialRation", self.initial_ration)
        return _CONN_HEADER.pack(MAGIC, VERSION, self.initial_ration, 0)


@dataclass(slots=True, frozen=True)
class ClientConnectionHeader(ConnectionHeader):
    """*ClientConnectionHeader*: the first 8 bytes the client sends (§ClientConnectionHeader
    Message); sets the client's inbound and the server's outbound initial ration."""


@dataclass(slots=True, frozen=True)
class ServerConnectionHeader(ConnectionHeader):
    """*ServerConnectionHeader*: the first 8 bytes the server sends (§ServerConnectionHeader
    Message); sets the server's inbound and the client's outbound initial ration."""


def decode_connection_header(data: bytes, kind: type[ConnectionHeader]) -> ConnectionHeader:
    """Decode exactly one 8-byte connection header.

    :param data: the 8 bytes.
    :param kind: :class:`ClientConnectionHeader` or :class:`ServerConnectionHeader`.
    :raises MessageDecodeError: not 8 bytes, bad magic number, a version other than 1, or a
        reserved byte that is not 0.
    """
    if len(data) != CONNECTION_HEADER_SIZE:
        raise MessageDecodeError(
            f"a connection header is {CONNECTION_HEADER_SIZE} bytes, got {len(data)}")
    magic, version, ration, reserved = _CONN_HEADER.unpack(data)
    if magic != MAGIC:
        raise MessageDecodeError(f"bad magic number: {magic.hex()} (expected 4a6d7578 'Jmux')")
    if version != VERSION:
        raise MessageDecodeError(f"unsupported protocol version: {version} (expected 1)")
    if reserved:
        raise MessageDecodeError(
            f"reserved byte of the connection header is 0x{reserved:02x}, must be 0")
    return kind(ration)


# --------------------------------------------------------------------------------------------
# messages


class Message:
    """Base class of every message; ``message_type`` names the type."""

    __slots__ = ()
    message_type: ClassVar[MessageType]

    def encode(self) -> bytes:  # pragma: no cover - every subclass overrides it
        """The bytes of this message (header and body)."""
        raise NotImplementedError


class SessionMessage(Message):
    """A message about one session (first byte 0x10 .. 0xFF); ``session_id`` is 0 .. 127."""

    __slots__ = ()
    session_id: int


@dataclass(slots=True)
class NoOperation(Message):
    """*NoOperation* (0x00): ignored by the receiver (§NoOperation Message).

    Apache River 2.2 fails its connection on a NoOperation with a non-empty body: send only
    an empty one to a River peer.
    """

    message_type: ClassVar[MessageType] = MessageType.NO_OPERATION
    data: bytes = b""

    def encode(self) -> bytes:
        _check_u16("length", len(self.data))
        return _HEADER.pack(0x00, 0, len(self.data)) + self.data


@dataclass(slots=True)
class Shutdown(Message):
    """*Shutdown* (0x02): the server's graceful last message; ``detail`` is UTF-8 text
    (§Shutdown Message)."""

    message_type: ClassVar[MessageType] = MessageType.SHUTDOWN
    detail: bytes = b""

    def encode(self) -> bytes:
        _check_u16("length", len(self.detail))
        return _HEADER.pack(0x02, 0, len(self.detail)) + self.detail


@dataclass(slots=True)
class Ping(Message):
    """*Ping* (0x04): asks for a *PingAck* with the same 16-bit ``cookie`` (§Ping Message)."""

    message_type: ClassVar[MessageType] = MessageType.PING
    cookie: int = 0

    def encode(self) -> bytes:
        _check_u16("cookie", self.cookie)
        return _HEADER.pack(0x04, 0, self.cookie)


@dataclass(slots=True)
class PingAck(Message):
    """*PingAck* (0x06): answers one *Ping*, echoing its ``cookie`` (§PingAck Message)."""

    message_type: ClassVar[MessageType] = MessageType.PING_ACK
    cookie: int = 0

    def encode(self) -> bytes:
        _check_u16("cookie", self.cookie)
        return _HEADER.pack(0x06, 0, self.cookie)


@dataclass(slots=True)
class Error(Message):
    """*Error* (0x08): the sender detected a protocol violation; its last message; ``detail``
    is UTF-8 text (§Error Message)."""

    message_type: ClassVar[MessageType] = MessageType.ERROR
    detail: bytes = b""

    def encode(self) -> bytes:
        _check_u16("length", len(self.detail))
        return _HEADER.pack(0x08, 0, len(self.detail)) + self.detail


@dataclass(slots=True)
class IncrementRation(SessionMessage):
    """*IncrementRation* (``0001sss0``): the sender can receive ``increment << (2 * shift)``
    more bytes for the session (§IncrementRation Message).

    :ivar shift: 3 bits, 0 .. 7.
    :ivar increment: 16 bits.
    """

    message_type: ClassVar[MessageType] = MessageType.INCREMENT_RATION
    session_id: int
    increment: int
    shift: int = 0

    @property
    def amount(self) -> int:
        """The ration increment in bytes: ``increment << (2 * shift)``."""
        return self.increment << (2 * self.shift)

    def encode(self) -> bytes:
        _check_session(self.session_id)
        _check_u16("increment", self.increment)
        if not 0 <= self.shift <= 7:
            raise ValueError(f"shift must be in [0, 7], got {self.shift!r}")
        return _HEADER.pack(0x10 | (self.shift << 1), self.session_id, self.increment)


@dataclass(slots=True)
class Abort(SessionMessage):
    """*Abort* (``001000p0``): terminates the session abruptly; ``partial`` (server only) says
    the request may have been partially processed; ``detail`` is UTF-8 text (§Abort Message)."""

    message_type: ClassVar[MessageType] = MessageType.ABORT
    session_id: int
    partial: bool = False
    detail: bytes = b""

    def encode(self) -> bytes:
        _check_session(self.session_id)
        _check_u16("length", len(self.detail))
        op = 0x20 | (ABORT_PARTIAL if self.partial else 0)
        return _HEADER.pack(op, self.session_id, len(self.detail)) + self.detail


@dataclass(slots=True)
class Close(SessionMessage):
    """*Close* (0x30): the server is done with the session in the normal fashion (§Close
    Message)."""

    message_type: ClassVar[MessageType] = MessageType.CLOSE
    session_id: int

    def encode(self) -> bytes:
        _check_session(self.session_id)
        return _HEADER.pack(0x30, self.session_id, 0)


@dataclass(slots=True)
class Acknowledgment(SessionMessage):
    """*Acknowledgment* (0x40): the client is done processing the response (§Acknowledgment
    Message)."""

    message_type: ClassVar[MessageType] = MessageType.ACKNOWLEDGMENT
    session_id: int

    def encode(self) -> bytes:
        _check_session(self.session_id)
        return _HEADER.pack(0x40, self.session_id, 0)


@dataclass(slots=True)
class Data(SessionMessage):
    """*Data* (``100ocea0``): the next fragment of the session's request (client) or response
    (server) data (§Data Message).

    :ivar open: client only: establishes the session.
    :ivar close: server only, with ``eof``: also closes the session (as a *Close* would).
    :ivar eof: the last fragment: the sender is finished with the session.
    :ivar ack_required: server only, with ``eof``: asks for an *Acknowledgment*.
    """

    message_type: ClassVar[MessageType] = MessageType.DATA
    session_id: int
    data: bytes = b""
    open: bool = False
    close: bool = False
    eof: bool = False
    ack_required: bool = False

    @property
    def flags(self) -> int:
        """The first byte of the message."""
        return (0x80 | (DATA_OPEN if self.open else 0) | (DATA_CLOSE if self.close else 0)
                | (DATA_EOF if self.eof else 0) | (DATA_ACK_REQUIRED if self.ack_required else 0))

    def encode(self) -> bytes:
        """:raises ValueError: a field is out of range, or close/ackRequired without eof."""
        _check_session(self.session_id)
        _check_u16("length", len(self.data))
        if (self.close or self.ack_required) and not self.eof:
            raise ValueError("Data: close and ackRequired must only be set with eof")
        return _HEADER.pack(self.flags, self.session_id, len(self.data)) + self.data


def encode(message: Message | ConnectionHeader) -> bytes:
    """Encode one message or connection header.

    :raises ValueError: a field is out of range (session id > 127, a body longer than 65,535
        bytes, a 16-bit field out of range, a Data with close/ackRequired but no eof).
    """
    return message.encode()


def split_increment(amount: int) -> list[tuple[int, int]]:
    """Split a ration increment into the fewest ``(shift, increment)`` pairs whose
    ``increment << (2 * shift)`` values add up to exactly ``amount`` bytes.

    :param amount: bytes, in [1, 2^31 - 1].
    :raises ValueError: ``amount`` is out of range.
    """
    if not 1 <= amount <= MAX_RATION:
        raise ValueError(f"a ration increment must be in [1, {MAX_RATION}] bytes, got {amount!r}")
    parts = []
    while amount:
        shift = 0
        while shift < 7 and (amount >> (2 * shift)) > MAX_LENGTH:
            shift += 1
        increment = min(amount >> (2 * shift), MAX_LENGTH)
        parts.append((shift, increment))
        amount -= increment << (2 * shift)
    return parts


# --------------------------------------------------------------------------------------------
# decoding


def _bad_header(header: bytes, why: str) -> MessageDecodeError:
    return MessageDecodeError(f"bad message header {header.hex()}: {why}")


def _decode_header(header: bytes) -> tuple[int, int, int]:
    """Check the 4 header bytes against the table; return (op, byte1, field16).

    :raises MessageDecodeError: the header matches no bit pattern of the table.
    """
    op, b1, field = _HEADER.unpack(header)
    if op & 0x80:
        if op & 0xE1 != 0x80:
            raise _bad_header(header, f"first byte 0x{op:02x} matches no message type")
        if b1 & 0x80:
            raise _bad_header(header, "the reserved top bit of the session byte is set")
        if op & (DATA_CLOSE | DATA_ACK_REQUIRED) and not op & DATA_EOF:
            raise _bad_header(header, "Data with close or ackRequired but without eof")
        return op, b1, field
    if op & 0xF1 == 0x10 or op & 0xFD == 0x20:  # IncrementRation, Abort
        if b1 & 0x80:
            raise _bad_header(header, "the reserved top bit of the session byte is set")
        return op, b1, field
    if op in (0x30, 0x40):  # Close, Acknowledgment
        if b1 & 0x80:
            raise _bad_header(header, "the reserved top bit of the session byte is set")
        if field:
            raise _bad_header(header, "reserved bytes 2-3 are not 0")
        return op, b1, field
    if op in (0x00, 0x02, 0x04, 0x06, 0x08):
        if b1:
            raise _bad_header(header, "reserved byte 1 is not 0")
        return op, b1, field
    raise _bad_header(header, f"first byte 0x{op:02x} matches no message type")


def _has_body(op: int) -> bool:
    return op in (0x00, 0x02, 0x08) or op & 0xFD == 0x20 or bool(op & 0x80)


def _build(op: int, b1: int, field: int, body: bytes) -> Message:
    if op & 0x80:
        return Data(b1, body, open=bool(op & DATA_OPEN), close=bool(op & DATA_CLOSE),
                    eof=bool(op & DATA_EOF), ack_required=bool(op & DATA_ACK_REQUIRED))
    if op & 0xF1 == 0x10:
        return IncrementRation(b1, field, (op >> 1) & 0x07)
    if op & 0xFD == 0x20:
        return Abort(b1, bool(op & ABORT_PARTIAL), body)
    if op == 0x30:
        return Close(b1)
    if op == 0x40:
        return Acknowledgment(b1)
    if op == 0x04:
        return Ping(field)
    if op == 0x06:
        return PingAck(field)
    if op == 0x00:
        return NoOperation(body)
    if op == 0x02:
        return Shutdown(body)
    return Error(body)


def decode(data: bytes) -> Message:
    """Decode exactly one message (header and body).

    :raises MessageDecodeError: the header matches no bit pattern of the table, or ``data`` is
        not exactly one message long.
    """
    if len(data) < MESSAGE_HEADER_SIZE:
        raise MessageDecodeError(f"a message is at least 4 bytes, got {len(data)}")
    op, b1, field = _decode_header(bytes(data[:4]))
    body_length = field if _has_body(op) else 0
    if len(data) != MESSAGE_HEADER_SIZE + body_length:
        raise MessageDecodeError(
            f"message of {len(data)} bytes, its header announces {4 + body_length}")
    return _build(op, b1, field, bytes(data[4:]))


class MessageDecoder:
    """Incremental decoder of one direction of a connection: the connection header, then
    messages, from bytes cut anywhere.

    Feed bytes with :meth:`receive_data`, then call :meth:`next_message` until it returns None.
    A message is returned only once all its bytes have arrived; the largest message is
    65,539 bytes, so at most that much is ever buffered beyond what the caller fed in one call.

    :param header: the connection header expected first: :class:`ClientConnectionHeader`
        (we are the server), :class:`ServerConnectionHeader` (we are the client), or None to
        decode messages only.
    """

    __slots__ = ("_buf", "_pos", "_header", "_failed")

    def __init__(self, header: type[ConnectionHeader] | None) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._header = header
        self._failed: MessageDecodeError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as a message."""
        return len(self._buf) - self._pos

    @property
    def expecting_header(self) -> bool:
        """True until the connection header has been decoded."""
        return self._header is not None

    def receive_data(self, data: bytes) -> None:
        """Add received bytes (cut anywhere)."""
        if self._pos and self._pos * 2 >= len(self._buf):
            del self._buf[:self._pos]
            self._pos = 0
        self._buf += data

    def next_message(self) -> Message | ConnectionHeader | None:
        """The next complete message (or the connection header first), or None if more bytes
        are needed.

        :raises MessageDecodeError: the bytes are not a message of the table (raised again on
            every later call: the stream cannot be resynchronized). A bad magic number is
            reported as soon as its first wrong byte arrives.
        """
        if self._failed is not None:
            raise self._failed
        try:
            return self._next()
        except MessageDecodeError as exc:
            self._failed = exc
            raise

    def _next(self) -> Message | ConnectionHeader | None:
        buf = self._buf
        pos = self._pos
        have = len(buf) - pos
        kind = self._header
        if kind is not None:
            seen = bytes(buf[pos:pos + min(have, 4)])
            if seen != MAGIC[:len(seen)]:
                raise MessageDecodeError(
                    f"bad magic number: {seen.hex()} (expected 4a6d7578 'Jmux')")
            if have < CONNECTION_HEADER_SIZE:
                return None
            header = decode_connection_header(bytes(buf[pos:pos + CONNECTION_HEADER_SIZE]), kind)
            self._pos = pos + CONNECTION_HEADER_SIZE
            self._header = None
            return header
        if have < MESSAGE_HEADER_SIZE:
            return None
        op = buf[pos]
        b1 = buf[pos + 1]
        if op & 0xE1 == 0x80 and b1 < 0x80 and (op & DATA_EOF or not op & 0x0A):
            # (the common case, a valid Data: its checks of _decode_header, inline)
            end = pos + MESSAGE_HEADER_SIZE + ((buf[pos + 2] << 8) | buf[pos + 3])
            if len(buf) < end:
                return None
            self._pos = end
            return Data(b1, bytes(buf[pos + MESSAGE_HEADER_SIZE:end]), bool(op & DATA_OPEN),
                        bool(op & DATA_CLOSE), bool(op & DATA_EOF),
                        bool(op & DATA_ACK_REQUIRED))
        op, b1, field = _decode_header(bytes(buf[pos:pos + MESSAGE_HEADER_SIZE]))
        if _has_body(op):
            end = pos + MESSAGE_HEADER_SIZE + field
            if len(buf) < end:
                return None
            body = bytes(buf[pos + MESSAGE_HEADER_SIZE:end])
        else:
            end = pos + MESSAGE_HEADER_SIZE
            body = b""
        self._pos = end
        return _build(op, b1, field, body)

    def feed(self, data: bytes) -> list[Message | ConnectionHeader]:
        """:meth:`receive_data` then every complete message, in order.

        :raises MessageDecodeError: as :meth:`next_message` (the messages decoded before the
            bad one are lost to the caller: use :meth:`next_message` to keep them).
        """
        self.receive_data(data)
        out: list[Message | ConnectionHeader] = []
        while (message := self.next_message()) is not None:
            out.append(message)
        return out


def _check_u16(name: str, value: int) -> None:
    if not 0 <= value <= MAX_LENGTH:
        raise ValueError(f"{name} must be in [0, {MAX_LENGTH}], got {value!r}")


def _check_session(session_id: int) -> None:
    if not 0 <= session_id <= MAX_SESSION_ID:
        raise ValueError(f"sessionID must be in [0, {MAX_SESSION_ID}], got {session_id!r}")


# the one-port server (rsocket_tx.mux.sniff)

#: The WebSocket subprotocol name of the Jini ERI mux: the connection's byte stream travels in
#: binary WebSocket messages whose boundaries mean nothing (the mux needs a byte stream).
WEBSOCKET_SUBPROTOCOL = "jini-mux"


def sniff(prefix: bytes) -> Sniff:
    """Could ``prefix`` begin a Jini ERI mux connection (:mod:`rsocket_tx.mux.sniff`)?

    Jini ERI Multiplexing Protocol §ClientConnectionHeader Message: the client's first bytes are
    the magic number "Jmux" (4A 6D 75 78), then version, initialRation and a reserved byte. The
    magic alone decides: a header with another version or a non-zero reserved byte is still
    this protocol, and its connection answers it with Error after the ServerConnectionHeader,
    as the section says a server should.

    :param prefix: the first bytes the client sent (any length, possibly empty).
    :returns: :attr:`~rsocket_tx.mux.sniff.Sniff.MATCH` once the 4 magic bytes are in,
        :attr:`~rsocket_tx.mux.sniff.Sniff.NO_MATCH` at the first byte that differs from them,
        else :attr:`~rsocket_tx.mux.sniff.Sniff.NEED_MORE`. Never raises.
    """
    head = prefix[:len(MAGIC)]
    if head != MAGIC[:len(head)]:
        return Sniff.NO_MATCH
    return Sniff.MATCH if len(head) == len(MAGIC) else Sniff.NEED_MORE
