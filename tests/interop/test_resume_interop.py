"""Resumption against rsocket-js 1.0.0-alpha.3 (spec §Resuming Operation), both directions,
through the fault-injecting proxy of the tests (``tests/faultproxy.py``).

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

Wire facts about the js resume implementation: ``peers/README.md``, "Resume". Nothing sleeps:
the js programs run in threads (``deferToThread``) while the reactor serves.
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


# ------------------------------------------------------------------ our client, js server


@BOTH_INTERACTIONS
@pytest_twisted.ensureDeferred
async def test_our_client_resumes_against_the_js_server(js_resume_server, interaction):
    wire, plan, proxy = _cutting_proxy(js_resume_server.port, interaction)
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


@pytest_twisted.ensureDeferred
async def test_a_js_server_without_the_session_rejects_our_resume(js_resume_server):
    other = await timed(resume_peers.start_js_resume_server_deferred())
    proxy = fp.FaultProxy(js_resume_server.port)
    proxy.listen()
    try:
        rs = await timed(connect(proxy.endpoint, reactor=reactor, resume=True,
                                 reconnect_initial_delay=0))
        stream = rs.request_stream(Payload(b"1000000"), prefetch=8)  # left unconsumed
        await timed(proxy.current.linked)
        proxy.target_port = other.port  # the next connection reaches a server that never
        proxy.current.cut_now()         # saw this session
        with pytest.raises(E.RejectedResumeError, match="No session found"):
            await timed(stream.collect())
        assert isinstance(rs.close_reason, E.RejectedResumeError)
    finally:
        await proxy.close()
        await timed(defer.maybeDeferred(other.stop))


# ------------------------------------------------------------------ js client, our server


@pytest.fixture(scope="module")
def our_resume_server(our_server_class):
    server = our_server_class("--resume", "--responder", INTEROP_RESPONDER,
                              name="twistd rsocket --resume (InteropResponder)")
    yield server
    server.stop_and_check()


@BOTH_INTERACTIONS
@pytest_twisted.ensureDeferred
async def test_the_js_client_resumes_against_our_server(our_resume_server, interaction):
    wire, plan, proxy = _cutting_proxy(our_resume_server.port, interaction)
    try:
        result = await timed(resume_peers.run_js_resume_client_deferred(
            proxy.port, interaction, count=N, timeout=60))
        assert result["exit_code"] == 0, (result, _describe(proxy))
        assert (result["received"], result["in_order"], result["completed"]) == \
            (N, True, True), (result, _describe(proxy))
        assert len(proxy.cuts) == plan.count, _describe(proxy)
        resumes = wire.of(ResumeFrame)
        assert len(resumes) >= plan.count
        # rsocket-js writes major and minor swapped; we accept it
        assert {(f.major_version, f.minor_version) for _, _, f in resumes} == {(0, 1)}
        oks = wire.of(ResumeOkFrame)
        assert [i for i, _, _ in oks] == [i for i, _, _ in resumes[:len(oks)]]
        assert len(oks) >= plan.count
    finally:
        await proxy.close()


class Endless(Responder):
    def request_stream(self, payload):
        return (Payload(b"%d" % i) for i in range(10**9))


@pytest_twisted.ensureDeferred
async def test_the_js_client_is_rejected_after_our_session_expired():
    port = await serve("tcp:0:interface=127.0.0.1", Endless, reactor=reactor, resume=True,
                       resume_session_timeout=200)
    wire = Wire()
    proxy = fp.FaultProxy(port.getHost().port, observer=wire,
                          plan={0: fp.CutPlan(fp.S2C, 20_000, fp.MID)}.get)
    proxy.listen()
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
