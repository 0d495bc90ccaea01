"""Leases, with no I/O (spec §Lease Semantics, §LEASE Frame, §Connection Establishment).

A client that sets the L flag in SETUP asks for leases in *both* directions: each requester
may send only the requests the peer's responder granted in its last LEASE frame (a number of
requests within a time-to-live), and each responder grants leases and enforces them.

* :class:`RequesterLease` is the lease the peer granted us: whether a request may be sent now.
  A request beyond it is not sent: :class:`~rsocket_tx.core.errors.LeaseError` is raised at
  once (fail fast, as rsocket-java does; spec §Handling the Unexpected makes waiting for a
  LEASE the application's concern).
* :class:`ResponderLease` is what we granted the peer: it counts the requests that arrive
  against it, and says why one must be answered with ERROR[REJECTED].
* :class:`LeasePolicy` is the application's decision of what to grant and when;
  :class:`FixedRateLeasePolicy`, :class:`ConcurrencyLeasePolicy` and
  :class:`UnlimitedLeasePolicy` are ready ones.

Time: ``now`` is in **seconds** on any monotonic epoch, the clock of
:meth:`RSocketConnection.tick <rsocket_tx.core.connection.RSocketConnection.tick>`; a lease's
time-to-live and every other duration here are in **milliseconds**, as on the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import LeaseError

__all__ = [
    "MAX_LEASE_VALUE",
    "DEFAULT_LEASE_GRACE",
    "DEFAULT_LEASE_INTERVAL",
    "NO_LEASE",
    "LEASE_EXPIRED",
    "LEASE_USED_UP",
    "Lease",
    "LeaseStats",
    "RequesterLease",
    "ResponderLease",
    "LeasePolicy",
    "FixedRateLeasePolicy",
    "ConcurrencyLeasePolicy",
    "UnlimitedLeasePolicy",
    "policy_interval",
    "policy_lease",
]

#: The largest time-to-live (ms) and number of requests a LEASE frame carries: 2^31-1.
MAX_LEASE_VALUE = 0x7FFFFFFF
#: Milliseconds a responder keeps honouring its lease past the time-to-live it sent, because
#: the peer counts the time-to-live from when the LEASE *arrives* and its last request then
#: takes the way back: at least one round trip is needed.
DEFAULT_LEASE_GRACE = 1_000

#: Milliseconds between two rounds of a :class:`LeasePolicy` that sets no other
#: ``interval`` (and of one whose ``interval`` is broken).
DEFAULT_LEASE_INTERVAL = 1_000

#: ``LeaseError.reason``: no LEASE has arrived from the peer yet.
NO_LEASE = "no lease"
#: ``LeaseError.reason``: the last LEASE's time-to-live has run out.
LEASE_EXPIRED = "expired"
#: ``LeaseError.reason``: every request the last LEASE allowed has been sent.
LEASE_USED_UP = "used up"


def _check(name: str, value: object, low: int, high: int = MAX_LEASE_VALUE,
           unit: str = "") -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}]{unit}, got {value!r}")


@dataclass(frozen=True, slots=True)
class Lease:
    """One grant: the content of a LEASE frame (spec §LEASE Frame).

    :param ttl: time-to-live in milliseconds, from the moment the peer receives the LEASE;
        0..2^31-1 (0 stops all requests, spec §LEASE Frame).
    :param number_of_requests: requests (of any type) the peer may send within ``ttl``;
        0..2^31-1 (0 stops all requests).
    :param metadata: optional LEASE metadata (bytes), or None.
    :raises ValueError: a value out of range.
    """

    ttl: int
    number_of_requests: int
    metadata: bytes | None = None

    def __post_init__(self) -> None:
        _check("ttl", self.ttl, 0, unit=" ms")
        _check("number_of_requests", self.number_of_requests, 0)
        if self.metadata is not None and not isinstance(self.metadata, bytes):
            raise ValueError(f"metadata must be bytes or None, got {type(self.metadata).__name__}")


def _spent(reason: str, limit: int, if_zero: str, otherwise: str) -> LeaseError:
    """The LeaseError for a request past the peer's lease (expired or used up).

    :param limit: the lease's time-to-live or number of requests; 0 means it stops all
        requests (``if_zero`` says how), else ``otherwise`` says how it ran out.
    """
    detail = f"{if_zero}: it stops all requests" if limit == 0 else otherwise
    return LeaseError(reason, f"request not sent: the peer's lease {detail}; "
                      "wait for its next LEASE frame")


class RequesterLease:
    """The lease the peer's responder granted us (spec §Lease Semantics, requester side).

    Starts with no lease: a connection that set the L flag may send no request before the
    peer's first LEASE (spec §Connection Establishment). Each LEASE received replaces the
    previous one entirely (spec §LEASE Frame: "The last received LEASE frame overrides all
    previous LEASE frame values"); its time-to-live counts from its reception.

    :ivar lease: the last :class:`Lease` received, or None.
    :ivar received_at: when it arrived (seconds), or None.
    :ivar remaining: requests it still allows (not counting expiry; see :meth:`available`).
    :ivar sent: requests sent under it.
    :ivar leases_received: LEASE frames received on this connection.
    """

    __slots__ = ("lease", "received_at", "remaining", "sent", "leases_received", "_expires_at")

    def __init__(self) -> None:
        self.lease: Lease | None = None
        self.received_at: float | None = None
        self.remaining = 0
        self.sent = 0
        self.leases_received = 0
        self._expires_at = 0.0

    @property
    def expires_at(self) -> float | None:
        """When the current lease runs out (seconds, the ``now`` clock), or None before any."""
        return None if self.lease is None else self._expires_at

    def receive(self, lease: Lease, now: float) -> None:
        """A LEASE frame arrived at ``now`` (seconds): it replaces the previous lease."""
        self.lease = lease
        self.received_at = now
        self.remaining = lease.number_of_requests
        self.sent = 0
        self.leases_received += 1
        self._expires_at = now + lease.ttl / 1000.0

    def available(self, now: float) -> int:
        """How many requests may be sent at ``now`` (seconds): 0 without a lease, once it
        expired, or once it is used up."""
        if self.lease is None or now >= self._expires_at:
            return 0
        return self.remaining

    def check(self, now: float) -> None:
        """Raise unless one request may be sent at ``now`` (seconds); counts nothing.

        :raises LeaseError: with the reason (no lease yet, expired, used up).
        """
        lease = self.lease
        if lease is None:
            raise LeaseError(NO_LEASE, "request not sent: no lease from the peer yet; this "
                             "connection uses leases (SETUP L flag), so requests must wait for "
                             "the peer's first LEASE frame")
        if now >= self._expires_at:
            raise _spent(LEASE_EXPIRED, lease.ttl, "has a time-to-live of 0 ms",
                         f"expired (its time-to-live of {lease.ttl} ms has run out)")
        if self.remaining <= 0:
            raise _spent(LEASE_USED_UP, lease.number_of_requests, "allows 0 requests",
                         f"of {lease.number_of_requests} requests is used up")

    def use(self, now: float) -> None:
        """Count one request about to be sent at ``now`` (seconds).

        :raises LeaseError: the request must not be sent (see :meth:`check`); nothing counted.
        """
        self.check(now)
        self.remaining -= 1
        self.sent += 1


@dataclass(frozen=True, slots=True)
class LeaseStats:
    """What our responder has granted and seen on one connection, given to
    :meth:`LeasePolicy.next_lease`.

    :ivar leases_sent: LEASE frames sent so far (0: the first one is being decided).
    :ivar lease: the last :class:`Lease` sent, or None.
    :ivar remaining: requests the peer may still send under what we granted (0 once expired).
    :ivar expires_at: when our grants run out (seconds; without the grace), or None.
    :ivar accepted: requests accepted since the last LEASE we sent.
    :ivar rejected: requests rejected (ERROR[REJECTED]) since the last LEASE we sent.
    :ivar total_accepted: requests accepted on this connection.
    :ivar total_rejected: requests rejected on this connection.
    :ivar active_streams: streams the peer has open towards us now (its requests that have not
        ended).
    """

    leases_sent: int
    lease: Lease | None
    remaining: int
    expires_at: float | None
    accepted: int
    rejected: int
    total_accepted: int
    total_rejected: int
    active_streams: int


class ResponderLease:
    """What our responder granted the peer, and the count of the requests it sent
    (spec §Lease Semantics: "A Responder that receives a REQUEST that it can not honor due to
    LEASE restrictions MUST respond with an ERROR[REJECTED]").

    Enforcement is lenient by what is legitimately in flight, never more:

    * a new grant *adds* what was left of the previous one while that was still valid (the
      peer may have sent those requests before our new LEASE reached it);
    * a grant stays valid ``grace`` milliseconds past its time-to-live (the peer counts the
      time-to-live from the LEASE's arrival, and its request still has to travel back).

    :param grace: milliseconds (0..2^31-1), default :data:`DEFAULT_LEASE_GRACE`.
    :ivar grace: the same, in milliseconds.
    :raises ValueError: ``grace`` out of range.
    """

    __slots__ = ("grace", "_grace", "lease", "leases_sent", "accepted", "rejected",
                 "total_accepted", "total_rejected", "_budget", "_end")

    def __init__(self, grace: int = DEFAULT_LEASE_GRACE) -> None:
        _check("grace", grace, 0, unit=" ms")
        self.grace = grace
        self._grace = grace / 1000.0
        self.lease: Lease | None = None
        self.leases_sent = 0
        self.accepted = self.rejected = self.total_accepted = self.total_rejected = 0
        self._budget = 0
        self._end = 0.0

    @property
    def expires_at(self) -> float | None:
        """When what we granted runs out (seconds, without the grace), or None before any."""
        return None if self.lease is None else self._end

    def _valid(self, now: float) -> bool:
        return self.lease is not None and now <= self._end + self._grace

    def remaining(self, now: float) -> int:
        """Requests the peer may still send at ``now`` (seconds), grace included."""
        return self._budget if self._valid(now) else 0

    def grant(self, lease: Lease, now: float) -> None:
        """Record that ``lease`` is being sent to the peer at ``now`` (seconds)."""
        end = now + lease.ttl / 1000.0
        if self._valid(now):
            self._budget += lease.number_of_requests
            if self._end > end:
                end = self._end
        else:
            self._budget = lease.number_of_requests
        self._end = end
        self.lease = lease
        self.leases_sent += 1
        self.accepted = self.rejected = 0

    def accept(self, now: float) -> str | None:
        """Count one request that arrived at ``now`` (seconds).

        :returns: None when it is within our grant (counted), else the reason to send in
            ERROR[REJECTED] (the request must not be served).
        """
        if self.lease is None:
            reason = "request rejected: no lease was granted to this requester"
        elif now > self._end + self._grace:
            reason = f"request rejected: the lease expired (time-to-live {self.lease.ttl} ms)"
        elif self._budget <= 0:
            reason = "request rejected: the lease's requests are used up"
        else:
            self._budget -= 1
            self.accepted += 1
            self.total_accepted += 1
            return None
        self.rejected += 1
        self.total_rejected += 1
        return reason

    def stats(self, now: float, active_streams: int = 0) -> LeaseStats:
        """A :class:`LeaseStats` snapshot at ``now`` (seconds)."""
        return LeaseStats(leases_sent=self.leases_sent, lease=self.lease,
                          remaining=self.remaining(now), expires_at=self.expires_at,
                          accepted=self.accepted, rejected=self.rejected,
                          total_accepted=self.total_accepted,
                          total_rejected=self.total_rejected, active_streams=active_streams)


class LeasePolicy:
    """What our responder grants the peer's requester, and when (spec §Lease Semantics: "The
    Responder application is responsible for the logic of generation and informing the
    Responder it should send a LEASE to the peer Requester").

    Subclass it, override :meth:`next_lease`, and set :attr:`interval`. On a connection with
    leases the connection calls :meth:`next_lease` once as soon as it is established (the first
    LEASE is mandatory, spec §Connection Establishment), then every :attr:`interval`
    milliseconds until it closes; each :class:`Lease` returned is sent as a LEASE frame.

    One policy object may serve every connection of a server: it is called per connection with
    that connection's :class:`LeaseStats`, so keep per-connection state out of it or key it on
    something the stats do not change. ``next_lease`` runs in the event loop: it must not
    block.

    A bug in a policy does not end the connection: when ``next_lease`` raises or returns
    something other than a :class:`Lease` or None, that is logged with its traceback and that
    round sends nothing; when :attr:`interval` cannot be read or is out of range, that is
    logged and the next round comes after :data:`DEFAULT_LEASE_INTERVAL` ms.

    :ivar interval: milliseconds between calls of :meth:`next_lease` (1..2^31-1).
    """

    interval: int = DEFAULT_LEASE_INTERVAL

    def next_lease(self, now: float, stats: LeaseStats) -> Lease | None:
        """Decide the next grant.

        :param now: current time in seconds (the connection's clock).
        :param stats: what this connection's responder has granted and seen.
        :returns: the :class:`Lease` to send now, or None to send nothing this round.
        """
        raise NotImplementedError


def policy_lease(policy: LeasePolicy, now: float, stats: LeaseStats) -> Lease | None:
    """Run one round of ``policy``: its :meth:`~LeasePolicy.next_lease`, checked.

    :param now: current time in seconds.
    :param stats: the connection's :class:`LeaseStats`.
    :returns: the :class:`Lease` to send, or None to send nothing.
    :raises TypeError: the policy returned something other than a Lease or None.
    :raises Exception: whatever the policy's ``next_lease`` raised.
    """
    lease = policy.next_lease(now, stats)
    if lease is not None and not isinstance(lease, Lease):
        raise TypeError(f"{type(policy).__name__}.next_lease must return a "
                        f"rsocket_tx.lease.Lease or None, got {lease!r:.80}")
    return lease


def policy_interval(policy: LeasePolicy) -> int:
    """``policy``'s :attr:`~LeasePolicy.interval`, checked: milliseconds, 1..2^31-1.

    :raises ValueError: it is no integer in that range.
    :raises Exception: whatever reading it raised (a property may).
    """
    interval = policy.interval
    _check(f"{type(policy).__name__}.interval", interval, 1, unit=" ms")
    return interval


class FixedRateLeasePolicy(LeasePolicy):
    """Grant ``requests`` requests per ``ttl`` milliseconds: the same LEASE every ``interval``.

    :param ttl: milliseconds each lease lasts (1..2^31-1).
    :param requests: requests each lease allows (0..2^31-1; 0 grants nothing).
    :param interval: milliseconds between LEASE frames; default ``ttl`` (back to back, so
        the rate is ``requests`` per ``ttl``). A shorter interval renews before expiry (each
        new LEASE replaces the old one), which avoids a gap between leases on a jittery link.
    :param metadata: optional metadata sent with every LEASE.
    :raises ValueError: a value out of range.
    """

    def __init__(self, ttl: int, requests: int, interval: int | None = None,
                 metadata: bytes | None = None) -> None:
        _check("ttl", ttl, 1, unit=" ms")
        interval = ttl if interval is None else interval
        _check("interval", interval, 1, unit=" ms")
        self.lease = Lease(ttl, requests, metadata)
        self.interval = interval

    def next_lease(self, now: float, stats: LeaseStats) -> Lease:
        return self.lease

    def __repr__(self) -> str:
        return (f"FixedRateLeasePolicy(ttl={self.lease.ttl}, "
                f"requests={self.lease.number_of_requests}, interval={self.interval})")


class ConcurrencyLeasePolicy(LeasePolicy):
    """Grant as many requests as keep at most ``max_concurrent`` streams open: every
    ``interval`` ms, a LEASE of ``max_concurrent - active streams`` requests (0 when full).

    :param max_concurrent: streams the connection may hold open (1..2^31-1).
    :param ttl: milliseconds each lease lasts (1..2^31-1).
    :param interval: milliseconds between LEASE frames; default ``ttl``.
    :raises ValueError: a value out of range.
    """

    def __init__(self, max_concurrent: int, ttl: int = 1_000, interval: int | None = None
                 ) -> None:
        _check("max_concurrent", max_concurrent, 1)
        _check("ttl", ttl, 1, unit=" ms")
        interval = ttl if interval is None else interval
        _check("interval", interval, 1, unit=" ms")
        self.max_concurrent = max_concurrent
        self.ttl = ttl
        self.interval = interval

    def next_lease(self, now: float, stats: LeaseStats) -> Lease:
        return Lease(self.ttl, max(0, self.max_concurrent - stats.active_streams))

    def __repr__(self) -> str:
        return (f"ConcurrencyLeasePolicy(max_concurrent={self.max_concurrent}, ttl={self.ttl}, "
                f"interval={self.interval})")


class UnlimitedLeasePolicy(LeasePolicy):
    """Grant everything a LEASE can say (2^31-1 requests for 2^31-1 ms, renewed when it runs
    out): leases are honoured but limit nothing. The default of a server whose application set
    no policy when a client asks for leases."""

    interval = MAX_LEASE_VALUE
    _LEASE = Lease(MAX_LEASE_VALUE, MAX_LEASE_VALUE)

    def next_lease(self, now: float, stats: LeaseStats) -> Lease:
        return self._LEASE

    def __repr__(self) -> str:
        return "UnlimitedLeasePolicy()"
