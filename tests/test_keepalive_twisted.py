"""Timing rules with a fake clock: KEEPALIVE, max lifetime, setup timeout (spec §KEEPALIVE Frame,
§SETUP Frame). Client and server talk through iosim, which delivers bytes only when pumped."""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted_support import EchoResponder, LoggedPair, parse, server_protocol, wire

from rsocket_tx import (
    ConnectionLostError,
    Payload,
    Responder,
    RSocketClientFactory,
)
from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import ErrorFrame, FrameType, KeepaliveFrame

INTERVAL = 1000  # ms
LIFETIME = 5000  # ms


class Pair(LoggedPair):
    """A client and a server connected in memory, both on one Clock, logging their frames."""

    def __init__(self, responder=EchoResponder, interval=INTERVAL, lifetime=LIFETIME) -> None:
        super().__init__(responder, make_setup(keepalive_interval=interval,
                                               max_lifetime=lifetime))

    def keepalives(self, side: str) -> list:
        return [f for f in self.sent[side] if f.frame_type == FrameType.KEEPALIVE]

    def advance(self, seconds: float, steps: int = 1, *, deliver: bool = True) -> None:
        for _ in range(steps):
            self.clock.advance(seconds)
            if deliver:
                self.pump.flush()


def test_client_sends_keepalive_every_interval_and_server_answers():
    pair = Pair()
    pair.advance(INTERVAL / 1000 * 0.999)
    assert pair.keepalives("client") == []
    pair.advance(INTERVAL / 1000 * 0.001)
    assert pair.keepalives("client") == [KeepaliveFrame(respond=True)]
    assert pair.keepalives("server") == [KeepaliveFrame(respond=False)]
    pair.advance(INTERVAL / 1000, steps=4)
    assert pair.keepalives("client") == [KeepaliveFrame(respond=True)] * 5
    assert pair.keepalives("server") == [KeepaliveFrame(respond=False)] * 5


def test_answered_keepalives_keep_the_connection_open_past_max_lifetime():
    pair = Pair()
    pair.advance(INTERVAL / 1000, steps=3 * LIFETIME // INTERVAL)
    assert pair.rsocket.is_open and pair.server.rsocket.is_open
    d = pair.rsocket.request_response(Payload(b"x"))
    pair.pump.flush()
    assert d.result == Payload(b"x")


def test_silent_server_closes_the_client_after_max_lifetime():
    class Slow(Responder):
        def request_response(self, payload):
            return Deferred()

        def request_stream(self, payload):
            return iter([])  # completes at once; the request below is never delivered

    pair = Pair(Slow)
    d = pair.rsocket.request_response(Payload(b"x"))
    stream = pair.rsocket.request_stream(Payload(b"y"))
    collected = stream.collect()
    closed = pair.rsocket.closed
    # from now on nothing the server writes reaches the client (and vice versa)
    pair.advance(INTERVAL / 1000, steps=LIFETIME // INTERVAL - 1, deliver=False)
    assert pair.rsocket.is_open and not d.called
    assert len(pair.keepalives("client")) == LIFETIME // INTERVAL - 1  # still sending
    pair.advance(INTERVAL / 1000, deliver=False)
    assert not pair.rsocket.is_open
    pair.pump.flush()  # the client's transport closes: only then does `closed` fire
    assert closed.called
    failures = []
    d.addErrback(failures.append)
    collected.addErrback(failures.append)
    assert [f.type for f in failures] == [ConnectionLostError, ConnectionLostError]
    assert pair.pump.clientIO.disconnecting
    # the server's timers are independent; the client's are all gone
    assert not [c for c in pair.clock.getDelayedCalls()
                if getattr(c.func, "__self__", None) is pair.client]


def silent_client_pair():
    canceled = []

    class Slow(Responder):
        def request_response(self, payload):
            return Deferred(lambda d: canceled.append(True))

    pair = Pair(Slow)
    pair.rsocket.request_response(Payload(b"x")).addErrback(lambda f: None)
    pair.pump.flush()  # SETUP and the request reach the server at t=0; then silence
    return pair, canceled


def test_silent_client_is_dropped_by_the_server():
    pair, canceled = silent_client_pair()
    pair.advance(INTERVAL / 1000, steps=LIFETIME // INTERVAL - 1, deliver=False)
    assert pair.server.rsocket.is_open  # not before max lifetime
    # the server must enforce the client's max lifetime (5 s); allow it one more lifetime
    pair.advance(INTERVAL / 1000, steps=LIFETIME // INTERVAL + 1, deliver=False)
    assert not pair.server.rsocket.is_open, "server ignored the client's max lifetime"
    assert pair.pump.serverIO.disconnecting
    assert canceled == [True]  # the server's pending handler was cancelled
    errors = [f for f in pair.sent["server"] if isinstance(f, ErrorFrame)]
    assert [e.stream_id for e in errors] == [0]


def test_silent_client_is_dropped_by_the_server_at_max_lifetime():
    pair, _ = silent_client_pair()
    pair.advance(INTERVAL / 1000, steps=LIFETIME // INTERVAL, deliver=False)
    assert not pair.server.rsocket.is_open, (
        "server still open max lifetime after the client's last frame")


def server_on_string_transport(setup_timeout=None):
    kw = {} if setup_timeout is None else {"setup_timeout": setup_timeout}
    return server_protocol(EchoResponder, **kw)


def test_server_answers_keepalive_echoing_its_data():
    proto, transport, _ = server_on_string_transport()
    proto.dataReceived(wire(make_setup(), KeepaliveFrame(respond=True, data=b"ping"),
                            KeepaliveFrame(respond=False, data=b"not answered")))
    assert parse(transport.value()) == [KeepaliveFrame(respond=False, data=b"ping")]


def test_client_answers_server_keepalive():
    clock = Clock()
    proto = RSocketClientFactory(make_setup(), reactor=clock).buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    transport.clear()
    proto.dataReceived(wire(KeepaliveFrame(respond=True, data=b"from server")))
    assert parse(transport.value()) == [KeepaliveFrame(respond=False, data=b"from server")]


def test_setup_timeout_closes_a_silent_connection():
    proto, transport, clock = server_on_string_transport(setup_timeout=5000)
    clock.advance(4.999)
    assert not transport.disconnecting
    clock.advance(0.001)
    assert transport.disconnecting
    frames = parse(transport.value())
    assert all(isinstance(f, ErrorFrame) and f.stream_id == 0 for f in frames)
    assert clock.getDelayedCalls() == []


def test_setup_timeout_does_not_apply_once_setup_arrived():
    proto, transport, clock = server_on_string_transport(setup_timeout=5000)
    clock.advance(1)
    proto.dataReceived(wire(make_setup(keepalive_interval=1000, max_lifetime=60_000)))
    for _ in range(10):
        clock.advance(1)
        proto.dataReceived(wire(KeepaliveFrame(respond=True)))
    assert not transport.disconnecting
    assert proto.rsocket.is_open


def test_setup_timeout_with_partial_setup_bytes():
    """Bytes that never complete a SETUP frame do not extend the deadline."""
    proto, transport, clock = server_on_string_transport(setup_timeout=5000)
    setup = wire(make_setup())
    for i in range(4):
        proto.dataReceived(setup[i:i + 1])
        clock.advance(1)
    clock.advance(1)
    assert transport.disconnecting
