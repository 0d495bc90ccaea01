"""The server-wide cap on connections (rsocket_tx.transports.limits.ConnectionLimit), tested with
real listening ports: the one-port server counts every connection once, whatever it turns out to
be (still sniffed, in a TLS or WebSocket handshake, handed to a protocol), and gives the count
back exactly once however it ends (garbage, the sniff timeout, a failed TLS handshake, a closed
protocol); the plain WebSocket server counts a connection during its HTTP/WebSocket handshake;
and each twistd plugin's ``--max-connections`` caps its server: at the cap the next connection
is closed at once and the log line states the cap, and after one closes a new one is served."""

from __future__ import annotations

import pytest
import pytest_twisted
from tlscerts import make_tls_files
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.task import Clock
from twisted.logger import formatEvent, globalLogPublisher
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted_support import (
    BytesClient,
    EchoResponder,
    LoopbackServer,
    options_usage_error,
    parse_options,
    wait,
)

from rsocket_tx import Payload, connect, serve
from rsocket_tx.jini import EchoDispatcher, JiniMuxClient, JiniMuxServerFactory
from rsocket_tx.protocol import RSocketServerFactory
from rsocket_tx.transports.limits import ConnectionLimit, RefusedConnection
from rsocket_tx.transports.oneport import (
    OnePortConfig,
    OnePortFactory,
    OnePortWebSocketProtocol,
    SniffingProtocol,
)
from rsocket_tx.transports.tls import server_options
from rsocket_tx.transports.websocket import WebSocketClientEndpoint, WebSocketHandshakeError

# a TLS 1.2 record header of a ClientHello (handshake, version 3.1, length 512, type 1)
CLIENT_HELLO = bytes.fromhex("160301020001")
# the beginning of a WebSocket opening handshake (the request line only)
PARTIAL_UPGRADE = b"GET / HTTP/1.1\r\n"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("cap-tls"))


@pytest.fixture
def cap_lines():
    """The log lines of refusals past a cap."""
    lines: list[str] = []

    def observer(event):
        text = formatEvent(event)
        if "(max_connections)" in text:
            lines.append(text)

    globalLogPublisher.addObserver(observer)
    yield lines
    globalLogPublisher.removeObserver(observer)


class Accepts:
    """What a listening factory builds, one protocol per accepted connection: ``built`` (in
    order), a Deferred per count reached (:meth:`reach`) and per protocol whose transport is
    lost (:meth:`lost`). (The Deferreds fire from the reactor, once ``buildProtocol`` has
    returned and the transport is connected.)"""

    def __init__(self, factory) -> None:
        self.built: list = []
        self._lost: list[defer.Deferred] = []
        self._waiting: list[tuple[int, defer.Deferred]] = []
        build = factory.buildProtocol

        def counted_build(addr):
            protocol = build(addr)
            self.built.append(protocol)
            self._lost.append(self._watch(protocol))
            reactor.callLater(0, self._fire)
            return protocol

        factory.buildProtocol = counted_build

    def _watch(self, protocol) -> defer.Deferred:
        gone: defer.Deferred = defer.Deferred()
        lost = protocol.connectionLost

        def connection_lost(reason=None):
            try:
                lost(reason)
            finally:
                reactor.callLater(0, gone.callback, None)

        protocol.connectionLost = connection_lost
        return gone

    def _fire(self) -> None:
        ready = [(n, d) for n, d in self._waiting if len(self.built) >= n]
        self._waiting = [(n, d) for n, d in self._waiting if len(self.built) < n]
        for _, d in ready:
            d.callback(None)

    def reach(self, n: int) -> defer.Deferred:
        """Fires once ``n`` connections have been accepted (built) in all."""
        d: defer.Deferred = defer.Deferred()
        self._waiting.append((n, d))
        reactor.callLater(0, self._fire)
        return d

    def lost(self, index: int) -> defer.Deferred:
        """Fires once the transport of the connection built ``index``-th (0-based) is lost."""
        return self._lost[index]


async def raw_client(port: int, data: bytes = b"") -> BytesClient:
    raw = BytesClient()
    await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port), raw))
    if data:
        raw.transport.write(data)
    return raw


def handed_over(sniffer: SniffingProtocol) -> defer.Deferred:
    """Fires once the one-port server has handed ``sniffer``'s connection to a protocol (or
    layer: TLS, WebSocket)."""
    if sniffer.chosen is not None:
        return defer.succeed(sniffer.chosen)
    done: defer.Deferred = defer.Deferred()
    hand_over = sniffer.hand_over

    def handing_over(protocol):
        hand_over(protocol)
        reactor.callLater(0, done.callback, protocol)

    sniffer.hand_over = handing_over
    return done


async def refused(port: int, accepts: Accepts, cap_lines: list[str], cap: int,
                  server_name: str) -> None:
    """A new connection is closed at once, with nothing written, and the log states the cap."""
    n = len(accepts.built)
    before = len(cap_lines)
    raw = await raw_client(port)
    await wait(raw.closed)
    await wait(accepts.reach(n + 1))
    assert isinstance(accepts.built[n], RefusedConnection)
    assert raw.received == b""
    new_lines = cap_lines[before:]
    assert any(f"{server_name}: {cap} connections open, at the limit of {cap} "
               f"(max_connections)" in line for line in new_lines), cap_lines


# -- the one-port server -------------------------------------------------------------------------


class OnePort(LoopbackServer):
    """RSocket and the Jini mux behind one port, their own caps at 1 (never used: the one-port
    server counts)."""

    def __init__(self, certs, cap: int, clock=None) -> None:
        self.rsocket = RSocketServerFactory(EchoResponder, reactor=reactor, max_connections=1)
        self.jini = JiniMuxServerFactory(EchoDispatcher, reactor=reactor,
                                         connection_limit=ConnectionLimit(1, reactor=reactor))
        self.factory = OnePortFactory(
            {"rsocket": self.rsocket, "jini-mux": self.jini}, reactor=clock or reactor,
            tls=server_options(certs.server_key, certs.server_cert),
            config=OnePortConfig(max_connections=cap))
        self.limit = self.factory.connection_limit
        self.accepts = Accepts(self.factory)
        self.port = None

    async def stop(self) -> None:
        await wait(self.port.stopListening())
        await wait(self.rsocket.close_connections(drain_timeout=0))
        await wait(self.factory.close_connections())


@pytest_twisted.ensureDeferred
async def test_one_port_counts_every_connection_once_whatever_it_is(certs, cap_lines):
    server = OnePort(certs, cap=3)
    port = await server.start()
    limit = server.limit
    try:
        assert limit.max_connections == 3
        sniffed = await raw_client(port)  # says nothing yet: still sniffed
        upgrading = await raw_client(port, PARTIAL_UPGRADE)  # in its WebSocket handshake
        handshaking = await raw_client(port, CLIENT_HELLO)  # in its TLS handshake
        await wait(server.accepts.reach(3))
        layers = [await wait(handed_over(server.accepts.built[i])) for i in (1, 2)]
        assert isinstance(layers[0], OnePortWebSocketProtocol)
        assert isinstance(layers[1], TLSMemoryBIOProtocol)
        # not recognised yet: the silent one, and the stream inside the TLS one
        inside_tls = server.factory.sniffing - {server.accepts.built[0]}
        assert [s.inside_tls for s in inside_tls] == [True]
        assert (limit.open, limit.refused) == (3, 0)

        # at the cap: the next connection is closed at once, and the log says so with the cap
        await refused(port, server.accepts, cap_lines, 3, "One-port server")
        assert (limit.open, limit.refused) == (3, 1)

        # one closes: a new one is served (RSocket, through the one-port server), and counted
        # once: the RSocket factory's own cap (1) neither counts nor refuses it
        sniffed.transport.loseConnection()
        await wait(server.accepts.lost(0))
        assert limit.open == 2
        rsocket = await wait(connect(server.tcp(), reactor=reactor))
        assert await wait(rsocket.request_response(Payload(b"in"))) == Payload(b"in")
        assert limit.open == 3
        assert server.rsocket.connection_limit.open == 0
        assert len(server.rsocket.connections) == 1

        # ended however they end, each is given back once
        await rsocket.close()  # handed to a protocol, which closes
        await wait(server.accepts.lost(4))
        upgrading.transport.loseConnection()  # gone in its WebSocket handshake
        await wait(server.accepts.lost(1))
        handshaking.transport.write(b"\x00" * 512)  # a ClientHello OpenSSL refuses
        await wait(handshaking.closed)
        await wait(server.accepts.lost(2))
        assert (limit.open, limit.refused) == (0, 1)

        # a Jini mux client, two at once (its factory's own cap of 1 is not used either)
        clients = [JiniMuxClient(reactor, server.tcp()) for _ in range(2)]
        answers = await wait(defer.gatherResults([c.request(b"jini") for c in clients]))
        assert answers == [b"jini", b"jini"]
        assert limit.open == 2 and server.jini.connection_limit.open == 0
        for c in clients:
            await wait(c.close())
        await wait(defer.gatherResults([server.accepts.lost(i) for i in (5, 6)]))
        assert limit.open == 0
    finally:
        await server.stop()


@pytest_twisted.ensureDeferred
async def test_one_port_gives_the_count_back_after_garbage_and_timeouts(certs):
    clock = Clock()  # (the sniff timeout's and the WebSocket handshake's timers)
    server = OnePort(certs, cap=2, clock=clock)
    port = await server.start()
    limit = server.limit
    try:
        garbage = await raw_client(port, b"\x01\x02\x03 not a protocol\r\n")
        await wait(garbage.closed)
        await wait(server.accepts.lost(0))
        assert limit.open == 0

        silent = await raw_client(port)
        also_silent = await raw_client(port, b"\x00")  # one byte: undecided
        await wait(server.accepts.reach(3))
        assert limit.open == 2
        clock.advance(server.factory.config.sniff_timeout / 1000)  # both closed at the bound
        await wait(defer.gatherResults([silent.closed, also_silent.closed]))
        await wait(defer.gatherResults([server.accepts.lost(1), server.accepts.lost(2)]))
        assert (limit.open, limit.refused) == (0, 0)
    finally:
        await server.stop()


@pytest_twisted.ensureDeferred
async def test_one_port_counts_websocket_connections_until_their_transport_is_lost(certs):
    server = OnePort(certs, cap=1)
    port = await server.start()
    limit = server.limit
    try:
        url = f"ws://127.0.0.1:{port}/"
        rsocket = await wait(connect(WebSocketClientEndpoint(reactor, server.tcp(), url),
                                     reactor=reactor))
        assert await wait(rsocket.request_response(Payload(b"ws"))) == Payload(b"ws")
        assert limit.open == 1 and server.rsocket.connection_limit.open == 0
        with pytest.raises(WebSocketHandshakeError):  # the second: closed at once
            await wait(connect(WebSocketClientEndpoint(reactor, server.tcp(), url),
                               reactor=reactor))
        assert limit.refused == 1
        await rsocket.close()
        await wait(server.accepts.lost(0))
        assert limit.open == 0
    finally:
        await server.stop()


def test_one_port_cap_settings():
    assert OnePortConfig().max_connections == 4_096
    with pytest.raises(ValueError, match="max_connections"):
        OnePortConfig(max_connections=0)
    shared = ConnectionLimit(5, reactor=Clock())
    factory = OnePortFactory({"rsocket": RSocketServerFactory(EchoResponder, reactor=Clock())},
                             reactor=Clock(), connection_limit=shared)
    assert factory.connection_limit is shared
    assert isinstance(factory.buildProtocol(None), SniffingProtocol)
    assert shared.open == 1


# -- the plain WebSocket server ------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_websocket_server_counts_a_connection_in_its_handshake(cap_lines):
    port = await wait(serve("ws:0:interface=127.0.0.1", EchoResponder, reactor=reactor,
                            max_connections=1))
    limit = port.factory.connection_limit
    accepts = Accepts(port.port.factory)  # (the HTTP server's factory: counted from the accept)
    number = port.getHost().port
    url = f"ws://127.0.0.1:{number}/"

    def client():
        return WebSocketClientEndpoint(reactor, TCP4ClientEndpoint(reactor, "127.0.0.1", number),
                                       url)

    try:
        upgrading = await raw_client(number, PARTIAL_UPGRADE)  # the handshake not finished
        await wait(accepts.reach(1))
        assert (limit.open, limit.refused) == (1, 0)
        await refused(number, accepts, cap_lines, 1, "RSocket server")
        with pytest.raises(WebSocketHandshakeError):
            await wait(connect(client(), reactor=reactor))
        assert (limit.open, limit.refused) == (1, 2)

        upgrading.transport.loseConnection()
        await wait(accepts.lost(0))
        assert limit.open == 0
        rsocket = await wait(connect(client(), reactor=reactor))  # served again, counted once
        assert await wait(rsocket.request_response(Payload(b"ws"))) == Payload(b"ws")
        assert limit.open == 1
        await rsocket.close()
        await wait(accepts.lost(3))
        assert limit.open == 0
    finally:
        await wait(port.stopListening())


# -- each twistd plugin's --max-connections ------------------------------------------------------


def _plugins():
    from rsocket_tx.faces import mux
    from rsocket_tx.jini import tap as jini_tap
    from rsocket_tx.reactivesocket import tap as rs2015_tap
    from rsocket_tx.rsnet import tap as rsnet_tap

    tcp = "tcp:0:interface=127.0.0.1"
    return [
        pytest.param(jini_tap, tcp, "Jini ERI mux server", id="jini-mux"),
        pytest.param(rs2015_tap, tcp, "ReactiveSocket 2015 server", id="rs2015"),
        pytest.param(rsnet_tap, tcp, "RS-network server", id="rsnet"),
        # (a one-port server of RS-network alone, counting in the RS-network factory's limit)
        pytest.param(rsnet_tap, "rsnet+ws://127.0.0.1:0/rsnet", "RS-network server",
                     id="rsnet-ws"),
        pytest.param(mux, tcp, "One-port server", id="mux"),
    ]


@pytest.mark.parametrize("tap, listen, server_name", _plugins())
@pytest_twisted.ensureDeferred
async def test_twistd_max_connections(tap, listen, server_name, cap_lines):
    options = parse_options(tap.Options, "--listen", listen, "--max-connections", "2")
    service = tap.build_service(options["settings"], reactor)
    limit = service.factory.connection_limit
    assert limit.max_connections == 2
    service.startService()
    try:
        (listening,) = await wait(service.when_listening())
        accepts = Accepts(listening.factory)  # (what the port builds per connection)
        port = listening.getHost().port
        first, second = await raw_client(port), await raw_client(port)  # silent, both counted
        await wait(accepts.reach(2))
        assert limit.open == 2
        await refused(port, accepts, cap_lines, 2, server_name)
        first.transport.loseConnection()
        await wait(accepts.lost(0))
        third = await raw_client(port)  # accepted again
        await wait(accepts.reach(4))
        assert not isinstance(accepts.built[3], RefusedConnection)
        assert limit.open == 2
        for raw in (second, third):
            raw.transport.loseConnection()
        await wait(defer.gatherResults([accepts.lost(1), accepts.lost(3)]))
        assert (limit.open, limit.refused) == (0, 1)
    finally:
        await wait(service.stopService())


def _taps():
    from rsocket_tx.faces import mux
    from rsocket_tx.jini import tap as jini_tap
    from rsocket_tx.reactivesocket import tap as rs2015_tap
    from rsocket_tx.rsnet import tap as rsnet_tap

    return [pytest.param(jini_tap, id="jini-mux"), pytest.param(rs2015_tap, id="rs2015"),
            pytest.param(rsnet_tap, id="rsnet"), pytest.param(mux, id="mux")]


def _cap(settings) -> int:
    """The ``--max-connections`` of a plugin's settings (``twistd mux``: in its one-port
    config)."""
    if hasattr(settings, "max_connections"):
        return settings.max_connections
    return settings.config.max_connections


@pytest.mark.parametrize("tap", _taps())
def test_twistd_max_connections_is_checked(tap):
    message = options_usage_error(tap.Options, "--max-connections", "0")
    assert "--max-connections" in message and "connections" in message
    assert _cap(parse_options(tap.Options)["settings"]) == 4_096
    assert _cap(parse_options(tap.Options, "--max-connections", "7")["settings"]) == 7
