"""yamux over Twisted (:mod:`rsocket_tx.yamux.protocol`): each stream an ``ITransport`` that
any Twisted protocol runs on; flow control as backpressure both ways; FIN, RST, Ping, Go Away
and the session's end as a stream's protocol sees them. Two sessions joined in memory
(``StringTransport``), a ``Clock`` for the reactor."""

from __future__ import annotations

import pytest
from twisted.internet.endpoints import connectProtocol
from twisted.internet.error import ConnectionAborted, ConnectionDone, ConnectionLost
from twisted.internet.interfaces import (
    IConsumer,
    IHalfCloseableProtocol,
    IPushProducer,
    IStreamClientEndpoint,
    ITransport,
)
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.protocols.basic import LineReceiver
from twisted.python.failure import Failure
from zope.interface import implementer
from zope.interface.verify import verifyObject

from rsocket_tx.yamux.codec import INITIAL_WINDOW
from rsocket_tx.yamux.config import YamuxConfig
from rsocket_tx.yamux.connection import Role
from rsocket_tx.yamux.errors import ConnectionClosedError, LocalProtocolError
from rsocket_tx.yamux.protocol import (
    HIGH_WATER,
    StreamEndpoint,
    YamuxAddress,
    YamuxProtocol,
)

QUIET = YamuxConfig(keepalive_interval=None)


class Recorder(Protocol):
    """Keeps what it receives and how it ended."""

    def __init__(self) -> None:
        self.data = b""
        self.reason = None
        self.made = False

    def connectionMade(self) -> None:  # noqa: N802
        self.made = True

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.data += data

    def connectionLost(self, reason) -> None:  # noqa: N802
        self.reason = reason


@implementer(IHalfCloseableProtocol)
class HalfCloser(Recorder):
    read_closed = False

    def readConnectionLost(self) -> None:  # noqa: N802
        self.read_closed = True

    def writeConnectionLost(self) -> None:  # noqa: N802
        pass


class Echo(Protocol):
    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.transport.write(data)


class Pair:
    """A client and a server session joined in memory."""

    def __init__(self, stream_factory=None, client_config=QUIET, server_config=QUIET) -> None:
        self.clock = Clock()
        self.client = YamuxProtocol(self.clock, Role.CLIENT, client_config)
        self.server = YamuxProtocol(self.clock, Role.SERVER, server_config, stream_factory)
        self.ct, self.st = StringTransport(), StringTransport()
        self.client.makeConnection(self.ct)
        self.server.makeConnection(self.st)
        self.hold_server = False  # leave the server's bytes unread (a peer that does not read)

    def pump(self) -> None:
        for _ in range(10_000):
            self.clock.advance(0)
            moved = False
            data = self.ct.value()
            if data and not self.hold_server:
                self.ct.clear()
                self.server.dataReceived(data)
                moved = True
            data = self.st.value()
            if data:
                self.st.clear()
                self.client.dataReceived(data)
                moved = True
            if not moved:
                return
        raise AssertionError("the sessions never went quiet")


def test_a_stream_is_an_itransport_consumer_and_producer() -> None:
    pair = Pair(Factory.forProtocol(Echo))
    stream = pair.client.open_stream(Recorder())
    assert verifyObject(ITransport, stream) and verifyObject(IConsumer, stream)
    assert verifyObject(IPushProducer, stream)
    assert verifyObject(IStreamClientEndpoint, StreamEndpoint(pair.client))
    peer = stream.getPeer()
    assert isinstance(peer, YamuxAddress) and peer.stream_id == stream.stream_id == 1
    assert peer.address == pair.ct.getPeer() and stream.getHost().address == pair.ct.getHost()


def test_any_twisted_protocol_runs_over_a_stream_both_ways() -> None:
    received = []

    class Lines(LineReceiver):
        def lineReceived(self, line: bytes) -> None:  # noqa: N802
            received.append(line)
            self.sendLine(line.upper())

    pair = Pair(Factory.forProtocol(Lines))
    client = Recorder()
    d = connectProtocol(StreamEndpoint(pair.client), client)
    assert d.result is client  # (opening needs no round trip)
    client.transport.writeSequence([b"hello\r\n", b"yamux\r\n"])
    pair.pump()
    assert received == [b"hello", b"yamux"] and client.data == b"HELLO\r\nYAMUX\r\n"


def test_lose_connection_is_fin_and_connection_lost_follows_the_peers_fin() -> None:
    server_side = []

    def build():
        p = HalfCloser()
        server_side.append(p)
        return p

    pair = Pair(Factory.forProtocol(build))
    client = HalfCloser()
    stream = pair.client.open_stream(client)
    stream.write(b"last words")
    stream.loseConnection()
    stream.write(b"dropped")  # after loseConnection, as TCP drops it
    pair.pump()
    server = server_side[0]
    assert server.data == b"last words" and server.read_closed and server.reason is None
    assert client.reason is None  # our half is closed; the peer's is open
    server.transport.write(b"reply")
    server.transport.loseConnection()
    pair.pump()
    assert client.data == b"reply"
    assert client.reason.check(ConnectionDone) and server.reason.check(ConnectionDone)
    assert pair.client.streams == {} and pair.server.streams == {}


def test_a_protocol_that_is_not_half_closeable_is_closed_on_the_peers_fin() -> None:
    pair = Pair(Factory.forProtocol(Echo))  # Echo: no IHalfCloseableProtocol
    client = HalfCloser()
    stream = pair.client.open_stream(client)
    stream.write(b"ping")
    stream.loseConnection()
    pair.pump()
    assert client.data == b"ping" and client.reason.check(ConnectionDone)


def test_abort_is_rst_and_the_peers_protocol_sees_the_reset() -> None:
    server_side = []
    pair = Pair(Factory.forProtocol(lambda: server_side.append(Recorder()) or server_side[-1]))
    client = Recorder()
    stream = pair.client.open_stream(client)
    stream.write(b"x")
    pair.pump()
    stream.abortConnection()
    assert client.reason.check(ConnectionAborted)
    pair.pump()
    assert server_side[0].reason.check(ConnectionLost)
    assert "the peer reset the stream" in server_side[0].reason.getErrorMessage()


def test_no_stream_factory_refuses_every_stream_with_rst() -> None:
    pair = Pair(None)
    client = Recorder()
    pair.client.open_stream(client)
    pair.pump()
    assert client.reason.check(ConnectionLost) and "reset" in client.reason.getErrorMessage()


def test_a_factory_that_builds_none_refuses_the_stream() -> None:
    class Refuse(Factory):
        def buildProtocol(self, addr):  # noqa: N802
            assert isinstance(addr, YamuxAddress) and addr.stream_id == 1
            return None

    pair = Pair(Refuse())
    client = Recorder()
    pair.client.open_stream(client)
    pair.pump()
    assert client.reason.check(ConnectionLost)


class Paused(Recorder):
    """Stops reading at once: the window is not given back."""

    def connectionMade(self) -> None:  # noqa: N802
        self.transport.pauseProducing()


def test_a_reader_that_pauses_stops_the_writer_at_the_window() -> None:
    readers = []
    pair = Pair(Factory.forProtocol(lambda: readers.append(Paused()) or readers[-1]))
    writer = Recorder()
    stream = pair.client.open_stream(writer)
    stream.write(bytes(3 * INITIAL_WINDOW))
    pair.pump()
    reader = readers[0]
    assert reader.data == b""  # held in its transport while paused
    assert stream.waiting == 2 * INITIAL_WINDOW  # the rest waits for window updates
    reader.transport.resumeProducing()
    pair.pump()
    assert len(reader.data) == 3 * INITIAL_WINDOW and stream.waiting == 0
    assert pair.server.connection.window_updates_sent >= 4


def test_a_registered_producer_is_paused_past_high_water_and_resumed_when_sent() -> None:
    @implementer(IPushProducer)
    class Source:
        paused = False
        stopped = False

        def pauseProducing(self):  # noqa: N802
            self.paused = True

        def resumeProducing(self):  # noqa: N802
            self.paused = False

        def stopProducing(self):  # noqa: N802
            self.stopped = True

    readers = []
    pair = Pair(Factory.forProtocol(lambda: readers.append(Paused()) or readers[-1]))
    stream = pair.client.open_stream(Recorder())
    source = Source()
    stream.registerProducer(source, True)
    with pytest.raises(RuntimeError, match="unregisterProducer"):
        stream.registerProducer(Source(), True)
    stream.write(bytes(INITIAL_WINDOW + HIGH_WATER + 1))
    pair.pump()
    assert source.paused
    readers[0].transport.resumeProducing()
    pair.pump()
    assert not source.paused
    stream.abortConnection()
    assert source.stopped


def test_the_session_transport_pausing_holds_stream_writes() -> None:
    pair = Pair(Factory.forProtocol(Recorder))
    stream = pair.client.open_stream(Recorder())
    pair.client.pauseProducing()
    stream.write(b"waits")
    pair.clock.advance(0)
    assert stream.waiting == 5
    pair.client.resumeProducing()
    assert stream.waiting == 0


def test_ping_fires_with_the_round_trip_and_times_out_without_an_answer() -> None:
    pair = Pair()
    d = pair.client.ping()
    pair.clock.advance(0.25)
    pair.pump()
    assert d.result == 0.25
    pair.hold_server = True
    lost = pair.client.ping()
    pair.pump()
    pair.clock.advance(QUIET.ping_timeout)
    failure = []
    lost.addErrback(failure.append)
    assert failure[0].check(TimeoutError)


def test_go_away_refuses_new_streams_and_the_open_ones_go_on() -> None:
    pair = Pair(Factory.forProtocol(Echo))
    client = Recorder()
    stream = pair.client.open_stream(client)
    pair.pump()
    went = pair.client.when_go_away()
    pair.server.go_away()
    pair.pump()
    assert went.called and pair.client.go_away_received
    with pytest.raises(LocalProtocolError, match="Go Away"):
        pair.client.open_stream(Recorder())
    failed = StreamEndpoint(pair.client).connect(Factory.forProtocol(Recorder))
    failure = []
    failed.addErrback(failure.append)
    assert failure[0].check(LocalProtocolError)
    stream.write(b"still")
    pair.pump()
    assert client.data == b"still"


def test_the_sessions_end_ends_every_stream() -> None:
    server_side = []
    pair = Pair(Factory.forProtocol(lambda: server_side.append(Recorder()) or server_side[-1]))
    clients = [Recorder() for _ in range(3)]
    for c in clients:
        pair.client.open_stream(c)
    pair.pump()
    closed = pair.client.close()
    pair.pump()
    assert all(c.reason.check(ConnectionLost) for c in clients)
    assert isinstance(pair.client.closed_error, ConnectionClosedError)
    assert pair.server.go_away_received  # Go Away (normal), then the transport closes
    assert pair.ct.disconnecting
    pair.client.connectionLost(Failure(ConnectionDone()))
    pair.server.connectionLost(Failure(ConnectionDone()))
    assert closed.called and pair.server.closed_error.by_peer
    assert len(server_side) == 3 and all(p.reason.check(ConnectionLost) for p in server_side)


def test_a_peers_protocol_error_ends_the_session_with_go_away() -> None:
    pair = Pair(Factory.forProtocol(Recorder))
    client = Recorder()
    pair.client.open_stream(client)
    pair.pump()
    pair.client.dataReceived(bytes.fromhex("00 00 0000 00000002 00000000"))  # never opened
    assert client.reason.check(ConnectionLost)
    assert pair.client.closed_error.code == 1
    assert pair.ct.value().endswith(bytes.fromhex("00 03 0000 00000000 00000001"))


def test_a_server_names_a_client_of_another_protocol() -> None:
    from twisted.logger import globalLogPublisher

    seen = []
    globalLogPublisher.addObserver(seen.append)
    try:
        pair = Pair()
        rsocket_setup = bytes.fromhex("00 00 2a 00000000 0400 0001 0000 00007530 0001d4c0")
        pair.server.dataReceived(rsocket_setup + bytes(20))
    finally:
        globalLogPublisher.removeObserver(seen.append)
    assert pair.server.closed_error.code == 1
    texts = [e.get("guess") for e in seen if "guess" in e]
    assert texts and "RSocket 1.0 client" in str(texts[0])


def test_a_stream_factory_that_is_no_factory_is_refused_at_the_call() -> None:
    from rsocket_tx.yamux.factory import YamuxClientFactory, YamuxServerFactory

    for build in (lambda f: YamuxProtocol(Clock(), Role.SERVER, QUIET, f),
                  lambda f: YamuxServerFactory(f, QUIET, Clock()),
                  lambda f: YamuxClientFactory(Clock(), QUIET, f)):
        with pytest.raises(TypeError, match="IProtocolFactory"):
            build(Echo)  # the protocol class, not a factory of it
