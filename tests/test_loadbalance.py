"""The load balancer (rsocket_tx.loadbalance): round robin and weighted choice, failed targets
dropped and brought back, the target list changed at run time, requests when no target is up;
with a Clock and fake connections, then (the acceptance test of issue 16 item 4) with several
real loopback servers stopped and restarted while requests run: every request either succeeds
with the right answer or fails with a reported error, and the counts add up.
"""

from __future__ import annotations

import random

import pytest
import pytest_twisted
from test_reconnect import Connector, LoopbackServer, failure_of, next_state
from twisted.internet import defer, reactor
from twisted.internet.task import Clock
from twisted_support import wait

from rsocket_tx import Payload
from rsocket_tx.core.errors import (
    ConnectionCloseError,
    ConnectionLostError,
    LocalProtocolError,
    RejectedError,
)
from rsocket_tx.core.errors import ConnectionError as RSocketConnectionError
from rsocket_tx.loadbalance import (
    STARTUP_PENALTY,
    LoadbalanceRSocket,
    LoadbalanceTarget,
    NoAvailableTargetError,
    RoundRobinStrategy,
    WeightedStats,
    WeightedStrategy,
)
from rsocket_tx.reconnect import Backoff, NotConnectedError, PendingStream, ReconnectState

aio = pytest_twisted.ensureDeferred

NO_JITTER = Backoff(initial_delay=100, max_delay=1000, jitter=0)


def balancer(keys=("a", "b", "c"), *, clock=None, **kw):
    """A balancer over fake targets: ``(lb, {key: Connector}, clock)``."""
    clock = Clock() if clock is None else clock
    connectors = {key: Connector() for key in keys}
    lb = LoadbalanceRSocket([LoadbalanceTarget(k, c) for k, c in connectors.items()],
                            reactor=clock, backoff=NO_JITTER, **kw)
    return lb, connectors, clock


def connect_all(connectors) -> dict:
    return {key: c.succeed() for key, c in connectors.items()}


def sent_to(rsockets) -> dict:
    return {key: [r[1] for r in rs.requests] for key, rs in rsockets.items()}



# ------------------------------------------------------------------- a strategy with a bug


class BrokenStrategy:
    def __init__(self) -> None:
        self.calls = 0

    def select(self, targets, now):
        self.calls += 1
        if self.calls % 2:
            raise RuntimeError("strategy bug")
        return "not a target"


@pytest.mark.logs_failure("the strategy raises on purpose",
                          match=r"strategy .* failed(.|\n)*(RuntimeError: strategy bug|"
                                r"ValueError: select\(\) must return one of the targets)")
def test_a_strategy_that_raises_is_logged_and_requests_go_round_robin() -> None:
    strategy = BrokenStrategy()
    lb, connectors, clock = balancer(("a", "b"), strategy=strategy, wait_timeout=1000)
    waiting = lb.request_response(b"waiting")  # no target yet: woken by the first connection
    rsockets = connect_all(connectors)
    for i in range(3):
        lb.request_response(b"%d" % i)
    assert sent_to(rsockets) == {"a": [b"waiting", b"1"], "b": [b"0", b"2"]}
    assert strategy.calls == 4
    rsockets["a"].requests[0][3].callback(Payload(b"ok"))
    assert waiting.result == Payload(b"ok")


# ------------------------------------------------------------------------ round robin


def test_round_robin_takes_the_connected_targets_in_turn() -> None:
    lb, connectors, clock = balancer()
    rsockets = connect_all(connectors)
    for i in range(30):
        lb.request_response(b"%d" % i)
    sent = sent_to(rsockets)
    assert {k: len(v) for k, v in sent.items()} == {"a": 10, "b": 10, "c": 10}
    assert sent["a"][:2] == [b"0", b"3"] and sent["b"][:2] == [b"1", b"4"]


def test_a_dropped_target_is_skipped_and_comes_back_when_it_reconnects() -> None:
    lb, connectors, clock = balancer()
    rsockets = connect_all(connectors)
    in_flight = lb.request_response(b"on-a")
    rsockets["a"].drop(ConnectionLostError("the transport closed"))
    # the request in flight on it fails with the connection error: not retried elsewhere
    assert isinstance(failure_of(in_flight), ConnectionLostError)
    assert [t.key for t in lb.available] == ["b", "c"]
    for i in range(10):
        lb.request_response(b"%d" % i)
    assert {k: len(rs.requests) for k, rs in rsockets.items()} == {"a": 1, "b": 5, "c": 5}
    # reconnected after the backoff delay: it takes requests again
    clock.advance(0.099)
    assert len(connectors["a"].attempts) == 1
    clock.advance(0.001)
    assert len(connectors["a"].attempts) == 2
    again = connectors["a"].succeed()
    for i in range(3):
        lb.request_response(b"%d" % i)
    assert len(again.requests) == 1 and [t.key for t in lb.available] == ["a", "b", "c"]


def test_with_no_target_up_a_request_waits_for_the_first_that_connects() -> None:
    lb, connectors, clock = balancer(wait_timeout=1000)
    d = lb.request_response(b"waiting")
    stream = lb.request_stream(b"s")
    assert isinstance(stream, PendingStream)
    rs = connectors["b"].succeed()
    assert [r[1] for r in rs.requests] == [b"waiting", b"s"]
    rs.requests[0][3].callback(Payload(b"ok"))
    assert d.result == Payload(b"ok")
    connectors["a"].succeed()
    connectors["c"].succeed()
    assert clock.getDelayedCalls() == []  # the wait timers are gone


def test_fire_and_forget_many_sends_the_whole_batch_to_one_target() -> None:
    lb, connectors, clock = balancer(wait_timeout=1000)
    waiting = lb.fire_and_forget_many(iter([b"1", b"2"]))  # no target yet: it waits
    rs = connect_all(connectors)
    assert waiting.called
    sent = lb.fire_and_forget_many([b"3", b"4", b"5"], route="r")
    assert sent.called
    where = {bytes(b"".join(r[1])): (key, r[0], r[2]) for key, one in rs.items()
             for r in one.requests}
    assert set(where) == {b"12", b"345"}  # each batch whole, on one target
    assert where[b"12"][1:] == ("fire_and_forget_many", {})
    assert where[b"345"][1:] == ("fire_and_forget_many", {"route": "r"})
    assert where[b"12"][0] != where[b"345"][0]  # round robin: the next batch, the next target


def test_with_no_target_up_a_request_fails_after_wait_timeout_naming_each_last_error() -> None:
    lb, connectors, clock = balancer(("a", "b"), wait_timeout=300)
    connectors["a"].refuse()
    d = lb.request_response(b"1")
    clock.advance(0.3)
    error = failure_of(d)
    assert isinstance(error, NoAvailableTargetError) and isinstance(error, NotConnectedError)
    assert isinstance(error, LocalProtocolError)  # nothing was sent
    assert "no target connected within 300 ms (wait_timeout)" in str(error)
    assert "a: ConnectionRefusedError" in str(error) and "b: none yet" in str(error)
    d = lb.metadata_push(b"m")
    clock.advance(0.3)
    assert isinstance(failure_of(d), NoAvailableTargetError)


def test_no_targets_and_zero_wait_fail_at_once() -> None:
    lb = LoadbalanceRSocket([], reactor=Clock(), wait_timeout=0)
    error = failure_of(lb.request_response(b"1"))
    assert "has no targets" in str(error)


def test_set_targets_connects_new_ones_closes_removed_ones_and_keeps_the_rest() -> None:
    lb, connectors, clock = balancer(("a", "b"))
    rsockets = connect_all(connectors)
    kept = lb.target("b").client
    extra = Connector()
    lb.set_targets([LoadbalanceTarget("b", connectors["b"]), LoadbalanceTarget("c", extra)])
    assert [t.key for t in lb.targets] == ["b", "c"]
    assert lb.target("b").client is kept and len(connectors["b"].attempts) == 1
    assert not rsockets["a"].is_open  # removed: closed
    assert len(extra.attempts) == 1  # added: connecting at once
    c = extra.succeed()
    for i in range(4):
        lb.request_response(b"%d" % i)
    assert len(rsockets["b"].requests) == 2 and len(c.requests) == 2 and \
        rsockets["a"].requests == []
    with pytest.raises(ValueError, match="same key|the key"):
        lb.set_targets([LoadbalanceTarget("x", extra), LoadbalanceTarget("x", extra)])
    with pytest.raises(ValueError, match="endpoint string"):
        lb.set_targets([42])


def test_targets_added_later_serve_the_requests_that_waited() -> None:
    lb = LoadbalanceRSocket([], reactor=Clock(), wait_timeout=1000)
    d = lb.request_response(b"early")
    connector = Connector()
    lb.set_targets([LoadbalanceTarget("late", connector)])
    rs = connector.succeed()
    assert [r[1] for r in rs.requests] == [b"early"]
    rs.requests[0][3].callback(Payload(b"late answer"))
    assert d.result == Payload(b"late answer")


def test_close_fails_the_waiting_requests_and_closes_every_target() -> None:
    lb, connectors, clock = balancer(("a", "b"))
    rs = connectors["a"].succeed()
    lb.target("a").client.rsocket.is_closing = True  # no target takes requests
    waiting = lb.request_response(b"1")
    done = lb.close()
    assert done.called and not rs.is_open
    assert "closed" in str(failure_of(waiting))
    with pytest.raises(NoAvailableTargetError, match="closed"):
        lb.request_response(b"2")
    assert lb.targets == [] and clock.getDelayedCalls() == []


def test_stream_counts_as_pending_until_it_ends() -> None:
    lb, connectors, clock = balancer(("a",))
    connect_all(connectors)
    stream = lb.request_stream(b"s")
    stats = lb.target("a").stats
    assert stats.pending == 1
    stream.ended = True
    assert stats.pending == 0


# ---------------------------------------------------------------------------- weighted


def test_weighted_stats_latency_ewma_pending_and_weight() -> None:
    stats = WeightedStats(latency_smoothing=0.5, availability_smoothing=0.5)
    assert stats.weight(0.0) == 1.0  # idle, no history
    token = stats.start(0.0)
    assert stats.pending == 1
    assert stats.predicted_latency(0.0) == STARTUP_PENALTY  # outstanding, no answer yet
    stats.stop(token, 0.010)  # 10 ms
    assert stats.latency == pytest.approx(10.0) and stats.samples == 1
    stats.stop(stats.start(1.0), 1.030)  # 30 ms: 10 + 0.5 * (30 - 10)
    assert stats.latency == pytest.approx(20.0)
    assert stats.weight(2.0) == pytest.approx(1.0 / (1 + 20.0 * 1))
    stats.start(2.0)
    stats.start(2.0)
    # two outstanding for 100 ms: the age wins over the EWMA
    assert stats.predicted_latency(2.1) == pytest.approx(100.0)
    assert stats.weight(2.1) == pytest.approx(1.0 / (1 + 100.0 * 3))
    bad = stats.start(2.1)
    stats.stop(bad, 2.2, connection_failed=True)
    assert stats.availability == 0.5 and stats.latency == pytest.approx(20.0)
    with pytest.raises(ValueError):
        WeightedStats(latency_smoothing=0)


class Fake:
    def __init__(self, key) -> None:
        self.key = key
        self.stats = WeightedStats()


def test_weighted_strategy_prefers_low_latency_and_few_outstanding() -> None:
    fast, slow = Fake("fast"), Fake("slow")
    fast.stats.stop(fast.stats.start(0.0), 0.005)
    slow.stats.stop(slow.stats.start(0.0), 0.050)
    strategy = WeightedStrategy(random=random.Random(1))
    assert strategy.select([slow, fast], 1.0) is fast
    for _ in range(20):  # outstanding requests: fast * (pending + 1) passes slow at 10
        fast.stats.start(1.0)
    assert strategy.select([slow, fast], 1.0) is slow
    # of three, the heavier of two random draws: the idle fast one wins every pair it is in,
    # and the slowest one is never taken
    a, b, c = Fake("a"), Fake("b"), Fake("c")
    for target, ms in ((a, 1), (b, 10), (c, 100)):
        target.stats.stop(target.stats.start(0.0), ms / 1000)
    picks = [strategy.select([a, b, c], 1.0).key for _ in range(300)]
    assert picks.count("c") == 0
    assert picks.count("a") > picks.count("b") > 0
    with pytest.raises(ValueError):
        WeightedStrategy(effort=0)


def test_weighted_balancer_sends_most_requests_to_the_fast_target() -> None:
    lb, connectors, clock = balancer(("fast", "slow"),
                                     strategy=WeightedStrategy(random=random.Random(7)))
    rsockets = connect_all(connectors)
    answer_after = {"fast": 0.005, "slow": 0.050}

    def answer(key, d):
        clock.callLater(answer_after[key], d.callback, Payload(b"ok"))

    results = []
    for i in range(200):
        lb.request_response(b"%d" % i).addCallback(results.append)
        for key, rs in rsockets.items():
            for _kind, _, _, d in rs.requests:
                if not d.called and not getattr(d, "scheduled", False):
                    d.scheduled = True
                    answer(key, d)
        clock.advance(0.002)
    clock.advance(1)
    assert len(results) == 200
    fast, slow = (len(rsockets[k].requests) for k in ("fast", "slow"))
    assert fast + slow == 200 and fast > 3 * slow > 0


def test_round_robin_strategy_alone() -> None:
    strategy = RoundRobinStrategy()
    targets = [Fake("a"), Fake("b")]
    assert [strategy.select(targets, 0).key for _ in range(5)] == ["a", "b", "a", "b", "a"]


# -------------------------------------------------- acceptance: real servers, stop and start


FAST = Backoff(initial_delay=5, max_delay=50, jitter=0.5)
#: what a request may fail with while servers go: its connection's error (crash), REJECTED
#: (sent as the server began a graceful close), CONNECTION_CLOSE (still open when it ended)
REPORTED = (RSocketConnectionError, ConnectionCloseError, RejectedError, NotConnectedError,
            LocalProtocolError)


async def started(*names: str) -> list[LoopbackServer]:
    servers = [LoopbackServer(name) for name in names]
    for server in servers:
        await server.start()
    return servers


def connected(lb: LoadbalanceRSocket, key: str) -> defer.Deferred:
    target = lb.target(key)
    if target.available:
        return defer.succeed(None)
    return next_state(target.client, ReconnectState.CONNECTED)


async def all_connected(lb: LoadbalanceRSocket) -> None:
    for target in lb.targets:
        await connected(lb, target.key)


async def round_robin_check(lb, servers, per_server: int, start: int) -> None:
    """``per_server * len(servers)`` requests made in one go: each server answers exactly
    ``per_server`` of them, each with its own name."""
    before = {s.name: len(s.handled) for s in servers}
    n = per_server * len(servers)
    answers = await wait(defer.gatherResults(
        [lb.request_response(b"%d" % i) for i in range(start, start + n)]))
    by_server: dict[str, int] = {}
    for i, payload in zip(range(start, start + n), answers, strict=True):
        name, data = payload.data.split(b":")
        assert data == b"%d" % i
        by_server[name.decode()] = by_server.get(name.decode(), 0) + 1
    assert by_server == {s.name: per_server for s in servers}
    assert {s.name: len(s.handled) - before[s.name] for s in servers} == \
        {s.name: per_server for s in servers}


@aio
async def test_round_robin_over_servers_stopped_and_restarted() -> None:
    servers = await started("s0", "s1", "s2")
    s0, s1, s2 = servers
    lb = LoadbalanceRSocket([s.url for s in servers], reactor=reactor, backoff=FAST,
                            wait_timeout=30_000)
    try:
        await all_connected(lb)
        # all up: exact distribution
        await round_robin_check(lb, servers, 10, 0)
        # s1 holds its requests; they are in flight when it crashes
        s1.hold = True
        requests = [lb.request_response(b"%d" % i) for i in range(100, 130)]
        await s1.when_held(10)
        dropped = next_state(lb.target(s1.url).client, ReconnectState.BACKING_OFF)
        await s1.stop()
        outcomes = await wait(defer.DeferredList(requests, consumeErrors=True))
        ok = [r for good, r in outcomes if good]
        failed = [r.value for good, r in outcomes if not good]
        assert len(ok) == 20 and len(failed) == 10  # total = requested
        assert all(isinstance(e, ConnectionLostError) for e in failed)
        assert {p.data.split(b":")[0] for p in ok} == {b"s0", b"s2"}
        await dropped
        # s1 is down (its reconnection attempts are refused): the other two share the load
        assert [t.key for t in lb.available] == [s0.url, s2.url]
        await round_robin_check(lb, [s0, s2], 20, 200)
        # restarted on the same port: it comes back and gets its share again
        await s1.start()
        await connected(lb, s1.url)
        await round_robin_check(lb, servers, 10, 300)
        assert b"115" not in s1.handled  # the requests that failed were not retried
    finally:
        await wait(lb.close())
        for server in servers:
            await server.stop()


async def run_while(lb, total: int, concurrency: int, events) -> dict:
    """Make ``total`` requests, ``concurrency`` at a time; ``events`` is a list of
    ``(completed, async callable)`` run when that many requests have completed (the requests
    go on meanwhile). Returns ``{i: ("ok", data) or ("error", exception)}``."""
    outcomes: dict = {}
    issued = 0
    marks = {n: defer.Deferred() for n, _ in events}

    async def worker() -> None:
        nonlocal issued
        while issued < total:
            i = issued
            issued += 1
            try:
                payload = await lb.request_response(b"%d" % i)
                outcomes[i] = ("ok", payload.data)
            except REPORTED as error:
                outcomes[i] = ("error", error)
            mark = marks.get(len(outcomes))
            if mark is not None and not mark.called:
                mark.callback(None)

    async def driver() -> None:
        for n, action in events:
            if len(outcomes) < n:
                await marks[n]
            await action()

    workers = [defer.ensureDeferred(worker()) for _ in range(concurrency)]
    await wait(defer.gatherResults([defer.ensureDeferred(driver()), *workers],
                                   consumeErrors=True), 60)
    return outcomes


@pytest.mark.parametrize("strategy", ["round-robin", "weighted"])
@aio
async def test_requests_running_while_servers_stop_and_start_are_all_accounted_for(
        strategy) -> None:
    servers = await started("s0", "s1", "s2")
    s0, s1, s2 = servers
    chosen = RoundRobinStrategy() if strategy == "round-robin" else \
        WeightedStrategy(random=random.Random(3))
    lb = LoadbalanceRSocket([s.url for s in servers], reactor=reactor, backoff=FAST,
                            wait_timeout=30_000, strategy=chosen)
    total = 600
    try:
        await all_connected(lb)

        async def crash_s1() -> None:
            await s1.stop()

        async def shut_s2_down() -> None:
            await s2.stop_gracefully()

        async def restart_s1() -> None:
            await s1.start()

        async def restart_s2() -> None:
            await s2.start()
            await connected(lb, s1.url)

        outcomes = await run_while(lb, total, 8, [
            (100, crash_s1), (200, shut_s2_down), (300, restart_s1), (400, restart_s2)])
        # every request is accounted for: answered right, or failed with a reported error
        assert sorted(outcomes) == list(range(total))
        ok = {i: data for i, (kind, data) in outcomes.items() if kind == "ok"}
        errors = [e for kind, e in outcomes.values() if kind == "error"]
        assert len(ok) + len(errors) == total
        handled = {s.name.encode(): set(s.handled) for s in servers}
        for i, data in ok.items():
            name, echoed = data.split(b":")
            assert echoed == b"%d" % i
            assert echoed in handled[name], f"{i} answered by {name} that did not handle it"
        # only the requests in flight on a crashing server may fail
        assert len(errors) <= 4 * 8, errors
        assert all(isinstance(e, REPORTED) for e in errors)
        # both restarted servers are back and take requests
        await all_connected(lb)
        if strategy == "round-robin":
            await round_robin_check(lb, servers, 5, total)
        else:
            answers = await wait(defer.gatherResults(
                [lb.request_response(b"x") for _ in range(30)]))
            assert all(p.data.endswith(b":x") for p in answers)
        assert s0.handled and s1.handled and s2.handled
    finally:
        await wait(lb.close())
        for server in servers:
            await server.stop()


@aio
async def test_set_targets_at_run_time_with_real_servers() -> None:
    servers = await started("s0", "s1", "s2")
    s0, s1, s2 = servers
    lb = LoadbalanceRSocket([s0.url, s1.url], reactor=reactor, backoff=FAST)
    try:
        await all_connected(lb)
        await round_robin_check(lb, [s0, s1], 5, 0)
        lb.set_targets([s1.url, s2.url])
        await all_connected(lb)
        await round_robin_check(lb, [s1, s2], 5, 100)
        # the removed target's connection is closed; s0 sees it go
        await wait(defer.gatherResults([lost for _, lost in s0.protocols]))
    finally:
        await wait(lb.close())
        for server in servers:
            await server.stop()
