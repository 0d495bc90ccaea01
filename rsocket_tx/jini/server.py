"""The Jini ERI mux server over Twisted, in the spirit of JERI's ``InboundRequest`` and
``RequestDispatcher``.

An application subclasses :class:`Dispatcher`; its :meth:`~Dispatcher.dispatch` gets each
:class:`InboundRequest`: the request body as an async iterator of chunks
(:attr:`InboundRequest.body`) or all at once (:meth:`InboundRequest.read_all`), and the
response writer (:attr:`InboundRequest.response`, a Twisted ``IConsumer``)::

    class Upper(Dispatcher):
        async def dispatch(self, request):
            body = await request.read_all()
            request.response.write(body.upper())

    port = await serve(reactor, "tcp:7879:interface=127.0.0.1", Upper)

The request ends when ``dispatch`` returns (or the Deferred or coroutine it returns
completes): the response is finished then if the application has not finished it (eof after
everything written), and if the client is still sending, the server tells it that it does not
want the rest (*Close*, §Close Message). If ``dispatch`` fails, the session is aborted (with
the partial flag) and the failure logged. The ration the client gets follows the
application's reading of the body, so a request whose body is not read holds back only its own
session (§Flow Control).
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

from twisted.internet.defer import CancelledError, Deferred, DeferredList, succeed
from twisted.internet.protocol import Factory
from twisted.logger import LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from ..interfaces import IConnectionObserver
from ..transports.limits import ConnectionLimit, RefusedConnection
from ..transports.listening import ServerPort, listen
from .config import JiniMuxConfig
from .connection import Role, SessionState
from .endpoints import server_endpoint
from .errors import ConnectionTerminatedError, SessionAbortedError
from .events import AcknowledgmentReceived, SessionOpened
from .protocol import JiniMuxProtocol
from .streams import DataReader, DataWriter

__all__ = [
    "Dispatcher",
    "InboundRequest",
    "ResponseWriter",
    "JiniServerProtocol",
    "JiniMuxServerFactory",
    "serve",
]


class Dispatcher:
    """What a server does with its requests: subclass it and implement :meth:`dispatch`.

    One dispatcher is made per connection (``dispatcher_factory()``), like a Twisted
    protocol; state shared by all connections belongs to the factory that makes them.

    .. warning:: **Clients that write before they read.** Apache River's client writes the
       whole request body before it reads the response, and grants no ration for the
       response beyond its header's (32,768 bytes) until then, while the ration it gets for
       the request follows this dispatcher's reading of :attr:`InboundRequest.body`
       (Jini ERI Multiplexing Protocol §Flow Control). A dispatcher that stops reading the
       body to wait for the client to take its response (``await response.when_drained()``,
       a paused producer, ``notify_finish()``) before the body has ended deadlocks with it
       once the response outgrows the client's ration. Until the body has ended, keep
       reading; bound what waits in the response (``response.pending``, bytes) and abort
       past the bound rather than wait::

           async def dispatch(self, request):
               response = request.response
               async for chunk in request.body:
                   response.write(transform(chunk))
                   if response.pending > LIMIT:
                       request.abort(True, "response backlog too large")
                       return

       Or read the whole body first (bounded), then write. The demo
       :class:`~rsocket_tx.jini.echo.EchoDispatcher` does the former, with a per-connection
       bound.
    """

    def dispatch(self, request: InboundRequest) -> Deferred[Any] | Any:
        """Handle one request (JERI's ``RequestDispatcher.dispatch``).

        :param request: the :class:`InboundRequest`.
        :returns: None when done, or a Deferred or coroutine (an ``async def`` works) that
            completes when done. The response is finished then if it was not.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement dispatch()")


class ResponseWriter(DataWriter):
    """The response of one :class:`InboundRequest`: a Twisted ``IConsumer`` (see
    :class:`~rsocket_tx.jini.streams.DataWriter`) that can also abort the session and ask for
    an acknowledgment."""

    def __init__(self, request: InboundRequest) -> None:
        super().__init__(request.protocol, request)
        self._request = weakref.ref(request)  # (the request owns this writer: no cycle)
        self._acknowledged: list[Deferred[bool]] = []
        self.acknowledgment: bool | None = None

    def abort(self, partial: bool = True, detail: str = "") -> None:
        """Abort the session (*Abort*, §Abort Message).

        :param partial: the request may have been processed with side effects; False only if
            nothing of it was (the client may then retry it elsewhere).
        :param detail: a reason, sent to the client.
        """
        request = self._request()
        if request is not None:
            request.protocol.abort_request(request, partial, detail)

    def notify_acknowledged(self) -> Deferred[bool]:
        """After ``finish(ack_required=True)``: a Deferred firing with True when the client's
        *Acknowledgment* arrives, False when it can no longer come (the client aborted or
        reused the session id, the connection ended)."""
        d: Deferred[bool] = Deferred()
        if self.acknowledgment is not None:
            d.callback(self.acknowledgment)
        else:
            self._acknowledged.append(d)
        return d

    def acknowledged(self, positive: bool) -> None:
        """The outcome of the acknowledgment (protocol side)."""
        if self.acknowledgment is None:
            self.acknowledgment = positive
            waiters, self._acknowledged = self._acknowledged, []
            for d in waiters:
                d.callback(positive)


class InboundRequest:
    """One request received on one session (JERI's ``InboundRequest``).

    :ivar session_id: the session id (0 .. 127).
    :ivar body: the request body (:class:`~rsocket_tx.jini.streams.DataReader`, an async
        iterator of ``bytes`` chunks).
    :ivar response: the response (:class:`ResponseWriter`).
    :ivar protocol: the connection's :class:`JiniServerProtocol`.
    :ivar dispatch: the Deferred of the dispatcher's work while it runs, else None; it is
        cancelled if the connection ends first.
    """

    def __init__(self, protocol: JiniServerProtocol, session_id: int) -> None:
        self.session_id = session_id
        self.protocol = protocol
        self.reader = self.body = DataReader(protocol, self, canceller=self.abort)
        self.writer = self.response = ResponseWriter(self)
        self.ack_required = False
        self.error: BaseException | None = None
        self.dispatched = False
        self.dispatch: Deferred[Any] | None = None
        self.batch = -1

    def __repr__(self) -> str:
        return f"<InboundRequest session {self.session_id} on {self.protocol!r}>"

    @property
    def peer(self) -> Any:
        """The client's address (``transport.getPeer()``)."""
        transport: Any = self.protocol.transport
        return transport.getPeer()

    def read_all(self) -> Deferred[bytes]:
        """The whole request body (what is left of it).

        :returns: a Deferred; it fails with
            :class:`~rsocket_tx.jini.errors.SessionAbortedError` if the client aborts.
        """
        return self.body.read_all()

    def abort(self, partial: bool = True, detail: str = "") -> None:
        """Abort the session (see :meth:`ResponseWriter.abort`)."""
        self.protocol.abort_request(self, partial, detail)

    def session_failed(self, error: BaseException, discard: bool = False) -> None:
        """The session ended abnormally (protocol side). When the whole connection ended,
        the dispatcher's work still running (:attr:`dispatch`) is cancelled."""
        if self.error is None:
            self.error = error
        self.reader.fail(error, discard)
        self.writer.fail(error)
        self.response.acknowledged(False)
        dispatch = self.dispatch
        if dispatch is not None and isinstance(error, ConnectionTerminatedError):
            self.dispatch = None
            dispatch.cancel()


class JiniServerProtocol(JiniMuxProtocol):
    """The server end of one connection: each session the client opens becomes an
    :class:`InboundRequest` handed to the dispatcher.

    :param reactor: the reactor.
    :param config: the settings.
    :param dispatcher: this connection's :class:`Dispatcher`.
    """

    def __init__(self, reactor: Any, config: JiniMuxConfig | None, dispatcher: Dispatcher) -> None:
        super().__init__(reactor, Role.SERVER, config)
        self.dispatcher = dispatcher
        self.draining = False
        self._shutdown_detail_out = ""
        self._drain_call: Any = None
        self._idle_call: Any = None  # config.idle_timeout: no session in progress
        self._idle_since: float | None = None  # when the last session ended (None: busy)
        self.event_handlers[SessionOpened] = self.on_session_opened
        self.event_handlers[AcknowledgmentReceived] = self.on_acknowledgment

    # ------------------------------------------------------------------ requests

    def on_session_opened(self, event: SessionOpened) -> None:
        self._idle_since = None  # (the idle time counts again once no session is in progress)
        sid = event.session_id
        request = InboundRequest(self, sid)
        self.requests[sid] = request
        request.batch = -1  # (opened by the client: every later event is its own)
        if self.draining:
            self.abort_request(request, False, "the server is shutting down")
            return
        try:
            result = self.dispatcher.dispatch(request)
        except Exception:  # noqa: BLE001 - reported like a failed Deferred
            done: Deferred[Any] = Deferred()
            done.errback()
        else:
            if inspect.isawaitable(result) and not isinstance(result, Deferred):
                done = Deferred.fromCoroutine(_dispatching(result))
            elif isinstance(result, Deferred):
                done = result
            else:
                done = succeed(result)
        if not done.called:
            request.dispatch = done  # cancelled if the connection ends first
        done.addCallbacks(self._dispatched, self._dispatch_failed, callbackArgs=(request,),
                          errbackArgs=(request,))

    def _dispatched(self, result: Any, request: InboundRequest) -> None:
        request.dispatch = None
        if result is _CANCELLED:
            self._dispatch_failed(Failure(CancelledError()), request)
            return
        request.dispatched = True
        writer = request.response
        if request.error is None and not writer.closed:
            writer.finish()
        if writer.finished:  # (the usual case: no Deferred to wait for)
            self._request_done(request)
            return
        writer.notify_finish().addCallbacks(lambda _: self._request_done(request),
                                            lambda _: None)

    def _dispatch_failed(self, failure: Failure, request: InboundRequest) -> None:
        request.dispatch = None
        request.dispatched = True
        if request.error is not None and failure.check(SessionAbortedError,
                                                       ConnectionTerminatedError,
                                                       CancelledError):
            return  # the session or connection ended under the dispatcher: not a bug
        self.log.failure("dispatch of {request!r} failed", failure, request=request,
                         level=LogLevel.error)
        message = failure.getErrorMessage()
        name = type(failure.value).__name__  # (the type is kept, as RSocket's errors keep it)
        self.abort_request(request, True, f"{name}: {message}" if message else name)

    def _request_done(self, request: InboundRequest) -> None:
        """The dispatcher returned and the response's eof was sent: if the client is still
        sending, tell it the rest is not wanted (*Close*)."""
        sid = self.session_of(request)
        if sid is not None:
            session = self.connection.session(sid)
            if session is not None and session.send is SessionState.FINISHED:
                self.connection.close(sid)
                self.flush_soon()
        self.check_drained()
        self.check_idle()

    def abort_request(self, request: InboundRequest, partial: bool = True,
                      detail: str = "") -> None:
        """Abort ``request``'s session (the API of :meth:`InboundRequest.abort`); nothing
        happens once the session is over."""
        session = self.abortable_session(request)
        if session is None:
            return
        request.writer.run_queued_pump()  # (what was written before the abort goes first)
        session = self.abortable_session(request)  # (the pump may have ended it: eof+close)
        if session is None:
            return
        self.connection.abort(session.stream_id, partial, detail)
        request.session_failed(SessionAbortedError(detail or "aborted by the server",
                                                   partial=partial), discard=True)
        self.flush_soon()
        self.check_drained()
        self.check_idle()

    def on_acknowledgment(self, event: AcknowledgmentReceived) -> None:
        request = self.request_for(event.session_id)
        if request is not None:
            request.response.acknowledged(event.positive)

    # ------------------------------------------------------------------ graceful close

    def shutdown_gracefully(self, detail: str = "") -> Deferred[None]:
        """Close the connection gracefully: new sessions are refused (an *Abort* without the
        partial flag: the client may retry them elsewhere); once no session is in progress a
        *Shutdown* is sent and the transport closed. After ``config.drain_timeout``
        milliseconds the transport is closed anyway.

        :returns: a Deferred firing once the transport is gone.
        """
        d = self.when_lost()
        if self.transport_gone:
            return d
        self.draining = True
        self._shutdown_detail_out = detail
        if self.connection is None or not self.connection.handshake_complete:
            self.close()
            return d
        self.check_drained()
        if self.is_open and self._drain_call is None:
            self._drain_call = self.reactor.callLater(self.config.drain_timeout / 1000,
                                                      self._drain_expired)
        return d

    def check_drained(self) -> None:
        """While draining: send *Shutdown* once no session is in progress."""
        conn = self.connection
        if self.draining and conn is not None and conn.is_open \
                and conn.handshake_complete and conn.active_sessions == 0:
            self.handle_events_now(conn.shutdown(self._shutdown_detail_out))

    def _drain_expired(self) -> None:
        self._drain_call = None
        if self.is_open:
            self.close()

    def check_idle(self) -> None:
        """``config.idle_timeout``: once the connection is established and no session is in
        progress, the idle time counts from now; a session in progress stops it.

        The timer is not cancelled and rescheduled for every session (a round trip each, on
        a connection busy with one request at a time): it stays scheduled, and when it fires
        on a connection that was not idle for the whole timeout it is scheduled again for
        the rest, or left off until the connection is next idle."""
        timeout = self.config.idle_timeout
        conn = self.connection
        if not timeout or conn is None:
            return
        idle = conn.is_open and conn.handshake_complete and conn.active_sessions == 0 \
            and not self.draining
        if not idle:
            self._idle_since = None
            if not conn.is_open or self.draining:
                self._stop_idle_timer()
            return
        if self._idle_since is None:
            self._idle_since = self.reactor.seconds()
        if self._idle_call is None:
            self._idle_call = self.reactor.callLater(timeout / 1000, self._idle_expired)

    def _stop_idle_timer(self) -> None:
        self._idle_since = None
        call, self._idle_call = self._idle_call, None
        if call is not None and call.active():
            call.cancel()

    def _idle_expired(self) -> None:
        self._idle_call = None
        conn = self.connection
        since = self._idle_since
        if since is None or conn is None or not conn.is_open or conn.active_sessions:
            self._idle_since = None
            self.check_idle()  # (scheduled again if the connection is idle now)
            return
        timeout = self.config.idle_timeout
        rest = since + timeout / 1000 - self.reactor.seconds()
        if rest > 0:  # a session came and went meanwhile: the idle time counts from its end
            self._idle_call = self.reactor.callLater(rest, self._idle_expired)
            return
        self.log.info("Jini ERI mux connection with no session for {timeout} ms: shut down",
                      timeout=timeout)
        self.shutdown_gracefully(f"no session for {timeout} ms")

    def events_handled(self) -> None:
        self.check_drained()
        self.check_idle()

    def transport_lost(self, reason: Failure | None) -> None:
        if self._drain_call is not None and self._drain_call.active():
            self._drain_call.cancel()
        self._drain_call = None
        self._stop_idle_timer()
        factory = getattr(self, "factory", None)
        if isinstance(factory, JiniMuxServerFactory):
            factory.connection_lost(self)
        super().transport_lost(reason)


#: what _dispatching returns when the dispatcher's work was cancelled
_CANCELLED = object()


async def _dispatching(work: Any) -> Any:
    """Await a dispatcher's coroutine; its cancellation (the connection ended) becomes
    :data:`_CANCELLED`, with the traceback dropped: it would hold the frames of the stack
    that cancelled it, the request among them, in a reference cycle."""
    try:
        return await work
    except CancelledError as exc:
        exc.__traceback__ = None
        return _CANCELLED


@implementer(IConnectionObserver)
class JiniMuxServerFactory(Factory):
    """Builds a :class:`JiniServerProtocol` per accepted connection.

    :param dispatcher_factory: a zero-argument callable making a :class:`Dispatcher` per
        connection (a Dispatcher subclass works).
    :param config: the settings (:class:`~rsocket_tx.jini.config.JiniMuxConfig`; default
        River's).
    :param reactor: the reactor; None: the global one.
    :param connection_limit: the server-wide
        :class:`~rsocket_tx.transports.limits.ConnectionLimit` to count connections in (shared
        with other factories of the same server); None: one of its own with the default cap
        (4,096). Past it a new connection is aborted at once, before any Jini state exists.

    :ivar protocols: the connections open now.
    :ivar connection_limit: the :class:`~rsocket_tx.transports.limits.ConnectionLimit`.
    """

    #: IConnectionObserver: the Jini mux has no resumable sessions
    sessions = None

    def __init__(self, dispatcher_factory: Any, config: JiniMuxConfig | None = None,
                 reactor: Any = None, connection_limit: ConnectionLimit | None = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = global_reactor
        self.dispatcher_factory = dispatcher_factory
        self.config = config if config is not None else JiniMuxConfig()
        self.reactor = reactor
        self.protocols: set[JiniServerProtocol] = set()
        if connection_limit is None:
            connection_limit = ConnectionLimit(server_name="Jini ERI mux server",
                                               reactor=reactor)
        self.connection_limit = connection_limit

    def buildProtocol(  # noqa: N802 - Twisted's name
            self, addr: Any) -> JiniServerProtocol | RefusedConnection:
        limit = self.connection_limit
        if not limit.acquire():
            return limit.refuse()  # past the cap: aborted at once, logged
        protocol = JiniServerProtocol(self.reactor, self.config, self.dispatcher_factory())
        protocol.factory = self
        protocol.connection_limit = limit  # released when its transport is lost
        self.connection_made(protocol)
        return protocol

    def connection_made(self, protocol: Any) -> None:
        """IConnectionObserver: ``protocol`` was built for a new connection."""
        self.protocols.add(protocol)

    def connection_lost(self, protocol: Any) -> None:
        """IConnectionObserver: ``protocol``'s transport is gone."""
        self.protocols.discard(protocol)

    def transport_lost(self, protocol: Any) -> None:
        """IConnectionObserver: (no resumable sessions: :meth:`connection_lost` says it)."""

    def session_resumed(self, protocol: Any) -> None:
        """IConnectionObserver: (no resumable sessions: never called)."""

    def session_ended(self, protocol: Any) -> None:
        """IConnectionObserver: (no resumable sessions: never called)."""

    def close_connections(self, detail: str = "") -> Deferred[Any]:
        """Close every connection gracefully (:meth:`JiniServerProtocol.shutdown_gracefully`);
        stop listening first.

        :returns: a Deferred firing once every transport is gone.
        """
        return DeferredList([p.shutdown_gracefully(detail) for p in list(self.protocols)],
                            consumeErrors=True)


#: What :func:`serve` returns around a wrapped port (the shared
#: :class:`~rsocket_tx.transports.listening.ServerPort`).
JiniServerPort = ServerPort


def serve(reactor: Any, endpoint: Any, dispatcher_factory: Any,
          config: JiniMuxConfig | None = None) -> Deferred[Any]:
    """Serve the Jini ERI mux on ``endpoint``.

    :param reactor: the reactor.
    :param endpoint: a URI (``"jini+tcp://127.0.0.1:7879"``, ``"jini+tcp://:7879"`` = every
        IPv4 interface, ``"jini+tls://:7879?privateKey=key.pem&certKey=cert.pem"``;
        ``tcp://`` and ``tls://`` alike), a Twisted server endpoint string
        (``"tcp:7879:interface=127.0.0.1"``, ``"ssl:7879:privateKey=key.pem:certKey=cert.pem"``,
        ``"mtls:..."``, ``"unix:/path"``) or an ``IStreamServerEndpoint``
        (:func:`rsocket_tx.jini.endpoints.server_endpoint`).
    :param dispatcher_factory: a zero-argument callable making a :class:`Dispatcher` per
        connection (a Dispatcher subclass works).
    :param config: the settings (:class:`~rsocket_tx.jini.config.JiniMuxConfig`).
    :returns: a Deferred firing with the ``IListeningPort``; its ``factory`` is the
        :class:`JiniMuxServerFactory` (``port.factory.close_connections()`` closes the
        connections gracefully).
    :raises ValueError: a bad endpoint string or URI (a WebSocket one among them: the mux
        needs a byte stream).
    """
    factory = JiniMuxServerFactory(dispatcher_factory, config, reactor)
    return listen(server_endpoint(reactor, endpoint), factory)
