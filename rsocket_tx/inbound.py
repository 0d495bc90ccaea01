"""The inbound half every protocol over Twisted shares: items a connection delivers, consumed
by ``async for``, with demand that follows consumption.

Protocol-neutral, Twisted layer (DESIGN §2). A *window* of items is requested when the stream
opens; each time the application has consumed ``max(1, window // 2)`` of them, a request for
that many goes out at once (RSocket 1.0 Protocol §Flow Control: REQUEST_N; Reactive Streams
network draft: *request*), so the sender refills while the rest is consumed and at most
``window`` items ever wait here. Items that arrived before the end are delivered first; the
end is seen after them.

The window may be sized by bytes as well as items (``window_bytes``, ``max_window``): while
the items that arrive are small, it grows to as many items of the largest size seen as fit
``window_bytes`` (at most ``max_window``), the growth requested with the next top-up. A
window of a few hundred tiny items is used up by one read of the transport: its top-up then
leaves only after the whole window was consumed, and the sender idles a round trip per
window; a window of a few reads' worth of bytes keeps it sending.

Used by :class:`rsocket_tx.streams.RequestStream` (RSocket) and
:class:`rsocket_tx.rsnet.publishers.Subscription` (Reactive Streams network).
"""

from __future__ import annotations

from collections import deque
from typing import Any, NoReturn

from twisted.internet.defer import Deferred

from .bridge import fresh_error

__all__ = ["InboundItems"]


class InboundItems:
    """An async iterator over the items a connection delivers.

    The connection feeds it with :meth:`on_next`, :meth:`on_complete`, :meth:`on_error` and
    :meth:`wake`; a subclass says how demand and a cancel reach its protocol
    (:meth:`request`, :meth:`send_cancel`, :meth:`wake_later`) and how the error is raised
    (:meth:`raised`).

    :param window: the demand window (items, >= 1), requested up front.
    :param max_window: the most items the window may grow to by ``window_bytes`` (None:
        ``window``, no growth).
    :param window_bytes: bytes (as :meth:`item_size` counts them) the window may hold when
        the items are small; 0: the window stays ``window`` items.
    """

    __slots__ = ("_limit", "_consumed", "_queue", "_waiter", "_done", "_open", "_error",
                 "_wake_pending", "_window", "_max_window", "_window_bytes", "_sizing",
                 "_max_size")

    #: what the iterator is called in messages
    kind = "stream"

    def __init__(self, window: int, *, max_window: int | None = None,
                 window_bytes: int = 0) -> None:
        self._window = window
        self._limit = max(1, window // 2)
        self._consumed = 0
        self._max_window = window if max_window is None else max(window, max_window)
        self._window_bytes = window_bytes
        #: items are being sized (the window may still grow)
        self._sizing = window_bytes > 0 and self._max_window > window
        self._max_size = 0  # the largest item seen so far (bytes, see item_size)
        self._queue: deque[Any] = deque()
        self._waiter: Deferred[Any] | None = None
        self._done = False
        self._open = True  # the inbound half is still live on the connection
        self._error: BaseException | None = None
        self._wake_pending = False

    # -- what a protocol says -------------------------------------------------------------

    def request(self, n: int) -> None:
        """Ask the sender for ``n`` (>= 1) more items."""
        raise NotImplementedError

    def send_cancel(self) -> None:
        """Tell the sender nothing more is wanted."""
        raise NotImplementedError

    def wake_later(self) -> bool:
        """While a read is being dispatched: have :meth:`wake` called once every event of it
        is delivered, and return True; otherwise return False (wake now)."""
        return False

    def raised(self, error: BaseException) -> BaseException:
        """The exception iteration raises for the error the stream ended with: a fresh copy
        (:func:`rsocket_tx.bridge.fresh_error`), so that its traceback, which holds the
        consumer's frames, never makes a reference cycle through the stored error."""
        return fresh_error(error)

    # -- application side -----------------------------------------------------------------

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        queue = self._queue
        if queue:
            item = queue.popleft()
            if self._open:  # (_consume(1) inlined: the per-item path)
                self._consumed += 1
                if self._consumed >= self._limit:
                    self._replenish()
            return item
        if self._done:
            self._stop()
        item = await self._wait()
        if item is None:
            self._stop()
        self._consume(1)
        return item

    def _stop(self) -> NoReturn:
        if self._error is not None:
            raise self.raised(self._error)
        raise StopAsyncIteration

    def _wait(self) -> Deferred[Any]:
        if self._waiter is not None:
            raise RuntimeError(f"this {self.kind} is already being consumed")
        d: Deferred[Any] = Deferred(self._cancel_wait)
        self._waiter = d
        return d

    def _cancel_wait(self, d: Deferred[Any]) -> None:
        # the awaiting task was cancelled: give up the wait (the stream stays open)
        if self._waiter is d:
            self._waiter = None

    @property
    def ended(self) -> bool:
        """True once the stream has completed, failed or been cancelled (items may still be
        queued)."""
        return self._done

    @property
    def error(self) -> BaseException | None:
        """The error the stream ended with (None while open, on completion or cancel)."""
        return self._error

    def cancel(self) -> None:
        """Cancel (if still live: :meth:`send_cancel`): nothing more is delivered, items not
        yet consumed are dropped, and iteration stops."""
        if self._done:
            return
        if self._open:
            self._open = False
            self.send_cancel()
        self._queue.clear()
        self._end(None)

    def _consume(self, n: int) -> None:
        if not self._open or n == 0:
            return
        self._consumed += n
        if self._consumed >= self._limit:
            self._replenish()

    def _replenish(self) -> None:
        """Request what was consumed (and what the window grew by)."""
        n, self._consumed = self._consumed, 0
        if self._sizing:
            n += self._grow()
        self.request(n)

    def _grow(self) -> int:
        """Size the window by bytes: as many items of the largest size seen so far as fit
        ``window_bytes``, between the initial window and ``max_window``. Returns the items it
        grew by (requested on top of the replenishment)."""
        if self._max_size == 0:
            return 0  # nothing sized yet
        target = min(self._max_window, self._window_bytes // self._max_size)
        # the largest size seen only grows, so the target only shrinks: sized once is enough
        self._sizing = False
        extra = target - self._window
        if extra <= 0:
            return 0
        self._window = target
        self._limit = max(1, target // 2)
        return extra

    def item_size(self, item: Any) -> int:
        """Bytes ``item`` counts for the byte window (a subclass that sizes items overrides
        it; the default, 1, makes every item count as one byte)."""
        return 1

    # -- protocol side --------------------------------------------------------------------

    def on_next(self, item: Any) -> None:
        """An item arrived: queue it (and wake a waiting consumer)."""
        if self._done:
            return
        if self._sizing:
            size = self.item_size(item)
            if size > self._max_size:
                self._max_size = size
        self._queue.append(item)
        if self._waiter is not None and not self._wake_pending:
            if self.wake_later():
                self._wake_pending = True
            else:
                self.wake()

    def wake(self) -> None:
        """Hand the first queued item to a waiting consumer."""
        self._wake_pending = False
        waiter = self._waiter
        if waiter is not None and self._queue:
            self._waiter = None
            waiter.callback(self._queue.popleft())

    def on_complete(self) -> None:
        """The sender completed the stream."""
        self._open = False
        self._end(None)

    def on_error(self, error: BaseException) -> None:
        """The stream failed (the peer's error or cancel, the connection's end)."""
        self._open = False
        self._end(error)

    def ended_with(self, error: BaseException | None) -> bool:
        """The stream has just ended (``error``: None on completion or cancel); return True
        if the waiting consumer was answered here."""
        return False

    def _end(self, error: BaseException | None) -> None:
        if self._done:
            return
        self._done = True
        self._error = error
        if self.ended_with(error):
            return
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            # items that arrived in the same read come first; the end is seen after them
            waiter.callback(self._queue.popleft() if self._queue else None)
