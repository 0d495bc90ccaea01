"""Twisted transport glue: bytes from a transport into the sans-IO core, events out to
Deferreds, streams and the application's :class:`~rsocket_tx.responder.Responder`.

:class:`RSocketProtocol` is an ``IProtocol`` and an ``IPushProducer``: it registers itself as
the transport's streaming producer, so a full write buffer pauses every outbound stream pump
until the transport drains (``resumeProducing``). Writes are batched: everything the core
queues while handling one read (or one API call) goes out in a single ``transport.write``.

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
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable

from twisted.internet.defer import (
    CancelledError,
    Deferred,
    ensureDeferred,
    fail,
    gatherResults,
    succeed,
)
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import (
    IHalfCloseableDescriptor,
    IHandshakeListener,
    IPushProducer,
)
from twisted.internet.protocol import ClientFactory, Factory, Protocol
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from zope.interface import Interface, implementer

from .core import errors as E
from .core.config import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_LEASE_GRACE,
    DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_LIFETIME,
    DEFAULT_MAX_REASSEMBLED_SIZE,
    DEFAULT_MAX_RESUME_BUFFER_SIZE,
    DEFAULT_MAX_RESUME_SESSIONS,
    DEFAULT_MAX_SEND_BUFFER_SIZE,
    DEFAULT_RECONNECT_INITIAL_DELAY,
    DEFAULT_RECONNECT_MAX_DELAY,
    DEFAULT_RESUME_SESSION_TIMEOUT,
    DEFAULT_SETUP_TIMEOUT,
    ConnectionConfig,
    check_drain_timeout,
)
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
    RequestNReceived,
    RequestReceived,
    ResumeReceived,
    SetupReceived,
    StreamErrored,
)
from .core.frames import FrameType, ResumeFrame, SetupFrame
from .core.framing import MAX_FRAME_LENGTH
from .core.lease import NO_LEASE, LeasePolicy
from .core.payload import Payload
from .core.resume import Backoff, SessionStore
from .lease import LeaseHandle
from .requester import RSocket
from .responder import Responder, SetupInfo
from .streams import DEFAULT_PREFETCH, OutboundPump, RequestStream, to_rsocket_error
from .tls import TLSError, tls_error

__all__ = ["IFrameTransport", "RSocketProtocol", "RSocketClientFactory", "RSocketServerFactory"]

_log = Logger()

#: Seconds after a graceful close's drain timeout at which a transport that has still not
#: closed (its peer does not read the last bytes) is aborted.
ABORT_DELAY = 1.0


class IFrameTransport(Interface):
    """A message transport (WebSocket): each RSocket frame travels as one message, with no
    length prefix (spec §Framing: the transport keeps frame boundaries).

    An :class:`RSocketProtocol` whose transport provides it makes its connection with
    ``length_prefixed=False``, is fed whole frames through
    :meth:`RSocketProtocol.frameReceived`, and writes with :meth:`writeFrames`. It registers
    itself as the transport's streaming producer (``registerProducer(producer, True)``), which
    must pause it while the underlying socket's buffer is full. ``loseConnection`` closes the
    message channel cleanly after what was written (the WebSocket close handshake),
    ``abortConnection`` drops it at once. (Also exported as
    ``rsocket_tx.websocket.IFrameTransport``.)
    """

    def writeFrames(frames: list[bytes]) -> None:
        """Send each item of ``frames`` (one whole RSocket frame, no length prefix) as one
        message, in order. Frames written after the transport began closing are dropped."""

    def registerProducer(producer, streaming: bool) -> None:
        """Register a producer paused while the underlying socket's buffer is full."""

    def unregisterProducer() -> None:
        """Unregister the producer."""

    def loseConnection() -> None:
        """Close cleanly once what was written has gone out (WebSocket: close handshake)."""

    def abortConnection() -> None:
        """Close at once, dropping what is not sent yet."""

    def getPeer():
        """The underlying connection's remote ``IAddress``."""

    def getHost():
        """The underlying connection's local ``IAddress``."""


def _as_deferred(result) -> Deferred | None:
    """The Deferred a handler returned (a coroutine is wrapped), or None for a plain value."""
    if result is None or result.__class__ is Payload:
        return None
    if isinstance(result, Deferred):
        return result
    if inspect.iscoroutine(result):
        return ensureDeferred(result)
    return None


@implementer(IPushProducer, IHandshakeListener)
class RSocketProtocol(Protocol):
    """One RSocket connection over one Twisted transport: a byte stream (TCP, TLS, ...) or a
    message transport providing :class:`IFrameTransport` (WebSocket: one frame per message).

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
    :ivar tls_failure: the :class:`~rsocket_tx.tls.TLSError` the transport was lost to (a
        certificate or host name rejected, by us or by the peer), else None. The connection's
        close reason and the errors of its requests say the same.
    """

    def __init__(self, role: str, config: ConnectionConfig, *, reactor,
                 responder: Responder | None = None,
                 responder_factory: Callable[[], Responder] | None = None,
                 setup: SetupFrame | None = None,
                 frame_logger: Callable | None = None,
                 lease_policy: LeasePolicy | None = None) -> None:
        self._role = role
        self._config = config
        self._reactor = reactor
        self._responder = responder
        self._responder_factory = responder_factory
        self._setup_frame = setup
        self._frame_logger = frame_logger
        self._conn: RSocketConnection | None = None
        self._own_parity = 1 if role == Role.CLIENT else 0  # stream ids we open: odd / even
        self.setup_info: SetupInfo | None = (
            SetupInfo.from_frame(setup) if setup is not None else None)
        self._paused = False
        self._queued = 0  # bytes written while the transport was paused
        self._max_send_buffer = config.max_send_buffer_size
        self._aborting = False  # the transport is being aborted: write nothing more
        self._abort_call = None  # a graceful close's last resort
        self._write_closed = False  # TCP half-closed after our last frame
        self._frames = False  # the transport is an IFrameTransport (WebSocket)
        self.tls_failure: TLSError | None = None
        self._secured: list[Deferred] = []  # when_secured() waiters
        self._dispatching = False
        self._timer = None
        self._flush_call = None  # a pending _flush_soon
        self._written: list[Deferred] = []  # fire-and-forget / metadata-push Deferreds
        self._responses: dict[int, Deferred] = {}  # requester: request-response waiting
        self._inbound: dict[int, RequestStream] = {}  # streams whose items we receive
        self._pumps: dict[int, OutboundPump] = {}  # streams whose items we send
        self._handlers: dict[int, Deferred] = {}  # responder: request-response in progress
        self._held: list | None = None  # events held while an async acceptor decides
        self._wakeups: list[RequestStream] = []  # streams to wake once this read is handled
        self.rsocket = RSocket(self)
        self.lease = LeaseHandle(self, lease_policy)
        self._ready_call = None  # the client's wait for its first LEASE
        self._ended = False  # the RSocket connection is over (the transport may still drain)
        self._transport_gone = False
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
        self._event_handlers = {
            PayloadReceived: self._on_payload,
            RequestReceived: self._on_request,
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

    # ------------------------------------------------------------------ IProtocol

    def connectionMade(self) -> None:
        if self._conn is not None:
            self._reconnected()
            return
        config = self._config
        if IFrameTransport.providedBy(self.transport):
            # a message transport: one frame per message, no length prefix
            self._frames = True
            config = dataclasses.replace(config, length_prefixed=False)
        self._conn = RSocketConnection(self._role, config, setup=self._setup_frame,
                                       now=self._reactor.seconds(),
                                       frame_logger=self._frame_logger)
        if self._responder is not None:
            self._responder.rsocket = self.rsocket
            if self.setup_info is not None:
                self._responder.setup = self.setup_info
        self.transport.registerProducer(self, True)
        if self._conn.lease_enabled:
            self.lease._start()  # the client-side responder's first LEASE follows SETUP
        self._flush()  # the client's SETUP (and LEASE), in one write
        self._schedule_tick()
        connection_made = getattr(self.factory, "_connection_made", None)
        if connection_made is not None:
            connection_made(self)

    def dataReceived(self, data: bytes) -> None:
        if self._delegate is not None:
            self._delegate.dataReceived(data)  # a relay of a resumed session
            return
        events = self._conn.receive_data(data, self._reactor.seconds())
        if events:
            self._handle(events)
        self._flush()

    def frameReceived(self, frame: bytes) -> None:
        """One whole RSocket frame (no length prefix) from an :class:`IFrameTransport`: one
        WebSocket binary message."""
        if self._delegate is not None:
            self._delegate.frameReceived(frame)  # a relay of a resumed session
            return
        events = self._conn.receive_frame(frame, self._reactor.seconds())
        if events:
            self._handle(events)
        self._flush()

    def framesReceived(self, frames: list[bytes]) -> None:
        """Several whole frames from an :class:`IFrameTransport` (the messages of one read),
        handled as one read of a byte stream: their events in one batch, one write."""
        if self._delegate is not None:
            self._delegate.framesReceived(frames)
            return
        conn = self._conn
        if not conn.is_established:  # (SETUP, RESUME: handled one at a time)
            for frame in frames:
                self.frameReceived(frame)
            return
        now = self._reactor.seconds()
        receive = conn.receive_frame
        events = []
        for frame in frames:
            events += receive(frame, now)
        if events:
            self._handle(events)
        self._flush()

    def transport_error(self, reason: str) -> None:
        """The transport received something that is no RSocket frame (a WebSocket text
        message, a message past the max frame size): close the connection with
        ERROR[CONNECTION_ERROR] ``reason`` (spec §Error Codes), then close the transport."""
        target = self._delegate if self._delegate is not None else self
        if target._conn is not None and target._conn.is_open:
            target.close(E.ConnectionError(reason))
        elif self.transport is not None:
            self.transport.loseConnection()

    def handshakeCompleted(self) -> None:
        """``IHandshakeListener``: the TLS handshake under this protocol is done (the peer's
        certificate and host name verified)."""
        waiters, self._secured = self._secured, []
        for d in waiters:
            d.callback(self)

    def when_secured(self) -> Deferred:
        """A Deferred firing with this protocol once its TLS handshake is done (at once when
        the transport is not TLS, or the handshake is already done); it fails with the
        :class:`~rsocket_tx.tls.TLSError` (or other reason) the connection was lost to."""
        transport = self.transport
        if not isinstance(transport, TLSMemoryBIOProtocol) or \
                getattr(transport, "_handshakeDone", True):
            return succeed(self)
        d = Deferred()
        self._secured.append(d)
        return d

    def connectionLost(self, reason=None) -> None:
        error = tls_error(reason) if reason is not None else None
        if error is not None:  # OpenSSL's tuple of codes becomes words
            self.tls_failure = error
            reason = Failure(error)
        waiters, self._secured = self._secured, []
        try:
            self._connection_lost(reason)
        finally:
            for d in waiters:
                d.errback(reason if reason is not None else Failure(ConnectionDone()))

    def _connection_lost(self, reason) -> None:
        if self._delegate is not None:
            self._delegate._relay_lost(self, reason)  # a relay: its session lost the transport
            return
        if self._relay is not None:
            return  # the session's first transport, already replaced by a resumed one
        self._transport_lost(reason)

    def _transport_lost(self, reason) -> None:
        for call in (self._timer, self._flush_call, self._abort_call):
            if call is not None and call.active():
                call.cancel()
        self._timer = self._flush_call = self._abort_call = None
        self._transport_gone = True
        conn = self._conn
        if conn is not None:
            if reason is None or reason.check(ConnectionDone):
                why = "the transport closed cleanly"
            else:
                why = f"connection lost: {reason.getErrorMessage()}"
            if conn.is_resumable and conn.is_open and not self._aborting:
                self._handle(conn.detach(self._reactor.seconds(), why))
                if conn.is_open:  # the session waits for a resume
                    self._schedule_tick()  # its expiry
                    reconnect = getattr(self.factory, "_reconnect_later", None)
                    if reconnect is not None:
                        reconnect(self)
                    return
            else:
                self._handle(conn.connection_lost(why))
        self._session_over()

    def _session_over(self) -> None:
        """The RSocket connection is over and no transport is left: tell the factory and
        whoever waits in :meth:`when_closed`."""
        connection_lost = getattr(self.factory, "_connection_lost", None)
        if connection_lost is not None:
            connection_lost(self)
        waiters, self._closed_waiters = self._closed_waiters, []
        for d in waiters:
            d.callback(None)

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
        d = Deferred()
        if self._transport_gone and (self._conn is None or not self._conn.is_open):
            d.callback(None)
        else:
            self._closed_waiters.append(d)
        return d

    def when_resumed(self) -> Deferred:
        """A new Deferred that fires with None at the session's next successful resumption
        (spec §Resuming Operation), or fails with the error that ends the session first."""
        d = Deferred()
        if self._conn is not None and not self._conn.is_open:
            d.errback(self.close_reason or E.ConnectionLostError("the connection is closed"))
        else:
            self._resume_waiters.append(d)
        return d

    # ------------------------------------------------------------------ resumption

    def _reconnected(self) -> None:
        """Client: the factory reconnected this session's endpoint: send RESUME."""
        self._transport_gone = False
        self._aborting = False
        self._queued = 0
        conn = self._conn
        if not conn.is_open or not conn.is_detached:
            self.transport.loseConnection()  # the session ended while we reconnected
            return
        if IFrameTransport.providedBy(self.transport) != self._frames:
            _log.warn("RSocket session cannot resume over a transport of another kind "
                      "(a byte stream and a message transport frame differently)")
            self.transport.loseConnection()
            return
        self.transport.registerProducer(self, True)
        conn.start_resume(self._reactor.seconds())
        self._flush()  # RESUME, in one write
        self._schedule_tick()

    def _relay_lost(self, relay: RSocketProtocol, reason) -> None:
        if self._relay is relay:
            self._transport_lost(reason)

    def _on_detached(self, event: ConnectionDetached) -> None:
        self._paused = True  # outbound pumps wait for the resume
        _log.info("RSocket connection lost its transport ({error}); the session waits to be "
                  "resumed", error=event.error)
        if self.transport is not None and not self._transport_gone:
            # presumed dead (max lifetime): drop it; its connectionLost finds us detached
            self.transport.abortConnection()

    def _on_resumed(self, event: ConnectionResumed) -> None:
        self.resumes += 1
        _log.info("RSocket session resumed: {resent} frame(s) sent again from position "
                  "{position}", resent=event.resent, position=event.position)
        resumed = getattr(self.factory, "_resumed", None)
        if resumed is not None:
            resumed(self)
        self.resumeProducing()  # pumps go on (what they send is queued after the resent)
        if self._conn.lease_enabled:
            # spec §Resume Operation: lease semantics restart on the new connection
            self.lease._renew()
        self._schedule_tick()
        waiters, self._resume_waiters = self._resume_waiters, []
        for d in waiters:
            d.callback(None)

    def _on_resume_received(self, event: ResumeReceived) -> None:
        """Server: this connection began with RESUME: hand it to the session of its token."""
        sessions = getattr(self.factory, "sessions", None)
        session = None if sessions is None else sessions.get(event.frame.token)
        if session is None or session._conn is None or not session._conn.is_open:
            self._handle_now(self._conn.reject_resume(
                "no resumable session has this token (unknown, or it expired)"))
            return
        if session._frames != self._frames:
            self._handle_now(self._conn.reject_resume(
                "the session was set up over another kind of transport (TCP and WebSocket "
                "frame differently); resume it over the same kind"))
            return
        for call in (self._timer, self._flush_call):
            if call is not None and call.active():
                call.cancel()
        self._timer = self._flush_call = None
        self._delegate = session
        connection_lost = getattr(self.factory, "_connection_lost", None)
        if connection_lost is not None:
            connection_lost(self)  # the session is the connection now
        session._adopt(self, event.frame)

    def _adopt(self, relay: RSocketProtocol, frame: ResumeFrame) -> None:
        """Server session: continue on ``relay``'s transport."""
        old = None if self._transport_gone else self.transport
        self._relay = relay  # from now on only this relay's transport counts
        events = self._conn.resume_session(frame, self._reactor.seconds())
        if old is not None:
            # the client gave this transport up (half-open): drop it; its connectionLost is
            # ignored (this session's own, or a previous relay's: _relay_lost checks).  We stop
            # being its producer first: its end would call our stopProducing() and pause the
            # streams that the resumed transport carries
            self._paused = True
            old.unregisterProducer()
            old.abortConnection()
        transport = relay.transport
        transport.unregisterProducer()
        self.transport = transport
        self._transport_gone = False
        self._aborting = False
        self._queued = 0
        transport.registerProducer(self, True)
        self._handle([e for e in events if e.__class__ is not ConnectionDetached])
        self._flush()

    # ------------------------------------------------------------------ IPushProducer

    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        self._queued = 0  # a transport resumes us once its buffer has drained
        for pump in list(self._pumps.values()):
            pump.resume()

    def stopProducing(self) -> None:
        self._paused = True

    # ------------------------------------------------------------------ output

    def _flush(self, force: bool = False) -> None:
        """Write what the core queued, in one ``transport.write``.

        While a read is being handled, writes are held until its end (batching), unless
        ``force``: an outbound pump forces a write every few hundred KiB so the transport can
        apply backpressure (``pauseProducing``) mid-batch.
        """
        if self._dispatching and not force:
            return
        conn = self._conn
        if conn is None:
            return
        chunks = conn.chunks_to_send()
        if chunks:
            paused = self._paused
            if paused:
                # the transport's buffer is full: what we add now waits for the peer to read
                self._queued += sum(map(len, chunks))
                if self._queued > self._max_send_buffer:
                    self._excessive_buffering()
                    return
            if self._frames:
                # a message transport: with no length prefix each chunk is one whole frame
                self.transport.writeFrames(chunks)
            elif len(chunks) <= 4:
                # one frame, or a large payload queued as header + data: no copy here
                self.transport.writeSequence(chunks)
            else:
                self.transport.write(b"".join(chunks))  # many small frames: one C-level join
            if self._paused and not paused:
                # this write filled the transport's buffer: it waits for the peer, in full
                self._queued = sum(map(len, chunks))
                if self._queued > self._max_send_buffer:
                    self._excessive_buffering()
                    return
        if self._written and not conn.is_detached:
            self._fire_written()
        if not conn.is_open and self.transport is not None and not self._aborting:
            if not self._ended:
                # a graceful close ended with the last stream, in an API call: its
                # ConnectionClosed is pending
                pending = conn.pending_events()
                if pending:
                    self._handle_now(pending)
                    return
            if not self._transport_gone:  # (a detached session that ended has none)
                self._end_transport()

    def _end_transport(self) -> None:
        """Close the transport after our last frame (often an ERROR on stream 0).

        On a message transport (WebSocket): its clean close (the close handshake). On TCP:
        half-close (FIN after the last byte) and keep reading until the peer closes,
        aborting after :data:`ABORT_DELAY` seconds. Closing outright while the peer is still
        sending (e.g. the rest of a SETUP written in several writes) makes our kernel answer
        with RST, and a peer that receives RST may drop our ERROR unread.
        """
        transport = self.transport
        if self._frames or not IHalfCloseableDescriptor.providedBy(transport):
            # (a WebSocket, or not a real TCP socket)
            transport.loseConnection()
            return
        if self._write_closed:
            return
        self._write_closed = True
        transport.loseWriteConnection()
        if self._abort_call is None:  # (a graceful close's abort timer may be running)
            self._abort_call = self._reactor.callLater(ABORT_DELAY, transport.abortConnection)

    def _excessive_buffering(self) -> None:
        """The peer does not read: abort the connection (nothing more is written)."""
        error = E.ExcessiveBufferingError(
            f"the peer is not reading: {self._queued} bytes are queued for it, more than the "
            f"max_send_buffer_size of {self._max_send_buffer} bytes; the connection is aborted")
        _log.warn("RSocket connection aborted: {error}", error=error)
        self._aborting = True
        self._handle_now(self._conn.connection_lost(error=error))

    def _flush_soon(self) -> None:
        """Write what the core queued at the end of this reactor turn.

        Requests made by application code (outside a read) are coalesced: a burst of
        fire-and-forgets or requests issued in one turn goes out in one ``transport.write``.
        No latency is added: a transport writes to its socket only when the reactor next polls,
        and this delayed call runs before that poll.
        """
        if self._dispatching or self._flush_call is not None:
            return  # the end of the read being handled, or the pending call, writes it
        self._flush_call = self._reactor.callLater(0, self._flush_later)

    def _flush_later(self) -> None:
        self._flush_call = None
        self._flush()

    # ------------------------------------------------------------------ time

    def _schedule_tick(self) -> None:
        deadline = self._conn.next_deadline()
        if deadline is None:
            return
        delay = max(0.0, deadline - self._reactor.seconds())
        if self._timer is not None and self._timer.active():
            self._timer.reset(delay)
        else:
            self._timer = self._reactor.callLater(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        events = self._conn.tick(self._reactor.seconds())
        if events:
            self._handle(events)
        self._flush()
        self._schedule_tick()

    # ------------------------------------------------------------------ events

    def _handle(self, events: list) -> None:
        if self._held is not None:
            self._held.extend(events)
            return
        was = self._dispatching
        self._dispatching = True
        try:
            handlers = self._event_handlers
            for i, event in enumerate(events):
                try:
                    handlers[event.__class__](event)
                except Exception:  # noqa: BLE001 - an app bug must not kill the connection
                    _log.failure("error handling {event!r}", event=event)
                if self._held is not None:  # an async acceptor is deciding: hold the rest
                    self._held.extend(events[i + 1:])
                    return
                if self._ended:
                    # the connection closed (e.g. SETUP rejected): the rest of this read is moot
                    break
            if not was:
                # wake consumers once per read, with every item of the read already queued:
                # one coroutine resumption drains them all
                while self._wakeups:
                    wakeups, self._wakeups = self._wakeups, []
                    for stream in wakeups:
                        stream._wake()
        finally:
            self._dispatching = was
        self._flush()

    def _on_setup(self, event: SetupReceived) -> None:
        info = self.setup_info = SetupInfo.from_frame(event.setup)
        self._schedule_tick()  # from the setup timeout to the client's max lifetime
        token = event.setup.resume_token
        if token is not None:
            # a resumable session: findable by its token until it ends
            sessions = getattr(self.factory, "sessions", None)
            refused = "resume is not enabled" if sessions is None else sessions.add(token, self)
            if refused is not None:
                self._reject_setup(E.RejectedSetupError(refused))
                return
        try:
            responder = self._responder_factory()
            responder.rsocket = self.rsocket
            responder.setup = info
            self._responder = responder
        except Exception as exc:  # noqa: BLE001
            _log.failure("the responder factory raised")
            self._reject_setup(E.RejectedSetupError(f"server error: {exc}"))
            return
        try:
            d = _as_deferred(responder.accept_setup(info))
        except Exception:  # noqa: BLE001 - a rejection (or a bug): answered with an ERROR
            self._setup_rejected(Failure())
            return
        if d is not None:  # decided later: hold the connection's other events until then
            self._held = []
            d.addCallbacks(self._setup_accepted_later, self._setup_rejected_later)
        elif self._conn.lease_enabled and self._conn.is_open:
            self.lease._start()  # spec §Connection Establishment: the first LEASE, at once

    def _setup_rejected(self, failure: Failure) -> None:
        exc = failure.value
        if not isinstance(exc, E.SetupError):
            _log.failure("accept_setup raised", failure)
            exc = E.RejectedSetupError(str(exc) or type(exc).__name__)
        self._reject_setup(exc)

    def _reject_setup(self, error: E.SetupError) -> None:
        self._handle_now(self._conn.reject_setup(error))

    def _setup_accepted_later(self, _) -> None:
        held, self._held = self._held, None
        if self._conn.lease_enabled and self._conn.is_open:
            self.lease._start()
        self._handle(held)
        self._flush()

    def _setup_rejected_later(self, failure: Failure) -> None:
        self._held = None
        self._setup_rejected(failure)
        self._flush()

    def _handle_now(self, events: list) -> None:
        held, self._held = self._held, None
        self._handle(events)
        if held is not None and self._conn.is_open:
            self._held = held

    def _on_lease(self, event: LeaseReceived) -> None:
        if self._conn.lease_enabled:
            self.lease._received()
            self._schedule_tick()  # a tick when this lease expires

    def _on_request(self, event: RequestReceived) -> None:
        responder = self._responder
        if responder is None:  # a client without a responder
            responder = self._responder = Responder()
            responder.rsocket = self.rsocket
        self._serve[event.frame_type](responder, event)

    def _serve_response(self, responder: Responder, event: RequestReceived) -> None:
        sid = event.stream_id
        try:
            result = responder.request_response(event.payload)
        except Exception as exc:  # noqa: BLE001 - sent to the peer as an ERROR
            self._conn.send_error(sid, to_rsocket_error(exc))
            return
        d = _as_deferred(result)
        if d is None:
            self._respond(result, sid)
        else:
            self._handlers[sid] = d
            d.addCallbacks(self._respond_later, self._respond_error_later, (sid,), None, (sid,))

    def _serve_fnf(self, responder: Responder, event: RequestReceived) -> None:
        self._call_one_way(responder.fire_and_forget, event.payload)

    def _serve_stream(self, responder: Responder, event: RequestReceived) -> None:
        self._start_pump(event.stream_id, responder.request_stream, event.payload)

    def _serve_channel(self, responder: Responder, event: RequestReceived) -> None:
        sid = event.stream_id
        inbound = RequestStream(self, sid, DEFAULT_PREFETCH)
        if event.complete:
            inbound._on_complete()
        else:
            self._inbound[sid] = inbound
            self._conn.send_request_n(sid, DEFAULT_PREFETCH)
        inbound._pump = self._start_pump(sid, responder.request_channel, event.payload, inbound)

    @staticmethod
    def _call_one_way(handler, arg) -> None:
        """Call a fire-and-forget or metadata-push handler: nothing goes back to the peer, so
        its errors (raised, or from its Deferred or coroutine) are logged."""
        try:
            result = handler(arg)
        except Exception:  # noqa: BLE001 - logged: there is nobody to answer
            _log.failure("{handler} raised", handler=handler.__qualname__)
            return
        d = _as_deferred(result)
        if d is not None:
            d.addErrback(lambda f: _log.failure("{handler} failed", f,
                                                handler=handler.__qualname__))

    def _start_pump(self, sid: int, handler, *args) -> OutboundPump | None:
        """Call a stream handler and start pumping what it returns (as credit allows)."""
        try:
            source = handler(*args)
        except Exception as exc:  # noqa: BLE001 - sent to the peer as an ERROR
            self._stream_failed_locally(sid, to_rsocket_error(exc))
            return None
        pump = OutboundPump(self, sid, source)
        if not pump._stopped:
            self._pumps[sid] = pump
        return pump

    def _respond(self, payload, sid: int) -> None:
        if not self._conn.has_stream(sid):
            return  # canceled meanwhile
        if payload is None:
            self._conn.send_complete(sid)
        elif not isinstance(payload, Payload):
            self._conn.send_error(sid, E.ApplicationError(
                f"request_response must return a Payload, not {type(payload).__name__}"))
        else:
            self._conn.send_payload(sid, payload, complete=True)

    def _respond_error(self, failure: Failure, sid: int) -> None:
        if self._conn.has_stream(sid):
            self._conn.send_error(sid, to_rsocket_error(failure))

    def _respond_later(self, payload, sid: int) -> None:
        self._handlers.pop(sid, None)
        if self._conn.is_open:
            self._respond(payload, sid)
            self._flush()

    def _respond_error_later(self, failure: Failure, sid: int) -> None:
        self._handlers.pop(sid, None)
        if failure.check(CancelledError) or not self._conn.is_open:
            return  # the requester canceled (we canceled the handler), or the connection ended
        self._respond_error(failure, sid)
        self._flush()

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
        if (sid & 1) != self._own_parity:
            # we are the responder: the requester's CANCEL ends the whole stream, inbound too.
            # (On a stream we requested, a CANCEL only stops our outbound half.)
            inbound = self._inbound.pop(sid, None)
            if inbound is not None:
                inbound._on_error(E.CanceledError("the peer canceled the stream"))

    def _on_payload(self, event: PayloadReceived) -> None:
        sid = event.stream_id
        stream = self._inbound.get(sid)
        if stream is None:
            d = self._responses.pop(sid, None)
            if d is not None:
                d.callback(event.payload)
            return
        if event.payload is not None:
            stream._on_next(event.payload)
        if event.complete:
            del self._inbound[sid]
            stream._on_complete()

    def _on_stream_errored(self, event: StreamErrored) -> None:
        self._stream_failed(event.stream_id, event.error)

    def _stream_failed(self, sid: int, error: E.RSocketError) -> None:
        d = self._responses.pop(sid, None)
        if d is not None:
            d.errback(error)
        d = self._handlers.pop(sid, None)
        if d is not None:
            d.cancel()
        pump = self._pumps.pop(sid, None)
        if pump is not None:
            pump.stop()
        stream = self._inbound.pop(sid, None)
        if stream is not None:
            stream._on_error(error)

    def _stream_failed_locally(self, sid: int, error: E.RSocketError) -> None:
        """Our side of ``sid`` failed: ERROR to the peer, then end it here."""
        if self._conn.has_stream(sid):
            self._conn.send_error(sid, error)
        self._stream_failed(sid, error)

    def _on_metadata_push(self, event: MetadataPushReceived) -> None:
        responder = self._responder
        if responder is None:
            return
        self._call_one_way(responder.metadata_push, event.metadata)

    def _on_connection_closing(self, event: ConnectionClosing) -> None:
        self._schedule_tick()  # the drain deadline
        if event.by_peer:
            _log.info("RSocket peer is closing the connection ({error}); waiting for "
                      "{n} open stream(s)", error=event.error, n=event.open_streams)

    def _on_connection_closed(self, event: ConnectionClosed) -> None:
        error = event.error or E.ConnectionLostError("the connection was closed")
        if not isinstance(error, E.ConnectionError) and not isinstance(error, E.SetupError) \
                and not isinstance(error, E.ConnectionCloseError):
            error = E.ConnectionLostError(str(error))
        self.close_reason = event.error
        self.lease._stop(error)
        if self._ready_call is not None and self._ready_call.active():
            self._ready_call.cancel()
        self._ready_call = None
        conn = self._conn
        if conn.resume_token is not None:
            sessions = getattr(self.factory, "sessions", None)
            if sessions is not None:
                sessions.remove(conn.resume_token, self)
            session_over = getattr(self.factory, "_session_ended", None)
            if session_over is not None:
                session_over(self)
            waiters, self._resume_waiters = self._resume_waiters, []
            for d in waiters:
                d.errback(error)
        responses, self._responses = self._responses, {}
        for d in responses.values():
            d.errback(error)
        handlers, self._handlers = self._handlers, {}
        for d in handlers.values():
            d.cancel()
        pumps, self._pumps = self._pumps, {}
        for pump in pumps.values():
            pump.stop()
        inbound, self._inbound = self._inbound, {}
        for stream in inbound.values():
            stream._on_error(error)
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None
        if event.by_peer and event.error is not None and not self._aborting:
            _log.info("RSocket connection closed: {error}", error=event.error)
        self._ended = True
        if self._aborting:
            written, self._written = self._written, []
            for d in written:
                d.errback(error)
            if self.transport is not None and not self._transport_gone:
                abort = getattr(self.transport, "abortConnection", None)
                (abort or self.transport.loseConnection)()
        elif self.transport is not None and not self._transport_gone:
            if self._frames:
                frames = self._conn.frames_to_send()
                if frames:
                    self.transport.writeFrames(frames)
            else:
                data = self._conn.data_to_send()
                if data:
                    self.transport.write(data)
            self._fire_written()
            self._end_transport()
        else:
            written, self._written = self._written, []
            for d in written:
                d.errback(error)
            if self._transport_gone and conn.resume_token is not None:
                self._session_over()  # a detached session ended (expired, or closed by us)

    # ------------------------------------------------------------------ pump callbacks

    def _pump_complete(self, pump: OutboundPump) -> None:
        sid = pump.stream_id
        if self._pumps.get(sid) is pump:
            del self._pumps[sid]
        if self._conn.has_stream(sid) and self._conn.credit(sid) >= 0:
            try:
                self._conn.send_complete(sid)
            except E.LocalProtocolError:
                pass
        self._flush()

    def _pump_failed(self, pump: OutboundPump, error: E.RSocketError) -> None:
        sid = pump.stream_id
        if self._pumps.get(sid) is pump:
            del self._pumps[sid]
        self._stream_failed_locally(sid, error)
        self._flush()

    # ------------------------------------------------------------------ leases

    def _ready(self) -> Deferred:
        """Client: a Deferred firing with this protocol once requests may start. At once
        without leases; with leases, once the server's first LEASE has arrived (spec
        §Connection Establishment: a client that set L waits for it), failing with the error
        that closes the connection first, or with
        :class:`~rsocket_tx.core.errors.LeaseError` (``NO_LEASE``; the connection is then
        closed) when none arrives within the client's max lifetime (ms)."""
        conn = self._conn
        if conn is None or not conn.lease_enabled:
            return succeed(self)
        d = self.lease._when_first_lease()
        if not d.called:
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

            self._ready_call = self._reactor.callLater(limit / 1000.0, no_lease)

            def arrived(result):
                if self._ready_call is not None and self._ready_call.active():
                    self._ready_call.cancel()
                self._ready_call = None
                return result

            d.addBoth(arrived)
        return d.addCallback(lambda _: self)

    # ------------------------------------------------------------------ requester side

    def _check_open(self) -> None:
        if self._conn is None or not self._conn.is_open:
            raise E.LocalProtocolError("the RSocket connection is closed")

    def request_response(self, payload: Payload) -> Deferred:
        self._check_open()
        sid = self._conn.request_response(payload)
        d = Deferred(lambda _: self._cancel_stream(sid))
        self._responses[sid] = d
        self._flush_soon()
        return d

    def fire_and_forget(self, payload: Payload) -> Deferred:
        self._check_open()
        self._conn.fire_and_forget(payload)
        return self._when_written()

    def metadata_push(self, metadata: bytes) -> Deferred:
        self._check_open()
        self._conn.metadata_push(metadata)
        return self._when_written()

    def _when_written(self) -> Deferred:
        """A Deferred that fires once what is queued now has been handed to the transport."""
        d = Deferred()
        self._written.append(d)
        self._flush_soon()
        return d

    def _fire_written(self) -> None:
        written, self._written = self._written, []
        for d in written:
            d.callback(None)

    def request_stream(self, payload: Payload, prefetch: int) -> RequestStream:
        self._check_open()
        sid = self._conn.request_stream(payload, prefetch)
        stream = self._inbound[sid] = RequestStream(self, sid, prefetch)
        self._flush_soon()
        return stream

    def request_channel(self, payload: Payload, outbound, prefetch: int,
                        complete: bool) -> RequestStream:
        self._check_open()
        complete = complete or outbound is None
        sid = self._conn.request_channel(payload, prefetch, complete)
        stream = self._inbound[sid] = RequestStream(self, sid, prefetch)
        if not complete:
            pump = OutboundPump(self, sid, outbound)
            if not pump._stopped:
                self._pumps[sid] = pump
            stream._pump = pump
        self._flush_soon()
        return stream

    def _cancel_stream(self, sid: int) -> None:
        """The local consumer canceled ``sid``: CANCEL to the peer.

        A requester's CANCEL ends the whole stream (our outbound half of a channel too); a
        channel responder's ends only its inbound half, its outbound goes on.
        """
        self._responses.pop(sid, None)
        self._inbound.pop(sid, None)
        if self._conn.is_open:
            self._conn.send_cancel(sid)
        if not self._conn.has_stream(sid):
            pump = self._pumps.pop(sid, None)
            if pump is not None:
                pump.stop()
        self._flush()

    def _request_n(self, sid: int, n: int) -> None:
        if self._conn.is_open:
            self._conn.send_request_n(sid, n)
            # written at once, even in the middle of handling a read: the responder refills the
            # window while we consume the rest of what arrived
            self._flush(force=True)

    def close(self, error: E.RSocketError | None = None) -> Deferred:
        """Close the connection now (after writing ``error`` as ERROR on stream 0, if given);
        outstanding requests fail with :class:`~rsocket_tx.core.errors.ConnectionLostError`.
        See :meth:`close_gracefully` to let them finish.

        :returns: Deferred firing with None once the transport is gone.
        """
        d = self.when_closed()
        if self._conn is not None and self._conn.is_open:
            self._handle(self._conn.close(error))
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
            self._handle_now(conn.close())  # no transport to drain streams through: end now
            return d
        if conn is None or self._transport_gone:
            return d
        if not conn.is_open:
            self.transport.loseConnection()
            return d
        now = self._reactor.seconds()
        delay = drain_timeout / 1000.0 + ABORT_DELAY
        call = self._abort_call
        if call is None:
            self._abort_call = self._reactor.callLater(delay, self._abort_transport)
        elif call.getTime() > now + delay:
            call.reset(delay)
        self._handle_now(conn.begin_close(now, drain_timeout, reason))
        self._schedule_tick()  # the drain deadline
        return d

    def _abort_transport(self) -> None:
        self._abort_call = None
        if self.transport is None or self._transport_gone:
            return
        _log.info("RSocket connection aborted: its transport did not close within "
                  "{delay} s of the drain timeout", delay=ABORT_DELAY)
        self._aborting = True
        self.transport.abortConnection()


def _check_policy(policy) -> None:
    if policy is not None and not isinstance(policy, LeasePolicy):
        raise TypeError(f"lease_policy must be a rsocket_tx.lease.LeasePolicy or None, got "
                        f"{policy!r}")


class _FactoryMixin:
    def _init_common(self, *, reactor, fragment_size, max_frame_size, max_reassembled_size,
                     setup_timeout, keepalive_interval, max_lifetime, max_concurrent_streams,
                     max_send_buffer_size, drain_timeout, frame_logger,
                     **resume_settings) -> None:
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = global_reactor
        self.reactor = reactor
        self.config = ConnectionConfig(
            fragment_size=fragment_size, max_frame_size=max_frame_size,
            max_reassembled_size=max_reassembled_size, setup_timeout=setup_timeout,
            keepalive_interval=keepalive_interval, max_lifetime=max_lifetime,
            max_concurrent_streams=max_concurrent_streams,
            max_send_buffer_size=max_send_buffer_size, drain_timeout=drain_timeout,
            **resume_settings)
        self.frame_logger = frame_logger


class RSocketServerFactory(_FactoryMixin, Factory):
    """Server factory: one :class:`RSocketProtocol` per accepted connection.

    :param responder_factory: zero-argument callable returning a :class:`Responder` for each
        connection (a Responder subclass works); None serves the demo responder.
    :param reactor: ``IReactorTime`` provider; None: the global reactor.
    :param fragment_size: bytes per outbound frame, header included, length prefix excluded
        (>= 64); None fragments only payloads that cannot fit one frame.
    :param max_frame_size: largest inbound frame, bytes (<= 16,777,215).
    :param max_reassembled_size: largest payload reassembled from fragments, bytes.
    :param setup_timeout: milliseconds a client may take to send SETUP.
    :param max_concurrent_streams: streams a client may have open towards us at once; a
        request past it is answered with ERROR[REJECTED].
    :param max_send_buffer_size: bytes queued for a client that does not read before its
        connection is aborted.
    :param drain_timeout: milliseconds a graceful close (:meth:`close_connections`, a
        client's ERROR[CONNECTION_CLOSE]) waits for open streams; 0: close at once.
    :param resume: accept resumable sessions (SETUP with R, RESUME; spec §Resuming
        Operation). False: SETUP with R gets ERROR[REJECTED_SETUP], RESUME
        ERROR[REJECTED_RESUME].
    :param resume_session_timeout: milliseconds a session whose transport was lost waits for
        the client's RESUME (default 120,000); after it, RESUME gets ERROR[REJECTED_RESUME] and
        the session's streams fail.
    :param max_resume_buffer_size: bytes of sent frames a session keeps for its client
        (default 16 MiB); a resume that needs frames dropped past it is refused.
    :param max_resume_sessions: resumable sessions kept at once, attached or detached
        (default 10,000); a SETUP with R past it gets ERROR[REJECTED_SETUP].
    :param lease_policy: what the server grants a client that asks for leases (SETUP L flag;
        spec §Lease Semantics): a :class:`~rsocket_tx.lease.LeasePolicy` (one object serves
        every connection); None grants unlimited leases. Requests past a grant are answered
        with ERROR[REJECTED].
    :param lease_grace: milliseconds a grant stays valid past its time-to-live (default
        1,000; see :class:`~rsocket_tx.core.config.ConnectionConfig`).
    :param frame_logger: ``callable(direction, frame)`` debug hook.
    :raises ValueError: a setting is out of range.

    :ivar connections: the connected :class:`RSocketProtocol` instances (a set), resumable
        sessions waiting for a resume included.
    :ivar sessions: with ``resume``: the resumable sessions by token (a
        :class:`~rsocket_tx.core.resume.SessionStore` of :class:`RSocketProtocol`); else None.
    """

    def __init__(self, responder_factory: Callable[[], Responder] | None = None, *,
                 reactor=None, fragment_size: int | None = None,
                 max_frame_size: int = MAX_FRAME_LENGTH,
                 max_reassembled_size: int = DEFAULT_MAX_REASSEMBLED_SIZE,
                 setup_timeout: int = DEFAULT_SETUP_TIMEOUT,
                 max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS,
                 max_send_buffer_size: int = DEFAULT_MAX_SEND_BUFFER_SIZE,
                 drain_timeout: int = DEFAULT_DRAIN_TIMEOUT,
                 resume: bool = False,
                 resume_session_timeout: int = DEFAULT_RESUME_SESSION_TIMEOUT,
                 max_resume_buffer_size: int = DEFAULT_MAX_RESUME_BUFFER_SIZE,
                 max_resume_sessions: int = DEFAULT_MAX_RESUME_SESSIONS,
                 lease_policy: LeasePolicy | None = None,
                 lease_grace: int = DEFAULT_LEASE_GRACE,
                 frame_logger: Callable | None = None) -> None:
        _check_policy(lease_policy)
        self.lease_policy = lease_policy
        if responder_factory is None:
            from .demo import DemoResponder
            responder_factory = DemoResponder
        if not callable(responder_factory):
            raise TypeError(f"responder_factory must be callable, got {responder_factory!r}")
        self.responder_factory = responder_factory
        self._init_common(reactor=reactor, fragment_size=fragment_size,
                          max_frame_size=max_frame_size,
                          max_reassembled_size=max_reassembled_size,
                          setup_timeout=setup_timeout,
                          keepalive_interval=DEFAULT_KEEPALIVE_INTERVAL,
                          max_lifetime=DEFAULT_MAX_LIFETIME,
                          max_concurrent_streams=max_concurrent_streams,
                          max_send_buffer_size=max_send_buffer_size,
                          drain_timeout=drain_timeout, frame_logger=frame_logger,
                          resume=resume, resume_session_timeout=resume_session_timeout,
                          max_resume_buffer_size=max_resume_buffer_size,
                          max_resume_sessions=max_resume_sessions, lease_grace=lease_grace)
        self.connections: set[RSocketProtocol] = set()
        self.sessions: SessionStore[RSocketProtocol] | None = (
            SessionStore(max_resume_sessions) if resume else None)
        self._closing: tuple[int | None, str] | None = None

    def buildProtocol(self, addr) -> RSocketProtocol:
        proto = RSocketProtocol(Role.SERVER, self.config, reactor=self.reactor,
                                responder_factory=self.responder_factory,
                                frame_logger=self.frame_logger,
                                lease_policy=self.lease_policy)
        proto.factory = self
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

    def _connection_made(self, proto: RSocketProtocol) -> None:
        self.connections.add(proto)
        if self._closing is not None:
            proto.close_gracefully(*self._closing)

    def _connection_lost(self, proto: RSocketProtocol) -> None:
        self.connections.discard(proto)


class RSocketClientFactory(_FactoryMixin, ClientFactory):
    """Client factory: builds the client :class:`RSocketProtocol` that sends ``setup``.

    :param setup: the :class:`~rsocket_tx.core.frames.SetupFrame` to send on connect; with a
        ``resume_token`` the connection is resumable.
    :param responder: the :class:`Responder` that serves requests from the server, or None.
    :param reconnect: resumable: zero-argument callable connecting this factory to the server
        again (``lambda: endpoint.connect(factory)``), called after the transport is lost, with
        exponential backoff (``reconnect_initial_delay``, doubling up to
        ``reconnect_max_delay``, milliseconds) until the session resumes or
        ``resume_session_timeout`` ms have passed. None: a lost transport ends the session.
    :param lease_policy: with a ``setup`` that has the L flag (``make_setup(lease=True)``):
        what the client grants the server (None: unlimited leases).

    Other parameters as :class:`RSocketServerFactory`.
    """

    def __init__(self, setup: SetupFrame, responder: Responder | None = None, *, reactor=None,
                 fragment_size: int | None = None,
                 max_frame_size: int = MAX_FRAME_LENGTH,
                 max_reassembled_size: int = DEFAULT_MAX_REASSEMBLED_SIZE,
                 max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS,
                 max_send_buffer_size: int = DEFAULT_MAX_SEND_BUFFER_SIZE,
                 drain_timeout: int = DEFAULT_DRAIN_TIMEOUT,
                 resume_session_timeout: int = DEFAULT_RESUME_SESSION_TIMEOUT,
                 max_resume_buffer_size: int = DEFAULT_MAX_RESUME_BUFFER_SIZE,
                 reconnect_initial_delay: int = DEFAULT_RECONNECT_INITIAL_DELAY,
                 reconnect_max_delay: int = DEFAULT_RECONNECT_MAX_DELAY,
                 reconnect: Callable[[], Deferred] | None = None,
                 lease_policy: LeasePolicy | None = None,
                 lease_grace: int = DEFAULT_LEASE_GRACE,
                 frame_logger: Callable | None = None) -> None:
        _check_policy(lease_policy)
        self.lease_policy = lease_policy
        self.setup = setup
        self.responder = responder
        self.reconnect = reconnect
        self._session: RSocketProtocol | None = None  # a resumable session reconnecting
        self._reconnect_call = None
        self._init_common(reactor=reactor, fragment_size=fragment_size,
                          max_frame_size=max_frame_size,
                          max_reassembled_size=max_reassembled_size,
                          setup_timeout=DEFAULT_SETUP_TIMEOUT,
                          keepalive_interval=setup.keepalive_interval,
                          max_lifetime=setup.max_lifetime,
                          max_concurrent_streams=max_concurrent_streams,
                          max_send_buffer_size=max_send_buffer_size,
                          drain_timeout=drain_timeout, frame_logger=frame_logger,
                          resume_session_timeout=resume_session_timeout,
                          max_resume_buffer_size=max_resume_buffer_size,
                          reconnect_initial_delay=reconnect_initial_delay,
                          reconnect_max_delay=reconnect_max_delay, lease_grace=lease_grace)
        self._backoff = Backoff(reconnect_initial_delay, reconnect_max_delay)

    def buildProtocol(self, addr) -> RSocketProtocol:
        if self._session is not None:
            return self._session  # a reconnection: the same session, on a new transport
        proto = RSocketProtocol(Role.CLIENT, self.config, reactor=self.reactor,
                                responder=self.responder, setup=self.setup,
                                frame_logger=self.frame_logger,
                                lease_policy=self.lease_policy)
        proto.factory = self
        return proto

    def _reconnect_later(self, proto: RSocketProtocol) -> None:
        """A resumable session lost its transport: reconnect after the next backoff delay
        (not after a TLS failure: the same server would fail the same way)."""
        self._session = proto
        if proto.tls_failure is not None:
            proto._handle_now(proto._conn.connection_lost(proto.tls_failure.message))
            proto._session_over()
            return
        if self.reconnect is None:
            proto._handle_now(proto._conn.connection_lost(
                "the transport was lost and this client has no endpoint to reconnect to"))
            proto._session_over()
            return
        if self._reconnect_call is not None and self._reconnect_call.active():
            return
        self._reconnect_call = self.reactor.callLater(self._backoff.next_delay(),
                                                      self._reconnect_now, proto)

    def _reconnect_now(self, proto: RSocketProtocol) -> None:
        self._reconnect_call = None
        if not proto._conn.is_open:
            return  # the session ended meanwhile
        try:
            d = self.reconnect()
        except Exception:  # noqa: BLE001 - treated as a failed attempt
            d = fail()
        d.addErrback(self._reconnect_failed, proto)

    def _reconnect_failed(self, failure: Failure, proto: RSocketProtocol) -> None:
        _log.info("RSocket reconnection attempt failed: {why}", why=failure.getErrorMessage())
        if proto._conn.is_open and proto._transport_gone:
            self._reconnect_later(proto)

    def _resumed(self, proto: RSocketProtocol) -> None:
        self._backoff.reset()

    def _session_ended(self, proto: RSocketProtocol) -> None:
        if self._reconnect_call is not None and self._reconnect_call.active():
            self._reconnect_call.cancel()
        self._reconnect_call = None
