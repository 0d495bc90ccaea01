"""A yamux session, sans-IO (HashiCorp's ``spec.md``): the rules of "Message Flow" over the
frames of :mod:`rsocket_tx.yamux.codec`, on the mux layer (:mod:`rsocket_tx.mux`: the
:class:`~rsocket_tx.mux.StreamTable` with per-direction half-close state,
:class:`~rsocket_tx.mux.ParityIds`, byte :class:`~rsocket_tx.mux.Credit` for each send window,
the :class:`~rsocket_tx.mux.Outbox`, :class:`~rsocket_tx.mux.Deadlines`).

The model is python-hyper's h2: :meth:`YamuxConnection.receive_data` takes bytes and returns
events (:mod:`rsocket_tx.yamux.events`); the API methods queue frames; the caller drains
:meth:`YamuxConnection.chunks_to_send`. Time comes in as an argument (seconds); nothing here
imports Twisted.

The rules, as this connection applies them:

* **Ids** (spec.md "StreamID Field"): the client opens odd ids 1, 3, 5, ..., the server even
  ids 2, 4, ...; 0 is the session's. A SYN on an id of our parity, or on an id that is open, is
  a protocol error; so is any frame on an id of the peer's parity above every id it opened,
  or of ours that we never used. Frames on a stream that has ended (a late Window Update, data
  after our RST) are dropped, as hashicorp/yamux drops them.
* **Opening** ("Opening a stream"): :meth:`~YamuxConnection.open_stream` sends a Window Update
  with SYN at once (its delta announces a ``receive_window`` above 256 KiB); data may follow
  before the ACK. A peer's SYN is an :class:`~rsocket_tx.yamux.events.StreamOpened`: the
  application accepts (:meth:`~YamuxConnection.accept_stream`: ACK) or refuses
  (:meth:`~YamuxConnection.reset_stream`: RST). Past ``max_streams`` open or
  ``accept_backlog`` unaccepted, and after a Go Away of ours, the SYN is refused with RST.
* **Flow control** ("Flow Control"): each direction of each stream starts with a 256 KiB
  window. Data past our receive window is a protocol error; our sends stop at the peer's
  window (:meth:`~YamuxConnection.send_data` takes what fits). The application says what it
  consumed (:meth:`~YamuxConnection.consume`); once half the window is consumed a Window
  Update gives it back.
* **Closing** ("Closing a stream"): FIN half-closes one direction
  (:meth:`~YamuxConnection.close_stream`); the stream is gone once both have; a second FIN or
  data after the peer's FIN is a protocol error. RST ends it at once. After our FIN the peer's
  must come within ``stream_close_timeout`` seconds, else we reset the stream.
* **Ping**: a SYN Ping is answered with an ACK Ping of the same opaque value;
  :meth:`~YamuxConnection.ping` sends ours; the keepalive pings every ``keepalive_interval``
  seconds and ends the session when a Ping goes unanswered for ``ping_timeout`` seconds.
* **Go Away** ("Session termination"): code 0 from the peer means it accepts no new stream
  (:class:`~rsocket_tx.yamux.events.GoAwayReceived`; :meth:`~YamuxConnection.open_stream`
  then raises); codes 1 and 2 end the session. A protocol error of the peer is answered with
  Go Away 1 and the session ends (:class:`~rsocket_tx.yamux.events.ConnectionClosed`).
"""

from __future__ import annotations

import enum

from ..mux import (
    Credit,
    CreditOverflow,
    CreditUnit,
    Deadlines,
    IdsExhausted,
    MuxStream,
    Outbox,
    ParityIds,
    StreamTable,
)
from .codec import (
    INITIAL_WINDOW,
    MAX_U32,
    Flags,
    Frame,
    FrameDecoder,
    FrameType,
    GoAwayCode,
    encode_header,
)
from .config import YamuxConfig
from .errors import ConnectionClosedError, LocalProtocolError, ProtocolError
from .events import (
    ConnectionClosed,
    DataReceived,
    Event,
    GoAwayReceived,
    PingTimedOut,
    PongReceived,
    StreamAccepted,
    StreamEnded,
    StreamOpened,
    StreamReset,
    WindowUpdated,
)

__all__ = ["Role", "YamuxConnection", "YamuxStream"]



class Role(enum.Enum):
    """Which side of the session this is (spec.md "Message Flow": the client opens odd
    stream ids, the server even)."""

    CLIENT = "client"
    SERVER = "server"


class YamuxStream(MuxStream):
    """One stream's state (:class:`~rsocket_tx.mux.MuxStream` plus yamux's).

    :ivar send_window: our send window (:class:`~rsocket_tx.mux.Credit` in bytes): what the
        peer still lets us send.
    :ivar recv_window: bytes the peer may still send before we give credit back.
    :ivar consumed: bytes the application consumed that are not yet given back.
    :ivar acknowledged: the peer ACKed our SYN (streams we opened), or we accepted theirs.
    """

    __slots__ = ("send_window", "recv_window", "consumed", "acknowledged")

    def __init__(self, stream_id: int, max_window: int) -> None:
        super().__init__(stream_id)
        self.send_window = Credit(CreditUnit.BYTES, INITIAL_WINDOW, max_window)
        self.recv_window = INITIAL_WINDOW
        self.consumed = 0
        self.acknowledged = False


class YamuxConnection:
    """One yamux session, either side (see the module docstring).

    :param role: :attr:`Role.CLIENT` (odd stream ids) or :attr:`Role.SERVER` (even).
    :param config: the settings (:class:`~rsocket_tx.yamux.config.YamuxConfig`).
    :param now: the time, seconds (the keepalive's first Ping is due ``keepalive_interval``
        later).

    :ivar is_open: the session has not ended.
    :ivar streams: the open streams (:class:`~rsocket_tx.mux.StreamTable` of
        :class:`YamuxStream`).
    :ivar go_away_sent: we sent Go Away (we accept no new stream).
    :ivar go_away_received: the peer's Go Away code, or None.
    :ivar close_error: why the session ended
        (:class:`~rsocket_tx.yamux.errors.ConnectionClosedError`), None while open.
    :ivar window_updates_sent: Window Updates we sent that gave a stream credit back.
    :ivar window_updates_received: Window Updates of the peer that gave us credit.
    :ivar pings_answered: the peer's Pings we answered.
    """

    def __init__(self, role: Role, config: YamuxConfig | None = None, now: float = 0.0) -> None:
        self.role = role
        self.config = config = config if config is not None else YamuxConfig()
        self.is_open = True
        self.ids = ParityIds(1 if role is Role.CLIENT else 2, MAX_U32)
        self.streams: StreamTable[YamuxStream] = StreamTable(config.max_streams,
                                                             is_local=self.ids.is_local)
        self.go_away_sent = False
        self.go_away_received: int | None = None
        self.close_error: ConnectionClosedError | None = None
        self.window_updates_sent = 0
        self.window_updates_received = 0
        self.pings_answered = 0
        self.deadlines: Deadlines[tuple] = Deadlines()
        self._decoder = FrameDecoder(config.frame_length_limit, stream_data=True)
        self._outbox = Outbox()
        self._unaccepted: set[int] = set()
        self._highest_peer_id = 0
        self._next_opaque = 0
        self._pings: dict[int, bool] = {}  # opaque -> keepalive
        if config.keepalive_interval is not None:
            self.deadlines.set(("keepalive",), now + config.keepalive_interval)

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<YamuxConnection {self.role.value} {state} streams={len(self.streams)}>"

    # ------------------------------------------------------------------ input

    def receive_data(self, data: bytes, now: float) -> list[Event]:
        """Bytes from the transport, any split.

        :param data: the bytes.
        :param now: the time, seconds.
        :returns: the events they caused (a protocol error of the peer: Go Away 1 is queued
            and the last event is :class:`~rsocket_tx.yamux.events.ConnectionClosed`).
        """
        if not self.is_open:
            return []
        events: list[Event] = []
        decoder = self._decoder
        try:
            for frame in decoder.feed(data):
                self._receive_frame(frame, now, events)
                if not self.is_open:
                    return events
            if decoder.error is not None:  # (after the frames before it)
                raise decoder.error
        except ProtocolError as error:
            events += self.close(GoAwayCode.PROTOCOL_ERROR, str(error))
        return events

    def receive_frame(self, frame: bytes, now: float) -> list[Event]:
        """One message of a message transport (WebSocket): its bytes are part of the byte
        stream (yamux frames may straddle messages). :returns: the events."""
        return self.receive_data(frame, now)

    def _receive_frame(self, frame: Frame, now: float, events: list[Event]) -> None:
        kind = frame.type
        if kind is FrameType.PING:
            if frame.flags & Flags.SYN:
                self.pings_answered += 1
                self._queue(FrameType.PING, Flags.ACK, 0, frame.length)
            else:
                keepalive = self._pings.pop(frame.length, None)
                if keepalive is not None:  # (an answer to no Ping of ours is dropped)
                    self.deadlines.cancel(("ping", frame.length))
                    events.append(PongReceived(frame.length, keepalive))
            return
        if kind is FrameType.GO_AWAY:
            code = frame.length
            if code == GoAwayCode.NORMAL:
                self.go_away_received = code
                events.append(GoAwayReceived(code))
                return
            if code not in (GoAwayCode.PROTOCOL_ERROR, GoAwayCode.INTERNAL_ERROR):
                raise ProtocolError(f"GO_AWAY with unknown code {code}")
            words = "protocol error" if code == GoAwayCode.PROTOCOL_ERROR else "internal error"
            events += self._end(ConnectionClosedError(f"the peer sent Go Away ({words})",
                                                      by_peer=True, code=code))
            return
        sid = frame.stream_id
        flags = frame.flags
        stream = self.streams.get(sid)
        if flags & Flags.SYN:
            if flags & Flags.ACK:
                raise ProtocolError(f"{kind.name} with both SYN and ACK on stream {sid}")
            stream = self._peer_opened(sid, events)
            if stream is None:
                return  # refused (RST): what it carries is dropped
        elif stream is None:
            self._check_past(sid, kind)
            return  # a stream that ended: dropped
        elif flags & Flags.ACK:
            if stream.remote:
                raise ProtocolError(f"ACK on stream {sid}, which the peer opened")
            if not stream.acknowledged:
                stream.acknowledged = True
                events.append(StreamAccepted(sid))
        if kind is FrameType.WINDOW_UPDATE:
            if frame.length:
                try:
                    stream.send_window.grant(frame.length)
                except CreditOverflow as error:
                    raise ProtocolError(f"window update on stream {sid}: {error} (the "
                                        f"max_window)") from None
                self.window_updates_received += 1
                events.append(WindowUpdated(sid, stream.send_window.available))
        elif frame.length:
            if not stream.recv_open:
                raise ProtocolError(f"DATA on stream {sid} after its FIN")
            if frame.length > stream.recv_window:
                raise ProtocolError(f"DATA of {frame.length} bytes on stream {sid} exceeds "
                                    f"its receive window of {stream.recv_window} bytes")
            stream.recv_window -= frame.length
            events.append(DataReceived(sid, frame.data))
        if flags & Flags.RST:
            self._forget(stream)
            events.append(StreamReset(sid, True, "the peer reset the stream"))
        elif flags & Flags.FIN:
            if not stream.recv_open:
                raise ProtocolError(f"a second FIN on stream {sid}")
            closed = self.streams.close_recv(stream)
            if closed:
                self._forget(stream)
            events.append(StreamEnded(sid, closed))

    def _peer_opened(self, sid: int, events: list[Event]) -> YamuxStream | None:
        """A SYN on ``sid``: the new stream, or None when it is refused (RST queued)."""
        if self.ids.is_local(sid):
            raise ProtocolError(f"SYN on stream {sid}, an id of our side (spec.md: the "
                                f"client's are odd, the server's even)")
        if sid in self.streams:
            raise ProtocolError(f"SYN on stream {sid}, which is open already")
        self._highest_peer_id = max(self._highest_peer_id, sid)
        if self.go_away_sent or not self.streams.would_accept() \
                or len(self._unaccepted) >= self.config.accept_backlog:
            self._queue(FrameType.WINDOW_UPDATE, Flags.RST, sid, 0)
            return None
        stream = YamuxStream(sid, self.config.max_window)
        self.streams.add(stream, remote=True)
        self._unaccepted.add(sid)
        events.append(StreamOpened(sid))
        return stream

    def _check_past(self, sid: int, kind: FrameType) -> None:
        """A frame without SYN on ``sid``, which is not open: fine for a stream that ended,
        a protocol error for one never opened."""
        if self.ids.is_local(sid):
            opened = sid < self.ids.next_id
        else:
            opened = sid <= self._highest_peer_id
        if not opened:
            raise ProtocolError(f"{kind.name} on stream {sid}, which was never opened")

    # ------------------------------------------------------------------ output

    def chunks_to_send(self) -> list[bytes]:
        """Take what is queued for the transport (possibly nothing)."""
        return self._outbox.drain()

    def _queue(self, kind: FrameType, flags: int, sid: int, length: int) -> None:
        self._outbox.append(encode_header(kind, flags, sid, length))

    def _stream(self, stream_id: int) -> YamuxStream:
        if not self.is_open:
            raise LocalProtocolError(f"the session is closed ({self.close_error})")
        stream = self.streams.get(stream_id)
        if stream is None:
            raise LocalProtocolError(f"no open stream {stream_id}")
        return stream

    # ------------------------------------------------------------------ API: streams

    def open_stream(self) -> int:
        """Open a stream: a Window Update with SYN goes out (its delta is ``receive_window``
        minus the 256 KiB both sides assume). Data may be sent at once.

        :returns: the new stream id.
        :raises LocalProtocolError: the session is closed, either side sent Go Away, or the
            ids of our side are used up (2^32-1 is the last).
        """
        if not self.is_open:
            raise LocalProtocolError(f"the session is closed ({self.close_error})")
        if self.go_away_received is not None:
            raise LocalProtocolError("the peer sent Go Away: it accepts no new stream")
        if self.go_away_sent:
            raise LocalProtocolError("we sent Go Away: this session opens no new stream")
        try:
            sid = self.ids.allocate()
        except IdsExhausted as error:
            raise LocalProtocolError(str(error)) from None
        stream = YamuxStream(sid, self.config.max_window)
        self.streams.add(stream, remote=False)
        self._queue(FrameType.WINDOW_UPDATE, Flags.SYN, sid, self._grow_window(stream))
        return sid

    def _grow_window(self, stream: YamuxStream) -> int:
        """The delta that takes ``stream``'s receive window to ``receive_window``."""
        delta = self.config.receive_window - INITIAL_WINDOW
        stream.recv_window += delta
        return delta

    def accept_stream(self, stream_id: int) -> None:
        """Accept the peer's stream ``stream_id`` (after
        :class:`~rsocket_tx.yamux.events.StreamOpened`): a Window Update with ACK goes out.

        :raises LocalProtocolError: no such stream waits to be accepted.
        """
        stream = self._stream(stream_id)
        if stream_id not in self._unaccepted:
            raise LocalProtocolError(f"stream {stream_id} does not wait to be accepted")
        self._unaccepted.discard(stream_id)
        stream.acknowledged = True
        self._queue(FrameType.WINDOW_UPDATE, Flags.ACK, stream_id, self._grow_window(stream))

    def send_window(self, stream_id: int) -> int:
        """Bytes the peer lets us send on ``stream_id`` now; -1 when it is not open for
        sending."""
        stream = self.streams.get(stream_id) if self.is_open else None
        if stream is None or not stream.send_open:
            return -1
        return stream.send_window.available

    def send_data(self, stream_id: int, data: bytes, now: float,
                  end_stream: bool = False) -> int:
        """Queue as much of ``data`` as the peer's window allows, in Data frames of at most
        ``send_frame_size`` bytes.

        :param data: the bytes.
        :param now: the time, seconds (the close timer of ``end_stream`` starts then).
        :param end_stream: half-close (FIN) after the last byte, once all of ``data`` is taken.
        :returns: how many bytes were taken (the rest waits for a
            :class:`~rsocket_tx.yamux.events.WindowUpdated`).
        :raises LocalProtocolError: no open stream, or we closed it for sending.
        """
        stream = self._stream(stream_id)
        if not stream.send_open:
            raise LocalProtocolError(f"stream {stream_id} is closed for sending (FIN sent)")
        total = stream.send_window.take(len(data))
        view = memoryview(data)
        size = self.config.send_frame_size
        outbox = self._outbox
        pos = 0
        fin = end_stream and total == len(data)
        while pos < total:
            chunk = view[pos:min(pos + size, total)]
            pos += len(chunk)
            flags = 0
            if fin and pos == total:
                flags |= Flags.FIN
            outbox.append(encode_header(FrameType.DATA, flags, stream_id, len(chunk)))
            outbox.append(bytes(chunk))
        if fin:
            if total == 0:
                self._queue(FrameType.WINDOW_UPDATE, Flags.FIN,
                            stream_id, 0)
            self._sent_fin(stream, now)
        return total

    def close_stream(self, stream_id: int, now: float) -> None:
        """Half-close ``stream_id`` (FIN on a Window Update): we send no more data. The peer's
        FIN must follow within ``stream_close_timeout`` seconds (see :meth:`tick`).

        :param now: the time, seconds.

        :raises LocalProtocolError: no open stream, or FIN was sent already.
        """
        stream = self._stream(stream_id)
        if not stream.send_open:
            raise LocalProtocolError(f"stream {stream_id} is closed for sending already")
        self._queue(FrameType.WINDOW_UPDATE, Flags.FIN, stream_id, 0)
        self._sent_fin(stream, now)

    def _sent_fin(self, stream: YamuxStream, now: float) -> None:
        timeout = self.config.stream_close_timeout
        if self.streams.close_send(stream):
            self._forget(stream)
        elif timeout is not None:
            self.deadlines.set(("close", stream.stream_id), now + timeout)

    def reset_stream(self, stream_id: int) -> None:
        """Reset ``stream_id`` (RST on a Window Update): it is gone at once; also how a
        stream the peer opened is refused. A stream that is not open is ignored (it ended
        already)."""
        stream = self.streams.get(stream_id) if self.is_open else None
        if stream is None:
            return
        self._queue(FrameType.WINDOW_UPDATE, Flags.RST, stream_id, 0)
        self._forget(stream)

    def consume(self, stream_id: int, n: int) -> None:
        """The application has consumed ``n`` bytes of ``stream_id``'s data: once half the
        ``receive_window`` is consumed, a Window Update gives it back (spec.md "Flow
        Control"). A stream that is not open is ignored.

        :param n: bytes, at least 0.
        :raises ValueError: ``n`` < 0.
        """
        if n < 0:
            raise ValueError(f"consumed bytes must be at least 0, got {n}")
        stream = self.streams.get(stream_id) if self.is_open else None
        if stream is None:
            return
        stream.consumed += n
        if stream.recv_open and stream.consumed >= self.config.receive_window // 2:
            delta, stream.consumed = stream.consumed, 0
            stream.recv_window += delta
            self.window_updates_sent += 1
            self._queue(FrameType.WINDOW_UPDATE, 0, stream_id, delta)

    def _forget(self, stream: YamuxStream) -> None:
        self.streams.remove(stream.stream_id)
        self._unaccepted.discard(stream.stream_id)
        self.deadlines.cancel(("close", stream.stream_id))

    # ------------------------------------------------------------------ API: session

    def ping(self, now: float) -> int:
        """Send a Ping (SYN); its answer is a :class:`~rsocket_tx.yamux.events.PongReceived`,
        or after ``ping_timeout`` seconds a :class:`~rsocket_tx.yamux.events.PingTimedOut`.

        :returns: its opaque value.
        :raises LocalProtocolError: the session is closed.
        """
        if not self.is_open:
            raise LocalProtocolError(f"the session is closed ({self.close_error})")
        return self._ping(now, keepalive=False)

    def _ping(self, now: float, keepalive: bool) -> int:
        opaque = self._next_opaque
        self._next_opaque = (opaque + 1) & MAX_U32
        self._pings[opaque] = keepalive
        self.deadlines.set(("ping", opaque), now + self.config.ping_timeout)
        self._queue(FrameType.PING, Flags.SYN, 0, opaque)
        return opaque

    def go_away(self) -> None:
        """Send Go Away "normal termination" (once): the peer opens no new stream, and we
        refuse any SYN from now on; the open streams go on."""
        if self.is_open and not self.go_away_sent:
            self.go_away_sent = True
            self._queue(FrameType.GO_AWAY, 0, 0, GoAwayCode.NORMAL)

    def close(self, code: int = GoAwayCode.NORMAL, reason: str = "") -> list[Event]:
        """End the session: Go Away with ``code`` (unless a Go Away "normal" went out and
        ``code`` is normal too); every stream is gone.

        :param code: a :class:`~rsocket_tx.yamux.codec.GoAwayCode`.
        :param reason: words for the log and the streams' errors.
        :returns: the events (a :class:`~rsocket_tx.yamux.events.ConnectionClosed`, when it
            was open).
        """
        if not self.is_open:
            return []
        if code != GoAwayCode.NORMAL or not self.go_away_sent:
            self.go_away_sent = True
            self._queue(FrameType.GO_AWAY, 0, 0, code)
        return self._end(ConnectionClosedError(reason or "the session was closed",
                                               by_peer=False, code=code))

    def connection_lost(self, why: str) -> list[Event]:
        """The transport is gone (``why``: in words). :returns: the events."""
        if not self.is_open:
            return []
        return self._end(ConnectionClosedError(why, by_peer=True))

    def _end(self, error: ConnectionClosedError) -> list[Event]:
        self.is_open = False
        self.close_error = error
        self.streams.clear()
        self._unaccepted.clear()
        self._pings.clear()
        self.deadlines = Deadlines()
        return [ConnectionClosed(error)]

    # ------------------------------------------------------------------ time

    def next_deadline(self) -> float | None:
        """When :meth:`tick` is next due (seconds), or None."""
        return self.deadlines.next() if self.is_open else None

    def tick(self, now: float) -> list[Event]:
        """Run what is due at ``now``: the keepalive's Ping, Pings unanswered, streams whose
        peer did not send FIN within ``stream_close_timeout`` after ours. :returns: the
        events."""
        events: list[Event] = []
        config = self.config
        for key in self.deadlines.pop_expired(now):
            if not self.is_open:
                break
            what = key[0]
            if what == "keepalive":
                self._ping(now, keepalive=True)
                self.deadlines.set(key, now + config.keepalive_interval)  # type: ignore[operator]
            elif what == "ping":
                if self._pings.pop(key[1], False):
                    events += self._end(ConnectionClosedError(
                        f"keepalive timeout: no answer to a Ping within {config.ping_timeout} "
                        f"seconds", by_peer=False))
                else:
                    events.append(PingTimedOut(key[1]))
            elif what == "close":
                sid = key[1]
                if sid in self.streams:
                    self.reset_stream(sid)
                    events.append(StreamReset(sid, False, (
                        f"the peer did not close the stream within the stream_close_timeout "
                        f"of {config.stream_close_timeout} seconds after our FIN")))
        return events
