"""The reconnecting client (rsocket_tx.reconnect): backoff delays, requests during a gap
(wait, then NotConnectedError naming the timeout and the last error), requests in flight at a
loss (fail, never retried), giving up, closing; with a Clock and fake connections, then over
real loopback servers stopped and restarted on the same port.

Also holds :class:`LoopbackServer`, the restartable server the load-balancer tests use.
"""

from __future__ import annotations

import pytest
import pytest_twisted
from hypothesis import given
from hypothesis import strategies as st
from twisted.internet import defer, reactor
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.task import Clock
from twisted_support import wait

from rsocket_tx import Payload, Responder, connect, serve
from rsocket_tx.core.errors import ConnectionLostError, LocalProtocolError
from rsocket_tx.reconnect import (
    Backoff,
    NotConnectedError,
    PendingStream,
    ReconnectingRSocket,
    ReconnectState,
    connect_reconnecting,
)

aio = pytest_twisted.ensureDeferred


# ------------------------------------------------------------------------------ fakes


class FakeStream:
    def __init__(self, payload) -> None:
        self.payload = payload
        self.stream_id = 1
        self.cancelled = False
        self.ended = False

    def collect(self, take=None):
        return defer.succeed([self.payload])

    def cancel(self) -> None:
        self.cancelled = True


class FakeRSocket:
    """Stands for a connected RSocket: records requests; :meth:`drop` loses it."""

    def __init__(self) -> None:
        self.is_open = True
        self.is_closing = False
        self.close_reason = None
        self.requests: list = []
        self._closed: list = []

    @property
    def closed(self):
        d = defer.Deferred()
        if self.is_open:
            self._closed.append(d)
        else:
            d.callback(None)
        return d

    def request_response(self, payload, **options):
        d = defer.Deferred()
        self.requests.append(("request_response", payload, options, d))
        return d

    def fire_and_forget(self, payload, **options):
        self.requests.append(("fire_and_forget", payload, options, None))
        return defer.succeed(None)

    def fire_and_forget_many(self, payloads, **options):
        self.requests.append(("fire_and_forget_many", payloads, options, None))
        return defer.succeed(None)

    def metadata_push(self, metadata):
        self.requests.append(("metadata_push", metadata, {}, None))
        return defer.succeed(None)

    def request_stream(self, payload, **options):
        self.requests.append(("request_stream", payload, options, None))
        return FakeStream(payload)

    def request_channel(self, payload, outbound=None, **options):
        self.requests.append(("request_channel", payload, options, outbound))
        return FakeStream(payload)

    def drop(self, error: Exception) -> None:
        self.is_open = False
        self.close_reason = error
        for kind, _, _, d in self.requests:
            if kind == "request_response" and not d.called:
                d.errback(error)
        closed, self._closed = self._closed, []
        for d in closed:
            d.callback(None)

    def close(self, drain_timeout=None):
        self.drop(ConnectionLostError("closed locally"))
        return defer.succeed(None)


class Connector:
    """The connect callable: each call is an attempt whose Deferred the test fires."""

    def __init__(self) -> None:
        self.attempts: list[defer.Deferred] = []

    def __call__(self):
        d = defer.Deferred()
        self.attempts.append(d)
        return d

    def succeed(self) -> FakeRSocket:
        rs = FakeRSocket()
        self.attempts[-1].callback(rs)
        return rs

    def refuse(self) -> None:
        self.attempts[-1].errback(ConnectionRefusedError("127.0.0.1:1"))


def client(clock=None, *, backoff=None, **kw) -> tuple[ReconnectingRSocket, Connector, Clock]:
    clock = Clock() if clock is None else clock
    connector = Connector()
    rc = ReconnectingRSocket(connector, reactor=clock,
                             backoff=backoff or Backoff(initial_delay=100, max_delay=1000,
                                                        jitter=0),
                             **kw)
    return rc, connector, clock


def next_state(rc: ReconnectingRSocket, state: ReconnectState) -> defer.Deferred:
    """A Deferred firing when ``rc`` next enters ``state`` (with a time limit)."""
    d = defer.Deferred()

    def observe(_, new) -> None:
        if new is state:
            rc.remove_observer(observe)
            d.callback(None)

    rc.add_observer(observe)
    return wait(d)


def failure_of(d: defer.Deferred) -> BaseException:
    """The exception ``d`` has failed with (handled)."""
    assert d.called, "the Deferred has not fired"
    box: list = []
    d.addCallbacks(lambda r: pytest.fail(f"succeeded with {r!r}"), box.append)
    return box[0].value


# ----------------------------------------------------------------------------- backoff


def test_backoff_doubles_from_the_initial_delay_up_to_the_maximum() -> None:
    backoff = Backoff(initial_delay=100, max_delay=1000, jitter=0)
    assert [backoff.delay(n) for n in range(7)] == [100, 200, 400, 800, 1000, 1000, 1000]
    assert Backoff(initial_delay=0, max_delay=0, jitter=0).delay(5) == 0


def test_backoff_jitter_moves_the_delay_within_its_share_and_the_bounds() -> None:
    backoff = Backoff(initial_delay=100, max_delay=1000, jitter=0.5)
    # attempt 0: 100 ms, may move by 50 ms but not below the initial delay: [100, 150]
    assert (backoff.delay(0, 0.0), backoff.delay(0, 1.0)) == (100, 150)
    # attempt 2: 400 ms +- 200 ms
    assert (backoff.delay(2, 0.0), backoff.delay(2, 0.5), backoff.delay(2, 1.0)) == \
        (200, 400, 600)
    # attempt 3: 800 ms +- 400, capped at the maximum: [400, 1000]
    assert (backoff.delay(3, 0.0), backoff.delay(3, 1.0)) == (400, 1000)
    # attempt 9 (past the maximum): 1000 ms - up to 500
    assert (backoff.delay(9, 0.0), backoff.delay(9, 1.0)) == (500, 1000)


@given(initial=st.integers(0, 10_000), extra=st.integers(0, 100_000),
       jitter=st.floats(0, 1), attempt=st.integers(0, 200), rand=st.floats(0, 1))
def test_backoff_delays_stay_within_the_bounds(initial, extra, jitter, attempt, rand) -> None:
    backoff = Backoff(initial_delay=initial, max_delay=initial + extra, jitter=jitter)
    delay = backoff.delay(attempt, rand)
    assert initial - 1e-6 <= delay <= initial + extra + 1e-6
    if initial:
        base = min(initial + extra, initial * 2 ** attempt)
    else:  # at once, then 1, 2, 4, ... ms: never a loop of immediate retries
        base = min(extra, 2 ** (attempt - 1)) if attempt else 0
    assert abs(delay - base) <= base * jitter + 1e-6


@pytest.mark.parametrize("kwargs, match", [
    ({"initial_delay": -1}, "initial_delay"),
    ({"initial_delay": 1.5}, "initial_delay"),
    ({"initial_delay": 200, "max_delay": 100}, "max_delay"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"jitter": 1.5}, "jitter"),
])
def test_backoff_refuses_bad_settings(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        Backoff(**kwargs)


def test_timeouts_are_checked() -> None:
    with pytest.raises(ValueError, match="wait_timeout"):
        ReconnectingRSocket(Connector(), reactor=Clock(), wait_timeout=-1)
    with pytest.raises(ValueError, match="connect_timeout"):
        ReconnectingRSocket(Connector(), reactor=Clock(), connect_timeout=2**31)


# ------------------------------------------------------------------- the connection loop


def test_requests_go_straight_to_the_connection_when_connected() -> None:
    rc, connector, clock = client()
    assert rc.state is ReconnectState.IDLE
    rc.start()
    assert rc.state is ReconnectState.CONNECTING and len(connector.attempts) == 1
    rs = connector.succeed()
    assert rc.state is ReconnectState.CONNECTED and rc.rsocket is rs and rc.connections == 1
    d = rc.request_response(b"x", route="r")
    assert rs.requests[0][:3] == ("request_response", b"x", {"route": "r"})
    rs.requests[0][3].callback(Payload(b"y"))
    assert d.result == Payload(b"y")
    rc.fire_and_forget(b"f")
    rc.metadata_push(b"m")
    stream = rc.request_stream(b"s", prefetch=8)
    channel = rc.request_channel(b"c", ["o"])
    assert isinstance(stream, FakeStream) and isinstance(channel, FakeStream)
    assert [r[0] for r in rs.requests] == ["request_response", "fire_and_forget",
                                           "metadata_push", "request_stream",
                                           "request_channel"]
    assert rs.requests[3][2] == {"prefetch": 8} and rs.requests[4][3] == ["o"]
    assert clock.getDelayedCalls() == []


def test_failed_attempts_back_off_exponentially_and_reset_after_a_success() -> None:
    rc, connector, clock = client(random=lambda: 0.5)
    rc.start()
    for delay in (100, 200, 400, 800, 1000):
        connector.refuse()
        assert rc.state is ReconnectState.BACKING_OFF
        attempts = len(connector.attempts)
        clock.advance(delay / 1000 - 0.001)
        assert len(connector.attempts) == attempts, f"retried before {delay} ms"
        clock.advance(0.001)
        assert len(connector.attempts) == attempts + 1
    assert rc.failed_attempts == 5 and isinstance(rc.last_error, ConnectionRefusedError)
    rs = connector.succeed()
    assert rc.failed_attempts == 0
    # a loss: the first attempt waits the initial delay again, not the last one
    rs.drop(ConnectionLostError("gone"))
    assert rc.state is ReconnectState.BACKING_OFF and rc.rsocket is None
    assert isinstance(rc.last_error, ConnectionLostError)
    clock.advance(0.099)
    assert len(connector.attempts) == 6
    clock.advance(0.001)
    assert len(connector.attempts) == 7


def test_the_jitter_comes_from_the_random_source() -> None:
    rc, connector, clock = client(backoff=Backoff(initial_delay=100, max_delay=1000,
                                                  jitter=0.5), random=lambda: 0.999)
    rc.start()
    connector.refuse()
    (call,) = clock.getDelayedCalls()
    assert call.getTime() == pytest.approx(0.14995)


def test_a_request_made_during_a_gap_waits_and_goes_out_on_the_next_connection() -> None:
    rc, connector, clock = client(wait_timeout=5000)
    rc.start()
    connector.refuse()
    first = rc.request_response(b"1")
    second = rc.fire_and_forget(b"2")
    third = rc.metadata_push(b"3")
    fourth = rc.fire_and_forget_many(iter([b"4", b"5"]), route="r")  # taken whole at the call
    assert not first.called and not second.called and not fourth.called
    clock.advance(0.1)
    rs = connector.succeed()
    assert [(r[0], r[1]) for r in rs.requests] == [
        ("request_response", b"1"), ("fire_and_forget", b"2"), ("metadata_push", b"3"),
        ("fire_and_forget_many", [b"4", b"5"])]
    assert rs.requests[3][2] == {"route": "r"}
    rs.requests[0][3].callback(Payload(b"one"))
    assert first.result == Payload(b"one")
    assert second.called and third.called and fourth.called
    assert clock.getDelayedCalls() == []  # the wait timers are gone


def test_a_request_waiting_past_wait_timeout_fails_naming_it_and_the_last_error() -> None:
    rc, connector, clock = client(wait_timeout=250)
    rc.start()
    connector.refuse()
    d = rc.request_response(b"1")
    clock.advance(0.249)
    assert not d.called
    clock.advance(0.001)
    error = failure_of(d)
    assert isinstance(error, NotConnectedError) and isinstance(error, LocalProtocolError)
    assert "250 ms (wait_timeout)" in str(error)
    assert "ConnectionRefusedError" in str(error) and "127.0.0.1:1" in str(error)
    assert error.timeout == 250 and isinstance(error.last_error, ConnectionRefusedError)
    # the connection comes later: nothing is sent for the request that gave up
    clock.advance(0.1)
    rs = connector.succeed()
    assert rs.requests == []


def test_wait_timeout_zero_fails_at_once_and_when_connected_takes_its_own_timeout() -> None:
    rc, connector, clock = client(wait_timeout=0)
    rc.start()
    error = failure_of(rc.request_response(b"1"))
    assert isinstance(error, NotConnectedError) and "wait_timeout is 0" in str(error)
    d = rc.when_connected(timeout=100)
    rs = connector.succeed()
    assert d.result is rs


def test_a_cancelled_waiting_request_is_never_sent() -> None:
    rc, connector, clock = client()
    rc.start()
    connector.refuse()
    d = rc.request_response(b"1")
    d.cancel()
    failure_of(d)
    clock.advance(0.1)
    rs = connector.succeed()
    assert rs.requests == [] and clock.getDelayedCalls() == []


def test_a_request_in_flight_at_a_loss_fails_with_the_connection_error_and_is_not_retried(
        ) -> None:
    rc, connector, clock = client()
    rc.start()
    rs = connector.succeed()
    d = rc.request_response(b"1")
    rs.drop(ConnectionLostError("the transport closed"))
    error = failure_of(d)
    assert isinstance(error, ConnectionLostError)
    clock.advance(0.1)
    again = connector.succeed()
    assert again.requests == [] and rc.connections == 2


def test_max_attempts_gives_up_then_start_tries_again() -> None:
    rc, connector, clock = client(backoff=Backoff(initial_delay=10, max_delay=10, jitter=0,
                                                  max_attempts=3))
    rc.start()
    d = rc.request_response(b"1")
    for _ in range(2):
        connector.refuse()
        clock.advance(0.01)
    connector.refuse()
    assert rc.state is ReconnectState.FAILED and len(connector.attempts) == 3
    error = failure_of(d)
    assert isinstance(error, NotConnectedError)
    assert "3 failed attempts in a row (max_attempts)" in str(error)
    assert "ConnectionRefusedError" in str(error)
    with pytest.raises(NotConnectedError, match="gave up reconnecting"):
        rc.request_response(b"2")
    assert clock.getDelayedCalls() == []
    rc.start()
    assert len(connector.attempts) == 4
    connector.succeed()
    assert rc.is_open


def test_retry_if_false_gives_up_at_once() -> None:
    rc, connector, clock = client(retry_if=lambda error: not isinstance(error, ValueError))
    rc.start()
    connector.attempts[-1].errback(ValueError("bad certificate"))
    assert rc.state is ReconnectState.FAILED
    with pytest.raises(NotConnectedError, match="retry_if"):
        rc.fire_and_forget(b"x")


def test_an_attempt_past_connect_timeout_is_cancelled_and_counted() -> None:
    rc, connector, clock = client(connect_timeout=3000)
    rc.start()
    clock.advance(3)
    assert rc.state is ReconnectState.BACKING_OFF and rc.failed_attempts == 1
    assert "3000 ms (connect_timeout)" in str(rc.last_error)
    clock.advance(0.1)
    assert len(connector.attempts) == 2


def test_a_connection_that_closes_gracefully_is_replaced() -> None:
    rc, connector, clock = client()
    rc.start()
    rs = connector.succeed()
    rs.is_closing = True  # the server's ERROR[CONNECTION_CLOSE]: no new requests
    assert rc.rsocket is None
    d = rc.request_response(b"1")
    assert rs.requests == []
    rs.drop(ConnectionLostError("closed"))
    clock.advance(0.1)
    new = connector.succeed()
    assert [r[1] for r in new.requests] == [b"1"]
    new.requests[0][3].callback(Payload(b"answer"))
    assert d.result == Payload(b"answer")


def test_close_stops_reconnecting_fails_waiters_and_closes_the_connection() -> None:
    rc, connector, clock = client()
    rc.start()
    connector.refuse()
    waiting = rc.request_response(b"1")
    closed = rc.close()
    assert closed.called and rc.state is ReconnectState.CLOSED
    assert "closed" in str(failure_of(waiting))
    assert clock.getDelayedCalls() == []
    with pytest.raises(NotConnectedError, match="closed"):
        rc.request_response(b"2")
    with pytest.raises(NotConnectedError):
        rc.start()
    # with a connection up: it is closed
    rc2, connector2, _ = client()
    rc2.start()
    rs = connector2.succeed()
    rc2.close(0)
    assert not rs.is_open
    # closed while an attempt is under way: the attempt is cancelled
    rc3, connector3, _ = client()
    rc3.start()
    rc3.close()
    assert connector3.attempts[0].called  # cancelled
    assert rc3.state is ReconnectState.CLOSED and rc3.last_error is None


def test_requests_before_start_raise() -> None:
    rc, _, _ = client()
    with pytest.raises(NotConnectedError, match="not started"):
        rc.request_response(b"1")


# ------------------------------------------------------------------------ pending streams


def test_a_stream_made_during_a_gap_opens_on_the_next_connection() -> None:
    rc, connector, clock = client()
    rc.start()
    connector.refuse()
    stream = rc.request_stream(b"s", prefetch=4)
    assert isinstance(stream, PendingStream) and stream.stream_id is None
    collected = stream.collect()
    channel = rc.request_channel(b"c", ["more"])
    clock.advance(0.1)
    rs = connector.succeed()
    assert [(r[0], r[1], r[2]) for r in rs.requests] == [
        ("request_stream", b"s", {"prefetch": 4}), ("request_channel", b"c", {})]
    assert rs.requests[1][3] == ["more"]
    assert collected.result == [b"s"] and stream.stream_id == 1
    assert isinstance(channel.stream, FakeStream)
    channel.cancel()
    assert channel.stream.cancelled


def test_a_pending_stream_cancelled_before_the_connection_sends_nothing() -> None:
    rc, connector, clock = client()
    rc.start()
    connector.refuse()
    stream = rc.request_stream(b"s")
    stream.cancel()
    assert stream.collect().result == []
    clock.advance(0.1)
    assert connector.succeed().requests == []


@aio
async def test_a_pending_stream_that_times_out_raises_not_connected() -> None:
    rc, connector, clock = client(wait_timeout=100)
    rc.start()
    connector.refuse()
    stream = rc.request_stream(b"s")
    iteration = defer.ensureDeferred(stream.__anext__())
    clock.advance(0.1)
    error = failure_of(iteration)
    assert isinstance(error, NotConnectedError) and "100 ms (wait_timeout)" in str(error)
    assert isinstance(failure_of(stream.collect()), NotConnectedError)


# ------------------------------------------------------------------------------ user callbacks


@pytest.mark.logs_failure("an observer raises on purpose",
                          match=r"the observer .* raised(.|\n)*RuntimeError: observer bug")
def test_an_observer_that_raises_is_logged_and_the_client_still_connects_and_serves() -> None:
    rc, connector, clock = client()
    seen: list = []

    def broken(_, state) -> None:
        raise RuntimeError("observer bug")

    rc.add_observer(broken)
    rc.add_observer(lambda c, state: seen.append(state))
    rc.start()
    d = rc.request_response(b"early")  # waits for the connection
    rs = connector.succeed()
    assert rc.state is ReconnectState.CONNECTED and rc.is_open
    assert seen == [ReconnectState.CONNECTING, ReconnectState.CONNECTED]
    assert [r[:2] for r in rs.requests] == [("request_response", b"early")]
    rs.requests[0][3].callback(Payload(b"ok"))
    assert d.result == Payload(b"ok")
    # the loss is still noticed: the client backs off and reconnects
    rs.drop(ConnectionLostError("gone"))
    assert seen[-1] is ReconnectState.BACKING_OFF
    clock.advance(0.1)
    connector.succeed()
    assert rc.state is ReconnectState.CONNECTED and rc.connections == 2
    rc.close()
    assert seen[-1] is ReconnectState.CLOSED


@pytest.mark.logs_failure("the user's callables raise on purpose",
                          match=r"(retry_if|random|backoff|connect callable).* (raised|failed)")
def test_retry_if_random_backoff_and_connect_that_raise_are_logged_and_defaults_used() -> None:
    class BrokenBackoff(Backoff):
        def delay(self, attempt, rand=0.5):
            raise ArithmeticError("backoff bug")

        def gives_up(self, failed):
            raise LookupError("gives_up bug")

    def retry_if(error):
        raise RuntimeError("retry_if bug")

    def rand():
        raise RuntimeError("random bug")

    rc, connector, clock = client(backoff=BrokenBackoff(), retry_if=retry_if, random=rand)
    rc.start()
    connector.refuse()
    # retried (retry_if's default), after the default longest delay
    assert rc.state is ReconnectState.BACKING_OFF
    clock.advance(10.0 - 0.001)
    assert len(connector.attempts) == 1
    clock.advance(0.001)
    assert len(connector.attempts) == 2
    connector.succeed()
    assert rc.state is ReconnectState.CONNECTED

    calls: list = []

    def bad_connect():
        calls.append(1)
        raise RuntimeError("connect bug")

    rc2 = ReconnectingRSocket(bad_connect, reactor=clock,
                              backoff=Backoff(initial_delay=100, max_delay=100, jitter=0))
    rc2.start()
    assert rc2.state is ReconnectState.BACKING_OFF
    assert isinstance(rc2.last_error, RuntimeError)
    clock.advance(0.1)
    assert len(calls) == 2
    rc2.close()


# ------------------------------------------------------------------- real loopback servers


class LoopbackServer:
    """A server on a loopback port that can be stopped (connections aborted, as a crash) and
    started again on the same port. Its responder answers ``NAME:DATA`` and records what it
    handled in :attr:`handled`; with :attr:`hold` set, it holds the requests instead
    (:attr:`held`), and :meth:`when_held` fires once ``n`` are held."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.port_number = 0
        self.port = None
        self.protocols: list = []
        self.handled: list[bytes] = []
        self.hold = False
        self.held: list[defer.Deferred] = []
        self._held_waiters: list = []

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port_number}"

    def responder(self) -> Responder:
        server = self

        class Named(Responder):
            def request_response(self, payload):
                return server.answer(payload)

            def request_stream(self, payload):
                server.handled.append(payload.data)
                return [Payload(b"%s:%d" % (server.name.encode(), i))
                        for i in range(int(payload.data))]

        return Named()

    def answer(self, payload):
        if self.hold:
            d = defer.Deferred()
            self.held.append(d)
            for n, waiter in list(self._held_waiters):
                if len(self.held) >= n:
                    self._held_waiters.remove((n, waiter))
                    waiter.callback(None)
            return d
        self.handled.append(payload.data)
        return Payload(self.name.encode() + b":" + payload.data)

    def when_held(self, n: int) -> defer.Deferred:
        d = defer.Deferred()
        if len(self.held) >= n:
            d.callback(None)
        else:
            self._held_waiters.append((n, d))
        return wait(d)

    async def start(self) -> None:
        port = await wait(serve(f"tcp:{self.port_number}:interface=127.0.0.1", self.responder,
                                reactor=reactor))
        self.port = port
        self.port_number = port.getHost().port
        factory = port.factory
        build = factory.buildProtocol

        def buildProtocol(addr):  # noqa: N802 - Twisted's name
            proto = build(addr)
            lost = defer.Deferred()
            original = proto.connectionLost

            def connectionLost(reason=None):  # noqa: N802
                try:
                    original(reason)
                finally:
                    lost.callback(None)

            proto.connectionLost = connectionLost
            self.protocols.append((proto, lost))
            return proto

        factory.buildProtocol = buildProtocol

    async def stop_gracefully(self) -> None:
        """Stop listening and close every connection gracefully (ERROR[CONNECTION_CLOSE] once
        its open requests have finished), as a server shutting down does."""
        port, self.port = self.port, None
        await wait(port.stopListening())
        await wait(port.factory.close_connections(drain_timeout=5_000))
        protocols, self.protocols = self.protocols, []
        for _, lost in protocols:
            await wait(lost)

    async def stop(self) -> None:
        """Stop listening and drop every connection (no CONNECTION_CLOSE: a crash)."""
        if self.port is not None:
            port, self.port = self.port, None
            await wait(port.stopListening())
        protocols, self.protocols = self.protocols, []
        for proto, lost in protocols:
            if not lost.called and proto.transport is not None:
                proto.transport.abortConnection()
        for _, lost in protocols:
            await wait(lost)
        self.hold = False
        self.held = []  # their connections are gone: never answered


FAST = Backoff(initial_delay=5, max_delay=50, jitter=0.5)


@aio
async def test_loopback_in_flight_fails_gap_waits_and_the_restarted_server_serves_it() -> None:
    server = LoopbackServer("a")
    await server.start()
    rc = connect_reconnecting(server.url, reactor=reactor, backoff=FAST, wait_timeout=30_000)
    try:
        await wait(rc.when_connected())
        assert (await wait(rc.request_response(b"1"))).data == b"a:1"
        server.hold = True
        in_flight = rc.request_response(b"2")
        await server.when_held(1)
        lost = next_state(rc, ReconnectState.BACKING_OFF)
        await server.stop()
        with pytest.raises(ConnectionLostError):
            await wait(in_flight)
        await wait(lost)
        # during the gap: attempts are refused; the request waits
        during_gap = rc.request_response(b"3")
        stream = rc.request_stream(b"2")
        assert not during_gap.called and rc.rsocket is None
        await server.start()  # the same port
        assert (await wait(during_gap)).data == b"a:3"
        assert [p.data for p in await wait(stream.collect())] == [b"a:0", b"a:1"]
        assert rc.connections == 2
        assert server.handled == [b"1", b"3", b"2"]  # b"2" was never answered, never retried
    finally:
        await wait(rc.close())
        await server.stop()


@aio
async def test_loopback_a_request_with_the_server_down_fails_after_wait_timeout() -> None:
    server = LoopbackServer("a")
    await server.start()
    await server.stop()  # a port nobody listens on
    rc = ReconnectingRSocket(lambda: connect(server.url, reactor=reactor), reactor=reactor,
                             backoff=FAST, wait_timeout=50)
    refused = next_state(rc, ReconnectState.BACKING_OFF)
    rc.start()
    try:
        await refused
        with pytest.raises(NotConnectedError) as info:
            await wait(rc.request_response(b"1"))
        assert "50 ms (wait_timeout)" in str(info.value)
        assert "ConnectionRefusedError" in str(info.value)
    finally:
        await wait(rc.close())
