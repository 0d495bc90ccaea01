"""The outbound pump every protocol over Twisted shares: it pulls an application's source (an
iterable, an async iterable, or a Deferred/coroutine of one) only as the receiver's credit
allows and while the transport is not paused, and ends the stream when the source ends or
fails.

Protocol-neutral, Twisted layer (DESIGN §2): a protocol subclasses :class:`SourcePump` and says
what credit is (RSocket 1.0 Protocol §Flow Control: REQUEST_N items; Reactive Streams network
draft: the subscriber's demand), how an item is checked and sent, and how the end is told to
its host. Used by :class:`rsocket_tx.streams.OutboundPump` (RSocket) and
:class:`rsocket_tx.rsnet.publishers.ElementPump` (Reactive Streams network).

Completion and errors need no credit (RSocket 1.0 Protocol §Flow Control; Reactive Streams
§1.4, §1.5). So when the item that uses the last credit has been sent, the pump pulls ONE
item ahead (``next()``, or one ``__anext__`` awaited without credit): if the source is over
(``StopIteration`` / ``StopAsyncIteration``) the stream completes at once, if it raises the
stream fails; otherwise the item is held and sent first when credit arrives. A stop (cancel,
connection end) drops the held item unsent and closes the source (``close()`` /
``aclose()``). The look-ahead happens only when the credit reaches 0, never per item.

An async iterator may also have ``ready(n) -> list``, returning up to ``n`` items available
now (an empty list when none is): the pump then sends those in batches, as for a plain
iterable, and awaits ``__anext__`` only when nothing is ready or the credit is used up (for
sources fed from another thread in chunks, e.g. a Spark task's rows).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, Iterable
from typing import Any, Protocol

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.logger import Logger

__all__ = ["FLUSH_BYTES", "PumpHost", "SYNC_BATCH", "SourcePump"]

#: Items a synchronous source may emit in one reactor turn before other streams and I/O run.
SYNC_BATCH = 512
#: Bytes one pump turn queues before it hands them to the transport (so that a full transport
#: buffer can pause the pump, ``pauseProducing``, in the middle of a large batch).
FLUSH_BYTES = 256 * 1024

_log = Logger()

#: what _anext returns at the end of an async source
_END = object()
#: what _anext returns when the wait was cancelled (as a CancelledError failure would be)
_CANCELLED = object()
#: SourcePump._held when no look-ahead item is held (None could be a (bad) item)
_NOTHING: Any = object()


class PumpHost(Protocol):
    """What a :class:`SourcePump` needs of the protocol carrying its stream, besides the
    calls its subclass makes (credit, sending)."""

    #: the ``IReactorTime`` provider
    reactor: Any
    #: the transport asked us to stop producing (its buffer is full)
    paused: bool

    def flush(self, force: bool = False) -> None:
        """Write what is queued (``force``: even inside a dispatch)."""
        ...

    def pump_complete(self, pump: Any) -> None:
        """``pump``'s source ended: complete its stream."""
        ...

    def pump_failed(self, pump: Any, error: Any) -> None:
        """``pump``'s source failed: fail its stream with ``error`` (see
        :meth:`SourcePump.error_for`)."""
        ...


async def _anext(it: Any) -> Any:
    try:
        return await it.__anext__()
    except StopAsyncIteration:
        return _END
    except CancelledError as exc:
        # our own cancel (SourcePump.stop): the source is done. Its traceback holds the frames
        # of the stack that cancelled it (the connection's close) in a reference cycle with
        # the exception; dropping it lets reference counting free them.
        exc.__traceback__ = None
        return _CANCELLED


class SourcePump:
    """Sends a source's items on one stream as credit allows (see the module docstring).

    Subclasses implement :meth:`credit`, :meth:`accept`, :meth:`size` and :meth:`send`,
    may override :meth:`prepare` and :meth:`started`, and set :attr:`source_error`. They call
    :meth:`begin` with the source once the host knows the pump.

    :param host: the :class:`PumpHost` (the protocol).
    :ivar host: the host.
    """

    __slots__ = ("host", "_iter", "_async", "_batching", "_stopped", "_busy", "_scheduled",
                 "_source_d", "_pending", "_in_pull", "_held", "_ahead", "plain_limit")

    #: the TypeError message for a source that is not iterable (``{}``: its type's name)
    source_error = "a source must be an iterable or async iterable, not {}"
    #: the class of the items :meth:`accept` passes unchanged when they have no ``metadata``
    #: (None) and at most :attr:`plain_limit` bytes of ``data`` (their :meth:`size`): a sync
    #: source's such items are sent without a call to :meth:`accept` and :meth:`size` each.
    #: None (the default): every item goes through them.
    plain_class: type | None = None

    def __init__(self, host: Any) -> None:
        self.host = host
        self._iter: Any = None
        self._async = False
        self._batching = False  # the async source also has ready(n): batches without awaits
        self._stopped = False
        self._busy = False  # an async __anext__ is outstanding
        self._scheduled: Any = None
        self._source_d: Deferred[Any] | None = None
        self._pending: Deferred[Any] | None = None  # the outstanding async __anext__
        self._in_pull = False
        self._held: Any = _NOTHING  # the item pulled beyond the credit
        self._ahead = False  # the outstanding __anext__ was issued without credit
        #: see :attr:`plain_class` (bytes)
        self.plain_limit = -1

    # -- what a protocol says -------------------------------------------------------------

    def credit(self) -> int:
        """The items the receiver may still be sent now (0: none)."""
        raise NotImplementedError

    def accept(self, item: Any) -> Any:
        """``item`` checked (and converted) for sending.

        :raises TypeError: or :class:`ValueError`: it cannot be sent (the stream fails).
        """
        return item

    def size(self, item: Any) -> int:
        """``item``'s size in bytes (for :data:`FLUSH_BYTES`)."""
        raise NotImplementedError

    def send(self, items: list[Any]) -> None:
        """Send accepted ``items`` (within the credit) to the host."""
        raise NotImplementedError

    def prepare(self, source: Any) -> Any:
        """The iterable to pull, from what the application gave (may raise)."""
        return source

    def started(self) -> None:
        """The source is known (before the first item is pulled)."""

    def error_for(self, exc: BaseException) -> Any:
        """What :meth:`PumpHost.pump_failed` is given for a source's exception."""
        return exc

    # -- the pump -------------------------------------------------------------------------

    def begin(self, source: Any) -> None:
        """Start with ``source``; a Deferred or awaitable is waited for first."""
        if isinstance(source, Deferred) or inspect.isawaitable(source):
            d = source if isinstance(source, Deferred) else \
                ensureDeferred(source)  # type: ignore[arg-type]
            self._source_d = d
            d.addCallbacks(self._set_source, self._source_failed)
        else:
            self._set_source(source)

    def _source_failed(self, failure: Any) -> None:
        self._source_d = None
        if not self._stopped:
            self._fail(failure.value)

    def _set_source(self, source: Any) -> None:
        self._source_d = None
        if self._stopped:
            return
        try:
            source = self.prepare(source)
            if isinstance(source, AsyncIterable):
                self._iter = source.__aiter__()
                self._async = True
                self._batching = callable(getattr(self._iter, "ready", None))
            elif isinstance(source, Iterable):
                self._iter = iter(source)
            else:
                raise TypeError(self.source_error.format(type(source).__name__))
        except Exception as exc:  # noqa: BLE001 - fails the stream
            self._fail(exc)
            return
        self.started()
        self.resume()

    @property
    def stopped(self) -> bool:
        """True once the pump has stopped: its source ended, failed, or it was stopped."""
        return self._stopped

    def resume(self) -> None:
        """Pull more if there is credit and the transport is not paused."""
        if self._stopped or self._iter is None or self._busy:
            return
        if self._async:
            self._pull_async()
        else:
            self._pull_sync()

    def stop(self) -> None:
        """Stop pulling (cancel, error, the connection's end): close the source; nothing more
        is sent."""
        if self._stopped:
            return
        self._stopped = True
        self._held = _NOTHING  # a held look-ahead item is dropped unsent
        if self._scheduled is not None and self._scheduled.active():
            self._scheduled.cancel()
        self._scheduled = None
        if self._source_d is not None:
            self._source_d.cancel()
        if self._pending is not None:
            # an async source waiting inside an await: cancel that wait, so the generator
            # unwinds (its finally blocks run) before it is closed
            pending, self._pending = self._pending, None
            pending.cancel()
        self._close_source()

    def _close_source(self) -> None:
        it, self._iter = self._iter, None
        if it is None:
            return
        try:
            if self._async:
                aclose = getattr(it, "aclose", None)
                if aclose is not None:
                    ensureDeferred(aclose()).addErrback(lambda f: None)
            else:
                close = getattr(it, "close", None)
                if close is not None:
                    close()
        except Exception:  # noqa: BLE001 - closing a source must not break the connection
            _log.failure("closing the source of {pump!r} raised", pump=self)

    def _pull_sync(self) -> None:
        host = self.host
        credit = self.credit()
        if credit <= 0:
            # no credit: still find out whether the source is over (the end needs none)
            if self._held is _NOTHING and not host.paused:
                self._look_ahead()
            host.flush()
            return
        out: list[Any] = []
        if self._held is not _NOTHING:
            if host.paused:
                return
            held, self._held = self._held, _NOTHING
            out.append(held)
            credit -= 1
        it = self._iter
        batch = credit if credit < SYNC_BATCH else SYNC_BATCH
        size = 0
        paused = False
        plain: Any = self.plain_class  # (no narrowing of item by its class)
        limit = self.plain_limit
        for _ in range(batch):
            if host.paused:
                paused = True
                break
            try:
                item = next(it)
                if item.__class__ is plain and item.metadata is None and \
                        len(item.data) <= limit:
                    size += len(item.data)  # (accept would pass it unchanged)
                else:
                    item = self.accept(item)
                    size += self.size(item)
            except StopIteration:
                self.send(out)
                self._finish()
                return
            except Exception as exc:  # noqa: BLE001 - fails the stream
                self.send(out)
                self._fail(exc)
                return
            out.append(item)
            if size >= FLUSH_BYTES:
                self.send(out)
                out = []
                size = 0
                host.flush(force=True)
                if self._stopped:
                    return
        self.send(out)
        if not paused and not self._stopped:
            if credit > batch:
                # batch used up with credit left: let other streams and I/O run, then go on
                if self._scheduled is None:
                    self._scheduled = host.reactor.callLater(0, self._continue)
            elif not host.paused:
                self._look_ahead()  # the credit is used up: is the source over?
        host.flush()

    def _look_ahead(self) -> None:
        """Pull one item from a sync source without credit: end the stream if the source is
        over (or raises), else hold the item until credit arrives."""
        try:
            self._held = self.accept(next(self._iter))
        except StopIteration:
            self._finish()
        except Exception as exc:  # noqa: BLE001 - fails the stream
            self._fail(exc)

    def _continue(self) -> None:
        self._scheduled = None
        self.resume()

    def _pull_ready(self) -> bool:
        """Send what a batching async source has ready now (its ``ready(n)``); return whether
        the caller should go on with ``__anext__`` (credit left, nothing more ready)."""
        host = self.host
        ready = self._iter.ready
        for _ in range(SYNC_BATCH):
            if self._stopped or host.paused:
                return False
            credit = self.credit()
            if credit <= 0:
                return True  # the caller's __anext__ looks one item ahead (the end?)
            out: list[Any] = []
            try:
                items = ready(credit if credit < SYNC_BATCH else SYNC_BATCH)
                if not items:
                    return True
                for item in items:
                    out.append(self.accept(item))
            except Exception as exc:  # noqa: BLE001 - fails the stream
                self.send(out)
                self._fail(exc)
                return False
            self.send(out)
            host.flush(force=True)
        return True

    def _pull_async(self) -> None:
        # a loop, not recursion: an async source whose items are ready at once completes each
        # __anext__ synchronously; after a batch of those, yield to the reactor
        if self._in_pull:
            return
        host = self.host
        self._in_pull = True
        try:
            if self._held is not _NOTHING:
                if host.paused or self.credit() <= 0:
                    return
                held, self._held = self._held, _NOTHING
                self.send([held])
            if self._batching and not self._pull_ready():
                return
            for _ in range(SYNC_BATCH):
                if self._stopped or self._busy or host.paused or self._held is not _NOTHING:
                    return
                # without credit this __anext__ looks one item ahead: held if one comes
                self._ahead = self.credit() <= 0
                self._busy = True
                try:
                    d = ensureDeferred(_anext(self._iter))
                except Exception as exc:  # noqa: BLE001 - fails the stream
                    self._busy = False
                    self._fail(exc)
                    return
                self._pending = d
                d.addCallbacks(self._got_async, self._async_failed)
            if not self._stopped and not self._busy and self._scheduled is None:
                self._scheduled = host.reactor.callLater(0, self._continue)
        finally:
            self._in_pull = False
            host.flush()

    def _got_async(self, item: Any) -> None:
        self._busy = False
        self._pending = None
        if self._stopped or item is _CANCELLED:
            return
        if item is _END:
            self._finish()
            self.host.flush()
            return
        try:
            item = self.accept(item)
        except Exception as exc:  # noqa: BLE001 - fails the stream
            self._fail(exc)
            self.host.flush()
            return
        if self._ahead:
            self._ahead = False
            if self.credit() <= 0:
                self._held = item  # sent when credit arrives (resume)
                return
        self.send([item])
        if not self._in_pull:
            self.host.flush()
            self.resume()

    def _async_failed(self, failure: Any) -> None:
        self._busy = False
        self._pending = None
        if self._stopped or failure.check(CancelledError):
            return
        self._fail(failure.value)
        self.host.flush()

    def _finish(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._held = _NOTHING
        self._iter = None
        self.host.pump_complete(self)

    def _fail(self, exc: BaseException) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._held = _NOTHING
        self._close_source()
        self.host.pump_failed(self, self.error_for(exc))
