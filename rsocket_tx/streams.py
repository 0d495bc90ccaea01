"""Streams on the Twisted side: inbound item streams and outbound credit-driven pumps.

:class:`RequestStream` is what ``request_stream`` / ``request_channel`` return and what a
channel responder receives as its inbound side: an async iterator of :class:`Payload` that sends
REQUEST_N as the application consumes (spec §Flow Control, Reactive Streams semantics).

:class:`OutboundPump` pulls a sync or async iterable only while the peer has granted credit and
the transport is not paused (Twisted producer/consumer), and turns its end into COMPLETE or ERROR.
Those need no credit (spec §Flow Control): once the credit is used up the pump pulls one item
ahead and holds it, so a source that ends there completes without waiting for more REQUEST_N.
"""

from __future__ import annotations

import inspect
from collections import deque
from collections.abc import AsyncIterable, Iterable
from typing import TYPE_CHECKING

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred, succeed
from twisted.logger import Logger
from zope.interface import implementer

from .core.errors import ApplicationError, PayloadTooLargeError, RSocketError, StreamError
from .core.payload import Payload
from .interfaces import IStreamReceiver

if TYPE_CHECKING:  # pragma: no cover
    from .interfaces import IStreamHost

__all__ = ["RequestStream", "DecodedStream", "OutboundPump", "DEFAULT_PREFETCH", "to_rsocket_error"]

#: Items requested up front on a stream; REQUEST_N tops the window up as items are consumed.
DEFAULT_PREFETCH = 256
#: Items a synchronous source may emit in one reactor turn before yielding to other streams.
_SYNC_BATCH = 512
#: Bytes queued by one pump turn before it hands them to the transport.
_FLUSH_BYTES = 256 * 1024

_log = Logger()


def to_rsocket_error(failure_or_exc) -> RSocketError:
    """Map an exception raised by application code to the error sent on the wire.

    Stream-level RSocketErrors keep their code and message; any other exception (including a
    connection-level RSocketError, whose code is only valid on stream 0) becomes
    ERROR[APPLICATION_ERROR] with its message (or the exception's class name when empty).
    """
    exc = getattr(failure_or_exc, "value", failure_or_exc)
    if isinstance(exc, (StreamError, PayloadTooLargeError)):
        return exc
    if isinstance(exc, RSocketError):
        # a connection-level code (CONNECTION_ERROR, setup codes) is not valid on a stream
        return ApplicationError(exc.message or type(exc).__name__)
    message = str(exc) or type(exc).__name__
    return ApplicationError(message)


@implementer(IStreamReceiver)
class RequestStream:
    """An inbound stream of :class:`Payload`: ``async for payload in stream``.

    Flow control: ``prefetch`` items are requested when the stream opens; each time half of
    that window has been consumed by the application, a REQUEST_N for the consumed count is
    written at once (the responder refills while the rest is consumed), so at most
    ``prefetch`` items are ever buffered here.

    Iteration raises the typed :class:`~rsocket_tx.core.errors.RSocketError` the peer sent
    (e.g. :class:`~rsocket_tx.core.errors.ApplicationError`), or
    :class:`~rsocket_tx.core.errors.ConnectionLostError` if the connection dies; it stops
    (``StopAsyncIteration``) on completion or after :meth:`cancel`.

    The connection feeds it through :class:`~rsocket_tx.interfaces.IStreamReceiver`
    (:meth:`on_next`, :meth:`on_complete`, :meth:`on_error`, :meth:`wake`) and it talks back
    through :class:`~rsocket_tx.interfaces.IStreamHost` (``request_more``, ``cancel``).

    :param host: the :class:`~rsocket_tx.interfaces.IStreamHost` carrying the stream (the
        :class:`~rsocket_tx.protocol.RSocketProtocol`).
    :param stream_id: the stream id on the connection.
    :param prefetch: items requested up front.
    :ivar stream_id: the stream id on the connection.
    """

    __slots__ = ("_protocol", "stream_id", "_prefetch", "_limit", "_consumed", "_queue",
                 "_waiter", "_done", "_error", "_collector", "_take", "_pump", "_open",
                 "_wake_pending", "__weakref__")

    def __init__(self, host: IStreamHost, stream_id: int, prefetch: int) -> None:
        self._protocol = host
        self.stream_id = stream_id
        self._prefetch = prefetch
        self._limit = max(1, prefetch // 2)
        self._consumed = 0
        self._queue: deque[Payload] = deque()
        self._waiter: Deferred | None = None
        self._done = False
        self._open = True  # the inbound half is still live on the connection
        self._error: BaseException | None = None
        self._collector: list[Payload] | None = None
        self._take: int | None = None
        self._pump: OutboundPump | None = None
        self._wake_pending = False

    # -- application side -----------------------------------------------------------------

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> Payload:
        queue = self._queue
        if queue:
            item = queue.popleft()
            self._consume(1)
            return item
        if self._done:
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        self._waiter = d = Deferred()
        item = await d
        if item is None:
            if self._error is not None:
                raise self._error
            raise StopAsyncIteration
        self._consume(1)
        return item

    def collect(self, take: int | None = None) -> Deferred:
        """Gather the items into a list.

        :param take: stop after this many items and cancel the rest (CANCEL to the peer);
            None collects until the stream completes.
        :returns: Deferred firing with ``list[Payload]``, or failing with the stream's error.
        :raises ValueError: ``take`` < 0; :class:`RuntimeError` if iteration already began.
        """
        if take is not None and take < 0:
            raise ValueError(f"take must be >= 0, got {take}")
        if self._collector is not None or self._waiter is not None:
            raise RuntimeError("this stream is already being consumed")
        items = list(self._queue)
        self._queue.clear()
        if take is not None and len(items) >= take:
            del items[take:]
            self.cancel()
            return succeed(items)
        self._consume(len(items))
        self._collector = items
        self._take = take
        self._waiter = d = Deferred()
        if self._done:
            self._finish_collect()
        return d

    def take_ready(self, max_items: int | None = None) -> list[Payload]:
        """Take the items buffered now, without waiting: for consumers that handle items in
        batches (e.g. handing chunks to another thread) instead of one ``__anext__`` each.

        The items taken count as consumed for flow control, exactly as if iterated: a REQUEST_N
        goes out each time half of the ``prefetch`` window has been consumed. Do not mix with
        ``async for`` or :meth:`collect` on the same stream.

        :param max_items: take at most this many (None: all buffered).
        :returns: the items, oldest first; an empty list when none is buffered (see
            :meth:`when_ready` to wait, :attr:`ended` / :attr:`error` for the end).
        :raises ValueError: ``max_items`` < 0.
        """
        queue = self._queue
        if max_items is None or max_items >= len(queue):
            items = list(queue)
            queue.clear()
        else:
            if max_items < 0:
                raise ValueError(f"max_items must be >= 0, got {max_items}")
            items = [queue.popleft() for _ in range(max_items)]
        self._consume(len(items))
        return items

    def when_ready(self) -> Deferred:
        """A Deferred firing with None once an item is buffered or the stream has ended
        (at once if either is already so). Nothing is consumed: follow with
        :meth:`take_ready`.

        :raises RuntimeError: the stream is already being consumed by ``async for`` or
            :meth:`collect`.
        """
        if self._queue or self._done:
            return succeed(None)
        if self._collector is not None or self._waiter is not None:
            raise RuntimeError("this stream is already being consumed")
        self._waiter = d = Deferred()
        return d.addCallback(self._put_back)

    def _put_back(self, item) -> None:
        if item is not None:
            self._queue.appendleft(item)  # handed to the waiter by wake/_end: not consumed

    @property
    def ended(self) -> bool:
        """True once the stream has completed, failed or been cancelled (items may still be
        buffered: :meth:`take_ready` returns them)."""
        return self._done

    @property
    def error(self) -> BaseException | None:
        """The error the stream ended with (None while open, on completion or cancel)."""
        return self._error

    def cancel(self) -> None:
        """Cancel the stream: CANCEL to the peer (if still live); iteration stops."""
        if self._done:
            return
        if self._open:
            self._open = False
            self._protocol.cancel(self.stream_id)
        self._queue.clear()  # nothing more is delivered after a cancel
        self._end(None)

    # -- protocol side (IStreamReceiver) ----------------------------------------------------

    def attach_outbound(self, pump: OutboundPump | None) -> None:
        """A channel's other half: ``pump`` (its outbound items) stops when this stream
        fails."""
        self._pump = pump

    def _consume(self, n: int) -> None:
        if not self._open or n == 0:
            return
        self._consumed += n
        if self._consumed >= self._limit:
            n, self._consumed = self._consumed, 0
            self._protocol.request_more(self.stream_id, n)

    def on_next(self, payload: Payload) -> None:
        """An item arrived: queue it (or hand it to a waiting consumer)."""
        if self._done:
            return
        collector = self._collector
        if collector is not None:
            collector.append(payload)
            if self._take is not None and len(collector) >= self._take:
                self.cancel()
                return
            self._consume(1)
            return
        self._queue.append(payload)
        if self._waiter is not None and not self._wake_pending:
            if self._protocol.wake_later(self):
                self._wake_pending = True
            else:
                self.wake()

    def wake(self) -> None:
        """Hand the first queued item to a waiting ``__anext__``."""
        self._wake_pending = False
        waiter = self._waiter
        if waiter is not None and self._queue:
            self._waiter = None
            waiter.callback(self._queue.popleft())

    def on_complete(self) -> None:
        """The peer completed the stream."""
        self._open = False
        self._end(None)

    def on_error(self, error: BaseException) -> None:
        """The stream failed (the peer's ERROR or CANCEL, the connection's end)."""
        self._open = False
        self._end(error)

    def _end(self, error: BaseException | None) -> None:
        if self._done:
            return
        self._done = True
        self._error = error
        if self._pump is not None and error is not None:
            self._pump.stop()
        if self._collector is not None:
            self._finish_collect()
            return
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            # items that arrived in the same read come first; the end is seen after them
            waiter.callback(self._queue.popleft() if self._queue else None)

    def _finish_collect(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            return
        if self._error is not None:
            waiter.errback(self._error)
        else:
            waiter.callback(self._collector)


class DecodedStream:
    """A :class:`RequestStream` whose items are decoded values instead of Payloads.

    What ``request_stream(..., decode=True)`` returns: the same ``async for``,
    :meth:`collect` and :meth:`cancel`, with each item passed through a decoder (see
    :mod:`rsocket_tx.codecs`). A decoding error is raised where the item is consumed.

    :param stream: the underlying :class:`RequestStream`.
    :param decode: callable turning a :class:`Payload` into a value.
    """

    __slots__ = ("stream", "_decode")

    def __init__(self, stream: RequestStream, decode) -> None:
        self.stream = stream
        self._decode = decode

    @property
    def stream_id(self) -> int:
        """The stream id on the connection."""
        return self.stream.stream_id

    def __aiter__(self) -> DecodedStream:
        return self

    async def __anext__(self):
        return self._decode(await self.stream.__anext__())

    def collect(self, take: int | None = None) -> Deferred:
        """As :meth:`RequestStream.collect`, firing with the decoded values."""
        decode = self._decode
        return self.stream.collect(take).addCallback(lambda items: [decode(p) for p in items])

    def cancel(self) -> None:
        """Cancel the stream (CANCEL to the peer)."""
        self.stream.cancel()


class OutboundPump:
    """Sends a source of :class:`Payload` on one stream as credit allows.

    :param host: the :class:`~rsocket_tx.interfaces.IStreamHost` carrying the stream (the
        :class:`~rsocket_tx.protocol.RSocketProtocol`): the pump reads its ``credit`` and
        ``paused``, sends with ``send_item`` and ends with ``pump_complete``/``pump_failed``.
    :param stream_id: the stream to send on.
    :param source: an iterable, async iterable, or a Deferred/coroutine of one. An async
        iterator may also have ``ready(n) -> list[Payload]``, returning up to ``n`` items that
        are available now (an empty list when none is): the pump then sends those in batches,
        as for a plain iterable, and awaits ``__anext__`` only when nothing is ready or the
        credit is used up. This is for sources fed from another thread in chunks (e.g. a Spark
        task's rows); its end is told by ``__anext__`` raising ``StopAsyncIteration``.

    Completion and errors need no credit (spec §Flow Control; Reactive Streams allows
    onComplete without demand). So when the item that uses the last credit has been sent, the
    pump pulls ONE item ahead (``next()``, or one ``__anext__`` awaited without credit): if the
    source is over (``StopIteration`` / ``StopAsyncIteration``) COMPLETE goes out at once, if
    it raises ERROR does; otherwise the item is held and sent first when REQUEST_N arrives. A
    generator is therefore advanced at most one item beyond the requested count (a channel
    requester's outbound source: one item before the responder's first REQUEST_N). A CANCEL
    (or an error) drops the held item unsent and closes the source (``close()`` /
    ``aclose()``). The look-ahead happens only when the credit reaches 0, never per item.
    """

    __slots__ = ("_protocol", "stream_id", "_iter", "_async", "_batching", "_stopped",
                 "_busy", "_scheduled", "_source_d", "_pending", "_in_pull", "_held", "_ahead")

    def __init__(self, host: IStreamHost, stream_id: int, source) -> None:
        self._protocol = host
        self.stream_id = stream_id
        self._iter = None
        self._async = False
        self._batching = False  # the async source also has ready(n): batches without awaits
        self._stopped = False
        self._busy = False  # an async __anext__ is outstanding
        self._scheduled = None
        self._source_d: Deferred | None = None
        self._pending: Deferred | None = None  # the outstanding async __anext__
        self._in_pull = False
        #: the item pulled beyond the credit (see the class docstring), or _NOTHING
        self._held = _NOTHING
        self._ahead = False  # the outstanding __anext__ was issued without credit
        if isinstance(source, Deferred) or inspect.isawaitable(source):
            d = source if isinstance(source, Deferred) else ensureDeferred(source)
            self._source_d = d
            d.addCallbacks(self._set_source, self._fail)
        else:
            self._set_source(source)

    def _set_source(self, source) -> None:
        self._source_d = None
        if self._stopped:
            return
        try:
            if isinstance(source, AsyncIterable):
                self._iter = source.__aiter__()
                self._async = True
                self._batching = callable(getattr(self._iter, "ready", None))
            elif isinstance(source, Iterable):
                self._iter = iter(source)
            else:
                raise TypeError(
                    f"a stream source must be an iterable or async iterable of Payload, "
                    f"not {type(source).__name__}")
        except Exception as exc:  # noqa: BLE001 - becomes an ERROR on the stream
            self._fail(exc)
            return
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
        """Stop pulling (cancel or error): close the source and free the stream's pump."""
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
            _log.failure("closing a stream source raised")

    def _pull_sync(self) -> None:
        proto = self._protocol
        sid = self.stream_id
        credit = proto.credit(sid)
        if credit <= 0:
            # no credit: still find out whether the source is over (COMPLETE needs none)
            if self._held is _NOTHING and not proto.paused:
                self._look_ahead()
            proto.flush()
            return
        if self._held is not _NOTHING:
            if proto.paused:
                return
            held, self._held = self._held, _NOTHING
            if not self._send(held):
                return
            credit -= 1
        it = self._iter
        send = proto.send_item
        batch = credit if credit < _SYNC_BATCH else _SYNC_BATCH
        sent_bytes = 0
        for _ in range(batch):
            if proto.paused:
                break
            try:
                item = next(it)
            except StopIteration:
                self._finish()
                return
            except Exception as exc:  # noqa: BLE001 - becomes an ERROR on the stream
                self._fail(exc)
                return
            if item.__class__ is not Payload and not isinstance(item, Payload):
                self._fail(TypeError(f"stream items must be Payload, not {type(item).__name__}"))
                return
            send(sid, item)
            sent_bytes += len(item.data)
            if sent_bytes >= _FLUSH_BYTES:
                sent_bytes = 0
                proto.flush(force=True)
                if self._stopped:
                    return
        else:
            if credit > batch:
                # batch used up with credit left: let other streams and I/O run, then go on
                if self._scheduled is None and not self._stopped:
                    self._scheduled = proto.reactor.callLater(0, self._continue)
            elif not self._stopped and not proto.paused:
                self._look_ahead()  # the credit is used up: is the source over?
        proto.flush()

    def _look_ahead(self) -> None:
        """Pull one item from a sync source without credit: end the stream if the source is
        over (or raises), else hold the item until credit arrives."""
        try:
            self._held = next(self._iter)
        except StopIteration:
            self._finish()
        except Exception as exc:  # noqa: BLE001 - becomes an ERROR on the stream
            self._fail(exc)

    def _continue(self) -> None:
        self._scheduled = None
        self.resume()

    def _pull_ready(self) -> bool:
        """Send what a batching async source has ready now (its ``ready(n)``); return whether
        the caller should go on with ``__anext__`` (credit left, nothing more ready)."""
        proto = self._protocol
        sid = self.stream_id
        ready = self._iter.ready
        for _ in range(_SYNC_BATCH):
            if self._stopped or proto.paused:
                return False
            credit = proto.credit(sid)
            if credit <= 0:
                return True  # the caller's __anext__ looks one item ahead (the end?)
            try:
                items = ready(credit if credit < _SYNC_BATCH else _SYNC_BATCH)
            except Exception as exc:  # noqa: BLE001 - becomes an ERROR on the stream
                self._fail(exc)
                return False
            if not items:
                return True
            for item in items:
                if not self._send(item):
                    return False
            proto.flush(force=True)
        return True

    def _pull_async(self) -> None:
        # a loop, not recursion: an async source whose items are ready at once completes each
        # __anext__ synchronously; after a batch of those, yield to the reactor
        if self._in_pull:
            return
        proto = self._protocol
        sid = self.stream_id
        self._in_pull = True
        try:
            if self._held is not _NOTHING:
                if proto.paused or proto.credit(sid) <= 0:
                    return
                held, self._held = self._held, _NOTHING
                if not self._send(held):
                    return
            if self._batching and not self._pull_ready():
                return
            for _ in range(_SYNC_BATCH):
                if self._stopped or self._busy or proto.paused or self._held is not _NOTHING:
                    return
                # without credit this __anext__ looks one item ahead: held if one comes
                self._ahead = proto.credit(sid) <= 0
                self._busy = True
                try:
                    d = ensureDeferred(_anext(self._iter))
                except Exception as exc:  # noqa: BLE001
                    self._busy = False
                    self._fail(exc)
                    return
                self._pending = d
                d.addCallbacks(self._got_async, self._async_failed)
            if not self._stopped and not self._busy and self._scheduled is None:
                self._scheduled = proto.reactor.callLater(0, self._continue)
        finally:
            self._in_pull = False
            proto.flush()

    def _got_async(self, item) -> None:
        self._busy = False
        self._pending = None
        if self._stopped:
            return
        if item is _END:
            self._finish()
            return
        if self._ahead:
            self._ahead = False
            if self._protocol.credit(self.stream_id) <= 0:
                self._held = item  # sent when REQUEST_N arrives (resume)
                return
        if self._send(item) and not self._in_pull:
            self._protocol.flush()
            self.resume()

    def _async_failed(self, failure) -> None:
        self._busy = False
        self._pending = None
        if self._stopped or failure.check(CancelledError):
            return
        self._fail(failure.value)

    def _send(self, item) -> bool:
        if not isinstance(item, Payload):
            self._fail(TypeError(f"stream items must be Payload, not {type(item).__name__}"))
            return False
        self._protocol.send_item(self.stream_id, item)
        return True

    def _finish(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._held = _NOTHING
        self._iter = None
        self._protocol.pump_complete(self)

    def _fail(self, exc) -> None:
        if self._stopped:
            return
        self._stopped = True
        self._held = _NOTHING
        self._iter = None
        self._protocol.pump_failed(self, to_rsocket_error(exc))


_END = object()
#: OutboundPump._held when no look-ahead item is held (None could be a (bad) item)
_NOTHING = object()


async def _anext(it):
    try:
        return await it.__anext__()
    except StopAsyncIteration:
        return _END
