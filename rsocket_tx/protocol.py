"""Twisted transport glue: bytes from a transport into the sans-IO core, events out to
Deferreds, streams and the application's :class:`~rsocket_tx.responder.Responder`.

:class:`RSocketProtocol` is the RSocket protocol on the one Twisted bridge,
:class:`~rsocket_tx.bridge.MuxProtocol`: an ``IProtocol`` and an ``IPushProducer`` that
registers itself as the transport's streaming producer, so a full write buffer pauses every
outbound stream pump until the transport drains (``resumeProducing``). Writes are batched:
everything the core queues while handling one read (or one API call) goes out in a single
``transport.write``.

What waits in the transport for the peer to read is counted: the write that filled the
transport's buffer (it pauses us), then everything written until it has drained (it resumes
us): answers to the peer's requests, control frames. Past ``max_send_buffer_size`` the peer is
taken not to read and the connection is aborted
(:class:`~rsocket_tx.core.errors.ExcessiveBufferingError`).
:meth:`RSocketProtocol.close_gracefully` and
:meth:`RSocketServerFactory.close_connections` close gracefully (spec §Error Codes,
CONNECTION_CLOSE).

Resumption (spec §Resuming Operation): a resumable connection (the client's SETUP carried a
token, the server factory has ``resume=True``) outlives its transport. The client's
:class:`RSocketProtocol` stays the session: its factory reconnects to the same endpoint with
exponential backoff and the protocol sends RESUME on the new transport. On the server the
factory keeps every resumable session by token (:attr:`RSocketServerFactory.sessions`); the
protocol of a new connection that begins with RESUME hands its transport to the session's
protocol and then only relays to it. Requests made meanwhile wait in the resume buffer;
outbound stream pumps pause while there is no transport.

Leases (spec §Lease Semantics): when the client's SETUP has the L flag, each side's
:class:`~rsocket_tx.lease.LeaseHandle` (``protocol.lease``) runs its
:class:`~rsocket_tx.lease.LeasePolicy` (the first LEASE as soon as the connection is
established, then every ``policy.interval`` ms) and wakes who waits for a lease; the core
enforces them both ways.

Seams (:mod:`rsocket_tx.interfaces`): the protocol is the
:class:`~rsocket_tx.interfaces.IStreamHost` of its streams and pumps, the
:class:`~rsocket_tx.interfaces.ILeaseHost` of its lease handle and the
:class:`~rsocket_tx.interfaces.IRequesterHost` of its :class:`~rsocket_tx.requester.RSocket`;
its factory observes it as an :class:`~rsocket_tx.interfaces.IConnectionObserver`. Settings
travel as one :class:`~rsocket_tx.core.config.ConnectionConfig`.
"""

from __future__ import annotations

import dataclasses
import inspect
import weakref
from collections.abc import Callable, Iterable

from twisted.internet.defer import (
    CancelledError,
    Deferred,
    ensureDeferred,
    fail,
    gatherResults,
    succeed,
)
from twisted.internet.protocol import ClientFactory, Factory
from twisted.logger import Logger, LogLevel
from twisted.python.failure import Failure
from zope.interface import implementer

from .bridge import ABORT_DELAY, ConnectionLogger, MuxProtocol, describe_loss, failure_for
from .core import errors as E
from .core.config import ConnectionConfig, check_drain_timeout
from .core.connection import Role, RSocketConnection
from .core.events import (
    CancelReceived,
    ConnectionClosed,
    ConnectionClosing,
    ConnectionDetached,
    ConnectionResumed,
    LeaseReceived,
    MetadataPushReceived,
    PayloadReceived,
    PayloadsReceived,
    RequestNReceived,
    RequestReceived,
    RequestsReceived,
    ResponsesReceived,
    ResumeReceived,
    SetupReceived,
    StreamErrored,
)
from .core.frames import FrameType, ResumeFrame, SetupFrame
from .core.lease import NO_LEASE, LeasePolicy
from .core.payload import Payload
from .core.resume import Backoff, BackoffAttempts, SessionStore
from .core.sniff import WEBSOCKET_SUBPROTOCOL
from .interceptors import Interceptor, observe
from .interfaces import (
    IConnectionObserver,
    IFrameTransport,
    ILeaseHost,
    IRequesterHost,
    IStreamHost,
)
from .lease import LeaseHandle
from .requester import RSocket
from .responder import Responder, SetupInfo
from .streams import (
    DEFAULT_PREFETCH,
    OutboundPump,
    RequestStream,
    check_send_limit,
    to_rsocket_error,
)
from .transports.limits import ConnectionLimit, RefusedConnection
from .transports.peers import closed_server, guess_client, guess_server, silent_server

__all__ = [
    "ABORT_DELAY",
    "CLIENT_SETTINGS",
    "IFrameTransport",
    "RSocketClientFactory",
    "RSocketProtocol",
    "RSocketServerFactory",
    "SERVER_SETTINGS",
    "build_config",
]

def _as_deferred(result) -> Deferred | None:
    """The Deferred a handler returned (a coroutine is wrapped), or None for a plain value."""
    if result is None or result.__class__ is Payload:
        return None
    if isinstance(result, Deferred):
        return result
    if inspect.iscoroutine(result):
        return ensureDeferred(result)
    return None


def _words(error: E.RSocketError | None) -> str:
    """An error in a log line's words: a :class:`~rsocket_tx.core.errors.ConnectionLostError`
    (the transport, the peer's silence: no frame) by its message, any other as
    ``"ERROR[CODE]: message"``."""
    if error is None:
        return "no error"
    if isinstance(error, E.ConnectionLostError):
        return error.message
    return f"ERROR[{E.error_code_name(error.error_code)}]: {error.message}"


def _end_reason(event: ConnectionClosed, server: bool) -> str:
    """Why the connection closed, for its "closed" log line.

    :param server: this side is the server: a SETUP error (ERROR[INVALID_SETUP],
        ERROR[REJECTED_RESUME], ...) is then one this side sent, rejecting the client's first
        frame (the core reports it as caused by the peer), not one the peer sent.
    """
    error = event.error
    if error is None:
        return "closed by this side"
    if isinstance(error, E.ConnectionLostError):
        return error.message  # e.g. "the peer closed the connection without CONNECTION_CLOSE"
    if not event.by_peer or (server and isinstance(error, E.SetupError)):
        return f"closed by this side with {_words(error)}"
    if isinstance(error, E.ProtocolError):
        return (f"the peer broke the protocol ({error.message}): closed with "
                "ERROR[CONNECTION_ERROR]")
    if isinstance(error, E.ConnectionCloseError):
        return f"the peer closed the connection ({_words(error)})"
    return f"ended by the peer: {_words(error)}"


class _Response(Deferred):
    """The Deferred of one request-response (a :class:`~twisted.internet.defer.Deferred`):
    it knows its stream id, so one canceller, bound once per connection, serves every
    request (no closure per request)."""

    stream_id: int


@implementer(IConnectionObserver)
class _NoObserver:
    """The observer of a protocol whose factory observes nothing."""

    sessions = None

    def connection_made(self, protocol) -> None:
        pass

    def connection_lost(self, protocol) -> None:
        pass

    def transport_lost(self, protocol) -> None:
        pass

    def session_resumed(self, protocol) -> None:
        pass

    def session_ended(self, protocol) -> None:
        pass


_NO_OBSERVER = _NoObserver()


@implementer(IStreamHost, ILeaseHost, IRequesterHost)
class RSocketProtocol(MuxProtocol):
    """One RSocket connection over one Twisted transport: a byte stream (TCP, TLS, ...) or a
    message transport providing :class:`~rsocket_tx.interfaces.IFrameTransport` (WebSocket:
    one frame per message).

    :param role: ``"client"`` or ``"server"``.
    :param config: :class:`~rsocket_tx.core.config.ConnectionConfig`.
    :param responder: client: the :class:`Responder` serving requests from the server.
    :param responder_factory: server: zero-argument callable making one :class:`Responder` per
        connection, called when SETUP arrives.
    :param setup: client: the :class:`~rsocket_tx.core.frames.SetupFrame` to send.
    :param reactor: the reactor (``IReactorTime``) for keepalive timers and pump scheduling.
    :param frame_logger: ``callable(direction, frame)`` for a frame-level debug log.
    :param lease_policy: what this side grants the peer when the connection uses leases (the
        client's SETUP has the L flag): a :class:`~rsocket_tx.lease.LeasePolicy`; None grants
        an unlimited lease (:class:`~rsocket_tx.lease.UnlimitedLeasePolicy`).

    :ivar lease: the connection's :class:`~rsocket_tx.lease.LeaseHandle`.
    :ivar rsocket: the connection's requester handle, :class:`~rsocket_tx.requester.RSocket`.
    :ivar tls_failure: the :class:`~rsocket_tx.transports.tls.TLSError` the transport was lost to (a
        certificate or host name rejected, by us or by the peer), else None. The connection's
        close reason and the errors of its requests say the same.
    """

    #: what the log lines call the wire format (``"RSocket server connection opened"``)
    wire_name = "RSocket"
    #: the words of a transport that closed cleanly while the connection was open (it ends
    #: with ERROR[CONNECTION_CLOSE], or an ERROR on stream 0, when a peer means to close)
    clean_close = "the peer closed the connection without CONNECTION_CLOSE"
    #: the wire format's name in :data:`~rsocket_tx.transports.oneport.PROTOCOLS`: a peer is
    #: named by the other protocols' first bytes (:mod:`rsocket_tx.transports.peers`)
    peer_protocol = "rsocket"
    # the first bytes the peer sends are kept, to name a peer of another protocol: a server's
    # client whose first frame is another protocol's (rejected at once), a client's server
    # that answers in another protocol or not at all
    watch_first_bytes = True

    #: The sans-IO connection class, built as ``connection_class(role, config, setup=...,
    #: now=..., frame_logger=...)``: RSocket 1.0's; a wire format that speaks the same
    #: methods and events plugs in its own (the 2015 draft,
    #: :class:`~rsocket_tx.reactivesocket.protocol.ReactiveSocketProtocol`).
    connection_class = RSocketConnection

    def __init__(self, role: str, config: ConnectionConfig, *, reactor,
                 responder: Responder | None = None,
                 responder_factory: Callable[[], Responder] | None = None,
                 setup: SetupFrame | None = None,
                 frame_logger: Callable | None = None,
                 lease_policy: LeasePolicy | None = None) -> None:
        super().__init__(reactor, max_send_buffer_size=config.max_send_buffer_size)
        self._role = role
        self.protocol_name = f"{self.wire_name} {role}"  # (MuxProtocol's log wording)
        self._config = config
        # the request-n window of the streams we receive, sized by bytes too (spec §Flow
        # Control; ConnectionConfig.stream_window_bytes)
        self._window = {"max_window": config.max_stream_window,
                        "window_bytes": config.stream_window_bytes}
        self._responder = responder
        self._responder_factory = responder_factory
        self._setup_frame = setup
        self._frame_logger = frame_logger
        self._conn: RSocketConnection | None = None  # (also self.connection)
        self.setup_info: SetupInfo | None = (
            SetupInfo.from_frame(setup) if setup is not None else None)
        self._written: list[Deferred] = []  # fire-and-forget / metadata-push Deferreds
        self._responses: dict[int, Deferred] = {}  # requester: request-response waiting
        # every request-response's canceller, bound once (no closure per request)
        self._canceller: Callable[[Deferred], None] = self._cancel_response
        self._inbound: dict[int, RequestStream] = {}  # streams whose items we receive
        self._pumps: dict[int, OutboundPump] = {}  # streams whose items we send
        self._handlers: dict[int, Deferred] = {}  # responder: request-response in progress
        self._wakeups: list[RequestStream] = []  # streams to wake once this read is handled
        self._send_response: Callable[[int, Payload], bool] | None = None  # (make_connection)
        # the requester handle: held by whoever uses it (the application, the responder),
        # referred to weakly here so that it makes no cycle with this protocol
        self._rsocket: weakref.ref[RSocket] | None = None
        self.lease = LeaseHandle(self, lease_policy)
        self._ready_call = None  # the client's wait for its first LEASE
        self._closed_waiters: list[Deferred] = []
        self.close_reason: E.RSocketError | None = None
        # resumption: the relay whose transport carries this session now (server), or the
        # session this protocol relays to (a server connection that began with RESUME)
        self._relay: RSocketProtocol | None = None
        self._delegate: RSocketProtocol | None = None
        self.resumes = 0  # successful resumptions of this session
        self._resume_waiters: list[Deferred] = []
        self._serve = {
            FrameType.REQUEST_RESPONSE: self._serve_response,
            FrameType.REQUEST_FNF: self._serve_fnf,
            FrameType.REQUEST_STREAM: self._serve_stream,
            FrameType.REQUEST_CHANNEL: self._serve_channel,
        }
        self.event_handlers = {
            PayloadReceived: self._on_payload,
            PayloadsReceived: self._on_payloads,
            RequestReceived: self._on_request,
            RequestsReceived: self._on_requests,
            ResponsesReceived: self._on_responses,
            RequestNReceived: self._on_request_n,
            CancelReceived: self._on_cancel,
            StreamErrored: self._on_stream_errored,
            MetadataPushReceived: self._on_metadata_push,
            SetupReceived: self._on_setup,
            LeaseReceived: self._on_lease,
            ConnectionClosing: self._on_connection_closing,
            ConnectionClosed: self._on_connection_closed,
            ConnectionDetached: self._on_detached,
            ConnectionResumed: self._on_resumed,
            ResumeReceived: self._on_resume_received,
        }


    # (the test-suite reads these under their former names)
    _ended = property(lambda self: self.ended)
    _transport_gone = property(lambda self: self.transport_gone)

    @property
    def observer(self) -> IConnectionObserver:
        """The :class:`~rsocket_tx.interfaces.IConnectionObserver` told about this
        connection: its ``factory`` if that provides it, else an observer that ignores
        everything."""
        factory = self.factory
        return factory if IConnectionObserver.providedBy(factory) else _NO_OBSERVER

    @property
    def responder(self) -> Responder | None:
        """The :class:`~rsocket_tx.responder.Responder` serving the peer's requests on this
        connection: a server's once the SETUP was accepted, a client's the one it was given
        (or the default one made for the first request); None before, and once the
        connection is over."""
        return self._responder

    @property
    def rsocket(self) -> RSocket:
        """The connection's requester handle (:class:`~rsocket_tx.requester.RSocket`): the
        same object for as long as anyone holds it. It holds this protocol; this protocol
        refers to it weakly (no reference cycle)."""
        handle = self._rsocket() if self._rsocket is not None else None
        if handle is None:
            handle = RSocket(self)
            self._rsocket = weakref.ref(handle)
        return handle

    # ------------------------------------------------------------------ bridge hooks

    def make_connection(self) -> RSocketConnection:
        """The sans-IO :class:`~rsocket_tx.core.connection.RSocketConnection` (without length
        prefixes over a message transport); the responder learns its requester handle."""
        config = self._config
        if self.message_transport:
            # a message transport: one frame per message, no length prefix; and the stream
            # windows stay in items (each item is a message: a window grown by bytes, 4,032
            # messages of 64 bytes, halved the WebSocket stream's rate in make bench)
            config = dataclasses.replace(config, length_prefixed=False)
            self._window = {"max_window": config.max_stream_window, "window_bytes": 0}
        frame_logger = self._frame_logger
        if frame_logger is not None:
            for_connection = getattr(frame_logger, "for_connection", None)
            if for_connection is not None:  # its lines carry our connection id and peer
                frame_logger = for_connection(self.log)
        conn = self._conn = self.connection_class(self._role, config, setup=self._setup_frame,
                                                  now=self.reactor.seconds(),
                                                  frame_logger=frame_logger)
        # the batch path of stream items (one event per stream and read), unless something
        # observes each item but not batches (wraps the PayloadReceived handler only)
        handlers = self.event_handlers
        conn.batch_payloads = handlers.get(PayloadReceived) == self._on_payload or \
            handlers.get(PayloadsReceived) != self._on_payloads
        # the batch path of whole fire-and-forgets, request-responses and their answers (one
        # event per run of them in a read), unless something observes each request or item
        if handlers.get(RequestReceived) == self._on_request and \
                handlers.get(PayloadReceived) == self._on_payload:
            conn.batch_requests = True
        # IStreamHost, bound straight to the connection: no extra call per item
        # (instance attributes in place of the methods: the connection's own bound methods)
        self.send_item = conn.send_payload  # type: ignore[method-assign]
        send_payloads = getattr(conn, "send_payloads", None)  # (the 2015 draft's has none)
        if send_payloads is not None:
            self.send_items = send_payloads  # type: ignore[method-assign]
        self.credit = conn.credit  # type: ignore[method-assign]
        # the responder's hot path of a request-response answer (the 2015 draft's has none)
        self._send_response = getattr(conn, "send_response", None)
        if self._responder is not None:
            self._responder.rsocket = self.rsocket
            self._give_log(self._responder)
            if self.setup_info is not None:
                self._responder.setup = self.setup_info
        return conn

    def connection_started(self) -> None:
        conn = self._conn
        assert conn is not None
        if conn.lease_enabled:
            self.lease.start()  # the client-side responder's first LEASE follows SETUP

    def connectionMade(self) -> None:
        if self._conn is not None:
            self._reconnected()
            return
        super().connectionMade()  # the client's SETUP (and LEASE), in one write
        self.observer.connection_made(self)

    def dataReceived(self, data: bytes) -> None:
        if self._delegate is not None:
            self._delegate.dataReceived(data)  # a relay of a resumed session
            return
        conn = self._conn
        assert conn is not None
        events = conn.receive_data(data, self.reactor.seconds())
        if events:  # (handle_read, inlined: the path of every read)
            self.handle_events(events)
            if conn.read_failure is not None:
                # an oversize prefix followed these frames: handled first, now the failure
                self.handle_events(conn.pending_events())
            if self.held is None and not self.released:
                return  # (handle_events wrote at its end)
        self.flush()

    def frameReceived(self, frame: bytes) -> None:
        """One whole RSocket frame (no length prefix) from an
        :class:`~rsocket_tx.interfaces.IFrameTransport`: one WebSocket binary message."""
        if self._delegate is not None:
            self._delegate.frameReceived(frame)  # a relay of a resumed session
            return
        super().frameReceived(frame)

    def framesReceived(self, frames: list[bytes]) -> None:
        """Several whole frames from an :class:`~rsocket_tx.interfaces.IFrameTransport` (the
        messages of one read), handled as one read of a byte stream: their events in one
        batch, one write."""
        conn = self._conn
        assert conn is not None
        if self._delegate is not None:
            self._delegate.framesReceived(frames)
            return
        if not conn.is_established:  # (SETUP, RESUME: handled one at a time)
            for frame in frames:
                self.frameReceived(frame)
            return
        conn = self._conn
        receive_frames = getattr(conn, "receive_frames", None)
        if conn is None or receive_frames is None:  # (without it: the 2015 draft's)
            super().framesReceived(frames)
            return
        events = receive_frames(frames, self.reactor.seconds())
        if events:
            self.handle_events(events)
            if conn.read_failure is not None:
                # a frame past the max frame size followed these: handled first, now it
                self.handle_events(conn.pending_events())
        self.flush()

    def transport_error(self, reason: str) -> None:
        """The transport received something that is no RSocket frame (a WebSocket text
        message, a message past the max frame size): close the connection with
        ERROR[CONNECTION_ERROR] ``reason`` (spec §Error Codes), then close the transport."""
        target = self._delegate if self._delegate is not None else self
        if target.is_open:
            target.close(E.ConnectionError(reason))
        elif self.transport is not None:
            self.transport.loseConnection()

    def transport_lost(self, reason) -> None:
        if self._delegate is not None:
            self._delegate.relay_lost(self, reason)  # a relay: its session lost the transport
            self.release()  # (the relay itself is over)
            return
        if self._relay is not None:
            return  # the session's first transport, already replaced by a resumed one
        self._transport_lost(reason)

    def _transport_lost(self, reason) -> None:
        self.stop_timers()
        self.transport_gone = True
        conn = self._conn
        if conn is not None:
            why = describe_loss(reason, self.clean_close)
            if conn.is_resumable and conn.is_open and not self.aborting:
                self.handle_events(conn.detach(self.reactor.seconds(), why))
                if conn.is_open:  # the session waits for a resume
                    self.schedule_tick()  # its expiry
                    self.observer.transport_lost(self)
                    return
            else:
                self.handle_events(conn.connection_lost(why))
        self._session_over()

    def excessive_buffering(self, message: str) -> None:
        """The peer does not read: abort the connection (nothing more is written); its
        requests fail with :class:`~rsocket_tx.core.errors.ExcessiveBufferingError`."""
        conn = self._conn
        assert conn is not None
        error = E.ExcessiveBufferingError(message)
        self.log.warn("RSocket connection aborted: {error}", error=error)
        self.handle_events_now(conn.connection_lost(error=error))

    def producing_resumed(self) -> None:
        for pump in list(self._pumps.values()):
            pump.resume()

    def data_flushed(self) -> None:
        conn = self._conn
        assert conn is not None
        if self._written and not conn.is_detached:
            self._fire_written()

    def connection_ended(self) -> None:
        conn = self._conn
        assert conn is not None
        if not self.ended:
            # a graceful close ended with the last stream, in an API call: its
            # ConnectionClosed is pending
            pending = conn.pending_events()
            if pending:
                self.handle_events_now(pending)
                return
        if not self.transport_gone:  # (a detached session that ended has none)
            self.end_transport()

    def events_handled(self) -> None:
        # wake consumers once per read, with every item of the read already queued: one
        # coroutine resumption drains them all
        while self._wakeups:
            wakeups, self._wakeups = self._wakeups, []
            for stream in wakeups:
                stream.wake()

    def first_bytes_seen(self) -> bool:
        """Server: a connection whose first bytes are another protocol's client's (TLS, HTTP,
        the Jini mux, ...: :func:`~rsocket_tx.transports.peers.guess_client`) is rejected at
        once with ERROR[INVALID_SETUP] naming it (spec §Connection Establishment), not after
        waiting for a frame its length prefix never completes."""
        if self._role != Role.SERVER or self._delegate is not None:
            return False
        guess = guess_client(self.first_bytes, exclude=self.peer_protocol)
        if guess is None:
            return False
        self._reject_setup(E.InvalidSetupError(
            f"the first bytes are no {self.wire_name} SETUP: they look like {guess.what}"))
        return True

    def _wrong_server(self, error: E.RSocketError) -> E.RSocketError:
        """Client, the connection closed: ``error``, or, when the server answered in another
        protocol (:func:`~rsocket_tx.transports.peers.guess_server`) or sent no byte at all,
        a :class:`~rsocket_tx.core.errors.ConnectionLostError` that says so and what to do."""
        conn = self._conn
        assert conn is not None
        if self.message_transport or isinstance(
                error, (E.SetupError, E.ConnectionCloseError, E.ExcessiveBufferingError)):
            # (WebSocket: its handshake tells the server; an RSocket server's answer; our
            # side's doing)
            return error
        guess = guess_server(self.first_bytes, exclude=self.peer_protocol)
        if guess is not None:
            return E.ConnectionLostError(f"{guess} ({error.message})")
        if self.first_bytes or not isinstance(error, E.ConnectionLostError) \
                or conn.resume_token is not None:
            return error  # (bytes of no known protocol; a resumable session's own end)
        if self.transport_gone:
            return E.ConnectionLostError(f"{closed_server(self.wire_name)} ({error.message})")
        setup = conn.setup
        assert setup is not None  # (a client's)
        return E.ConnectionLostError(silent_server(setup.max_lifetime, self.wire_name))

    # ------------------------------------------------------------------ session state

    def _session_over(self) -> None:
        """The RSocket connection is over and no transport is left: tell the observer and
        whoever waits in :meth:`when_closed`."""
        self.log_closed()
        self.observer.connection_lost(self)
        waiters, self._closed_waiters = self._closed_waiters, []
        for d in waiters:
            d.callback(None)
        self.release()

    def release(self) -> None:
        """The connection is over and no transport is left: also drop the request-type
        table (bound methods), the responder (it holds our requester handle) and the links
        between a resumed session and its relay, so that nothing but reference counting is
        needed to free them (see :meth:`~rsocket_tx.bridge.MuxProtocol.release`)."""
        super().release()
        self._serve = {}
        self._canceller = _no_cancel  # (a bound method of ours: a cycle)
        self._responder = None
        self._relay = self._delegate = None
        self._wakeups = []

    def end_session(self, why: str) -> None:
        """End a resumable session that lost its transport and waits for a resume (see
        :meth:`~rsocket_tx.interfaces.IConnectionObserver.transport_lost`): its requests fail
        with :class:`~rsocket_tx.core.errors.ConnectionLostError` ``why``, and the
        connection is over.

        :param why: what happened, in words.
        """
        conn = self._conn
        assert conn is not None
        self.handle_events_now(conn.connection_lost(why))
        self._session_over()

    @property
    def is_resumable(self) -> bool:
        """True if the connection was set up resumable (SETUP with R; spec §Resuming
        Operation)."""
        conn = self._conn
        return conn is not None and conn.is_resumable

    @property
    def is_closing(self) -> bool:
        """True while a graceful close waits for open streams (:meth:`close_gracefully`, or
        the peer's ERROR[CONNECTION_CLOSE]): the connection is open but takes no new
        requests."""
        return self._conn is not None and self._conn.is_closing

    def when_closed(self) -> Deferred:
        """A new Deferred that fires with None once the transport is gone (after every queued
        byte was handed to it: a fire-and-forget followed by close is delivered). A resumable
        connection is over only when its session is: not when a transport is lost and the
        session waits for a resume."""
        d: Deferred[None] = Deferred()
        if self.transport_gone and (self._conn is None or not self._conn.is_open):
            d.callback(None)
        else:
            self._closed_waiters.append(d)
        return d

    def when_resumed(self) -> Deferred:
        """A new Deferred that fires with None at the session's next successful resumption
        (spec §Resuming Operation), or fails with the error that ends the session first."""
        d: Deferred[None] = Deferred()
        if self._conn is not None and not self._conn.is_open:
            d.errback(failure_for(
                self.close_reason or E.ConnectionLostError("the connection is closed")))
        else:
            self._resume_waiters.append(d)
        return d

    # ------------------------------------------------------------------ resumption

    def _reconnected(self) -> None:
        """Client: the factory reconnected this session's endpoint: send RESUME."""
        self.transport_attached()
        conn = self._conn
        assert conn is not None
        transport = self.live_transport
        if not conn.is_open or not conn.is_detached:
            transport.loseConnection()  # the session ended while we reconnected
            return
        if IFrameTransport.providedBy(transport) != self.message_transport:
            self.log.warn("RSocket session cannot resume over a transport of another kind "
                          "(a byte stream and a message transport frame differently)")
            transport.loseConnection()
            return
        self.log.info("RSocket session reconnected: sending RESUME")
        transport.registerProducer(self, True)
        conn.start_resume(self.reactor.seconds())
        self.flush()  # RESUME, in one write
        self.schedule_tick()

    def relay_lost(self, relay: RSocketProtocol, reason) -> None:
        """Server session: the transport of ``relay`` (the connection that resumed this
        session) was lost; it counts only if ``relay`` still carries the session."""
        if self._relay is relay:
            self._transport_lost(reason)

    def _on_detached(self, event: ConnectionDetached) -> None:
        self.paused = True  # outbound pumps wait for the resume
        self.log.info("RSocket connection lost its transport ({why}); the session waits to "
                      "be resumed", why=_words(event.error))
        if self.transport is not None and not self.transport_gone:
            # presumed dead (max lifetime): drop it; its connectionLost finds us detached
            self.live_transport.abortConnection()

    def _on_resumed(self, event: ConnectionResumed) -> None:
        conn = self._conn
        assert conn is not None
        self.resumes += 1
        self.log.info("RSocket session resumed: {resent} frame(s) sent again from position "
                      "{position}", resent=event.resent, position=event.position)
        self.observer.session_resumed(self)
        self.resumeProducing()  # pumps go on (what they send is queued after the resent)
        if conn.lease_enabled:
            # spec §Resume Operation: lease semantics restart on the new connection
            self.lease.renew()
        self.schedule_tick()
        waiters, self._resume_waiters = self._resume_waiters, []
        for d in waiters:
            d.callback(None)

    def _on_resume_received(self, event: ResumeReceived) -> None:
        """Server: this connection began with RESUME: hand it to the session of its token."""
        conn = self._conn
        assert conn is not None
        sessions = self.observer.sessions
        session = None if sessions is None else sessions.get(event.frame.token)
        if session is None or not session.is_open:
            self.handle_events_now(conn.reject_resume(
                "no resumable session has this token (unknown, or it expired)"))
            return
        if session.message_transport != self.message_transport:
            self.handle_events_now(conn.reject_resume(
                "the session was set up over another kind of transport (TCP and WebSocket "
                "frame differently); resume it over the same kind"))
            return
        self.stop_timers(abort=False)
        self._delegate = session
        self.log.info("RESUME: this transport now carries session {session}",
                      session=session.log.conn)
        self.end_reason = f"its transport carried the resumed session {session.log.conn}"
        self.observer.connection_lost(self)  # the session is the connection now
        session.adopt_relay(self, event.frame)

    def adopt_relay(self, relay: RSocketProtocol, frame: ResumeFrame) -> None:
        """Server session: continue on the transport of ``relay``, a new connection that began
        with ``frame`` (RESUME for this session's token; spec §Resuming Operation)."""
        conn = self._conn
        assert conn is not None
        old = None if self.transport_gone or self.transport is None else self.live_transport
        self._relay = relay  # from now on only this relay's transport counts
        events = conn.resume_session(frame, self.reactor.seconds())
        if old is not None:
            # the client gave this transport up (half-open): drop it; its connectionLost is
            # ignored (this session's own, or a previous relay's: relay_lost checks).  We stop
            # being its producer first: its end would call our stopProducing() and pause the
            # streams that the resumed transport carries
            self.paused = True
            old.unregisterProducer()
            old.abortConnection()
        relay.live_transport.unregisterProducer()
        self.transport = relay.transport
        transport = self.live_transport
        self.transport_attached()
        transport.registerProducer(self, True)
        self.handle_events([e for e in events if e.__class__ is not ConnectionDetached])
        self.flush()

    # ------------------------------------------------------------------ events

    def _on_setup(self, event: SetupReceived) -> None:
        conn = self._conn
        assert conn is not None
        info = self.setup_info = SetupInfo.from_frame(event.setup)
        self.schedule_tick()  # from the setup timeout to the client's max lifetime
        token = event.setup.resume_token
        if token is not None:
            # a resumable session: findable by its token until it ends
            sessions = self.observer.sessions
            refused = "resume is not enabled" if sessions is None else sessions.add(token, self)
            if refused is not None:
                self._reject_setup(E.RejectedSetupError(refused))
                return
        try:
            assert self._responder_factory is not None  # (a server's)
            responder = self._responder_factory()
            responder.rsocket = self.rsocket
            self._give_log(responder)
            responder.setup = info
            self._responder = responder
        except Exception as exc:  # noqa: BLE001
            self.log.failure("the responder factory raised")
            self._reject_setup(E.RejectedSetupError(f"server error: {exc}"))
            return
        try:
            d = _as_deferred(responder.accept_setup(info))
        except Exception:  # noqa: BLE001 - a rejection (or a bug): answered with an ERROR
            self._setup_rejected(Failure())
            return
        if d is not None:  # decided later: hold the connection's other events until then
            self.held = []
            d.addCallbacks(self._setup_accepted_later, self._setup_rejected_later)
        elif conn.lease_enabled and conn.is_open:
            self.lease.start()  # spec §Connection Establishment: the first LEASE, at once

    def _setup_rejected(self, failure: Failure) -> None:
        exc = failure.value
        if not isinstance(exc, E.SetupError):
            self.log.failure("accept_setup raised", failure)
            exc = E.RejectedSetupError(str(exc) or type(exc).__name__)
        self._reject_setup(exc)

    def _reject_setup(self, error: E.SetupError) -> None:
        conn = self._conn
        assert conn is not None
        self.handle_events_now(conn.reject_setup(error))

    def _setup_accepted_later(self, _) -> None:
        conn = self._conn
        assert conn is not None
        held, self.held = self.held, None
        assert held is not None  # (set when the decision was deferred)
        if conn.lease_enabled and conn.is_open:
            self.lease.start()
        self.handle_events(held)
        self.flush()

    def _setup_rejected_later(self, failure: Failure) -> None:
        self.held = None
        self._setup_rejected(failure)
        self.flush()

    def _on_lease(self, event: LeaseReceived) -> None:
        conn = self._conn
        assert conn is not None
        if conn.lease_enabled:
            self.lease.lease_received()
            self.schedule_tick()  # a tick when this lease expires

    def _on_request(self, event: RequestReceived) -> None:
        responder = self._responder
        if responder is None:  # a client without a responder
            responder = self._default_responder()
        self._serve[event.frame_type](responder, event)

    def _default_responder(self) -> Responder:
        """The base :class:`Responder` (it rejects every request) of a client given none,
        made for the first request the server sends."""
        responder = self._responder = Responder()
        responder.rsocket = self.rsocket
        self._give_log(responder)
        return responder

    def _on_requests(self, event: RequestsReceived) -> None:
        """Whole fire-and-forgets or request-responses of one read, in one batch: what
        :meth:`_serve_fnf` or :meth:`_serve_response` does for each, in one loop."""
        responder = self._responder
        if responder is None:
            responder = self._default_responder()
        if event.frame_type == FrameType.REQUEST_FNF:
            one_way = responder.fire_and_forget
            for payload in event.payloads:
                try:
                    result = one_way(payload)
                except Exception:  # noqa: BLE001 - logged: there is nobody to answer
                    self._one_way_failed(Failure(), one_way)
                else:
                    if result is not None:
                        d = _as_deferred(result)
                        if d is not None:
                            d.addErrback(self._one_way_failed, one_way)
                if self.ended:
                    return  # (a handler closed the connection: the rest is moot)
            return
        handler = responder.request_response
        send_response = self._send_response
        # a response this large is checked against the send limit first (see _respond)
        large = self.max_send_buffer_size * 3 // 4 - 16
        for sid, payload in zip(event.stream_ids, event.payloads):
            try:
                result = handler(payload)
            except Exception as exc:  # noqa: BLE001 - sent to the peer as an ERROR
                self._response_raised(exc, sid)
            else:
                if result.__class__ is Payload and send_response is not None and \
                        result.metadata is None and len(result.data) <= large:
                    send_response(sid, result)  # the hot path (nothing sent if canceled)
                else:
                    self._response_returned(result, sid)
            if self.ended:
                return  # (a handler closed the connection: the rest is moot)

    def _give_log(self, responder: Responder) -> None:
        """Give ``responder`` a ``log`` of this connection (its class's ``Logger``, whose
        namespace it keeps, replaced by a :class:`~rsocket_tx.bridge.ConnectionLogger`):
        what the application logs through ``self.log`` carries the connection id and peer.
        A ``log`` that is no class-level ``Logger`` is left alone."""
        current = getattr(responder, "log", None)
        if "log" in getattr(responder, "__dict__", ("log",)) and \
                not isinstance(current, ConnectionLogger):
            return  # (set on the instance by the application: its own)
        if isinstance(current, Logger):
            responder.log = self.log.child(current.namespace)

    def _serve_response(self, responder: Responder, event: RequestReceived) -> None:
        sid = event.stream_id
        try:
            result = responder.request_response(event.payload)
        except Exception as exc:  # noqa: BLE001 - sent to the peer as an ERROR
            self._response_raised(exc, sid)
            return
        self._response_returned(result, sid)

    def _response_raised(self, exc: Exception, sid: int) -> None:
        """The request-response handler raised ``exc`` (in an ``except`` block): ERROR on
        ``sid``; logged with its traceback unless it is a deliberate RSocketError."""
        if not isinstance(exc, E.RSocketError):  # (a bug: logged with its traceback)
            self._handler_failed(Failure(), "request-response handler", sid)
        conn = self._conn
        assert conn is not None
        conn.send_error(sid, to_rsocket_error(exc))

    def _response_returned(self, result: object, sid: int) -> None:
        """The request-response handler returned ``result`` for ``sid``: a Payload is sent
        (the hot path: no Deferred), a Deferred or coroutine is waited for, anything else is
        answered by :meth:`_respond`."""
        conn = self._conn
        assert conn is not None
        if result.__class__ is Payload:  # answered at once: the hot path, no Deferred
            metadata = result.metadata
            if len(result.data) + (len(metadata) if metadata else 0) \
                    > self.max_send_buffer_size * 3 // 4 - 16:
                self._respond(result, sid)  # (large: checked against the send limit)
                return
            send_response = self._send_response
            if send_response is not None:
                send_response(sid, result)  # (nothing sent if canceled meanwhile)
            elif conn.has_stream(sid):
                conn.send_payload(sid, result, True)
            return
        d = _as_deferred(result)
        if d is None:
            self._respond(result, sid)
        else:
            self._handlers[sid] = d
            d.addCallbacks(self._respond_later, self._respond_error_later, callbackArgs=(sid,),
                           errbackArgs=(sid,))

    def _serve_fnf(self, responder: Responder, event: RequestReceived) -> None:
        # (_call_one_way inlined: the whole server path of a fire-and-forget)
        handler = responder.fire_and_forget
        try:
            result = handler(event.payload)
        except Exception:  # noqa: BLE001 - logged: there is nobody to answer
            self._one_way_failed(Failure(), handler)
            return
        if result is not None:
            d = _as_deferred(result)
            if d is not None:
                d.addErrback(self._one_way_failed, handler)

    def _serve_stream(self, responder: Responder, event: RequestReceived) -> None:
        self._start_pump(event.stream_id, responder.request_stream, event.payload)

    def _serve_channel(self, responder: Responder, event: RequestReceived) -> None:
        conn = self._conn
        assert conn is not None
        sid = event.stream_id
        inbound = RequestStream(self, sid, DEFAULT_PREFETCH)
        if event.complete:
            inbound.on_complete()
        else:
            self._inbound[sid] = inbound
            conn.send_request_n(sid, DEFAULT_PREFETCH)
        inbound.attach_outbound(
            self._start_pump(sid, responder.request_channel, event.payload, inbound))

    def _call_one_way(self, handler, arg) -> None:
        """Call a fire-and-forget or metadata-push handler: nothing goes back to the peer, so
        its errors (raised, or from its Deferred or coroutine) are logged, deliberate
        RSocketErrors too."""
        try:
            result = handler(arg)
        except Exception:  # noqa: BLE001 - logged: there is nobody to answer
            self._one_way_failed(Failure(), handler)
            return
        d = _as_deferred(result)
        if d is not None:
            d.addErrback(self._one_way_failed, handler)

    def _one_way_failed(self, failure: Failure, handler) -> None:
        self.log.failure("{interaction} handler {handler} raised", failure,
                         level=LogLevel.error, interaction=handler.__name__.replace("_", "-"),
                         handler=handler.__qualname__)
        failure.cleanFailure()  # (its frames would hold this protocol in a cycle)

    def _handler_failed(self, failure: Failure, what: str, sid: int) -> None:
        """A responder's handler raised ``failure`` (or its Deferred, coroutine or source
        failed with it): unless it is a deliberate
        :class:`~rsocket_tx.core.errors.RSocketError`, a bug: logged with its traceback
        (level error, as ``twisted.web`` logs a 500), since the requester gets only
        ERROR[APPLICATION_ERROR] ``"Type: message"``."""
        if isinstance(failure.value, E.RSocketError):
            return
        responder = self._responder
        self.log.failure("{interaction} of {responder} failed on stream {stream_id} "
                         "(the requester gets ERROR[APPLICATION_ERROR])", failure,
                         level=LogLevel.error, interaction=what, stream_id=sid,
                         responder=type(responder).__name__ if responder is not None
                         else "the responder")
        failure.cleanFailure()  # (its frames would hold this protocol in a cycle)

    def _start_pump(self, sid: int, handler, *args) -> OutboundPump | None:
        """Call a stream handler and start pumping what it returns (as credit allows)."""
        try:
            source = handler(*args)
        except Exception as exc:  # noqa: BLE001 - sent to the peer as an ERROR
            if not isinstance(exc, E.RSocketError):  # (a bug: logged with its traceback)
                self._handler_failed(Failure(), handler.__name__.replace("_", "-") + " handler",
                                     sid)
            self._stream_failed_locally(sid, to_rsocket_error(exc))
            return None
        pump = OutboundPump(self, sid, source)
        if not pump.stopped:
            self._pumps[sid] = pump
        return pump

    def _respond(self, payload, sid: int) -> None:
        conn = self._conn
        assert conn is not None
        if not conn.has_stream(sid):
            return  # canceled meanwhile
        if payload is None:
            conn.send_complete(sid)
        elif not isinstance(payload, Payload):
            responder = self._responder
            self.log.error("request-response handler of {responder} returned {type} on stream "
                           "{stream_id}; it must return a Payload (or None: no payload), "
                           "directly or from a Deferred or coroutine", stream_id=sid,
                           type=type(payload).__name__,
                           responder=type(responder).__name__ if responder is not None
                           else "the responder")
            conn.send_error(sid, E.ApplicationError(
                f"request_response must return a Payload, not {type(payload).__name__}"))
        else:
            try:
                check_send_limit(self, payload)  # (larger, it would abort the connection)
            except ValueError as exc:
                self.log.error("the response on stream {stream_id} is not sent: {why}",
                               stream_id=sid, why=str(exc))
                conn.send_error(sid, E.ApplicationError(str(exc)))
                return
            if self._send_response is not None:
                self._send_response(sid, payload)  # (the hot path when it applies)
            else:
                conn.send_payload(sid, payload, complete=True)

    def _respond_error(self, failure: Failure, sid: int) -> None:
        conn = self._conn
        assert conn is not None
        if conn.has_stream(sid):
            conn.send_error(sid, to_rsocket_error(failure))

    def _respond_later(self, payload, sid: int) -> None:
        conn = self._conn
        assert conn is not None
        self._handlers.pop(sid, None)
        if conn.is_open:
            self._respond(payload, sid)
            self.flush()

    def _respond_error_later(self, failure: Failure, sid: int) -> None:
        conn = self._conn
        assert conn is not None
        self._handlers.pop(sid, None)
        if failure.check(CancelledError):
            return  # the requester canceled (we canceled the handler)
        self._handler_failed(failure, "request-response handler", sid)
        if not conn.is_open:
            return  # the connection ended: nobody to answer
        self._respond_error(failure, sid)
        self.flush()

    def _on_request_n(self, event: RequestNReceived) -> None:
        pump = self._pumps.get(event.stream_id)
        if pump is not None:
            pump.resume()

    def _on_cancel(self, event: CancelReceived) -> None:
        sid = event.stream_id
        d = self._handlers.pop(sid, None)
        if d is not None:
            d.cancel()
        pump = self._pumps.pop(sid, None)
        if pump is not None:
            pump.stop()
        if event.responding:
            # we are the responder: the requester's CANCEL ends the whole stream, inbound too.
            # (On a stream we requested, a CANCEL only stops our outbound half.)
            inbound = self._inbound.pop(sid, None)
            if inbound is not None:
                inbound.on_error(E.CanceledError("the peer canceled the stream"))

    def _on_payload(self, event: PayloadReceived) -> None:
        sid = event.stream_id
        stream = self._inbound.get(sid)
        if stream is None:
            d = self._responses.pop(sid, None)
            if d is not None:
                d.callback(event.payload)
            return
        if event.payload is not None:
            stream.on_next(event.payload)
        if event.complete:
            del self._inbound[sid]
            stream.on_complete()

    def _on_responses(self, event: ResponsesReceived) -> None:
        """The answers to our request-responses of one read, in one batch: each fires its
        request's Deferred (what :meth:`_on_payload` does for each)."""
        for sid, payload in zip(event.stream_ids, event.payloads):
            d = self._responses.pop(sid, None)
            if d is not None:
                d.callback(payload)
                if self.ended:
                    return  # (a callback closed the connection: the rest failed with it)

    def _on_payloads(self, event: PayloadsReceived) -> None:
        stream = self._inbound.get(event.stream_id)
        if stream is not None:
            stream.on_next_batch(event.payloads)

    def _on_stream_errored(self, event: StreamErrored) -> None:
        # (handed to the application as a value: the frames of a traceback, where it was
        # raised in the connection, would keep the connection alive with it)
        self._stream_failed(event.stream_id, event.error.with_traceback(None))

    def _stream_failed(self, sid: int, error: E.RSocketError) -> None:
        d = self._responses.pop(sid, None)
        if d is not None:
            d.errback(failure_for(error))
        d = self._handlers.pop(sid, None)
        if d is not None:
            d.cancel()
        pump = self._pumps.pop(sid, None)
        if pump is not None:
            pump.stop()
        stream = self._inbound.pop(sid, None)
        if stream is not None:
            stream.on_error(error)

    def _stream_failed_locally(self, sid: int, error: E.RSocketError) -> None:
        """Our side of ``sid`` failed: ERROR to the peer, then end it here."""
        conn = self._conn
        assert conn is not None
        if conn.has_stream(sid):
            conn.send_error(sid, error)
        self._stream_failed(sid, error)

    def _on_metadata_push(self, event: MetadataPushReceived) -> None:
        responder = self._responder
        if responder is None:
            return
        self._call_one_way(responder.metadata_push, event.metadata)

    def _on_connection_closing(self, event: ConnectionClosing) -> None:
        self.schedule_tick()  # the drain deadline
        if event.by_peer:
            self.log.info("RSocket peer is closing the connection ({why}); waiting for "
                          "{n} open stream(s)", why=_words(event.error), n=event.open_streams)

    def _on_connection_closed(self, event: ConnectionClosed) -> None:
        if event.error is not None:
            event.error.__traceback__ = None  # (as in _on_stream_errored)
            if self._role == Role.CLIENT:
                if self.resumes == 0:  # (a peer of another protocol is known by its start)
                    event.error = self._wrong_server(event.error)
            elif isinstance(event.error, E.SetupError):
                self.name_wrong_client(self.peer_protocol)
        error = event.error or E.ConnectionLostError("the connection was closed")
        if not isinstance(error, E.ConnectionError) and not isinstance(error, E.SetupError) \
                and not isinstance(error, E.ConnectionCloseError):
            error = E.ConnectionLostError(str(error))
        self.close_reason = event.error
        self.lease.stop(error)
        if self._ready_call is not None and self._ready_call.active():
            self._ready_call.cancel()
        self._ready_call = None
        conn = self._conn
        assert conn is not None
        if conn.resume_token is not None:
            observer = self.observer
            sessions = observer.sessions
            if sessions is not None:
                sessions.remove(conn.resume_token, self)
            observer.session_ended(self)
            waiters, self._resume_waiters = self._resume_waiters, []
            for d in waiters:
                d.errback(failure_for(error))
        responses, self._responses = self._responses, {}
        for d in responses.values():
            d.errback(failure_for(error))
        handlers, self._handlers = self._handlers, {}
        for d in handlers.values():
            d.cancel()
        pumps, self._pumps = self._pumps, {}
        for pump in pumps.values():
            pump.stop()
        inbound, self._inbound = self._inbound, {}
        for stream in inbound.values():
            stream.on_error(error)
        self.cancel_tick()
        # (logged when the transport is gone too)
        self.end_reason = _end_reason(event, self._role == Role.SERVER)
        self.ended = True
        transport = self.transport
        if self.aborting:
            written, self._written = self._written, []
            for d in written:
                d.errback(failure_for(error))
            if transport is not None and not self.transport_gone:
                abort = getattr(transport, "abortConnection", None)
                (abort or transport.loseConnection)()
        elif transport is not None and not self.transport_gone:
            if self.message_transport:
                frames = conn.frames_to_send()
                if frames:
                    self.live_transport.writeFrames(frames)
            else:
                data = conn.data_to_send()
                if data:
                    transport.write(data)
            self._fire_written()
            self.end_transport()
        else:
            written, self._written = self._written, []
            for d in written:
                d.errback(failure_for(error))
            if self.transport_gone and conn.resume_token is not None:
                self._session_over()  # a detached session ended (expired, or closed by us)

    # ------------------------------------------------------------------ IStreamHost

    def credit(self, stream_id: int) -> int:
        """Items the peer still allows on ``stream_id`` (see
        :class:`~rsocket_tx.interfaces.IStreamHost`; bound to the connection's ``credit``
        once connected)."""
        conn = self._conn
        assert conn is not None
        return conn.credit(stream_id)

    def send_item(self, stream_id: int, payload: Payload) -> None:
        """Queue ``payload`` on ``stream_id`` (see
        :class:`~rsocket_tx.interfaces.IStreamHost`; bound to the connection's
        ``send_payload`` once connected)."""
        conn = self._conn
        assert conn is not None
        conn.send_payload(stream_id, payload)

    def send_items(self, stream_id: int, payloads: list[Payload]) -> None:
        """Queue ``payloads`` on ``stream_id``, one credit each (see
        :class:`~rsocket_tx.interfaces.IStreamHost`; bound to the connection's
        ``send_payloads`` once connected)."""
        send = self.send_item
        for payload in payloads:
            send(stream_id, payload)

    def wake_later(self, stream: RequestStream) -> bool:
        """See :meth:`~rsocket_tx.interfaces.IStreamHost.wake_later`."""
        if self.dispatching:
            self._wakeups.append(stream)
            return True
        return False

    def pump_complete(self, pump: OutboundPump) -> None:
        """``pump``'s source ended: COMPLETE on its stream (it needs no credit)."""
        conn = self._conn
        assert conn is not None
        sid = pump.stream_id
        if self._pumps.get(sid) is pump:
            del self._pumps[sid]
        if conn.has_stream(sid) and conn.credit(sid) >= 0:
            try:
                conn.send_complete(sid)
            except E.LocalProtocolError:
                pass
        self.flush()

    def pump_failed(self, pump: OutboundPump, error: E.RSocketError) -> None:
        """``pump``'s source failed: ERROR ``error`` on its stream. A responder's source
        that raised something other than a deliberate RSocketError (``error.__cause__``, see
        :meth:`~rsocket_tx.streams.OutboundPump.error_for`) is logged with its traceback."""
        conn = self._conn
        assert conn is not None
        sid = pump.stream_id
        cause = error.__cause__
        if cause is not None:
            error.__cause__ = None  # (its traceback would hold the pump's frames)
            if not conn.is_requester(sid):  # (our requests' errors reach their caller)
                self._handler_failed(Failure(cause), "the stream source from the handler", sid)
        if self._pumps.get(sid) is pump:
            del self._pumps[sid]
        self._stream_failed_locally(sid, error)
        self.flush()

    def cancel(self, stream_id: int) -> None:
        """The local consumer canceled ``stream_id``: CANCEL to the peer.

        A requester's CANCEL ends the whole stream (our outbound half of a channel too); a
        channel responder's ends only its inbound half, its outbound goes on.
        """
        conn = self._conn
        assert conn is not None
        self._responses.pop(stream_id, None)
        self._inbound.pop(stream_id, None)
        if conn.is_open:
            conn.send_cancel(stream_id)
        if not conn.has_stream(stream_id):
            pump = self._pumps.pop(stream_id, None)
            if pump is not None:
                pump.stop()
        self.flush()

    def request_more(self, stream_id: int, n: int) -> None:
        """REQUEST_N ``n`` on ``stream_id``, written at once, even in the middle of handling a
        read: the responder refills the window while we consume the rest of what arrived."""
        conn = self._conn
        assert conn is not None
        if conn.is_open:
            conn.send_request_n(stream_id, n)
            self.flush(force=True)

    # ------------------------------------------------------------------ leases

    def ready(self) -> Deferred:
        """Client: a Deferred firing with this protocol once requests may start. At once
        without leases; with leases, once the server's first LEASE has arrived (spec
        §Connection Establishment: a client that set L waits for it), failing with the error
        that closes the connection first, or with
        :class:`~rsocket_tx.core.errors.LeaseError` (``NO_LEASE``; the connection is then
        closed) when none arrives within the client's max lifetime (ms)."""
        conn = self._conn
        if conn is None or not conn.lease_enabled:
            return succeed(self)
        d = self.lease.when_first_lease()
        if not d.called:
            assert conn.setup is not None  # (a client's)
            limit = conn.setup.max_lifetime

            def no_lease() -> None:
                self._ready_call = None
                if d.called:
                    return
                d.errback(E.LeaseError(NO_LEASE, (
                    f"no LEASE from the server within {limit} ms of connecting (max "
                    "lifetime): this connection asked for leases (SETUP L flag) and may send "
                    "no request without one; it is closed")))
                self.close()

            self._ready_call = self.reactor.callLater(limit / 1000.0, no_lease)

            def arrived(result):
                if self._ready_call is not None and self._ready_call.active():
                    self._ready_call.cancel()
                self._ready_call = None
                return result

            d.addBoth(arrived)
        return d.addCallback(lambda _: self)

    _ready = ready  # (the test-suite calls it under its former name)

    # ------------------------------------------------------------------ requester side

    def _check_open(self) -> None:
        if self._conn is None or not self._conn.is_open:
            raise E.LocalProtocolError("the RSocket connection is closed")

    def request_response(self, payload: Payload) -> Deferred:
        conn = self._conn
        if conn is None or not conn.is_open:
            self._check_open()  # (raises)
        assert conn is not None
        sid = conn.request_response(payload)
        d = _Response(self._canceller)
        d.stream_id = sid
        self._responses[sid] = d
        if not self.dispatching:  # (flush_soon's test: in a read, its end writes)
            self.flush_soon()
        return d

    def _cancel_response(self, d: Deferred) -> None:
        """The canceller of a request-response's Deferred: CANCEL on its stream."""
        assert isinstance(d, _Response)
        self.cancel(d.stream_id)

    def fire_and_forget(self, payload: Payload) -> Deferred:
        conn = self._conn
        if conn is None or not conn.is_open:
            self._check_open()  # (raises)
        assert conn is not None
        conn.fire_and_forget(payload)
        # (_when_written inlined: the whole requester path of a fire-and-forget)
        d: Deferred[None] = Deferred()
        self._written.append(d)
        if not self.dispatching:  # (flush_soon's test: in a read, its end writes)
            self.flush_soon()
        return d

    def fire_and_forget_many(self, payloads: list[Payload]) -> Deferred:
        conn = self._conn
        if conn is None or not conn.is_open:
            self._check_open()  # (raises)
        assert conn is not None
        many = getattr(conn, "fire_and_forget_many", None)  # (the 2015 draft's has none)
        try:
            if many is not None:
                many(payloads)
            else:
                for payload in payloads:
                    conn.fire_and_forget(payload)
        finally:
            self.flush_soon()  # (what was queued before an error goes out too)
        d: Deferred[None] = Deferred()  # one for the batch
        self._written.append(d)
        return d

    def metadata_push(self, metadata: bytes) -> Deferred:
        self._check_open()
        conn = self._conn
        assert conn is not None
        conn.metadata_push(metadata)
        return self._when_written()

    def _when_written(self) -> Deferred:
        """A Deferred that fires once what is queued now has been handed to the transport."""
        d: Deferred[None] = Deferred()
        self._written.append(d)
        self.flush_soon()
        return d

    def _fire_written(self) -> None:
        written, self._written = self._written, []
        for d in written:
            d.callback(None)

    def request_stream(self, payload: Payload, prefetch: int | None) -> RequestStream:
        # (prefetch None: the default window, sized by bytes too; a number: fixed)
        window = self._window if prefetch is None else {}
        if prefetch is None:
            prefetch = DEFAULT_PREFETCH
        self._check_open()
        conn = self._conn
        assert conn is not None
        sid = conn.request_stream(payload, prefetch)
        stream = self._inbound[sid] = RequestStream(self, sid, prefetch, **window)
        self.flush_soon()
        return stream

    def request_channel(self, payload: Payload, outbound, prefetch: int | None,
                        complete: bool, encode=None) -> RequestStream:
        window = self._window if prefetch is None else {}
        if prefetch is None:
            prefetch = DEFAULT_PREFETCH
        self._check_open()
        conn = self._conn
        assert conn is not None
        complete = complete or outbound is None
        sid = conn.request_channel(payload, prefetch, complete)
        stream = self._inbound[sid] = RequestStream(self, sid, prefetch, **window)
        if not complete:
            pump = OutboundPump(self, sid, outbound, encode)
            if not pump.stopped:
                self._pumps[sid] = pump
            stream.attach_outbound(pump)
        self.flush_soon()
        return stream

    def close(self, error: E.RSocketError | None = None) -> Deferred:
        """Close the connection now (after writing ``error`` as ERROR on stream 0, if given);
        outstanding requests fail with :class:`~rsocket_tx.core.errors.ConnectionLostError`.
        See :meth:`close_gracefully` to let them finish.

        :returns: Deferred firing with None once the transport is gone.
        """
        d = self.when_closed()
        if self._conn is not None and self._conn.is_open:
            self.handle_events(self._conn.close(error))
        elif self.transport is not None:
            self.transport.loseConnection()
        return d

    def close_gracefully(self, drain_timeout: int | None = None,
                         reason: str = "the connection is closing") -> Deferred:
        """Close gracefully (spec §Error Codes, CONNECTION_CLOSE).

        New requests are refused at once: ours raise
        :class:`~rsocket_tx.core.errors.LocalProtocolError`, the peer's get ERROR[REJECTED]
        "connection closing". Open streams may finish; when the last has, ERROR[CONNECTION_CLOSE]
        is sent and the transport closed. If they have not finished within ``drain_timeout``,
        ERROR[CONNECTION_CLOSE] is sent anyway, they fail with
        :class:`~rsocket_tx.core.errors.ConnectionCloseError` and the transport is closed; a
        transport still not gone :data:`ABORT_DELAY` seconds later (a peer that does not read)
        is aborted. Calling it again can only shorten the timeout.

        :param drain_timeout: milliseconds (0 .. 2^31-1) the open streams get; None: the
            connection's ``drain_timeout`` setting (default 10,000); 0: close at once.
        :param reason: the message of the ERROR[CONNECTION_CLOSE].
        :returns: Deferred firing with None once the transport is gone.
        :raises ValueError: ``drain_timeout`` is out of range.
        """
        if drain_timeout is None:
            drain_timeout = self._config.drain_timeout
        check_drain_timeout(drain_timeout)
        d = self.when_closed()
        conn = self._conn
        if conn is not None and conn.is_open and conn.is_detached:
            self.handle_events_now(conn.close())  # no transport to drain streams through
            return d
        if conn is None or self.transport_gone:
            return d
        if not conn.is_open:
            self.live_transport.loseConnection()
            return d
        self.abort_later(drain_timeout / 1000.0 + ABORT_DELAY, (
            f"RSocket connection aborted: its transport did not close within {ABORT_DELAY} s "
            "of the drain timeout"))
        self.handle_events_now(conn.begin_close(self.reactor.seconds(), drain_timeout, reason))
        self.schedule_tick()  # the drain deadline
        return d


# ---------------------------------------------------------------------- settings

#: The :class:`~rsocket_tx.core.config.ConnectionConfig` fields a server takes as keyword
#: arguments (:class:`RSocketServerFactory`, :func:`~rsocket_tx.server.serve`).
SERVER_SETTINGS = (
    "fragment_size", "max_frame_size", "max_reassembled_size", "setup_timeout",
    "max_concurrent_streams", "max_send_buffer_size", "drain_timeout", "resume",
    "resume_session_timeout", "max_resume_buffer_size", "max_resume_sessions", "lease_grace",
    "max_setup_frame_size", "max_reassembly_buffer_size", "max_lifetime_limit",
    "max_connections",
)
#: The :class:`~rsocket_tx.core.config.ConnectionConfig` fields a client factory takes as
#: keyword arguments (:func:`~rsocket_tx.client.connect` takes ``keepalive_interval`` and
#: ``max_lifetime`` too: they go into its SETUP).
CLIENT_SETTINGS = (
    "fragment_size", "max_frame_size", "max_reassembled_size", "max_concurrent_streams",
    "max_send_buffer_size", "drain_timeout", "resume_session_timeout",
    "max_resume_buffer_size", "reconnect_initial_delay", "reconnect_max_delay", "lease_grace",
    "max_reassembly_buffer_size",
)


def build_config(config: ConnectionConfig | None, settings: dict, allowed: Iterable[str],
                 who: str) -> ConnectionConfig:
    """The one :class:`~rsocket_tx.core.config.ConnectionConfig` a face passes down: ``config``
    (None: the defaults) with the keyword ``settings`` applied.

    :param config: a ConnectionConfig, or None.
    :param settings: ``{field name: value}``, the keyword arguments a caller gave.
    :param allowed: the field names ``who`` accepts.
    :param who: the callable's name, for the error message.
    :raises TypeError: a setting is not one of ``allowed``, or ``config`` is no
        ConnectionConfig.
    :raises ValueError: a setting is out of range (see
        :meth:`~rsocket_tx.core.config.ConnectionConfig.validate`).
    """
    unknown = [name for name in settings if name not in allowed]
    if unknown:
        raise TypeError(f"{who}() got an unexpected keyword argument {unknown[0]!r}")
    if config is None:
        return ConnectionConfig(**settings)
    if not isinstance(config, ConnectionConfig):
        raise TypeError(f"config must be a rsocket_tx.core.config.ConnectionConfig, got "
                        f"{config!r}")
    return dataclasses.replace(config, **settings) if settings else config


def settings_signature(function: Callable, names: Iterable[str], *,
                       before: str = "config") -> inspect.Signature:
    """``function``'s signature with its ``**settings`` spelled out: one keyword-only
    parameter per :class:`~rsocket_tx.core.config.ConnectionConfig` field of ``names``, with
    the field's default and type, in place of ``**settings`` and before parameter ``before``
    (for ``help()`` and the API docs)."""
    signature = inspect.signature(function)
    fields = {f.name: f for f in dataclasses.fields(ConnectionConfig)}
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                               default=fields[name].default, annotation=fields[name].type)
             for name in names]
    params = []
    for param in signature.parameters.values():
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            continue
        if param.name == before:
            params += extra
        params.append(param)
    return signature.replace(parameters=params)


def _check_policy(policy) -> None:
    if policy is not None and not isinstance(policy, LeasePolicy):
        raise TypeError(f"lease_policy must be a rsocket_tx.lease.LeasePolicy or None, got "
                        f"{policy!r}")


def _default_reactor(reactor):
    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor
    return reactor


# ---------------------------------------------------------------------- factories

@implementer(IConnectionObserver)
class RSocketServerFactory(Factory):
    """Server factory: one :class:`RSocketProtocol` per accepted connection.

    Settings come as one :class:`~rsocket_tx.core.config.ConnectionConfig` (``config``), or as
    keyword arguments naming its fields (:data:`SERVER_SETTINGS`; documented on
    ``ConnectionConfig``), which are applied to ``config``.

    :param responder_factory: zero-argument callable returning a :class:`Responder` for each
        connection (a Responder subclass works); None serves the base :class:`Responder`,
        which rejects every request (:func:`~rsocket_tx.server.serve` requires one; the faces,
        ``twistd rsocket`` and ``rsocket-tx serve``, default to the demo responder).
    :param reactor: ``IReactorTime`` provider; None: the global reactor.
    :param config: the connection settings; None: the defaults.
    :param lease_policy: what the server grants a client that asks for leases (SETUP L flag;
        spec §Lease Semantics): a :class:`~rsocket_tx.lease.LeasePolicy` (one object serves
        every connection); None grants unlimited leases. Requests past a grant are answered
        with ERROR[REJECTED].
    :param frame_logger: ``callable(direction, frame)`` debug hook.
    :param connection_limit: the server-wide
        :class:`~rsocket_tx.transports.limits.ConnectionLimit` to count connections in, when
        several factories serve one server (e.g. RSocket and the Jini mux on one port);
        None: one of ``config.max_connections`` of this factory's own. Past it a new
        connection is aborted at once, before any RSocket state exists.
    :param interceptors: :class:`~rsocket_tx.interceptors.Interceptor` instances told of
        every connection and request (:doc:`/observability`); kept in the list
        :attr:`interceptors`, where more may be added before connections are made.
    :param settings: ``fragment_size``, ``max_frame_size``, ``max_reassembled_size``,
        ``setup_timeout``, ``max_concurrent_streams``, ``max_send_buffer_size``,
        ``drain_timeout``, ``resume``, ``resume_session_timeout``,
        ``max_resume_buffer_size``, ``max_resume_sessions``, ``lease_grace``,
        ``max_setup_frame_size``, ``max_reassembly_buffer_size``, ``max_lifetime_limit``,
        ``max_connections``: fields of ``config`` (units and ranges there).
    :raises ValueError: a setting is out of range.
    :raises TypeError: an unknown keyword, or a ``lease_policy`` that is no LeasePolicy.

    :ivar config: the :class:`~rsocket_tx.core.config.ConnectionConfig` of every connection.
    :ivar connection_limit: the :class:`~rsocket_tx.transports.limits.ConnectionLimit`.
    :ivar connections: the connected :class:`RSocketProtocol` instances (a set), resumable
        sessions waiting for a resume included.
    :ivar sessions: with ``config.resume``: the resumable sessions by token (a
        :class:`~rsocket_tx.core.resume.SessionStore` of :class:`RSocketProtocol`); else None.
    """

    #: the protocol class built per connection (a subclass plugs in another wire format)
    protocol = RSocketProtocol
    #: the WebSocket subprotocol (``Sec-WebSocket-Protocol``) of what this factory serves:
    #: the WebSocket server endpoint (:mod:`rsocket_tx.transports.websocket`) accepts a client
    #: offering it (or none); a subclass serving another wire format names its own
    websocket_subprotocol = WEBSOCKET_SUBPROTOCOL
    #: what the log calls the server (e.g. when connections past ``max_connections`` are
    #: refused)
    server_name = "RSocket server"

    def __init__(self, responder_factory: Callable[[], Responder] | None = None, *,
                 reactor=None, config: ConnectionConfig | None = None,
                 lease_policy: LeasePolicy | None = None,
                 frame_logger: Callable | None = None,
                 connection_limit: ConnectionLimit | None = None,
                 interceptors: Iterable[Interceptor] = (), **settings) -> None:
        _check_policy(lease_policy)
        self.lease_policy = lease_policy
        self.interceptors = list(interceptors)
        if responder_factory is None:
            responder_factory = Responder
        if not callable(responder_factory):
            raise TypeError(f"responder_factory must be callable, got {responder_factory!r}")
        self.responder_factory = responder_factory
        self.reactor = _default_reactor(reactor)
        self.config = config = build_config(config, settings, SERVER_SETTINGS,
                                            "RSocketServerFactory")
        self.frame_logger = frame_logger
        if connection_limit is None:
            connection_limit = ConnectionLimit(config.max_connections,
                                               server_name=self.server_name,
                                               reactor=self.reactor)
        self.connection_limit = connection_limit
        self.connections: set[RSocketProtocol] = set()
        self.sessions: SessionStore[RSocketProtocol] | None = (
            SessionStore(config.max_resume_sessions) if config.resume else None)
        self._closing: tuple[int | None, str] | None = None

    def buildProtocol(self, addr) -> RSocketProtocol | RefusedConnection:
        limit = self.connection_limit
        if not limit.acquire():
            return limit.refuse()  # past max_connections: aborted at once, logged
        proto = self.protocol(Role.SERVER, self.config, reactor=self.reactor,
                              responder_factory=self.responder_factory,
                              frame_logger=self.frame_logger,
                              lease_policy=self.lease_policy)
        proto.factory = self
        proto.connection_limit = limit  # released when its transport is lost
        if self.interceptors:
            observe(proto, self.interceptors)
        return proto

    def close_connections(self, drain_timeout: int | None = None,
                          reason: str = "the server is shutting down") -> Deferred:
        """Close every connection gracefully (:meth:`RSocketProtocol.close_gracefully`), and
        the ones made from now on as soon as they are made: stop listening first.

        :param drain_timeout: milliseconds open streams get; None: the ``drain_timeout``
            setting; 0: close at once.
        :param reason: the message of the ERROR[CONNECTION_CLOSE] each peer gets.
        :returns: Deferred firing with None once every transport is gone: at most
            ``drain_timeout`` ms + :data:`ABORT_DELAY` s.
        :raises ValueError: ``drain_timeout`` is out of range.
        """
        if drain_timeout is not None:
            check_drain_timeout(drain_timeout)
        self._closing = (drain_timeout, reason)
        closed = [p.close_gracefully(drain_timeout, reason) for p in list(self.connections)]
        return gatherResults(closed).addCallback(lambda _: None)

    # IConnectionObserver

    def connection_made(self, protocol: RSocketProtocol) -> None:
        self.connections.add(protocol)
        if self._closing is not None:
            protocol.close_gracefully(*self._closing)

    def connection_lost(self, protocol: RSocketProtocol) -> None:
        self.connections.discard(protocol)

    def transport_lost(self, protocol: RSocketProtocol) -> None:
        pass  # the session waits for the client's RESUME (or its expiry)

    def session_resumed(self, protocol: RSocketProtocol) -> None:
        pass

    def session_ended(self, protocol: RSocketProtocol) -> None:
        pass


@implementer(IConnectionObserver)
class RSocketClientFactory(ClientFactory):
    """Client factory: builds the client :class:`RSocketProtocol` that sends ``setup``.

    :param setup: the :class:`~rsocket_tx.core.frames.SetupFrame` to send on connect; with a
        ``resume_token`` the connection is resumable. Its keepalive interval and max lifetime
        override ``config``'s.
    :param responder: the :class:`Responder` that serves requests from the server, or None.
    :param config: the connection settings; None: the defaults.
    :param reconnect: resumable: zero-argument callable connecting this factory to the server
        again (``lambda: endpoint.connect(factory)``), called after the transport is lost, with
        exponential backoff (``reconnect_initial_delay``, doubling up to
        ``reconnect_max_delay``, milliseconds) until the session resumes or
        ``resume_session_timeout`` ms have passed. None: a lost transport ends the session.
    :param lease_policy: with a ``setup`` that has the L flag (``make_setup(lease=True)``):
        what the client grants the server (None: unlimited leases).
    :param interceptors: :class:`~rsocket_tx.interceptors.Interceptor` instances told of the
        connection and its requests both ways (:doc:`/observability`).
    :param settings: ``fragment_size``, ``max_frame_size``, ``max_reassembled_size``,
        ``max_concurrent_streams``, ``max_send_buffer_size``, ``drain_timeout``,
        ``resume_session_timeout``, ``max_resume_buffer_size``, ``reconnect_initial_delay``,
        ``reconnect_max_delay``, ``lease_grace``: fields of ``config`` (:data:`CLIENT_SETTINGS`).

    Other parameters as :class:`RSocketServerFactory`.
    """

    sessions = None  # (IConnectionObserver: a client keeps no session store)
    #: the protocol class built per connection (a subclass plugs in another wire format)
    protocol = RSocketProtocol

    def __init__(self, setup: SetupFrame, responder: Responder | None = None, *, reactor=None,
                 config: ConnectionConfig | None = None,
                 reconnect: Callable[[], Deferred] | None = None,
                 lease_policy: LeasePolicy | None = None,
                 frame_logger: Callable | None = None,
                 interceptors: Iterable[Interceptor] = (), **settings) -> None:
        _check_policy(lease_policy)
        self.lease_policy = lease_policy
        self.interceptors = list(interceptors)
        self.setup = setup
        self.responder = responder
        self.reconnect = reconnect
        self._session: RSocketProtocol | None = None  # a resumable session reconnecting
        self._reconnect_call = None
        self.reactor = _default_reactor(reactor)
        config = build_config(config, settings, CLIENT_SETTINGS, "RSocketClientFactory")
        if (config.keepalive_interval, config.max_lifetime) != \
                (setup.keepalive_interval, setup.max_lifetime):
            config = dataclasses.replace(config, keepalive_interval=setup.keepalive_interval,
                                         max_lifetime=setup.max_lifetime)
        self.config = config
        self.frame_logger = frame_logger
        self._backoff = BackoffAttempts(Backoff(config.reconnect_initial_delay,
                                                config.reconnect_max_delay, jitter=0))

    def buildProtocol(self, addr) -> RSocketProtocol:
        if self._session is not None:
            return self._session  # a reconnection: the same session, on a new transport
        proto = self.protocol(Role.CLIENT, self.config, reactor=self.reactor,
                              responder=self.responder, setup=self.setup,
                              frame_logger=self.frame_logger,
                              lease_policy=self.lease_policy)
        proto.factory = self
        if self.interceptors:
            observe(proto, self.interceptors)
        return proto

    # IConnectionObserver

    def connection_made(self, protocol: RSocketProtocol) -> None:
        pass

    def connection_lost(self, protocol: RSocketProtocol) -> None:
        if self._session is protocol:
            self._session = None  # (the session is over: no cycle through this factory)

    def transport_lost(self, protocol: RSocketProtocol) -> None:
        """A resumable session lost its transport: reconnect after the next backoff delay
        (not after a TLS failure: the same server would fail the same way)."""
        self._session = protocol
        if protocol.tls_failure is not None:
            protocol.end_session(protocol.tls_failure.message)
            return
        if self.reconnect is None:
            protocol.end_session(
                "the transport was lost and this client has no endpoint to reconnect to")
            return
        if self._reconnect_call is not None and self._reconnect_call.active():
            return
        self._reconnect_call = self.reactor.callLater(self._backoff.next_delay(),
                                                      self._reconnect_now, protocol)

    def _reconnect_now(self, protocol: RSocketProtocol) -> None:
        self._reconnect_call = None
        if not protocol.is_open:
            return  # the session ended meanwhile
        reconnect = self.reconnect
        assert reconnect is not None  # (transport_lost calls us only then)
        try:
            d = reconnect()
        except Exception:  # noqa: BLE001 - treated as a failed attempt
            d = fail()
        # (the result, our protocol, is not kept: Twisted's connector keeps this Deferred
        # in a reference cycle of its own)
        d.addCallbacks(_discard, self._reconnect_failed, errbackArgs=(protocol,))

    def _reconnect_failed(self, failure: Failure, protocol: RSocketProtocol) -> None:
        protocol.log.info("RSocket reconnection attempt failed: {why}",
                          why=failure.getErrorMessage())
        if protocol.is_open and protocol.transport_gone:
            self.transport_lost(protocol)

    def session_resumed(self, protocol: RSocketProtocol) -> None:
        self._backoff.reset()

    def session_ended(self, protocol: RSocketProtocol) -> None:
        if self._reconnect_call is not None and self._reconnect_call.active():
            self._reconnect_call.cancel()
        self._reconnect_call = None
        if self._session is protocol:
            self._session = None


def _discard(result: object) -> None:
    """A callback dropping its result."""


def _no_cancel(d: Deferred) -> None:
    """The canceller of request-responses made once the connection is released: there is
    nothing left to cancel."""


RSocketServerFactory.__init__.__dict__["__signature__"] = settings_signature(
    RSocketServerFactory.__init__, SERVER_SETTINGS)
RSocketClientFactory.__init__.__dict__["__signature__"] = settings_signature(
    RSocketClientFactory.__init__, CLIENT_SETTINGS)
