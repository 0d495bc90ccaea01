"""One port, every protocol: a server that tells protocols apart by a connection's first bytes.

:class:`OnePortFactory` is the server factory of a port that serves several protocols at once
(RSocket 1.0, the Jini ERI mux, the Reactive Streams network protocol, the 2015 ReactiveSocket
draft), over plain TCP, TLS and WebSocket::

    from rsocket_tx.transports.oneport import OnePortFactory
    from rsocket_tx.transports.tls import server_options

    factory = OnePortFactory({"rsocket": RSocketServerFactory(MyResponder, reactor=reactor),
                              "jini-mux": JiniMuxServerFactory(MyDispatcher, reactor=reactor)},
                             reactor=reactor,
                             tls=server_options("key.pem", "cert.pem"))  # optional
    port = await TCP4ServerEndpoint(reactor, 7878).listen(factory)

What a new connection goes through (each step bounded by :class:`OnePortConfig`):

1. Its first bytes are buffered, at most ``max_sniff_size`` bytes and ``sniff_timeout``
   milliseconds, and shown to every candidate's ``sniff`` function
   (:mod:`rsocket_tx.mux.sniff`): each served protocol's, a TLS ClientHello's (when the factory
   has ``tls`` options) and a WebSocket upgrade's (``GET``). A candidate that says
   ``NO_MATCH`` drops out; the first to say ``MATCH`` wins. When every candidate has dropped
   out, or the bytes reach the size bound undecided, a line is logged (peer address, the first
   bytes in hex) and the connection is closed; at the time bound it is closed with a line that
   says so.
2. A protocol: its factory builds the protocol, which gets the same transport
   (``makeConnection``) and then the buffered bytes (``dataReceived``); later reads go to it.
3. TLS: the connection is handed to a :class:`twisted.protocols.tls.TLSMemoryBIOProtocol`
   with the factory's certificate options, and the decrypted bytes are sniffed again
   (protocols and WebSocket: ``wss``; not TLS again).
4. WebSocket: the connection is handed to an autobahn WebSocket server protocol that chooses
   the protocol by the ``Sec-WebSocket-Protocol`` the client offers
   (:attr:`ProtocolDescription.websocket_subprotocol`; the first offered that is served wins; a
   client that offers none gets RSocket, as ``rsocket-js`` and ``rsocket-py`` expect, or the
   only protocol served). RSocket travels one frame per binary message, as over
   :mod:`~rsocket_tx.transports.websocket`; a byte-stream protocol such as the Jini mux
   (:attr:`WebSocketFraming.BYTES`) travels as its byte stream cut into binary messages whose
   boundaries mean nothing. Any URL path is accepted.

Every connection counts against the server-wide cap :attr:`OnePortConfig.max_connections` (one
:class:`~rsocket_tx.transports.limits.ConnectionLimit`, :attr:`OnePortFactory.connection_limit`)
from the moment it is accepted, whatever protocol it turns out to be: while it is sniffed, in
its TLS or WebSocket handshake, and once handed to a protocol, until its transport is lost,
however that happens. Past the cap a new connection is closed at once, before a byte is read,
and the log says so with the cap. The protocols' own factories do not count it again (it is
built with :func:`~rsocket_tx.transports.limits.build_uncounted`): their own caps
(``max_connections``) apply only to connections they are given directly.

The protocols known by name are in the registry :data:`PROTOCOLS` (:func:`register_protocol`
adds one): ``rsocket``, ``jini-mux``, ``rsnet``, ``rs2015``; a :class:`ServedProtocol` serves
any other. Connections not recognised yet are :class:`SniffingProtocol` instances; once handed
over, one stays the transport's protocol and passes reads through (one extra call per read).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from autobahn.twisted.websocket import (
    WebSocketClientFactory,
    WebSocketClientProtocol,
    WebSocketServerFactory,
)
from autobahn.websocket.protocol import WebSocketProtocol
from autobahn.websocket.types import ConnectionDeny
from twisted.internet.defer import Deferred, DeferredList, maybeDeferred
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import (
    IHalfCloseableProtocol,
    IHandshakeListener,
    IProtocol,
    IProtocolFactory,
    IStreamClientEndpoint,
    ITransport,
)
from twisted.internet.protocol import Factory, Protocol, connectionDone
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOFactory
from twisted.python.failure import Failure
from zope.interface import alsoProvides, implementer

from ..core import sniff as rsocket_sniff
from ..jini import codec as jini_codec
from ..mux.sniff import Sniff, Sniffer
from ..reactivesocket import frames as rs2015_frames
from ..reactivesocket.protocol import WEBSOCKET_SUBPROTOCOL as RS2015_WEBSOCKET_SUBPROTOCOL
from ..rsnet import codec as rsnet_codec
from ..yamux import codec as yamux_codec
from .limits import DEFAULT_MAX_CONNECTIONS, ConnectionLimit, RefusedConnection, build_uncounted
from .peers import guess_client
from .websocket import (
    CLOSE_NORMAL,
    CLOSE_UNSUPPORTED_DATA,
    RSocketWebSocketServerProtocol,
    WebSocketHandshakeError,
)

__all__ = [
    "DEFAULT_MAX_SNIFF_SIZE",
    "DEFAULT_SNIFF_TIMEOUT",
    "DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE",
    "LOGGED_PREFIX_SIZE",
    "OnePortConfig",
    "WebSocketFraming",
    "ProtocolDescription",
    "PROTOCOLS",
    "register_protocol",
    "ServedProtocol",
    "OnePortFactory",
    "SniffingProtocol",
    "OnePortWebSocketProtocol",
    "WebSocketByteStream",
    "ByteStreamWebSocketClientEndpoint",
    "sniff_tls",
    "sniff_websocket",
    "serve_one_port",
]

log = Logger()

#: Default bytes of a connection buffered while its protocol is not known yet.
DEFAULT_MAX_SNIFF_SIZE = 4096
#: Default milliseconds a connection gets to send enough bytes to tell its protocol (and, over
#: WebSocket, to complete the opening handshake).
DEFAULT_SNIFF_TIMEOUT = 10_000
#: Default largest WebSocket message (bytes) of a byte-stream protocol (:attr:`WebSocketFraming.
#: BYTES`); a message protocol takes its own maximum frame size.
DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE = 1_048_576
#: Bytes of an unrecognised connection's beginning shown (in hex) in the log line.
LOGGED_PREFIX_SIZE = 32


@dataclass(frozen=True, slots=True)
class OnePortConfig:
    """The limits of a one-port server (one validated settings object, as
    :class:`~rsocket_tx.core.config.ConnectionConfig`).

    :ivar max_sniff_size: bytes of a new connection (or of the decrypted stream of a TLS one)
        buffered while no candidate has said MATCH; a connection reaching it undecided is
        closed. At least 16. Default :data:`DEFAULT_MAX_SNIFF_SIZE`.
    :ivar sniff_timeout: milliseconds a new connection gets to be recognised (a TLS connection
        gets as long again, for its handshake and first decrypted bytes; a WebSocket one as
        long again for its opening handshake); then it is closed. At least 1. Default
        :data:`DEFAULT_SNIFF_TIMEOUT`.
    :ivar max_websocket_message_size: the largest WebSocket message (bytes) of a byte-stream
        protocol; a bigger one closes the WebSocket with code 1009. At least 1. Default
        :data:`DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE`.
    :ivar max_connections: connections the server keeps open at once, every protocol, TLS and
        WebSocket counted together, those not recognised yet included; past it a new one is
        closed at once (logged with the cap). At least 1. Default
        :data:`~rsocket_tx.transports.limits.DEFAULT_MAX_CONNECTIONS` (4,096).
    :raises ValueError: a value out of range (not an int, or below its minimum).
    """

    max_sniff_size: int = DEFAULT_MAX_SNIFF_SIZE
    sniff_timeout: int = DEFAULT_SNIFF_TIMEOUT
    max_websocket_message_size: int = DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE
    max_connections: int = DEFAULT_MAX_CONNECTIONS

    def __post_init__(self) -> None:
        for name, minimum, unit in (("max_sniff_size", 16, "bytes"),
                                    ("sniff_timeout", 1, "milliseconds"),
                                    ("max_websocket_message_size", 1, "bytes"),
                                    ("max_connections", 1, "connections")):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an integer of at least {minimum} {unit}, "
                                 f"got {value!r}")


class WebSocketFraming(enum.Enum):
    """How a protocol travels over WebSocket."""

    #: One protocol frame per binary message, no length prefix: the protocol is a
    #: :class:`~rsocket_tx.bridge.MuxProtocol` whose connection takes ``receive_frame`` and
    #: whose transport is an :class:`~rsocket_tx.interfaces.IFrameTransport` (RSocket 1.0).
    MESSAGES = "messages"
    #: The protocol's byte stream, cut into binary messages anywhere (the Jini mux): the
    #: protocol sees a plain byte-stream transport (:class:`WebSocketByteStream`).
    BYTES = "bytes"


@dataclass(frozen=True, slots=True)
class ProtocolDescription:
    """What the one-port server knows of a protocol, to recognise and serve it.

    :ivar name: the protocol's name (``"rsocket"``, ``"jini-mux"``), as ``twistd mux
        --protocol`` takes it.
    :ivar sniff: its ``sniff(prefix: bytes) -> Sniff`` (:mod:`rsocket_tx.mux.sniff`), over a
        byte stream (TCP, TLS).
    :ivar websocket_subprotocol: its WebSocket subprotocol name (``Sec-WebSocket-Protocol``).
    :ivar websocket_framing: how it travels over WebSocket.
    :ivar tap: the module of its twistd face (``Options`` and ``build_service(settings,
        reactor)``, e.g. ``"rsocket_tx.faces.tap"``), which ``twistd mux`` uses to parse its
        options and build its server factory; None: not servable by ``twistd mux``.
    :ivar websocket_message_size: ``callable(server_factory) -> int``: the largest WebSocket
        message (bytes) to accept for a server factory of this protocol (e.g. its maximum
        frame size); None: :attr:`OnePortConfig.max_websocket_message_size`.
    """

    name: str
    sniff: Sniffer
    websocket_subprotocol: str
    websocket_framing: WebSocketFraming = WebSocketFraming.MESSAGES
    tap: str | None = None
    websocket_message_size: Callable[[Any], int] | None = None


#: The registry of protocols the one-port server knows by name, in the order their sniff
#: functions are asked (:func:`register_protocol` adds one).
PROTOCOLS: dict[str, ProtocolDescription] = {}


def register_protocol(description: ProtocolDescription) -> ProtocolDescription:
    """Add ``description`` to :data:`PROTOCOLS` (replacing one of the same name).

    :returns: ``description``.
    :raises ValueError: another protocol already has its WebSocket subprotocol name.
    """
    for other in PROTOCOLS.values():
        if other.name != description.name \
                and other.websocket_subprotocol == description.websocket_subprotocol:
            raise ValueError(f"WebSocket subprotocol {description.websocket_subprotocol!r} is "
                             f"already {other.name!r}'s")
    PROTOCOLS[description.name] = description
    return description


def _max_frame_size(factory) -> int:
    """An RSocket (or 2015-draft) server factory's largest frame, bytes: one message each."""
    return factory.config.max_frame_size


def _max_buffered_input(factory) -> int:
    """An RS-network server factory's largest incomplete message held, bytes."""
    return factory.config.max_buffered_input


# The protocols of rsocket_tx, in the order their sniff functions are asked: the one place a
# protocol of the package joins the one-port server (and ``twistd mux``).
register_protocol(ProtocolDescription(
    "rsocket", rsocket_sniff.sniff, rsocket_sniff.WEBSOCKET_SUBPROTOCOL,
    WebSocketFraming.MESSAGES, tap="rsocket_tx.faces.tap", websocket_message_size=_max_frame_size))
register_protocol(ProtocolDescription(
    "jini-mux", jini_codec.sniff, jini_codec.WEBSOCKET_SUBPROTOCOL,
    WebSocketFraming.BYTES, tap="rsocket_tx.jini.tap"))
register_protocol(ProtocolDescription(
    "rsnet", rsnet_codec.sniff, rsnet_codec.WEBSOCKET_SUBPROTOCOL,
    WebSocketFraming.BYTES, tap="rsocket_tx.rsnet.tap",
    websocket_message_size=_max_buffered_input))
register_protocol(ProtocolDescription(
    "rs2015", rs2015_frames.sniff, RS2015_WEBSOCKET_SUBPROTOCOL,
    WebSocketFraming.MESSAGES, tap="rsocket_tx.reactivesocket.tap",
    websocket_message_size=_max_frame_size))
register_protocol(ProtocolDescription(
    "yamux", yamux_codec.sniff, yamux_codec.WEBSOCKET_SUBPROTOCOL,
    WebSocketFraming.BYTES, tap="rsocket_tx.yamux.tap"))


@dataclass(frozen=True, slots=True)
class ServedProtocol:
    """One protocol served by a :class:`OnePortFactory`.

    :ivar description: the protocol (:class:`ProtocolDescription`).
    :ivar factory: its server factory (``IProtocolFactory``): it builds one protocol per
        connection recognised as this one. For :attr:`WebSocketFraming.MESSAGES` the
        protocol must take whole frames (``frameReceived``/``framesReceived``, as a
        :class:`~rsocket_tx.bridge.MuxProtocol`), and the factory must have a ``reactor``.
    :ivar max_message_size: the largest WebSocket message accepted (bytes); None: what the
        description's ``websocket_message_size`` says for ``factory``, else
        :attr:`OnePortConfig.max_websocket_message_size`.
    """

    description: ProtocolDescription
    factory: IProtocolFactory
    max_message_size: int | None = None


# -- the sniffers of the layers below the protocols ----------------------------------------------

_TLS_HANDSHAKE = 0x16
_TLS_CLIENT_HELLO = 0x01
_TLS_MAX_RECORD = (1 << 14) + 2048  # RFC 5246 §6.2.3: TLSCiphertext.length


def sniff_tls(prefix: bytes) -> Sniff:
    """Could ``prefix`` begin a TLS connection (its ClientHello)?

    RFC 8446 §5.1 / RFC 5246 §6.2.1: a TLS record begins with content type 22 (handshake),
    legacy version 3.0-3.4 (``03 00`` .. ``03 04``) and a non-zero 16-bit length of at most
    2^14 + 2048; the first handshake message is a ClientHello (type 1).

    :returns: MATCH after 6 bytes that fit, NO_MATCH at the first byte that does not, else
        NEED_MORE. Never raises.
    """
    n = len(prefix)
    if n >= 1 and prefix[0] != _TLS_HANDSHAKE:
        return Sniff.NO_MATCH
    if n >= 2 and prefix[1] != 3:
        return Sniff.NO_MATCH
    if n >= 3 and prefix[2] > 4:
        return Sniff.NO_MATCH
    if n >= 5 and not 0 < int.from_bytes(prefix[3:5], "big") <= _TLS_MAX_RECORD:
        return Sniff.NO_MATCH
    if n >= 6:
        return Sniff.MATCH if prefix[5] == _TLS_CLIENT_HELLO else Sniff.NO_MATCH
    return Sniff.NEED_MORE


_GET = b"GET "


def sniff_websocket(prefix: bytes) -> Sniff:
    """Could ``prefix`` begin a WebSocket opening handshake (RFC 6455 §4.1: an HTTP/1.1
    ``GET`` request)?

    :returns: MATCH once ``prefix`` begins with ``GET`` and a space, NO_MATCH at the first byte
        that differs, else NEED_MORE. Never raises.
    """
    head = prefix[:4]
    if head != _GET[:len(head)]:
        return Sniff.NO_MATCH
    return Sniff.MATCH if len(head) == 4 else Sniff.NEED_MORE


# -- the connection while it is being recognised -------------------------------------------------


class _Layer(enum.Enum):
    """What a candidate of the sniffer stands for."""

    PROTOCOL = "protocol"
    TLS = "TLS"
    WEBSOCKET = "WebSocket"


@dataclass(frozen=True, slots=True)
class _Candidate:
    """What a new connection may turn out to be: a served protocol, TLS or WebSocket."""

    layer: _Layer
    name: str
    sniff: Sniffer
    served: ServedProtocol | None = None


@implementer(IHandshakeListener)
class SniffingProtocol(Protocol):
    """A new connection of a :class:`OnePortFactory` until its protocol is known; then a
    pass-through: what the transport delivers (``dataReceived``, ``connectionLost``,
    ``readConnectionLost``, the TLS ``handshakeCompleted``) goes to the chosen protocol, which
    has the same transport.

    :param factory: the :class:`OnePortFactory`.
    :param addr: the peer's address.
    :param inside_tls: True for the decrypted stream of a TLS connection (no TLS inside).
    :ivar chosen: the protocol handed the connection, or None while sniffing.
    :ivar connection_limit: the :class:`~rsocket_tx.transports.limits.ConnectionLimit` that
        counts the connection (the factory's; None inside TLS: the outer sniffer counts it),
        released when the transport is lost.
    """

    connection_limit: ConnectionLimit | None = None

    def __init__(self, factory: OnePortFactory, addr, inside_tls: bool = False) -> None:
        self.factory = factory
        self.addr = addr
        self.inside_tls = inside_tls
        self.chosen: IProtocol | None = None
        self.buffer = b""
        self.candidates = factory.candidates(tls=not inside_tls)
        self.timer = None
        self.handshake_done = False
        self.rejected = False

    def connectionMade(self) -> None:
        self.factory.sniffing.add(self)
        self.timer = self.factory.reactor.callLater(
            self.factory.config.sniff_timeout / 1000, self.timed_out)

    def dataReceived(self, data: bytes) -> None:
        chosen = self.chosen
        if chosen is not None:
            chosen.dataReceived(data)
            return
        if self.rejected:
            return
        self.buffer += data
        buffer = self.buffer
        remaining = []
        for candidate in self.candidates:
            verdict = candidate.sniff(buffer)
            if verdict is Sniff.MATCH:
                self.choose(candidate)
                return
            if verdict is Sniff.NEED_MORE:
                remaining.append(candidate)
        self.candidates = remaining
        if not remaining:
            self.reject("its first bytes match no protocol served here")
        elif len(buffer) >= self.factory.config.max_sniff_size:
            self.reject(f"its first {len(buffer)} bytes (the limit) tell no protocol apart "
                        f"from {', '.join(c.name for c in remaining)}")

    def choose(self, candidate) -> None:
        """Hand the connection and the bytes buffered to the protocol (or layer) ``candidate``
        stands for."""
        factory = self.factory
        layer = candidate.layer
        if layer is _Layer.PROTOCOL:
            # (counted already, by this connection's outermost sniffer)
            protocol = build_uncounted(candidate.served.factory, self.addr)
            if protocol is None:
                self.reject(f"the {candidate.name} factory refused it")
                return
        elif layer is _Layer.TLS:
            protocol = factory.tls_factory.buildProtocol(self.addr)
        else:
            protocol = factory.websocket_factory.buildProtocol(self.addr)
        self.hand_over(protocol)

    def hand_over(self, protocol: IProtocol) -> None:
        """Make ``protocol`` the connection's protocol: same transport, then the bytes
        buffered."""
        self.stop_timer()
        self.factory.sniffing.discard(self)
        self.chosen = protocol
        if IHalfCloseableProtocol.providedBy(protocol):
            alsoProvides(self, IHalfCloseableProtocol)
        prefix, self.buffer, self.candidates = self.buffer, b"", []
        protocol.makeConnection(self._made_transport())
        if self.handshake_done and IHandshakeListener.providedBy(protocol):
            protocol.handshakeCompleted()
        if prefix and self.chosen is protocol:
            protocol.dataReceived(prefix)

    def reject(self, why: str) -> None:
        """Log why the connection is refused, with the peer and its first bytes, and close it."""
        self.rejected = True
        self.stop_timer()
        guess = guess_client(self.buffer)
        if guess is not None:  # (a protocol or layer this port does not serve)
            why = f"{why}; they look like {guess}"
        shown = self.buffer[:LOGGED_PREFIX_SIZE].hex(" ")
        more = "" if len(self.buffer) <= LOGGED_PREFIX_SIZE else " ..."
        log.info("One-port server: closing the {tls}connection from {peer}: {why} "
                 "(first bytes: {shown}{more})", tls="TLS " if self.inside_tls else "",
                 peer=_peer(self.transport), why=why, shown=shown or "none", more=more)
        self.buffer = b""
        self._made_transport().loseConnection()

    def _made_transport(self) -> ITransport:
        transport = self.transport
        assert transport is not None, "the sniffer's connection is not made"
        return transport

    def timed_out(self) -> None:
        self.timer = None
        if self.chosen is None and not self.rejected:
            self.reject(f"no protocol recognised within {self.factory.config.sniff_timeout} ms "
                        f"({len(self.buffer)} bytes received)")

    def stop_timer(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None and timer.active():
            timer.cancel()

    def readConnectionLost(self) -> None:  # IHalfCloseableProtocol, once handed over
        self._half_closeable().readConnectionLost()

    def writeConnectionLost(self) -> None:
        self._half_closeable().writeConnectionLost()

    def _half_closeable(self) -> IHalfCloseableProtocol:
        """The chosen protocol, which provides ``IHalfCloseableProtocol`` when this sniffer
        does (:meth:`hand_over`)."""
        return IHalfCloseableProtocol(self.chosen)

    def handshakeCompleted(self) -> None:  # IHandshakeListener: the TLS handshake under us
        self.handshake_done = True
        chosen = self.chosen
        if chosen is not None and IHandshakeListener.providedBy(chosen):
            chosen.handshakeCompleted()

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        self.stop_timer()
        self.factory.sniffing.discard(self)
        chosen, self.chosen = self.chosen, None
        limit, self.connection_limit = self.connection_limit, None
        try:
            if chosen is not None:
                chosen.connectionLost(reason)
        finally:
            if limit is not None:
                limit.release()  # (once: the server-wide count of open connections)


def _peer(transport) -> str:
    try:
        address = transport.getPeer()
    except Exception:
        return "an unknown peer"
    host, port = getattr(address, "host", None), getattr(address, "port", None)
    if host is not None and port is not None:
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    return str(address)


class _InsideTLS(Factory):
    """Builds the sniffer of a TLS connection's decrypted stream."""

    def __init__(self, one_port: OnePortFactory) -> None:
        self.one_port = one_port
        self.noisy = False

    def buildProtocol(self, addr):
        return SniffingProtocol(self.one_port, addr, inside_tls=True)


# -- WebSocket -----------------------------------------------------------------------------------

_OPEN = WebSocketProtocol.STATE_OPEN
_CLOSED = WebSocketProtocol.STATE_CLOSED


@implementer(ITransport)
class WebSocketByteStream:
    """The byte-stream transport a protocol of :attr:`WebSocketFraming.BYTES` sees over a
    WebSocket: what it writes goes out as binary messages (one per write, split into messages
    of at most :data:`DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE` bytes, or of this side's own
    message limit when smaller: the boundaries mean nothing, and a peer with the default
    limit accepts every message), what arrives in binary messages is its ``dataReceived``.

    :param websocket: the autobahn WebSocket protocol (open).
    :param protocol: the byte-stream protocol carried.
    """

    def __init__(self, websocket, protocol) -> None:
        self.websocket = websocket
        self.protocol = protocol
        self.disconnecting = False
        own = getattr(websocket, "maxMessagePayloadSize", 0) or DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE
        #: the largest message written, bytes
        self.max_write_size = min(own, DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE)

    def write(self, data: bytes) -> None:
        if not data or self.websocket.state != _OPEN:
            return
        size = self.max_write_size
        if len(data) <= size:
            self.websocket.sendMessage(bytes(data), isBinary=True)
            return
        view = memoryview(data)
        for start in range(0, len(data), size):
            self.websocket.sendMessage(bytes(view[start:start + size]), isBinary=True)

    def writeSequence(self, data) -> None:
        self.write(b"".join(data))

    def loseConnection(self) -> None:
        """Close with the WebSocket close handshake (code 1000) after what was written."""
        self.disconnecting = True
        websocket = self.websocket
        if websocket.state == _OPEN:
            websocket.sendClose(code=CLOSE_NORMAL)
        elif websocket.state != _CLOSED:
            websocket.dropConnection(abort=False)

    def abortConnection(self) -> None:
        """Drop the connection at once."""
        self.disconnecting = True
        if self.websocket.state != _CLOSED:
            self.websocket.dropConnection(abort=True)

    def registerProducer(self, producer, streaming: bool) -> None:
        self.websocket.registerProducer(producer, streaming)

    def unregisterProducer(self) -> None:
        self.websocket.unregisterProducer()

    def getPeer(self):
        return self.websocket.transport.getPeer()

    def getHost(self):
        return self.websocket.transport.getHost()

    def message_received(self, payload: bytes, is_binary: bool) -> bool:
        """A message from the peer: its bytes to the protocol.

        :returns: False for a text message (the caller closes with code 1003).
        """
        if not is_binary:
            return False
        if payload:
            self.protocol.dataReceived(payload)
        return True


def _open_transport(websocket: Protocol) -> ITransport:
    """The transport under an open ``websocket``."""
    transport = websocket.transport
    assert transport is not None, "the WebSocket is open"
    return transport


def _refuse_text(websocket) -> None:
    """Close ``websocket`` with code 1003 (unsupported data, RFC 6455 §7.4.1): a byte-stream
    protocol travels in binary messages only. (autobahn's ``sendClose`` refuses codes other
    than 1000 and 3000-4999, so the close frame is sent as the protocol layer does.)"""
    if websocket.state == _OPEN:
        websocket.sendCloseFrame(code=CLOSE_UNSUPPORTED_DATA,
                                 reasonUtf8=b"text WebSocket message: this protocol travels "
                                            b"in binary messages", isReply=False)


class OnePortWebSocketProtocol(RSocketWebSocketServerProtocol):
    """The WebSocket server protocol of a :class:`OnePortFactory`: chooses the protocol by the
    subprotocol the client offers, then carries it one frame per message
    (:attr:`WebSocketFraming.MESSAGES`, as
    :class:`~rsocket_tx.transports.websocket.RSocketWebSocketServerProtocol`) or as a byte
    stream (:attr:`WebSocketFraming.BYTES`, :class:`WebSocketByteStream`).

    :ivar served: the :class:`ServedProtocol` chosen, once the handshake request is read.
    """

    served: ServedProtocol | None = None
    byte_stream: WebSocketByteStream | None = None

    def onConnect(self, request):
        one_port = self.factory.one_port
        offered = request.protocols
        served = one_port.for_subprotocols(offered)
        if served is None:
            names = ", ".join(s.description.websocket_subprotocol for s in one_port.served)
            if offered:
                raise ConnectionDeny(ConnectionDeny.BAD_REQUEST, (
                    f"unsupported WebSocket subprotocol(s) {', '.join(offered)}: this server "
                    f"speaks {names}"))
            raise ConnectionDeny(ConnectionDeny.BAD_REQUEST, (
                f"no WebSocket subprotocol offered: this server speaks {names}"))
        self.served = served
        size = one_port.max_message_size(served)
        self.maxFramePayloadSize = self.maxMessagePayloadSize = size
        subprotocol = served.description.websocket_subprotocol
        return subprotocol if subprotocol in offered else None

    def mux_factory(self):
        served = self.served
        if served is not None and served.description.websocket_framing is \
                WebSocketFraming.MESSAGES:
            return served.factory
        return self.factory  # (autobahn's factory: its ``reactor``)

    def onOpen(self) -> None:
        served = self.served
        assert served is not None, "onConnect chose the protocol served"
        if served.description.websocket_framing is WebSocketFraming.MESSAGES:
            super().onOpen()
            return
        protocol = build_uncounted(served.factory, _open_transport(self).getPeer())  # (counted)
        if protocol is None:
            self.sendClose(code=CLOSE_NORMAL)
            return
        self.byte_stream = WebSocketByteStream(self, protocol)
        protocol.makeConnection(self.byte_stream)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        stream = self.byte_stream
        if stream is None:
            super().onMessage(payload, isBinary)
        elif not stream.message_received(payload, isBinary):
            _refuse_text(self)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        stream, self.byte_stream = self.byte_stream, None
        if stream is not None:
            if self.wasClean:
                reason = Failure(ConnectionDone("the WebSocket closed cleanly"))
            stream.protocol.connectionLost(reason)


class _WebSocketFactory(WebSocketServerFactory):
    protocol = OnePortWebSocketProtocol

    def __init__(self, one_port: OnePortFactory) -> None:
        super().__init__(reactor=one_port.reactor)
        self.noisy = False
        self.one_port = one_port
        self.setProtocolOptions(
            autoFragmentSize=0, failByDrop=False, autoPingInterval=0, webStatus=False,
            openHandshakeTimeout=one_port.config.sniff_timeout / 1000)


# -- the factory ---------------------------------------------------------------------------------


class OnePortFactory(Factory):
    """The server factory of a port serving several protocols (see the module docstring).

    :param protocols: the protocols served: a mapping of names registered in
        :data:`PROTOCOLS` to their server factories (``{"rsocket": rsocket_factory,
        "jini-mux": jini_factory}``), or :class:`ServedProtocol` items; their order is the
        order their sniff functions are asked.
    :param reactor: the reactor (timers); None: the global one.
    :param tls: the server's TLS options (an ``IOpenSSLServerConnectionCreator``, e.g.
        :func:`rsocket_tx.transports.tls.server_options`); None: a TLS ClientHello is not
        recognised (and so closed).
    :param websocket: recognise WebSocket upgrades (``GET``); default True.
    :param config: the limits (:class:`OnePortConfig`).
    :param connection_limit: the server-wide
        :class:`~rsocket_tx.transports.limits.ConnectionLimit` to count every connection in
        (shared with other factories of the same server); None: one of its own of
        ``config.max_connections``.
    :raises ValueError: no protocol, an unknown name, or two protocols of one name.
    :ivar served: the :class:`ServedProtocol` items, in order.
    :ivar sniffing: the connections not recognised yet (:class:`SniffingProtocol`).
    :ivar connection_limit: the :class:`~rsocket_tx.transports.limits.ConnectionLimit`
        counting every connection of this server (see the module docstring).
    """

    def __init__(self, protocols: Mapping[str, IProtocolFactory] | Iterable[ServedProtocol], *,
                 reactor=None, tls=None, websocket: bool = True,
                 config: OnePortConfig | None = None,
                 connection_limit: ConnectionLimit | None = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = global_reactor
        self.reactor = reactor
        self.config = config if config is not None else OnePortConfig()
        if connection_limit is None:
            connection_limit = ConnectionLimit(self.config.max_connections,
                                               server_name="One-port server", reactor=reactor)
        self.connection_limit = connection_limit
        if isinstance(protocols, Mapping):
            served = []
            for name, factory in protocols.items():
                if name not in PROTOCOLS:
                    raise ValueError(f"unknown protocol {name!r} (known: "
                                     f"{', '.join(PROTOCOLS)})")
                served.append(ServedProtocol(PROTOCOLS[name], factory))
        else:
            served = list(protocols)
        names = [s.description.name for s in served]
        if not served:
            raise ValueError("a one-port server needs at least one protocol")
        if len(set(names)) != len(names):
            raise ValueError(f"a protocol is served twice: {', '.join(names)}")
        self.served: list[ServedProtocol] = served
        self.tls = tls
        self.websocket = websocket
        self.sniffing: set[SniffingProtocol] = set()
        self.tls_factory = None if tls is None else TLSMemoryBIOFactory(
            tls, False, _InsideTLS(self))
        self.websocket_factory = _WebSocketFactory(self) if websocket else None
        self.noisy = False

    def __repr__(self) -> str:
        names = ", ".join(s.description.name for s in self.served)
        return f"<OnePortFactory {names}{' +TLS' if self.tls is not None else ''}>"

    def buildProtocol(self, addr) -> SniffingProtocol | RefusedConnection:
        limit = self.connection_limit
        if not limit.acquire():
            return limit.refuse()  # past max_connections: aborted at once, logged
        sniffer = SniffingProtocol(self, addr)
        sniffer.connection_limit = limit  # released when its transport is lost
        return sniffer

    def candidates(self, tls: bool) -> list[_Candidate]:
        """What a new connection is sniffed against: the protocols served, in order, then TLS
        (when ``tls`` and the factory has TLS options) and WebSocket (when enabled)."""
        out = [_Candidate(_Layer.PROTOCOL, s.description.name, s.description.sniff, s)
               for s in self.served]
        if tls and self.tls_factory is not None:
            out.append(_Candidate(_Layer.TLS, "TLS", sniff_tls))
        if self.websocket_factory is not None:
            out.append(_Candidate(_Layer.WEBSOCKET, "WebSocket", sniff_websocket))
        return out

    def for_subprotocols(self, offered) -> ServedProtocol | None:
        """The protocol served for a WebSocket client that offers the subprotocols ``offered``
        (in its order of preference): the first offered that is served; when none is offered,
        RSocket if served, else the only protocol served; else None."""
        by_name = {s.description.websocket_subprotocol: s for s in self.served}
        if offered:
            for name in offered:
                if name in by_name:
                    return by_name[name]
            return None
        if rsocket_sniff.WEBSOCKET_SUBPROTOCOL in by_name:
            return by_name[rsocket_sniff.WEBSOCKET_SUBPROTOCOL]
        return self.served[0] if len(self.served) == 1 else None

    def max_message_size(self, served: ServedProtocol) -> int:
        """The largest WebSocket message (bytes) accepted for ``served``."""
        if served.max_message_size is not None:
            return served.max_message_size
        size_of = served.description.websocket_message_size
        if size_of is not None:
            return size_of(served.factory)
        return self.config.max_websocket_message_size

    def startFactory(self) -> None:
        for s in self.served:
            s.factory.doStart()

    def stopFactory(self) -> None:
        for s in self.served:
            s.factory.doStop()

    def close_unrecognised(self) -> None:
        """Close the connections whose protocol is not known yet (:attr:`sniffing`)."""
        for sniffer in list(self.sniffing):
            sniffer.stop_timer()
            if sniffer.transport is not None:
                sniffer.transport.loseConnection()
        self.sniffing.clear()

    def close_connections(self) -> Deferred:
        """Close every connection: those not recognised yet at once, the others as their
        protocol's factory does (its ``close_connections()``, if it has one: e.g. RSocket's
        and the Jini mux's graceful close). Stop listening first.

        :returns: a Deferred firing once they are all closed.
        """
        self.close_unrecognised()
        closing = []
        for s in self.served:
            close = getattr(s.factory, "close_connections", None)
            if callable(close):
                closing.append(maybeDeferred(close))
        return DeferredList(closing, consumeErrors=True).addCallback(lambda _: None)


def serve_one_port(endpoint, protocols: Mapping[str, IProtocolFactory] | Iterable[ServedProtocol],
                   *,
                   reactor=None, tls=None, websocket: bool = True,
                   config: OnePortConfig | None = None,
                   connection_limit: ConnectionLimit | None = None) -> Deferred:
    """Serve several protocols on one server endpoint (:class:`OnePortFactory`).

    :param endpoint: an ``IStreamServerEndpoint`` (TCP, TLS, UNIX; not a WebSocket endpoint:
        WebSocket is recognised by the server itself).
    :param protocols: and the other parameters: see :class:`OnePortFactory`.
    :returns: a Deferred firing with the listening port (its ``factory`` is the
        :class:`OnePortFactory`).
    :raises ValueError: as :class:`OnePortFactory`.
    """
    factory = OnePortFactory(protocols, reactor=reactor, tls=tls, websocket=websocket,
                             config=config, connection_limit=connection_limit)
    return endpoint.listen(factory)


# -- a client of a byte-stream protocol over WebSocket -------------------------------------------


class _ByteStreamClientProtocol(WebSocketClientProtocol):
    stream: WebSocketByteStream | None = None

    def onConnect(self, response) -> None:
        wanted = self.factory.subprotocol
        if response.protocol != wanted:
            self.factory.refused = (f"the server chose WebSocket subprotocol "
                                    f"{response.protocol!r}, not {wanted!r}")
            self.dropConnection(abort=True)

    def onOpen(self) -> None:
        protocol = self.factory.wrapped.buildProtocol(_open_transport(self).getPeer())
        self.stream = WebSocketByteStream(self, protocol)
        protocol.makeConnection(self.stream)
        opened = self.factory.opened
        if not opened.called:
            opened.callback(protocol)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        stream = self.stream
        if stream is not None and not stream.message_received(payload, isBinary):
            _refuse_text(self)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        stream, self.stream = self.stream, None
        if stream is not None:
            if self.wasClean:
                reason = Failure(ConnectionDone("the WebSocket closed cleanly"))
            stream.protocol.connectionLost(reason)
        opened = self.factory.opened
        if not opened.called:
            from .tls import tls_error

            tls = tls_error(reason)
            if tls is not None:
                opened.errback(tls)  # e.g. "TLS verification failed: ..."
                return
            why = self.factory.refused or getattr(self, "wasNotCleanReason", None) \
                or reason.getErrorMessage()
            opened.errback(WebSocketHandshakeError(
                f"WebSocket handshake with {self.factory.url} failed: {why}"))


class _ByteStreamClientFactory(WebSocketClientFactory):
    protocol = _ByteStreamClientProtocol

    def __init__(self, url: str, wrapped, subprotocol: str, reactor,
                 max_message_size: int) -> None:
        super().__init__(url, protocols=[subprotocol], reactor=reactor)
        self.noisy = False
        self.wrapped = wrapped
        self.subprotocol = subprotocol
        self.refused: str | None = None
        self.opened: Deferred = Deferred()
        self.setProtocolOptions(autoFragmentSize=0, failByDrop=False, autoPingInterval=0,
                                maxFramePayloadSize=max_message_size,
                                maxMessagePayloadSize=max_message_size)


@implementer(IStreamClientEndpoint)
class ByteStreamWebSocketClientEndpoint:
    """Connect a byte-stream protocol (:attr:`WebSocketFraming.BYTES`, e.g. the Jini mux)
    over WebSocket: the client side of :class:`WebSocketByteStream`.

    :param reactor: the reactor.
    :param endpoint: the ``IStreamClientEndpoint`` reaching the server (TCP; TLS for ``wss``).
    :param url: ``ws://host[:port]/path`` or ``wss://...`` (the ``Host`` header and path).
    :param subprotocol: the WebSocket subprotocol to offer (e.g.
        :data:`rsocket_tx.jini.codec.WEBSOCKET_SUBPROTOCOL`); the server must choose it.
    :param max_message_size: the largest message accepted from the server, bytes.
    """

    def __init__(self, reactor, endpoint, url: str, subprotocol: str, *,
                 max_message_size: int = DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE) -> None:
        self.reactor = reactor
        self.endpoint = endpoint
        self.url = url
        self.subprotocol = subprotocol
        self.max_message_size = max_message_size

    def connect(self, factory) -> Deferred:
        """Connect, open the WebSocket, start ``factory``'s protocol on it.

        :returns: a Deferred firing with ``factory``'s protocol once the WebSocket is open, or
            failing with the endpoint's error or a
            :class:`~rsocket_tx.transports.websocket.WebSocketHandshakeError`.
        """
        ws_factory = _ByteStreamClientFactory(self.url, factory, self.subprotocol,
                                              self.reactor, self.max_message_size)
        d = self.endpoint.connect(ws_factory)
        return d.addCallback(lambda _: ws_factory.opened)

    def __repr__(self) -> str:
        return f"ByteStreamWebSocketClientEndpoint({self.endpoint!r}, {self.url!r})"
