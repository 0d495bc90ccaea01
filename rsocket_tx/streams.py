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

from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from .bridge import failure_for
from .core.errors import ApplicationError, PayloadTooLargeError, RSocketError, StreamError
from .core.payload import Payload
from .inbound import InboundItems
from .interfaces import IStreamReceiver
from .pump import SourcePump

if TYPE_CHECKING:  # pragma: no cover
    from .interfaces import IStreamHost

__all__ = ["RequestStream", "DecodedStream", "OutboundPump", "DEFAULT_PREFETCH", "to_rsocket_error"]

#: Items requested up front on a stream; REQUEST_N tops the window up as items are consumed.
DEFAULT_PREFETCH = 256

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
class RequestStream(InboundItems):
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

    __slots__ = ("_protocol", "stream_id", "_prefetch", "_collector", "_take", "_pump",
                 "__weakref__")

    def __init__(self, host: IStreamHost, stream_id: int, prefetch: int) -> None:
        super().__init__(prefetch)
        self._protocol = host
        self.stream_id = stream_id
        self._prefetch = prefetch
        self._collector: list[Payload] | None = None
        self._take: int | None = None
        self._pump: OutboundPump | None = None

    # -- the protocol (InboundItems) ------------------------------------------------------

    def request(self, n: int) -> None:
        self._protocol.request_more(self.stream_id, n)

    def send_cancel(self) -> None:
        self._protocol.cancel(self.stream_id)

    def wake_later(self) -> bool:
        return self._protocol.wake_later(self)

    # -- application side -----------------------------------------------------------------

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

    # -- protocol side (IStreamReceiver) ----------------------------------------------------

    def attach_outbound(self, pump: OutboundPump | None) -> None:
        """A channel's other half: ``pump`` (its outbound items) stops when this stream
        fails."""
        self._pump = pump

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
        InboundItems.on_next(self, payload)

    def ended_with(self, error: BaseException | None) -> bool:
        if self._pump is not None and error is not None:
            self._pump.stop()
        if self._collector is not None:
            self._finish_collect()
            return True
        return False

    def _finish_collect(self) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is None:
            return
        if self._error is not None:
            waiter.errback(failure_for(self._error))
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


class OutboundPump(SourcePump):
    """Sends a source of :class:`Payload` on one stream as credit allows (the shared
    :class:`~rsocket_tx.pump.SourcePump`; RSocket 1.0 Protocol §Flow Control).

    :param host: the :class:`~rsocket_tx.interfaces.IStreamHost` carrying the stream (the
        :class:`~rsocket_tx.protocol.RSocketProtocol`): the pump reads its ``credit`` and
        ``paused``, sends with ``send_item`` and ends with ``pump_complete``/``pump_failed``
        (ERROR from :func:`to_rsocket_error`).
    :param stream_id: the stream to send on.
    :param source: an iterable, async iterable, or a Deferred/coroutine of one, of
        :class:`Payload` (an async iterator may also have ``ready(n)``: see
        :mod:`rsocket_tx.pump`). A generator is advanced at most one item beyond the
        requested count (a channel requester's outbound source: one item before the
        responder's first REQUEST_N); a CANCEL drops that item unsent and closes the source.
    """

    __slots__ = ("stream_id",)

    source_error = "a stream source must be an iterable or async iterable of Payload, not {}"

    def __init__(self, host: IStreamHost, stream_id: int, source) -> None:
        super().__init__(host)
        self.stream_id = stream_id
        self.begin(source)

    def credit(self) -> int:
        return self.host.credit(self.stream_id)

    def accept(self, item):
        if item.__class__ is not Payload and not isinstance(item, Payload):
            raise TypeError(f"stream items must be Payload, not {type(item).__name__}")
        return item

    def size(self, item) -> int:
        return len(item.data)

    def send(self, items: list) -> None:
        if self._stopped:
            return
        send, sid = self.host.send_item, self.stream_id
        for item in items:
            send(sid, item)

    def error_for(self, exc: BaseException) -> RSocketError:
        return to_rsocket_error(exc)
