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
* :func:`open_channel` – the task thread ``send()``\\ s chunks of payloads; the reactor side
  sends them only as the responder grants credit (REQUEST_N), and ``send()`` blocks while more
  than ``max_pending`` payloads wait for credit.

Must not be used in a process whose main thread already runs the global reactor (e.g. under
pytest-twisted): crochet would then refuse to start its own. Spark's workers never do.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Iterable, Iterator

from twisted.internet.defer import Deferred, DeferredList, succeed
from twisted.python.failure import Failure

from rsocket_tx import Payload, connect
from rsocket_tx.extensions import COMPOSITE_METADATA

__all__ = [
    "DEFAULT_TIMEOUT",
    "ChannelSender",
    "ChunkedStream",
    "RuntimeTimeout",
    "close_all",
    "get_connection",
    "open_channel",
    "reactor",
    "request_response",
    "request_stream_chunks",
]

#: Seconds a blocking helper waits for the reactor side (connect, a response, the next chunk,
#: credit for a send) before raising :class:`RuntimeTimeout`.
DEFAULT_TIMEOUT = 60.0
#: Data MIME type of the cached connections unless given (the offsets protocol speaks JSON).
DEFAULT_DATA_MIME = "application/json"

_lock = threading.Lock()
_reactor = None
_pid = None
_connections: dict[tuple, object] = {}  # RSocket, or a list of waiters; reactor thread only


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
        waiter = Deferred()
        entry.append(waiter)
        return waiter
    if entry is not None and entry.is_open and not entry.is_closing:
        return succeed(entry)
    waiters: list[Deferred] = []
    _connections[key] = waiters
    first = Deferred()
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
        routed responders such as :class:`rsocket_tx.streamlog.StreamLogResponder` need).
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

class ChannelSender:
    """The requester side of a request-channel fed from a (non-reactor) thread.

    :meth:`send` queues payloads; the reactor side emits them only as the responder grants
    credit (REQUEST_N) and the transport is not paused; ``send`` blocks while more than
    ``max_pending`` payloads are queued. :meth:`complete` ends our side (COMPLETE) and waits
    for the responder to complete, returning every payload it sent (e.g. acks).
    :meth:`abort` cancels the channel.

    Thread-safety: one thread calls ``send``/``complete``/``abort``.
    """

    def __init__(self, max_pending: int, timeout: float) -> None:
        self.max_pending = max_pending
        self.timeout = timeout
        self._cond = threading.Condition()
        self._queue: deque = deque()
        self._completed = False  # no more sends
        self._error: BaseException | None = None
        self._waiter: Deferred | None = None  # reactor side waiting for a payload
        self._responses: list[Payload] = []
        self._done = threading.Event()  # the responder side ended
        self._stream = None
        self.sent = 0  # payloads handed to the connection

    # -- reactor side: the outbound async iterator -------------------------------------------

    def __aiter__(self):
        return self

    def __anext__(self):
        with self._cond:
            q = self._queue
            if q:
                item = q.popleft()
                self.sent += 1
                if len(q) < self.max_pending // 2 + 1:
                    self._cond.notify()
                return succeed(item)
            if self._completed or self._error is not None:
                d = Deferred()
                d.errback(StopAsyncIteration())
                return d
            self._waiter = d = Deferred()
            return d

    def _wake(self) -> None:
        """(Reactor.) A send arrived or the input ended: hand it to a waiting ``__anext__``."""
        d = self._waiter
        if d is None:
            return
        with self._cond:
            q = self._queue
            if q:
                item = q.popleft()
                self.sent += 1
            elif self._completed or self._error is not None:
                item = None
            else:
                return  # nothing to hand over yet
        self._waiter = None
        if item is not None:
            d.callback(item)
        else:
            d.errback(StopAsyncIteration())

    def _start(self, stream) -> None:
        self._stream = stream

        def got(items):
            self._responses.extend(items)
            self._done.set()

        def failed(failure):
            with self._cond:
                if self._error is None:
                    self._error = failure.value
                self._cond.notify_all()
            self._done.set()
            # the responder ended: wake a waiting outbound pull so the pump stops
            self._wake()
        stream.collect().addCallbacks(got, failed)

    # -- task thread -------------------------------------------------------------------------

    def send(self, payloads: Iterable[Payload]) -> None:
        """Queue payloads for sending; blocks while more than ``max_pending`` are queued.

        :raises rsocket_tx.RSocketError: the channel failed (the responder's error).
        :raises RuntimeTimeout: no credit for ``timeout`` seconds.
        :raises RuntimeError: after :meth:`complete` or :meth:`abort`.
        """
        r = _reactor
        with self._cond:
            if self._completed:
                raise RuntimeError("the channel is already completed or aborted")
            if self._error is not None:
                raise self._error
            q = self._queue
            q.extend(payloads)
            if self._waiter is not None:
                r.callFromThread(self._wake)
            if len(q) > self.max_pending:
                ok = self._cond.wait_for(
                    lambda: len(q) <= self.max_pending or self._error is not None
                    or self._done.is_set(), self.timeout)
                if self._error is not None:
                    raise self._error
                if not ok:
                    raise RuntimeTimeout(f"the responder granted no credit for {self.timeout} s")

    def complete(self) -> list[Payload]:
        """End the outbound side after the queued payloads; wait for the responder to complete.

        :returns: every payload the responder sent on the channel.
        :raises rsocket_tx.RSocketError: the channel failed.
        :raises RuntimeTimeout: the responder did not complete within ``timeout`` seconds.
        """
        with self._cond:
            self._completed = True
        _reactor.callFromThread(self._wake)
        if not self._done.wait(self.timeout):
            self.abort()
            raise RuntimeTimeout(f"the responder did not complete within {self.timeout} s")
        if self._error is not None:
            raise self._error
        return list(self._responses)

    def abort(self) -> None:
        """Cancel the channel (CANCEL to the responder) and drop what is queued."""
        with self._cond:
            self._completed = True
            self._queue.clear()
        stream = self._stream
        if stream is not None and not self._done.is_set():
            _reactor.callFromThread(stream.cancel)

    @property
    def responses(self) -> list[Payload]:
        """The responder's payloads received so far (complete list after :meth:`complete`)."""
        return list(self._responses)


def open_channel(endpoint: str, first, *, route: str | None = None, prefetch: int = 64,
                 max_pending: int = 8192, timeout: float = DEFAULT_TIMEOUT,
                 data_mime_type: str = DEFAULT_DATA_MIME,
                 metadata_mime_type: str = COMPOSITE_METADATA) -> ChannelSender:
    """Open a request-channel on the cached connection to ``endpoint``.

    :param first: the first payload (REQUEST_CHANNEL): a :class:`~rsocket_tx.Payload` or a
        value the data MIME type encodes (a dict for JSON); ``route`` applies to it.
    :param prefetch: request-n window for the responder's payloads (acks).
    :param max_pending: payloads queued by :meth:`ChannelSender.send` before it blocks.
    :param timeout: seconds for the connection, for credit, and for the final completion.
    :returns: a :class:`ChannelSender`.
    :raises ValueError: ``prefetch`` or ``max_pending`` out of range.
    """
    if not isinstance(max_pending, int) or max_pending < 1:
        raise ValueError(f"max_pending must be an integer >= 1, got {max_pending!r}")
    sender = ChannelSender(max_pending, timeout)

    def go(rsocket):
        sender._start(rsocket.request_channel(first, sender, route=route, prefetch=prefetch))

    def run():
        d = _connect_cached(endpoint, data_mime_type, metadata_mime_type, {})
        return d.addCallback(go)
    _call(run, timeout=timeout)
    return sender
