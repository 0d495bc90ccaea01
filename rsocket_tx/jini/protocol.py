"""The Twisted protocol of the Jini ERI mux: :class:`JiniMuxProtocol` plugs a sans-IO
:class:`~rsocket_tx.jini.connection.JiniMuxConnection` into the shared bridge
(:class:`~rsocket_tx.bridge.MuxProtocol`: IPushProducer, batched writes, send-buffer guard,
half-close, ticks) and routes each session's events to its request object.

The client and server sides subclass it (:class:`~rsocket_tx.jini.client.JiniClientProtocol`,
:class:`~rsocket_tx.jini.server.JiniServerProtocol`). A request object (``OutboundRequest`` or
``InboundRequest``) has a :class:`~rsocket_tx.jini.streams.DataReader` as ``reader`` and a
:class:`~rsocket_tx.jini.streams.DataWriter` as ``writer``, and ``session_id``; the protocol
implements :class:`~rsocket_tx.jini.streams.SessionHost` for them.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from ..bridge import MuxProtocol, failure_for
from .config import JiniMuxConfig
from .connection import JiniMuxConnection, Role, Session, SessionState
from .errors import (
    ConnectionShutdownError,
    ConnectionTerminatedError,
    LocalProtocolError,
    SessionAbortedError,
)
from .events import (
    ConnectionEstablished,
    ConnectionTerminated,
    DataReceived,
    PingAckReceived,
    RationIncreased,
    SessionAborted,
    ShutdownReceived,
)

__all__ = ["JiniMuxProtocol", "merge_data"]


def merge_data(events: list[Any]) -> list[Any]:
    """Merge each run of consecutive :class:`~rsocket_tx.jini.events.DataReceived` of one
    session (the *Data* messages of one read, River's 1 KiB fragments) into one event whose
    data is theirs joined: the application gets one chunk and the ration is topped up once
    per read, not once per message. Nothing else moves: other events keep their place.

    :param events: the events of one read, in order.
    :returns: the same list when nothing merges, else a new one.
    """
    out: list[Any] = []
    parts: list[bytes] | None = None  # data of the run being merged, out[-1] its first event
    merged = False
    for event in events:
        if type(event) is DataReceived:
            last = out[-1] if out else None
            if type(last) is DataReceived and last.session_id == event.session_id \
                    and not last.eof:
                if parts is None:
                    parts = [last.data]
                parts.append(event.data)
                out[-1] = DataReceived(event.session_id, b"", event.eof, event.ack_required)
                merged = True
                continue
            if parts is not None:
                out[-1].data = b"".join(parts)
                parts = None
            out.append(event)
            continue
        if parts is not None:
            out[-1].data = b"".join(parts)
            parts = None
        out.append(event)
    if parts is not None:
        out[-1].data = b"".join(parts)
    return out if merged else events


class JiniMuxProtocol(MuxProtocol):
    """One Jini ERI mux connection over a Twisted transport (TCP or TLS).

    :param reactor: the reactor.
    :param role: :attr:`~rsocket_tx.jini.connection.Role.CLIENT` or ``SERVER``.
    :param config: the settings (:class:`~rsocket_tx.jini.config.JiniMuxConfig`).

    :ivar requests: ``{session id: request}`` of the sessions in progress.
    :ivar terminated: the :class:`~rsocket_tx.jini.errors.ConnectionTerminatedError` the
        connection ended with, or None while it is open.
    """

    role: Role
    #: the sans-IO connection (a :class:`~rsocket_tx.jini.connection.JiniMuxConnection`),
    #: None before the transport connects
    connection: Any

    def __init__(self, reactor: Any, role: Role, config: JiniMuxConfig | None = None) -> None:
        config = config if config is not None else JiniMuxConfig()
        super().__init__(reactor, max_send_buffer_size=config.max_send_buffer_size)
        self.role = role
        self.config = config
        self.protocol_name = f"Jini ERI mux {role.value}"  # (MuxProtocol's log wording)
        # a server keeps a client's first bytes: one that is not a Jini mux client is named
        self.watch_first_bytes = role is Role.SERVER
        self.requests: dict[int, Any] = {}
        self.terminated: ConnectionTerminatedError | None = None
        self._shutdown_detail: str | None = None
        self._established: list[Deferred[JiniMuxProtocol]] = []
        self._lost: list[Deferred[None]] = []
        self._pings: dict[int, tuple[Deferred[float], float]] = {}
        self._pump_queue: list[Any] = []  # writers written to since the last flush
        # A batch of events is the outcome of one read; application code runs while it is
        # dispatched and may reuse a session id that the connection released in that read
        # (its SessionReleased is still to come in the batch): a request made during a batch
        # gets no event of that batch, which belongs to the request it replaced (_retired).
        self._batch = 0
        self._retired: dict[int, Any] = {}
        self.event_handlers = {
            ConnectionEstablished: self.on_connection_established,
            DataReceived: self.on_data_received,
            RationIncreased: self.on_ration_increased,
            SessionAborted: self.on_session_aborted,
            PingAckReceived: self.on_ping_ack,
            ShutdownReceived: self.on_shutdown_received,
            ConnectionTerminated: self.on_connection_terminated,
        }

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<{type(self).__name__} {self.role.value} {state} sessions={len(self.requests)}>"

    # ------------------------------------------------------------------ bridge hooks

    def make_connection(self) -> JiniMuxConnection:
        return JiniMuxConnection(self.role, self.config)

    def connection_started(self) -> None:
        self.connection.initiate_connection(self.reactor.seconds())

    def flush(self, force: bool = False) -> None:
        """Run the pumps writes asked for (:meth:`pump_soon`), then write what the connection
        queued (:meth:`~rsocket_tx.bridge.MuxProtocol.flush`)."""
        queue = self._pump_queue
        if queue and (force or not self.dispatching):
            self._pump_queue = []
            for writer in queue:
                writer.run_queued_pump()
        super().flush(force)

    def pump_soon(self, writer: Any) -> None:
        """:class:`~rsocket_tx.jini.streams.SessionHost`: pump ``writer`` (a
        :class:`~rsocket_tx.jini.streams.DataWriter`) before the next write to the transport."""
        self._pump_queue.append(writer)
        self.flush_soon()

    def producing_resumed(self) -> None:
        for request in list(self.requests.values()):
            request.writer.producing_resumed()

    def transport_lost(self, reason: Failure | None) -> None:
        super().transport_lost(reason)
        if self.terminated is None:  # (never connected: no connection to end)
            self.terminated = ConnectionTerminatedError("the transport closed", by_peer=True)
        waiters, self._lost = self._lost, []
        for d in waiters:
            d.callback(None)
        waiters2, self._established = self._established, []
        for d2 in waiters2:
            d2.errback(failure_for(self.terminated))

    def handle_events(self, events: list[Any]) -> None:
        if len(events) > 1:
            events = merge_data(events)
        if not self.dispatching and self.held is None:
            self._batch += 1
            self._retired.clear()
        super().handle_events(events)

    def add_request(self, session_id: int, request: Any) -> None:
        """Map ``session_id`` to a new ``request`` (replacing the one whose session used the
        id before; the rest of the batch being dispatched still goes to that one)."""
        old = self.requests.get(session_id)
        if old is not None and self.dispatching:
            self._retired[session_id] = old
        request.batch = self._batch if self.dispatching else -1
        self.requests[session_id] = request

    def forget_request(self, session_id: int) -> None:
        """The connection released ``session_id`` (SessionReleased): forget the request whose
        session used it (not one made during this batch, which reuses the id)."""
        if self._retired.pop(session_id, None) is None and \
                self.request_for(session_id) is not None:
            del self.requests[session_id]

    def request_for(self, session_id: int) -> Any:
        """The request an event of the batch being dispatched is about, or None."""
        request = self.requests.get(session_id)
        if request is not None and self.dispatching and request.batch == self._batch:
            return self._retired.get(session_id)
        return request

    # ------------------------------------------------------------------ public API

    def when_established(self) -> Deferred[JiniMuxProtocol]:
        """A Deferred firing with this protocol once the peer's connection header arrived
        (at once if it has), or failing with the error the connection ended with."""
        conn = self.connection
        if conn is not None and conn.handshake_complete and conn.is_open:
            d: Deferred[JiniMuxProtocol] = Deferred()
            d.callback(self)
            return d
        if self.terminated is not None:
            return fail(failure_for(self.terminated))
        d = Deferred()
        self._established.append(d)
        return d

    def when_lost(self) -> Deferred[None]:
        """A Deferred firing (with None) once the transport is gone."""
        d: Deferred[None] = Deferred()
        if self.transport_gone:
            d.callback(None)
        else:
            self._lost.append(d)
        return d

    def ping(self) -> Deferred[float]:
        """Send a *Ping* (§Ping Message).

        :returns: a Deferred firing with the round-trip time in seconds when the *PingAck*
            arrives; it fails with
            :class:`~rsocket_tx.jini.errors.ConnectionTerminatedError` if the connection ends
            first (``config.ping_timeout`` without an answer ends it).
        """
        if not self.is_open or not self.connection.handshake_complete:
            return fail(failure_for(self.terminated or LocalProtocolError(
                "the connection is not established")))
        now = self.reactor.seconds()
        cookie = self.connection.ping(now)
        d: Deferred[float] = Deferred()
        self._pings[cookie] = (d, now)
        self.schedule_tick()
        self.flush_soon()
        return d

    def close(self) -> Deferred[None]:
        """Close the transport (after what is queued); sessions in progress fail.

        :returns: a Deferred firing once the transport is gone.
        """
        d = self.when_lost()
        if self.transport is not None and not self.transport_gone:
            if self.connection is not None and self.connection.is_open:
                self.handle_events_now(self.connection.connection_lost("closed by the application"))
            self.end_transport()
        return d

    # ------------------------------------------------------------------ SessionHost

    def session_of(self, token: Any) -> int | None:
        """The session id of ``token`` (a request) while its session is alive on this
        connection, else None (the id may already serve another request)."""
        conn = self.connection
        if token is None or conn is None or not conn.is_open:
            return None  # (the request is gone, or the connection)
        sid: int = token.session_id
        if self.requests.get(sid) is token and conn.session(sid) is not None:
            return sid
        return None

    def abortable_session(self, token: Any) -> Session | None:
        """``token``'s session (a request's) while we may still abort it: alive on this
        connection and not yet terminated by us; else None (aborting is then a no-op)."""
        sid = self.session_of(token)
        if sid is None:
            return None
        session = self.connection.session(sid)
        if session is None or session.send is SessionState.TERMINATED:
            return None
        return session

    def session_send(self, token: Any, data: bytes, eof: bool, ack_required: bool = False) -> int:
        """:class:`~rsocket_tx.jini.streams.SessionHost`: send on the request's session.

        :raises ConnectionTerminatedError: the connection ended.
        :raises SessionAbortedError: the session is over.
        """
        sid = self.session_of(token)
        if sid is None:
            if self.terminated is not None:
                raise self.terminated
            raise SessionAbortedError("the session is over", partial=True)
        return self.connection.send_data(sid, data, eof, ack_required)

    def session_ration(self, token: Any) -> int | None:
        """:class:`~rsocket_tx.jini.streams.SessionHost`: the outbound ration in bytes."""
        sid = self.session_of(token)
        if sid is None:
            return 0
        return self.connection.outbound_ration(sid)

    def session_consumed(self, token: Any, n: int) -> None:
        """:class:`~rsocket_tx.jini.streams.SessionHost`: the application read ``n`` bytes."""
        sid = self.session_of(token)
        if sid is not None:
            self.connection.acknowledge_received_data(sid, n)
            self.flush_soon()

    def session_eof_consumed(self, token: Any) -> None:
        """:class:`~rsocket_tx.jini.streams.SessionHost`: the application read the end."""

    # ------------------------------------------------------------------ event handlers

    def on_connection_established(self, event: ConnectionEstablished) -> None:
        if not self.connection.is_open:
            return  # it ended in the same read: ConnectionTerminated follows and fails them
        waiters, self._established = self._established, []
        for d in waiters:
            d.callback(self)

    def on_data_received(self, event: DataReceived) -> None:
        request = self.request_for(event.session_id)
        if request is None:
            return
        if event.ack_required:
            request.ack_required = True
        request.reader.feed(event.data)
        if event.eof:
            request.reader.finish()

    def on_ration_increased(self, event: RationIncreased) -> None:
        request = self.request_for(event.session_id)
        if request is not None:
            request.writer.pump()

    def on_session_aborted(self, event: SessionAborted) -> None:
        request = self.request_for(event.session_id)
        if request is None:
            return
        error = SessionAbortedError(event.detail, partial=event.partial)
        # aborted by our connection while it goes on: a buffer limit was passed
        # (max_session_buffer, max_connection_buffer), so what it holds is dropped too
        limit = not event.by_peer and self.connection.is_open
        request.session_failed(error, discard=limit)

    def on_ping_ack(self, event: PingAckReceived) -> None:
        entry = self._pings.pop(event.cookie, None)
        if entry is not None:
            d, started = entry
            d.callback(self.reactor.seconds() - started)

    def on_shutdown_received(self, event: ShutdownReceived) -> None:
        self._shutdown_detail = event.detail

    def on_connection_terminated(self, event: ConnectionTerminated) -> None:
        if self._shutdown_detail is not None:
            error: ConnectionTerminatedError = ConnectionShutdownError(event.reason,
                                                                       by_peer=True)
        else:
            error = ConnectionTerminatedError(event.reason, by_peer=event.by_peer)
        self.terminated = error
        # (the words of the "closed" log line)
        self.end_reason = event.reason if event.by_peer else f"closed by this side: {event.reason}"
        if not event.by_peer and self.role is Role.SERVER \
                and not self.connection.handshake_complete:
            self.name_wrong_client("jini-mux")  # (its header was another protocol's bytes)
        self.ended = True
        requests, self.requests = self.requests, {}
        retired, self._retired = self._retired, {}
        for request in list(retired.values()) + list(requests.values()):
            request.session_failed(error)
        pings, self._pings = self._pings, {}
        for d, _ in pings.values():
            d.errback(failure_for(error))
        waiters, self._established = self._established, []
        for d2 in waiters:
            d2.errback(failure_for(error))
        self.connection_terminated(error)

    def connection_terminated(self, error: ConnectionTerminatedError) -> None:
        """Hook: the connection ended (its requests have failed already)."""

    def release(self) -> None:
        """The connection is over and its transport gone: also forget the requests, so
        that nothing but reference counting is needed to free this protocol (see
        :meth:`~rsocket_tx.bridge.MuxProtocol.release`)."""
        super().release()
        self.requests = {}
        self._pump_queue = []
        self._retired = {}
