"""RSocket over WebSocket (autobahn): one RSocket frame per binary WebSocket message.

:class:`WebSocketServerEndpoint` and :class:`WebSocketClientEndpoint` wrap any Twisted stream
endpoint (TCP, TLS, UNIX) and take the same :class:`~rsocket_tx.protocol.RSocketServerFactory`
/ :class:`~rsocket_tx.protocol.RSocketClientFactory` as a TCP endpoint, so ``serve()`` and
``connect()`` work unchanged::

    from twisted.internet.endpoints import TCP4ServerEndpoint, TCP4ClientEndpoint
    server = WebSocketServerEndpoint(reactor, TCP4ServerEndpoint(reactor, 8080), "/rsocket",
                                     static="examples/browser/dist")
    port = await serve(server, MyResponder)
    client = WebSocketClientEndpoint(reactor, TCP4ClientEndpoint(reactor, "localhost", 8080),
                                     "ws://localhost:8080/rsocket")
    rsocket = await connect(client)

WebSocket over TLS (``wss``): give a TLS inner endpoint (``SSL4ServerEndpoint``,
``wrapClientTLS(...)``) and a ``wss://`` URL.

Rules of the transport (RSocket spec §Transport, WebSocket: frames are not length-prefixed):

- a binary message is one whole frame; a text message is a protocol error: the connection
  is closed with ERROR[CONNECTION_ERROR] "text WebSocket message" and WebSocket close code
  1003 (unsupported data);
- the largest message accepted is the factory's ``max_frame_size`` (bytes); a bigger one is
  answered with ERROR[CONNECTION_ERROR] and close code 1009 (message too big), and is not
  buffered; our own messages are never fragmented at the WebSocket level;
- framing: autobahn does the opening handshake and everything unusual (control frames, the
  close handshake, fragmented and text messages, messages too large, protocol violations:
  closed with RFC 6455's codes); whole binary messages in one frame are parsed, unmasked,
  masked and framed here, a read's messages handed to the RSocket connection as one batch
  and a turn's frames written in one ``write`` (docs/transports.rst, WebSocket). No
  per-message compression is offered or accepted;
- backpressure: the :class:`~rsocket_tx.protocol.RSocketProtocol` is the streaming producer
  of the underlying socket, so a full socket buffer pauses every outbound stream pump;
- the server accepts the subprotocol of the factory it serves when a client offers it
  (:attr:`~rsocket_tx.protocol.RSocketServerFactory.websocket_subprotocol`: ``rsocket``; the
  2015 draft's factory, ``reactivesocket-2015``) and needs none (as rsocket-js and rsocket-py
  send none); a client offering only other subprotocols is refused with HTTP 400;
- the server factory's connection cap (``max_connections``) counts a connection from the
  moment it is accepted, while its HTTP/WebSocket handshake is still going on, not only once
  the WebSocket is open: past it, a new connection is closed at once.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from autobahn.twisted.resource import WebSocketResource
from autobahn.twisted.websocket import (
    WebSocketClientFactory,
    WebSocketClientProtocol,
    WebSocketServerFactory,
    WebSocketServerProtocol,
)
from autobahn.websocket.protocol import WebSocketProtocol
from autobahn.websocket.types import ConnectionDeny
from autobahn.websocket.xormasker import create_xor_masker
from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectError, ConnectionDone, ConnectionLost
from twisted.internet.interfaces import (
    IListeningPort,
    IStreamClientEndpoint,
    IStreamServerEndpoint,
)
from twisted.internet.protocol import connectionDone
from twisted.logger import Logger
from twisted.python.failure import Failure
from twisted.web.pages import notFound
from twisted.web.resource import Resource, getChildForRequest
from twisted.web.server import Site
from twisted.web.static import File
from zope.interface import implementer

from ..bridge import ABORT_DELAY
from ..interfaces import IFrameTransport
from .limits import CountingFactory, build_uncounted, counted_transport

__all__ = [
    "IFrameTransport",
    "RSocketWebSocketClientProtocol",
    "RSocketWebSocketServerProtocol",
    "SUBPROTOCOL",
    "WebSocketClientEndpoint",
    "WebSocketHandshakeError",
    "WebSocketPort",
    "WebSocketServerEndpoint",
]

_log = Logger()

#: The WebSocket subprotocol name our server accepts when a client offers it.
SUBPROTOCOL = "rsocket"

#: WebSocket close codes (RFC 6455 §7.4.1).
CLOSE_NORMAL = 1000
CLOSE_UNSUPPORTED_DATA = 1003
CLOSE_MESSAGE_TOO_BIG = 1009

_OPEN = WebSocketProtocol.STATE_OPEN
_CLOSED = WebSocketProtocol.STATE_CLOSED
_CLOSING = WebSocketProtocol.STATE_CLOSING
_U16 = struct.Struct("!BBH")
_U64 = struct.Struct("!BBQ")
_BINARY_FIN = 0x82  # FIN, opcode 2 (binary)
_MAX_SIZE = 0xFFFFFF  # the largest RSocket frame
#: the first two bytes of a binary message's frame of 0-125 bytes, unmasked and masked
_HEADS = [bytes((_BINARY_FIN, n)) for n in range(126)]
_MASKED_HEADS = [bytes((_BINARY_FIN, 0x80 | n)) for n in range(126)]
#: payloads up to this size (bytes) are masked or unmasked together, in one XOR over the
#: payloads of a read or a write; a larger one alone, by autobahn's masker (NVX: C, SIMD;
#: its setup costs more than masking a kilobyte in Python does)
_XOR_BATCH_MAX = 1024


def _unmask(mask: bytes, data: bytes) -> bytes:
    """``data`` masked (or unmasked: the same) with the 4-byte ``mask`` (RFC 6455 §5.3), by
    autobahn's masker (its C implementation, NVX, when built)."""
    return create_xor_masker(mask, len(data)).process(data)


def _unmask_batch(items: list[bytes], indexes: list[int], streams: list[bytes]) -> None:
    """Mask (or unmask) ``items[k]`` for each ``k`` of ``indexes``, in place, with the mask
    stream of the same rank in ``streams`` (its 4-byte key repeated over the payload's
    length): one XOR of Python integers over all of them, then cut apart again."""
    joined = b"".join([items[k] for k in indexes])
    n = len(joined)
    plain = (int.from_bytes(joined, "little") ^
             int.from_bytes(b"".join(streams), "little")).to_bytes(n, "little")
    if len(indexes) == 1:
        items[indexes[0]] = plain
        return
    pos = 0
    for k in indexes:
        end = pos + len(items[k])
        items[k] = plain[pos:end]
        pos = end


class WebSocketHandshakeError(ConnectError):
    """The WebSocket opening handshake failed (HTTP status other than 101, e.g. 404 for a
    wrong path; a subprotocol refused; the handshake timed out; the connection closed
    during the handshake)."""

    #: the underlying exception (e.g. ``ConnectionRefusedError``), when there is one
    reason: BaseException | None = None

    def __init__(self, message: str) -> None:
        super().__init__(string=message)
        self.message = message

    def __str__(self) -> str:
        return self.message


if TYPE_CHECKING:
    from autobahn.twisted.websocket import WebSocketAdapterProtocol

    # (autobahn's two bases disagree on the types of ``peer`` and ``_transport_details``)
    class _WebSocketBase(WebSocketAdapterProtocol, WebSocketProtocol):  # type: ignore[misc]
        """What the mixin below is mixed into (for type checking only)."""

        transport: Any  # the stream transport: TCP, or TLS (``ITCPTransport``)
        logOctets: bool  # (autobahn's protocol options, set on the protocol by the factory)
        maxFramePayloadSize: int
else:
    _WebSocketBase = object


class _RSocketWebSocket(_WebSocketBase):
    """What the server and client protocols share: host one RSocketProtocol, be its
    :class:`IFrameTransport`."""

    _rsocket = None  # the RSocketProtocol fed by this WebSocket, once open
    _close_code = CLOSE_NORMAL
    _close_reason: str | None = None
    _abort_call = None
    _left = 0  # bytes of a message's payload still to come (its parts so far in _parts)
    _parts: list[bytes]
    _mask = b""  # (its masking key, from a client)

    def mux_factory(self):
        """The factory whose protocol this WebSocket carries: the RSocket server or client
        factory (a hook: the one-port server, :mod:`rsocket_tx.transports.oneport`, chooses
        it by WebSocket subprotocol)."""
        return self.factory.rsocket_factory

    def _start_rsocket(self):
        factory = self.mux_factory()
        # (a server's connection is counted from its TCP accept, by the layer in front)
        proto = build_uncounted(factory, self.transport.getPeer())
        self._rsocket = proto
        proto.makeConnection(self)
        return proto

    # -------------------------------------------------------------- from the peer
    #
    # The messages of the open connection are parsed here, not by autobahn: whole binary
    # messages in one unfragmented frame (FIN, opcode 2, no RSV bit, masked from a client and
    # unmasked from a server, RFC 6455 §5.1-5.2; length in its minimal encoding and within
    # ``maxFramePayloadSize``) are cut out of each read, unmasked and handed to the RSocket
    # connection as one batch (``framesReceived``). Anything else at the head of the buffer (a
    # control frame, a fragment, a text message, a frame too large, a protocol violation) is
    # one step of autobahn's own parser (``processData``), which reports what is wrong in
    # RFC 6455 terms; after it the fast parser takes over again. A frame whose header is in
    # but whose payload is not is kept as a list of reads until its last byte is in (no
    # buffer copied per read).

    def dataReceived(self, data: bytes) -> None:
        # (autobahn's logs a debug line per read, with its arguments formatted first)
        if self._left:
            self._payload_received(data)
        else:
            self._dataReceived(data)

    def _dataReceived(self, data: bytes) -> None:
        if self.state != _OPEN or self._rsocket is None or self.logOctets:
            super()._dataReceived(data)
            return
        self.trafficStats.incomingOctetsWireLevel += len(data)
        buffered = self.data
        self.data = buffered + data if buffered else data
        self._consume([])

    def consumeData(self) -> None:
        # (autobahn calls it with what followed the opening handshake in the same read)
        self._consume([])

    def _consume(self, messages: list[bytes]) -> None:
        """Parse the buffer: our messages to the RSocket connection, anything else a step of
        autobahn's parser, until the buffer ends (or the connection closes)."""
        while True:
            if self.state == _OPEN and self.current_frame is None and not self.inside_message \
                    and self._rsocket is not None and self._perMessageCompress is None:
                unusual = self._take_messages(messages)
                if messages:
                    self._deliver(messages)
                    messages = []
                if not unusual:
                    return
            elif messages:
                self._deliver(messages)
                messages = []
            state = self.state
            if state == _OPEN or state == _CLOSING:
                if not self.processData() or self.state == _CLOSED:
                    return
            elif state == _CLOSED:
                return  # (what follows the end is moot)
            else:
                super().consumeData()  # (the opening handshake)
                return

    def _take_messages(self, messages: list[bytes]) -> bool:
        """Cut the whole binary messages at the head of the buffer, unmasked, into
        ``messages``; keep what follows. :returns: True when an unusual frame (for autobahn)
        follows, False when the buffer ends (in a frame or not)."""
        data = self.data
        size = len(data)
        server = self.factory.isServer
        masked = 0x80 if server else 0  # clients mask, servers do not (RFC 6455 §5.1)
        limit = self.maxFramePayloadSize or _MAX_SIZE
        small: list[int] = []  # (server) indexes of the small masked messages
        streams: list[bytes] = []  # their masks, repeated over each payload
        unusual = False
        pos = 0
        while size - pos >= 2:
            b1 = data[pos + 1]
            if data[pos] != _BINARY_FIN or (b1 & 0x80) != masked:
                unusual = True
                break
            n = b1 & 0x7F
            i = pos + 2
            if n >= 126:
                if n == 126:
                    if size - i < 2:
                        break
                    n = (data[i] << 8) | data[i + 1]
                    i += 2
                    if n < 126:
                        unusual = True  # (not the minimal encoding: autobahn refuses it)
                        break
                else:
                    if size - i < 8:
                        break
                    n = int.from_bytes(data[i:i + 8], "big")
                    i += 8
                    if n <= 0xFFFF:
                        unusual = True  # (not the minimal encoding, or over 2^63)
                        break
            if n > limit:
                unusual = True  # (autobahn refuses it: _max_message_size_exceeded)
                break
            if masked:
                if size - i < 4:
                    break
                mask = data[i:i + 4]
                i += 4
            else:
                mask = b""
            end = i + n
            if end > size:
                # the rest of this message is still to come: its parts are kept in a list
                self._parts = [data[i:]]
                self._left = end - size
                self._mask = mask
                pos = size
                break
            if not mask or not n:
                messages.append(data[i:end])
            elif n <= _XOR_BATCH_MAX:
                small.append(len(messages))
                messages.append(data[i:end])
                streams.append((mask * ((n >> 2) + 1))[:n])
            else:
                messages.append(_unmask(mask, data[i:end]))
            pos = end
        self.data = data[pos:] if pos else data
        if small:
            _unmask_batch(messages, small, streams)
        return unusual

    def _payload_received(self, data: bytes) -> None:
        """A read while the payload of a message is incomplete (``_left`` bytes missing)."""
        self.trafficStats.incomingOctetsWireLevel += len(data)
        left = self._left - len(data)
        if left > 0:
            self._parts.append(data)
            self._left = left
            return
        parts, self._parts, self._left = self._parts, [], 0
        if left:
            parts.append(data[:left])
            self.data = data[left:]
        else:
            parts.append(data)
        message = b"".join(parts)
        mask, self._mask = self._mask, b""
        self._consume([_unmask(mask, message) if mask else message])

    def _deliver(self, messages: list[bytes]) -> None:
        rsocket = self._rsocket
        if rsocket is None:
            return  # (the connection is gone: the rest is moot)
        self.trafficStats.incomingWebSocketMessages += len(messages)
        if len(messages) == 1:
            rsocket.frameReceived(messages[0])
        else:
            rsocket.framesReceived(messages)

    def onMessageEnd(self) -> None:
        # a message assembled by autobahn: straight to onMessage (no observer signals)
        if not self.failedByMe:
            parts = self.message_data
            self.onMessage(parts[0] if len(parts) == 1 else b"".join(parts),
                           self.message_is_binary)
        self.message_data = []

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        rsocket = self._rsocket
        if rsocket is None:
            return
        if isBinary:
            rsocket.frameReceived(payload)
        else:
            self._refuse(CLOSE_UNSUPPORTED_DATA, "text WebSocket message: RSocket frames travel "
                         "in binary messages")

    def _max_message_size_exceeded(self, msg_size, max_msg_size, reason) -> None:
        # autobahn's hook for a message (or frame) past maxMessagePayloadSize: tell the peer
        # in RSocket terms first; the rest of the message is dropped unbuffered (failedByMe)
        self.failedByMe = True
        self._refuse(CLOSE_MESSAGE_TOO_BIG, f"WebSocket message of {msg_size} bytes exceeds the "
                     f"max frame size of {max_msg_size} bytes")

    def _refuse(self, code: int, reason: str) -> None:
        """Bad input from the peer: ERROR[CONNECTION_ERROR] ``reason``, then close ``code``."""
        self._close_code = code
        self._close_reason = reason
        if self._rsocket is not None:
            self._rsocket.transport_error(reason)
        else:
            self.loseConnection()

    def dropConnection(self, abort: bool = False) -> None:
        if abort and self.wasClean and self.state != _CLOSED:
            # the close handshake is complete (autobahn's server then aborts the TCP
            # connection): close it normally instead, so what we wrote last (our own close
            # frame, sent at the same time as the peer's) is not thrown away with an RST.
            # A peer that does not read it is aborted a moment later.
            abort = False
            self._abort_call = self.mux_factory().reactor.callLater(
                ABORT_DELAY, self.transport.abortConnection)
        super().dropConnection(abort)

    def onCloseHandshakeTimeout(self) -> None:
        # the peer did not answer our close frame within closeHandshakeTimeout (1 s). We
        # close only once the RSocket connection is over, and some peers simply drop the
        # connection then, or later: abort it, with no warning
        self.closeHandshakeTimeoutCall = None
        self.wasCloseHandshakeTimeout = True
        self._drop_quietly("WebSocket closing handshake timeout (peer did not answer our "
                           "close in time)")

    def onServerConnectionDropTimeout(self) -> None:
        # client: the close handshake is done, the server did not close the TCP connection
        # within serverConnectionDropTimeout (1 s): abort it, with no warning
        self.serverConnectionDropTimeoutCall = None
        self.wasServerConnectionDropTimeout = True
        self._drop_quietly("the server did not close the TCP connection after the WebSocket "
                           "close handshake")

    def _drop_quietly(self, why: str) -> None:
        if self.state == _CLOSED:
            return
        _log.info("WebSocket connection with {peer} aborted: {why}", peer=self.peer, why=why)
        self.wasClean = True  # (autobahn warns about an unclean drop; this one is expected)
        super().dropConnection(abort=True)  # (autobahn's: an abort, not a delayed one)
        self.wasClean = False
        self.wasNotCleanReason = why

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        call, self._abort_call = self._abort_call, None
        self._parts, self._left = [], 0  # (a message cut short: moot)
        if call is not None and call.active():
            call.cancel()
        super().connectionLost(reason)
        rsocket, self._rsocket = self._rsocket, None
        if rsocket is None:
            return
        code = getattr(self, "remoteCloseCode", None)
        if code is not None and code != CLOSE_NORMAL:
            why = getattr(self, "remoteCloseReason", None)
            reason = Failure(ConnectionLost(
                f"the peer closed the WebSocket with code {code}" + (f": {why}" if why else "")))
        elif self.wasClean:
            reason = Failure(ConnectionDone("the WebSocket closed cleanly"))
        rsocket.connectionLost(reason)

    # -------------------------------------------------------------- IFrameTransport

    def writeFrames(self, frames: list[bytes]) -> None:
        """Send each frame as one binary message, unfragmented, in one write (see
        :class:`IFrameTransport`); a client masks each with a fresh random key (RFC 6455
        §5.3, from ``os.urandom``)."""
        if self.state != _OPEN:
            return  # closing: what the RSocket side still writes is moot
        if self._perMessageCompress is not None:
            for frame in frames:
                self.sendMessage(frame, True)
            return
        out: list[bytes] = []
        if self.factory.isServer:
            for frame in frames:
                n = len(frame)
                if n <= 125:
                    out += (_HEADS[n], frame)
                elif n <= 0xFFFF:
                    out += (_U16.pack(_BINARY_FIN, 126, n), frame)
                else:
                    out += (_U64.pack(_BINARY_FIN, 127, n), frame)
        else:
            keys = os.urandom(4 * len(frames))
            small: list[int] = []  # indexes in ``out`` of the small payloads, masked together
            streams: list[bytes] = []
            k = 0
            for frame in frames:
                n = len(frame)
                mask = keys[k:k + 4]
                k += 4
                if n <= 125:
                    out += (_MASKED_HEADS[n], mask)
                elif n <= 0xFFFF:
                    out += (_U16.pack(_BINARY_FIN, 0xFE, n), mask)
                else:
                    out += (_U64.pack(_BINARY_FIN, 0xFF, n), mask)
                if n > _XOR_BATCH_MAX:
                    out.append(_unmask(mask, frame))
                else:
                    if n:
                        small.append(len(out))
                        streams.append((mask * ((n >> 2) + 1))[:n])
                    out.append(frame)
            if small:
                _unmask_batch(out, small, streams)
        self.trafficStats.outgoingWebSocketMessages += len(frames)
        if len(out) <= 6:
            self.transport.writeSequence(out)  # (one or two frames: a large payload uncopied)
        else:
            self.transport.write(b"".join(out))

    def loseConnection(self) -> None:
        """Close with the WebSocket close handshake (code 1000, or the code of the protocol
        error that made us close); the TCP connection follows."""
        state = self.state
        if state == _OPEN:
            reason = self._close_reason
            self.sendCloseFrame(code=self._close_code,
                                reasonUtf8=None if reason is None else
                                reason.encode("utf-8")[:123], isReply=False)
        elif state != _CLOSED and state != _CLOSING:
            self.dropConnection(abort=False)  # still in the opening handshake

    def abortConnection(self) -> None:
        """Drop the connection at once."""
        if self.state != _CLOSED:
            self.wasClean = False
            self.wasNotCleanReason = "aborted locally"
            self.dropConnection(abort=True)
        else:
            self.transport.abortConnection()

    def getPeer(self):
        return self.transport.getPeer()

    def getHost(self):
        return self.transport.getHost()


def _set_options(factory, max_frame_size: int) -> None:
    factory.setProtocolOptions(
        maxFramePayloadSize=max_frame_size, maxMessagePayloadSize=max_frame_size,
        autoFragmentSize=0,  # our messages are never fragmented
        failByDrop=False,  # protocol errors close with a close frame
        autoPingInterval=0,  # RSocket has its own KEEPALIVE
    )


@implementer(IFrameTransport)
class RSocketWebSocketServerProtocol(  # type: ignore[misc]  # (autobahn's bases, above)
        _RSocketWebSocket, WebSocketServerProtocol):
    """Server side of one WebSocket carrying one RSocket connection: the
    :class:`~rsocket_tx.protocol.RSocketProtocol` is built by the RSocket server factory when
    the WebSocket opens, and this protocol is its :class:`IFrameTransport`."""

    def connectionMade(self) -> None:
        # taken over from twisted.web's HTTPChannel, which registered itself as the TCP
        # transport's producer: the RSocketProtocol is the producer from now on
        self.transport.unregisterProducer()
        # (written straight to the transport under the connection's count, if any)
        self.transport = counted_transport(self.transport)
        super().connectionMade()

    def onConnect(self, request):
        """Accept the subprotocol of the factory served
        (:attr:`~rsocket_tx.protocol.RSocketServerFactory.websocket_subprotocol`: ``rsocket``,
        ``reactivesocket-2015`` for the 2015 draft) or none; refuse a client offering only
        others (HTTP 400)."""
        offered = request.protocols
        if not offered:
            return None
        subprotocol = self.factory.subprotocol
        if subprotocol in offered:
            return subprotocol
        raise ConnectionDeny(ConnectionDeny.BAD_REQUEST, (
            f"unsupported WebSocket subprotocol(s) {', '.join(offered)}: this server speaks "
            f"'{subprotocol}' (or no subprotocol)"))

    def onOpen(self) -> None:
        self._start_rsocket()


@implementer(IFrameTransport)
class RSocketWebSocketClientProtocol(  # type: ignore[misc]  # (autobahn's bases, above)
        _RSocketWebSocket, WebSocketClientProtocol):
    """Client side: builds the RSocket client factory's protocol when the WebSocket opens and
    fires the factory's ``opened`` Deferred with it (or fails it with
    :class:`WebSocketHandshakeError` if the WebSocket does not open)."""

    def onOpen(self) -> None:
        proto = self._start_rsocket()
        opened = self.factory.opened
        if not opened.called:
            opened.callback(proto)

    def connectionLost(self, reason: Failure = connectionDone) -> None:
        super().connectionLost(reason)
        opened = self.factory.opened
        if opened.called:
            return
        from .tls import tls_error

        tls = tls_error(reason)
        if tls is not None:
            opened.errback(tls)  # e.g. "TLS verification failed: ..."
            return
        why = getattr(self, "wasNotCleanReason", None) or reason.getErrorMessage()
        error = WebSocketHandshakeError(
            f"WebSocket handshake with {self.factory.url} failed: {why}")
        error.reason = reason.value
        opened.errback(error)


class _ServerFactory(WebSocketServerFactory):
    protocol = RSocketWebSocketServerProtocol

    def __init__(self, rsocket_factory) -> None:
        super().__init__()
        self.noisy = False
        self.rsocket_factory = rsocket_factory
        #: the one subprotocol accepted: the served factory's
        self.subprotocol: str = rsocket_factory.websocket_subprotocol
        _set_options(self, rsocket_factory.config.max_frame_size)


class _ClientFactory(WebSocketClientFactory):
    protocol = RSocketWebSocketClientProtocol

    def __init__(self, url: str, rsocket_factory, subprotocols: Sequence[str],
                 headers: dict | None) -> None:
        super().__init__(url, protocols=list(subprotocols) or None, headers=headers)
        self.noisy = False
        self.rsocket_factory = rsocket_factory
        self.opened: Deferred = Deferred(self._cancel)
        self._proto: RSocketWebSocketClientProtocol | None = None
        _set_options(self, rsocket_factory.config.max_frame_size)

    def buildProtocol(self, addr):
        proto = super().buildProtocol(addr)
        if isinstance(proto, RSocketWebSocketClientProtocol):
            self._proto = proto
        return proto

    def _cancel(self, opened: Deferred) -> None:
        # (``opened`` then fails with CancelledError)
        if self._proto is not None and self._proto.transport is not None:
            self._proto.transport.abortConnection()


class _Root(Resource):
    """The site's only resource: the WebSocket at ``path``, else the static tree (or 404)."""

    isLeaf = True

    def __init__(self, path: bytes, websocket: WebSocketResource, static: Resource | None):
        super().__init__()
        self._path = path
        self._websocket = websocket
        self._static = static

    def render(self, request):
        if request.path.rstrip(b"/") == self._path:
            upgrade = request.getHeader(b"upgrade")
            if self._static is None or (upgrade and upgrade.lower() == b"websocket"):
                return self._websocket.render(request)
        if self._static is None:
            return notFound().render(request)
        return getChildForRequest(self._static, request).render(request)


@implementer(IListeningPort)
class WebSocketPort:
    """The ``IListeningPort`` of :meth:`WebSocketServerEndpoint.listen`.

    :ivar factory: the RSocket server factory (as ``port.factory`` of a TCP port served by
        :func:`~rsocket_tx.server.serve`: ``port.factory.close_connections()``).
    :ivar site: the twisted.web ``Site`` listening.
    :ivar port: the inner endpoint's listening port.
    """

    def __init__(self, port, site: Site, factory) -> None:
        self.port = port
        self.site = site
        self.factory = factory

    def startListening(self):
        return self.port.startListening()

    def stopListening(self):
        d = self.port.stopListening()
        self.factory.doStop()
        return d

    def getHost(self):
        return self.port.getHost()


def _check_path(path: str) -> bytes:
    if not isinstance(path, str) or not path.startswith("/"):
        raise ValueError(f"path must be a str starting with '/', got {path!r}")
    return path.encode("utf-8").rstrip(b"/")


@implementer(IStreamServerEndpoint)
class WebSocketServerEndpoint:
    """Serve RSocket over WebSocket on ``endpoint``: a twisted.web ``Site`` whose resource at
    ``path`` is the WebSocket (autobahn), other paths served from ``static`` or 404.

    :param reactor: the reactor.
    :param endpoint: the ``IStreamServerEndpoint`` to listen on (TCP; TLS for ``wss``).
    :param path: the WebSocket's URL path (``"/"``, ``"/rsocket"``); a trailing ``/`` is
        ignored.
    :param static: a directory served by ``twisted.web.static.File`` at every other path (the
        browser page on the same port); with ``static`` a plain GET of ``path`` (no
        ``Upgrade: websocket``) is a static request too. None: other paths get 404.
    :raises ValueError: ``path`` does not start with ``/``, or ``static`` is not a directory.
    """

    def __init__(self, reactor, endpoint, path: str = "/", *, static: str | None = None):
        if not IStreamServerEndpoint.providedBy(endpoint):
            raise TypeError(f"endpoint must provide IStreamServerEndpoint, got {endpoint!r}")
        self._reactor = reactor
        self._endpoint = endpoint
        self.path = path
        self._path = _check_path(path)
        if static is not None and not os.path.isdir(static):
            raise ValueError(f"static must be a directory, got {static!r}")
        self.static = static

    def listen(self, factory) -> Deferred:
        """Listen; each WebSocket opened at ``path`` carries one connection of ``factory``.

        :param factory: an :class:`~rsocket_tx.protocol.RSocketServerFactory` or a subclass
            (its ``config.max_frame_size`` is the largest message accepted, bytes; its
            ``websocket_subprotocol`` the subprotocol accepted, as is none; its
            ``connection_limit`` counts each connection once, from its TCP accept: in the
            HTTP and WebSocket handshake too, static requests included).
        :returns: Deferred firing with a :class:`WebSocketPort` (``IListeningPort``), or
            failing with the inner endpoint's error (e.g. ``CannotListenError``).
        """
        ws = WebSocketResource(_ServerFactory(factory))
        static = None if self.static is None else File(self.static)
        site = Site(_Root(self._path, ws, static), reactor=self._reactor)
        site.displayTracebacks = False
        site.noisy = False
        limit = getattr(factory, "connection_limit", None)
        # the cap counts a connection from its accept: in its HTTP and WebSocket handshake too
        served = site if limit is None else CountingFactory(site, limit)
        d = self._endpoint.listen(served)

        def listening(port):
            factory.doStart()
            return WebSocketPort(port, site, factory)

        return d.addCallback(listening)

    def __repr__(self) -> str:
        return f"WebSocketServerEndpoint({self._endpoint!r}, path={self.path!r})"


@implementer(IStreamClientEndpoint)
class WebSocketClientEndpoint:
    """Connect RSocket over WebSocket through ``endpoint`` to ``url``.

    :param reactor: the reactor.
    :param endpoint: the ``IStreamClientEndpoint`` that reaches the server (TCP; a TLS
        endpoint for ``wss``).
    :param url: ``ws://host[:port]/path`` or ``wss://...``: gives the HTTP ``Host`` header
        and the request path (the connection itself goes through ``endpoint``).
    :param subprotocols: WebSocket subprotocols to offer (e.g. ``["rsocket"]``); default none.
    :param headers: extra HTTP headers of the opening handshake (``{"Authorization": ...}``).
    :raises ValueError: ``url`` is not a ``ws://`` or ``wss://`` URL.
    """

    def __init__(self, reactor, endpoint, url: str, *, subprotocols: Sequence[str] = (),
                 headers: dict | None = None):
        if not IStreamClientEndpoint.providedBy(endpoint):
            raise TypeError(f"endpoint must provide IStreamClientEndpoint, got {endpoint!r}")
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise ValueError(f"url must be a ws:// or wss:// URL with a host, got {url!r}")
        self._reactor = reactor
        self._endpoint = endpoint
        self.url = url
        self.subprotocols = tuple(subprotocols)
        self.headers = headers

    def connect(self, factory) -> Deferred:
        """Connect, open the WebSocket, start ``factory``'s protocol on it.

        :param factory: an :class:`~rsocket_tx.protocol.RSocketClientFactory`.
        :returns: Deferred firing with the :class:`~rsocket_tx.protocol.RSocketProtocol` once
            the WebSocket is open (its SETUP is on the way), or failing with the inner
            endpoint's error, a :class:`~rsocket_tx.transports.tls.TLSError` (``wss``: e.g. the
            server's certificate is not trusted) or :class:`WebSocketHandshakeError` (the
            server answered the upgrade with e.g. 404, refused the subprotocol, or did not
            answer within 5 s; its ``reason`` is the underlying exception).
            Cancelling it drops the connection.
        """
        ws_factory = _ClientFactory(self.url, factory, self.subprotocols, self.headers)
        d = self._endpoint.connect(ws_factory)
        return d.addCallback(lambda _: ws_factory.opened)

    def __repr__(self) -> str:
        return f"WebSocketClientEndpoint({self._endpoint!r}, {self.url!r})"
