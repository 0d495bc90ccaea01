"""One port, every protocol (rsocket_tx.transports.oneport): the sniffer's rules driven with a
Clock and string transports (a match wins, no match closes with a clear log line, the size and
time bounds, a prefix split into 1-byte reads, the hand-over of the transport), then real
loopback ports: RSocket, Jini mux, RS-network and 2015-draft clients at once on the same port
over TCP, TLS, WebSocket and WebSocket over TLS, and garbage closed."""

from __future__ import annotations

import pytest
import pytest_twisted
from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from tlscerts import make_tls_files
from twisted.internet import defer, reactor
from twisted.internet.endpoints import (
    TCP4ServerEndpoint,
    connectProtocol,
    wrapClientTLS,
)
from twisted.internet.interfaces import IHandshakeListener
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import globalLogPublisher
from twisted.python.failure import Failure
from twisted_support import BytesClient, EchoResponder, LoopbackServer, wait
from zope.interface import classImplements

from rsocket_tx import Payload, connect
from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import encode
from rsocket_tx.core.framing import frame_with_length
from rsocket_tx.core.sniff import sniff as rsocket_sniff
from rsocket_tx.jini import EchoDispatcher, JiniMuxClient, JiniMuxServerFactory
from rsocket_tx.jini.codec import sniff as jini_sniff
from rsocket_tx.mux.sniff import Sniff
from rsocket_tx.protocol import RSocketServerFactory
from rsocket_tx.reactivesocket.client import connect as rs2015_connect
from rsocket_tx.reactivesocket.protocol import ReactiveSocketServerFactory
from rsocket_tx.rsnet.client import connect as rsnet_connect
from rsocket_tx.rsnet.server import RSNetServerFactory
from rsocket_tx.transports.oneport import (
    PROTOCOLS,
    ByteStreamWebSocketClientEndpoint,
    OnePortConfig,
    OnePortFactory,
    ProtocolDescription,
    ServedProtocol,
    WebSocketFraming,
    serve_one_port,
    sniff_tls,
    sniff_websocket,
)
from rsocket_tx.transports.tls import client_options, server_options
from rsocket_tx.transports.websocket import WebSocketClientEndpoint, WebSocketHandshakeError

SETUP = frame_with_length(encode(make_setup()))
JINI_HEADER = bytes.fromhex("4a6d757801008000")
# an RS-network clientHello begins with its type 0xF1 and "RSN" (docs/rsnet.rst)
RSNET_HELLO = bytes.fromhex("f152534e") + b"\x01\x00"
# a 2015-draft SETUP with two empty MIME types: length 18 (with the header), version 0, no
# flags, type 0x0001, stream id 0 (64 bits), MIME lengths 0 and 0
RS2015_SETUP = bytes.fromhex("00000012" "00" "00" "0001" "0000000000000000" "00" "00")
# a TLS 1.2 record header of a ClientHello: handshake (22), version 3.1, length 512, type 1
CLIENT_HELLO = bytes.fromhex("16 03 01 02 00 01".replace(" ", ""))


# -- the sniffers of the layers ---------------------------------------------------------------


def test_tls_client_hello_is_recognised_after_six_bytes():
    for n in range(6):
        assert sniff_tls(CLIENT_HELLO[:n]) is Sniff.NEED_MORE
    assert sniff_tls(CLIENT_HELLO) is Sniff.MATCH
    for version in (0, 1, 2, 3, 4):
        assert sniff_tls(bytes([0x16, 3, version, 0, 0x40, 1])) is Sniff.MATCH
    assert sniff_tls(b"\x16\x03\x05") is Sniff.NO_MATCH  # no such version
    assert sniff_tls(b"\x16\x02") is Sniff.NO_MATCH
    assert sniff_tls(b"\x17") is Sniff.NO_MATCH  # application data
    assert sniff_tls(b"\x16\x03\x01\x00\x00") is Sniff.NO_MATCH  # an empty record
    assert sniff_tls(b"\x16\x03\x01\x02\x00\x02") is Sniff.NO_MATCH  # a ServerHello


def test_websocket_upgrade_is_recognised_by_its_get():
    assert sniff_websocket(b"GE") is Sniff.NEED_MORE
    assert sniff_websocket(b"GET ") is Sniff.MATCH
    assert sniff_websocket(b"GET / HTTP/1.1\r\n") is Sniff.MATCH
    assert sniff_websocket(b"POST") is Sniff.NO_MATCH
    assert sniff_websocket(b"GETX") is Sniff.NO_MATCH


def test_no_two_sniffers_claim_the_same_first_bytes():
    """Each candidate's first bytes, at every length, are claimed by that candidate only."""
    sniffers = {"rsocket": rsocket_sniff, "jini-mux": jini_sniff, "tls": sniff_tls,
                "websocket": sniff_websocket}
    sniffers.update({name: d.sniff for name, d in PROTOCOLS.items()})
    firsts = {"rsocket": SETUP, "jini-mux": JINI_HEADER, "rsnet": RSNET_HELLO,
              "rs2015": RS2015_SETUP, "tls": CLIENT_HELLO, "websocket": b"GET / HTTP/1.1\r\n"}
    for owner, data in firsts.items():
        for n in range(len(data) + 1):
            claims = [name for name, sniff in sniffers.items()
                      if sniff(data[:n]) is Sniff.MATCH]
            assert set(claims) <= {owner}, (owner, n, claims)
        assert sniffers[owner](data) is Sniff.MATCH


def test_registry_names_and_subprotocols():
    assert PROTOCOLS["rsocket"].websocket_subprotocol == "rsocket"
    assert PROTOCOLS["rsocket"].websocket_framing is WebSocketFraming.MESSAGES
    assert PROTOCOLS["jini-mux"].websocket_subprotocol == "jini-mux"
    assert PROTOCOLS["jini-mux"].websocket_framing is WebSocketFraming.BYTES
    assert PROTOCOLS["rsnet"].websocket_subprotocol == "rsnet"
    assert PROTOCOLS["rsnet"].websocket_framing is WebSocketFraming.BYTES
    assert PROTOCOLS["rs2015"].websocket_subprotocol == "reactivesocket-2015"
    assert PROTOCOLS["rs2015"].websocket_framing is WebSocketFraming.MESSAGES
    assert list(PROTOCOLS)[:4] == ["rsocket", "jini-mux", "rsnet", "rs2015"]
    subprotocols = [d.websocket_subprotocol for d in PROTOCOLS.values()]
    assert len(set(subprotocols)) == len(subprotocols)


def test_config_limits_are_checked():
    with pytest.raises(ValueError, match="max_sniff_size"):
        OnePortConfig(max_sniff_size=8)
    with pytest.raises(ValueError, match="sniff_timeout"):
        OnePortConfig(sniff_timeout=0)
    with pytest.raises(ValueError, match="unknown protocol"):
        OnePortFactory({"nope": Factory()}, reactor=Clock())
    with pytest.raises(ValueError, match="at least one"):
        OnePortFactory({}, reactor=Clock())


# -- the sniffer, with a Clock and string transports ------------------------------------------


class Recorder(Protocol):
    """A protocol that records what it is given."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.lost: list[Failure] = []
        self.made_with = None

    def makeConnection(self, transport) -> None:
        self.made_with = transport
        super().makeConnection(transport)

    def dataReceived(self, data: bytes) -> None:
        self.received.append(data)

    def connectionLost(self, reason=None) -> None:
        self.lost.append(reason)


class RecordingFactory(Factory):
    def __init__(self) -> None:
        self.built: list[Recorder] = []

    def buildProtocol(self, addr):
        protocol = Recorder()
        self.built.append(protocol)
        return protocol


class Fake:
    """A one-port factory on a Clock with recording protocol factories."""

    def __init__(self, **kw) -> None:
        self.clock = Clock()
        self.rsocket = RecordingFactory()
        self.jini = RecordingFactory()
        self.factory = OnePortFactory({"rsocket": self.rsocket, "jini-mux": self.jini},
                                      reactor=self.clock, **kw)

    def connect(self):
        protocol = self.factory.buildProtocol(None)
        transport = StringTransport()
        protocol.makeConnection(transport)
        return protocol, transport


@pytest.fixture
def logged():
    events: list[str] = []

    def observer(event):
        if event.get("log_namespace") == "rsocket_tx.transports.oneport":
            from twisted.logger import formatEvent
            events.append(formatEvent(event))

    globalLogPublisher.addObserver(observer)
    yield events
    globalLogPublisher.removeObserver(observer)


@pytest.mark.parametrize("name, first", [("rsocket", SETUP), ("jini-mux", JINI_HEADER)])
def test_a_match_hands_the_transport_and_every_byte_over(name, first):
    fake = Fake()
    sniffer, transport = fake.connect()
    sniffer.dataReceived(first + b"more")
    built = (fake.rsocket if name == "rsocket" else fake.jini).built
    other = (fake.jini if name == "rsocket" else fake.rsocket).built
    assert len(built) == 1 and not other
    protocol = built[0]
    assert protocol.made_with is transport  # the same transport
    assert b"".join(protocol.received) == first + b"more"
    sniffer.dataReceived(b"later")  # later reads go to it
    assert protocol.received[-1] == b"later"
    assert not transport.disconnecting
    assert not fake.clock.getDelayedCalls()  # the time bound is off
    sniffer.connectionLost(Failure(ConnectionError("gone")))
    assert len(protocol.lost) == 1


@pytest.mark.parametrize("first", [SETUP, JINI_HEADER])
def test_a_prefix_split_into_one_byte_reads(first):
    fake = Fake()
    sniffer, transport = fake.connect()
    data = first + b"tail"
    for i in range(len(data)):
        sniffer.dataReceived(data[i:i + 1])
    protocols = fake.rsocket.built + fake.jini.built
    assert len(protocols) == 1
    assert b"".join(protocols[0].received) == data
    assert not transport.disconnecting


def test_undecided_until_the_deciding_byte():
    fake = Fake()
    sniffer, transport = fake.connect()
    sniffer.dataReceived(SETUP[:10])
    assert not fake.rsocket.built and not transport.disconnecting
    sniffer.dataReceived(SETUP[10:11])
    assert len(fake.rsocket.built) == 1


def test_bytes_that_match_nothing_are_closed_with_a_clear_line(logged):
    fake = Fake()
    sniffer, transport = fake.connect()
    sniffer.dataReceived(b"HELLO? " + bytes(range(64)))
    assert transport.disconnecting
    assert not fake.rsocket.built and not fake.jini.built
    assert not fake.clock.getDelayedCalls()
    (line,) = logged
    assert "match no protocol" in line
    assert "48 45 4c 4c 4f 3f 20 00 01" in line  # the first bytes, in hex
    assert line.endswith(" ...)")  # bounded
    assert "192.168.1.1:54321" in line  # StringTransport's peer
    sniffer.dataReceived(b"more")  # ignored
    assert not fake.rsocket.built


def test_tls_is_not_recognised_without_tls_options(logged):
    fake = Fake()
    sniffer, transport = fake.connect()
    sniffer.dataReceived(CLIENT_HELLO)
    assert transport.disconnecting
    assert "16 03 01 02 00 01" in logged[0]


def test_a_silent_connection_is_closed_at_the_time_bound(logged):
    fake = Fake(config=OnePortConfig(sniff_timeout=2_000))
    sniffer, transport = fake.connect()
    sniffer.dataReceived(SETUP[:5])  # a slow client: not enough to decide
    fake.clock.advance(1.999)
    assert not transport.disconnecting
    fake.clock.advance(0.001)
    assert transport.disconnecting
    (line,) = logged
    assert "no protocol recognised within 2000 ms (5 bytes received)" in line
    sniffer.connectionLost(Failure(ConnectionError("closed")))
    assert not fake.factory.sniffing


def test_a_connection_that_says_nothing_is_closed_at_the_time_bound(logged):
    fake = Fake()
    sniffer, transport = fake.connect()
    fake.clock.advance(10.0)
    assert transport.disconnecting
    assert "(0 bytes received)" in logged[0]


def test_undecided_at_the_size_bound_is_closed(logged):
    def undecided(prefix: bytes) -> Sniff:
        return Sniff.NEED_MORE

    clock = Clock()
    served = ServedProtocol(ProtocolDescription("slow", undecided, "slow"), RecordingFactory())
    factory = OnePortFactory([served], reactor=clock, websocket=False,
                             config=OnePortConfig(max_sniff_size=64))
    sniffer = factory.buildProtocol(None)
    transport = StringTransport()
    sniffer.makeConnection(transport)
    sniffer.dataReceived(b"x" * 63)
    assert not transport.disconnecting
    sniffer.dataReceived(b"x")
    assert transport.disconnecting
    assert "first 64 bytes (the limit) tell no protocol apart from slow" in logged[0]


def test_the_first_protocol_to_match_wins():
    def always(prefix: bytes) -> Sniff:
        return Sniff.MATCH

    first, second = RecordingFactory(), RecordingFactory()
    factory = OnePortFactory([ServedProtocol(ProtocolDescription("a", always, "a"), first),
                              ServedProtocol(ProtocolDescription("b", always, "b"), second)],
                             reactor=Clock())
    sniffer = factory.buildProtocol(None)
    sniffer.makeConnection(StringTransport())
    sniffer.dataReceived(b"z")
    assert len(first.built) == 1 and not second.built


def test_close_connections_closes_the_unrecognised():
    fake = Fake()
    sniffer, transport = fake.connect()
    sniffer.dataReceived(b"\x00")
    d = fake.factory.close_connections()
    assert transport.disconnecting
    assert d.called
    assert not fake.clock.getDelayedCalls()


def test_websocket_subprotocol_choice():
    fake = Fake()
    choose = fake.factory.for_subprotocols
    assert choose(["jini-mux"]).description.name == "jini-mux"
    assert choose(["binary", "rsocket", "jini-mux"]).description.name == "rsocket"
    assert choose([]).description.name == "rsocket"  # rsocket-js and rsocket-py offer none
    assert choose(["mqtt"]) is None
    only_jini = OnePortFactory({"jini-mux": RecordingFactory()}, reactor=Clock())
    assert only_jini.for_subprotocols([]).description.name == "jini-mux"


# -- real loopback ports ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("oneport-tls"))


class Server(LoopbackServer):
    """RSocket (echo) and the Jini mux (echo) served on one loopback port."""

    def __init__(self, certs) -> None:
        self.certs = certs
        self.rsocket = RSocketServerFactory(EchoResponder, reactor=reactor)
        self.jini = JiniMuxServerFactory(EchoDispatcher, reactor=reactor)
        self.rsnet = RSNetServerFactory(
            {"count/3": lambda request: (b"%d" % i for i in range(3))}, reactor=reactor)
        self.rs2015 = ReactiveSocketServerFactory(EchoResponder, reactor=reactor)
        self.factory = OnePortFactory(
            {"rsocket": self.rsocket, "jini-mux": self.jini, "rsnet": self.rsnet,
             "rs2015": self.rs2015}, reactor=reactor,
            tls=server_options(certs.server_key, certs.server_cert))
        self.port = None
        self.cleanups: list = []

    def tls(self):
        return wrapClientTLS(client_options("localhost", trust_roots=self.certs.ca),
                             self.tcp())

    async def stop(self) -> None:
        for cleanup in reversed(self.cleanups):
            await wait(cleanup())
        await wait(self.port.stopListening())
        await wait(self.rsocket.close_connections(drain_timeout=0))
        await wait(self.rs2015.close_connections(drain_timeout=0))
        await wait(self.factory.close_connections())


@pytest_twisted.async_yield_fixture
async def server(certs):
    s = Server(certs)
    await s.start()
    yield s
    await s.stop()


async def _rsocket_round_trip(server: Server, endpoint) -> None:
    rsocket = await wait(connect(endpoint, reactor=reactor))
    try:
        response = await wait(rsocket.request_response(Payload(b"one port", b"m")))
        assert response == Payload(b"one port", b"m")
        items = await wait(rsocket.request_stream(Payload(b"3")).collect())
        assert [p.data for p in items] == [b"0", b"1", b"2"]
    finally:
        await rsocket.close()


async def _jini_round_trip(server: Server, endpoint) -> None:
    client = JiniMuxClient(reactor, endpoint)
    try:
        assert await wait(client.request(b"jini on the same port")) == b"jini on the same port"
        big = bytes(range(256)) * 400  # past the 32 KiB initial ration: rations both ways
        assert await wait(client.request(big)) == big
    finally:
        await wait(client.close())


async def _rsnet_round_trip(server: Server, endpoint) -> None:
    protocol = await wait(rsnet_connect(reactor, endpoint))
    try:
        items = [item async for item in protocol.subscribe("count/3")]
        assert items == [b"0", b"1", b"2"]
    finally:
        await wait(protocol.close())


async def _rs2015_round_trip(server: Server, endpoint) -> None:
    client = await wait(rs2015_connect(endpoint, reactor=reactor))
    try:
        response = await wait(client.request_response(Payload(b"2015 draft", b"m")))
        assert response == Payload(b"2015 draft", b"m")
        items = await wait(client.request_stream(Payload(b"2")).collect())
        assert [p.data for p in items] == [b"0", b"1"]
    finally:
        await client.close()


def _ws(server: Server, inner, scheme: str) -> str:
    return f"{scheme}://localhost:{server.port.getHost().port}/"


@pytest.mark.parametrize("transport", ["tcp", "tls", "ws", "wss"])
@pytest_twisted.ensureDeferred
async def test_every_protocol_on_one_port(server, transport):
    """RSocket, the Jini mux, RS-network and the 2015 draft at once, on one port."""
    inner = server.tcp if transport in ("tcp", "ws") else server.tls
    if transport in ("tcp", "tls"):
        endpoints = [inner() for _ in range(4)]
    else:
        url = _ws(server, inner, transport)
        endpoints = [
            WebSocketClientEndpoint(reactor, inner(), url, subprotocols=["rsocket"]),
            ByteStreamWebSocketClientEndpoint(reactor, inner(), url, "jini-mux"),
            ByteStreamWebSocketClientEndpoint(reactor, inner(), url, "rsnet"),
            WebSocketClientEndpoint(reactor, inner(), url,
                                    subprotocols=["reactivesocket-2015"])]
    round_trips = (_rsocket_round_trip, _jini_round_trip, _rsnet_round_trip,
                   _rs2015_round_trip)
    await defer.gatherResults([
        defer.ensureDeferred(trip(server, endpoint))
        for trip, endpoint in zip(round_trips, endpoints)], consumeErrors=True)
    assert not server.factory.sniffing


@pytest_twisted.ensureDeferred
async def test_rsocket_over_websocket_with_no_subprotocol(server):
    endpoint = WebSocketClientEndpoint(reactor, server.tcp(), _ws(server, None, "ws"))
    await _rsocket_round_trip(server, endpoint)


@pytest_twisted.ensureDeferred
async def test_an_unknown_websocket_subprotocol_is_refused(server):
    endpoint = WebSocketClientEndpoint(reactor, server.tcp(), _ws(server, None, "ws"),
                                       subprotocols=["mqtt"])
    with pytest.raises(WebSocketHandshakeError):
        await wait(connect(endpoint, reactor=reactor))


@pytest.mark.parametrize("garbage", [b"\x01\x02\x03garbage\r\n", b"POST / HTTP/1.1\r\n\r\n"])
@pytest_twisted.ensureDeferred
async def test_garbage_on_the_port_is_closed(server, garbage, logged):
    raw = BytesClient()
    await wait(connectProtocol(server.tcp(), raw))
    raw.transport.write(garbage)
    await wait(raw.closed)
    assert raw.received == b""
    assert any("match no protocol" in line and garbage[:4].hex(" ") in line
               for line in logged)


@pytest_twisted.ensureDeferred
async def test_garbage_inside_tls_is_closed(server, logged):
    raw = BytesClient()
    await wait(connectProtocol(server.tls(), raw))
    raw.transport.write(b"not a protocol at all")
    await wait(raw.closed)
    assert any("closing the TLS connection" in line and "match no protocol" in line
               for line in logged)


@pytest_twisted.ensureDeferred
async def test_a_plain_http_get_is_answered_426(server):
    raw = BytesClient()
    await wait(connectProtocol(server.tcp(), raw))
    raw.transport.write(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
    await wait(raw.closed)
    assert raw.received.startswith(b"HTTP/1.1 426 ")  # no status page


@pytest_twisted.ensureDeferred
async def test_serve_one_port():
    rsocket = RSocketServerFactory(EchoResponder, reactor=reactor)
    port = await wait(serve_one_port(TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1"),
                                     {"rsocket": rsocket}, reactor=reactor))
    try:
        assert isinstance(port.factory, OnePortFactory)
        client = await wait(connect(f"tcp://127.0.0.1:{port.getHost().port}", reactor=reactor))
        try:
            assert (await wait(client.request_response(Payload(b"x")))).data == b"x"
        finally:
            await client.close()
    finally:
        await wait(port.stopListening())
        await wait(port.factory.close_connections())


class TextSender(WebSocketClientProtocol):
    """Offers ``jini-mux``, sends a text message, records the close."""

    def onOpen(self) -> None:
        self.factory.chosen = self.websocket_protocol_in_use
        self.sendMessage(b"Jmux as text", isBinary=False)

    def onClose(self, wasClean, code, reason) -> None:
        if not self.factory.closed.called:
            self.factory.closed.callback((code, reason))


@pytest_twisted.ensureDeferred
async def test_a_text_message_to_a_byte_stream_protocol_closes_1003(server):
    factory = WebSocketClientFactory(_ws(server, None, "ws"), protocols=["jini-mux"])
    factory.protocol = TextSender
    factory.closed = defer.Deferred()
    await wait(server.tcp().connect(factory))
    code, reason = await wait(factory.closed)
    assert factory.chosen == "jini-mux"
    assert code == 1003
    assert "binary" in reason


def test_inside_tls_there_is_no_tls_again_and_the_handshake_is_passed_on(certs, logged):
    clock = Clock()
    rsocket = RecordingFactory()
    factory = OnePortFactory({"rsocket": rsocket}, reactor=clock,
                             tls=server_options(certs.server_key, certs.server_cert))
    inner = factory.tls_factory.wrappedFactory.buildProtocol(None)  # the decrypted stream's
    transport = StringTransport()
    inner.makeConnection(transport)
    inner.dataReceived(CLIENT_HELLO)
    assert transport.disconnecting
    assert "closing the TLS connection" in logged[0] and "16 03 01 02 00 01" in logged[0]

    class Listener(Recorder):
        handshakes = 0

        def handshakeCompleted(self):
            self.handshakes += 1

    classImplements(Listener, IHandshakeListener)
    rsocket.buildProtocol = lambda addr: Listener()
    inner = factory.tls_factory.wrappedFactory.buildProtocol(None)
    inner.makeConnection(StringTransport())
    inner.handshakeCompleted()  # before any decrypted byte
    inner.dataReceived(SETUP)
    assert inner.chosen.handshakes == 1
    assert b"".join(inner.chosen.received) == SETUP


def test_websocket_message_size_per_protocol():
    clock = Clock()
    rsocket = RSocketServerFactory(EchoResponder, reactor=clock, max_frame_size=100_000)
    rsnet = RSNetServerFactory({}, reactor=clock)
    factory = OnePortFactory({"rsocket": rsocket, "jini-mux": RecordingFactory(),
                              "rsnet": rsnet}, reactor=clock,
                             config=OnePortConfig(max_websocket_message_size=5000))
    sizes = {s.description.name: factory.max_message_size(s) for s in factory.served}
    assert sizes == {"rsocket": 100_000, "jini-mux": 5000,
                     "rsnet": rsnet.config.max_buffered_input}
    custom = ServedProtocol(PROTOCOLS["jini-mux"], RecordingFactory(), max_message_size=77)
    assert OnePortFactory([custom], reactor=clock).max_message_size(custom) == 77


@pytest_twisted.ensureDeferred
async def test_a_byte_stream_client_refused_fails_with_a_handshake_error(server):
    endpoint = ByteStreamWebSocketClientEndpoint(reactor, server.tcp(), _ws(server, None, "ws"),
                                                 "mqtt")
    with pytest.raises(WebSocketHandshakeError, match="handshake with ws://localhost"):
        await wait(endpoint.connect(Factory.forProtocol(Protocol)))
