"""Load balancing: :class:`LoadbalanceRSocket` spreads requests over several servers (what
rsocket-java users know as ``LoadbalanceRSocketClient`` with ``RoundRobinLoadbalanceStrategy``
or ``WeightedLoadbalanceStrategy``).

Each target (an endpoint string or URI, or a :class:`LoadbalanceTarget` with a connect
callable) gets its own :class:`~rsocket_tx.reconnect.ReconnectingRSocket`: a target whose
connection fails or is lost is **dropped** from the choice at once and reconnected with
backoff in the background; it **comes back** when it connects again. Each request goes to one
target that is connected now, chosen by the strategy:

* :class:`RoundRobinStrategy` (the default): the connected targets in turn, in the order of
  the target list; with every target up, N requests over k targets give each exactly N/k
  (when k divides N);
* :class:`WeightedStrategy`: rsocket-java's weighted strategy, simplified: each target has a
  weight ``availability / (1 + latency * (pending + 1))`` from its measured request-response
  latency (an EWMA, milliseconds), its outstanding requests and open streams (``pending``) and
  its recent connection failures (``availability``, an EWMA of 1 for a success and 0 for a
  connection error); of two targets drawn at random ("power of two choices") the heavier wins.

A request made when no target is connected waits for the first one to connect, up to
``wait_timeout`` milliseconds, then fails with :class:`NoAvailableTargetError` (naming the
timeout and each target's last error). A request in flight on a target whose connection drops
fails with the connection's error and is **not** retried on another target (the server may have
acted on it): the caller decides.

The target list can change at run time (:meth:`LoadbalanceRSocket.set_targets`): new targets
are connected, removed ones take no new requests and are closed gracefully (their open
streams may finish, up to ``drain_timeout``).

Example::

    from rsocket_tx.loadbalance import LoadbalanceRSocket, WeightedStrategy

    balancer = LoadbalanceRSocket(["tcp://10.0.0.1:7878", "tcp://10.0.0.2:7878"],
                                  strategy=WeightedStrategy())
    response = await balancer.request_response(b"hello")
    balancer.set_targets(["tcp://10.0.0.2:7878", "tcp://10.0.0.3:7878"])
"""

from __future__ import annotations

import dataclasses
import random as _random
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol, TypeVar

from twisted.internet.defer import Deferred, fail, gatherResults
from twisted.logger import Logger
from twisted.python.failure import Failure

from .core.errors import ConnectionCloseError
from .core.errors import ConnectionError as RSocketConnectionError
from .reconnect import (
    DEFAULT_CONNECT_TIMEOUT,
    DEFAULT_WAIT_TIMEOUT,
    Backoff,
    NotConnectedError,
    PendingStream,
    ReconnectingRSocket,
    ReconnectState,
    check_milliseconds,
    describe_error,
)

__all__ = [
    "DEFAULT_EFFORT",
    "DEFAULT_LATENCY_SMOOTHING",
    "LoadbalanceRSocket",
    "LoadbalanceStrategy",
    "LoadbalanceTarget",
    "NoAvailableTargetError",
    "PooledTarget",
    "RoundRobinStrategy",
    "WeightedStats",
    "WeightedStrategy",
]

log = Logger(namespace="rsocket_tx.loadbalance")

_T = TypeVar("_T")

#: Weight of a new latency sample in the EWMA (0..1]: ``ewma += alpha * (sample - ewma)``.
DEFAULT_LATENCY_SMOOTHING = 0.25
#: Weight of a new success (1) or connection failure (0) in the availability EWMA.
DEFAULT_AVAILABILITY_SMOOTHING = 0.2
#: Random draws of two distinct targets the weighted strategy makes looking for two available
#: ones (rsocket-java's ``effort``).
DEFAULT_EFFORT = 5
#: Milliseconds of latency assumed for a target with requests outstanding but no response yet
#: (rsocket-java's startup penalty): a new target gets one request until it has answered.
STARTUP_PENALTY = 1e12


class NoAvailableTargetError(NotConnectedError):
    """A request was **not sent**: no target was connected within ``wait_timeout`` (or the
    balancer has no targets, or is closed). The message names each target's last error."""


class LoadbalanceTarget(NamedTuple):
    """A target given by a connect callable (rsocket-java's ``LoadbalanceTarget``).

    :param key: the target's name; targets are the same target when their keys are equal
        (:meth:`LoadbalanceRSocket.set_targets` compares keys).
    :param connect: zero-argument callable returning a Deferred of a connected
        :class:`~rsocket_tx.requester.RSocket`.
    """

    key: str
    connect: Callable[[], Deferred[Any]]


class WeightedStats:
    """What the weighted strategy knows of one target: latency EWMA, outstanding requests,
    open streams, availability (no I/O; time passed in, seconds of the reactor's clock).

    :param latency_smoothing: weight of a new latency sample (0..1].
    :param availability_smoothing: weight of a new success/failure sample (0..1].
    :raises ValueError: a weight out of (0, 1].
    """

    __slots__ = ("latency", "availability", "_alpha", "_beta", "_starts", "_next", "_streams",
                 "samples")

    def __init__(self, latency_smoothing: float = DEFAULT_LATENCY_SMOOTHING,
                 availability_smoothing: float = DEFAULT_AVAILABILITY_SMOOTHING) -> None:
        for name, value in (("latency_smoothing", latency_smoothing),
                            ("availability_smoothing", availability_smoothing)):
            if not 0 < value <= 1:
                raise ValueError(f"{name} must be in (0, 1], got {value!r}")
        self._alpha = latency_smoothing
        self._beta = availability_smoothing
        #: the latency EWMA in milliseconds, None before the first response
        self.latency: float | None = None
        #: EWMA of 1 (a response) and 0 (a connection error), in [0, 1]
        self.availability = 1.0
        #: latency samples taken
        self.samples = 0
        self._starts: dict[int, float] = {}
        self._next = 0
        self._streams: list[Any] = []

    def start(self, now: float) -> int:
        """A request-response was sent at ``now`` (seconds). :returns: its token."""
        token = self._next
        self._next += 1
        self._starts[token] = now
        return token

    def stop(self, token: int, now: float, *, connection_failed: bool = False) -> None:
        """The request ``token`` ended at ``now``: a response or a stream error (a latency
        sample, availability 1), or a connection error (availability 0, no sample)."""
        started = self._starts.pop(token, None)
        if started is None:
            return
        if connection_failed:
            self.availability += self._beta * (0.0 - self.availability)
            return
        self.availability += self._beta * (1.0 - self.availability)
        sample = max(0.0, (now - started) * 1000)
        self.samples += 1
        if self.latency is None:
            self.latency = sample
        else:
            self.latency += self._alpha * (sample - self.latency)

    def add_stream(self, stream: Any) -> None:
        """A stream or channel (with an ``ended`` property) was opened on the target."""
        self._streams.append(stream)

    @property
    def pending(self) -> int:
        """Outstanding request-responses plus open streams."""
        streams = self._streams
        if streams:
            streams[:] = [s for s in streams if not _ended(s)]
        return len(self._starts) + len(streams)

    def predicted_latency(self, now: float) -> float:
        """Milliseconds: the EWMA, or the age of the oldest outstanding request if that is
        longer (a stalled server loses weight before it answers); with no sample yet, 0 when
        idle, else :data:`STARTUP_PENALTY`."""
        if self.latency is None:
            latency = 0.0 if self.pending == 0 else STARTUP_PENALTY
        else:
            latency = self.latency
        if self._starts:
            oldest = min(self._starts.values())
            latency = max(latency, (now - oldest) * 1000)
        return latency

    def weight(self, now: float) -> float:
        """``availability / (1 + latency * (pending + 1))``: higher is better."""
        return self.availability / (1.0 + self.predicted_latency(now) * (self.pending + 1))


def _ended(stream: Any) -> bool:
    inner = getattr(stream, "stream", None)  # DecodedStream / PendingStream wrap one
    if inner is not None:
        stream = inner
    ended = getattr(stream, "ended", None)
    return bool(ended) if ended is not None else False


class PooledTarget:
    """One target of a :class:`LoadbalanceRSocket`: its key, its reconnecting client and its
    statistics.

    :ivar key: the target's key (the endpoint string, or :attr:`LoadbalanceTarget.key`).
    :ivar client: its :class:`~rsocket_tx.reconnect.ReconnectingRSocket`.
    :ivar stats: its :class:`WeightedStats`.
    """

    __slots__ = ("key", "client", "stats")

    def __init__(self, key: str, client: ReconnectingRSocket, stats: WeightedStats) -> None:
        self.key = key
        self.client = client
        self.stats = stats

    @property
    def available(self) -> bool:
        """True while the target is connected and takes requests."""
        return self.client.is_open

    def __repr__(self) -> str:
        return f"<PooledTarget {self.key!r} {self.client.state.value}>"


class LoadbalanceStrategy(Protocol):
    """Chooses the target of each request (rsocket-java's ``LoadbalanceStrategy``)."""

    def select(self, targets: Sequence[PooledTarget], now: float) -> PooledTarget:
        """One of ``targets`` (the connected ones, in target-list order, never empty);
        ``now`` is the reactor's time in seconds."""
        ...  # pragma: no cover


class RoundRobinStrategy:
    """The connected targets in turn (rsocket-java's ``RoundRobinLoadbalanceStrategy``): the
    n-th request goes to ``targets[n % len(targets)]``."""

    __slots__ = ("_next",)

    def __init__(self) -> None:
        self._next = 0

    def select(self, targets: Sequence[PooledTarget], now: float) -> PooledTarget:
        index = self._next % len(targets)
        self._next = (self._next + 1) % (1 << 30)
        return targets[index]


class WeightedStrategy:
    """By weight (rsocket-java's ``WeightedLoadbalanceStrategy``; see
    :meth:`WeightedStats.weight`): one target is taken; of two, the heavier (the first on a
    tie); of more, two distinct ones are drawn at random (up to ``effort`` times, until both
    have availability > 0) and the heavier is taken.

    :param effort: draws looking for two available targets (default 5, >= 1).
    :param random: a :class:`random.Random` (seed it for repeatable choices); None: a new one.
    :raises ValueError: ``effort`` < 1.
    """

    __slots__ = ("effort", "_random")

    def __init__(self, *, effort: int = DEFAULT_EFFORT,
                 random: _random.Random | None = None) -> None:
        if not isinstance(effort, int) or effort < 1:
            raise ValueError(f"effort must be an integer >= 1, got {effort!r}")
        self.effort = effort
        self._random = _random.Random() if random is None else random

    def select(self, targets: Sequence[PooledTarget], now: float) -> PooledTarget:
        size = len(targets)
        if size == 1:
            return targets[0]
        if size == 2:
            first, second = targets
        else:
            draw = self._random.randrange
            for _ in range(self.effort):
                i = draw(size)
                j = draw(size - 1)
                if j >= i:
                    j += 1
                first, second = targets[i], targets[j]
                if first.stats.availability > 0 and second.stats.availability > 0:
                    break
        if first.stats.weight(now) < second.stats.weight(now):
            return second
        return first


def _is_connection_error(failure: Failure) -> bool:
    return bool(failure.check(RSocketConnectionError, ConnectionCloseError, NotConnectedError))


class LoadbalanceRSocket:
    """A requester over several targets (see the module docstring for the rules).

    The request methods are those of :class:`~rsocket_tx.requester.RSocket`, with the same
    arguments passed through to the chosen target's connection.

    :param targets: the initial targets: endpoint strings or URIs (as
        :func:`rsocket_tx.connect` takes them; the string is the key), or
        :class:`LoadbalanceTarget` objects.
    :param strategy: a :class:`LoadbalanceStrategy`; None: :class:`RoundRobinStrategy`.
        If its ``select`` raises (or returns no target it was given), the failure is logged
        with its traceback and that request goes to the next target in round-robin order.
    :param reactor: the ``IReactorTime`` for delays, timeouts and latency; None: the global
        reactor.
    :param wait_timeout: milliseconds a request made while no target is connected waits for
        one (default 10,000; 0: fail at once).
    :param backoff: the reconnection delays of every target
        (:class:`~rsocket_tx.core.resume.Backoff`; None: its defaults; ``max_attempts`` is
        ignored: a target is retried for as long as it is in the list).
    :param connect_timeout: milliseconds one connection attempt may take (default 10,000).
    :param drain_timeout: milliseconds a removed target's open streams get before its
        connection is closed (None: the connection's setting).
    :param random: ``callable() -> float`` for the reconnection jitter; None: ``random.random``.
    :param connect_options: keyword arguments of :func:`rsocket_tx.connect` for the targets
        given as strings (``setup_payload``, ``metadata_mime_type``, ``auth``, settings ...).
    :raises ValueError: a setting out of range, or two targets with the same key.
    """

    def __init__(self, targets: Iterable[str | LoadbalanceTarget] = (), *,
                 strategy: LoadbalanceStrategy | None = None, reactor: Any = None,
                 wait_timeout: int = DEFAULT_WAIT_TIMEOUT, backoff: Backoff | None = None,
                 connect_timeout: int = DEFAULT_CONNECT_TIMEOUT,
                 drain_timeout: int | None = None,
                 random: Callable[[], float] | None = None, **connect_options: Any) -> None:
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = global_reactor
        self.reactor = reactor
        self.strategy: LoadbalanceStrategy = RoundRobinStrategy() if strategy is None \
            else strategy
        self._fallback = RoundRobinStrategy()  # when the strategy fails
        backoff = Backoff() if backoff is None else backoff
        if backoff.max_attempts is not None:
            backoff = dataclasses.replace(backoff, max_attempts=None)
        self.backoff = backoff
        check_milliseconds("wait_timeout", wait_timeout)
        check_milliseconds("connect_timeout", connect_timeout)
        if drain_timeout is not None:
            check_milliseconds("drain_timeout", drain_timeout)
        self.wait_timeout = wait_timeout
        self.connect_timeout = connect_timeout
        self.drain_timeout = drain_timeout
        self._random = random
        self._connect_options = connect_options
        self._targets: dict[str, PooledTarget] = {}
        self._draining: list[Deferred[None]] = []
        self._waiters: list[tuple[Deferred[PooledTarget], Any]] = []
        self._closed = False
        self.set_targets(targets)

    # -- targets ---------------------------------------------------------------------------

    @property
    def targets(self) -> list[PooledTarget]:
        """Every target, in list order (connected or not)."""
        return list(self._targets.values())

    @property
    def available(self) -> list[PooledTarget]:
        """The targets connected now, in list order: those requests go to."""
        return [t for t in self._targets.values() if t.client.is_open]

    def target(self, key: str) -> PooledTarget:
        """The target named ``key``. :raises KeyError: no such target."""
        return self._targets[key]

    def set_targets(self, targets: Iterable[str | LoadbalanceTarget]) -> None:
        """Make ``targets`` the target list: targets not in it before are connected (at
        once), those no longer in it take no new requests and are closed gracefully (their
        open streams get ``drain_timeout``); those in both keep their connection.

        :param targets: endpoint strings/URIs or :class:`LoadbalanceTarget` objects.
        :raises ValueError: two targets share a key, or a target is neither.
        :raises NotConnectedError: the balancer is closed.
        """
        if self._closed:
            raise NoAvailableTargetError("the load balancer is closed")
        wanted: dict[str, LoadbalanceTarget] = {}
        for item in targets:
            spec = self._spec(item)
            if spec.key in wanted:
                raise ValueError(f"two targets have the key {spec.key!r}")
            wanted[spec.key] = spec
        for key in [k for k in self._targets if k not in wanted]:
            self._remove(self._targets.pop(key))
        new = {}
        for key, spec in wanted.items():
            target = self._targets.get(key)
            if target is None:
                client = ReconnectingRSocket(
                    spec.connect, reactor=self.reactor, backoff=self.backoff, wait_timeout=0,
                    connect_timeout=self.connect_timeout, random=self._random, name=key)
                target = PooledTarget(key, client, WeightedStats())
                client.add_observer(self._state_changed)
            new[key] = target
        old, self._targets = self._targets, new
        for key, target in new.items():
            if key not in old:
                log.info("target {key} added", key=key)
                target.client.start()

    def _spec(self, item: str | LoadbalanceTarget) -> LoadbalanceTarget:
        if isinstance(item, LoadbalanceTarget):
            return item
        if isinstance(item, str):
            from .client import connect

            reactor, options = self.reactor, self._connect_options

            def open_connection() -> Deferred[Any]:
                return connect(item, reactor=reactor, **options)

            return LoadbalanceTarget(item, open_connection)
        raise ValueError(f"a target is an endpoint string or a LoadbalanceTarget, got "
                         f"{item!r:.80}")

    def _remove(self, target: PooledTarget) -> None:
        log.info("target {key} removed", key=target.key)
        target.client.remove_observer(self._state_changed)
        d = target.client.close(self.drain_timeout)
        self._draining.append(d)
        d.addBoth(self._drained, d)

    def _drained(self, result: _T, d: Deferred[None]) -> _T:
        if d in self._draining:
            self._draining.remove(d)
        return result

    def _state_changed(self, client: ReconnectingRSocket, state: ReconnectState) -> None:
        if state is ReconnectState.CONNECTED:
            self._wake()

    # -- choosing --------------------------------------------------------------------------

    def _pick(self) -> PooledTarget | None:
        """The strategy's choice among the connected targets (None: none is). A strategy
        that raises, or chooses something else than one of them, is logged and round-robin
        chooses instead: a bug in it must not stop the requests."""
        available = self.available
        if not available:
            return None
        try:
            target = self.strategy.select(available, self.reactor.seconds())
            if not any(target is t for t in available):
                raise ValueError(f"select() must return one of the targets it was given, "
                                 f"got {target!r:.80}")
        except Exception:  # noqa: BLE001
            log.failure("the load-balancing strategy {strategy!r} failed; choosing "
                        "round-robin", strategy=self.strategy)
            target = self._fallback.select(available, self.reactor.seconds())
        return target

    def _wake(self) -> None:
        while self._waiters:
            target = self._pick()
            if target is None:
                return
            d, call = self._waiters.pop(0)
            if call.active():
                call.cancel()
            d.callback(target)

    def when_available(self, timeout: int | None = None) -> Deferred[PooledTarget]:
        """A Deferred firing with the :class:`PooledTarget` the strategy chooses: now if a
        target is connected, else once one connects.

        :param timeout: milliseconds to wait (None: :attr:`wait_timeout`; 0: do not wait).
        :returns: the Deferred; it fails with :class:`NoAvailableTargetError` when no target
            connects in time or the balancer is closed; ``cancel()`` stops the wait.
        """
        if self._closed:
            return fail(NoAvailableTargetError("the load balancer is closed"))
        target = self._pick()
        if target is not None:
            d: Deferred[PooledTarget] = Deferred()
            d.callback(target)
            return d
        timeout = self.wait_timeout if timeout is None else timeout
        if timeout == 0:
            return fail(self._no_target(0))
        entry: list[Any] = []

        def cancel(d: Deferred[PooledTarget]) -> None:
            if tuple(entry) in self._waiters:
                self._waiters.remove((entry[0], entry[1]))
            if entry[1].active():
                entry[1].cancel()

        d = Deferred(cancel)
        call = self.reactor.callLater(timeout / 1000, self._expire, entry, timeout)
        entry[:] = [d, call]
        self._waiters.append((d, call))
        return d

    def _expire(self, entry: list[Any], timeout: int) -> None:
        pair = (entry[0], entry[1])
        if pair in self._waiters:
            self._waiters.remove(pair)
            entry[0].errback(Failure(self._no_target(timeout)))

    def _no_target(self, timeout: int | None) -> NoAvailableTargetError:
        if not self._targets:
            why = "the load balancer has no targets"
        elif timeout == 0:
            why = "no target is connected and wait_timeout is 0"
        else:
            why = f"no target connected within {timeout} ms (wait_timeout)"
        errors = "; ".join(f"{t.key}: {describe_error(t.client.last_error)}"
                           for t in self._targets.values())
        message = f"{why}; last connection errors: {errors}" if errors else why
        return NoAvailableTargetError(message, timeout=timeout)

    def _check_open(self) -> None:
        if self._closed:
            raise NoAvailableTargetError("the load balancer is closed")

    # -- the requester API -----------------------------------------------------------------

    def _measured(self, target: PooledTarget, d: Deferred[Any]) -> Deferred[Any]:
        """Record the latency and outcome of request-response ``d`` on ``target``."""
        stats, seconds = target.stats, self.reactor.seconds
        token = stats.start(seconds())

        def done(result: Any) -> Any:
            failed = isinstance(result, Failure) and _is_connection_error(result)
            stats.stop(token, seconds(), connection_failed=failed)
            return result

        return d.addBoth(done)

    def _request_response(self, target: PooledTarget, payload: Any,
                          options: Any) -> Deferred[Any]:
        return self._measured(target, target.client.request_response(payload, **options))

    def request_response(self, payload: Any, **options: Any) -> Deferred[Any]:
        """Request-response on one target (see
        :meth:`RSocket.request_response <rsocket_tx.requester.RSocket.request_response>`).

        :returns: Deferred firing with the response, or failing with the responder's error,
            the target's connection error if it drops while the request is in flight (not
            retried elsewhere), or :class:`NoAvailableTargetError` (nothing sent).
        :raises NoAvailableTargetError: the balancer is closed.
        """
        self._check_open()
        target = self._pick()
        if target is not None:
            return self._request_response(target, payload, options)
        return self.when_available().addCallback(self._request_response, payload, options)

    def fire_and_forget(self, payload: Any, **options: Any) -> Deferred[None]:
        """Fire-and-forget on one target (see
        :meth:`RSocket.fire_and_forget <rsocket_tx.requester.RSocket.fire_and_forget>`);
        waits for a target as :meth:`request_response` does.

        :raises NoAvailableTargetError: the balancer is closed.
        """
        self._check_open()
        target = self._pick()
        if target is not None:
            return target.client.fire_and_forget(payload, **options)
        return self.when_available().addCallback(
            lambda t: t.client.fire_and_forget(payload, **options))

    def fire_and_forget_many(self, payloads: Iterable[Any], **options: Any) -> Deferred[None]:
        """Fire-and-forget each of ``payloads``, in order, all on one target (see
        :meth:`RSocket.fire_and_forget_many
        <rsocket_tx.requester.RSocket.fire_and_forget_many>`); waits for a target as
        :meth:`request_response` does.

        :param payloads: an iterable of Payloads or values (taken whole at the call).
        :raises NoAvailableTargetError: the balancer is closed.
        """
        self._check_open()
        batch = list(payloads)
        target = self._pick()
        if target is not None:
            return target.client.fire_and_forget_many(batch, **options)
        return self.when_available().addCallback(
            lambda t: t.client.fire_and_forget_many(batch, **options))

    def metadata_push(self, metadata: bytes) -> Deferred[None]:
        """METADATA_PUSH to one target (as rsocket-java's balancer does; see
        :meth:`RSocket.metadata_push <rsocket_tx.requester.RSocket.metadata_push>`).

        :raises TypeError: ``metadata`` is not bytes.
        :raises NoAvailableTargetError: the balancer is closed.
        """
        if not isinstance(metadata, bytes):
            raise TypeError(f"metadata must be bytes, got {type(metadata).__name__}")
        self._check_open()
        target = self._pick()
        if target is not None:
            return target.client.metadata_push(metadata)
        return self.when_available().addCallback(lambda t: t.client.metadata_push(metadata))

    def _open(self, target: PooledTarget, open_stream: Callable[[Any], Any]) -> Any:
        stream = open_stream(target.client)
        target.stats.add_stream(stream)
        return stream

    def request_stream(self, payload: Any, **options: Any) -> Any:
        """Request-stream on one target (see
        :meth:`RSocket.request_stream <rsocket_tx.requester.RSocket.request_stream>`).

        :returns: the stream; when no target is connected, a
            :class:`~rsocket_tx.reconnect.PendingStream` opening on the first one to connect.
        :raises NoAvailableTargetError: the balancer is closed.
        """
        return self._stream(lambda client: client.request_stream(payload, **options))

    def request_channel(self, payload: Any, outbound: Any = None, **options: Any) -> Any:
        """Request-channel on one target (see
        :meth:`RSocket.request_channel <rsocket_tx.requester.RSocket.request_channel>`);
        returns as :meth:`request_stream` does.

        :raises NoAvailableTargetError: the balancer is closed.
        """
        return self._stream(lambda client: client.request_channel(payload, outbound, **options))

    def _stream(self, open_stream: Callable[[Any], Any]) -> Any:
        self._check_open()
        target = self._pick()
        if target is not None:
            return self._open(target, open_stream)
        return PendingStream(self.when_available(),
                             lambda target: self._open(target, open_stream))

    # -- closing ---------------------------------------------------------------------------

    def close(self, drain_timeout: int | None = None) -> Deferred[None]:
        """Close every target gracefully; requests waiting for a target fail with
        :class:`NoAvailableTargetError`, later ones raise it.

        :param drain_timeout: milliseconds the open streams get (None: the balancer's
            ``drain_timeout``, else the connections' setting).
        :returns: Deferred firing with None once every connection (including removed
            targets still draining) is gone.
        """
        if not self._closed:
            self._closed = True
            waiters, self._waiters = self._waiters, []
            for d, call in waiters:
                if call.active():
                    call.cancel()
                d.errback(Failure(NoAvailableTargetError("the load balancer is closed")))
            timeout = self.drain_timeout if drain_timeout is None else drain_timeout
            targets, self._targets = self._targets, {}
            for target in targets.values():
                target.client.remove_observer(self._state_changed)
                self._draining.append(target.client.close(timeout))
        return gatherResults(list(self._draining), consumeErrors=True).addCallback(
            lambda _: None)
