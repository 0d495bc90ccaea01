"""A client that reconnects: :class:`ReconnectingRSocket` keeps one RSocket connection up,
opening a new one with exponential backoff and jitter whenever it is lost (what rsocket-java
users know as ``RSocketConnector.reconnect(Retry.backoff(...))`` with ``RSocketClient``).

It is for connections that are **not** resumable (RSocket 1.0 Protocol §Resuming Operation
covers the other kind: ``connect(resume=True)`` reconnects by itself and nothing is lost). A
new connection is a new SETUP; what was in flight on the old one is gone, so the rules are:

* a request made while a connection is up goes out on it at once, exactly as through
  :class:`~rsocket_tx.requester.RSocket`;
* a request made while there is none (between a loss and the next successful connect) waits
  for the next connection, up to ``wait_timeout`` milliseconds, then fails with
  :class:`NotConnectedError` (which names the timeout and the last connection error); nothing
  was sent, so it is safe to retry;
* a request in flight when the connection drops fails with the connection's error
  (:class:`~rsocket_tx.core.errors.ConnectionLostError`, or the ERROR the server closed it
  with) and is **never retried** by this client: the responder may have acted on it.

The delays between connection attempts (:class:`~rsocket_tx.core.resume.Backoff`, also
importable from here; the resumable client reconnects with the same class) follow
reactor-core's ``Retry.backoff``: attempt *n* (0-based, counted since the last successful
connection) waits ``min(max_delay, initial_delay * 2**n)`` milliseconds, moved by a random
jitter of up to ``jitter`` times that delay and kept within ``[initial_delay, max_delay]``.
Time comes from the reactor (an ``IReactorTime``: tests pass a ``twisted.internet.task.Clock``).

Example::

    from rsocket_tx.reconnect import Backoff, connect_reconnecting

    client = connect_reconnecting("tcp://localhost:7878",
                                  backoff=Backoff(initial_delay=100, max_delay=5_000))
    response = await client.request_response(b"hello")   # waits for the first connection
    ...
    await client.close()
"""

from __future__ import annotations

import enum
import math
import random as _random
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from twisted.internet.defer import CancelledError, Deferred, fail
from twisted.internet.defer import TimeoutError as DeferredTimeoutError
from twisted.logger import Logger
from twisted.python.failure import Failure

from .core.config import (
    DEFAULT_RECONNECT_INITIAL_DELAY,
    DEFAULT_RECONNECT_JITTER,
    DEFAULT_RECONNECT_MAX_DELAY,
    check_milliseconds,
)
from .core.errors import ConnectionLostError, LocalProtocolError
from .core.resume import Backoff

__all__ = [
    "Backoff",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_WAIT_TIMEOUT",
    "NotConnectedError",
    "PendingStream",
    "ReconnectState",
    "ReconnectingRSocket",
    "check_milliseconds",
    "connect_reconnecting",
    "describe_error",
]

log = Logger(namespace="rsocket_tx.reconnect")

_T = TypeVar("_T")

#: Milliseconds a request made while disconnected waits for the next connection.
DEFAULT_WAIT_TIMEOUT = 10_000
#: Milliseconds one connection attempt may take (transport, TLS, SETUP; with leases the first
#: LEASE) before it is cancelled and counted as failed.
DEFAULT_CONNECT_TIMEOUT = 10_000
#: Milliseconds before the first reconnection attempt (and the shortest delay).
DEFAULT_INITIAL_DELAY = DEFAULT_RECONNECT_INITIAL_DELAY
#: Milliseconds: the longest delay between two attempts.
DEFAULT_MAX_DELAY = DEFAULT_RECONNECT_MAX_DELAY
#: Fraction of each delay by which the jitter may move it.
DEFAULT_JITTER = DEFAULT_RECONNECT_JITTER


class NotConnectedError(LocalProtocolError):
    """A request was **not sent**: there was no connection to send it on (none came within
    ``wait_timeout``, the client gave up reconnecting, or it was closed). Safe to retry.

    :ivar timeout: the wait that expired, milliseconds (None when the request did not wait).
    :ivar last_error: the last connection error seen (an exception), or None.
    """

    def __init__(self, message: str, *, timeout: int | None = None,
                 last_error: BaseException | None = None) -> None:
        super().__init__(message)
        self.timeout = timeout
        self.last_error = last_error


def describe_error(error: BaseException | None) -> str:
    """``error`` in words for a message: its type and text, or ``"none yet"``."""
    if error is None:
        return "none yet"
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class ReconnectState(enum.Enum):
    """Where a :class:`ReconnectingRSocket` is."""

    #: not started yet
    IDLE = "idle"
    #: a connection attempt is under way
    CONNECTING = "connecting"
    #: a connection is up: requests go out at once
    CONNECTED = "connected"
    #: waiting out a backoff delay before the next attempt
    BACKING_OFF = "backing-off"
    #: gave up (``max_attempts`` failed attempts in a row, or ``retry_if`` said no):
    #: requests fail at once; :meth:`ReconnectingRSocket.start` tries again
    FAILED = "failed"
    #: closed by :meth:`ReconnectingRSocket.close`: requests fail at once
    CLOSED = "closed"


class PendingStream:
    """A request-stream or request-channel made while disconnected: it opens on the next
    connection (within ``wait_timeout``).

    ``async for``, :meth:`collect` and :meth:`cancel` work as on
    :class:`~rsocket_tx.streams.RequestStream`; iteration and :meth:`collect` raise
    :class:`NotConnectedError` if no connection came in time. :meth:`when_opened` gives the
    underlying stream (for its whole API) once it is open.

    :param waiting: Deferred firing with what to open the stream on (the connected
        :class:`~rsocket_tx.requester.RSocket`, or the load balancer's chosen target), or
        failing with :class:`NotConnectedError`.
    :param open_stream: ``callable(that)`` making the request on it; returns the stream.
    """

    __slots__ = ("stream", "_waiting", "_open_stream", "_error", "_cancelled", "_observers")

    def __init__(self, waiting: Deferred[Any], open_stream: Callable[[Any], Any]) -> None:
        #: the underlying stream once open (a RequestStream or DecodedStream), else None
        self.stream: Any = None
        self._open_stream = open_stream
        self._error: BaseException | None = None
        self._cancelled = False
        self._observers: list[Deferred[Any]] = []
        self._waiting: Deferred[Any] | None = waiting
        waiting.addCallbacks(self._open, self._failed)

    @property
    def stream_id(self) -> int | None:
        """The stream id on the connection, None until the stream is open."""
        return None if self.stream is None else self.stream.stream_id

    def _open(self, rsocket: Any) -> None:
        self._waiting = None
        try:
            self.stream = self._open_stream(rsocket)
        except Exception as error:  # e.g. the payload cannot be encoded
            self._error = error
        self._notify()

    def _failed(self, failure: Failure) -> None:
        self._waiting = None
        if not (self._cancelled and failure.check(CancelledError)):
            self._error = failure.value
        self._notify()

    def _notify(self) -> None:
        observers, self._observers = self._observers, []
        for d in observers:
            self._fire(d)

    def _fire(self, d: Deferred[Any]) -> None:
        if self._error is not None:
            d.errback(Failure(self._error))
        else:
            d.callback(self.stream)

    def when_opened(self) -> Deferred[Any]:
        """A new Deferred firing with the underlying stream once it is open (None if it was
        cancelled first), or failing with :class:`NotConnectedError` (or the error opening
        it raised)."""
        d: Deferred[Any] = Deferred()
        if self._waiting is None:
            self._fire(d)
        else:
            self._observers.append(d)
        return d

    def __aiter__(self) -> PendingStream:
        return self

    async def __anext__(self) -> Any:
        stream = self.stream
        if stream is None:
            stream = await self.when_opened()
            if stream is None:
                raise StopAsyncIteration
        return await stream.__anext__()

    def collect(self, take: int | None = None) -> Deferred[list[Any]]:
        """As :meth:`RequestStream.collect <rsocket_tx.streams.RequestStream.collect>`, once
        the stream is open (an empty list if it was cancelled before)."""
        return self.when_opened().addCallback(
            lambda stream: [] if stream is None else stream.collect(take))

    def cancel(self) -> None:
        """Cancel: CANCEL to the peer if open, else give up waiting (nothing is sent)."""
        if self.stream is not None:
            self.stream.cancel()
        elif self._waiting is not None:
            self._cancelled = True
            self._waiting.cancel()


class ReconnectingRSocket:
    """One RSocket connection kept up: reconnected with
    :class:`~rsocket_tx.core.resume.Backoff` whenever it is lost.

    The request methods are those of :class:`~rsocket_tx.requester.RSocket`, with the same
    arguments (passed through as they are); the module docstring says what happens to a
    request during a gap and to one in flight at a loss.

    :param connect: zero-argument callable opening one connection: returns a Deferred firing
        with a connected :class:`~rsocket_tx.requester.RSocket` (e.g. ``lambda:
        rsocket_tx.connect(endpoint)``; :func:`connect_reconnecting` builds one from an
        endpoint). It should not be resumable (``resume=True`` reconnects by itself).
    :param reactor: an ``IReactorTime`` for the delays and timeouts; None: the global reactor.
    :param backoff: the delays between attempts (:class:`~rsocket_tx.core.resume.Backoff`;
        None: the defaults).
    :param wait_timeout: milliseconds a request made while disconnected waits for the next
        connection before failing with :class:`NotConnectedError` (default 10,000; 0: fail at
        once).
    :param connect_timeout: milliseconds one attempt may take before it is cancelled and
        counted as failed (default 10,000; 0: no limit).
    :param retry_if: ``callable(exception) -> bool`` deciding whether a failed attempt is
        retried (e.g. not a TLS verification failure); None: always. A False gives up (FAILED).
    :param random: ``callable() -> float`` in [0, 1) for the jitter; None: ``random.random``.

    A user's callable that raises does not stop the client: the exception is logged with its
    traceback (``log.failure``) and the client carries on: ``connect`` raising (or returning
    no Deferred) is a failed attempt; ``retry_if`` raising retries; ``random`` raising means
    no jitter; a ``backoff`` whose ``delay()`` raises (or gives no finite delay >= 0) waits
    :data:`DEFAULT_MAX_DELAY`; an observer raising is skipped (see :meth:`add_observer`).
    :param name: what the log lines call this client (default: ``"client"``).
    :raises ValueError: a setting out of range.
    """

    def __init__(self, connect: Callable[[], Deferred[Any]], *, reactor: Any = None,
                 backoff: Backoff | None = None, wait_timeout: int = DEFAULT_WAIT_TIMEOUT,
                 connect_timeout: int = DEFAULT_CONNECT_TIMEOUT,
                 retry_if: Callable[[BaseException], bool] | None = None,
                 random: Callable[[], float] | None = None, name: str | None = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = global_reactor
        check_milliseconds("wait_timeout", wait_timeout)
        check_milliseconds("connect_timeout", connect_timeout)
        self._connect = connect
        self.reactor = reactor
        self.backoff = Backoff() if backoff is None else backoff
        self.wait_timeout = wait_timeout
        self.connect_timeout = connect_timeout
        self._retry_if = retry_if
        self._random = _random.random if random is None else random
        self.name = name or "client"
        self._state = ReconnectState.IDLE
        self._rsocket: Any = None
        self._attempt: Deferred[None] | None = None
        self._call: Any = None
        #: failed attempts since the last successful connection
        self.failed_attempts = 0
        #: successful connections so far
        self.connections = 0
        #: the last connection error (a failed attempt, or why the last connection ended)
        self.last_error: BaseException | None = None
        self._waiters: list[tuple[Deferred[Any], Any]] = []
        self._observers: list[Callable[[ReconnectingRSocket, ReconnectState], None]] = []
        self._closing: Deferred[Any] | None = None
        self._gave_up = ""

    # -- state -----------------------------------------------------------------------------

    @property
    def state(self) -> ReconnectState:
        """The :class:`ReconnectState`."""
        return self._state

    @property
    def rsocket(self) -> Any:
        """The connected :class:`~rsocket_tx.requester.RSocket` if one is up and takes
        requests (open, not closing), else None."""
        rsocket = self._rsocket
        if rsocket is not None and rsocket.is_open and not rsocket.is_closing:
            return rsocket
        return None

    @property
    def is_open(self) -> bool:
        """True while a connection is up and takes requests."""
        return self.rsocket is not None

    def add_observer(self, observer: Callable[[ReconnectingRSocket, ReconnectState], None]
                     ) -> None:
        """Call ``observer(client, state)`` at every change of :attr:`state`.

        :param observer: a callable taking this client and the new :class:`ReconnectState`
            (its return value is ignored). It is called synchronously, in the event loop,
            right after :attr:`state` changes and before anything else happens in that state
            (for CONNECTED: before the requests that waited go out); observers are called in
            the order they were added. An exception it raises is logged with its traceback
            (``log.failure``, namespace ``rsocket_tx.reconnect``) and otherwise ignored: the
            client carries on and the other observers are still called.
        """
        self._observers.append(observer)

    def remove_observer(self, observer: Callable[[ReconnectingRSocket, ReconnectState], None]
                        ) -> None:
        """Stop calling ``observer``.

        :raises ValueError: ``observer`` was not added.
        """
        self._observers.remove(observer)

    def _set_state(self, state: ReconnectState) -> None:
        self._state = state
        for observer in list(self._observers):
            if observer not in self._observers:  # removed by an earlier one
                continue
            try:
                observer(self, state)
            except Exception:  # noqa: BLE001 - a user's bug must not wedge the client
                log.failure("{name}: the observer {observer!r} raised on the state "
                            "{state}; ignored", name=self.name, observer=observer,
                            state=state.value)

    # -- the connection loop ---------------------------------------------------------------

    def start(self) -> ReconnectingRSocket:
        """Start connecting (at once); from FAILED, start over with a fresh attempt count.
        Does nothing if already started. :returns: self.
        :raises NotConnectedError: the client was closed."""
        if self._state is ReconnectState.CLOSED:
            raise NotConnectedError(f"{self.name} is closed")
        if self._state in (ReconnectState.IDLE, ReconnectState.FAILED):
            self.failed_attempts = 0
            self._try()
        return self

    def _try(self) -> None:
        self._call = None
        self._set_state(ReconnectState.CONNECTING)
        try:
            d = self._connect()
            if not isinstance(d, Deferred):
                raise TypeError(f"the connect callable must return a Deferred, got {d!r:.80}")
        except Exception:  # noqa: BLE001 - a bug in it fails this attempt, not the client
            log.failure("{name}: the connect callable {connect!r} raised", name=self.name,
                        connect=self._connect)
            d = fail()
        if self.connect_timeout:
            d.addTimeout(self.connect_timeout / 1000, self.reactor)
        self._attempt = d
        d.addCallbacks(self._connected, self._attempt_failed)

    def _connected(self, rsocket: Any) -> None:
        self._attempt = None
        if self._state is ReconnectState.CLOSED:  # closed while connecting: don't keep it
            rsocket.close(0)
            return
        self._rsocket = rsocket
        self.failed_attempts = 0
        self.connections += 1
        log.info("{name}: connected (connection {n})", name=self.name, n=self.connections)
        self._set_state(ReconnectState.CONNECTED)
        # the requests that waited go out in the order they were made
        while self._waiters and self.rsocket is not None:
            d, call = self._waiters.pop(0)
            if call.active():
                call.cancel()
            d.callback(self.rsocket)
        rsocket.closed.addCallback(self._lost, rsocket)

    def _attempt_failed(self, failure: Failure) -> None:
        self._attempt = None
        if self._state is ReconnectState.CLOSED:
            return
        error = failure.value
        assert error is not None  # (an errback's Failure holds its exception)
        if failure.check(DeferredTimeoutError):  # connect_timeout cancelled the attempt
            error = DeferredTimeoutError(f"the connection attempt took longer than "
                                         f"{self.connect_timeout} ms (connect_timeout)")
        self.last_error = error
        self.failed_attempts += 1
        retry = self._should_retry(error)
        if not retry or self._gives_up():
            why = "retry_if refused to retry" if not retry else \
                f"{self.failed_attempts} failed attempts in a row (max_attempts)"
            log.warn("{name}: gave up reconnecting after {why}; last error: {error}",
                     name=self.name, why=why, error=describe_error(error))
            self._gave_up = why
            self._set_state(ReconnectState.FAILED)
            self._fail_waiters(self._not_connected(None))
            return
        self._schedule(self.failed_attempts - 1)

    def _lost(self, _: Any, rsocket: Any) -> None:
        if rsocket is not self._rsocket:
            return
        self._rsocket = None
        reason = rsocket.close_reason
        self.last_error = reason if reason is not None else \
            ConnectionLostError("the connection closed")
        if self._state is ReconnectState.CLOSED:
            return
        log.info("{name}: connection lost ({error}); reconnecting", name=self.name,
                 error=describe_error(self.last_error))
        self._schedule(0)

    # the user's callables (retry_if, random, a Backoff subclass): a bug in one is logged and
    # the default is used, so the client keeps reconnecting

    def _should_retry(self, error: BaseException) -> bool:
        if self._retry_if is None:
            return True
        try:
            return bool(self._retry_if(error))
        except Exception:  # noqa: BLE001
            log.failure("{name}: retry_if {retry_if!r} raised; retrying", name=self.name,
                        retry_if=self._retry_if)
            return True

    def _gives_up(self) -> bool:
        try:
            return bool(self.backoff.gives_up(self.failed_attempts))
        except Exception:  # noqa: BLE001
            log.failure("{name}: the backoff {backoff!r} raised in gives_up(); retrying",
                        name=self.name, backoff=self.backoff)
            return False

    def _delay(self, attempt: int) -> float:
        """Milliseconds before attempt ``attempt``: the backoff's, else (it or ``random``
        raised, or the delay is no finite number >= 0) :data:`DEFAULT_MAX_DELAY`."""
        try:
            rand = self._random()
        except Exception:  # noqa: BLE001
            log.failure("{name}: random {random!r} raised; no jitter this time",
                        name=self.name, random=self._random)
            rand = 0.5
        try:
            delay = float(self.backoff.delay(attempt, rand))
            if not 0 <= delay < math.inf:
                raise ValueError(f"the delay must be a finite number of milliseconds >= 0, "
                                 f"got {delay!r}")
        except Exception:  # noqa: BLE001
            log.failure("{name}: the backoff {backoff!r} failed in delay(); waiting "
                        "{default} ms", name=self.name, backoff=self.backoff,
                        default=DEFAULT_MAX_DELAY)
            delay = float(DEFAULT_MAX_DELAY)
        return delay

    def _schedule(self, attempt: int) -> None:
        delay = self._delay(attempt)
        self._set_state(ReconnectState.BACKING_OFF)
        self._call = self.reactor.callLater(delay / 1000, self._try)

    # -- waiting for a connection ----------------------------------------------------------

    def when_connected(self, timeout: int | None = None) -> Deferred[Any]:
        """A Deferred firing with the connected :class:`~rsocket_tx.requester.RSocket`: at
        once if one is up, else at the next connection.

        :param timeout: milliseconds to wait (None: :attr:`wait_timeout`; 0: do not wait).
        :returns: the Deferred; it fails with :class:`NotConnectedError` (naming the timeout
            and the last connection error) when none comes in time, the client gives up, or
            is closed. ``cancel()`` on it stops the wait.
        """
        rsocket = self.rsocket
        if rsocket is not None:
            d: Deferred[Any] = Deferred()
            d.callback(rsocket)
            return d
        if timeout is None:
            timeout = self.wait_timeout
        check_milliseconds("timeout", timeout)
        if self._state in (ReconnectState.CLOSED, ReconnectState.FAILED, ReconnectState.IDLE):
            return fail(self._not_connected(None))
        if timeout == 0:
            return fail(self._not_connected(0))
        entry: list[Any] = []

        def cancel(d: Deferred[Any]) -> None:
            self._forget(entry)

        d = Deferred(cancel)
        call = self.reactor.callLater(timeout / 1000, self._expire, entry, timeout)
        entry[:] = [d, call]
        self._waiters.append((d, call))
        return d

    def _forget(self, entry: list[Any]) -> None:
        d, call = entry
        try:
            self._waiters.remove((d, call))
        except ValueError:
            pass
        if call.active():
            call.cancel()

    def _expire(self, entry: list[Any], timeout: int) -> None:
        d, call = entry
        try:
            self._waiters.remove((d, call))
        except ValueError:
            return
        d.errback(Failure(self._not_connected(timeout)))

    def _not_connected(self, timeout: int | None) -> NotConnectedError:
        last = describe_error(self.last_error)
        if self._state is ReconnectState.CLOSED:
            message = f"{self.name} is closed"
        elif self._state is ReconnectState.IDLE:
            message = f"{self.name} is not started (call start())"
        elif self._state is ReconnectState.FAILED:
            message = (f"{self.name} gave up reconnecting after {self._gave_up}; last "
                       f"connection error: {last}")
        elif timeout == 0:
            message = (f"{self.name} is not connected and wait_timeout is 0; last connection "
                       f"error: {last}")
        else:
            message = (f"no connection within {timeout} ms (wait_timeout) to send the request "
                       f"on; last connection error: {last}")
        return NotConnectedError(message, timeout=timeout, last_error=self.last_error)

    def _fail_waiters(self, error: NotConnectedError) -> None:
        waiters, self._waiters = self._waiters, []
        for d, call in waiters:
            if call.active():
                call.cancel()
            d.errback(Failure(error))

    def _check_usable(self) -> None:
        if self._state in (ReconnectState.CLOSED, ReconnectState.FAILED, ReconnectState.IDLE):
            raise self._not_connected(None)

    # -- the requester API (rsocket_tx.requester.RSocket) ----------------------------------

    def _send(self, request: Callable[[Any], Deferred[_T]]) -> Deferred[_T]:
        """``request(rsocket)`` on the connection now if there is one, else once there is:
        a Deferred chained on :meth:`when_connected`.

        :raises NotConnectedError: the client is closed, not started or gave up.
        """
        rsocket = self.rsocket
        if rsocket is not None:
            return request(rsocket)
        self._check_usable()
        return self.when_connected().addCallback(request)

    def _send_stream(self, request: Callable[[Any], Any]) -> Any:
        """:meth:`_send` for a stream: ``request(rsocket)``'s stream now, else a
        :class:`PendingStream` it opens on the next connection.

        :raises NotConnectedError: the client is closed, not started or gave up.
        """
        rsocket = self.rsocket
        if rsocket is not None:
            return request(rsocket)
        self._check_usable()
        return PendingStream(self.when_connected(), request)

    def request_response(self, payload: Any, **options: Any) -> Deferred[Any]:
        """Request-response (spec §Request Response), as
        :meth:`RSocket.request_response <rsocket_tx.requester.RSocket.request_response>`;
        while disconnected it waits for the next connection (see :meth:`when_connected`).

        :returns: Deferred firing with the response, or failing with the responder's error,
            the connection's error if it is lost while the request is in flight (not
            retried), or :class:`NotConnectedError` (nothing sent).
        :raises NotConnectedError: the client is closed, not started or gave up.
        """
        return self._send(lambda rs: rs.request_response(payload, **options))

    def fire_and_forget(self, payload: Any, **options: Any) -> Deferred[None]:
        """Fire-and-forget (spec §Request Fire-n-Forget), as
        :meth:`RSocket.fire_and_forget <rsocket_tx.requester.RSocket.fire_and_forget>`;
        while disconnected it waits for the next connection.

        :returns: Deferred firing with None once the frame is handed to the transport, or
            failing with :class:`NotConnectedError` or the connection's error.
        :raises NotConnectedError: the client is closed, not started or gave up.
        """
        return self._send(lambda rs: rs.fire_and_forget(payload, **options))

    def fire_and_forget_many(self, payloads: Iterable[Any], **options: Any) -> Deferred[None]:
        """Fire-and-forget each of ``payloads``, in order (spec §Request Fire-n-Forget), as
        :meth:`RSocket.fire_and_forget_many
        <rsocket_tx.requester.RSocket.fire_and_forget_many>`; while disconnected the whole
        batch waits for the next connection.

        :param payloads: an iterable of Payloads or values (taken whole at the call).
        :returns: Deferred firing with None once every frame is handed to the transport, or
            failing with :class:`NotConnectedError` or the connection's error.
        :raises NotConnectedError: the client is closed, not started or gave up.
        """
        batch = list(payloads)
        return self._send(lambda rs: rs.fire_and_forget_many(batch, **options))

    def metadata_push(self, metadata: bytes) -> Deferred[None]:
        """METADATA_PUSH (spec §METADATA_PUSH Frame), as
        :meth:`RSocket.metadata_push <rsocket_tx.requester.RSocket.metadata_push>`; while
        disconnected it waits for the next connection.

        :raises TypeError: ``metadata`` is not bytes.
        :raises NotConnectedError: the client is closed, not started or gave up.
        """
        if not isinstance(metadata, bytes):
            raise TypeError(f"metadata must be bytes, got {type(metadata).__name__}")
        return self._send(lambda rs: rs.metadata_push(metadata))

    def request_stream(self, payload: Any, **options: Any) -> Any:
        """Request-stream (spec §Request Stream), as
        :meth:`RSocket.request_stream <rsocket_tx.requester.RSocket.request_stream>`.

        :returns: the :class:`~rsocket_tx.streams.RequestStream` (or ``DecodedStream``) when
            connected; while disconnected a :class:`PendingStream` that opens on the next
            connection (its iteration raises :class:`NotConnectedError` if none comes in
            time). A stream open when the connection drops fails with its error.
        :raises NotConnectedError: the client is closed, not started or gave up.
        """
        return self._send_stream(lambda rs: rs.request_stream(payload, **options))

    def request_channel(self, payload: Any, outbound: Any = None, **options: Any) -> Any:
        """Request-channel (spec §Request Channel), as
        :meth:`RSocket.request_channel <rsocket_tx.requester.RSocket.request_channel>`;
        returns as :meth:`request_stream` does. ``outbound`` is not pulled before the
        connection is there.

        :raises NotConnectedError: the client is closed, not started or gave up.
        """
        return self._send_stream(lambda rs: rs.request_channel(payload, outbound, **options))

    # -- closing ---------------------------------------------------------------------------

    def close(self, drain_timeout: int | None = None) -> Deferred[None]:
        """Stop reconnecting and close the connection gracefully (see
        :meth:`RSocket.close <rsocket_tx.requester.RSocket.close>`); requests waiting for a
        connection fail with :class:`NotConnectedError`, later ones raise it.

        :param drain_timeout: milliseconds the open streams get (None: the connection's
            setting; 0: at once).
        :returns: Deferred firing with None once the connection is gone (at once if there
            is none). Calling it again returns a Deferred of the same end.
        """
        if self._state is not ReconnectState.CLOSED:
            self._set_state(ReconnectState.CLOSED)
            if self._call is not None and self._call.active():
                self._call.cancel()
            self._call = None
            if self._attempt is not None:
                self._attempt.cancel()
            self._fail_waiters(self._not_connected(None))
            rsocket, self._rsocket = self._rsocket, None
            if rsocket is not None and rsocket.is_open:
                self._closing = rsocket.close(drain_timeout)
        if self._closing is None or self._closing.called:
            d: Deferred[None] = Deferred()
            d.callback(None)
            return d
        done: Deferred[None] = Deferred()

        def finished(result: Any) -> Any:
            done.callback(None)
            return result

        self._closing.addBoth(finished)
        return done


def connect_reconnecting(endpoint: Any, *, reactor: Any = None, backoff: Backoff | None = None,
                         wait_timeout: int = DEFAULT_WAIT_TIMEOUT,
                         connect_timeout: int = DEFAULT_CONNECT_TIMEOUT,
                         retry_if: Callable[[BaseException], bool] | None = None,
                         random: Callable[[], float] | None = None,
                         **connect_options: Any) -> ReconnectingRSocket:
    """A started :class:`ReconnectingRSocket` to ``endpoint``: each connection is opened by
    :func:`rsocket_tx.connect` with ``connect_options``.

    :param endpoint: as :func:`rsocket_tx.connect` takes it (endpoint string, URI or
        ``IStreamClientEndpoint``).
    :param connect_options: keyword arguments of :func:`rsocket_tx.connect` (``setup_payload``,
        ``metadata_mime_type``, ``auth``, settings ...).
    :param backoff: see :class:`ReconnectingRSocket` (and the other keyword arguments).
    :returns: the client, already connecting.
    :raises ValueError: a bad setting; a bad endpoint string or connect option fails the
        first attempt (and, unless ``retry_if`` says no, is retried like any other).
    """
    from .client import connect

    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor

    def open_connection() -> Deferred[Any]:
        return connect(endpoint, reactor=reactor, **connect_options)

    client = ReconnectingRSocket(open_connection, reactor=reactor, backoff=backoff,
                                 wait_timeout=wait_timeout, connect_timeout=connect_timeout,
                                 retry_if=retry_if, random=random, name=str(endpoint))
    return client.start()

