"""The fault-injecting proxy of the fault tests (tests/faultproxy.py) does what it says: exact
cuts at offsets, frame boundaries and inside frames, half-open stalls, refused connections,
reproducible random plans."""

from __future__ import annotations

import pytest
import pytest_twisted
from faultproxy import BOUNDARY, C2S, EXACT, MID, S2C, CutPlan, FaultProxy, FrameTracker, RandomCuts
from hypothesis import given
from hypothesis import strategies as st
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted_support import wait

from rsocket_tx.core.framing import frame_with_length


def _frames(sizes):
    return [frame_with_length(bytes([i % 256]) * n) for i, n in enumerate(sizes)]


# ------------------------------------------------------------------------------ frame tracker

@given(st.lists(st.integers(0, 300), max_size=30), st.randoms(use_true_random=False))
def test_tracker_finds_every_boundary_whatever_the_chunking(sizes, rnd):
    frames = _frames(sizes)
    stream = b"".join(frames)
    expected = [0]
    for f in frames:
        expected.append(expected[-1] + len(f))
    t = FrameTracker()
    i = 0
    while i < len(stream):
        n = rnd.randint(1, 50)
        t.feed(stream[i:i + n])
        i += n
    assert t.seen == len(stream)
    assert t.boundaries == expected
    assert all(t.is_boundary(b) for b in expected)


def test_cut_plan_placement():
    t = FrameTracker()
    t.feed(b"".join(_frames([10, 10])))  # boundaries 0, 13, 26
    assert CutPlan(S2C, 13, EXACT).cut_offset(t) == 13
    assert CutPlan(S2C, 14, BOUNDARY).cut_offset(t) == 26
    assert CutPlan(S2C, 13, BOUNDARY).cut_offset(t) == 13
    assert CutPlan(S2C, 13, MID).cut_offset(t) == 14
    assert CutPlan(S2C, 20, MID).cut_offset(t) == 20
    assert CutPlan(S2C, 27, MID).cut_offset(t) is None
    assert CutPlan(S2C, 27, BOUNDARY).cut_offset(t) is None
    with pytest.raises(ValueError):
        CutPlan("sideways", 1)
    with pytest.raises(ValueError):
        CutPlan(S2C, 1, "somewhere")


def test_random_cuts_are_reproducible_and_cover_both_kinds():
    a = RandomCuts(1234, 4, 100, 5000)
    b = RandomCuts(1234, 4, 100, 5000)
    plans = [a(i) for i in range(6)]
    assert plans == [b(i) for i in range(6)]
    assert plans[4:] == [None, None]
    assert {p.where for p in plans[:4]} == {BOUNDARY, MID}
    assert all(100 <= p.offset <= 5000 for p in plans[:4])


# ------------------------------------------------------------------------------ over TCP

class _Peer(Protocol):
    """Records what arrives; ``lost`` fires on close."""

    def __init__(self) -> None:
        self.received = b""
        self.lost = defer.Deferred()
        self._want: list[tuple[int, defer.Deferred]] = []

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        for n, d in list(self._want):
            if len(self.received) >= n:
                self._want.remove((n, d))
                d.callback(self.received)

    def connectionLost(self, reason=None) -> None:
        self.lost.callback(None)

    def want(self, n: int) -> defer.Deferred:
        if len(self.received) >= n:
            return defer.succeed(self.received)
        d = defer.Deferred()
        self._want.append((n, d))
        return wait(d)


class _Server:
    def __init__(self) -> None:
        self.peers: list[_Peer] = []
        self.connected: list[defer.Deferred] = []
        factory = Factory()
        factory.buildProtocol = self._build
        self.port = reactor.listenTCP(0, factory, interface="127.0.0.1")

    def _build(self, addr):
        p = _Peer()
        self.peers.append(p)
        for d in self.connected:
            d.callback(p)
        self.connected = []
        return p

    def next_peer(self, n: int) -> defer.Deferred:
        if len(self.peers) >= n:
            return defer.succeed(self.peers[n - 1])
        d = defer.Deferred()
        self.connected.append(d)
        return wait(d)


async def _setup(**kw):
    server = _Server()
    proxy = FaultProxy(server.port.getHost().port, **kw)
    proxy.listen()
    client = _Peer()
    await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", proxy.port), client))
    await wait(proxy.current.linked)
    upstream = await server.next_peer(1)
    return server, proxy, client, upstream


async def _teardown(server, proxy, *peers):
    await proxy.close()
    for p in peers:
        if p.transport is not None:
            p.transport.abortConnection()
    for p in peers:
        await wait(p.lost)
    for p in server.peers:
        if not p.lost.called:
            p.transport.abortConnection()
            await wait(p.lost)
    await server.port.stopListening()


@pytest_twisted.ensureDeferred
async def test_forwards_both_ways():
    server, proxy, client, upstream = await _setup()
    data = b"".join(_frames([5, 70000, 1]))
    client.transport.write(data)
    assert await upstream.want(len(data)) == data
    upstream.transport.write(data[::-1])
    assert await client.want(len(data)) == data[::-1]
    conn = proxy.current
    assert conn.trackers[C2S].boundaries == [0, 8, 70011, 70015]
    assert conn.trackers[S2C].seen == len(data)
    client.transport.loseConnection()  # a normal close is passed on
    await wait(upstream.lost)
    await wait(conn.closed)
    await _teardown(server, proxy, client)


@pytest.mark.parametrize("where,offset,expect", [(EXACT, 20, 20), (BOUNDARY, 20, 26),
                                                 (MID, 13, 14)])
@pytest_twisted.ensureDeferred
async def test_cut_server_to_client(where, offset, expect):
    server, proxy, client, upstream = await _setup()
    proxy.current.cut_at(S2C, offset, where)
    data = b"".join(_frames([10, 10, 10]))  # boundaries 0, 13, 26, 39
    for i in range(len(data)):  # one byte per write: the cut lands inside a chunk or at its end
        upstream.transport.write(data[i:i + 1])
    await wait(client.lost)
    await wait(upstream.lost)
    assert client.received == data[:expect]  # exactly up to the cut, nothing after
    [cut] = proxy.cuts
    assert (cut.direction, cut.offset, cut.boundary) == (S2C, expect, where == BOUNDARY)
    await _teardown(server, proxy)


@pytest_twisted.ensureDeferred
async def test_cut_client_to_server_inside_a_big_chunk():
    server, proxy, client, upstream = await _setup()
    proxy.current.cut_at(C2S, 50_000, MID)
    data = b"".join(_frames([100_000]))
    client.transport.write(data)
    await wait(upstream.lost)
    await wait(client.lost)
    assert upstream.received == data[:50_000]
    assert proxy.cuts[0].boundary is False
    await _teardown(server, proxy)


@pytest_twisted.ensureDeferred
async def test_planned_cuts_apply_to_each_new_connection():
    plans = iter([CutPlan(S2C, 3, EXACT), None])
    server, proxy, client, upstream = await _setup(plan=lambda i: next(plans))
    upstream.transport.write(b"abcdef")
    await wait(client.lost)
    assert client.received == b"abc"
    client2 = _Peer()
    await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", proxy.port), client2))
    await wait(proxy.current.linked)
    upstream2 = await server.next_peer(2)
    upstream2.transport.write(b"abcdef")
    assert await client2.want(6) == b"abcdef"  # no plan for the second connection
    await _teardown(server, proxy, client2)


@pytest_twisted.ensureDeferred
async def test_stall_is_silent_half_open():
    server, proxy, client, upstream = await _setup()
    client.transport.write(b"before")
    await upstream.want(6)
    conn = proxy.current
    conn.stall()
    client.transport.write(b"x" * 1000)
    upstream.transport.write(b"y" * 1000)
    await wait(conn.wait_dropped(C2S, 1000))
    await wait(conn.wait_dropped(S2C, 1000))
    assert upstream.received == b"before" and client.received == b""
    assert not client.lost.called and not upstream.lost.called  # nobody was told
    await _teardown(server, proxy, client)


@pytest_twisted.ensureDeferred
async def test_new_connections_stalled_or_refused():
    server = _Server()
    proxy = FaultProxy(server.port.getHost().port)
    proxy.listen()
    proxy.new_connections = "refuse"
    refused = _Peer()
    await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", proxy.port), refused))
    await wait(refused.lost)
    proxy.stall_all()
    stalled = _Peer()
    await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", proxy.port), stalled))
    stalled.transport.write(b"hello?")
    await wait(proxy.current.wait_dropped(C2S, 6))
    assert server.peers == [] and not stalled.lost.called
    await _teardown(server, proxy, stalled)


def test_random_plans_depend_on_the_seed():
    assert RandomCuts(1, 5, 0, 10**6)(0) != RandomCuts(2, 5, 0, 10**6)(0)
