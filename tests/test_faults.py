"""Fault tests on real TCP: a proxy (tests/faultproxy.py) between client and server cuts the
connection at random points, at frame boundaries and inside frames, or goes silent.

* With resume on, a request-stream and a request-channel of 10,000 items each survive several
  cuts: every item arrives exactly once, in order (and on the channel the server gets every
  item once, in order, too).
* A half-open connection (the proxy stops forwarding and tells nobody) is detected within the
  max lifetime: without resume outstanding requests fail with a clear error; with resume the
  client resumes on a new connection; with resume but no way through, it gives up after its
  resume session timeout.
* With resume off, a cut fails every outstanding request promptly (well before max lifetime).

The cuts are random but seeded (``RSOCKET_TX_FAULT_SEED`` overrides the seeds): a failure
names its seed and the cuts made, so it can be replayed. Nothing sleeps: tests wait on
Deferreds with a safety timeout.
"""

from __future__ import annotations

import os

import pytest
import pytest_twisted
from faultproxy import BOUNDARY, C2S, MID, S2C, CutPlan, FaultProxy, RandomCuts
from twisted.internet import defer, reactor
from twisted_support import RecordingChannelResponder, wait

from rsocket_tx import Payload, connect, serve
from rsocket_tx.core import errors as E

N = 10_000
#: the seeds of the random cuts (one test run per seed)
SEEDS = [int(s) for s in os.environ.get("RSOCKET_TX_FAULT_SEED", "1,2").split(",")]
#: generous upper bound for a whole 10,000-item run with its cuts (a bug shows as a timeout)
RUN_TIMEOUT = 60


class Recorder(RecordingChannelResponder):
    """A stream of N items b"0".."N-1" (data = b"N"); a channel echo recording its inbound
    items in ``inbound``; request-response and streams that never answer (``b"hang"``)."""

    def request_response(self, payload):
        return defer.Deferred()  # never answers

    def request_stream(self, payload):
        if payload.data == b"hang":
            return defer.Deferred()  # the stream source never arrives
        return (Payload(b"%d" % i) for i in range(int(payload.data)))


class Rig:
    """Server, proxy and client; closed in :meth:`close`."""

    def __init__(self) -> None:
        self.server_log: list[bytes] = []
        self.port = None
        self.proxy: FaultProxy | None = None
        self.rsocket = None

    async def start(self, *, resume: bool, plan=None, **client_kw):
        self.port = await serve("tcp:0:interface=127.0.0.1", lambda: Recorder(self.server_log),
                                reactor=reactor, resume=resume)
        self.proxy = FaultProxy(self.port.getHost().port, plan=plan)
        self.proxy.listen()
        # (a long max lifetime: a busy machine must not add detaches of its own to the cuts)
        kw = dict(reactor=reactor, resume=resume, keepalive_interval=500, max_lifetime=20_000)
        if resume:
            kw["reconnect_initial_delay"] = 0
        kw.update(client_kw)
        self.rsocket = await wait(connect(self.proxy.endpoint, **kw))
        return self.rsocket

    def describe(self, seed=None) -> str:
        cuts = [(c.index, c.direction, c.offset, "boundary" if c.boundary else "mid")
                for c in self.proxy.cuts]
        return f"seed {seed}, cuts {cuts}"

    async def close(self) -> None:
        if self.rsocket is not None:
            await wait(self.rsocket._protocol.close())
        if self.proxy is not None:
            await self.proxy.close()
        if self.port is not None:
            for proto in list(self.port.factory.connections):
                proto.close()
            await self.port.stopListening()


@pytest_twisted.async_yield_fixture
async def rig():
    r = Rig()
    yield r
    await r.close()


async def _items(stream, timeout: float = RUN_TIMEOUT) -> list[bytes]:
    return [p.data for p in await wait(stream.collect(), timeout)]


def _check_cuts(rig: Rig, plan: RandomCuts, seed: int) -> None:
    """Every planned cut happened, both kinds among them, and each was resumed."""
    why = rig.describe(seed)
    assert len(rig.proxy.cuts) == plan.count, why
    assert {c.boundary for c in rig.proxy.cuts} == {True, False}, why
    assert rig.rsocket.resumes >= plan.count, why


# ---------------------------------------------------------------------------- with resume


@pytest.mark.parametrize("seed", SEEDS)
@pytest_twisted.ensureDeferred
async def test_stream_of_10000_survives_random_cuts(rig, seed):
    # the stream's data flows server to client (about 130 KB): cut that way, within it
    plan = RandomCuts(seed, 6, 1000, 15000, directions=(S2C,))
    rs = await rig.start(resume=True, plan=plan)
    got = await _items(rs.request_stream(Payload(b"%d" % N), prefetch=256))
    assert got == [b"%d" % i for i in range(N)], rig.describe(seed)
    _check_cuts(rig, plan, seed)


@pytest.mark.parametrize("seed", SEEDS)
@pytest_twisted.ensureDeferred
async def test_channel_of_10000_survives_random_cuts(rig, seed):
    plan = RandomCuts(seed, 6, 1000, 15000, directions=(C2S, S2C))
    rs = await rig.start(resume=True, plan=plan)
    outbound = (Payload(b"%d" % i) for i in range(1, N))
    got = await _items(rs.request_channel(Payload(b"0"), outbound, prefetch=256))
    expected = [b"%d" % i for i in range(N)]
    assert got == expected, rig.describe(seed)
    assert rig.server_log == expected, rig.describe(seed)  # the server got each one once
    _check_cuts(rig, plan, seed)


@pytest_twisted.ensureDeferred
async def test_cuts_at_a_chosen_boundary_and_inside_a_frame(rig):
    plans = {0: CutPlan(S2C, 5000, BOUNDARY), 1: CutPlan(S2C, 3000, MID)}
    rs = await rig.start(resume=True, plan=plans.get)
    got = await _items(rs.request_stream(Payload(b"%d" % N), prefetch=64))
    assert got == [b"%d" % i for i in range(N)]
    cuts = [(c.index, c.offset >= 5000 if c.index == 0 else c.offset == 3000, c.boundary)
            for c in rig.proxy.cuts]
    assert cuts == [(0, True, True), (1, True, False)]
    assert rs.resumes == 2


async def _first_items(stream, n: int) -> list[bytes]:
    got = []
    async for payload in stream:
        got.append(payload.data)
        if len(got) == n:
            return got
    return got


@pytest_twisted.ensureDeferred
async def test_half_open_with_resume_is_detected_and_resumed(rig):
    rs = await rig.start(resume=True, keepalive_interval=100, max_lifetime=600)
    stream = rs.request_stream(Payload(b"%d" % N), prefetch=64)
    first = await wait(_first_items(stream, 10))
    stalled = rig.proxy.current
    stalled.stall()  # silently: neither side is told
    await wait(rs.resumed)
    rest = await _items(stream)
    assert first + rest == [b"%d" % i for i in range(N)]
    assert rig.proxy.connections.index(stalled) < len(rig.proxy.connections) - 1


@pytest_twisted.ensureDeferred
async def test_half_open_with_resume_but_no_way_through_gives_up(rig):
    rs = await rig.start(resume=True, keepalive_interval=100, max_lifetime=500,
                         resume_session_timeout=1500)
    stream = rs.request_stream(Payload(b"hang"), prefetch=8)
    response = rs.request_response(Payload(b"x"))
    await wait(rig.proxy.current.linked)
    rig.proxy.stall_all()  # this connection and every new one: nothing gets through
    with pytest.raises(E.ConnectionLostError, match="not resumed within 1500 ms"):
        await wait(response)
    with pytest.raises(E.ConnectionLostError, match="not resumed within 1500 ms"):
        await _items(stream)
    assert len(rig.proxy.connections) > 1  # it did try to reconnect


# ------------------------------------------------------------------------- without resume


@pytest_twisted.ensureDeferred
async def test_half_open_without_resume_fails_requests_within_max_lifetime(rig):
    rs = await rig.start(resume=False, keepalive_interval=100, max_lifetime=500)
    stream = rs.request_stream(Payload(b"%d" % N), prefetch=8)
    first = await wait(_first_items(stream, 8))
    response = rs.request_response(Payload(b"x"))
    rig.proxy.current.stall()
    with pytest.raises(E.ConnectionLostError, match=r"no frame from the peer for 500 ms "
                                                    r"\(max lifetime\)"):
        await wait(response)
    with pytest.raises(E.ConnectionLostError, match="max lifetime"):
        await _items(stream)
    assert first == [b"%d" % i for i in range(8)]
    assert rs.close_reason is not None


@pytest_twisted.ensureDeferred
async def test_cut_without_resume_fails_every_outstanding_request_promptly(rig):
    # max lifetime is 10 minutes: a prompt failure can only come from noticing the cut
    rs = await rig.start(resume=False, keepalive_interval=60_000, max_lifetime=600_000)
    stream = rs.request_stream(Payload(b"hang"), prefetch=8)
    outbound = defer.Deferred()  # a channel whose outbound never produces
    channel = rs.request_channel(Payload(b"c"), outbound, prefetch=8)
    response = rs.request_response(Payload(b"x"))
    await wait(rig.proxy.current.linked)
    await wait(_first_items(channel, 1))  # the echo of the first payload: all are open
    rig.proxy.current.cut_now()
    for outstanding in (response, _items(stream, 10), _items(channel, 10)):
        with pytest.raises(E.ConnectionLostError):
            await wait(outstanding, 10)
    with pytest.raises(E.LocalProtocolError):
        rs.request_response(Payload(b"after"))
