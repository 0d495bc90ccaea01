"""Drive one sans-IO :class:`~rsocket_tx.jini.connection.JiniMuxConnection` with a fuzz input.

The variant byte picks the configuration (bits below); feed records go to ``receive_data``;
call records use the API (sessions, Data, rations, Abort/Close/Acknowledgment, Ping,
Shutdown, ticks).

Expected, and so not a crash: :class:`~rsocket_tx.jini.errors.LocalProtocolError` (and
:class:`~rsocket_tx.jini.errors.NoFreeSessionError`) from an API call the current state
forbids, with nothing queued. Everything else is a crash, and so is a broken invariant:

* ``receive_data`` never raises; a violation by the peer ends in
  :class:`~rsocket_tx.jini.events.ConnectionTerminated`, reported once, as the last event of
  its list; a terminated connection returns no events;
* everything it queues decodes as the connection header of its role then messages of the
  table, and the server never sends Data with ``open``, the client never Data with ``close``
  or ``ackRequired``, Close, Shutdown or Abort with ``partial``;
* at most 128 sessions are known.
"""

from __future__ import annotations

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.config import JiniMuxConfig
from rsocket_tx.jini.connection import JiniMuxConnection, Role
from rsocket_tx.jini.errors import JiniProtocolError, LocalProtocolError
from rsocket_tx.jini.events import ConnectionTerminated, Event, SessionOpened

from ..harness import FEED, Records, check

__all__ = ["CLIENT", "PRESET", "SMALL_RATION", "UNLIMITED", "SMALL", "run"]

#: variant bits
CLIENT = 0x01  # the connection is the client (else the server)
PRESET = 0x02  # the peer's valid connection header arrives before the input
SMALL_RATION = 0x04  # we announce a ration of 256 bytes (else River's 32,768)
UNLIMITED = 0x08  # we announce an unlimited ration (wins over SMALL_RATION)
SMALL = 0x10  # small limits: fragment size, sessions, buffers, timeouts


def _config(variant: int) -> JiniMuxConfig:
    ration = 0 if variant & UNLIMITED else 256 if variant & SMALL_RATION else 32_768
    if not variant & SMALL:
        return JiniMuxConfig(initial_ration=ration)
    buffer = max(ration, 512)
    return JiniMuxConfig(initial_ration=ration, fragment_size=16, max_sessions=2,
                         max_session_buffer=buffer, max_connection_buffer=buffer * 2,
                         handshake_timeout=1000, ping_timeout=1000)


class _Driver:
    __slots__ = ("conn", "client", "now", "closed", "ids", "reader")

    def __init__(self, variant: int) -> None:
        self.client = bool(variant & CLIENT)
        self.conn = JiniMuxConnection(Role.CLIENT if self.client else Role.SERVER,
                                      _config(variant))
        self.now = 0.0
        self.closed = False
        self.ids: list[int] = []
        # splits what we send: our own connection header, then messages
        self.reader = C.MessageDecoder(
            C.ClientConnectionHeader if self.client else C.ServerConnectionHeader)

    def events(self, events: list[Event]) -> None:
        check(isinstance(events, list), "events is not a list: %r", events)
        for i, e in enumerate(events):
            check(isinstance(e, Event), "not an Event: %r", e)
            if isinstance(e, ConnectionTerminated):
                check(not self.closed, "a second ConnectionTerminated")
                check(i == len(events) - 1,
                      "ConnectionTerminated is not the last event: %r", events)
                self.closed = True
            elif isinstance(e, SessionOpened):
                self.ids.append(e.session_id)
        conn = self.conn
        check(conn.is_open != self.closed, "is_open %s, ConnectionTerminated reported: %s",
              conn.is_open, self.closed)
        check(conn.session_count <= C.MAX_SESSIONS, "%d sessions", conn.session_count)
        conn.next_deadline()

    def drain(self) -> None:
        chunks = self.conn.chunks_to_send()
        if not chunks:
            return
        try:
            messages = self.reader.feed(b"".join(chunks))
        except JiniProtocolError as exc:
            check(False, "we queued a malformed message: %s", exc)
        for m in messages:
            if isinstance(m, C.Data):
                if self.client:
                    check(not (m.close or m.ack_required), "the client sent %r", m)
                else:
                    check(not m.open, "the server sent %r", m)
            elif self.client:
                check(not isinstance(m, (C.Close, C.Shutdown)), "the client sent %r", m)
                check(not (isinstance(m, C.Abort) and m.partial), "the client sent %r", m)

    def feed(self, chunk: bytes) -> None:
        events = self.conn.receive_data(chunk, self.now)
        if self.closed:
            check(events == [], "a terminated connection returned %r", events)
        self.events(events)

    def pick(self, arg: int) -> int:
        """A session id: one in use when ``arg``'s top bit is set, else ``arg`` (0..127)."""
        ids = self.ids
        if arg & 0x80 and ids:
            return ids[arg % len(ids)]
        return arg & 0x7F

    def call(self, op: int, arg: int) -> None:
        events: list[Event] = []
        try:
            events = _CALLS[op % len(_CALLS)](self, self.conn, arg)
        except LocalProtocolError:
            # documented: the API used in a state that forbids it; nothing is sent
            check(self.conn.bytes_to_send == 0, "LocalProtocolError, yet %d bytes were queued",
                  self.conn.bytes_to_send)
        self.events(events or [])


def _open_session(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    d.ids.append(conn.open_session())
    return []


def _send_data(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    conn.send_data(d.pick(arg), b"d" * ((arg & 0x3C) * (arg & 0x3C)), eof=bool(arg & 1),
                   ack_required=bool(arg & 2))
    return []


def _acknowledge_data(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    conn.acknowledge_received_data(d.pick(arg), (arg & 0x7F) * 64)
    return []


def _increment_ration(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    conn.increment_ration(d.pick(arg), 1 + (arg & 0x7F) ** 4)
    return []


def _abort(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    conn.abort(d.pick(arg), partial=None if arg & 1 else bool(arg & 2), detail="fuzz")
    return []


def _close(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    conn.close(d.pick(arg))
    return []


def _acknowledge(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    conn.acknowledge(d.pick(arg))
    return []


def _ping(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    conn.ping(d.now)
    return []


def _shutdown(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    return conn.shutdown("fuzz" * (arg & 3))


def _send_error(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    return conn.send_error("fuzz")


def _tick(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    d.now += arg / 8.0  # up to ~32 s: past the handshake and ping timeouts
    return conn.tick(d.now)


def _tick_deadline(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    deadline = conn.next_deadline()
    if deadline is not None and deadline > d.now:
        d.now = deadline
    return conn.tick(d.now)


def _connection_lost(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    return conn.connection_lost()


def _initiate(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    conn.initiate_connection(d.now)
    return []


def _outbound_ration(d: _Driver, conn: JiniMuxConnection, arg: int) -> list[Event]:
    ration = conn.outbound_ration(d.pick(arg))
    check(ration is None or 0 <= ration <= C.MAX_RATION, "outbound ration %r", ration)
    return []


_CALLS = [
    _open_session, _send_data, _acknowledge_data, _increment_ration, _abort, _close,
    _acknowledge, _ping, _shutdown, _send_error, _tick, _tick_deadline, _connection_lost,
    _initiate, _outbound_ration,
]


def run(data: bytes, role_bit: int) -> None:
    """Run one input against a new connection; ``role_bit`` is :data:`CLIENT` or 0 (the
    variant byte's own role bit is replaced)."""
    records = Records(data)
    variant = (records.variant & ~CLIENT) | role_bit
    d = _Driver(variant)
    if variant & PRESET:
        kind = C.ServerConnectionHeader if d.client else C.ClientConnectionHeader
        d.feed(kind.for_ration(256 if variant & 0x40 else None).encode())
    d.drain()
    for op, value in records:
        if op == FEED:
            d.feed(value)  # type: ignore[arg-type]
        else:
            d.call(op, value)  # type: ignore[arg-type]
        d.drain()
