"""The sans-IO Jini ERI mux connection (Jini ERI Multiplexing Protocol, seed ``004``).

One :class:`JiniMuxConnection` is one end (client or server) of one connection. Bytes come in
through :meth:`~JiniMuxConnection.receive_data`, which returns :mod:`events
<rsocket_tx.jini.events>`; what the connection has to send is taken with
:meth:`~JiniMuxConnection.chunks_to_send`. Time is passed in (seconds, any epoch, one clock per
connection); nothing here reads a clock or does I/O.

Session states (§Sessions). Each end keeps, per session, two states: its own (``send``: what
it has sent) and the peer's as known from what it received (``recv``)::

    IDLE         client only: an id taken by open_session(), nothing sent yet
    ESTABLISHED  Data with open sent/received (the client establishes sessions)
    FINISHED     Data with eof sent/received: no more data in that direction
    TERMINATED   Abort sent/received (either side); Close (or Data with close) sent/received
                 (server only)

The rules, as this module enforces them (a rule broken by the peer is a protocol violation:
*Error* queued, :class:`~rsocket_tx.jini.events.ConnectionTerminated`; broken by our caller,
:class:`~rsocket_tx.jini.errors.LocalProtocolError` and nothing sent):

- Only the client sends Data with ``open``, Acknowledgment; only the server sends Data with
  ``close`` or ``ackRequired``, Abort with ``partial``, Close, Shutdown.
- Data (without open) needs the session established and not finished with respect to the
  sender; Data with open needs the id not in use: a session terminated with respect to the
  server and finished by the client is implicitly terminated by it (§Session Termination).
- A Data longer than the receiver's inbound ration is a violation (§Flow Control); so is an
  IncrementRation that takes the outbound ration past 0x7FFFFFFF.
- IncrementRation, Abort, Acknowledgment need the session established with respect to the
  sender; a message arriving for a session we already terminated (the two ends' messages
  crossed) is ignored, as §Sessions' "some interleaved order" requires.
- Close needs the session finished (but established) with respect to the server.
- The client reuses an id once the session is terminated with respect to both ends, or
  terminated with respect to the server after the client sent eof (and, when the server asked
  for one, after the Acknowledgment: River's rule).

Answers the protocol requires are queued without the caller's help: PingAck for Ping; the
client's Abort for a session the server closed or aborted before the client finished; the
server's Abort for a session the client aborted; the server's Close once both sides have sent
eof (or the ``close`` flag on its last Data when the client had already finished).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import ClassVar

from ..mux import (
    Credit,
    CreditExceeded,
    CreditOverflow,
    CreditUnit,
    Deadlines,
    LowestFreeIds,
    MuxStream,
    Outbox,
    PeerChosenIds,
    ReassemblyBudget,
    ReassemblyLimitExceeded,
    StreamTable,
)
from . import codec as C
from .config import JiniMuxConfig
from .errors import JiniProtocolError, LocalProtocolError, NoFreeSessionError
from .events import (
    AcknowledgmentReceived,
    ConnectionEstablished,
    ConnectionTerminated,
    DataReceived,
    Event,
    PingAckReceived,
    RationIncreased,
    SessionAborted,
    SessionClosed,
    SessionOpened,
    SessionReleased,
    ShutdownReceived,
)

__all__ = ["Role", "SessionState", "ConnectionState", "Session", "JiniMuxConnection"]


class Role(enum.Enum):
    """Which end of the connection (§Connection Properties)."""

    CLIENT = "client"
    SERVER = "server"


class SessionState(enum.IntEnum):
    """A session's state with respect to one endpoint (§Sessions); ordered."""

    IDLE = 0
    ESTABLISHED = 1
    FINISHED = 2
    TERMINATED = 3


class ConnectionState(enum.Enum):
    """The connection's own state."""

    #: waiting for the peer's connection header
    HANDSHAKE = "handshake"
    OPEN = "open"
    #: terminated: nothing more is sent (except what is queued) or delivered
    CLOSED = "closed"


IDLE = SessionState.IDLE
ESTABLISHED = SessionState.ESTABLISHED
FINISHED = SessionState.FINISHED
TERMINATED = SessionState.TERMINATED

_HANDSHAKE = "handshake"


class Session(MuxStream):
    """One session as seen from this end.

    :ivar send: our state (what we have sent), a :class:`SessionState`.
    :ivar recv: the peer's state, as known from what we received.
    :ivar outbound: our outbound ration (:class:`~rsocket_tx.mux.Credit` in bytes).
    :ivar inbound: our inbound ration: what the peer may still send.
    :ivar buffered: bytes delivered to the application and not yet acknowledged as read.
    """

    __slots__ = ("send", "recv", "outbound", "inbound", "buffered", "ack_required_received",
                 "ack_sent", "ack_required_sent", "ack_received")

    def __init__(self, session_id: int, outbound: Credit, inbound: Credit,
                 state: SessionState) -> None:
        super().__init__(session_id)
        self.send = state
        self.recv = state
        self.outbound = outbound
        self.inbound = inbound
        self.buffered = 0
        self.ack_required_received = False
        self.ack_sent = False
        self.ack_required_sent = False
        self.ack_received = False

    def set_send(self, state: SessionState) -> None:
        """Move our state (and the mux layer's ``send_open``)."""
        self.send = state
        self.send_open = state <= ESTABLISHED

    def set_recv(self, state: SessionState) -> None:
        """Move the peer's state (and the mux layer's ``recv_open``)."""
        self.recv = state
        self.recv_open = state <= ESTABLISHED

    def __repr__(self) -> str:
        return (f"<Session {self.stream_id} send={self.send.name} recv={self.recv.name} "
                f"out={self.outbound!r} in={self.inbound!r} buffered={self.buffered}>")


def _text(detail: bytes) -> str:
    return detail.decode("utf-8", errors="replace")


class JiniMuxConnection:
    """One end of a Jini ERI mux connection, without I/O.

    The client's connection header is queued at construction; call :meth:`initiate_connection`
    with the time to start the handshake timeout.

    :param role: :attr:`Role.CLIENT` or :attr:`Role.SERVER`.
    :param config: the settings (:class:`~rsocket_tx.jini.config.JiniMuxConfig`; default
        River's).
    """

    def __init__(self, role: Role, config: JiniMuxConfig | None = None) -> None:
        self.role = role
        self.config = config = config if config is not None else JiniMuxConfig()
        self.state = ConnectionState.HANDSHAKE
        #: True until the connection is terminated (during the handshake too); an attribute,
        #: not a property, as it is read several times per message
        self.is_open = True
        self._client = role is Role.CLIENT
        self._decoder = C.MessageDecoder(
            C.ServerConnectionHeader if self._client else C.ClientConnectionHeader)
        self._outbox = Outbox()
        self._sessions: StreamTable[Session] = StreamTable(C.MAX_SESSIONS)
        self._client_ids = LowestFreeIds(config.max_sessions)
        self._server_ids = PeerChosenIds(C.MAX_SESSION_ID)
        self._deadlines: Deadlines[object] = Deadlines()
        self._budget = ReassemblyBudget(config.max_connection_buffer)
        self._ration = config.ration  # our inbound initial ration (None: unlimited)
        self._peer_ration: int | None = None  # our outbound initial ration
        self._header_sent = False
        self._pings: set[int] = set()
        self._next_cookie = 0
        self._active = 0  # server: sessions not yet terminated with respect to us
        #: why the connection ended (None while it has not)
        self.terminated_reason: str | None = None
        if self._client:
            self._send_header()

    # ---------------------------------------------------------------------------------------
    # properties

    @property
    def handshake_complete(self) -> bool:
        """The peer's connection header arrived."""
        return self.state is ConnectionState.OPEN or (
            self.state is ConnectionState.CLOSED and self._peer_header_seen)

    @property
    def _peer_header_seen(self) -> bool:
        return not self._decoder.expecting_header

    @property
    def peer_ration(self) -> int | None:
        """The initial ration the peer announced, in bytes (None: unlimited or not yet
        known)."""
        return self._peer_ration

    @property
    def bytes_to_send(self) -> int:
        """Bytes queued and not yet taken by :meth:`chunks_to_send`."""
        return self._outbox.nbytes

    @property
    def session_count(self) -> int:
        """Session ids in use (client: not yet released; server: known to the table)."""
        return len(self._sessions)

    @property
    def active_sessions(self) -> int:
        """Client: session ids in use (not yet released). Server: sessions not yet terminated
        with respect to us (those it keeps after its Close until the client reuses the id or
        aborts do not count)."""
        return len(self._sessions) if self._client else self._active

    @property
    def can_open_session(self) -> bool:
        """Client: :meth:`open_session` would succeed now."""
        return (self._client and self.state is ConnectionState.OPEN
                and len(self._client_ids) < self.config.max_sessions)

    def session(self, session_id: int) -> Session | None:
        """The session with this id (read-only use), or None."""
        return self._sessions.get(session_id)

    def outbound_ration(self, session_id: int) -> int | None:
        """Bytes we may send now on the session (None: unlimited).

        :raises LocalProtocolError: no such session.
        """
        s = self._get(session_id)
        return None if s.outbound.unlimited else s.outbound.available

    # ---------------------------------------------------------------------------------------
    # I/O side

    def initiate_connection(self, now: float) -> None:
        """Start the handshake timeout (``config.handshake_timeout``) at ``now`` (seconds)."""
        if self.state is ConnectionState.HANDSHAKE:
            self._deadlines.set(_HANDSHAKE, now + self.config.handshake_timeout / 1000)

    def chunks_to_send(self) -> list[bytes]:
        """Take the bytes queued for the transport, in order (write them all, in one write)."""
        return self._outbox.drain()

    def next_deadline(self) -> float | None:
        """When :meth:`tick` should be called next (seconds), or None."""
        if self.state is ConnectionState.CLOSED:
            return None
        return self._deadlines.next()

    def tick(self, now: float) -> list[Event]:
        """Run the timers due at ``now`` (seconds): the handshake timeout, Ping timeouts.

        :returns: the events (a :class:`~rsocket_tx.jini.events.ConnectionTerminated` when a
            timer ended the connection).
        """
        if self.state is ConnectionState.CLOSED:
            return []
        for key in self._deadlines.pop_expired(now):
            if key == _HANDSHAKE:
                return self._terminate(
                    f"no connection header from the {self._peer_name} within "
                    f"{self.config.handshake_timeout} ms", by_peer=False)
            return self._terminate(
                f"no PingAck from the {self._peer_name} within {self.config.ping_timeout} ms",
                by_peer=False)
        return []

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        """Process bytes received from the peer (cut anywhere).

        :param data: the bytes.
        :param now: the time, in seconds.
        :returns: the events, in order. A protocol violation by the peer queues an *Error*
            message and ends the list with :class:`~rsocket_tx.jini.events.ConnectionTerminated`
            (``error_sent`` True); what is queued must still be written.
        """
        if self.state is ConnectionState.CLOSED:
            return []
        decoder = self._decoder
        decoder.receive_data(data)
        events: list[Event] = []
        try:
            while self.is_open:
                message = decoder.next_message()
                if message is None:
                    break
                if isinstance(message, C.ConnectionHeader):
                    self._on_header(message, events)
                else:
                    self._dispatch[type(message)](self, message, events)
        except JiniProtocolError as exc:
            # (the decoder keeps it to raise again: its traceback would hold this frame, and
            # so this connection, in a reference cycle)
            exc.__traceback__ = None
            events += self._violation(str(exc))
        return events

    def connection_lost(self, reason: str = "connection lost") -> list[Event]:
        """The transport is gone.

        :returns: :class:`~rsocket_tx.jini.events.SessionAborted` for every session still in
            progress, then :class:`~rsocket_tx.jini.events.ConnectionTerminated`
            (``by_peer`` True); nothing if the connection had already ended.
        """
        if self.state is ConnectionState.CLOSED:
            return []
        return self._terminate(reason, by_peer=True)

    # ---------------------------------------------------------------------------------------
    # application side

    def open_session(self) -> int:
        """Client: take the lowest free session id (0 .. 127). Nothing is sent until the first
        :meth:`send_data` (a *Data* with ``open``), as River does.

        :returns: the session id.
        :raises LocalProtocolError: we are the server, or the handshake is not complete, or
            the connection has ended.
        :raises NoFreeSessionError: ``config.max_sessions`` ids are in use.
        """
        if not self._client:
            raise LocalProtocolError("only the client establishes sessions")
        self._check_open()
        if len(self._client_ids) >= self.config.max_sessions:
            raise NoFreeSessionError(
                f"all {self.config.max_sessions} sessions of the connection are in use")
        sid = self._client_ids.allocate()
        self._sessions.add(Session(sid, self._outbound_credit(), self._inbound_credit(), IDLE))
        return sid

    def send_data(self, session_id: int, data: bytes, eof: bool = False,
                  ack_required: bool = False) -> int:
        """Send as much of ``data`` as the session's outbound ration allows, in *Data*
        messages of at most ``config.fragment_size`` bytes (§Data Message, §Flow Control).

        The client's first call on a session sets the ``open`` flag (with empty ``data`` it
        just establishes the session). ``eof`` is sent only with the last byte of ``data``:
        when not everything was accepted, call again with the rest after
        :class:`~rsocket_tx.jini.events.RationIncreased`. The server's eof carries the
        ``close`` flag when the client has already finished.

        :param session_id: the session.
        :param data: the bytes.
        :param eof: the last data of this session from us.
        :param ack_required: server, with ``eof``: ask the client for an *Acknowledgment*.
        :returns: how many bytes of ``data`` were accepted (and queued).
        :raises LocalProtocolError: no such session, the session is finished or terminated
            with respect to us, ``ack_required`` on a client or without ``eof``, or the
            connection is not open.
        """
        self._check_open()
        s = self._get(session_id)
        if s.send > ESTABLISHED:
            raise LocalProtocolError(
                f"session {session_id} is {s.send.name.lower()} with respect to us: "
                f"no more Data may be sent")
        if ack_required and (self._client or not eof):
            raise LocalProtocolError("ackRequired is for the server's Data with eof only")
        total = len(data)
        n = s.outbound.take(total)
        opening = s.send is IDLE
        eof_now = eof and n == total
        if n == 0 and not opening and not eof_now:
            return 0
        close = eof_now and not self._client and s.recv is FINISHED
        size = self.config.fragment_size
        outbox = self._outbox
        pos = 0
        first = True
        while True:
            end = pos + size if n - pos > size else n
            last = end == n
            flags = 0x80
            if first and opening:
                flags |= C.DATA_OPEN
            if last and eof_now:
                flags |= C.DATA_EOF
                if close:
                    flags |= C.DATA_CLOSE
                if ack_required:
                    flags |= C.DATA_ACK_REQUIRED
            outbox.append(bytes((flags, session_id, (end - pos) >> 8, (end - pos) & 0xFF)))
            if end > pos:
                outbox.append(data[pos:end] if pos or end != total else data)
            if last:
                break
            pos = end
            first = False
        if opening:
            s.set_send(ESTABLISHED)
            s.set_recv(ESTABLISHED)
        if eof_now:
            if ack_required:
                s.ack_required_sent = True
            if close:
                self._set_server_terminated(s)
                self._maybe_remove(s)
            else:
                s.set_send(FINISHED)
        return n

    def acknowledge_received_data(self, session_id: int, n: int) -> None:
        """The application has consumed ``n`` bytes of the session's received data: grant the
        peer more ration as River does (when what is buffered plus the inbound ration falls to
        half the initial ration, top it up to the initial ration). An unknown session is
        ignored (it ended while the application was still reading).

        :param n: bytes, at least 0 (clamped to what is buffered).
        """
        s = self._sessions.get(session_id)
        if s is None or n <= 0:
            return
        n = min(n, s.buffered)
        s.buffered -= n
        self._budget.release(n)
        self._top_up(s)

    def increment_ration(self, session_id: int, n: int) -> None:
        """Grant the peer ``n`` more bytes on the session (*IncrementRation*, split into
        messages of ``increment << 2 * shift``). A no-op when our inbound ration is unlimited or
        the peer has finished sending.

        :param n: bytes, at least 1.
        :raises LocalProtocolError: no such session, not established or terminated with
            respect to us, or the ration would pass 0x7FFFFFFF bytes.
        """
        self._check_open()
        s = self._get(session_id)
        if n < 1:
            raise LocalProtocolError(f"a ration increment must be at least 1 byte, got {n}")
        if s.send is IDLE or s.send is TERMINATED:
            raise LocalProtocolError(
                f"session {session_id} is not established with respect to us")
        if s.inbound.unlimited or s.recv is not ESTABLISHED:
            return
        try:
            s.inbound.grant(n)
        except CreditOverflow as exc:
            raise LocalProtocolError(f"ration overflow: {exc}") from None
        self._queue_increment(session_id, n)

    def abort(self, session_id: int, partial: bool | None = None, detail: str = "") -> None:
        """Terminate the session abruptly (*Abort*, §Abort Message).

        Client: an id not yet used on the wire is just released. Server: ``partial`` (default
        True) must be False only if nothing of the request was processed with side effects.

        :raises LocalProtocolError: no such session, already terminated with respect to us,
            or ``partial`` True on a client.
        """
        s = self._get(session_id)
        if s.send is TERMINATED:
            raise LocalProtocolError(f"session {session_id} is already terminated")
        if self._client:
            if partial:
                raise LocalProtocolError("the partial flag is for the server's Abort only")
            if s.send is IDLE or s.recv is TERMINATED:
                # nothing on the wire yet / implicitly terminated by the server's Close
                s.set_send(TERMINATED)
                self._release(s, [])
                return
            self._outbox.append(C.Abort(session_id, False, detail.encode()).encode())
            s.set_send(TERMINATED)
            self._discard_buffered(s)
            return
        if not self.is_open:
            raise LocalProtocolError("the connection is not open")
        self._outbox.append(
            C.Abort(session_id, True if partial is None else partial, detail.encode()).encode())
        self._set_server_terminated(s)
        self._discard_buffered(s)
        self._maybe_remove(s)

    def close(self, session_id: int) -> None:
        """Server: the session is done (*Close*, §Close Message): after our eof, when the rest
        of the request does not interest us. (When the client finishes, the Close is sent
        without being asked.)

        :raises LocalProtocolError: a client, no such session, or the session is not finished
            (or already terminated) with respect to us.
        """
        if self._client:
            raise LocalProtocolError("Close is sent by the server only")
        self._check_open()
        s = self._get(session_id)
        if s.send is not FINISHED:
            raise LocalProtocolError(
                f"Close needs the session finished with respect to us; session {session_id} "
                f"is {s.send.name.lower()}")
        self._outbox.append(C.Close(session_id).encode())
        self._set_server_terminated(s)
        self._discard_buffered(s)
        self._maybe_remove(s)

    def acknowledge(self, session_id: int) -> None:
        """Client: the response was processed (*Acknowledgment*, §Acknowledgment Message),
        after a *Data* with ``ackRequired``.

        :raises LocalProtocolError: a server, no such session, no acknowledgment was asked
            for, it was sent already, or we aborted the session.
        """
        if not self._client:
            raise LocalProtocolError("Acknowledgment is sent by the client only")
        self._check_open()
        s = self._get(session_id)
        if not s.ack_required_received or s.ack_sent or s.send is TERMINATED:
            raise LocalProtocolError(
                f"no Acknowledgment may be sent for session {session_id} now")
        self._outbox.append(C.Acknowledgment(session_id).encode())
        s.ack_sent = True
        if s.recv is TERMINATED:
            self._release(s, [])

    def ping(self, now: float) -> int:
        """Send a *Ping*; the peer must answer with a *PingAck* within
        ``config.ping_timeout``, or :meth:`tick` ends the connection.

        :param now: the time, in seconds.
        :returns: the cookie (reported back in
            :class:`~rsocket_tx.jini.events.PingAckReceived`).
        :raises LocalProtocolError: the connection is not open.
        """
        self._check_open()
        cookie = self._next_cookie
        while cookie in self._pings:
            cookie = (cookie + 1) & 0xFFFF
        self._next_cookie = (cookie + 1) & 0xFFFF
        self._pings.add(cookie)
        self._outbox.append(C.Ping(cookie).encode())
        self._deadlines.set(("ping", cookie), now + self.config.ping_timeout / 1000)
        return cookie

    def shutdown(self, detail: str = "") -> list[Event]:
        """Server: end the connection gracefully (*Shutdown*, §Shutdown Message). The client
        retries the sessions we had not finished elsewhere, so call it only when none of them
        was processed with side effects (e.g. when no session is established).

        :returns: :class:`~rsocket_tx.jini.events.SessionAborted` for sessions in progress and
            :class:`~rsocket_tx.jini.events.ConnectionTerminated` (``by_peer`` False).
        :raises LocalProtocolError: a client, or the connection is not open.
        """
        if self._client:
            raise LocalProtocolError("Shutdown is sent by the server only")
        self._check_open()
        if not self._header_sent:
            raise LocalProtocolError("Shutdown before the connection header was sent")
        self._outbox.append(C.Shutdown(detail.encode()).encode())
        return self._terminate(f"shutdown: {detail}" if detail else "shutdown", by_peer=False)

    def send_error(self, detail: str) -> list[Event]:
        """Report a protocol violation to the peer (*Error*) and end the connection.

        :returns: as :meth:`connection_lost`, with ``by_peer`` False.
        """
        if self.state is ConnectionState.CLOSED:
            return []
        return self._violation(detail)

    # ---------------------------------------------------------------------------------------
    # internals: helpers

    @property
    def _peer_name(self) -> str:
        return "server" if self._client else "client"

    def _check_open(self) -> None:
        if self.state is not ConnectionState.OPEN:
            if self.state is ConnectionState.HANDSHAKE:
                raise LocalProtocolError("the connection handshake is not complete")
            raise LocalProtocolError(
                f"the connection is terminated ({self.terminated_reason})")

    def _get(self, session_id: int) -> Session:
        s = self._sessions.get(session_id)
        if s is None:
            raise LocalProtocolError(f"no session {session_id} on this connection")
        return s

    def _outbound_credit(self) -> Credit:
        ration = self._peer_ration
        return Credit(CreditUnit.BYTES, ration or 0, C.MAX_RATION, unlimited=ration is None)

    def _inbound_credit(self) -> Credit:
        ration = self._ration
        return Credit(CreditUnit.BYTES, ration or 0, C.MAX_RATION, unlimited=ration is None)

    def _send_header(self) -> None:
        kind = C.ClientConnectionHeader if self._client else C.ServerConnectionHeader
        self._outbox.append(kind.for_ration(self._ration).encode())
        self._header_sent = True

    def _queue_increment(self, session_id: int, n: int) -> None:
        for shift, increment in C.split_increment(n):
            self._outbox.append(C.IncrementRation(session_id, increment, shift).encode())

    def _top_up(self, s: Session) -> None:
        initial = self._ration
        if (initial is None or s.recv is not ESTABLISHED or s.send is TERMINATED
                or s.send is IDLE or self.state is not ConnectionState.OPEN):
            return
        used = s.buffered + s.inbound.available
        if used <= initial // 2:
            increment = initial - used
            s.inbound.grant(increment)
            self._queue_increment(s.stream_id, increment)

    def _discard_buffered(self, s: Session) -> None:
        if s.buffered:
            self._budget.release(s.buffered)
            s.buffered = 0

    def _set_server_terminated(self, s: Session) -> None:
        if s.send is not TERMINATED:
            self._active -= 1
        s.set_send(TERMINATED)

    def _maybe_remove(self, s: Session) -> None:
        """Server: forget a session terminated with respect to both ends."""
        if s.send is TERMINATED and s.recv is TERMINATED:
            self._sessions.remove(s.stream_id)
            self._server_ids.release(s.stream_id)
            self._discard_buffered(s)

    def _maybe_release(self, s: Session, events: list[Event]) -> None:
        """Client: release an id once the session is terminated with respect to both ends (or
        implicitly, after our eof), unless an Acknowledgment is still owed."""
        if s.recv is not TERMINATED or s.send < FINISHED:
            return
        if s.send is FINISHED and s.ack_required_received and not s.ack_sent:
            return
        self._release(s, events)

    def _release(self, s: Session, events: list[Event]) -> None:
        self._sessions.remove(s.stream_id)
        self._client_ids.release(s.stream_id)
        self._discard_buffered(s)
        events.append(SessionReleased(s.stream_id))

    def _deliver(self, s: Session, data: bytes, eof: bool, ack_required: bool,
                 events: list[Event]) -> bool:
        """Hand received data to the application, within the buffer limits.

        :returns: False when a limit was passed and the session was aborted instead.
        """
        n = len(data)
        if n:
            if s.buffered + n > self.config.max_session_buffer:
                why = (f"session {s.stream_id} would buffer {s.buffered + n} bytes, more than "
                       f"max_session_buffer ({self.config.max_session_buffer} bytes)")
                self._abort_for_limit(s, why, events)
                return False
            try:
                self._budget.reserve(n)
            except ReassemblyLimitExceeded:
                why = (f"the connection would buffer more than max_connection_buffer "
                       f"({self.config.max_connection_buffer} bytes)")
                self._abort_for_limit(s, why, events)
                return False
            s.buffered += n
        if n or eof:
            events.append(DataReceived(s.stream_id, data, eof, ack_required))
        return True

    def _abort_for_limit(self, s: Session, why: str, events: list[Event]) -> None:
        self._outbox.append(C.Abort(s.stream_id, not self._client, why.encode()).encode())
        if self._client:
            s.set_send(TERMINATED)
            self._discard_buffered(s)
            self._maybe_release(s, events)
        else:
            self._set_server_terminated(s)
            self._discard_buffered(s)
            self._maybe_remove(s)
        events.append(SessionAborted(s.stream_id, partial=self._client, detail=why,
                                     by_peer=False))

    def _violation(self, reason: str) -> list[Event]:
        if not self._client and not self._header_sent:
            # §ClientConnectionHeader: the server answers an invalid header with its own
            # header followed by Error
            self._send_header()
        self._outbox.append(C.Error(reason.encode()[:C.MAX_LENGTH]).encode())
        return self._terminate(reason, by_peer=False, error_sent=True)

    def _terminate(self, reason: str, by_peer: bool, error_sent: bool = False,
                   partial: bool = True) -> list[Event]:
        self.state = ConnectionState.CLOSED
        self.is_open = False
        self.terminated_reason = reason
        events: list[Event] = []
        for s in self._sessions.clear():
            if self._client:
                if s.recv <= ESTABLISHED and s.send is not TERMINATED:
                    events.append(SessionAborted(s.stream_id, partial and s.send is not IDLE,
                                                 reason, by_peer=False))
            else:
                if s.send <= ESTABLISHED or (s.recv is ESTABLISHED and s.send is not TERMINATED):
                    events.append(SessionAborted(s.stream_id, False, reason, by_peer=False))
                if s.ack_required_sent and not s.ack_received:
                    events.append(AcknowledgmentReceived(s.stream_id, positive=False))
        self._budget.held = 0
        self._pings.clear()
        events.append(ConnectionTerminated(reason, by_peer, error_sent))
        return events

    # ---------------------------------------------------------------------------------------
    # internals: received messages

    def _on_header(self, header: C.ConnectionHeader, events: list[Event]) -> None:
        self._peer_ration = header.ration
        self._deadlines.cancel(_HANDSHAKE)
        if not self._client:
            self._send_header()
        self.state = ConnectionState.OPEN
        events.append(ConnectionEstablished(header.ration))

    def _sender_session(self, message: C.SessionMessage, what: str) -> Session:
        """The session of a message that needs it established with respect to the sender."""
        s = self._sessions.get(message.session_id)
        if s is None or s.recv is IDLE or s.recv is TERMINATED:
            raise JiniProtocolError(
                f"{what} for session {message.session_id}, which is not established with "
                f"respect to the {self._peer_name}")
        return s

    def _on_data(self, m: C.Data, events: list[Event]) -> None:
        sid = m.session_id
        if self._client:
            if m.open:
                raise JiniProtocolError(f"Data with the open flag from the server (session "
                                        f"{sid}): only the client establishes sessions")
            s = self._sessions.get(sid)
        else:
            if m.close or m.ack_required:
                raise JiniProtocolError(f"Data with the close or ackRequired flag from the "
                                        f"client (session {sid})")
            s = self._sessions.get(sid)
            if m.open:
                if s is not None:
                    if s.send is TERMINATED and s.recv is FINISHED:
                        # the previous session is implicitly terminated (§Session Termination)
                        if s.ack_required_sent and not s.ack_received:
                            events.append(AcknowledgmentReceived(sid, positive=False))
                        s.set_recv(TERMINATED)
                        self._maybe_remove(s)
                    else:
                        raise JiniProtocolError(
                            f"Data with the open flag for session {sid}, which is still "
                            f"established")
                self._server_ids.claim(sid)
                s = Session(sid, self._outbound_credit(), self._inbound_credit(), ESTABLISHED)
                self._sessions.add(s)
                if self._active >= self.config.max_sessions:
                    # refused before any processing: the client may retry it
                    s.set_send(TERMINATED)
                    if m.eof:
                        s.set_recv(FINISHED)
                    self._outbox.append(C.Abort(
                        sid, False,
                        f"more than {self.config.max_sessions} sessions".encode()).encode())
                    return
                self._active += 1
                events.append(SessionOpened(sid))
        if s is None or s.recv is not ESTABLISHED:
            raise JiniProtocolError(
                f"Data for session {sid}, which is not established (or already finished) "
                f"with respect to the {self._peer_name}")
        n = len(m.data)
        if s.send is not TERMINATED:
            try:
                s.inbound.consume(n)
            except CreditExceeded:
                raise JiniProtocolError(
                    f"Data of {n} bytes on session {sid} exceeds its inbound ration of "
                    f"{s.inbound.available} bytes") from None
        if m.eof:
            s.set_recv(FINISHED)
        if self._client and m.ack_required:
            s.ack_required_received = True
        if s.send is not TERMINATED:
            if not self._deliver(s, m.data, m.eof, m.ack_required, events):
                return
        if self._client:
            if m.close:
                self._on_close_session(s, events)
        elif m.eof:
            if s.send is FINISHED:
                # both ends finished: close it (§Close Message: "in a timely fashion")
                self._outbox.append(C.Close(sid).encode())
                self._set_server_terminated(s)
                self._discard_buffered(s)
            self._maybe_remove(s)

    def _on_close(self, m: C.Close, events: list[Event]) -> None:
        if not self._client:
            raise JiniProtocolError(f"Close from the client (session {m.session_id})")
        s = self._sessions.get(m.session_id)
        if s is None or s.recv is not FINISHED:
            raise JiniProtocolError(
                f"Close for session {m.session_id}, which is not finished (but established) "
                f"with respect to the server")
        self._on_close_session(s, events)

    def _on_close_session(self, s: Session, events: list[Event]) -> None:
        s.set_recv(TERMINATED)
        if s.send is TERMINATED:
            self._maybe_release(s, events)
            return
        request_complete = s.send is FINISHED
        if not request_complete:
            # §Close Message: answer with Abort; the response received is complete
            self._outbox.append(C.Abort(s.stream_id).encode())
            s.set_send(TERMINATED)
        events.append(SessionClosed(s.stream_id, request_complete))
        self._maybe_release(s, events)

    def _on_abort(self, m: C.Abort, events: list[Event]) -> None:
        sid = m.session_id
        if m.partial and not self._client:
            raise JiniProtocolError(f"Abort with the partial flag from the client (session "
                                    f"{sid})")
        s = self._sender_session(m, "Abort")
        s.set_recv(TERMINATED)
        detail = _text(m.detail)
        if self._client:
            live = s.send is not TERMINATED
            if s.send is ESTABLISHED:
                self._outbox.append(C.Abort(sid).encode())
                s.set_send(TERMINATED)
            if live:
                events.append(SessionAborted(sid, m.partial, detail, by_peer=True))
            if s.send is FINISHED and s.ack_required_received and not s.ack_sent:
                s.set_send(TERMINATED)  # no Acknowledgment can matter any more
            self._maybe_release(s, events)
        else:
            if s.ack_required_sent and not s.ack_received:
                events.append(AcknowledgmentReceived(sid, positive=False))
            if s.send is not TERMINATED:
                self._outbox.append(C.Abort(sid, True).encode())
                self._set_server_terminated(s)
                events.append(SessionAborted(sid, False, detail, by_peer=True))
            self._discard_buffered(s)
            self._maybe_remove(s)

    def _on_increment_ration(self, m: C.IncrementRation, events: list[Event]) -> None:
        s = self._sender_session(m, "IncrementRation")
        amount = m.amount
        if s.send >= FINISHED or s.outbound.unlimited or amount == 0:
            return  # §IncrementRation: ignored once we are finished
        try:
            s.outbound.grant(amount)
        except CreditOverflow:
            raise JiniProtocolError(
                f"IncrementRation of {amount} bytes on session {m.session_id} overflows the "
                f"outbound ration of {s.outbound.available} bytes past 0x7FFFFFFF") from None
        events.append(RationIncreased(m.session_id, amount, s.outbound.available))

    def _on_acknowledgment(self, m: C.Acknowledgment, events: list[Event]) -> None:
        if self._client:
            raise JiniProtocolError(f"Acknowledgment from the server (session "
                                    f"{m.session_id})")
        s = self._sender_session(m, "Acknowledgment")
        if not s.ack_required_sent:
            raise JiniProtocolError(f"Acknowledgment for session {m.session_id}, which did "
                                    f"not ask for one")
        if s.ack_received:
            raise JiniProtocolError(f"second Acknowledgment for session {m.session_id}")
        s.ack_received = True
        events.append(AcknowledgmentReceived(m.session_id, positive=True))

    def _on_no_operation(self, m: C.NoOperation, events: list[Event]) -> None:
        pass

    def _on_ping(self, m: C.Ping, events: list[Event]) -> None:
        self._outbox.append(C.PingAck(m.cookie).encode())

    def _on_ping_ack(self, m: C.PingAck, events: list[Event]) -> None:
        if m.cookie not in self._pings:
            raise JiniProtocolError(f"PingAck with cookie {m.cookie}, which answers no Ping")
        self._pings.discard(m.cookie)
        self._deadlines.cancel(("ping", m.cookie))
        events.append(PingAckReceived(m.cookie))

    def _on_shutdown(self, m: C.Shutdown, events: list[Event]) -> None:
        if not self._client:
            raise JiniProtocolError("Shutdown from the client")
        detail = _text(m.detail)
        events.append(ShutdownReceived(detail))
        reason = f"the server shut the connection down: {detail}" if detail else \
            "the server shut the connection down"
        events += self._terminate(reason, by_peer=True, partial=False)

    def _on_error(self, m: C.Error, events: list[Event]) -> None:
        detail = _text(m.detail)
        events += self._terminate(f"the {self._peer_name} reported a protocol error: {detail}",
                                  by_peer=True)

    _dispatch: ClassVar[dict[type[C.Message], Callable[..., None]]] = {
        C.Data: _on_data,
        C.IncrementRation: _on_increment_ration,
        C.Abort: _on_abort,
        C.Close: _on_close,
        C.Acknowledgment: _on_acknowledgment,
        C.NoOperation: _on_no_operation,
        C.Ping: _on_ping,
        C.PingAck: _on_ping_ack,
        C.Shutdown: _on_shutdown,
        C.Error: _on_error,
    }
