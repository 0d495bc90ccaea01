"""Twisted inside Spark's Python workers: one reactor thread per process, cached connections,
and blocking helpers that hand data between the reactor and the calling (task) thread.

Spark reuses Python worker processes across tasks and a Twisted reactor cannot be restarted,
so the reactor runs in a daemon thread started once per process by :func:`crochet.setup`
(lazily, on first use, under a lock). Everything touching Twisted objects runs in that thread;
the functions here are called from any other thread and block until the reactor side answers.

Connections (:class:`rsocket_tx.RSocket`) are cached per (endpoint, data MIME type, metadata
MIME type) and reused by later tasks of the same worker; a closed one is replaced by a new
connection on next use.

Data crosses threads in chunks (``list[Payload]``), never one queue item per row:

* :func:`request_stream_chunks` – the reactor side drains the stream's received payloads into
  chunks of up to ``chunk_size`` items kept in a bounded queue of ``max_chunks`` chunks; while
  the queue is full it stops consuming, so no REQUEST_N is sent and the responder stops
  (RSocket flow control, spec §Flow Control); the task thread's next take resumes it.
* :func:`send_records` – the task thread feeds chunks of records into a :class:`ChannelFeed`;
  the reactor side sends them on a request-channel only as the responder grants credit
  (REQUEST_N), and feeding blocks while :data:`MAX_QUEUED_CHUNKS` chunks wait for credit.

Must not be used in a process whose main thread already runs the global reactor (e.g. under
pytest-twisted): crochet would then refuse to start its own. Spark's workers never do.
"""

from __future__ import annotations

import json
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, ensureDeferred, fail, succeed
from twisted.python.failure import Failure

from rsocket_tx import Payload, connect
from rsocket_tx.extensions import COMPOSITE_METADATA

__all__ = [
    "DEFAULT_TIMEOUT",
    "ChannelFeed",
    "ChunkedStream",
    "RuntimeTimeout",
    "close_all",
    "get_connection",
    "reactor",
    "request_response",
    "request_stream_chunks",
    "send_records",
]

#: Seconds a blocking helper waits for the reactor side (connect, a response, the next chunk,
#: credit for a send) before raising :class:`RuntimeTimeout`.
DEFAULT_TIMEOUT = 60.0
#: Data MIME type of the cached connections unless given (the offsets protocol speaks JSON).
DEFAULT_DATA_MIME = "application/json"

_lock = threading.Lock()
_reactor: Any = None  # the global reactor once started (its interfaces, as Twisted types it)
_pid: int | None = None
#: RSocket, or a list of waiters (Deferreds); reactor thread only
_connections: dict[tuple, Any] = {}


class RuntimeTimeout(TimeoutError):
    """A blocking helper waited longer than its timeout for the reactor side."""


def reactor():
    """The global reactor, running in this process's crochet thread (started on first call).

    Thread-safe; idempotent within a process.

    :raises RuntimeError: called in a process forked from one where the reactor thread already
        ran (the thread does not survive a fork and a reactor cannot be restarted).
    """
    global _reactor, _pid
    r = _reactor
    if r is not None:
        if _pid != os.getpid():
            raise RuntimeError("pyspark_rsocket: this process was forked after its reactor "
                               "thread started; a Twisted reactor cannot be restarted")
        return r
    with _lock:
        if _reactor is None:
            import crochet
            crochet.setup()
            from twisted.internet import reactor as global_reactor
            _pid = os.getpid()
            _reactor = global_reactor
        return _reactor


def _call(fn, *args, timeout: float | None = DEFAULT_TIMEOUT, **kwargs):
    """Run ``fn(*args, **kwargs)`` in the reactor thread and wait for its result (a Deferred's
    is waited for). :raises RuntimeTimeout: no result within ``timeout`` seconds (the Deferred
    is then cancelled); whatever ``fn`` raised or its Deferred failed with."""
    r = reactor()
    done = threading.Event()
    box: list = [None, None]  # result, exception
    holder: list = [None]

    def run():
        try:
            d = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            box[1] = exc
            done.set()
            return
        if not isinstance(d, Deferred):
            box[0] = d
            done.set()
            return
        holder[0] = d

        def ok(result):
            box[0] = result
            done.set()

        def fail(failure):
            box[1] = failure.value
            done.set()
        d.addCallbacks(ok, fail)

    r.callFromThread(run)
    if not done.wait(timeout):
        def cancel():
            if holder[0] is not None and not holder[0].called:
                holder[0].cancel()
        r.callFromThread(cancel)
        raise RuntimeTimeout(f"no answer from the reactor within {timeout} s")
    if box[1] is not None:
        raise box[1]
    return box[0]


# -- connections ------------------------------------------------------------------------------

def _connect_cached(endpoint: str, data_mime_type: str, metadata_mime_type: str,
                    connect_kwargs: dict) -> Deferred:
    """(Reactor thread.) A Deferred firing with the cached open connection for the key, or
    with a new one (concurrent callers share one connection attempt)."""
    key = (endpoint, data_mime_type, metadata_mime_type, tuple(sorted(connect_kwargs.items())))
    entry = _connections.get(key)
    if isinstance(entry, list):  # a connect in progress: wait for it too
        waiter: Deferred = Deferred()
        entry.append(waiter)
        return waiter
    if entry is not None and entry.is_open and not entry.is_closing:
        return succeed(entry)
    waiters: list[Deferred] = []
    _connections[key] = waiters
    first: Deferred = Deferred()
    waiters.append(first)

    def done(result):
        if isinstance(result, Failure):
            if _connections.get(key) is waiters:
                del _connections[key]
        else:
            _connections[key] = result
        for w in waiters:
            w.errback(result) if isinstance(result, Failure) else w.callback(result)
    connect(endpoint, reactor=_reactor, data_mime_type=data_mime_type,
            metadata_mime_type=metadata_mime_type, **connect_kwargs).addBoth(done)
    return first


def get_connection(endpoint: str, *, data_mime_type: str = DEFAULT_DATA_MIME,
                   metadata_mime_type: str = COMPOSITE_METADATA,
                   timeout: float = DEFAULT_TIMEOUT, **connect_kwargs):
    """The cached connection to ``endpoint``, connecting (or reconnecting, if the cached one is
    closed) as needed. Shared by every task of this worker process.

    :param endpoint: a Twisted client endpoint string or URI (``tcp://host:port``, ...).
    :param data_mime_type: SETUP data MIME type (default ``application/json``).
    :param metadata_mime_type: SETUP metadata MIME type (default composite metadata, which the
        routed responders such as :class:`rsocket_tx.apps.streamlog.StreamLogResponder` need).
    :param timeout: seconds to wait for the connection.
    :param connect_kwargs: more keyword arguments of :func:`rsocket_tx.connect` (part of the
        cache key; values must be hashable).
    :returns: an open :class:`rsocket_tx.RSocket`. Use it only inside the reactor thread (or
        through the helpers of this module).
    :raises RuntimeTimeout: not connected within ``timeout``.
    :raises ValueError: a bad endpoint string.
    :raises Exception: the endpoint's connection error (e.g. ConnectionRefusedError).
    """
    return _call(_connect_cached, endpoint, data_mime_type, metadata_mime_type, connect_kwargs,
                 timeout=timeout)


def close_all(timeout: float = 10.0) -> None:
    """Close every cached connection of this process (e.g. at the end of a test). Does nothing
    if the reactor thread was never started."""
    if _reactor is None:
        return

    def close():
        ds = []
        for entry in list(_connections.values()):
            if not isinstance(entry, list) and entry.is_open:
                ds.append(entry.close(0))
        _connections.clear()
        return DeferredList(ds, consumeErrors=True)
    _call(close, timeout=timeout)


# -- request-response -------------------------------------------------------------------------

def request_response(endpoint: str, payload, *, route: str | None = None,
                     timeout: float = DEFAULT_TIMEOUT, data_mime_type: str = DEFAULT_DATA_MIME,
                     metadata_mime_type: str = COMPOSITE_METADATA) -> Payload | None:
    """Blocking request-response on the cached connection to ``endpoint``.

    :param payload: a :class:`~rsocket_tx.Payload`, or a value the connection's data MIME type
        encodes (a dict for JSON).
    :param route: the route (composite metadata routing entry); None: no metadata.
    :param timeout: seconds for the connection plus the response.
    :returns: the response :class:`~rsocket_tx.Payload` (None if completed without one).
    :raises rsocket_tx.RSocketError: the responder's ERROR (e.g. InvalidError).
    :raises RuntimeTimeout: no response in time (the request is cancelled).
    """
    def go(rsocket):
        return rsocket.request_response(payload, route=route)

    def run():
        d = _connect_cached(endpoint, data_mime_type, metadata_mime_type, {})
        return d.addCallback(go)
    return _call(run, timeout=timeout)


# -- request-stream in chunks -----------------------------------------------------------------

_END = object()


class ChunkedStream:
    """A request-stream whose payloads reach the calling thread as lists (chunks).

    Iterate it (``for chunk in stream``) in one thread; each chunk is a non-empty
    ``list[Payload]`` of at most ``chunk_size`` items, in stream order. Iteration ends when
    the responder completes; it raises the responder's error
    (:class:`rsocket_tx.RSocketError`), :class:`rsocket_tx.ConnectionLostError`, or
    :class:`RuntimeTimeout` if no chunk arrives within ``timeout`` seconds. :meth:`close`
    (also on garbage collection of the generator consuming it, or by ``with``) cancels the
    stream if it is still running. With ``linger`` (seconds) > 0, a take whose chunk is not
    full yet waits up to that long for it to fill (fewer, larger chunks when the consumer is
    faster than the stream).

    Flow control: the reactor side moves received payloads from the
    :class:`~rsocket_tx.streams.RequestStream` into the chunk queue only while fewer than
    ``max_chunks`` chunks are waiting; otherwise it leaves them unconsumed, which withholds
    REQUEST_N, so at most about ``prefetch + max_chunks * chunk_size`` payloads are buffered.
    """

    def __init__(self, chunk_size: int, max_chunks: int, timeout: float,
                 linger: float = 0.0) -> None:
        self.linger = linger
        self.chunk_size = chunk_size
        self.max_chunks = max_chunks
        self.timeout = timeout
        self._cond = threading.Condition()
        self._chunks: deque = deque()  # list[Payload] ..., then _END
        self._error: BaseException | None = None
        self._stream = None  # RequestStream, reactor thread
        self._paused = False  # reactor side stopped draining because the queue is full
        self._waiting = None  # the RequestStream.when_ready() Deferred being waited on
        self._closed = False
        self.items = 0  # payloads handed over so far

    # -- reactor side ------------------------------------------------------------------------

    def _start(self, stream) -> None:
        self._stream = stream
        self._pump()

    def _pump(self, _=None) -> None:
        """(Reactor.) Move the stream's buffered payloads into chunks while there is room;
        when it has none buffered, wait for the next one."""
        self._waiting = None
        stream = self._stream
        if stream is None or self._closed:
            return
        self._paused = False
        size = self.chunk_size
        moved = 0
        with self._cond:
            chunks = self._chunks
            while True:
                if chunks and chunks[-1] is not _END and len(chunks[-1]) < size:
                    last = chunks[-1]  # top up the newest chunk (not taken yet)
                elif len(chunks) < self.max_chunks:
                    last = None
                else:
                    # the consumer is behind: take nothing more, so no REQUEST_N goes out
                    self._paused = True
                    break
                items = stream.take_ready(size - (0 if last is None else len(last)))
                if not items:
                    break
                if last is None:
                    chunks.append(items)
                else:
                    last.extend(items)
                moved += len(items)
            if moved:
                self._cond.notify()
        if self._paused:
            return
        if stream.ended:
            self._finish(stream.error)
            return
        # nothing buffered: wait for the next payload (or the end)
        d = self._waiting = stream.when_ready()
        d.addCallbacks(self._pump, self._got_error)

    def _got_error(self, failure) -> None:
        self._waiting = None
        self._finish(failure.value)

    def _finish(self, error) -> None:
        with self._cond:
            if error is not None and self._error is None:
                self._error = error
            self._chunks.append(_END)
            self._cond.notify()

    def _cancel(self) -> None:
        self._closed = True
        if self._stream is not None:
            self._stream.cancel()

    # -- consumer side -----------------------------------------------------------------------

    def __iter__(self) -> Iterator[list[Payload]]:
        return self

    def __next__(self) -> list[Payload]:
        r = _reactor
        with self._cond:
            chunks = self._chunks
            if not chunks:
                if not self._cond.wait_for(lambda: chunks, self.timeout):
                    self.close()
                    raise RuntimeTimeout(f"no data from the stream within {self.timeout} s")
            if self.linger and len(chunks) == 1 and chunks[0] is not _END:
                # let the chunk fill up a little: fewer, larger batches downstream
                size = self.chunk_size
                self._cond.wait_for(lambda: len(chunks) > 1 or len(chunks[0]) >= size,
                                    self.linger)
            chunk = chunks[0]
            if chunk is _END:
                if self._error is not None:
                    raise self._error
                raise StopIteration
            chunks.popleft()
            resume = self._paused
        self.items += len(chunk)
        if resume:
            r.callFromThread(self._pump)
        return chunk

    def close(self) -> None:
        """Cancel the stream (CANCEL to the responder) if it has not ended. Thread-safe."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            ended = bool(self._chunks) and self._chunks[-1] is _END
        if not ended and self._stream is not None:
            _reactor.callFromThread(self._stream.cancel)

    def __enter__(self) -> ChunkedStream:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def request_stream_chunks(endpoint: str, payload, *, route: str | None = None,
                          prefetch: int = 8192, chunk_size: int = 8192, max_chunks: int = 4,
                          timeout: float = DEFAULT_TIMEOUT, linger: float = 0.0,
                          data_mime_type: str = DEFAULT_DATA_MIME,
                          metadata_mime_type: str = COMPOSITE_METADATA) -> ChunkedStream:
    """Start a request-stream on the cached connection to ``endpoint``; its payloads come
    back as chunks (see :class:`ChunkedStream`).

    :param payload: a :class:`~rsocket_tx.Payload`, or a value the data MIME type encodes.
    :param route: the route (composite metadata routing entry); None: none.
    :param prefetch: the request-n window (items requested up front, topped up as consumed).
    :param chunk_size: most payloads per chunk (>= 1).
    :param max_chunks: chunks waiting for the consumer before REQUEST_N is withheld (>= 1).
    :param timeout: seconds for the connection, and for each chunk.
    :param linger: seconds a take may wait for a partly filled chunk to fill (default 0).
    :returns: a :class:`ChunkedStream` (iterate it; close it if you stop early).
    :raises ValueError: a bad ``prefetch``, ``chunk_size`` or ``max_chunks``.
    :raises RuntimeTimeout: not connected in time. Connection errors as :func:`get_connection`.
    """
    for name, value in (("prefetch", prefetch), ("chunk_size", chunk_size),
                        ("max_chunks", max_chunks)):
        if not isinstance(value, int) or not 1 <= value <= 0x7FFFFFFF:
            raise ValueError(f"{name} must be an integer in [1, 2147483647], got {value!r}")
    chunked = ChunkedStream(chunk_size, max_chunks, timeout, linger)

    def go(rsocket):
        chunked._start(rsocket.request_stream(payload, route=route, prefetch=prefetch))

    def run():
        d = _connect_cached(endpoint, data_mime_type, metadata_mime_type, {})
        return d.addCallback(go)
    _call(run, timeout=timeout)
    return chunked


# -- request-channel (the writer) -------------------------------------------------------------

#: Chunks a :class:`ChannelFeed` queues for the reactor before the feeding thread waits
#: (memory bound per task).
MAX_QUEUED_CHUNKS = 4


class ChannelFeed:
    """The outbound side of a request-channel, fed in chunks from another thread.

    The reactor's outbound pump pulls payloads one at a time as the responder grants
    REQUEST_N credit; the feeding thread hands over whole chunks (lists of Payload) with
    :meth:`put`, which blocks while :data:`MAX_QUEUED_CHUNKS` chunks are not yet taken, so a
    task never holds more than a few chunks of rows the responder has not asked for.
    """

    def __init__(self, reactor, max_chunks: int = MAX_QUEUED_CHUNKS) -> None:
        self._reactor = reactor
        self._max = max_chunks
        self._cond = threading.Condition()
        self._queued = 0  # chunks handed over, not yet fully taken (guarded by _cond)
        self._closed: BaseException | None = None  # the channel is over (guarded by _cond)
        # reactor thread only:
        self._chunks: deque = deque()
        self._pos = 0
        self._waiter: Deferred | None = None
        self._ended = False
        self._error: BaseException | None = None

    # feeding thread ------------------------------------------------------------------

    def put(self, payloads: list, timeout: float) -> None:
        """Hand ``payloads`` over; wait (up to ``timeout`` seconds) for room first.

        :raises Exception: the channel already ended (the responder's error, or a
            RuntimeError when it completed early); TimeoutError after ``timeout``.
        """
        with self._cond:
            if not self._cond.wait_for(
                    lambda: self._queued < self._max or self._closed is not None, timeout):
                raise TimeoutError(f"the responder granted no credit for {timeout:g} s")
            if self._closed is not None:
                raise self._closed
            self._queued += 1
        self._reactor.callFromThread(self._add, payloads)

    def finish(self) -> None:
        """No more payloads: the channel's outbound side completes once all are sent."""
        self._reactor.callFromThread(self._end, None)

    def fail(self, exc: BaseException) -> None:
        """The input failed: the outbound side ends with ERROR (the responder discards)."""
        self._reactor.callFromThread(self._end, exc)

    # reactor thread ------------------------------------------------------------------

    def close(self, error: BaseException | None) -> None:
        """The channel is over: wake a waiting :meth:`put`."""
        with self._cond:
            if self._closed is None:
                self._closed = error or RuntimeError("the request-channel ended early")
            self._cond.notify_all()

    def _add(self, payloads: list) -> None:
        if payloads:
            self._chunks.append(payloads)
        else:
            self._taken()
        self._wake()

    def _end(self, error: BaseException | None) -> None:
        self._ended = True
        self._error = error
        self._wake()

    def _taken(self) -> None:
        with self._cond:
            self._queued -= 1
            self._cond.notify_all()

    def _next(self):
        chunks = self._chunks
        if not chunks:
            return None
        chunk = chunks[0]
        item = chunk[self._pos]
        self._pos += 1
        if self._pos >= len(chunk):
            chunks.popleft()
            self._pos = 0
            self._taken()
        return item

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is None:
            return
        self._waiter = None
        item = self._next()
        if item is not None:
            waiter.callback(item)
        elif self._error is not None:
            waiter.errback(self._error)
        elif self._ended:
            waiter.errback(StopAsyncIteration())
        else:
            self._waiter = waiter

    def ready(self, n: int) -> list:
        """(reactor thread) Up to ``n`` payloads available now, without waiting (possibly
        none): lets a pump take what is buffered in one call instead of one ``__anext__``
        per payload."""
        out: list = []
        chunks = self._chunks
        while chunks and len(out) < n:
            chunk = chunks[0]
            end = min(len(chunk), self._pos + n - len(out))
            out.extend(chunk[self._pos:end])
            if end >= len(chunk):
                chunks.popleft()
                self._pos = 0
                self._taken()
            else:
                self._pos = end
        return out

    def __aiter__(self) -> ChannelFeed:
        return self

    def __anext__(self):
        item = self._next()
        if item is not None:
            return succeed(item)
        if self._error is not None:
            return fail(self._error)
        if self._ended:
            return fail(StopAsyncIteration())

        def cancelled(d):
            if self._waiter is d:
                self._waiter = None
        self._waiter = Deferred(cancelled)
        return self._waiter


def _batch_payloads(records: list[bytes], batch_bytes: int) -> list[Payload]:
    """``records`` as stream log record batches (first offset 0) of at most ``batch_bytes``
    bytes each (a bigger record alone)."""
    from rsocket_tx.apps.streamlog import BATCH_HEADER_SIZE, encode_batch
    out = []
    start = 0
    size = BATCH_HEADER_SIZE
    for i, record in enumerate(records):
        grow = len(record) + 5
        if i > start and size + grow > batch_bytes:
            out.append(Payload(encode_batch(0, records[start:i])))
            start = i
            size = BATCH_HEADER_SIZE
        size += grow
    if start < len(records):
        out.append(Payload(encode_batch(0, records[start:])))
    return out


def send_records(endpoint: str, route: str, header: dict, chunks: Iterable[list[bytes]],
                 ack_key: str, timeout: float, on_ack: Callable[[int], None] | None = None,
                 batch_bytes: int = 0) -> int:
    """Send records over one request-channel and wait for the final acknowledgement.

    Runs in a Spark task thread (not the reactor's). ``header`` is the first payload's JSON
    (on ``route``), every record one later payload. The responder acknowledges with JSON
    ``{ack_key: total}`` payloads and completes after its final acknowledgement.

    :param chunks: lists of record bytes; pulled only as the responder grants credit. An
        exception it raises ends the channel with ERROR and is raised again here.
    :param timeout: seconds to wait for credit, and for the final acknowledgement.
    :param on_ack: called (in the reactor thread) with each acknowledged total.
    :param batch_bytes: 0: one record per payload; else each payload is a stream log record
        batch (:func:`rsocket_tx.apps.streamlog.encode_batch`) of at most this many bytes,
        for the ``*.batch`` routes.
    :returns: the number of records sent, all acknowledged.
    :raises RuntimeError: the responder completed without acknowledging every record.
    :raises rsocket_tx.RSocketError: the responder ended the channel with an ERROR.
    :raises TimeoutError: no credit or no final acknowledgement within ``timeout``.
    """
    r = reactor()
    rs = get_connection(endpoint, timeout=timeout)
    feed = ChannelFeed(r)
    done: Future = Future()
    running: list = []  # the Deferred of run(), then the RequestStream
    acked = [0]

    async def run():
        stream = rs.request_channel(Payload(json.dumps(header).encode("utf-8")), feed,
                                    route=route, prefetch=64)
        running.append(stream)
        async for payload in stream:
            ack = json.loads(bytes(payload.data))
            acked[0] = int(ack[ack_key])
            if on_ack is not None:
                on_ack(acked[0])
        return acked[0]

    def start():
        d = ensureDeferred(run())
        running.insert(0, d)

        def ended(result):
            error = result.value if isinstance(result, Failure) else None
            feed.close(error)
            if error is None:
                done.set_result(result)
            else:
                done.set_exception(error)
        d.addBoth(ended)

    def cancel():
        for thing in reversed(running):
            thing.cancel()

    r.callFromThread(start)
    sent = 0
    try:
        for chunk in chunks:
            feed.put(_batch_payloads(chunk, batch_bytes) if batch_bytes else
                     [Payload(record) for record in chunk], timeout)
            sent += len(chunk)
    except TimeoutError:
        r.callFromThread(cancel)
        raise
    except BaseException as exc:
        if not done.done():
            feed.fail(exc if isinstance(exc, Exception) else RuntimeError("task interrupted"))
        raise
    feed.finish()
    try:
        total = done.result(timeout)
    except FutureTimeout:
        r.callFromThread(cancel)
        raise TimeoutError(f"{route} on {endpoint}: no final acknowledgement within "
                           f"{timeout:g} s ({acked[0]} of {sent} records acknowledged)") from None
    if total != sent:
        raise RuntimeError(f"{route} on {endpoint}: the responder acknowledged {total} of "
                           f"{sent} records")
    return sent
