"""RSocket over WebSocket (rsocket_tx.transports.websocket) on real loopback sockets: the five
interaction models with our client and server (over ws and wss), fragmentation, protocol
errors (text message, oversized message), the static page on the same port, handshake
failures, and backpressure from the underlying socket."""

from __future__ import annotations

import socket

import pytest
import pytest_twisted
from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from twisted.internet import defer, reactor, ssl
from twisted.internet.endpoints import (
    SSL4ServerEndpoint,
    TCP4ClientEndpoint,
    TCP4ServerEndpoint,
    connectProtocol,
    wrapClientTLS,
)
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Protocol
from twisted.web.client import Agent, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted_support import EchoResponder, PauseRecordingResponder, wait
from zope.interface import implementer
from zope.interface.verify import verifyObject

from rsocket_tx import Payload, Responder, connect, serve
from rsocket_tx.client import make_setup
from rsocket_tx.core.errors import ConnectionError as RSocketConnectionError
from rsocket_tx.core.errors import ErrorCode
from rsocket_tx.core.frames import ErrorFrame, FrameType, decode, encode
from rsocket_tx.protocol import RSocketProtocol
from rsocket_tx.transports.websocket import (
    IFrameTransport,
    WebSocketClientEndpoint,
    WebSocketHandshakeError,
    WebSocketPort,
    WebSocketServerEndpoint,
)

aio = pytest_twisted.ensureDeferred


# --------------------------------------------------------------------- helpers


class WS:
    """Serve and connect RSocket over WebSocket on loopback (plain or TLS); clean up."""

    def __init__(self, tls=None) -> None:
        self.tls = tls  # (server ContextFactory, client options) or None
        self._ports: list = []
        self._clients: list = []
        self.server_protocols: list[RSocketProtocol] = []

    def _server_endpoint(self):
        if self.tls is None:
            return TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1")
        return SSL4ServerEndpoint(reactor, 0, self.tls[0], interface="127.0.0.1")

    def client_endpoint(self, port: int, path: str = "/rsocket", **kw):
        inner = TCP4ClientEndpoint(reactor, "127.0.0.1", port)
        scheme = "ws"
        if self.tls is not None:
            inner, scheme = wrapClientTLS(self.tls[1], inner), "wss"
        return WebSocketClientEndpoint(reactor, inner, f"{scheme}://localhost:{port}{path}",
                                       **kw)

    async def serve(self, responder_factory=EchoResponder, path="/rsocket", static=None,
                    **settings) -> int:
        endpoint = WebSocketServerEndpoint(reactor, self._server_endpoint(), path,
                                           static=static)
        port = await wait(serve(endpoint, responder_factory, reactor=reactor, **settings))
        assert isinstance(port, WebSocketPort)
        self._ports.append(port)
        build = port.factory.buildProtocol

        def buildProtocol(addr):
            proto = build(addr)
            self.server_protocols.append(proto)
            return proto

        port.factory.buildProtocol = buildProtocol
        return port.getHost().port

    async def connect(self, port: int, path: str = "/rsocket", **kw):
        rs = await wait(connect(self.client_endpoint(port, path), reactor=reactor, **kw))
        self._clients.append(rs._protocol)
        return rs

    async def cleanup(self) -> None:
        # (a server protocol that relays to a resumed session ends with the session)
        protos = [p for p in self._clients + self.server_protocols if p._delegate is None]
        for proto in protos:
            if proto._conn is not None and proto._conn.is_open:
                proto.close()  # (a resumable session: ended, not left waiting for a resume)
            if proto.transport is not None and not proto._transport_gone:
                proto.transport.abortConnection()
        for proto in protos:
            await wait(proto.when_closed())
        for port in self._ports:
            await port.stopListening()


@pytest.fixture(scope="module")
def tls_contexts():
    from tlscerts import make_ca, make_leaf

    ca = make_ca()
    leaf = make_leaf(ca, "localhost", hosts=("localhost", "127.0.0.1"))
    server = ssl.PrivateCertificate.loadPEM(leaf.key_pem() + leaf.cert_pem()).options()
    client = ssl.optionsForClientTLS("localhost", trustRoot=ssl.Certificate.loadPEM(
        ca.cert_pem()))
    return server, client


@pytest.fixture(params=["ws", "wss"])
def transport_kind(request):
    return request.param


@pytest_twisted.async_yield_fixture
async def ws():
    h = WS()
    yield h
    await h.cleanup()


@pytest_twisted.async_yield_fixture
async def ws_any(transport_kind, tls_contexts):
    """A WS harness over plain TCP, or over TLS (wss)."""
    h = WS(tls_contexts if transport_kind == "wss" else None)
    yield h
    await h.cleanup()


class RawWS(WebSocketClientProtocol):
    """A WebSocket client with no RSocket logic: send messages, see what comes back."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[tuple[bytes, bool]] = []
        self.opened = defer.Deferred()
        self.closed = defer.Deferred()
        self.close_code = None

    def onOpen(self) -> None:
        self.opened.callback(self)

    def onMessage(self, payload, isBinary) -> None:
        self.messages.append((payload, isBinary))

    def onClose(self, wasClean, code, reason) -> None:
        self.close_code = code
        if not self.opened.called:
            self.opened.errback(AssertionError(f"WebSocket did not open: {reason}"))
        if not self.closed.called:
            self.closed.callback(code)

    def frames(self) -> list:
        return [decode(m) for m, binary in self.messages if binary]


async def raw_ws(port: int, path: str = "/rsocket", **options) -> RawWS:
    factory = WebSocketClientFactory(f"ws://127.0.0.1:{port}{path}")
    factory.protocol = RawWS
    if options:
        factory.setProtocolOptions(**options)
    proto = await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port),
                                       factory.buildProtocol(None)))
    return await wait(proto.opened)


async def drain(stream) -> list[bytes]:
    return [p.data async for p in stream]


class AllModels(Responder):
    """Every interaction model, recording what it was given."""

    def __init__(self) -> None:
        self.fnf = defer.Deferred()
        self.pushed = defer.Deferred()

    def request_response(self, payload):
        return Payload(payload.data[::-1], payload.metadata)

    def fire_and_forget(self, payload):
        self.fnf.callback(payload)

    def metadata_push(self, metadata):
        self.pushed.callback(metadata)

    def request_stream(self, payload):
        return [Payload(b"%d" % i) for i in range(int(payload.data))]

    async def request_channel(self, payload, inbound):
        yield payload
        async for item in inbound:
            yield Payload(item.data.upper())


# --------------------------------------------------------------------- interaction models


@aio
async def test_all_five_interaction_models(ws_any):
    responders: list[AllModels] = []

    def make():
        responders.append(AllModels())
        return responders[-1]

    port = await ws_any.serve(make)
    rs = await ws_any.connect(port)
    assert IFrameTransport.providedBy(rs._protocol.transport)
    assert verifyObject(IFrameTransport, rs._protocol.transport)

    reply = await wait(rs.request_response(Payload(b"hello", b"md")))
    assert (reply.data, reply.metadata) == (b"olleh", b"md")

    await wait(rs.fire_and_forget(Payload(b"fire", b"m")))
    got = await wait(responders[0].fnf)
    assert (got.data, got.metadata) == (b"fire", b"m")

    await wait(rs.metadata_push(b"pushed"))
    assert await wait(responders[0].pushed) == b"pushed"

    assert await wait(drain(rs.request_stream(Payload(b"300"), prefetch=7))) == [
        b"%d" % i for i in range(300)]

    items = [Payload(b"a%d" % i) for i in range(50)]
    assert await wait(drain(rs.request_channel(Payload(b"first"), items))) == (
        [b"first"] + [b"A%d" % i for i in range(50)])

    # the server side is an RSocketProtocol over the WebSocket, without length prefixes
    server = ws_any.server_protocols[0]
    assert IFrameTransport.providedBy(server.transport)
    assert server._conn.config.length_prefixed is False
    await wait(rs.close())


@aio
async def test_server_requests_the_client_over_websocket(ws):
    asked = []

    class Server(Responder):
        async def request_response(self, payload):
            reply = await self.rsocket.request_response(Payload(b"from-server"))
            asked.append(reply.data)
            return Payload(b"done")

    class ClientSide(Responder):
        def request_response(self, payload):
            return Payload(payload.data + b"-answered")

    rs = await ws.connect(await ws.serve(Server), responder=ClientSide())
    assert (await wait(rs.request_response(Payload(b"go")))).data == b"done"
    assert asked == [b"from-server-answered"]


@aio
async def test_fragmented_payloads_travel_as_one_message_per_fragment(ws):
    received: list = []
    payload = bytes(range(256)) * 40  # 10 KiB

    def log(direction, frame):
        if direction == "recv":
            received.append(frame)

    port = await ws.serve(EchoResponder, fragment_size=64, frame_logger=log)
    rs = await ws.connect(port, fragment_size=64)
    reply = await wait(rs.request_response(Payload(payload, b"m" * 300)))
    assert (reply.data, reply.metadata) == (payload, b"m" * 300)
    requests = [f for f in received if f.frame_type in (FrameType.REQUEST_RESPONSE,
                                                        FrameType.PAYLOAD)]
    # 64-byte frames: the request arrived as many fragments, each a message of its own
    assert len(requests) > 100
    assert all(len(encode(f)) <= 64 for f in requests)
    assert await wait(drain(rs.request_channel(Payload(b"first"), [Payload(payload)]))) == [
        b"first", payload]


@aio
async def test_subprotocol_rsocket_is_accepted_when_offered(ws):
    port = await ws.serve()
    rs = await wait(connect(ws.client_endpoint(port, subprotocols=["rsocket"]),
                            reactor=reactor))
    ws._clients.append(rs._protocol)
    assert rs._protocol.transport.websocket_protocol_in_use == "rsocket"
    assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"


@aio
async def test_close_from_client_closes_the_websocket_cleanly(ws):
    port = await ws.serve()
    rs = await ws.connect(port)
    assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"
    client_ws = rs._protocol.transport
    await wait(rs.close())
    server = ws.server_protocols[0]
    await wait(server.when_closed())
    assert client_ws.wasClean and client_ws.localCloseCode == 1000


@aio
async def test_a_peer_that_does_not_answer_our_close_is_dropped_without_a_warning(ws):
    from twisted.logger import LogLevel, globalLogPublisher

    port = await ws.serve()
    rs = await ws.connect(port)
    assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"
    server_ws = ws.server_protocols[0].transport
    server_ws.onCloseFrame = lambda code, reason: None  # never answers a close frame
    client_ws = rs._protocol.transport
    client_ws.closeHandshakeTimeout = 0.05
    warnings: list = []

    def observe(event):
        if event["log_level"] >= LogLevel.warn:
            warnings.append(event)

    globalLogPublisher.addObserver(observe)
    try:
        await wait(rs._protocol.close())
    finally:
        globalLogPublisher.removeObserver(observe)
    assert client_ws.wasCloseHandshakeTimeout and not client_ws.wasClean
    assert warnings == []


@aio
async def test_server_close_connections_reaches_the_client(ws):
    port = await ws.serve()
    rs = await ws.connect(port)
    assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"
    factory = ws._ports[0].factory
    assert factory.connections == {ws.server_protocols[0]}
    await wait(factory.close_connections(0, "bye"))
    await wait(rs._protocol.when_closed())
    assert "bye" in str(rs._protocol.close_reason)


# --------------------------------------------------------------------- protocol errors


def setup_message() -> bytes:
    return encode(make_setup())


@aio
async def test_text_message_closes_with_connection_error_and_1003(ws):
    port = await ws.serve()
    raw = await raw_ws(port)
    raw.sendMessage(setup_message(), isBinary=True)
    raw.sendMessage(b"hello", isBinary=False)
    assert await wait(raw.closed) == 1003
    errors = [f for f in raw.frames() if isinstance(f, ErrorFrame)]
    assert len(errors) == 1
    assert errors[0].stream_id == 0 and errors[0].error_code == ErrorCode.CONNECTION_ERROR
    assert b"text WebSocket message" in errors[0].data
    server = ws.server_protocols[0]
    await wait(server.when_closed())
    assert "text WebSocket message" in str(server.close_reason)


@aio
async def test_message_over_the_max_frame_size_is_refused(ws):
    port = await ws.serve(max_frame_size=4096)
    rs_ok = await ws.connect(port)  # a frame at the limit is fine
    assert (await wait(rs_ok.request_response(Payload(b"y" * 4000)))).data == b"y" * 4000
    raw = await raw_ws(port)
    raw.sendMessage(setup_message(), isBinary=True)
    raw.sendMessage(b"\x00" * 4097, isBinary=True)
    assert await wait(raw.closed) == 1009
    errors = [f for f in raw.frames() if isinstance(f, ErrorFrame)]
    assert len(errors) == 1 and errors[0].error_code == ErrorCode.CONNECTION_ERROR
    assert b"4097 bytes exceeds the max frame size of 4096" in errors[0].data


@aio
async def test_our_client_refuses_an_oversized_message_from_the_server(ws):
    class Big(Responder):
        def request_response(self, payload):
            return Payload(b"z" * 10_000)

    port = await ws.serve(Big)
    rs = await ws.connect(port, max_frame_size=4096)
    with pytest.raises(RSocketConnectionError, match="max frame size of 4096"):
        await wait(rs.request_response(Payload(b"x")))
    server = ws.server_protocols[0]
    await wait(server.when_closed())
    assert "max frame size" in str(server.close_reason)


@aio
async def test_websocket_fragments_and_pings_between_messages_are_handled(ws):
    from rsocket_tx.core.frames import PayloadFrame, RequestResponseFrame

    port = await ws.serve()
    raw = await raw_ws(port)
    got = defer.Deferred()
    on_message = raw.onMessage

    def onMessage(payload, isBinary):
        on_message(payload, isBinary)
        if len(raw.frames()) == 3 and not got.called:
            got.callback(None)

    raw.onMessage = onMessage
    raw.sendMessage(setup_message(), isBinary=True)
    request = encode(RequestResponseFrame(stream_id=1, data=b"in fragments" * 20))
    raw.sendMessage(request, isBinary=True, fragmentSize=7)  # a message in many WS frames
    raw.sendPing(b"ping")
    raw.sendMessage(encode(RequestResponseFrame(stream_id=3, data=b"whole")), isBinary=True)
    raw.sendMessage(encode(RequestResponseFrame(stream_id=5, data=b"")), isBinary=True)
    await wait(got)
    replies = {f.stream_id: f.data for f in raw.frames() if isinstance(f, PayloadFrame)}
    assert replies == {1: b"in fragments" * 20, 3: b"whole", 5: b""}
    raw.sendClose(1000)
    await wait(raw.closed)


@aio
async def test_garbage_binary_message_before_setup_gets_invalid_setup(ws):
    port = await ws.serve()
    raw = await raw_ws(port)
    raw.sendMessage(b"\x00\x00", isBinary=True)  # not a frame
    await wait(raw.closed)
    errors = [f for f in raw.frames() if isinstance(f, ErrorFrame)]
    # spec §Connection Establishment: a first frame that is no valid SETUP: INVALID_SETUP
    assert errors and errors[0].error_code == ErrorCode.INVALID_SETUP


# --------------------------------------------------------------------- static page, handshake


class _Body(Protocol):
    """Collects a response body: ``done`` fires with its bytes when it ends (a body without a
    length ends with PotentialDataLoss), fails with any other reason.  (Twisted's
    ``readBody`` warns, DeprecationWarning, for every Agent response: its transport has no
    ``abortConnection``.)"""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.done = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.parts.append(data)

    def connectionLost(self, reason) -> None:
        if reason.check(ResponseDone, PotentialDataLoss):
            self.done.callback(b"".join(self.parts))
        else:
            self.done.errback(reason)


async def http_get(port: int, path: str):
    """``(status code, body bytes)`` of ``GET http://127.0.0.1:port/path``."""
    response = await wait(Agent(reactor).request(
        b"GET", f"http://127.0.0.1:{port}{path}".encode()))
    body = _Body()
    response.deliverBody(body)
    return response.code, await wait(body.done)


@aio
async def test_static_files_are_served_on_the_websocket_port(ws, tmp_path):
    (tmp_path / "index.html").write_bytes(b"<h1>rsocket page</h1>")
    (tmp_path / "app.js").write_bytes(b"console.log(1)")
    port = await ws.serve(static=str(tmp_path))
    assert await http_get(port, "/app.js") == (200, b"console.log(1)")
    assert await http_get(port, "/") == (200, b"<h1>rsocket page</h1>")
    code, _ = await http_get(port, "/missing.js")
    assert code == 404
    rs = await ws.connect(port)  # and the WebSocket on the same port
    assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"


@aio
async def test_websocket_at_root_path_next_to_static_files(ws, tmp_path):
    (tmp_path / "index.html").write_bytes(b"page")
    port = await ws.serve(path="/", static=str(tmp_path))
    assert await http_get(port, "/") == (200, b"page")
    rs = await ws.connect(port, path="/")
    assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"


@aio
async def test_other_paths_are_404_without_static(ws):
    port = await ws.serve()
    code, _ = await http_get(port, "/index.html")
    assert code == 404


@aio
async def test_handshake_on_a_wrong_path_fails_connect_clearly(ws):
    port = await ws.serve()
    with pytest.raises(WebSocketHandshakeError, match=r"/nope failed: .*404"):
        await wait(connect(ws.client_endpoint(port, "/nope"), reactor=reactor))


@aio
async def test_handshake_with_an_unsupported_subprotocol_fails_clearly(ws):
    port = await ws.serve()
    with pytest.raises(WebSocketHandshakeError, match="unsupported WebSocket subprotocol"):
        await wait(connect(ws.client_endpoint(port, subprotocols=["mqtt"]), reactor=reactor))
    assert ws.server_protocols == []


@aio
async def test_handshake_with_a_plain_http_server_fails_clearly(ws, tmp_path):
    (tmp_path / "index.html").write_bytes(b"page")
    from twisted.web.server import Site
    from twisted.web.static import File

    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
        Site(File(str(tmp_path))))
    try:
        with pytest.raises(WebSocketHandshakeError, match="failed"):
            await wait(connect(ws.client_endpoint(port.getHost().port, "/"), reactor=reactor))
    finally:
        await port.stopListening()


@aio
async def test_cancelling_connect_during_the_handshake_drops_the_connection():
    # a server that accepts TCP and never answers the WebSocket upgrade
    from twisted.internet.protocol import Factory, Protocol

    accepted = defer.Deferred()
    lost = defer.Deferred()

    class Silent(Protocol):
        def connectionMade(self):
            accepted.callback(self)

        def connectionLost(self, reason=None):
            lost.callback(None)

    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
        Factory.forProtocol(Silent))
    connected = defer.Deferred()

    @implementer(IStreamClientEndpoint)
    class Inner:
        def connect(self, factory):
            d = TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port).connect(factory)
            # (a turn later: the WebSocket endpoint's own callbacks have run by then)
            return d.addCallback(lambda proto: reactor.callLater(0, connected.callback, None)
                                 and proto)

    try:
        d = connect(WebSocketClientEndpoint(reactor, Inner(), "ws://localhost/rsocket"),
                    reactor=reactor)
        await wait(accepted)
        await wait(connected)  # the TCP connection is up, the handshake is pending
        d.cancel()
        with pytest.raises(defer.CancelledError):
            await wait(d)
        await wait(lost)  # and the connection was dropped
    finally:
        await port.stopListening()


def test_bad_arguments_are_refused():
    inner = TCP4ServerEndpoint(reactor, 0)
    with pytest.raises(ValueError, match="path must be a str starting with '/'"):
        WebSocketServerEndpoint(reactor, inner, "rsocket")
    with pytest.raises(ValueError, match="static must be a directory"):
        WebSocketServerEndpoint(reactor, inner, "/", static="/does/not/exist")
    with pytest.raises(TypeError, match="IStreamServerEndpoint"):
        WebSocketServerEndpoint(reactor, "tcp:0")
    client = TCP4ClientEndpoint(reactor, "127.0.0.1", 1)
    with pytest.raises(ValueError, match="ws:// or wss://"):
        WebSocketClientEndpoint(reactor, client, "http://localhost/")


# --------------------------------------------------------------------- backpressure


@aio
async def test_a_peer_that_does_not_read_pauses_the_stream_pump(ws):
    chunk = b"x" * 65_536
    n = 200
    state = PauseRecordingResponder.new_state()
    paused = defer.Deferred()

    class R(PauseRecordingResponder):
        server_protocols = ws.server_protocols

    R.n, R.chunk, R.state, R.first_pause = n, chunk, state, paused

    rs = await ws.connect(await ws.serve(R))
    client_tcp = rs._protocol.transport.transport
    # small kernel buffers (no autotuning): what the peer does not read soon fills them
    client_tcp.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16_384)
    ws.server_protocols[0].transport.transport.socket.setsockopt(
        socket.SOL_SOCKET, socket.SO_SNDBUF, 16_384)
    client_tcp.pauseProducing()  # the client stops reading its socket
    collected = rs.request_stream(Payload(b"")).collect()
    paused_at = await wait(paused)
    assert paused_at < n, "the pump pulled everything before the socket buffer filled"
    # while the peer does not read, the pump stays paused once the kernel buffers are full:
    # many reactor turns later, only a few items more than at the first pause were pulled
    for _ in range(200):
        d = defer.Deferred()
        reactor.callLater(0, d.callback, None)
        await d
    assert state["paused"]
    assert state["pulled"] < paused_at + 10, state
    assert not collected.called
    client_tcp.resumeProducing()  # reading again drains the buffer and resumes the pump
    items = await wait(collected)
    assert len(items) == n and all(p.data == chunk for p in items)
    assert state["resumes"] >= 1
    assert state["pulled_while_paused"] == 0


@aio
async def test_resumable_session_resumes_over_a_new_websocket(ws):
    port = await ws.serve(resume=True)
    rs = await ws.connect(port, resume=True, reconnect_initial_delay=0)
    assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"
    proto = rs._protocol
    resumed = proto.when_resumed()
    proto.transport.abortConnection()  # the WebSocket breaks
    await wait(resumed)
    assert proto.resumes == 1 and IFrameTransport.providedBy(proto.transport)
    assert (await wait(rs.request_response(Payload(b"after")))).data == b"after"
    ws._clients.append(proto)


@aio
async def test_wss_with_an_untrusted_server_certificate_fails_with_a_tls_error(tls_contexts):
    from tlscerts import make_ca

    from rsocket_tx.transports.tls import TLSError

    h = WS(tls_contexts)
    try:
        port = await h.serve()
        other = ssl.Certificate.loadPEM(make_ca("someone else").cert_pem())
        h.tls = (tls_contexts[0], ssl.optionsForClientTLS("localhost", trustRoot=other))
        with pytest.raises(TLSError, match="TLS verification failed"):
            await wait(connect(h.client_endpoint(port), reactor=reactor))
        assert h.server_protocols == []
    finally:
        await h.cleanup()
