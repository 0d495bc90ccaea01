"""Leases on a Twisted connection (spec §Lease Semantics, §LEASE Frame).

A client asks for leases with ``connect(..., lease=True)`` (or a
:class:`~rsocket_tx.core.lease.LeasePolicy`): the SETUP carries the L flag and from then on
leases run in **both** directions:

* **requester**: a request is sent only within the last lease the peer granted. A request
  beyond it is not sent; it raises :class:`~rsocket_tx.core.errors.LeaseError` at once (fail
  fast). To wait instead, use :meth:`LeaseHandle.when_available`.
* **responder**: this side grants the peer leases as its
  :class:`~rsocket_tx.core.lease.LeasePolicy` decides, and answers a request beyond them with
  ERROR[REJECTED].

:class:`LeaseHandle` (``protocol.lease``) is the per-connection view and control. The policies
and values are those of :mod:`rsocket_tx.core.lease`, and
:class:`~rsocket_tx.core.errors.LeaseError`, re-exported here.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred

from .bridge import failure_for
from .core import errors as E
from .core.errors import LeaseError
from .core.lease import (
    DEFAULT_LEASE_GRACE,
    DEFAULT_LEASE_INTERVAL,
    LEASE_EXPIRED,
    LEASE_USED_UP,
    MAX_LEASE_VALUE,
    NO_LEASE,
    ConcurrencyLeasePolicy,
    FixedRateLeasePolicy,
    Lease,
    LeasePolicy,
    LeaseStats,
    UnlimitedLeasePolicy,
    policy_interval,
    policy_lease,
)

if TYPE_CHECKING:  # pragma: no cover
    from .interfaces import ILeaseHost

__all__ = [
    "DEFAULT_LEASE_GRACE",
    "DEFAULT_LEASE_INTERVAL",
    "LEASE_EXPIRED",
    "LEASE_USED_UP",
    "MAX_LEASE_VALUE",
    "NO_LEASE",
    "ConcurrencyLeasePolicy",
    "FixedRateLeasePolicy",
    "Lease",
    "LeaseError",
    "LeaseHandle",
    "LeasePolicy",
    "LeaseStats",
    "UnlimitedLeasePolicy",
    "policy_for",
]


def policy_for(lease: bool | LeasePolicy) -> LeasePolicy | None:
    """The policy a client's ``lease`` argument names (``connect(..., lease=...)``).

    :param lease: True (leases, granted by the default policy the protocol builds), False (no
        leases) or a :class:`~rsocket_tx.core.lease.LeasePolicy` (leases it decides).
    :returns: the policy, or None for a bool.
    :raises TypeError: ``lease`` is neither a bool nor a ``LeasePolicy``.
    """
    if isinstance(lease, LeasePolicy):
        return lease
    if isinstance(lease, bool):
        return None
    raise TypeError(f"lease must be True, False or a rsocket_tx.lease.LeasePolicy, got "
                    f"{lease!r}")


class LeaseHandle:
    """The leases of one connection, both ways.

    The protocol drives it (:meth:`start`, :meth:`renew`, :meth:`lease_received`,
    :meth:`stop`, :meth:`when_first_lease`); it reaches the connection through
    :class:`~rsocket_tx.interfaces.ILeaseHost`.

    :param host: the :class:`~rsocket_tx.interfaces.ILeaseHost` (the
        :class:`~rsocket_tx.protocol.RSocketProtocol`). It owns this handle, which refers to
        it weakly (no reference cycle): reach the handle through the connection
        (``rsocket.lease``), not on its own after the connection is gone.
    :param policy: what this side grants the peer; None: unlimited grants.
    :ivar policy: the :class:`~rsocket_tx.core.lease.LeasePolicy` deciding what this side
        grants the peer (used only when the connection has leases).
    """

    def __init__(self, host: ILeaseHost, policy: LeasePolicy | None) -> None:
        # the host owns this handle: a weak reference back makes no cycle with it (use the
        # handle while the connection lives: through ``rsocket.lease``)
        self._host = weakref.proxy(host)
        self.policy = policy if policy is not None else UnlimitedLeasePolicy()
        self._call = None  # the next policy round
        self._waiters: list[Deferred[None]] = []  # when_available()
        self._first: list[Deferred[None]] = []  # when_first_lease()
        self._started = False
        self._ended: E.RSocketError | None = None

    # ------------------------------------------------------------------ state

    @property
    def enabled(self) -> bool:
        """True when this connection uses leases (the client's SETUP had the L flag)."""
        conn = self._host.connection
        return conn is not None and conn.lease_enabled

    def available(self) -> int | None:
        """Requests this side may send now under the peer's lease (0: none, or not yet);
        None when the connection does not use leases (no limit)."""
        conn = self._host.connection
        return None if conn is None else conn.lease_available()

    @property
    def received(self) -> Lease | None:
        """The last :class:`~rsocket_tx.core.lease.Lease` the peer granted us, or None."""
        conn = self._host.connection
        lease = None if conn is None else conn.requester_lease
        return None if lease is None else lease.lease

    @property
    def granted(self) -> Lease | None:
        """The last :class:`~rsocket_tx.core.lease.Lease` we granted the peer, or None."""
        conn = self._host.connection
        lease = None if conn is None else conn.responder_lease
        return None if lease is None else lease.lease

    def stats(self) -> LeaseStats | None:
        """What our responder granted and saw (:class:`~rsocket_tx.core.lease.LeaseStats`),
        or None without leases."""
        conn = self._host.connection
        return None if conn is None else conn.lease_stats()

    # ------------------------------------------------------------------ control

    def when_available(self) -> Deferred[None]:
        """A Deferred firing with None as soon as a request may be sent: at once when the
        peer's lease allows one now (or the connection does not use leases), else when a
        LEASE that allows one arrives. It fails with the connection's error if the connection
        closes first; cancel it to stop waiting. This is the opt-in *wait*: requests
        themselves never wait, they raise :class:`~rsocket_tx.core.errors.LeaseError`.
        """
        if self._ended is not None:
            return _failed(self._ended)
        available = self.available()
        if available is None or available > 0:
            return _succeeded()
        d: Deferred[None] = Deferred(_forget(self._waiters))
        self._waiters.append(d)
        return d

    def send(self, lease: Lease) -> None:
        """Grant the peer ``lease`` now, outside the policy's rhythm (spec §LEASE Frame: it
        replaces what the peer had; we keep honouring what may still be in flight).

        :raises LocalProtocolError: the connection does not use leases, or is closed.
        """
        host = self._host
        conn = host.connection
        if conn is None or not conn.is_open:
            raise E.LocalProtocolError("the RSocket connection is closed")
        conn.send_lease(lease, host.reactor.seconds())
        host.flush_soon()

    # ------------------------------------------------------------------ driven by the protocol

    def when_first_lease(self) -> Deferred[None]:
        """A Deferred firing with None when the peer's first LEASE has arrived."""
        if self._ended is not None:
            return _failed(self._ended)
        conn = self._host.connection
        if conn is not None and conn.requester_lease is not None \
                and conn.requester_lease.leases_received:
            return _succeeded()
        d: Deferred[None] = Deferred(_forget(self._first))
        self._first.append(d)
        return d

    def start(self) -> None:
        """The connection is established with leases: run the policy now, then every
        ``policy.interval`` ms (spec §Connection Establishment: the first LEASE is due at
        once)."""
        if self._started:
            return
        self._started = True
        self._round()

    def renew(self) -> None:
        """Run the policy now and restart its rhythm (a resumed session: spec §Resume
        Operation, "LEASE semantics MUST be restarted upon a new connection")."""
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self._started:
            self._round()

    def _round(self) -> None:
        self._call = None
        host = self._host
        conn = host.connection
        if conn is None or not conn.is_open:
            return
        if not conn.is_detached:  # a resumable session without transport: at the resume
            now = host.reactor.seconds()
            try:
                lease = policy_lease(self.policy, now, conn.lease_stats())
                if lease is not None:
                    conn.send_lease(lease, now)
            except Exception:  # noqa: BLE001 - a policy bug must not kill the connection
                host.log.failure("the lease policy {policy!r} failed in next_lease(); no "
                                 "LEASE this round", policy=self.policy)
            host.flush()  # (held to the end of the read when one is being handled)
        try:
            interval = policy_interval(self.policy)
        except Exception:  # noqa: BLE001
            host.log.failure("the lease policy {policy!r} has a bad interval; the next round "
                             "in {default} ms", policy=self.policy,
                             default=DEFAULT_LEASE_INTERVAL)
            interval = DEFAULT_LEASE_INTERVAL
        self._call = host.reactor.callLater(interval / 1000.0, self._round)

    def lease_received(self) -> None:
        """A LEASE arrived: wake who waits for one."""
        first, self._first = self._first, []
        for d in first:
            if not d.called:  # already failed by its own deadline (``protocol.ready``)
                d.callback(None)
        if self._waiters:
            available = self.available()
            if available is None or available > 0:
                waiters, self._waiters = self._waiters, []
                for d in waiters:
                    d.callback(None)

    def stop(self, error: E.RSocketError | None) -> None:
        """The connection is over: stop the policy, fail who waits."""
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self._ended is not None:
            return
        self._ended = error or E.ConnectionCloseError("the connection closed")
        waiters, self._waiters = self._waiters + self._first, []
        self._first = []
        for d in waiters:
            # a first-lease Deferred may have failed already: the client's no-LEASE deadline
            # (``protocol.ready``) fails it, then closes the connection, which stops us
            if not d.called:
                d.errback(failure_for(self._ended))


def _forget(waiters: list[Deferred[None]]) -> Callable[[Deferred[None]], None]:
    """A canceller taking a Deferred out of ``waiters``."""
    def cancel(d: Deferred[None]) -> None:
        if d in waiters:
            waiters.remove(d)
    return cancel


def _succeeded() -> Deferred[None]:
    d: Deferred[None] = Deferred()
    d.callback(None)
    return d


def _failed(error: Exception) -> Deferred[None]:
    d: Deferred[None] = Deferred()
    d.errback(failure_for(error))
    return d
