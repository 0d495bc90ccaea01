"""The Jini ERI mux client over Twisted, in the spirit of JERI's ``OutboundRequest``.

::

    client = JiniMuxClient(reactor, "jini+tcp://127.0.0.1:7879")
    response = await client.request(b"body")          # one request, whole bodies

    outbound = await client.new_request()              # streaming both ways
    outbound.write(b"part 1")                          # an IConsumer: registerProducer works
    outbound.finish()                                  # eof
    async for chunk in outbound.response:              # the response, chunk by chunk
        ...

A :class:`JiniMuxClient` keeps connections to one server endpoint: a request takes a free
session (lowest id first) of an open connection; when every connection has
``config.max_sessions`` (at most 128) sessions in use it opens one more.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from twisted.internet.defer import Deferred, DeferredList, fail, succeed
from twisted.internet.protocol import Factory
from twisted.logger import Logger
from twisted.python.failure import Failure

from ..bridge import failure_for
from .config import JiniMuxConfig
from .connection import Role, SessionState
from .endpoints import client_endpoint
from .errors import ConnectionTerminatedError, SessionAbortedError
from .events import SessionClosed, SessionReleased
from .protocol import JiniMuxProtocol
from .streams import DataReader, DataWriter

__all__ = ["JiniMuxClient", "OutboundRequest", "JiniClientProtocol"]

_log = Logger()


class OutboundRequest:
    """One request on one session (JERI's ``OutboundRequest``): write the request body, read
    the response.

    The session is established by the first :meth:`write` or :meth:`finish` (a *Data* with
    ``open``). Writing is a Twisted ``IConsumer``: a registered producer is paused while the
    server's ration is spent. :attr:`response` yields the response's chunks as an async
    iterator (:class:`~rsocket_tx.jini.streams.DataReader`); :meth:`read_all` collects them.

    If the server closes the session before the request body is finished (it does not want
    the rest), what is still written is silently dropped (§Close Message). If the session is
    aborted, writes raise and the response fails with
    :class:`~rsocket_tx.jini.errors.SessionAbortedError`; its ``partial`` flag tells whether
    the request may have been processed (False: safe to retry).

    :ivar session_id: the session id (0 .. 127).
    :ivar response: the response data (:class:`~rsocket_tx.jini.streams.DataReader`).
    :ivar ack_required: the server asked for an *Acknowledgment*; it is sent once the end of
        the response has been read.
    """

    def __init__(self, protocol: JiniClientProtocol, session_id: int) -> None:
        self.session_id = session_id
        self.protocol = protocol
        self.writer = DataWriter(protocol, self)
        self.reader = self.response = DataReader(protocol, self, canceller=self.abort)
        self.ack_required = False
        self.error: BaseException | None = None
        self.batch = -1

    def __repr__(self) -> str:
        return f"<OutboundRequest session {self.session_id} on {self.protocol!r}>"

    # ------------------------------------------------------------------ the request body

    def write(self, data: bytes) -> None:
        """Write request data (never blocks).

        :raises LocalProtocolError: after :meth:`finish`.
        :raises SessionAbortedError: the session was aborted.
        :raises ConnectionTerminatedError: the connection ended.
        """
        self.writer.write(data)

    def writeSequence(self, data: list[bytes]) -> None:  # noqa: N802 - IConsumer
        """:meth:`write` each of ``data``."""
        self.writer.writeSequence(data)

    def registerProducer(self, producer: Any, streaming: bool) -> None:  # noqa: N802
        """``IConsumer``: the producer is paused while the server's ration is spent."""
        self.writer.registerProducer(producer, streaming)

    def unregisterProducer(self) -> None:  # noqa: N802
        """``IConsumer``."""
        self.writer.unregisterProducer()

    def finish(self) -> None:
        """The request body is complete: eof follows what is still waiting."""
        self.writer.finish()

    def notify_finish(self) -> Deferred[None]:
        """A Deferred firing when the whole request body (and eof) was sent."""
        return self.writer.notify_finish()

    def abort(self, detail: str = "") -> None:
        """Abort the session (*Abort*): the response fails with
        :class:`~rsocket_tx.jini.errors.SessionAbortedError`. Does nothing once the session
        is over."""
        self.protocol.abort_request(self, detail)

    # ------------------------------------------------------------------ the response

    def read_all(self) -> Deferred[bytes]:
        """The whole response (the rest of it, if some was read through :attr:`response`).

        :returns: a Deferred; cancelling it aborts the request.
        """
        return self.response.read_all()

    # ------------------------------------------------------------------ protocol side

    def session_failed(self, error: BaseException, discard: bool = False) -> None:
        """The session ended abnormally (protocol side)."""
        if self.error is None:
            self.error = error
        self.reader.fail(error, discard)
        self.writer.fail(error)


class JiniClientProtocol(JiniMuxProtocol):
    """The client end of one connection.

    :param reactor: the reactor.
    :param config: the settings.
    :param observer: the :class:`JiniMuxClient` told when sessions free up and when the
        connection ends (``session_freed(protocol)``, ``connection_gone(protocol)``), or
        None.
    """

    def __init__(self, reactor: Any, config: JiniMuxConfig | None = None,
                 observer: JiniMuxClient | None = None) -> None:
        super().__init__(reactor, Role.CLIENT, config)
        self.observer = observer
        self.event_handlers[SessionClosed] = self.on_session_closed
        self.event_handlers[SessionReleased] = self.on_session_released

    @property
    def can_open_session(self) -> bool:
        """A new request fits on this connection now."""
        return self.connection is not None and self.connection.can_open_session

    def new_request(self) -> OutboundRequest:
        """Take a free session of this connection (nothing is sent yet).

        :raises NoFreeSessionError: every session is in use.
        :raises LocalProtocolError: the connection is not established (or ended).
        """
        sid = self.connection.open_session()
        request = OutboundRequest(self, sid)
        self.add_request(sid, request)
        return request

    def abort_request(self, request: OutboundRequest, detail: str = "") -> None:
        """Abort ``request``'s session (the API of :meth:`OutboundRequest.abort`)."""
        session = self.abortable_session(request)
        if session is None:
            return
        request.writer.run_queued_pump()  # (what was written before the abort goes first)
        sent = session.send is not SessionState.IDLE  # (before the abort terminates it)
        self.connection.abort(session.stream_id, detail=detail)
        request.session_failed(SessionAbortedError(detail or "request aborted", partial=sent),
                               discard=True)
        self._check_released(request)
        self.flush_soon()

    def session_eof_consumed(self, token: Any) -> None:
        """The application read the end of the response: send the *Acknowledgment* the
        server asked for (River sends it when the response stream is closed)."""
        sid = self.session_of(token)
        if sid is None or not token.ack_required:
            return
        session = self.connection.session(sid)
        if session is not None and session.ack_required_received and not session.ack_sent \
                and session.send is not SessionState.TERMINATED:
            self.connection.acknowledge(sid)
            self._check_released(token)
            self.flush_soon()

    def _check_released(self, request: OutboundRequest) -> None:
        sid = request.session_id
        if self.requests.get(sid) is request and self.connection.session(sid) is None:
            del self.requests[sid]
            if self.observer is not None:
                self.reactor.callLater(0, self.observer.session_freed, self)

    def on_session_closed(self, event: SessionClosed) -> None:
        request = self.request_for(event.session_id)
        if request is not None:
            request.reader.finish()  # (the eof came before the Close)
            if not event.request_complete:
                request.writer.discard()

    def on_session_released(self, event: SessionReleased) -> None:
        self.forget_request(event.session_id)
        if self.observer is not None:
            self.observer.session_freed(self)

    def connection_terminated(self, error: ConnectionTerminatedError) -> None:
        if self.observer is not None:
            self.observer.connection_gone(self)

    def transport_lost(self, reason: Failure | None) -> None:
        super().transport_lost(reason)
        if self.observer is not None:
            self.observer.connection_gone(self)


class _ClientFactory(Factory):
    def __init__(self, client: JiniMuxClient) -> None:
        self.client = client

    def buildProtocol(self, addr: Any) -> JiniClientProtocol:  # noqa: N802 - Twisted's name
        protocol = JiniClientProtocol(self.client.reactor, self.client.config, self.client)
        protocol.factory = self
        return protocol


class JiniMuxClient:
    """Requests to one Jini ERI mux server, over as many connections as needed.

    :param reactor: the reactor.
    :param endpoint: where the server listens: a URI (``"jini+tcp://127.0.0.1:7879"``,
        ``"jini+tls://host:7879?trustRoots=ca.pem"``; ``tcp://`` and ``tls://`` alike), a
        Twisted client endpoint string (``"tcp:host=127.0.0.1:port=7879"``,
        ``"tls:host=...:port=..."``) or an ``IStreamClientEndpoint``
        (:func:`rsocket_tx.jini.endpoints.client_endpoint`).
    :param config: the connection settings (:class:`~rsocket_tx.jini.config.JiniMuxConfig`;
        default River's).
    :raises ValueError: a bad endpoint string or URI (a WebSocket one among them: the mux
        needs a byte stream).
    """

    def __init__(self, reactor: Any, endpoint: Any, config: JiniMuxConfig | None = None) -> None:
        self.reactor = reactor
        self.endpoint: Any = client_endpoint(reactor, endpoint)
        self.config = config if config is not None else JiniMuxConfig()
        #: the open connections, oldest first
        self.protocols: list[JiniClientProtocol] = []
        self._connecting: list[Deferred[Any]] = []
        self._handshaking: list[JiniClientProtocol] = []  # connected, no server header yet
        self._waiters: deque[Deferred[OutboundRequest]] = deque()
        self._closed = False

    def __repr__(self) -> str:
        return (f"<JiniMuxClient {self.endpoint!r} connections={len(self.protocols)} "
                f"waiting={len(self._waiters)}>")

    # ------------------------------------------------------------------ requests

    def new_request(self) -> Deferred[OutboundRequest]:
        """A new request on a free session.

        :returns: a Deferred firing with an :class:`OutboundRequest` (at once when a
            connection has a free session; after a new connection's handshake otherwise);
            it fails with the connection error when no connection can be made. Cancelling it
            gives up waiting.
        """
        if self._closed:
            return fail(Failure(ConnectionTerminatedError("the client is closed",
                                                          by_peer=False)))
        protocol = self._free_protocol()
        if protocol is not None and not self._waiters:
            return succeed(protocol.new_request())
        d: Deferred[OutboundRequest] = Deferred(self._cancel_waiter)
        self._waiters.append(d)
        self._serve_waiters()
        return d

    def request(self, body: bytes) -> Deferred[bytes]:
        """Send ``body`` as one request and collect the whole response.

        :returns: a Deferred firing with the response bytes; it fails with
            :class:`~rsocket_tx.jini.errors.SessionAbortedError` (``partial`` tells whether
            a retry is safe) or :class:`~rsocket_tx.jini.errors.ConnectionTerminatedError`.
            Cancelling it aborts the request.
        """
        def send(outbound: OutboundRequest) -> Deferred[bytes]:
            outbound.write(body)
            outbound.finish()
            return outbound.read_all()

        if not self._closed and not self._waiters:
            protocol = self._free_protocol()
            if protocol is not None:  # (the usual case: no Deferred for the session)
                try:
                    return send(protocol.new_request())
                except Exception:  # noqa: BLE001 - as the Deferred route reports it
                    return fail()
        return self.new_request().addCallback(send)

    def ping(self) -> Deferred[float]:
        """*Ping* the server over a connection (an open one, else a new one).

        :returns: a Deferred firing with the round-trip time in seconds.
        """
        for protocol in self.protocols:
            if protocol.is_open:
                return protocol.ping()
        return self._connect().addCallback(lambda protocol: protocol.ping())

    def close(self) -> Deferred[Any]:
        """Close every connection; requests in progress and waiting fail with
        :class:`~rsocket_tx.jini.errors.ConnectionTerminatedError`.

        :returns: a Deferred firing once every transport is gone.
        """
        self._closed = True
        error = ConnectionTerminatedError("the client is closed", by_peer=False)
        waiters, self._waiters = self._waiters, deque()
        for d in waiters:
            d.errback(failure_for(error))
        closing = [protocol.close() for protocol in list(self.protocols) + self._handshaking]
        for attempt in list(self._connecting):
            attempt.cancel()
        return DeferredList(closing, consumeErrors=True)

    # ------------------------------------------------------------------ connections

    def _free_protocol(self) -> JiniClientProtocol | None:
        for protocol in self.protocols:
            if protocol.is_open and protocol.can_open_session:
                return protocol
        return None

    def _cancel_waiter(self, d: Deferred[OutboundRequest]) -> None:
        try:
            self._waiters.remove(d)
        except ValueError:
            pass

    def _serve_waiters(self) -> None:
        while self._waiters:
            protocol = self._free_protocol()
            if protocol is None:
                break
            d = self._waiters.popleft()
            d.callback(protocol.new_request())
        if self._waiters and not self._closed and \
                len(self._waiters) > len(self._connecting) * self.config.max_sessions:
            self._connect().addErrback(self._connect_failed)

    def _connect(self) -> Deferred[JiniClientProtocol]:
        attempt = self.endpoint.connect(_ClientFactory(self))
        self._connecting.append(attempt)

        handshaking: list[JiniClientProtocol] = []

        def established(protocol: JiniClientProtocol) -> Deferred[JiniMuxProtocol]:
            if self._closed:
                protocol.close()
                raise ConnectionTerminatedError("the client is closed", by_peer=False)
            handshaking.append(protocol)
            self._handshaking.append(protocol)
            return protocol.when_established()

        def done(result: Any) -> Any:
            self._connecting.remove(attempt)
            for protocol in handshaking:
                self._handshaking.remove(protocol)
                if isinstance(result, Failure) and protocol.tls_failure is not None:
                    result = Failure(protocol.tls_failure)  # the TLS failure, in words
                if self._closed or not isinstance(result, JiniClientProtocol):
                    protocol.close()
            if isinstance(result, JiniClientProtocol):
                if not result.is_open:
                    raise result.terminated or ConnectionTerminatedError(
                        "the connection ended during its handshake")
                if not self._closed:
                    self.protocols.append(result)
                    self._serve_waiters()
            return result

        attempt.addCallback(established)
        attempt.addBoth(done)
        result: Deferred[Any] = Deferred()
        attempt.chainDeferred(result)
        return result

    def _connect_failed(self, failure: Failure) -> None:
        # the waiters no attempt in flight will serve fail
        capacity = len(self._connecting) * self.config.max_sessions
        if self._free_protocol() is not None:
            self._serve_waiters()
            return
        while len(self._waiters) > capacity:
            self._waiters.pop().errback(failure)

    # ------------------------------------------------------------------ observer

    def session_freed(self, protocol: JiniClientProtocol) -> None:
        """A session of ``protocol`` was released (called by the protocol)."""
        self._serve_waiters()

    def connection_gone(self, protocol: JiniClientProtocol) -> None:
        """``protocol``'s connection ended (called by the protocol)."""
        if protocol in self.protocols:
            self.protocols.remove(protocol)
            if self._waiters:
                self._serve_waiters()
