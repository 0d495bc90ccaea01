"""A fault-injecting TCP proxy for tests, in process, on the Twisted reactor.

It sits between an RSocket client and a server (``client -> proxy -> target``) and forwards
bytes both ways, keeping count of the bytes and of the RSocket frame boundaries (24-bit length
prefixes) of each direction, so that a test can

* **cut** a connection when a direction reaches a chosen byte offset: exactly there, at the
  next frame boundary, or inside a frame. The side that was receiving gets exactly the bytes
  up to the offset and then a clean close (FIN); the other side is aborted (RST). Whatever was
  in flight either way is lost, as when a network path dies.
* **stall** a connection (half-open): it stays open both ways but nothing more is forwarded;
  data is read and dropped. Neither peer is told.
* decide what happens to **new** connections: forwarded (default), stalled from the start, or
  refused (accepted and aborted at once).

Cuts can be planned per connection by a callable (``plan=``); :class:`RandomCuts` makes seeded
random plans, so a failing run can be repeated with the same seed (put the seed in assertion
messages). Offsets count every byte of the direction on that proxied connection, length
prefixes included; frame boundaries are the offsets where a length prefix starts.

Nothing here sleeps; tests wait on the Deferreds (``linked``, ``closed``,
:meth:`FaultProxy.wait_connections`).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable
from dataclasses import dataclass

from twisted.internet import defer
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol

from rsocket_tx.core.framing import FrameReader

__all__ = ["C2S", "S2C", "CutPlan", "FaultProxy", "FrameTracker", "ProxiedConnection",
           "RandomCuts"]

#: client to server (through the proxy)
C2S = "c2s"
#: server to client
S2C = "s2c"

#: where a planned cut falls relative to the frames: at the offset as given, at the first
#: frame boundary at or after it, or inside a frame (the offset, or one byte later if the
#: offset is a boundary)
EXACT, BOUNDARY, MID = "exact", "boundary", "mid"


class FrameTracker:
    """Frame boundaries of one direction's byte stream (24-bit length-prefixed frames).

    :ivar seen: bytes fed so far.
    :ivar boundaries: offsets where a frame starts (0 first), ascending, up to ``seen``.
    """

    __slots__ = ("seen", "boundaries", "_next", "_hdr")

    def __init__(self) -> None:
        self.seen = 0
        self.boundaries = [0]
        self._next = 0  # offset where the next frame starts (its prefix) once known
        self._hdr = b""  # prefix bytes collected for the frame starting at boundaries[-1]

    def feed(self, data: bytes) -> None:
        """Account for the next ``data`` bytes of the stream."""
        i, n, base = 0, len(data), self.seen
        while i < n:
            if self._next <= base + i:
                # inside the length prefix of the frame starting at boundaries[-1]
                take = min(3 - len(self._hdr), n - i)
                self._hdr += data[i:i + take]
                i += take
                if len(self._hdr) == 3:
                    length = int.from_bytes(self._hdr, "big")
                    self._next = self.boundaries[-1] + 3 + length
                    self._hdr = b""
                    if self._next <= base + i:  # a zero-length frame
                        self.boundaries.append(self._next)
                continue
            step = min(self._next - (base + i), n - i)
            i += step
            if base + i == self._next:
                self.boundaries.append(self._next)
        self.seen = base + n

    def is_boundary(self, offset: int) -> bool:
        """Whether a frame starts at ``offset`` (known for offsets up to ``seen``)."""
        k = bisect.bisect_left(self.boundaries, offset)
        return k < len(self.boundaries) and self.boundaries[k] == offset

    def boundary_at_or_after(self, offset: int) -> int | None:
        """The first known frame start at or after ``offset``, or None if not seen yet."""
        k = bisect.bisect_left(self.boundaries, offset)
        return self.boundaries[k] if k < len(self.boundaries) else None


@dataclass
class CutPlan:
    """Cut the connection when ``direction`` (:data:`C2S` or :data:`S2C`) reaches ``offset``
    bytes, placed as ``where`` says (:data:`EXACT`, :data:`BOUNDARY` or :data:`MID`)."""

    direction: str
    offset: int
    where: str = EXACT

    def __post_init__(self) -> None:
        if self.direction not in (C2S, S2C):
            raise ValueError(f"direction must be {C2S!r} or {S2C!r}, got {self.direction!r}")
        if self.where not in (EXACT, BOUNDARY, MID):
            raise ValueError(f"where must be exact, boundary or mid, got {self.where!r}")
        if self.offset < 0:
            raise ValueError(f"offset must be >= 0, got {self.offset!r}")

    def cut_offset(self, tracker: FrameTracker) -> int | None:
        """Where to cut, given what ``tracker`` has seen (None: not reached yet)."""
        end = tracker.seen
        if self.where == EXACT:
            return self.offset if self.offset <= end else None
        if self.where == BOUNDARY:
            b = tracker.boundary_at_or_after(self.offset)
            return b if b is not None and b <= end else None
        if self.offset > end:
            return None
        at = self.offset + 1 if tracker.is_boundary(self.offset) else self.offset
        return at if at <= end else None


@dataclass
class Cut:
    """A cut that happened: connection ``index``, ``direction``, the byte ``offset`` where the
    stream was cut, and whether that was a frame ``boundary``."""

    index: int
    direction: str
    offset: int
    boundary: bool
    planned: CutPlan


class RandomCuts:
    """Seeded random cut plans, for ``FaultProxy(plan=...)``.

    Connection number i (0, 1, ...) gets a plan while fewer than ``count`` cuts were planned:
    a direction drawn from ``directions``, an offset uniform in ``[low, high]`` bytes, and a
    placement that alternates boundary / mid (so any two cuts cover both kinds).

    :param seed: the seed; the same seed gives the same plans.
    :param count: how many connections get cut at most.
    """

    def __init__(self, seed: int, count: int, low: int, high: int,
                 directions: tuple[str, ...] = (C2S, S2C),
                 kinds: tuple[str, ...] = (BOUNDARY, MID)) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.count = count
        self.low = low
        self.high = high
        self.directions = directions
        self.kinds = kinds
        self.planned: list[CutPlan] = []

    def __call__(self, index: int) -> CutPlan | None:
        if len(self.planned) >= self.count:
            return None
        plan = CutPlan(self.rng.choice(self.directions), self.rng.randint(self.low, self.high),
                       self.kinds[len(self.planned) % len(self.kinds)])
        self.planned.append(plan)
        return plan


class _Side(Protocol):
    """One TCP connection of the proxy: ``name`` is ``"down"`` (toward the client) or ``"up"``
    (toward the target)."""

    def __init__(self, conn: ProxiedConnection, name: str) -> None:
        self.conn = conn
        self.name = name
        self.gone = False

    def connectionMade(self) -> None:
        self.conn._side_made(self)

    def dataReceived(self, data: bytes) -> None:
        self.conn._received(self, data)

    def connectionLost(self, reason=None) -> None:
        self.gone = True
        self.conn._side_lost(self)


class ProxiedConnection:
    """One client connection through the proxy and its upstream connection to the target.

    :ivar index: 0 for the proxy's first connection, then 1, 2...
    :ivar state: ``"linking"``, ``"forwarding"``, ``"stalled"`` or ``"closed"``.
    :ivar trackers: ``{C2S: FrameTracker, S2C: FrameTracker}`` of the bytes forwarded.
    :ivar linked: Deferred firing with this connection once both sides are up (or failing if
        the target refused).
    :ivar closed: Deferred firing with this connection once both sides are closed.
    """

    def __init__(self, proxy: FaultProxy, index: int, plan: CutPlan | None, state: str) -> None:
        self.proxy = proxy
        self.index = index
        self.plan = plan
        self.state = state
        self.trackers = {C2S: FrameTracker(), S2C: FrameTracker()}
        self._readers = {C2S: FrameReader(), S2C: FrameReader()} \
            if proxy.observer is not None else None
        self.linked: defer.Deferred = defer.Deferred()
        self.closed: defer.Deferred = defer.Deferred()
        self.down = _Side(self, "down")
        self.up: _Side | None = None
        self._early: list[bytes] = []  # client bytes that arrived before the upstream link
        self.dropped = {C2S: 0, S2C: 0}  # bytes read and not forwarded (stalled)
        self._drop_waiters: list[tuple[str, int, defer.Deferred]] = []

    # --------------------------------------------------------------------- test controls

    def cut_at(self, direction: str, offset: int, where: str = EXACT) -> None:
        """Plan a cut of this connection (replacing any plan); see :class:`CutPlan`. If the
        point was already passed, the cut happens at once, where the stream is now."""
        self.plan = CutPlan(direction, offset, where)
        tracker = self.trackers[direction]
        if self.state == "forwarding" and self.plan.cut_offset(tracker) is not None:
            self._cut(direction, tracker.seen)

    def cut_now(self) -> None:
        """Cut this connection where its streams are now (no bytes are held back)."""
        if self.state in ("linking", "forwarding", "stalled"):
            self._cut(S2C, self.trackers[S2C].seen)

    def wait_dropped(self, direction: str, n: int) -> defer.Deferred:
        """Deferred firing once at least ``n`` bytes of ``direction`` were read and dropped
        (by a stalled connection)."""
        if self.dropped[direction] >= n:
            return defer.succeed(self)
        d = defer.Deferred()
        self._drop_waiters.append((direction, n, d))
        return d

    def stall(self) -> None:
        """Go half-open: keep both TCP connections, forward nothing more, tell nobody.

        Each transport stops being the other's producer: a TCP transport that is lost stops
        its producer, which for a transport means closing it, and that would tell the other
        peer. Both keep reading (what they read is dropped and counted)."""
        if self.state in ("linking", "forwarding"):
            self.state = "stalled"
            for side in (self.down, self.up):
                if side is not None and side.transport is not None and not side.gone:
                    side.transport.unregisterProducer()
                    side.transport.resumeProducing()

    # --------------------------------------------------------------------- internals

    def _side_made(self, side: _Side) -> None:
        if side is self.down:
            if self.state == "refused":
                side.transport.abortConnection()
                return
            if self.state == "stalled":
                return  # never linked: a half-open server
            side.transport.pauseProducing()
            ep = TCP4ClientEndpoint(self.proxy.reactor, self.proxy.target_host,
                                    self.proxy.target_port)
            self.up = _Side(self, "up")
            d = connectProtocol(ep, self.up)
            d.addErrback(self._link_failed)
            return
        # upstream up: each transport is the other's streaming producer (flow control)
        if self.state == "closed":
            side.transport.abortConnection()
            return
        self.down.transport.registerProducer(side.transport, True)
        side.transport.registerProducer(self.down.transport, True)
        if self.state == "linking":
            self.state = "forwarding"
        early, self._early = self._early, []
        for data in early:
            self._received(self.down, data)
        if self.state != "closed":
            self.down.transport.resumeProducing()
        self.linked.callback(self)

    def _link_failed(self, failure) -> None:
        self.state = "closed"
        self.up = None
        if not self.down.gone:
            self.down.transport.abortConnection()
        self.linked.errback(failure)
        self._check_closed()

    def _forward(self, direction: str, dest: _Side, data: bytes) -> None:
        if self._readers is not None:
            for frame in self._readers[direction].feed(data):
                self.proxy.observer(self, direction, frame)
        dest.transport.write(data)

    def _received(self, side: _Side, data: bytes) -> None:
        if self.state == "linking":
            self._early.append(data)
            return
        direction = C2S if side is self.down else S2C
        if self.state != "forwarding":
            self.dropped[direction] += len(data)  # stalled or closed: dropped
            for w in list(self._drop_waiters):
                if w[0] == direction and self.dropped[direction] >= w[1]:
                    self._drop_waiters.remove(w)
                    w[2].callback(self)
            return
        dest = self.up if side is self.down else self.down
        tracker = self.trackers[direction]
        start = tracker.seen
        tracker.feed(data)
        plan = self.plan
        if plan is not None and plan.direction == direction:
            at = plan.cut_offset(tracker)
            if at is not None:
                if at > start:
                    self._forward(direction, dest, data[:at - start])
                self._cut(direction, at)
                return
        self._forward(direction, dest, data)

    def _cut(self, direction: str, offset: int) -> None:
        self.proxy.cuts.append(Cut(self.index, direction, offset,
                                   self.trackers[direction].is_boundary(offset), self.plan))
        self.state = "closed"
        self.plan = None
        dest = self.up if direction == C2S else self.down
        src = self.down if direction == C2S else self.up
        for side in (self.down, self.up):
            if side is not None and side.transport is not None and not side.gone:
                side.transport.unregisterProducer()
        if dest is not None and dest.transport is not None and not dest.gone:
            dest.transport.loseConnection()  # exactly the bytes up to the cut, then FIN
        if src is not None and src.transport is not None and not src.gone:
            src.transport.abortConnection()

    def _side_lost(self, side: _Side) -> None:
        other = self.up if side is self.down else self.down
        if self.state in ("forwarding", "linking"):
            # a normal close by one peer is passed on to the other (a stalled connection
            # tells nobody: half-open)
            self.state = "closed"
            if other is not None and other.transport is not None and not other.gone:
                other.transport.loseConnection()
        self._check_closed()

    def _check_closed(self) -> None:
        up_done = self.up is None or self.up.gone
        if self.down.gone and up_done and not self.closed.called:
            self.closed.callback(self)

    def abort(self) -> None:
        """Abort both sides (cleanup)."""
        self.state = "closed"
        for side in (self.down, self.up):
            if side is not None and side.transport is not None and not side.gone:
                side.transport.abortConnection()


class _ProxyFactory(Factory):
    def __init__(self, proxy: FaultProxy) -> None:
        self.proxy = proxy

    def buildProtocol(self, addr) -> _Side:
        return self.proxy._new_connection().down


class FaultProxy:
    """The proxy. Call :meth:`listen` (synchronous) and point the client at :attr:`port`.

    :param target_port: the server's TCP port (on ``target_host``).
    :param plan: ``callable(index) -> CutPlan | None`` giving each new connection its cut plan
        (e.g. :class:`RandomCuts`); None: no planned cuts.
    :param reactor: the reactor; None: the global one.
    :param observer: ``callable(connection, direction, frame)`` called with every whole frame
        forwarded (bytes without the length prefix), for logs and wire checks; None: frames
        are only counted.

    :ivar connections: every :class:`ProxiedConnection`, in order.
    :ivar cuts: every :class:`Cut` made, in order.
    :ivar new_connections: what happens to connections accepted from now on: ``"forward"``,
        ``"stall"`` (accepted, never linked, data dropped) or ``"refuse"`` (aborted at once).
    """

    def __init__(self, target_port: int, *, target_host: str = "127.0.0.1",
                 plan: Callable[[int], CutPlan | None] | None = None, reactor=None,
                 observer: Callable[[ProxiedConnection, str, bytes], None] | None = None
                 ) -> None:
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = global_reactor
        self.reactor = reactor
        self.target_host = target_host
        self.target_port = target_port
        self.plan = plan
        self.observer = observer
        self.connections: list[ProxiedConnection] = []
        self.cuts: list[Cut] = []
        self.new_connections = "forward"
        self.port: int | None = None
        self._listening = None
        self._waiters: list[tuple[int, defer.Deferred]] = []

    def listen(self, interface: str = "127.0.0.1") -> int:
        """Start listening on a free port of ``interface``; returns it (also :attr:`port`)."""
        self._listening = self.reactor.listenTCP(0, _ProxyFactory(self), interface=interface)
        self.port = self._listening.getHost().port
        return self.port

    @property
    def endpoint(self) -> str:
        """A client endpoint string for the proxy."""
        return f"tcp:host=127.0.0.1:port={self.port}"

    def _new_connection(self) -> ProxiedConnection:
        index = len(self.connections)
        mode = self.new_connections
        state = {"forward": "linking", "stall": "stalled", "refuse": "refused"}[mode]
        plan = self.plan(index) if self.plan is not None and mode == "forward" else None
        conn = ProxiedConnection(self, index, plan, state)
        self.connections.append(conn)
        for n, d in list(self._waiters):
            if len(self.connections) >= n:
                self._waiters.remove((n, d))
                d.callback(self.connections[n - 1])
        return conn

    def wait_connections(self, n: int) -> defer.Deferred:
        """Deferred firing with connection number ``n`` (1-based count) once it was accepted."""
        if len(self.connections) >= n:
            return defer.succeed(self.connections[n - 1])
        d = defer.Deferred()
        self._waiters.append((n, d))
        return d

    @property
    def current(self) -> ProxiedConnection | None:
        """The newest connection, or None."""
        return self.connections[-1] if self.connections else None

    def stall_all(self) -> None:
        """Half-open everything: every live connection stalls, and so do new ones."""
        self.new_connections = "stall"
        for conn in self.connections:
            conn.stall()

    def close(self) -> defer.Deferred:
        """Stop listening and abort every connection; fires once the port is closed."""
        for conn in self.connections:
            conn.abort()
        if self._listening is None:
            return defer.succeed(None)
        listening, self._listening = self._listening, None
        return defer.maybeDeferred(listening.stopListening)
