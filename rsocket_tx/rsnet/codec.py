"""The wire format of the Reactive Streams network protocol (seed ``003``: the Reactive Streams
network draft, "NETWORK_PROTOCOL.md"), as rsocket_tx completes it (``docs/rsnet.rst``).

The draft chose no serialization. This module fixes one, in the draft's own terms: every
message is a one-byte **type** followed by its fields in the order the draft lists them, and
messages are self-delimiting (there is no frame length)::

    type  name            fields (in order)
    0x01  subscribe       publisher: String, subscriber: Id, initialDemand: Long
    0x02  request         subscriber: Id, demand: Long
    0x03  cancel          subscriber: Id
    0x04  onSubscribe     subscriber: Id, elementSize: Varint
    0x05  onNext          subscriber: Id, element: Bytes    (elementSize 0)
                          subscriber: Id, element: elementSize raw bytes (elementSize > 0)
    0x06  onNextPacked    subscriber: Id, count: Varint, count * elementSize raw bytes
    0x07  onNextPart      subscriber: Id, element: Id, data: Bytes
    0x08  onNextLastPart  subscriber: Id, element: Id, data: Bytes
    0x09  onComplete      subscriber: Id
    0x0A  onError         subscriber: Id, error: String
    0x0B  goodbye         reason: String
    0x0C  goodbyeAck      (no fields)
    0xF1  clientHello     mark: 52 53 4E ("RSN"), version: Varint, extensions: Array[Id]
    0xF2  serverHello     mark: 52 53 4E ("RSN"), version: Varint, extensions: Array[Id]

    Varint  unsigned LEB128, at most 2^63-1 (9 bytes), shortest form only
    Long    a Varint (demand; at most 2^63-1, Java's Long.MAX_VALUE)
    Id      a Varint of at most 2^32-1 (5 bytes)
    String  Varint length in bytes, then that many bytes of UTF-8
    Bytes   Varint length, then that many bytes
    Array[Id]  Varint count, then count Ids

An *onNext* in a subscription whose *onSubscribe* declared ``elementSize`` > 0 carries exactly
``elementSize`` bytes with no length (draft §Packed messaging), so decoding it needs the
connection's state: :meth:`MessageDecoder.next_message` asks ``element_size(subscriber)``.

Any byte string decodes to messages, to "need more bytes", or to a :class:`ProtocolError`
naming what is wrong (an unknown type, which cannot be skipped since nothing says how long it
is; a varint longer than its type allows or not in its shortest form; a value, length or count
over its limit; a hello without the mark; invalid UTF-8). Nothing else is ever raised.

:func:`sniff` tells a connection of this protocol from every other protocol of the one-port
server by the first four bytes of the clientHello, ``F1 52 53 4E``.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..mux.sniff import Sniff
from .config import MAX_ID, MAX_LONG, RSNetConfig
from .errors import ProtocolError

__all__ = [
    "MessageType",
    "MARK",
    "CLIENT_HELLO_PREFIX",
    "SNIFF_SIZE",
    "VERSION",
    "WEBSOCKET_SUBPROTOCOL",
    "MAX_ID",
    "MAX_LONG",
    "Message",
    "ClientHello",
    "ServerHello",
    "Subscribe",
    "Request",
    "Cancel",
    "OnSubscribe",
    "OnNext",
    "OnNextPacked",
    "OnNextPart",
    "OnNextLastPart",
    "OnComplete",
    "OnError",
    "Goodbye",
    "GoodbyeAck",
    "encode_varint",
    "encode",
    "MessageDecoder",
    "decode",
    "sniff",
]


class MessageType(enum.IntEnum):
    """The one-byte type that begins every message (``docs/rsnet.rst`` §Message types)."""

    SUBSCRIBE = 0x01
    REQUEST = 0x02
    CANCEL = 0x03
    ON_SUBSCRIBE = 0x04
    ON_NEXT = 0x05
    ON_NEXT_PACKED = 0x06
    ON_NEXT_PART = 0x07
    ON_NEXT_LAST_PART = 0x08
    ON_COMPLETE = 0x09
    ON_ERROR = 0x0A
    GOODBYE = 0x0B
    GOODBYE_ACK = 0x0C
    CLIENT_HELLO = 0xF1
    SERVER_HELLO = 0xF2


#: The three bytes after a hello's type: "RSN".
MARK = b"RSN"
#: The first four bytes of every clientHello (what :func:`sniff` looks for).
CLIENT_HELLO_PREFIX = bytes((MessageType.CLIENT_HELLO,)) + MARK
#: Bytes :func:`sniff` needs to decide.
SNIFF_SIZE = len(CLIENT_HELLO_PREFIX)
#: The protocol version this implementation speaks (the draft's "version 0").
VERSION = 0
#: The WebSocket subprotocol name proposed for this protocol.
WEBSOCKET_SUBPROTOCOL = "rsnet"

# ---------------------------------------------------------------------------------------------
# messages


class Message:
    """Base of every message."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class ClientHello(Message):
    """``clientHello(version, extensions)`` (draft §Protocol negotiation): the client's first
    message. ``extensions``: the extension ids it supports."""

    version: int = VERSION
    extensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class ServerHello(Message):
    """``serverHello(version, extensions)``: the server's first message (it need not wait for
    the clientHello)."""

    version: int = VERSION
    extensions: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Subscribe(Message):
    """``subscribe(publisher, subscriber, initialDemand)`` (draft §The Reactive Streams core
    protocol): subscribe to the recipient's publisher named ``publisher`` under the id
    ``subscriber``, chosen by the sender."""

    publisher: str
    subscriber: int
    initial_demand: int = 0


@dataclass(frozen=True, slots=True)
class Request(Message):
    """``request(subscriber, demand)``: add ``demand`` elements (Reactive Streams §3.17:
    cumulative)."""

    subscriber: int
    demand: int


@dataclass(frozen=True, slots=True)
class Cancel(Message):
    """``cancel(subscriber)``."""

    subscriber: int


@dataclass(frozen=True, slots=True)
class OnSubscribe(Message):
    """``onSubscribe(subscriber, elementSize)`` (the draft's ``subscribed``): the publisher's
    first answer to a subscribe; ``element_size`` > 0 fixes the size of every element."""

    subscriber: int
    element_size: int = 0


@dataclass(frozen=True, slots=True)
class OnNext(Message):
    """``onNext(subscriber, element)``: one element."""

    subscriber: int
    element: bytes


@dataclass(frozen=True, slots=True)
class OnNextPacked(Message):
    """``onNextPacked(subscriber, count, elements)`` (draft §Packed messaging): ``count``
    elements of the subscription's ``elementSize``, back to back in ``data``."""

    subscriber: int
    count: int
    data: bytes


@dataclass(frozen=True, slots=True)
class OnNextPart(Message):
    """``onNextPart(subscriber, element, data)`` (draft §Split messaging): a piece of element
    ``element`` (an id the publisher assigns), more pieces follow."""

    subscriber: int
    element: int
    data: bytes


@dataclass(frozen=True, slots=True)
class OnNextLastPart(Message):
    """``onNextLastPart(subscriber, element, data)``: the last piece of element ``element``."""

    subscriber: int
    element: int
    data: bytes


@dataclass(frozen=True, slots=True)
class OnComplete(Message):
    """``onComplete(subscriber)``."""

    subscriber: int


@dataclass(frozen=True, slots=True)
class OnError(Message):
    """``onError(subscriber, error)``."""

    subscriber: int
    error: str


@dataclass(frozen=True, slots=True)
class Goodbye(Message):
    """``goodbye(reason)`` (draft §Closing the connection): ends every subscription, both
    directions."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class GoodbyeAck(Message):
    """``goodbyeAck()``: the answer to a goodbye; then the goodbye's sender closes the
    transport."""


# ---------------------------------------------------------------------------------------------
# encoding


def encode_varint(value: int, maximum: int = MAX_LONG) -> bytes:
    """Unsigned LEB128, shortest form.

    :param value: in ``[0, maximum]``.
    :param maximum: :data:`MAX_LONG` (a Varint, a Long) or :data:`MAX_ID` (an Id).
    :raises ValueError: ``value`` out of range.
    """
    if not 0 <= value <= maximum:
        raise ValueError(f"varint value must be in [0, {maximum}], got {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _id(value: int) -> bytes:
    return encode_varint(value, MAX_ID)


def _blob(data: bytes) -> bytes:
    return encode_varint(len(data)) + data


def _string(text: str) -> bytes:
    return _blob(text.encode("utf-8"))


def _hello(code: int, version: int, extensions: tuple[int, ...]) -> bytes:
    return b"".join((bytes((code,)), MARK, encode_varint(version), encode_varint(len(extensions)),
                     *map(_id, extensions)))


def encode(message: Message, element_size: int = 0) -> bytes:
    """The bytes of ``message``.

    :param message: any message of the table.
    :param element_size: the subscription's ``elementSize`` for an :class:`OnNext` (> 0: the
        element is written without a length and must be exactly that long) and an
        :class:`OnNextPacked` (``data`` must be ``count * element_size`` bytes).
    :raises ValueError: a field out of range (an Id over 2^32-1, a Long over 2^63-1), or an
        element or packed data of the wrong size.
    """
    t = MessageType
    if isinstance(message, OnNext):
        head = bytes((t.ON_NEXT,)) + _id(message.subscriber)
        if element_size:
            if len(message.element) != element_size:
                raise ValueError(f"an element of {len(message.element)} bytes in a subscription "
                                 f"of elementSize {element_size}")
            return head + message.element
        return head + _blob(message.element)
    if isinstance(message, Request):
        return bytes((t.REQUEST,)) + _id(message.subscriber) + encode_varint(message.demand)
    if isinstance(message, OnNextPacked):
        count = message.count
        if count < 1 or element_size < 1 or len(message.data) != count * element_size:
            raise ValueError(f"onNextPacked needs count >= 1 and count * elementSize bytes "
                             f"(count {message.count}, elementSize {element_size}, "
                             f"{len(message.data)} bytes)")
        return (bytes((t.ON_NEXT_PACKED,)) + _id(message.subscriber)
                + encode_varint(message.count) + message.data)
    if isinstance(message, OnNextPart | OnNextLastPart):
        code = t.ON_NEXT_PART if isinstance(message, OnNextPart) else t.ON_NEXT_LAST_PART
        return bytes((code,)) + _id(message.subscriber) + _id(message.element) + _blob(message.data)
    if isinstance(message, Subscribe):
        return (bytes((t.SUBSCRIBE,)) + _string(message.publisher) + _id(message.subscriber)
                + encode_varint(message.initial_demand))
    if isinstance(message, Cancel):
        return bytes((t.CANCEL,)) + _id(message.subscriber)
    if isinstance(message, OnSubscribe):
        return (bytes((t.ON_SUBSCRIBE,)) + _id(message.subscriber)
                + encode_varint(message.element_size))
    if isinstance(message, OnComplete):
        return bytes((t.ON_COMPLETE,)) + _id(message.subscriber)
    if isinstance(message, OnError):
        return bytes((t.ON_ERROR,)) + _id(message.subscriber) + _string(message.error)
    if isinstance(message, Goodbye):
        return bytes((t.GOODBYE,)) + _string(message.reason)
    if isinstance(message, GoodbyeAck):
        return bytes((t.GOODBYE_ACK,))
    if isinstance(message, ClientHello):
        return _hello(t.CLIENT_HELLO, message.version, message.extensions)
    if isinstance(message, ServerHello):
        return _hello(t.SERVER_HELLO, message.version, message.extensions)
    raise TypeError(f"not a message: {message!r}")


# ---------------------------------------------------------------------------------------------
# decoding


class _NeedMore(Exception):
    """Internal: the buffer ends inside a message."""


def _no_fixed_size(subscriber: int) -> int:
    return 0


_NAMES = {
    MessageType.SUBSCRIBE: "subscribe",
    MessageType.REQUEST: "request",
    MessageType.CANCEL: "cancel",
    MessageType.ON_SUBSCRIBE: "onSubscribe",
    MessageType.ON_NEXT: "onNext",
    MessageType.ON_NEXT_PACKED: "onNextPacked",
    MessageType.ON_NEXT_PART: "onNextPart",
    MessageType.ON_NEXT_LAST_PART: "onNextLastPart",
    MessageType.ON_COMPLETE: "onComplete",
    MessageType.ON_ERROR: "onError",
    MessageType.GOODBYE: "goodbye",
    MessageType.GOODBYE_ACK: "goodbyeAck",
    MessageType.CLIENT_HELLO: "clientHello",
    MessageType.SERVER_HELLO: "serverHello",
}
_KNOWN = frozenset(int(t) for t in MessageType)


class _Reader:
    """Reads the fields of one message from ``buf`` at ``pos``; raises :class:`_NeedMore` at
    the end of the buffer and :class:`ProtocolError` for bad fields."""

    __slots__ = ("buf", "pos", "end", "name", "config")

    def __init__(self, buf: bytes | bytearray, pos: int, name: str, config: RSNetConfig) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)
        self.name = name
        self.config = config

    def varint(self, field: str, maximum: int = MAX_LONG) -> int:
        buf, pos, end = self.buf, self.pos, self.end
        max_bytes = 5 if maximum == MAX_ID else 9
        value = 0
        shift = 0
        for i in range(max_bytes):
            if pos + i >= end:
                raise _NeedMore
            byte = buf[pos + i]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                if byte == 0 and i:
                    raise ProtocolError(f"{self.name}: {field} is an overlong varint (not in "
                                        f"its shortest form)")
                if value > maximum:
                    raise ProtocolError(f"{self.name}: {field} {value} is over its limit of "
                                        f"{maximum}")
                self.pos = pos + i + 1
                return value
            shift += 7
        raise ProtocolError(f"{self.name}: {field} is a varint longer than {max_bytes} bytes "
                            f"(its limit is {maximum})")

    def ident(self, field: str) -> int:
        return self.varint(field, MAX_ID)

    def length(self, field: str, limit: int, setting: str) -> int:
        n = self.varint(f"the length of {field}")
        if n > limit:
            raise ProtocolError(f"{self.name}: {field} of {n} bytes is over {setting} "
                                f"({limit} bytes)")
        return n

    def raw(self, n: int) -> bytes:
        pos = self.pos
        if pos + n > self.end:
            raise _NeedMore
        self.pos = pos + n
        return bytes(self.buf[pos:pos + n])

    def blob(self, field: str) -> bytes:
        cfg = self.config
        return self.raw(self.length(field, cfg.max_element_size, "max_element_size"))

    def string(self, field: str) -> str:
        cfg = self.config
        data = self.raw(self.length(field, cfg.max_string_length, "max_string_length"))
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{self.name}: {field} is not valid UTF-8 ({exc.reason} at "
                                f"byte {exc.start})") from None


def _decode_at(buf: bytes | bytearray, pos: int, config: RSNetConfig,
               element_size: Callable[[int], int]) -> tuple[Message, int]:
    """Decode the message at ``buf[pos]``: ``(message, position after it)``.

    :raises _NeedMore: ``buf`` ends inside it.
    :raises ProtocolError: it is not a message of the table, or a field is over its limit.
    """
    if pos >= len(buf):
        raise _NeedMore
    code = buf[pos]
    if code not in _KNOWN:
        raise ProtocolError(f"unknown message type 0x{code:02X}: messages carry no length, so "
                            f"it cannot be skipped")
    mtype = MessageType(code)
    r = _Reader(buf, pos + 1, _NAMES[mtype], config)
    message: Message
    if mtype is MessageType.ON_NEXT:
        sid = r.ident("subscriber")
        size = element_size(sid)
        message = OnNext(sid, r.raw(size) if size else r.blob("element"))
    elif mtype is MessageType.REQUEST:
        message = Request(r.ident("subscriber"), r.varint("demand"))
    elif mtype is MessageType.ON_NEXT_PACKED:
        sid = r.ident("subscriber")
        size = element_size(sid)
        if size == 0:
            raise ProtocolError(f"onNextPacked for subscriber {sid}, whose elementSize is 0 "
                                f"(or which has no subscription)")
        count = r.varint("count")
        if count == 0:
            raise ProtocolError(f"onNextPacked with count 0 for subscriber {sid}")
        total = count * size
        if total > config.max_packed_size:
            raise ProtocolError(f"onNextPacked of {count} elements of {size} bytes ({total} "
                                f"bytes) is over max_packed_size ({config.max_packed_size} "
                                f"bytes)")
        message = OnNextPacked(sid, count, r.raw(total))
    elif mtype is MessageType.ON_NEXT_PART or mtype is MessageType.ON_NEXT_LAST_PART:
        cls = OnNextPart if mtype is MessageType.ON_NEXT_PART else OnNextLastPart
        message = cls(r.ident("subscriber"), r.ident("element"), r.blob("data"))
    elif mtype is MessageType.SUBSCRIBE:
        message = Subscribe(r.string("publisher"), r.ident("subscriber"),
                            r.varint("initialDemand"))
    elif mtype is MessageType.CANCEL:
        message = Cancel(r.ident("subscriber"))
    elif mtype is MessageType.ON_SUBSCRIBE:
        sid = r.ident("subscriber")
        size = r.varint("elementSize")
        if size > config.max_element_size:
            raise ProtocolError(f"onSubscribe: elementSize {size} is over max_element_size "
                                f"({config.max_element_size} bytes)")
        message = OnSubscribe(sid, size)
    elif mtype is MessageType.ON_COMPLETE:
        message = OnComplete(r.ident("subscriber"))
    elif mtype is MessageType.ON_ERROR:
        message = OnError(r.ident("subscriber"), r.string("error"))
    elif mtype is MessageType.GOODBYE:
        message = Goodbye(r.string("reason"))
    elif mtype is MessageType.GOODBYE_ACK:
        message = GoodbyeAck()
    else:  # the hellos
        mark = r.raw(len(MARK))
        if mark != MARK:
            raise ProtocolError(f"{r.name} without the mark {MARK!r} (got {mark!r}): not "
                                f"this protocol")
        version = r.varint("version")
        count = r.varint("the count of extensions")
        if count > config.max_extensions:
            raise ProtocolError(f"{r.name}: {count} extensions is over max_extensions "
                                f"({config.max_extensions})")
        extensions = tuple(r.ident("extension") for _ in range(count))
        hello = ClientHello if mtype is MessageType.CLIENT_HELLO else ServerHello
        message = hello(version, extensions)
    return message, r.pos


_DEFAULT_CONFIG = RSNetConfig()


class MessageDecoder:
    """Cuts a byte stream into messages.

    :param config: the limits that apply (:class:`~rsocket_tx.rsnet.config.RSNetConfig`;
        default the defaults).

    Feed it with :meth:`receive_data`, then call :meth:`next_message` until it returns None.
    After it raised :class:`ProtocolError` the decoder is not to be used again.
    """

    __slots__ = ("config", "_buf", "_pos")

    def __init__(self, config: RSNetConfig | None = None) -> None:
        self.config = config if config is not None else _DEFAULT_CONFIG
        self._buf = bytearray()
        self._pos = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet decoded, in bytes."""
        return len(self._buf) - self._pos

    def receive_data(self, data: bytes) -> None:
        """Add bytes received (cut anywhere)."""
        if self._pos and self._pos == len(self._buf):
            self._buf = bytearray(data)
            self._pos = 0
        else:
            self._buf += data

    def next_message(self, element_size: Callable[[int], int] = _no_fixed_size
                     ) -> Message | None:
        """The next whole message, or None when more bytes are needed.

        :param element_size: ``element_size(subscriber)``: the ``elementSize`` in force for a
            subscription we made (0: elements are length-prefixed), asked when an *onNext*
            or *onNextPacked* is decoded.
        :raises ProtocolError: the bytes are no message of the table, a field is over its
            limit, or an incomplete message is longer than ``config.max_buffered_input``.
        """
        buf = self._buf
        try:
            message, pos = _decode_at(buf, self._pos, self.config, element_size)
        except _NeedMore:
            held = len(buf) - self._pos
            if held > self.config.max_buffered_input:
                raise ProtocolError(f"an incomplete message of over {held} bytes is over "
                                    f"max_buffered_input ({self.config.max_buffered_input} "
                                    f"bytes)") from None
            if self._pos > 65_536:
                del buf[:self._pos]
                self._pos = 0
            return None
        self._pos = pos
        if pos == len(buf):
            buf.clear()
            self._pos = 0
        return message


def decode(data: bytes, config: RSNetConfig | None = None,
           element_size: Callable[[int], int] = _no_fixed_size) -> tuple[list[Message], bytes]:
    """Decode every whole message of ``data`` (a total function: see the module docstring).

    :param data: any bytes.
    :param config: the limits (default the defaults).
    :param element_size: as for :meth:`MessageDecoder.next_message`.
    :returns: ``(messages, rest)``: the whole messages in order, and the bytes of an
        incomplete last message (``b""`` when ``data`` ends on a message boundary): more
        bytes are needed.
    :raises ProtocolError: ``data`` holds something that is no message of the table.
    """
    decoder = MessageDecoder(config)
    decoder.receive_data(data)
    messages: list[Message] = []
    while True:
        message = decoder.next_message(element_size)
        if message is None:
            return messages, bytes(data[len(data) - decoder.buffered:])
        messages.append(message)


def split_packed(message: OnNextPacked) -> list[bytes]:
    """The elements of an *onNextPacked* (``count`` slices of ``len(data) // count`` bytes)."""
    data = message.data
    size = len(data) // message.count
    return [data[i:i + size] for i in range(0, len(data), size)]


def pack(elements: Sequence[bytes]) -> bytes:
    """The ``data`` of an *onNextPacked* holding ``elements``."""
    return b"".join(elements)


# ---------------------------------------------------------------------------------------------
# sniffing (the one-port server)


def sniff(prefix: bytes) -> Sniff:
    """Could ``prefix`` begin a Reactive Streams network connection (a clientHello)?

    Every clientHello begins with :data:`CLIENT_HELLO_PREFIX`, ``F1 52 53 4E``: the type 0xF1
    and the mark "RSN". No other protocol of the one-port server can begin so
    (``docs/rsnet.rst`` §Telling it apart on a shared port): byte 0 has its top bit set, which
    rules out the 2015 ReactiveSocket draft (31-bit length, top bit 0), the Jini mux (``4A``),
    TLS (``16``) and HTTP (ASCII); byte 3 is not 0, which rules out RSocket 1.0 (whose bytes 3
    to 6 are the stream id 0 of its SETUP or RESUME).

    :param prefix: the first bytes the client sent (any length, possibly empty).
    :returns: :attr:`~rsocket_tx.mux.Sniff.MATCH` once the first 4 bytes are the prefix,
        :attr:`~rsocket_tx.mux.Sniff.NEED_MORE` while ``prefix`` is a proper prefix of it
        (``b""`` included), :attr:`~rsocket_tx.mux.Sniff.NO_MATCH` otherwise. Never raises.
    """
    head = bytes(prefix[:SNIFF_SIZE])
    if head != CLIENT_HELLO_PREFIX[:len(head)]:
        return Sniff.NO_MATCH
    return Sniff.MATCH if len(head) == SNIFF_SIZE else Sniff.NEED_MORE
