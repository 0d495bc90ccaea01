"""Giving the memory of closed connections back to the operating system.

A connection made to hold many small and medium pieces (the fragments of messages being
reassembled, a first frame read in 64 KiB reads, a send buffer) frees them when it closes, but
glibc's allocator keeps what it frees below its mmap threshold (128 KiB, raised up to 32 MiB as
large blocks are freed) inside its heap, and it gives the heap back only from its top: one
live object above the freed region, and the process stays as large as at its peak. After an
attack that filled ``max_reassembly_buffer_size`` with 16 KiB fragments on 16 connections,
a server stayed 911 MiB above its resting size once they had all closed (docs: Reliability,
"Memory after an attack").

A :class:`MemoryTrimmer` calls glibc's ``malloc_trim(0)``, which hands every whole free page
inside the heap back to the kernel (``madvise``), after connections close:

* :meth:`MemoryTrimmer.connection_closed` is all a closing connection costs: it schedules one
  check, ``delay`` seconds later (the closes of one wave are then all done, and their memory
  freed by reference counting), unless one is scheduled already;
* checks run at most once per ``interval`` seconds, so a churn of connections does not trim on
  every close;
* a check trims only when the allocator holds at least ``threshold`` bytes free
  (``mallinfo2()``, glibc 2.33 and later; on an older glibc every check trims). Trimming costs
  in proportion to the memory it gives back (some 170 ms for 450 MiB of 16 KiB pieces) and
  next to nothing when there is none (a few tens of microseconds).

It knows nothing of any protocol: every server's :class:`~rsocket_tx.transports.limits.
ConnectionLimit` calls :meth:`~MemoryTrimmer.connection_closed` when a connection it counted
is released, so the servers of every protocol (RSocket, the Jini ERI mux, Reactive Streams
network, a one-port server) share :func:`process_trimmer`, one per process. Where there is
no glibc (musl, macOS, Windows) the trimmer does nothing and schedules nothing.
"""

from __future__ import annotations

import ctypes
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from twisted.logger import Logger

__all__ = ["MemoryTrimmer", "DEFAULT_TRIM_DELAY", "DEFAULT_TRIM_INTERVAL",
           "DEFAULT_TRIM_THRESHOLD", "glibc_free_bytes", "glibc_malloc_trim", "process_trimmer"]

_log = Logger()

#: Seconds from the first close to the check: the rest of a wave of closes is done by then.
DEFAULT_TRIM_DELAY = 1.0
#: The fewest seconds between two checks, however many connections close.
DEFAULT_TRIM_INTERVAL = 5.0
#: Bytes the allocator must hold free for a check to trim (16 MiB).
DEFAULT_TRIM_THRESHOLD = 16 * 1024 * 1024


class _MallInfo2(ctypes.Structure):
    """glibc's ``struct mallinfo2`` (every field a ``size_t``, bytes or counts)."""

    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


def _glibc() -> Any:
    """The C library when it is glibc (it has ``malloc_trim`` and ``gnu_get_libc_version``),
    else None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)  # the symbols already loaded: the process's C library
        libc.gnu_get_libc_version  # noqa: B018 - glibc has it, musl does not
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return libc


_LIBC = _glibc()


def _mallinfo2() -> Callable[[], _MallInfo2] | None:
    if _LIBC is None:
        return None
    try:
        fn = _LIBC.mallinfo2  # glibc >= 2.33
    except AttributeError:
        return None
    fn.argtypes = []
    fn.restype = _MallInfo2
    mallinfo2: Callable[[], _MallInfo2] = fn  # (its restype: it returns a _MallInfo2)
    return mallinfo2


_MALLINFO2 = _mallinfo2()


def glibc_malloc_trim() -> bool:
    """Call glibc's ``malloc_trim(0)``: give every whole free page of the allocator's heaps
    back to the kernel.

    :returns: True when memory was given back; False when none was, or there is no glibc.
    """
    if _LIBC is None:
        return False
    return bool(_LIBC.malloc_trim(0))


def glibc_free_bytes() -> int | None:
    """Bytes glibc's allocator holds free in its heaps (``mallinfo2().fordblks``), whether
    still resident or already given back; None without glibc 2.33 or later."""
    if _MALLINFO2 is None:
        return None
    return int(_MALLINFO2().fordblks)


def _resident_bytes() -> int | None:
    """This process's resident set size in bytes (Linux ``/proc/self/statm``), or None."""
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * _PAGE_SIZE


try:
    _PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
except (ValueError, OSError, AttributeError):  # pragma: no cover - not a POSIX system
    _PAGE_SIZE = 4096


class MemoryTrimmer:
    """Trims the allocator's heap after connections close, at most once per ``interval``.

    :param trim: the trim function: no argument, returns True when memory was given back
        (default :func:`glibc_malloc_trim`); None: the trimmer does nothing (no glibc).
    :param free_bytes: returns the bytes the allocator holds free, or None when it cannot
        tell (then every check trims); default :func:`glibc_free_bytes`.
    :param reactor: ``IReactorTime`` provider the checks are scheduled on; None: the global
        reactor (imported when first needed).
    :param delay: seconds from a close to the check it schedules (>= 0).
    :param interval: the fewest seconds between two checks (>= 0).
    :param threshold: bytes the allocator must hold free for a check to trim (>= 0).
    :raises ValueError: a negative ``delay``, ``interval`` or ``threshold``.

    :ivar checks: checks run so far.
    :ivar trims: of those, the ones that trimmed.
    """

    def __init__(self, trim: Callable[[], bool] | None = glibc_malloc_trim, *,
                 free_bytes: Callable[[], int | None] = glibc_free_bytes,
                 reactor: Any = None, delay: float = DEFAULT_TRIM_DELAY,
                 interval: float = DEFAULT_TRIM_INTERVAL,
                 threshold: int = DEFAULT_TRIM_THRESHOLD) -> None:
        for name, value in (("delay", delay), ("interval", interval), ("threshold", threshold)):
            if not value >= 0:
                raise ValueError(f"MemoryTrimmer {name} must be >= 0, got {value!r}")
        self.trim = trim
        self.free_bytes = free_bytes
        self.delay = delay
        self.interval = interval
        self.threshold = threshold
        self.checks = 0
        self.trims = 0
        self._reactor = reactor
        self._pending: Any = None  # the scheduled check (IDelayedCall), if any
        self._last_check: float | None = None  # reactor time of the last check

    @property
    def enabled(self) -> bool:
        """Whether there is a trim function (False: :meth:`connection_closed` does nothing)."""
        return self.trim is not None

    @property
    def pending(self) -> bool:
        """Whether a check is scheduled."""
        return self._pending is not None

    def connection_closed(self) -> None:
        """A connection has closed (its memory is freed once its ``connectionLost`` returns):
        schedule a check ``delay`` seconds from now, or when ``interval`` has passed since the
        last one if that is later; nothing when a check is scheduled already."""
        if self._pending is not None or self.trim is None:
            return
        reactor = self._get_reactor()
        now = reactor.seconds()
        at = now + self.delay
        if self._last_check is not None:
            at = max(at, self._last_check + self.interval)
        self._pending = reactor.callLater(at - now, self._run)

    def cancel(self) -> None:
        """Cancel the scheduled check, if any (e.g. when the server stops)."""
        pending, self._pending = self._pending, None
        if pending is not None and pending.active():
            pending.cancel()

    def check(self) -> bool:
        """Trim now if the allocator holds at least ``threshold`` bytes free.

        :returns: whether it trimmed.
        """
        trim = self.trim
        if trim is None:
            return False
        self.checks += 1
        self._last_check = self._get_reactor().seconds()
        free = self.free_bytes()
        if free is not None and free < self.threshold:
            return False
        before = _resident_bytes()
        started = time.monotonic()
        trim()
        self.trims += 1
        after = _resident_bytes()
        if before is not None and after is not None:
            _log.debug("returned {released} bytes of freed memory to the system "
                       "(malloc_trim, {ms:.0f} ms); resident now {resident} bytes",
                       released=max(0, before - after), resident=after,
                       ms=(time.monotonic() - started) * 1000)
        return True

    def _run(self) -> None:
        self._pending = None
        self.check()

    def _get_reactor(self) -> Any:
        reactor = self._reactor
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = self._reactor = global_reactor
        return reactor

    def __repr__(self) -> str:
        state = "off" if self.trim is None else f"{self.trims}/{self.checks} checks trimmed"
        return f"<MemoryTrimmer {state}>"


_process_trimmer: MemoryTrimmer | None = None


def process_trimmer() -> MemoryTrimmer:
    """The trimmer every server of this process shares (on the global reactor): memory is the
    process's, however many servers it runs. It does nothing without glibc."""
    global _process_trimmer
    if _process_trimmer is None:
        _process_trimmer = MemoryTrimmer(glibc_malloc_trim if _LIBC is not None else None)
    return _process_trimmer
