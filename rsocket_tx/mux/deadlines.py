"""Deadlines: the timers of a sans-IO connection, kept as data.

A sans-IO connection reads no clock: its caller passes the time in (seconds, any epoch, one
clock per connection), asks :meth:`Deadlines.next` when to call back, and at that time asks
:meth:`Deadlines.pop_expired` which timers ran out. RSocket uses them for the SETUP timeout,
KEEPALIVE sending and max lifetime, the graceful-close drain and the resume session
lifetime; the Jini ERI mux for Ping timeouts and a Shutdown's drain.
"""

from __future__ import annotations

import heapq
from typing import Generic, TypeVar

__all__ = ["Deadlines"]

K = TypeVar("K")


class Deadlines(Generic[K]):
    """Timers by key: at most one deadline per key.

    Keys must be hashable; they need not be orderable.
    """

    __slots__ = ("_heap", "_when", "_seq")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, K]] = []
        self._when: dict[K, tuple[float, int]] = {}
        self._seq = 0

    def set(self, key: K, when: float) -> None:
        """Set (or move) ``key``'s deadline to ``when`` (seconds, the caller's clock)."""
        self._seq = seq = self._seq + 1
        self._when[key] = (when, seq)
        heapq.heappush(self._heap, (when, seq, key))

    def cancel(self, key: K) -> None:
        """Remove ``key``'s deadline, if any."""
        self._when.pop(key, None)

    def get(self, key: K) -> float | None:
        """``key``'s deadline in seconds, or None."""
        entry = self._when.get(key)
        return None if entry is None else entry[0]

    def __contains__(self, key: object) -> bool:
        return key in self._when

    def __len__(self) -> int:
        return len(self._when)

    def _prune(self) -> None:
        heap = self._heap
        when = self._when
        while heap:
            t, seq, key = heap[0]
            if when.get(key) == (t, seq):
                return
            heapq.heappop(heap)

    def next(self) -> float | None:
        """The earliest deadline in seconds, or None when none is set."""
        self._prune()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now: float) -> list[K]:
        """Remove and return the keys whose deadline is at or before ``now`` (seconds),
        earliest first (ties: in the order they were set)."""
        expired: list[K] = []
        heap = self._heap
        when = self._when
        while heap:
            t, seq, key = heap[0]
            if when.get(key) != (t, seq):
                heapq.heappop(heap)
                continue
            if t > now:
                break
            heapq.heappop(heap)
            del when[key]
            expired.append(key)
        return expired
