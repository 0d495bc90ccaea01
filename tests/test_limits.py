"""Every limit of docs/limits.rst pushed past, in the Twisted layer: max concurrent streams,
max send buffer size (a peer that does not read), max frame size, max reassembled size, setup
timeout; and the same settings through serve(), connect(), twistd and the CLI.

In-memory connections (StringTransport, iosim) run on a Clock; the real-TCP tests wait on
Deferreds with a timeout, never sleep."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.logger import LogLevel, capturedLogs, formatEvent
from twisted.python.failure import Failure
from twisted.test.iosim import connectedServerAndClient
from twisted_support import EchoResponder, parse, server_protocol, wait, wire

from rsocket_tx import (
    ConnectionLostError,
    InvalidSetupError,
    Payload,
    PayloadTooLargeError,
    RejectedError,
    Responder,
    RSocketClientFactory,
    RSocketServerFactory,
)
from rsocket_tx.client import make_setup
from rsocket_tx.core.errors import ExcessiveBufferingError
from rsocket_tx.core.frames import PayloadFrame, RequestResponseFrame
from rsocket_tx.faces.main import parse_args
from rsocket_tx.faces.tap import Options

aio = pytest_twisted.ensureDeferred

INVALID = 0x204
CONNECTION_ERROR = 0x101
INVALID_SETUP = 0x001


class Held(Responder):
    """Request-response answers only when the test fires the Deferred it left in ``held``."""

    def __init__(self) -> None:
        self.held: list[Deferred] = []

    def request_response(self, payload):
        d = Deferred()
        self.held.append(d)
        return d


class MemoryPair:
    """A client and a server connected in memory (iosim) on one Clock."""

    def __init__(self, server_responder=EchoResponder, client_responder=None,
                 server: dict | None = None, client: dict | None = None) -> None:
        self.clock = Clock()
        server_factory = RSocketServerFactory(server_responder, reactor=self.clock,
                                              **(server or {}))
        client_factory = RSocketClientFactory(make_setup(), client_responder,
                                              reactor=self.clock, **(client or {}))
        self.client, self.server, self.pump = connectedServerAndClient(
            lambda: server_factory.buildProtocol(None),
            lambda: client_factory.buildProtocol(None), clock=self.clock)
        self.rsocket = self.client.rsocket


class PausingTransport(StringTransport):
    """A StringTransport with a write buffer, as Twisted's TCP transport has: a write that
    takes it past ``buffer_size`` pauses the producer; :meth:`drain` empties it (the peer
    read everything) and resumes the producer."""

    def __init__(self, buffer_size: int) -> None:
        super().__init__()
        self.buffer_size = buffer_size
        self.buffered = 0
        self.paused = False

    def write(self, data: bytes) -> None:
        super().write(data)
        self.buffered += len(data)
        if self.buffered > self.buffer_size and not self.paused:
            self.paused = True
            self.producer.pauseProducing()

    def writeSequence(self, data) -> None:
        self.write(b"".join(data))

    def drain(self) -> None:
        self.buffered = 0
        if self.paused:
            self.paused = False
            self.producer.resumeProducing()


def server_on_string_transport(responder=EchoResponder, transport=None, **settings):
    """A server protocol on a StringTransport, SETUP received; returns (proto, transport)."""
    proto, transport, _ = server_protocol(responder, transport=transport, **settings)
    proto.dataReceived(wire(make_setup()))
    return proto, transport


# --------------------------------------------------------------------- max concurrent streams


def test_requests_past_max_concurrent_streams_are_rejected_and_the_connection_stays_up():
    responder = Held()
    pair = MemoryPair(lambda: responder, server={"max_concurrent_streams": 2})
    first, second = (pair.rsocket.request_response(Payload(b"%d" % i)) for i in range(2))
    third = pair.rsocket.request_response(Payload(b"3"))
    pair.pump.flush()
    assert len(responder.held) == 2  # the third never reached the responder
    failure = third.result
    third.addErrback(lambda f: None)
    assert isinstance(failure, Failure) and failure.check(RejectedError)
    assert "max_concurrent_streams" in str(failure.value) and "2" in str(failure.value)
    assert pair.rsocket.is_open and pair.server.rsocket.is_open

    responder.held[0].callback(Payload(b"one"))
    pair.pump.flush()
    assert first.result == Payload(b"one")
    fourth = pair.rsocket.request_response(Payload(b"4"))
    pair.pump.flush()
    assert len(responder.held) == 3  # room again
    for d in responder.held[1:]:
        d.callback(Payload(b"ok"))
    pair.pump.flush()
    assert second.result == fourth.result == Payload(b"ok")


def test_a_client_limits_the_streams_the_server_opens_towards_it():
    client_responder = Held()

    class Asks(Responder):
        pass

    pair = MemoryPair(Asks, client_responder, client={"max_concurrent_streams": 1})
    pair.pump.flush()
    server_rsocket = pair.server.rsocket
    first = server_rsocket.request_response(Payload(b"a"))
    second = server_rsocket.request_response(Payload(b"b"))
    pair.pump.flush()
    assert len(client_responder.held) == 1
    assert isinstance(second.result, Failure) and second.result.check(RejectedError)
    second.addErrback(lambda f: None)
    client_responder.held[0].callback(Payload(b"done"))
    pair.pump.flush()
    assert first.result == Payload(b"done")


def test_request_streams_count_until_they_complete():
    pair = MemoryPair(server={"max_concurrent_streams": 1})
    stream = pair.rsocket.request_stream(Payload(b"5"), prefetch=2)
    pair.pump.flush()
    extra = pair.rsocket.request_response(Payload(b"x"))
    pair.pump.flush()
    assert extra.result.check(RejectedError)
    extra.addErrback(lambda f: None)
    collected = stream.collect()
    pair.pump.flush()
    assert [p.data for p in collected.result] == [b"0", b"1", b"2", b"3", b"4"]
    again = pair.rsocket.request_response(Payload(b"y"))
    pair.pump.flush()
    assert again.result == Payload(b"y")


@aio
async def test_max_concurrent_streams_over_tcp(harness):
    responder = Held()
    port = await harness.serve(lambda: responder, max_concurrent_streams=1)
    rs = await harness.connect(port)
    first = rs.request_response(Payload(b"a"))
    with pytest.raises(RejectedError, match="max_concurrent_streams"):
        await wait(rs.request_response(Payload(b"b")))
    responder.held[0].callback(Payload(b"a!"))
    assert await wait(first) == Payload(b"a!")


# --------------------------------------------------------------------- max send buffer size


def test_a_peer_that_does_not_read_is_aborted_past_max_send_buffer_size():
    proto, transport = server_on_string_transport(max_send_buffer_size=10_000)
    # the server has a request of its own outstanding towards the client
    pending = proto.rsocket.request_response(Payload(b"are you there?"))
    transport.clear()
    proto.pauseProducing()  # the transport's write buffer is full: the client is not reading
    with capturedLogs() as events:
        for sid in range(1, 40, 2):  # 20 requests whose 1,000-byte answers queue up
            proto.dataReceived(wire(RequestResponseFrame(stream_id=sid, data=b"x" * 1000)))
            if transport.disconnected:
                break
    assert transport.disconnected  # aborted: no waiting for the buffer to drain
    assert sid < 39  # it stopped at the limit, not at the end
    written = len(transport.value())
    assert 10_000 - 1_100 < written <= 10_000  # up to the limit, not one answer past it
    assert not proto.rsocket.is_open
    failure = pending.result
    pending.addErrback(lambda f: None)
    assert failure.check(ExcessiveBufferingError) and failure.check(ConnectionLostError)
    assert "max_send_buffer_size of 10000 bytes" in str(failure.value)
    (warning,) = [e for e in events if e["log_level"] == LogLevel.warn]
    assert "not reading" in formatEvent(warning)
    assert "max_send_buffer_size" in formatEvent(warning)
    # later input is ignored, nothing more is written
    proto.dataReceived(wire(RequestResponseFrame(stream_id=41, data=b"late")))
    assert len(transport.value()) == written


def test_a_transport_that_drains_resets_the_count():
    proto, transport = server_on_string_transport(max_send_buffer_size=10_000)
    for round_ in range(5):  # 5 x 8,000 bytes while paused, but the buffer drains each time
        proto.pauseProducing()
        for i in range(8):
            sid = 1 + 2 * (8 * round_ + i)
            proto.dataReceived(wire(RequestResponseFrame(stream_id=sid, data=b"x" * 990)))
        proto.resumeProducing()
    assert not transport.disconnected
    assert proto.rsocket.is_open
    assert len(parse(transport.value())) == 40


def test_writes_to_a_transport_with_room_are_not_counted():
    proto, transport = server_on_string_transport(max_send_buffer_size=1_000)
    for sid in range(1, 41, 2):  # never paused: each 1,000-byte answer is written at once
        proto.dataReceived(wire(RequestResponseFrame(stream_id=sid, data=b"x" * 1000)))
    assert not transport.disconnected


def test_the_write_that_fills_the_transport_counts_in_full():
    # a burst of requests in one read: their answers go out in one write, which the peer has
    # to read before anything else; past the limit, that one write is enough to abort
    transport = PausingTransport(buffer_size=4096)
    proto, transport = server_on_string_transport(transport=transport,
                                                  max_send_buffer_size=50_000)
    burst = b"".join(wire(RequestResponseFrame(stream_id=sid, data=b"x" * 1000))
                     for sid in range(1, 81, 2))  # 40 answers, about 40 KB
    proto.dataReceived(burst)
    assert transport.paused and not transport.disconnected
    transport.drain()
    burst2 = b"".join(wire(RequestResponseFrame(stream_id=sid, data=b"x" * 1000))
                      for sid in range(101, 221, 2))  # 60 answers, about 60 KB
    proto.dataReceived(burst2)
    assert transport.disconnected
    assert "max_send_buffer_size of 50000 bytes" in str(proto.close_reason)


def test_a_reading_peer_with_a_full_buffer_is_not_aborted():
    # paused and resumed over and over by a transport whose peer reads: never aborted
    transport = PausingTransport(buffer_size=2048)
    proto, transport = server_on_string_transport(transport=transport,
                                                  max_send_buffer_size=8_000)
    for sid in range(1, 401, 2):
        proto.dataReceived(wire(RequestResponseFrame(stream_id=sid, data=b"x" * 1000)))
        if sid % 8 == 7:
            transport.drain()
    assert not transport.disconnected
    assert len(parse(transport.value())) == 200


@aio
async def test_a_tcp_client_that_stops_reading_is_aborted(harness):
    big = b"x" * 65_536

    class Big(Responder):
        def request_response(self, payload):
            return Payload(big)

    port = await harness.serve(Big, max_send_buffer_size=1_000_000)
    raw = await harness.raw(port)
    raw.transport.pauseProducing()  # stop reading
    # 40 requests in one burst: their 40 answers of 64 KiB (2.6 MB) go out in one write,
    # which fills the transport's buffer and counts in full
    raw.send(wire(make_setup()) + b"".join(
        wire(RequestResponseFrame(stream_id=sid, data=b"q")) for sid in range(1, 80, 2)))
    server = await wait(_first_server_protocol(harness))
    await wait(server.lost)
    assert isinstance(server.close_reason, ExcessiveBufferingError)
    raw.transport.resumeProducing()
    await wait(raw.lost)


async def _first_server_protocol(harness):
    while not harness.server_protocols:  # the server may accept a turn after the connect
        d = Deferred()
        reactor.callLater(0, d.callback, None)
        await d
    return harness.server_protocols[0]


# --------------------------------------------------------------------- the limits that existed


def test_a_frame_past_max_frame_size_is_a_connection_error():
    proto, transport = server_on_string_transport(max_frame_size=1024)
    transport.clear()
    proto.dataReceived(wire(RequestResponseFrame(stream_id=1, data=b"x" * 1100)))
    (error,) = parse(transport.value())
    assert (error.stream_id, error.error_code) == (0, CONNECTION_ERROR)
    assert "1024" in error.data.decode()
    assert transport.disconnecting


def test_a_payload_past_max_reassembled_size_ends_only_its_stream():
    proto, transport = server_on_string_transport(max_reassembled_size=1000)
    transport.clear()
    proto.dataReceived(wire(RequestResponseFrame(stream_id=1, data=b"x" * 600, follows=True))
                       + wire(PayloadFrame(stream_id=1, data=b"y" * 600, next=True)))
    (error,) = parse(transport.value())
    assert (error.stream_id, error.error_code) == (1, INVALID)
    assert not transport.disconnecting
    transport.clear()
    proto.dataReceived(wire(RequestResponseFrame(stream_id=3, data=b"small")))
    assert parse(transport.value()) == [PayloadFrame(stream_id=3, data=b"small", next=True,
                                                     complete=True)]


def test_an_answer_past_max_reassembled_size_fails_the_request_with_payload_too_large():
    class Big(Responder):
        def request_response(self, payload):
            return Payload(b"z" * 5000)

    pair = MemoryPair(Big, server={"fragment_size": 256},
                      client={"max_reassembled_size": 1000})
    d = pair.rsocket.request_response(Payload(b"q"))
    pair.pump.flush()
    assert d.result.check(PayloadTooLargeError)
    d.addErrback(lambda f: None)
    assert pair.rsocket.is_open


def test_setup_timeout_closes_a_silent_connection():
    proto, transport, clock = server_protocol(EchoResponder, setup_timeout=2000)
    clock.advance(1.999)
    assert not transport.disconnecting
    clock.advance(0.001)
    (error,) = parse(transport.value())
    assert (error.stream_id, error.error_code) == (0, INVALID_SETUP)
    assert "2000 ms" in error.data.decode()
    assert transport.disconnecting
    assert isinstance(proto.close_reason, InvalidSetupError)


# --------------------------------------------------------------------- the settings' faces


def test_serve_and_connect_take_the_settings():
    server = RSocketServerFactory(EchoResponder, reactor=Clock(), max_concurrent_streams=7,
                                  max_send_buffer_size=12_345, drain_timeout=0)
    assert (server.config.max_concurrent_streams, server.config.max_send_buffer_size,
            server.config.drain_timeout) == (7, 12_345, 0)
    client = RSocketClientFactory(make_setup(), reactor=Clock(), max_concurrent_streams=8,
                                  max_send_buffer_size=54_321, drain_timeout=5)
    assert (client.config.max_concurrent_streams, client.config.max_send_buffer_size,
            client.config.drain_timeout) == (8, 54_321, 5)
    with pytest.raises(ValueError, match="max_concurrent_streams"):
        RSocketServerFactory(EchoResponder, reactor=Clock(), max_concurrent_streams=0)


@pytest.mark.parametrize("face", ["twistd", "cli"])
def test_server_options(face):
    argv = ["--max-concurrent-streams", "16", "--max-send-buffer-size", "1_000_000",
            "--drain-timeout", "0"]
    if face == "twistd":
        options = Options()
        options.parseOptions(argv)
        settings = options["settings"]
    else:
        settings = parse_args(["serve", *argv]).settings
    assert (settings.max_concurrent_streams, settings.max_send_buffer_size,
            settings.drain_timeout) == (16, 1_000_000, 0)


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-concurrent-streams", "0"], "--max-concurrent-streams: must be at least 1"),
    (["--max-send-buffer-size", "0"], "--max-send-buffer-size: must be at least 1"),
    (["--drain-timeout", "-1"], "--drain-timeout: must be at least 0"),
    (["--drain-timeout", "2147483648"], "--drain-timeout: must be at most 2147483647"),
])
def test_server_options_are_checked(argv, message):
    from twisted.python import usage

    with pytest.raises(usage.UsageError, match=message):
        Options().parseOptions(argv)


def test_the_service_factory_gets_the_settings():
    from rsocket_tx.faces.tap import build_service, parse_server_settings

    settings = parse_server_settings(listen=["tcp:0:interface=127.0.0.1"],
                                     max_concurrent_streams=3, max_send_buffer_size=4096,
                                     drain_timeout=250)
    config = build_service(settings, Clock()).factory.config
    assert (config.max_concurrent_streams, config.max_send_buffer_size,
            config.drain_timeout) == (3, 4096, 250)
