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

from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, succeed
from zope.interface import implementer

from .bridge import failure_for
from .core.config import DEFAULT_OUTBOUND_FRAME_LIMIT
from .core.errors import (
    ApplicationError,
    PayloadTooLargeError,
    RequestTimeout,
    RSocketError,
    StreamError,
)
from .core.payload import Payload
from .inbound import InboundItems
from .interfaces import IStreamReceiver
from .pump import SourcePump

if TYPE_CHECKING:  # pragma: no cover
    from .interfaces import IStreamHost

__all__ = ["RequestStream", "DecodedStream", "OutboundPump", "DEFAULT_PREFETCH", "to_rsocket_error",
           "FRAME_OVERHEAD", "check_send_limit", "check_send_size", "check_timeout"]

#: Items requested up front on a stream; REQUEST_N tops the window up as items are consumed.
DEFAULT_PREFETCH = 256

#: The most bytes framing adds to each frame a payload travels in (RSocket 1.0 Protocol
#: §Framing, §Frame Header Format): the 3-byte length prefix, the 6-byte header, a request's
#: 4-byte initial request-n and the 3-byte metadata length.
FRAME_OVERHEAD = 16


def check_send_size(payload: Payload, max_send_buffer_size: int, frame_limit: int) -> None:
    """Refuse a payload that could never be sent: its frames (fragments included, spec
    §Fragmentation And Reassembly) are more bytes than may wait in the transport for the peer
    to read (``max_send_buffer_size``), so writing it would end the connection as a peer
    that does not read (:class:`~rsocket_tx.core.errors.ExcessiveBufferingError`).

    :param payload: the :class:`Payload` about to be sent.
    :param max_send_buffer_size: the connection's setting, bytes.
    :param frame_limit: the largest frame we send, bytes (the fragment size).
    :raises ValueError: the payload is too large, naming its size and the setting to raise.
    """
    metadata = payload.metadata
    size = len(payload.data) + (len(metadata) if metadata is not None else 0)
    wire = size + FRAME_OVERHEAD * (size // max(1, frame_limit - FRAME_OVERHEAD) + 1)
    if wire > max_send_buffer_size:
        raise ValueError(
            f"payload of {size:,} bytes ({wire:,} bytes framed) is over the local send limit, "
            f"max_send_buffer_size of {max_send_buffer_size:,} bytes: it could never be sent "
            f"(nothing was sent); raise ConnectionConfig(max_send_buffer_size=...) "
            f"(--max-send-buffer-size), or send the data in smaller payloads")


def check_send_limit(host, payload: Payload) -> None:
    """:func:`check_send_size` with the limits of ``host`` (an
    :class:`~rsocket_tx.interfaces.IRequesterHost`: its ``max_send_buffer_size`` and its
    connection's largest frame), cheap for the payloads that surely fit.

    :raises ValueError: as :func:`check_send_size`.
    """
    metadata = payload.metadata
    size = len(payload.data) + (len(metadata) if metadata is not None else 0)
    # fragments are at least 64 bytes (MIN_FRAGMENT_SIZE), so framing adds at most a third
    if size + size // 3 + FRAME_OVERHEAD > host.max_send_buffer_size:
        check_send_size(payload, *_limits(host))


def check_timeout(timeout: object) -> None:
    """Check a request's ``timeout=``: None (no timeout) or a positive, finite number of
    seconds.

    :raises TypeError: it is not a number (``bool`` included).
    :raises ValueError: it is zero, negative, NaN or infinite.
    """
    if timeout is None:
        return
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"timeout must be a number of seconds or None, not "
                        f"{type(timeout).__name__}")
    if not 0 < timeout < float("inf"):
        raise ValueError(f"timeout must be a positive, finite number of seconds, got {timeout!r}")


def _seconds(timeout: float) -> str:
    return f"{timeout:g} second{'' if timeout == 1 else 's'}"

def to_rsocket_error(failure_or_exc) -> RSocketError:
    """Map an exception raised by application code to the error sent on the wire.

    Stream-level RSocketErrors keep their code and message; a connection-level RSocketError
    (whose code is only valid on stream 0) becomes ERROR[APPLICATION_ERROR] with its message;
    any other exception (a bug, not a deliberate error) becomes ERROR[APPLICATION_ERROR]
    ``"Type: message"`` (``"KeyError: 'missing-key'"``; the class name alone when the message
    is empty), as Python prints it.
    """
    exc = getattr(failure_or_exc, "value", failure_or_exc)
    if isinstance(exc, (StreamError, PayloadTooLargeError)):
        return exc
    if isinstance(exc, RSocketError):
        # a connection-level code (CONNECTION_ERROR, setup codes) is not valid on a stream
        return ApplicationError(exc.message or type(exc).__name__)
    message = str(exc)
    name = type(exc).__name__
    return ApplicationError(f"{name}: {message}" if message else name)


@implementer(IStreamReceiver)
class RequestStream(InboundItems):
    """An inbound stream of :class:`Payload`: ``async for payload in stream``.

    Flow control: ``prefetch`` items are requested when the stream opens; each time half of
    the window has been consumed by the application, a REQUEST_N for the consumed count is
    written at once (the responder refills while the rest is consumed), so at most a window
    of items is ever buffered here. The window starts at ``prefetch`` items and, while the
    items are small, grows to ``window_bytes`` worth of them (at most ``max_window``; the
    connection's ``stream_window_bytes`` and ``max_stream_window`` settings), so that the
    responder is not idle a round trip per window (see :class:`~rsocket_tx.inbound.InboundItems`).

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
    :param max_window: the most items the window may grow to (None: ``prefetch``).
    :param window_bytes: bytes of items (data + metadata + 1 each) the window may hold; 0:
        the window stays ``prefetch`` items.
    :ivar stream_id: the stream id on the connection.
    """

    __slots__ = ("_protocol", "stream_id", "_prefetch", "_collector", "_take", "_pump",
                 "_deadline", "__weakref__")

    def __init__(self, host: IStreamHost, stream_id: int, prefetch: int, *,
                 max_window: int | None = None, window_bytes: int = 0) -> None:
        super().__init__(prefetch, max_window=max_window, window_bytes=window_bytes)
        self._protocol = host
        self.stream_id = stream_id
        self._prefetch = prefetch
        self._collector: list[Payload] | None = None
        self._take: int | None = None
        self._pump: OutboundPump | None = None
        self._deadline = None  # the timeout's IDelayedCall (expire_after)

    # -- the protocol (InboundItems) ------------------------------------------------------

    def request(self, n: int) -> None:
        self._protocol.request_more(self.stream_id, n)

    def send_cancel(self) -> None:
        self._protocol.cancel(self.stream_id)

    def wake_later(self) -> bool:
        return self._protocol.wake_later(self)

    def item_size(self, item: Payload) -> int:
        metadata = item.metadata
        return len(item.data) + (len(metadata) if metadata is not None else 0) + 1

    # -- application side -----------------------------------------------------------------

    def collect(self, take: int | None = None) -> Deferred[list[Payload]]:
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
        self._waiter = d = Deferred[list]()
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

    def when_ready(self) -> Deferred[None]:
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
        self._waiter = d = Deferred[list]()
        return d.addCallback(self._put_back)

    def _put_back(self, item) -> None:
        if item is not None:
            self._queue.appendleft(item)  # handed to the waiter by wake/_end: not consumed

    def expire_after(self, timeout: float, what: str = "stream") -> None:
        """End the stream if it has not ended within ``timeout`` seconds (the whole stream,
        not the time between items): CANCEL to the peer, and iteration (or :meth:`collect`)
        raises :class:`~rsocket_tx.core.errors.RequestTimeout`. Items that arrived before are
        still delivered first. What ``timeout=`` on ``request_stream``/``request_channel``
        does.

        :param timeout: seconds (positive, finite; see :func:`check_timeout`).
        :param what: what timed out, for the message (``"request-stream"``).
        """
        if not self._done:
            self._deadline = self._protocol.reactor.callLater(timeout, self._expired, timeout,
                                                              what)

    def _expired(self, timeout: float, what: str) -> None:
        self._deadline = None
        if self._done:
            return
        if self._open:
            self._open = False
            self.send_cancel()
        self._end(RequestTimeout(f"{what} timed out after {_seconds(timeout)}: canceled",
                                 timeout))

    # -- protocol side (IStreamReceiver) ----------------------------------------------------

    def attach_outbound(self, pump: OutboundPump | None) -> None:
        """A channel's other half: ``pump`` (its outbound items) stops when this stream
        fails."""
        self._pump = pump

    def on_next(self, payload: Payload) -> None:
        """An item arrived: queue it (or hand it to a waiting consumer)."""
        if self._done:
            return
        if self._sizing:
            size = self.item_size(payload)
            if size > self._max_size:
                self._max_size = size
        collector = self._collector
        if collector is not None:
            collector.append(payload)
            if self._take is not None and len(collector) >= self._take:
                self.cancel()
                return
            self._consume(1)
            return
        # (InboundItems.on_next inlined: one call less per item)
        self._queue.append(payload)
        if self._waiter is not None and not self._wake_pending:
            if self.wake_later():
                self._wake_pending = True
            else:
                self.wake()

    def on_next_batch(self, payloads: list[Payload]) -> None:
        """Several items arrived (in order): :meth:`on_next` for each, in one call (the batch
        path of a read)."""
        if self._done or self._sizing or self._collector is not None:
            for payload in payloads:
                self.on_next(payload)
            return
        self._queue.extend(payloads)
        if self._waiter is not None and not self._wake_pending:
            if self.wake_later():
                self._wake_pending = True
            else:
                self.wake()

    def on_error(self, error: BaseException) -> None:
        """The stream failed. When our own channel outbound failed because a value could not
        be encoded, that local error (a TypeError or ValueError) is what iteration raises,
        not its wire form (the ERROR[APPLICATION_ERROR] the peer was sent)."""
        if error.__class__ is _EncodeError:
            error = error.cause
        InboundItems.on_error(self, error)

    def ended_with(self, error: BaseException | None) -> bool:
        if self._deadline is not None:
            if self._deadline.active():
                self._deadline.cancel()
            self._deadline = None
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

    def collect(self, take: int | None = None) -> Deferred[list[Any]]:
        """As :meth:`RequestStream.collect`, firing with the decoded values."""
        decode = self._decode
        return self.stream.collect(take).addCallback(lambda items: [decode(p) for p in items])

    def cancel(self) -> None:
        """Cancel the stream (CANCEL to the peer)."""
        self.stream.cancel()


def _limits(host) -> tuple[int, int]:
    """The send limits of ``host`` (an RSocketProtocol): ``max_send_buffer_size`` (none:
    2^62) and the largest frame it sends, bytes."""
    conn = getattr(host, "connection", None)
    config = getattr(conn, "config", None)
    frame_limit = config.outbound_frame_limit if config is not None else \
        DEFAULT_OUTBOUND_FRAME_LIMIT
    return getattr(host, "max_send_buffer_size", None) or 2**62, frame_limit


def _surely_fits(host) -> int:
    buffer_limit, frame_limit = _limits(host)
    return buffer_limit - FRAME_OVERHEAD * (buffer_limit // max(1, frame_limit - FRAME_OVERHEAD)
                                            + 1)


def _check_item_size(host, item: Payload) -> None:
    check_send_size(item, *_limits(host))


class _EncodeError(ApplicationError):
    """What an outbound item that could not be sent (not encodable, too large) fails its
    stream with: sent to the peer as ERROR[APPLICATION_ERROR] with the cause's message; the
    local side raises ``cause`` (:meth:`RequestStream.on_error`)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause


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
    :param encode: how an item that is not a :class:`Payload` becomes payload data (a
        codec's ``encode``, :mod:`rsocket_tx.codecs`: a channel requester's outbound values
        are encoded like its first value); None: such an item fails the stream with
        TypeError. An item the codec refuses (TypeError or ValueError) fails the stream: the
        peer gets ERROR[APPLICATION_ERROR], and the channel's inbound side raises that
        TypeError or ValueError locally.

    An item larger than the connection's send limit (see :func:`check_send_size`) fails the
    stream the same way, with ValueError, before any of it is sent.
    """

    __slots__ = ("stream_id", "encode", "_fits")

    source_error = "a stream source must be an iterable or async iterable of Payload, not {}"
    plain_class = Payload  # (a Payload that surely fits passes accept unchanged)

    def __init__(self, host: IStreamHost, stream_id: int, source, encode=None) -> None:
        super().__init__(host)
        self.stream_id = stream_id
        self.encode = encode
        # items up to this many bytes surely fit the send limit: only larger ones are checked
        self._fits = self.plain_limit = _surely_fits(host)
        self.begin(source)

    def credit(self) -> int:
        return self.host.credit(self.stream_id)

    def accept(self, item):
        if item.__class__ is not Payload and not isinstance(item, Payload):
            encode = self.encode
            if encode is None:
                raise TypeError(f"stream items must be Payload, not {type(item).__name__}")
            try:
                item = Payload(encode(item))
            except (TypeError, ValueError) as exc:
                raise _EncodeError(exc) from None
        if len(item.data) > self._fits or (item.metadata is not None and len(item.data)
                                           + len(item.metadata) > self._fits):
            try:
                _check_item_size(self.host, item)
            except ValueError as exc:
                raise _EncodeError(exc) from None
        return item

    def size(self, item) -> int:
        return len(item.data)

    def send(self, items: list) -> None:
        if self._stopped:
            return
        if items:
            self.host.send_items(self.stream_id, items)  # (one call for the batch)

    def error_for(self, exc: BaseException) -> RSocketError:
        """:func:`to_rsocket_error`; an error made from another exception (not a deliberate
        RSocketError) has it as ``__cause__``, for the host to log with its traceback (and
        drop: ``pump_failed``)."""
        error = to_rsocket_error(exc)
        if error is not exc:
            error.__cause__ = exc
        return error
