"""Drive one sans-IO :class:`~rsocket_tx.yamux.connection.YamuxConnection` with a fuzz input.

The variant byte picks the configuration (bits below); feed records go to ``receive_data``;
call records use the API (open, send with or without FIN, close, reset, accept, consume, ping,
Go Away, close the session, ticks, the transport's loss).

Expected, and so not a crash: :class:`~rsocket_tx.yamux.errors.LocalProtocolError` from an
API call the current state forbids, with nothing queued. Everything else is a crash, and so is
a broken invariant:

* ``receive_data`` never raises; a violation by the peer ends in
  :class:`~rsocket_tx.yamux.events.ConnectionClosed`, reported once, as the last event of its
  list, and the last frame queued is then Go Away 1; a closed connection returns no events;
* everything it queues decodes as yamux frames, Data never longer than ``send_frame_size``,
  and never more Data on a stream than the window the peer gave it (256 KiB plus the deltas
  of the peer's Window Updates this input fed);
* a stream counts toward ``max_streams`` and the backlog as the config says.
"""

from __future__ import annotations

from rsocket_tx.yamux.codec import INITIAL_WINDOW, Flags, FrameDecoder, FrameType, GoAwayCode
from rsocket_tx.yamux.config import YamuxConfig
from rsocket_tx.yamux.connection import Role, YamuxConnection
from rsocket_tx.yamux.errors import LocalProtocolError, ProtocolError
from rsocket_tx.yamux.events import ConnectionClosed, Event, StreamOpened

from ..harness import FEED, Records, check

__all__ = ["CLIENT", "SMALL", "run"]

#: variant bits
CLIENT = 0x01  # the connection is the client (else the server)
SMALL = 0x02  # small limits: streams, backlog, frames, windows


def _config(variant: int) -> YamuxConfig:
    if not variant & SMALL:
        return YamuxConfig(keepalive_interval=30.0, stream_close_timeout=60.0)
    return YamuxConfig(receive_window=INITIAL_WINDOW, max_frame_length=64,
                       max_window=INITIAL_WINDOW + 1000, max_streams=2, accept_backlog=1,
                       send_frame_size=4096, keepalive_interval=5.0, ping_timeout=2.0,
                       stream_close_timeout=3.0)


class _Driver:
    __slots__ = ("conn", "config", "now", "closed", "peer_streams", "ours", "reader",
                 "peer_reader", "sent", "granted")

    def __init__(self, variant: int) -> None:
        self.config = _config(variant)
        role = Role.CLIENT if variant & CLIENT else Role.SERVER
        self.conn = YamuxConnection(role, self.config, 0.0)
        self.now = 0.0
        self.closed = False
        self.peer_streams: list[int] = []
        self.ours: list[int] = []
        self.reader = FrameDecoder(2**32)  # what we send, as the peer reads it
        self.peer_reader = FrameDecoder(2**32)  # what the peer sent, to count its grants
        self.sent: dict[int, int] = {}  # Data bytes we sent per stream
        self.granted: dict[int, int] = {}  # window deltas the peer gave per stream

    def events(self, events: list[Event]) -> None:
        check(isinstance(events, list), "events is not a list: %r", events)
        for i, e in enumerate(events):
            check(isinstance(e, Event), "not an Event: %r", e)
            if isinstance(e, ConnectionClosed):
                check(not self.closed, "a second ConnectionClosed")
                check(i == len(events) - 1, "ConnectionClosed is not the last event: %r",
                      events)
                self.closed = True
            elif isinstance(e, StreamOpened):
                self.peer_streams.append(e.stream_id)
        conn = self.conn
        check(conn.is_open != self.closed, "is_open %s, ConnectionClosed reported: %s",
              conn.is_open, self.closed)
        check(conn.streams.remote <= self.config.max_streams, "%d remote streams open, the "
              "limit is %d", conn.streams.remote, self.config.max_streams)
        conn.next_deadline()

    def drain(self, error_expected: bool = False) -> None:
        chunks = self.conn.chunks_to_send()
        if not chunks:
            return
        try:
            frames = self.reader.feed(b"".join(chunks))
        except ProtocolError as exc:
            check(False, "we queued bytes the peer cannot decode: %s", exc)
            return
        check(self.reader.buffered == 0, "chunks_to_send ended inside a frame")
        for frame in frames:
            if frame.type is FrameType.DATA:
                check(frame.length <= self.config.send_frame_size,
                      "a Data of %d bytes: send_frame_size is %d", frame.length,
                      self.config.send_frame_size)
                sid = frame.stream_id
                self.sent[sid] = self.sent.get(sid, 0) + frame.length
                check(self.sent[sid] <= INITIAL_WINDOW + self.granted.get(sid, 0),
                      "stream %d: %d bytes sent past the peer's window", sid, self.sent[sid])
        if error_expected:
            check(frames and frames[-1].type is FrameType.GO_AWAY
                  and frames[-1].length == GoAwayCode.PROTOCOL_ERROR,
                  "a protocol error of the peer, yet the last frame is %r", frames[-1:])

    def feed(self, chunk: bytes) -> None:
        try:
            for frame in self.peer_reader.feed(chunk):
                sid = frame.stream_id
                if frame.flags & Flags.SYN:  # (a new stream: a new window, even on an old id)
                    self.sent[sid] = self.granted[sid] = 0
                if frame.type is FrameType.WINDOW_UPDATE:
                    self.granted[sid] = self.granted.get(sid, 0) + frame.length
        except ProtocolError:
            self.peer_reader = FrameDecoder(0)  # (the connection refuses it too)
        was_closed = self.closed
        events = self.conn.receive_data(chunk, self.now)
        if was_closed:
            check(events == [], "a closed connection returned %r", events)
        self.events(events)
        error = events[-1].error if events and isinstance(events[-1], ConnectionClosed) \
            else None
        self.drain(error is not None and error.code == GoAwayCode.PROTOCOL_ERROR
                   and not error.by_peer)

    def pick(self, ids: list[int], arg: int) -> int:
        """An id: one we know when ``arg``'s top bit is set, else ``arg & 0x7F``."""
        if arg & 0x80 and ids:
            return ids[arg % len(ids)]
        return arg & 0x7F

    def call(self, op: int, arg: int) -> None:
        events: list[Event] = []
        try:
            events = _CALLS[op % len(_CALLS)](self, self.conn, arg) or []
        except LocalProtocolError:
            # documented: the API used in a state that forbids it; nothing is sent
            check(self.conn.chunks_to_send() == [], "LocalProtocolError, yet bytes were queued")
        self.events(events)
        self.drain()


def _open(d: _Driver, conn: YamuxConnection, arg: int) -> None:
    d.ours.append(conn.open_stream())


def _send(d: _Driver, conn: YamuxConnection, arg: int) -> None:
    sid = d.pick(d.ours + d.peer_streams, arg)
    taken = conn.send_data(sid, b"d" * ((arg & 0x3F) ** 3), d.now, end_stream=bool(arg & 0x40))
    check(0 <= taken <= (arg & 0x3F) ** 3, "send_data took %d bytes", taken)


def _close_stream(d: _Driver, conn: YamuxConnection, arg: int) -> None:
    conn.close_stream(d.pick(d.ours + d.peer_streams, arg), d.now)


def _reset(d: _Driver, conn: YamuxConnection, arg: int) -> None:
    conn.reset_stream(d.pick(d.ours + d.peer_streams, arg))


def _accept(d: _Driver, conn: YamuxConnection, arg: int) -> None:
    conn.accept_stream(d.pick(d.peer_streams, arg))


def _consume(d: _Driver, conn: YamuxConnection, arg: int) -> None:
    conn.consume(d.pick(d.ours + d.peer_streams, arg), (arg & 0x7F) * 4096)


def _ping(d: _Driver, conn: YamuxConnection, arg: int) -> None:
    conn.ping(d.now)


def _go_away(d: _Driver, conn: YamuxConnection, arg: int) -> None:
    conn.go_away()


def _close(d: _Driver, conn: YamuxConnection, arg: int) -> list[Event]:
    return conn.close(arg % 3, "fuzz")


def _tick(d: _Driver, conn: YamuxConnection, arg: int) -> list[Event]:
    d.now += arg / 4.0
    return conn.tick(d.now)


def _tick_deadline(d: _Driver, conn: YamuxConnection, arg: int) -> list[Event]:
    deadline = conn.next_deadline()
    if deadline is not None and deadline > d.now:
        d.now = deadline
    return conn.tick(d.now)


def _connection_lost(d: _Driver, conn: YamuxConnection, arg: int) -> list[Event]:
    return conn.connection_lost("fuzz")


_CALLS = [_open, _send, _close_stream, _reset, _accept, _consume, _ping, _go_away, _close,
          _tick, _tick_deadline, _connection_lost]


def run(data: bytes, role_bit: int) -> None:
    """Run one input against a new connection; ``role_bit`` is :data:`CLIENT` or 0 (the
    variant byte's own role bit is replaced)."""
    records = Records(data)
    d = _Driver((records.variant & ~CLIENT) | role_bit)
    for op, value in records:
        if op == FEED:
            d.feed(value)  # type: ignore[arg-type]
        else:
            d.call(op, value)  # type: ignore[arg-type]
