"""Resumption against rsocket-js 1.0.0-alpha.3 and rsocket-java 1.1.5 (spec §Resuming
Operation), both directions, through the fault-injecting proxy of the tests
(``tests/faultproxy.py``).

* OUR CLIENT (``connect(resume=True)``, in-process) against the js RESUME SERVER
  (``resume_peers.start_js_resume_server``): a request-stream and a request-channel of 10,000
  items survive seeded random cuts (frame boundaries and inside frames) with every item once,
  in order; a js server that does not know the session answers our RESUME with
  ERROR[REJECTED_RESUME], which fails our streams with :class:`RejectedResumeError`.
* The js RESUME CLIENT (``resume_peers.run_js_resume_client``) against OUR SERVER
  (``twistd rsocket --resume``): the same two interactions survive the same cuts; its RESUME
  frames say version 0.1 (major and minor swapped) and are accepted. After our session
  expired (``serve(resume_session_timeout=...)``, in-process) its RESUME gets
  ERROR[REJECTED_RESUME].

rsocket-java 1.1.5 (``peers/java-reliability``, ``resume_peers.start_java_server`` /
``run_java_resume_client``), the same both ways: our client against its ``RSocketServer
.resume(..)`` and its ``RSocketConnector.resume(..)`` client against ``twistd rsocket
--resume``, 10,000 items through the same cuts, every item once and in order, RESUME version
1.0 both ways; its server answers a RESUME for a session it never saw with
ERROR[REJECTED_RESUME] "unknown resume token"; its client retries refused reconnections and
ends its session when our expired session rejects its RESUME (reporting only a closed
channel). A RESUME that takes over a session whose old transport our server still holds
(half-open) found an rsocket_tx bug, fixed since (see the test).

Wire facts about the js resume implementation: ``peers/README.md``, "Resume"; about
rsocket-java's: ``peers/java-reliability/README.md``. Nothing sleeps: the peer programs run in
threads (``deferToThread``) while the reactor serves.
"""

from __future__ import annotations

import os

import pytest
import pytest_twisted
import resume_peers
from twisted.internet import defer, reactor

from rsocket_tx import Payload, Responder, connect, serve
from rsocket_tx.core import errors as E
from rsocket_tx.core.frames import ErrorFrame, ResumeFrame, ResumeOkFrame, decode

pytestmark = pytest.mark.interop

N = 10_000
SEED = int(os.environ.get("RSOCKET_TX_FAULT_SEED", "1").split(",")[0])
WAIT = 90  # seconds any single wait may take (a bug shows up as a failure, not a hang)
INTEROP_RESPONDER = "tests.interop.responders:InteropResponder"
#: the resumed interactions, both ways
BOTH_INTERACTIONS = pytest.mark.parametrize("interaction", ["request-stream", "request-channel"])


def _faultproxy():
    import sys
    from pathlib import Path

    tests = str(Path(__file__).resolve().parents[1])
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import faultproxy

    return faultproxy


fp = _faultproxy()


def timed(d, timeout: float = WAIT) -> defer.Deferred:
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


class Wire:
    """The connection-level frames the proxy forwarded: (connection, direction, frame)."""

    def __init__(self) -> None:
        self.frames: list[tuple[int, str, object]] = []

    def __call__(self, conn, direction: str, frame: bytes) -> None:
        if frame[:4] == b"\x00\x00\x00\x00" and frame[4] >> 2 in (0x0B, 0x0D, 0x0E):
            self.frames.append((conn.index, direction, decode(frame)))

    def of(self, kind) -> list:
        return [(i, d, f) for i, d, f in self.frames if isinstance(f, kind)]


def half_open(conn) -> None:
    """Stall ``conn`` (:meth:`fp.ProxiedConnection.stall`) so that it stays half-open even when
    one peer closes its side: ``stall()`` leaves the two proxy transports registered as each
    other's producers, and Twisted stops (closes) a transport's producer when the transport
    is lost, so a peer that gave up would close the other peer's connection too (reported to
    the coordinator; harmless once ``stall()`` unregisters them itself)."""
    conn.stall()
    for side in (conn.down, conn.up):
        side.transport.unregisterProducer()


def _plan(interaction: str, count: int = 4) -> fp.RandomCuts:
    # a stream's client-to-server side carries only REQUEST_N: cut the other way
    directions = (fp.S2C,) if interaction == "request-stream" else (fp.C2S, fp.S2C)
    return fp.RandomCuts(SEED, count, 1000, 15000, directions=directions)


def _cutting_proxy(port: int, interaction: str) -> tuple[Wire, fp.RandomCuts, fp.FaultProxy]:
    """A listening proxy to 127.0.0.1:``port`` cutting connections as :func:`_plan` says, and
    the :class:`Wire` observing it."""
    wire = Wire()
    plan = _plan(interaction)
    proxy = fp.FaultProxy(port, plan=plan, observer=wire)
    proxy.listen()
    return wire, plan, proxy


def _describe(proxy) -> str:
    return f"seed {SEED}, cuts " + str([(c.index, c.direction, c.offset, c.boundary)
                                        for c in proxy.cuts])


@pytest.fixture(scope="module")
def js_resume_server():
    server = resume_peers.start_js_resume_server()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def java_resume_server(java_reliability_installed):
    server = resume_peers.start_java_server(resume=True)
    yield server
    server.stop()


# ------------------------------------------------------------------ our client, peer servers


async def _our_client_resumes(port: int, interaction: str) -> None:
    """Our client (``connect(resume=True)``) runs ``interaction`` of :data:`N` items through a
    proxy to 127.0.0.1:``port`` that cuts as :func:`_plan` says: every item once, in order,
    one RESUME (version 1.0) per new connection, each answered by RESUME_OK, no ERROR."""
    wire, plan, proxy = _cutting_proxy(port, interaction)
    rs = None
    try:
        rs = await timed(connect(proxy.endpoint, reactor=reactor, resume=True,
                                 reconnect_initial_delay=0, keepalive_interval=100,
                                 max_lifetime=30_000))
        if interaction == "request-stream":
            stream = rs.request_stream(Payload(b"%d" % N), prefetch=256)
        else:
            outbound = (Payload(b"%d" % i) for i in range(1, N))
            stream = rs.request_channel(Payload(b"0"), outbound, prefetch=256)
        got = [p.data for p in await timed(stream.collect())]
        assert got == [b"%d" % i for i in range(N)], _describe(proxy)
        assert len(proxy.cuts) == plan.count, _describe(proxy)
        assert rs._protocol.resumes >= plan.count
        resumes = wire.of(ResumeFrame)
        assert len(resumes) == rs._protocol.resumes
        assert all((f.major_version, f.minor_version) == (1, 0) for _, _, f in resumes)
        assert len(wire.of(ResumeOkFrame)) == len(resumes)
        assert wire.of(ErrorFrame) == []
    finally:
        if rs is not None:
            await timed(rs._protocol.close())
        await proxy.close()


@BOTH_INTERACTIONS
@pytest_twisted.ensureDeferred
async def test_our_client_resumes_against_the_js_server(js_resume_server, interaction):
    await _our_client_resumes(js_resume_server.port, interaction)


@BOTH_INTERACTIONS
@pytest_twisted.ensureDeferred
async def test_our_client_resumes_against_the_java_server(java_resume_server, interaction):
    await _our_client_resumes(java_resume_server.port, interaction)
    done = "stream_done" if interaction == "request-stream" else "channel_done"
    event = await timed(java_resume_server.wait_event_deferred(done, timeout=WAIT))
    assert event.get("sent", event.get("echoed")) == N


async def _rejected_by_a_server_without_the_session(server, other, message: str) -> None:
    """Our client resumes from ``server`` to ``other`` (a second server of the same peer that
    never saw the session): our stream fails with :class:`RejectedResumeError` (``message``)
    and so does the connection."""
    proxy = fp.FaultProxy(server.port)
    proxy.listen()
    try:
        rs = await timed(connect(proxy.endpoint, reactor=reactor, resume=True,
                                 reconnect_initial_delay=0))
        stream = rs.request_stream(Payload(b"1000000"), prefetch=8)  # left unconsumed
        await timed(proxy.current.linked)
        proxy.target_port = other.port  # the next connection reaches a server that never
        proxy.current.cut_now()         # saw this session
        with pytest.raises(E.RejectedResumeError, match=message):
            await timed(stream.collect())
        assert isinstance(rs.close_reason, E.RejectedResumeError)
    finally:
        await proxy.close()
        await timed(defer.maybeDeferred(other.stop))


@pytest_twisted.ensureDeferred
async def test_a_js_server_without_the_session_rejects_our_resume(js_resume_server):
    other = await timed(resume_peers.start_js_resume_server_deferred())
    await _rejected_by_a_server_without_the_session(js_resume_server, other, "No session found")


@pytest_twisted.ensureDeferred
async def test_a_java_server_without_the_session_rejects_our_resume(java_resume_server):
    other = await timed(resume_peers.start_java_server_deferred(resume=True))
    await _rejected_by_a_server_without_the_session(java_resume_server, other,
                                                    "unknown resume token")


# ------------------------------------------------------------------ js client, our server


@pytest.fixture(scope="module")
def our_resume_server(our_server_class):
    server = our_server_class("--resume", "--responder", INTEROP_RESPONDER,
                              name="twistd rsocket --resume (InteropResponder)")
    yield server
    server.stop_and_check()


async def _peer_client_resumes(server_port: int, interaction: str, run_client,
                               version: tuple[int, int]) -> None:
    """``run_client(proxy_port, interaction, count=N, timeout=60)`` (a Deferred of a resume
    client's result) through a proxy to our server at ``server_port`` that cuts as
    :func:`_plan` says: all N items once, in order, completed; every cut followed by a RESUME
    (``(major, minor)`` = ``version``) that our server answered with RESUME_OK."""
    wire, plan, proxy = _cutting_proxy(server_port, interaction)
    try:
        result = await timed(run_client(proxy.port, interaction, count=N, timeout=60))
        assert result["exit_code"] == 0, (result, _describe(proxy))
        assert (result["received"], result["in_order"], result["completed"]) == \
            (N, True, True), (result, _describe(proxy))
        assert len(proxy.cuts) == plan.count, _describe(proxy)
        resumes = wire.of(ResumeFrame)
        assert len(resumes) >= plan.count
        assert {(f.major_version, f.minor_version) for _, _, f in resumes} == {version}
        oks = wire.of(ResumeOkFrame)
        assert [i for i, _, _ in oks] == [i for i, _, _ in resumes[:len(oks)]]
        assert len(oks) >= plan.count
    finally:
        await proxy.close()


@BOTH_INTERACTIONS
@pytest_twisted.ensureDeferred
async def test_the_js_client_resumes_against_our_server(our_resume_server, interaction):
    # rsocket-js writes major and minor swapped (0.1); we accept it
    await _peer_client_resumes(our_resume_server.port, interaction,
                               resume_peers.run_js_resume_client_deferred, (0, 1))


@BOTH_INTERACTIONS
@pytest_twisted.ensureDeferred
async def test_the_java_client_resumes_against_our_server(java_reliability_installed,
                                                          our_resume_server, interaction):
    await _peer_client_resumes(our_resume_server.port, interaction,
                               resume_peers.run_java_resume_client_deferred, (1, 0))


class Endless(Responder):
    def request_stream(self, payload):
        return (Payload(b"%d" % i) for i in range(10**9))


async def _short_session_behind_a_cut(responder):
    """Our resumable server whose sessions expire 200 ms after their transport is lost, behind
    a fault proxy that cuts the first connection mid-frame after 20,000 bytes towards the
    client: ``(port, wire, proxy)``; the caller closes both."""
    port = await serve("tcp:0:interface=127.0.0.1", responder, reactor=reactor, resume=True,
                       resume_session_timeout=200)
    wire = Wire()
    proxy = fp.FaultProxy(port.getHost().port, observer=wire,
                          plan={0: fp.CutPlan(fp.S2C, 20_000, fp.MID)}.get)
    proxy.listen()
    return port, wire, proxy


@pytest_twisted.ensureDeferred
async def test_the_js_client_is_rejected_after_our_session_expired():
    port, wire, proxy = await _short_session_behind_a_cut(Endless)
    try:
        # the js client reconnects 2 s after the cut, our session expires 0.2 s after it. (A
        # connection refused or stalled during its RESUME handshake would hang the js client
        # for good: peers/README.md, Resume, fact 16.)
        result_d = resume_peers.run_js_resume_client_deferred(
            proxy.port, "request-stream", count=10**9, request_n=64, reconnect_delay=2000,
            timeout=30)
        first = await timed(proxy.wait_connections(1))
        await timed(first.linked)
        [session] = list(port.factory.connections)
        await timed(first.closed)
        await timed(session.when_closed())
        assert len(proxy.connections) == 1, "the js client came back before our session expired"
        assert isinstance(session.close_reason, E.ConnectionLostError)
        result = await timed(result_d)
        assert result["exit_code"] == 1 and result["completed"] is False, result
        # js answers our ERROR[REJECTED_RESUME] with its own CONNECTION_ERROR and ends the
        # session with that, not with the code we sent (peers/README.md, Resume, fact 13)
        assert "Incomplete RESUME handshake. Unexpected frame 11" in \
            result["error"]["message"], result
        rejected = [f for _, d, f in wire.of(ErrorFrame) if d == fp.S2C]
        assert [f.error_code for f in rejected] == [E.ErrorCode.REJECTED_RESUME]
        assert b"no resumable session" in rejected[0].data
        versions = {(f.major_version, f.minor_version) for _, _, f in wire.of(ResumeFrame)}
        assert versions == {(0, 1)}
    finally:
        await proxy.close()
        await port.stopListening()


@pytest_twisted.ensureDeferred
async def test_the_java_client_is_rejected_after_our_session_expired(java_reliability_installed):
    """rsocket-java retries a refused reconnection (``Retry.fixedDelay``); once our session
    expired its RESUME gets ERROR[REJECTED_RESUME] and its session ends (but what its
    application sees is a closed channel, not the rejection)."""
    responders: list[Endless] = []

    def responder() -> Endless:
        responders.append(Endless())
        return responders[-1]

    port, wire, proxy = await _short_session_behind_a_cut(responder)
    try:
        result_d = resume_peers.run_java_resume_client_deferred(
            proxy.port, "request-stream", count=10**9, request_n=64, reconnect_delay=1000,
            timeout=30)
        first = await timed(proxy.wait_connections(1))
        await timed(first.linked)
        proxy.new_connections = "refuse"  # its reconnections fail until our session expired
        await timed(first.closed)  # cut after 20,000 bytes of the stream
        [endless] = responders
        session = endless.rsocket._protocol
        await timed(session.when_closed())
        assert isinstance(session.close_reason, E.ConnectionLostError)
        proxy.new_connections = "forward"
        result = await timed(result_d)
        assert result["exit_code"] == 1 and result["completed"] is False, repr(result)
        assert result["reconnect_attempts"] >= 1, repr(result)
        refused = [c for c in proxy.connections if c.index > 0 and c.trackers[fp.C2S].seen == 0]
        assert len(proxy.connections) >= 3 and refused, "no reconnection was refused"
        # the last connection carried its RESUME (1.0) and our ERROR[REJECTED_RESUME]; the
        # client then gave up (no further connection)
        rejected = [(i, f) for i, d, f in wire.of(ErrorFrame) if d == fp.S2C]
        assert [(i, f.error_code) for i, f in rejected] == \
            [(proxy.connections[-1].index, E.ErrorCode.REJECTED_RESUME)]
        assert b"no resumable session" in rejected[0][1].data
        resumes = wire.of(ResumeFrame)
        assert [i for i, _, _ in resumes] == [proxy.connections[-1].index]
        assert {(f.major_version, f.minor_version) for _, _, f in resumes} == {(1, 0)}
        # rsocket-java 1.1.5 drops the rejection: the stream fails with the requester's
        # ClosedChannelException, onClose() completes without an error
        # (peers/java-reliability/README.md)
        assert result["error"] == {"code": None, "message": "null",
                                   "class": "ClosedChannelException"}, repr(result)
        assert result["close_error"] is None, repr(result)
    finally:
        await proxy.close()
        await port.stopListening()


@pytest_twisted.ensureDeferred
async def test_the_java_client_resumes_while_our_server_holds_the_silent_connection(
        java_reliability_installed, our_resume_server):
    """After 30,000 bytes of a 20,000-item stream the connection goes half-open and the
    client's side is closed: rsocket-java reconnects at once and resumes while our server
    still holds the old, silent connection (its max lifetime is 30 s away): our server must
    take the session over and go on.  (This found a bug, fixed since: the old transport, aborted
    on the takeover, still had the session as its producer, and its end paused every outbound
    stream of the resumed session for good.)"""
    count = 20_000
    done: list = []

    def observer(conn, direction: str, frame: bytes) -> None:
        if conn.index == 0 and not done and conn.trackers[fp.S2C].seen >= 30_000:
            done.append(conn)
            half_open(conn)
            conn.down.transport.abortConnection()

    wire = Wire()
    proxy = fp.FaultProxy(our_resume_server.port,
                          observer=lambda *args: (wire(*args), observer(*args)))
    proxy.listen()
    try:
        result = await timed(resume_peers.run_java_resume_client_deferred(
            proxy.port, "request-stream", count=count, timeout=20))
        assert done and proxy.connections[0].state == "stalled"
        assert [i for i, _, _ in wire.of(ResumeOkFrame)] == [1]
        assert result["exit_code"] == 0, repr(result)
        assert (result["received"], result["in_order"], result["completed"]) == \
            (count, True, True), repr(result)
    finally:
        await proxy.close()
