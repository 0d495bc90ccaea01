"""Keepalive and max lifetime against rsocket-java 1.1.5 (spec §Keepalive: a connection whose
peer sent nothing for its max lifetime is presumed dead), both directions, through the
fault-injecting proxy of the tests (``tests/faultproxy.py``): once KEEPALIVEs went both ways,
the proxy *stalls* the connection (half-open: it forwards nothing more and tells nobody), so
each side sees only silence.

* rsocket-java's ``KeepaliveClient`` (``keepAlive(KEEPALIVE, LIFETIME)``) against OUR SERVER
  (in-process ``serve``): our server closes the connection with :class:`ConnectionLostError`
  "no frame from the peer for LIFETIME ms (max lifetime)", the client's ``onClose()`` and its
  pending request fail with ``ConnectionErrorException`` "No keep-alive acks for LIFETIME
  ms".
* OUR CLIENT (``connect(keepalive_interval=KEEPALIVE, max_lifetime=LIFETIME)``) against
  rsocket-java's ``ReliabilityServer``: the same two detections, the other way round.
* rsocket-java's RESUME client against ``twistd rsocket --resume``: a stall in the middle of a
  stream is detected by its keepalive, and it resumes on a new connection: every item once,
  in order.

Each detection must come no earlier than LIFETIME after the last frame (ours: any frame;
rsocket-java: the last KEEPALIVE, the only frames it counts) the proxy forwarded to that side,
so it is max lifetime that closed the connection, and no later than LIFETIME + LATE seconds
after the stall (generous for a loaded machine).  Nothing sleeps.
"""

from __future__ import annotations

import time

import pytest
import pytest_twisted
import resume_peers
from test_resume_interop import Wire, fp, half_open
from twisted.internet import defer, reactor

from rsocket_tx import Payload, Responder, connect, serve
from rsocket_tx.core import errors as E
from rsocket_tx.core.frames import ResumeFrame, ResumeOkFrame

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("java_reliability_installed")]

#: keepalive interval and max lifetime both sides use, ms: a lifetime of 8 intervals, so a
#: loaded machine never misses enough KEEPALIVEs to close a live connection
KEEPALIVE = 500
LIFETIME = 4000
#: seconds any single wait may take
WAIT = 60
#: seconds of clock slack in the lower bounds (time.time() here, System.currentTimeMillis()
#: in the JVM)
SLACK = 0.05
#: seconds past max lifetime a detection may come (a check interval, and a loaded machine)
LATE = 15
CONNECTION_ERROR = 0x101
JAVA_TIMEOUT = {"code": CONNECTION_ERROR, "message": f"No keep-alive acks for {LIFETIME} ms",
                "class": "ConnectionErrorException"}
OUR_TIMEOUT = f"no frame from the peer for {LIFETIME} ms (max lifetime)"


def timed(d, timeout: float = WAIT) -> defer.Deferred:
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


class Clock(Wire):
    """A proxy observer: when (``time.time()``, s) the proxy last forwarded a frame, and a
    KEEPALIVE, in each direction (:data:`fp.C2S`, :data:`fp.S2C`); ``keepalives(direction,
    n)`` fires once ``n`` KEEPALIVEs went that way."""

    def __init__(self) -> None:
        super().__init__()
        self.last_frame = {fp.C2S: 0.0, fp.S2C: 0.0}
        self.last_keepalive = {fp.C2S: 0.0, fp.S2C: 0.0}
        self.count = {fp.C2S: 0, fp.S2C: 0}
        self._waiters: list[tuple[str, int, defer.Deferred]] = []

    def __call__(self, conn, direction: str, frame: bytes) -> None:
        super().__call__(conn, direction, frame)
        now = time.time()
        self.last_frame[direction] = now
        if frame[:4] == b"\x00\x00\x00\x00" and frame[4] >> 2 == 0x03:
            self.last_keepalive[direction] = now
            self.count[direction] += 1
            for waiter in list(self._waiters):
                if waiter[0] == direction and self.count[direction] >= waiter[1]:
                    self._waiters.remove(waiter)
                    waiter[2].callback(None)

    def keepalives(self, direction: str, n: int) -> defer.Deferred:
        if self.count[direction] >= n:
            return defer.succeed(None)
        d = defer.Deferred()
        self._waiters.append((direction, n, d))
        return d


class Echo(Responder):
    """``echo:<data>``; never answers ``hold``: the request rsocket-java holds open, which
    must fail with what closed its connection."""

    def request_response(self, payload):
        if payload.data == b"hold":
            return defer.Deferred()
        return Payload(b"echo:" + payload.data)


async def _stall_after_keepalives(proxy, clock: Clock) -> float:
    """Wait until the first proxied connection is up and 2 KEEPALIVEs went each way, then
    make it half-open (:func:`half_open`); returns when (``time.time()``, s)."""
    conn = await timed(proxy.wait_connections(1))
    await timed(conn.linked)
    await timed(clock.keepalives(fp.C2S, 2))
    await timed(clock.keepalives(fp.S2C, 2))
    half_open(conn)
    return time.time()


def _check_detected(at: float, last_seen: float, stalled: float) -> None:
    """A detection at ``at`` (s, epoch) of a link that went silent at ``stalled``, by a side
    that last heard from its peer at ``last_seen``: not before max lifetime had passed since
    then, and within max lifetime + :data:`LATE` of the stall."""
    assert at >= last_seen + LIFETIME / 1000 - SLACK, (at, last_seen)
    assert at - stalled <= LIFETIME / 1000 + LATE, (at, stalled)


@pytest_twisted.ensureDeferred
async def test_a_silent_link_is_detected_by_our_server_and_the_java_client():
    port = await serve("tcp:0:interface=127.0.0.1", Echo, reactor=reactor)
    clock = Clock()
    proxy = fp.FaultProxy(port.getHost().port, observer=clock)
    proxy.listen()
    try:
        result_d = resume_peers.run_java_keepalive_client_deferred(
            proxy.port, keepalive=KEEPALIVE, lifetime=LIFETIME, timeout=WAIT)
        stalled = await _stall_after_keepalives(proxy, clock)
        [session] = list(port.factory.connections)
        await timed(session.when_closed())
        _check_detected(time.time(), clock.last_frame[fp.C2S], stalled)
        assert isinstance(session.close_reason, E.ConnectionLostError)
        assert OUR_TIMEOUT in str(session.close_reason)
        result = await timed(result_d)
        assert result["ping"] == "echo:ping", result
        assert (result["exit_code"], result["error"]) == (1, JAVA_TIMEOUT), result
        assert result["close_error"] == JAVA_TIMEOUT, result  # onClose() says the same
        _check_detected(result["closed_at_ms"] / 1000, clock.last_keepalive[fp.S2C], stalled)
    finally:
        await proxy.close()
        await port.stopListening()


@pytest.fixture(scope="module")
def java_server():
    server = resume_peers.start_java_server(hold_client=True)
    yield server
    server.stop()


@pytest_twisted.ensureDeferred
async def test_a_silent_link_is_detected_by_our_client_and_the_java_server(java_server):
    clock = Clock()
    proxy = fp.FaultProxy(java_server.port, observer=clock)
    proxy.listen()
    try:
        rs = await timed(connect(proxy.endpoint, reactor=reactor, responder=Echo(),
                                 keepalive_interval=KEEPALIVE, max_lifetime=LIFETIME))
        assert await timed(rs.request_response(Payload(b"ping"))) == Payload(b"echo:ping")
        stalled = await _stall_after_keepalives(proxy, clock)
        await timed(rs.closed)
        _check_detected(time.time(), clock.last_frame[fp.S2C], stalled)
        assert isinstance(rs.close_reason, E.ConnectionLostError)
        assert OUR_TIMEOUT in str(rs.close_reason)
        setup = await timed(java_server.wait_event_deferred("setup", timeout=WAIT))
        assert (setup["keepalive_interval"], setup["lifetime"]) == (KEEPALIVE, LIFETIME)
        hold = await timed(java_server.wait_event_deferred("hold", timeout=WAIT, n=setup["n"]))
        assert hold["error"] == JAVA_TIMEOUT, hold
        _check_detected(hold["at_ms"] / 1000, clock.last_keepalive[fp.C2S], stalled)
        closed = await timed(java_server.wait_event_deferred("closed", timeout=WAIT,
                                                             n=setup["n"]))
        assert closed["error"] == JAVA_TIMEOUT, closed  # onClose() says the same
    finally:
        await proxy.close()


class StallAt(Clock):
    """:class:`Clock` that makes the proxy's first connection half-open once ``offset`` bytes
    went server to client, and then aborts the server's side of it: the client is left with
    a silent connection, the server with none."""

    def __init__(self, offset: int) -> None:
        super().__init__()
        self.offset = offset
        self.stalled_at: float | None = None

    def __call__(self, conn, direction: str, frame: bytes) -> None:
        super().__call__(conn, direction, frame)
        if conn.index == 0 and self.stalled_at is None and \
                conn.trackers[fp.S2C].seen >= self.offset:
            half_open(conn)
            self.stalled_at = time.time()
            conn.up.transport.abortConnection()


@pytest.fixture(scope="module")
def our_resume_server(our_server_class):
    server = our_server_class("--resume", "--responder",
                              "tests.interop.responders:InteropResponder",
                              name="twistd rsocket --resume (InteropResponder)")
    yield server
    server.stop_and_check()


@pytest_twisted.ensureDeferred
async def test_the_java_client_resumes_after_a_silent_link(our_resume_server):
    """A request-stream of 20,000 items; after 30,000 bytes its connection goes silent for the
    client (our server's side is closed, so our session waits detached: the resume is not a
    takeover, see test_resume_interop): rsocket-java's keepalive notices within max lifetime
    and resumes on a new connection."""
    count = 20_000
    clock = StallAt(30_000)
    proxy = fp.FaultProxy(our_resume_server.port, observer=clock)
    proxy.listen()
    try:
        result_d = resume_peers.run_java_resume_client_deferred(
            proxy.port, "request-stream", count=count, keepalive=KEEPALIVE, lifetime=LIFETIME,
            timeout=WAIT)
        await timed(proxy.wait_connections(2))
        assert clock.stalled_at is not None
        _check_detected(time.time(), clock.last_keepalive[fp.S2C], clock.stalled_at)
        result = await timed(result_d)
        assert result["exit_code"] == 0, result
        assert (result["received"], result["in_order"], result["completed"]) == \
            (count, True, True), result
        assert proxy.connections[0].state == "stalled"
        resumes = clock.of(ResumeFrame)
        assert [i for i, _, _ in resumes][:1] == [1], resumes
        assert [i for i, _, _ in clock.of(ResumeOkFrame)][:1] == [1]
    finally:
        await proxy.close()
