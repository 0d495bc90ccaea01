"""yamux over Twisted: :class:`YamuxProtocol` plugs a sans-IO
:class:`~rsocket_tx.yamux.connection.YamuxConnection` into the shared bridge
(:class:`~rsocket_tx.bridge.MuxProtocol`: IPushProducer, batched writes, send-buffer guard,
half-close, ticks), and each stream is a :class:`YamuxStreamTransport`: an ``ITransport``, so
*any* Twisted protocol runs over one yamux stream.

* **Accepting**: a session built with a ``stream_factory`` (any ``IProtocolFactory``) accepts
  each stream the peer opens, giving its protocol (``stream_factory.buildProtocol(address)``,
  a :class:`YamuxAddress`) a transport of its own; ``buildProtocol`` returning None refuses
  the stream (RST). With no ``stream_factory`` every stream of the peer is refused.
* **Opening**: :meth:`YamuxProtocol.open_stream` connects a protocol to a new stream (SYN goes
  out at once; data may follow before the peer's ACK); :class:`StreamEndpoint` is the same as
  an ``IStreamClientEndpoint`` (``connectProtocol(StreamEndpoint(session), MyProtocol())``).
* **Flow control**: what a stream's protocol writes goes out as the peer's window allows; the
  rest waits in the stream, and past :data:`HIGH_WATER` bytes waiting a registered producer is
  paused (``IConsumer``). What the peer sends is handed to ``dataReceived``; the window is
  given back as it is handed on, so a protocol that calls ``transport.pauseProducing()``
  stops the peer once its window is used (spec.md "Flow Control").
* **Closing**: ``loseConnection`` (and ``loseWriteConnection``) send FIN after what waits;
  the stream's protocol gets ``connectionLost(ConnectionDone)`` once the peer's FIN has come
  too. The peer's FIN is ``readConnectionLost()`` for an ``IHalfCloseableProtocol``; any other
  protocol is closed then (FIN back), as a TCP transport does. ``abortConnection`` sends RST
  (``connectionLost(ConnectionAborted)``); the peer's RST, the session's end and
  ``stream_close_timeout`` give ``connectionLost(ConnectionLost)`` with the reason.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred, fail, succeed
from twisted.internet.error import ConnectionAborted, ConnectionDone, ConnectionLost
from twisted.internet.interfaces import (
    IAddress,
    IConsumer,
    IHalfCloseableProtocol,
    IProtocolFactory,
    IPushProducer,
    IStreamClientEndpoint,
    ITransport,
)
from twisted.python.failure import Failure
from zope.interface import implementer

from ..bridge import MuxProtocol, failure_for
from .codec import GoAwayCode
from .config import YamuxConfig
from .connection import Role, YamuxConnection
from .errors import ConnectionClosedError, LocalProtocolError
from .events import (
    ConnectionClosed,
    DataReceived,
    GoAwayReceived,
    PingTimedOut,
    PongReceived,
    StreamAccepted,
    StreamEnded,
    StreamOpened,
    StreamReset,
    WindowUpdated,
)

__all__ = ["HIGH_WATER", "StreamEndpoint", "YamuxAddress", "YamuxProtocol",
           "YamuxStreamTransport", "check_stream_factory"]

#: Bytes waiting in one stream (beyond the peer's window) past which its registered producer
#: is paused; it is resumed once they are all sent.
HIGH_WATER = 256 * 1024


def check_stream_factory(stream_factory: Any) -> None:
    """Check a ``stream_factory`` argument: an ``IProtocolFactory``, or None.

    :raises TypeError: it is neither, with what to give instead.
    """
    if stream_factory is not None and not IProtocolFactory.providedBy(stream_factory):
        raise TypeError(f"stream_factory must be an IProtocolFactory (e.g. "
                        f"Factory.forProtocol(MyProtocol)) or None, got {stream_factory!r}")


@implementer(IAddress)
@dataclass(frozen=True, slots=True)
class YamuxAddress:
    """The address of one end of a yamux stream (``getPeer()``/``getHost()`` of a
    :class:`YamuxStreamTransport`).

    :ivar stream_id: the stream.
    :ivar address: the session's transport's address of the same end (an ``IPv4Address``
        ...), or None.
    """

    stream_id: int
    address: Any


@implementer(ITransport, IConsumer, IPushProducer)
class YamuxStreamTransport:
    """One yamux stream as a Twisted transport (see the module docstring).

    :ivar session: the :class:`YamuxProtocol` carrying it.
    :ivar stream_id: the stream id.
    :ivar protocol: the protocol connected to it.
    :ivar connected: True until ``connectionLost`` was called on the protocol.
    :ivar disconnecting: ``loseConnection`` was called (FIN follows what waits).
    :ivar fin_sent: our FIN went out.
    :ivar fin_received: the peer's FIN came.
    :ivar accepted: the peer ACKed (streams we opened; True for the peer's).
    """

    def __init__(self, session: YamuxProtocol, stream_id: int, protocol: Any,
                 accepted: bool) -> None:
        self.session = session
        self.stream_id = stream_id
        self.protocol = protocol
        self.connected = True
        self.disconnecting = False
        self.fin_sent = False
        self.fin_received = False
        self.accepted = accepted
        self.producer: Any = None
        self.streaming = False
        self.producer_paused = False
        self.reading_paused = False
        self._pending: deque[bytes] = deque()
        self._offset = 0  # bytes of _pending[0] already sent
        self._pending_size = 0
        self._inbox: deque[bytes] = deque()
        self._eof_held = False

    def __repr__(self) -> str:
        return f"<YamuxStreamTransport {self.stream_id} of {self.session!r}>"

    # ------------------------------------------------------------------ ITransport

    @property
    def waiting(self) -> int:
        """Bytes written and not yet sent (the peer's window is used up, or the session's
        transport is paused)."""
        return self._pending_size

    def write(self, data: bytes) -> None:
        """Send ``data`` (bytes) on the stream, as the peer's window allows. Dropped after
        ``loseConnection`` or the stream's end (as a TCP transport drops it).

        :raises TypeError: ``data`` is not bytes.
        """
        if not isinstance(data, bytes):
            raise TypeError(f"a yamux stream carries bytes, got {type(data).__name__}")
        if not self.connected or self.disconnecting or not data:
            return
        self._pending.append(data)
        self._pending_size += len(data)
        self.push()

    def writeSequence(self, data) -> None:  # noqa: N802 - Twisted's name
        """Send each of ``data`` (an iterable of bytes), in order."""
        self.write(b"".join(data))

    def loseConnection(self) -> None:  # noqa: N802 - Twisted's name
        """Half-close: FIN after what waits. ``connectionLost(ConnectionDone)`` follows once
        the peer's FIN has come too; until then what the peer sends is still delivered."""
        if not self.connected or self.disconnecting:
            return
        self.disconnecting = True
        self.push()

    def loseWriteConnection(self) -> None:  # noqa: N802 - Twisted's name
        """``ITCPTransport``'s half-close: the same as :meth:`loseConnection` (FIN)."""
        self.loseConnection()

    def abortConnection(self) -> None:  # noqa: N802 - Twisted's name
        """Reset the stream (RST) at once: what waits is dropped;
        ``connectionLost(ConnectionAborted)``."""
        if not self.connected:
            return
        conn = self.session.connection
        if conn is not None:
            conn.reset_stream(self.stream_id)
            self.session.flush_soon()
        self.lost(Failure(ConnectionAborted(f"yamux stream {self.stream_id} reset by us")))

    def getPeer(self) -> YamuxAddress:  # noqa: N802 - Twisted's name
        """The peer's end: :class:`YamuxAddress` (stream id, the session's ``getPeer()``)."""
        transport = self.session.transport
        return YamuxAddress(self.stream_id, transport.getPeer() if transport else None)

    def getHost(self) -> YamuxAddress:  # noqa: N802 - Twisted's name
        """Our end: :class:`YamuxAddress` (stream id, the session's ``getHost()``)."""
        transport = self.session.transport
        return YamuxAddress(self.stream_id, transport.getHost() if transport else None)

    # ------------------------------------------------------------------ IConsumer

    def registerProducer(self, producer, streaming: bool) -> None:  # noqa: N802
        """``IConsumer``: ``producer`` is paused while more than :data:`HIGH_WATER` bytes
        wait (``streaming``), or asked for more each time what waits is sent (a pull
        producer).

        :raises RuntimeError: a producer is registered already.
        """
        if self.producer is not None:
            raise RuntimeError(f"yamux stream {self.stream_id} has a producer already "
                               f"({self.producer!r}): unregisterProducer() first")
        self.producer = producer
        self.streaming = streaming
        self.producer_paused = False
        if not self.connected:
            producer.stopProducing()
        elif not streaming:
            producer.resumeProducing()
        else:
            self._steer_producer()

    def unregisterProducer(self) -> None:  # noqa: N802 - Twisted's name
        """``IConsumer``: forget the producer."""
        self.producer = None

    # ------------------------------------------------------------------ IPushProducer (reading)

    def pauseProducing(self) -> None:  # noqa: N802 - Twisted's name
        """Stop handing the peer's data to the protocol; it waits here, and the window is not
        given back, so the peer stops once it is used."""
        self.reading_paused = True

    def resumeProducing(self) -> None:  # noqa: N802 - Twisted's name
        """Hand on what waited, and go on."""
        self.reading_paused = False
        self.deliver()

    def stopProducing(self) -> None:  # noqa: N802 - Twisted's name
        """Reset the stream (a consumer that wants no more)."""
        self.abortConnection()

    # ------------------------------------------------------------------ the session's side

    def push(self) -> None:
        """Send what waits, as far as the peer's window and the session's transport allow;
        then FIN if ``loseConnection`` was called and nothing waits."""
        session = self.session
        conn = session.connection
        if not self.connected or conn is None or not conn.is_open:
            return
        now = session.reactor.seconds()
        pending = self._pending
        sent = False
        while pending and not session.paused:
            chunk = pending[0]
            offset = self._offset
            part = memoryview(chunk)[offset:] if offset else chunk
            taken = conn.send_data(self.stream_id, part, now)
            if not taken:
                break
            sent = True
            self._pending_size -= taken
            if taken == len(part):
                pending.popleft()
                self._offset = 0
            else:
                self._offset = offset + taken
                break
        if not pending and self.disconnecting and not self.fin_sent:
            self.fin_sent = True
            conn.close_stream(self.stream_id, now)
            sent = True
        if sent:
            session.flush_soon()
        self._steer_producer()
        if self.fin_sent and self.fin_received:
            self.lost(Failure(ConnectionDone("yamux stream closed")))

    def _steer_producer(self) -> None:
        producer = self.producer
        if producer is None or not self.connected:
            return
        if not self.streaming:
            if not self._pending_size and not self.disconnecting:
                producer.resumeProducing()
            return
        if self._pending_size > HIGH_WATER:
            if not self.producer_paused:
                self.producer_paused = True
                producer.pauseProducing()
        elif self.producer_paused and not self._pending_size:
            self.producer_paused = False
            producer.resumeProducing()

    def data_received(self, data: bytes) -> None:
        """The peer's data (from the session)."""
        if self.reading_paused or self._inbox:
            self._inbox.append(data)
            return
        self._hand_on(data)

    def _hand_on(self, data: bytes) -> None:
        self.protocol.dataReceived(data)
        conn = self.session.connection
        if conn is not None:
            conn.consume(self.stream_id, len(data))
            self.session.flush_soon()

    def deliver(self) -> None:
        """Hand on what waited while reading was paused (and the peer's FIN after it)."""
        inbox = self._inbox
        while inbox and not self.reading_paused and self.connected:
            self._hand_on(inbox.popleft())
        if not inbox and self._eof_held and not self.reading_paused and self.connected:
            self._eof_held = False
            self._read_ended()

    def ended(self) -> None:
        """The peer's FIN (from the session)."""
        self.fin_received = True
        if self.reading_paused or self._inbox:
            self._eof_held = True
            return
        self._read_ended()

    def _read_ended(self) -> None:
        if self.fin_sent:
            self.lost(Failure(ConnectionDone("yamux stream closed")))
            return
        half_closeable = IHalfCloseableProtocol(self.protocol, None)
        if half_closeable is not None:
            half_closeable.readConnectionLost()
        else:
            self.loseConnection()

    def lost(self, reason: Failure) -> None:
        """End the stream's protocol with ``reason`` (once)."""
        if not self.connected:
            return
        self.connected = False
        self.session.stream_gone(self)
        self._pending.clear()
        self._pending_size = 0
        self._inbox.clear()
        producer, self.producer = self.producer, None
        if producer is not None:
            producer.stopProducing()
        self.protocol.connectionLost(reason)


class YamuxProtocol(MuxProtocol):
    """One yamux session over a Twisted transport (TCP, TLS, a WebSocket byte stream).

    :param reactor: the reactor.
    :param role: :attr:`~rsocket_tx.yamux.connection.Role.CLIENT` (odd stream ids) or
        ``SERVER`` (even).
    :param config: the settings (:class:`~rsocket_tx.yamux.config.YamuxConfig`).
    :param stream_factory: an ``IProtocolFactory`` building a protocol for each stream the peer
        opens (None: refuse them all, with RST).
    :raises TypeError: ``stream_factory`` is no ``IProtocolFactory`` (nor None).

    :ivar role: the role.
    :ivar config: the settings.
    :ivar stream_factory: as given (may be set later).
    :ivar streams: ``{stream id: YamuxStreamTransport}``, the open streams.
    :ivar closed_error: why the session ended
        (:class:`~rsocket_tx.yamux.errors.ConnectionClosedError`), None while open.
    :ivar go_away_received: the peer sent Go Away (normal): no new stream can be opened.
    """

    connection: Any

    def __init__(self, reactor: Any, role: Role, config: YamuxConfig | None = None,
                 stream_factory: Any = None) -> None:
        config = config if config is not None else YamuxConfig()
        check_stream_factory(stream_factory)
        super().__init__(reactor, max_send_buffer_size=config.max_send_buffer_size)
        self.role = role
        self.config = config
        self.stream_factory = stream_factory
        self.protocol_name = f"yamux {role.value}"
        # a server keeps a client's first bytes: one that speaks another protocol is named
        self.watch_first_bytes = role is Role.SERVER
        self.streams: dict[int, YamuxStreamTransport] = {}
        self.closed_error: ConnectionClosedError | None = None
        self.go_away_received = False
        self._pings: dict[int, tuple[Deferred[float], float]] = {}
        self._connected: list[Deferred[YamuxProtocol]] = []
        self._lost: list[Deferred[None]] = []
        self._going_away: list[Deferred[None]] = []
        self.event_handlers = {
            StreamOpened: self.on_stream_opened,
            StreamAccepted: self.on_stream_accepted,
            DataReceived: self.on_data,
            StreamEnded: self.on_stream_ended,
            StreamReset: self.on_stream_reset,
            WindowUpdated: self.on_window_updated,
            PongReceived: self.on_pong,
            PingTimedOut: self.on_ping_timed_out,
            GoAwayReceived: self.on_go_away,
            ConnectionClosed: self.on_connection_closed,
        }

    def __repr__(self) -> str:
        state = "open" if self.is_open else "closed"
        return f"<YamuxProtocol {self.role.value} {state} streams={len(self.streams)}>"

    # ------------------------------------------------------------------ bridge hooks

    def make_connection(self) -> YamuxConnection:
        return YamuxConnection(self.role, self.config, self.reactor.seconds())

    def connection_started(self) -> None:
        # Window Updates are 12-byte frames a sender waits for: Nagle's algorithm would hold
        # them (and the tail of a window's data) for the peer's delayed ACK
        set_no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if set_no_delay is not None:
            set_no_delay(True)
        waiters, self._connected = self._connected, []
        for d in waiters:
            d.callback(self)

    def producing_resumed(self) -> None:
        for stream in list(self.streams.values()):
            stream.push()

    def transport_lost(self, reason: Failure | None) -> None:
        super().transport_lost(reason)
        if self.closed_error is None:  # (never connected)
            self.closed_error = ConnectionClosedError("the transport closed")
        waiters, self._lost = self._lost, []
        for d in waiters:
            d.callback(None)

    # ------------------------------------------------------------------ event handlers

    def on_stream_opened(self, event: StreamOpened) -> None:
        sid = event.stream_id
        factory = self.stream_factory
        protocol = None
        if factory is not None:
            transport = self.transport
            protocol = factory.buildProtocol(
                YamuxAddress(sid, transport.getPeer() if transport else None))
        if protocol is None:
            self.connection.reset_stream(sid)
            return
        self.connection.accept_stream(sid)
        self._attach(sid, protocol, accepted=True)

    def _attach(self, sid: int, protocol: Any, accepted: bool) -> YamuxStreamTransport:
        stream = YamuxStreamTransport(self, sid, protocol, accepted)
        self.streams[sid] = stream
        protocol.makeConnection(stream)
        return stream

    def on_stream_accepted(self, event: StreamAccepted) -> None:
        stream = self.streams.get(event.stream_id)
        if stream is not None:
            stream.accepted = True

    def on_data(self, event: DataReceived) -> None:
        stream = self.streams.get(event.stream_id)
        if stream is None:  # (its protocol is gone: give the window back all the same)
            self.connection.consume(event.stream_id, len(event.data))
            return
        stream.data_received(event.data)

    def on_stream_ended(self, event: StreamEnded) -> None:
        stream = self.streams.get(event.stream_id)
        if stream is not None:
            stream.ended()

    def on_stream_reset(self, event: StreamReset) -> None:
        stream = self.streams.get(event.stream_id)
        if stream is not None:
            stream.lost(Failure(ConnectionLost(f"yamux stream {event.stream_id}: "
                                               f"{event.reason}")))

    def on_window_updated(self, event: WindowUpdated) -> None:
        stream = self.streams.get(event.stream_id)
        if stream is not None:
            stream.push()

    def on_pong(self, event: PongReceived) -> None:
        entry = self._pings.pop(event.opaque, None)
        if entry is not None:
            d, sent = entry
            d.callback(self.reactor.seconds() - sent)

    def on_ping_timed_out(self, event: PingTimedOut) -> None:
        entry = self._pings.pop(event.opaque, None)
        if entry is not None:
            entry[0].errback(failure_for(TimeoutError(
                f"no answer to the Ping within {self.config.ping_timeout} seconds")))

    def on_go_away(self, event: GoAwayReceived) -> None:
        self.go_away_received = True
        waiters, self._going_away = self._going_away, []
        for d in waiters:
            d.callback(None)

    def on_connection_closed(self, event: ConnectionClosed) -> None:
        self.ended = True
        error = self.closed_error = event.error
        self.end_reason = str(error)
        if error.code not in (None, GoAwayCode.NORMAL):
            self.log.warn("yamux session ended: {why}", why=str(error))
            if not error.by_peer and self.role is Role.SERVER:
                self.name_wrong_client("yamux")  # (an RSocket client at a yamux port ...)
        for stream in list(self.streams.values()):
            stream.lost(Failure(ConnectionLost(f"yamux session ended: {error}")))
        pings, self._pings = self._pings, {}
        for d, _ in pings.values():
            d.errback(failure_for(error))
        going, self._going_away = self._going_away, []
        for waiter in going:
            waiter.errback(failure_for(error))

    # ------------------------------------------------------------------ for the streams

    def stream_gone(self, stream: YamuxStreamTransport) -> None:
        """``stream``'s protocol is being ended: forget it (called by the stream)."""
        if self.streams.get(stream.stream_id) is stream:
            del self.streams[stream.stream_id]

    # ------------------------------------------------------------------ public API

    def open_stream(self, protocol: Any) -> YamuxStreamTransport:
        """Open a stream and connect ``protocol`` (any ``IProtocol``) to it: its
        ``makeConnection`` runs now, and it may write at once (spec.md "Opening a stream":
        data may follow the SYN before the peer's ACK; a peer that refuses the stream answers
        with RST: ``connectionLost(ConnectionLost)``).

        :returns: the stream's :class:`YamuxStreamTransport`.
        :raises LocalProtocolError: the session is closed or not connected yet, a Go Away was
            sent or received, or the stream ids are used up.
        """
        conn = self.connection
        if conn is None:
            raise LocalProtocolError("the session's transport is not connected yet")
        sid = conn.open_stream()
        self.flush_soon()
        return self._attach(sid, protocol, accepted=False)

    def ping(self) -> Deferred[float]:
        """Send a Ping.

        :returns: a Deferred firing with the round-trip time (seconds) when the answer comes;
            it fails with ``TimeoutError`` after ``config.ping_timeout`` seconds, or with the
            :class:`~rsocket_tx.yamux.errors.ConnectionClosedError` of the session's end.
        """
        conn = self.connection
        if conn is None or not conn.is_open:
            return fail(self.closed_error or LocalProtocolError("the session is not open"))
        now = self.reactor.seconds()
        opaque = conn.ping(now)
        d: Deferred[float] = Deferred()
        self._pings[opaque] = (d, now)
        self.flush_soon()
        self.schedule_tick()
        return d

    def go_away(self) -> None:
        """Send Go Away "normal termination": the peer may open no new stream; ours and the
        open ones go on."""
        conn = self.connection
        if conn is not None:
            conn.go_away()
            self.flush_soon()

    def close(self, reason: str = "the session was closed") -> Deferred[None]:
        """End the session: Go Away (normal) and close the transport after it; every stream's
        protocol gets ``connectionLost(ConnectionLost)``.

        :returns: a Deferred firing once the transport is gone.
        """
        closed = self.when_closed()
        conn = self.connection
        if conn is not None and conn.is_open:
            self.handle_events(conn.close(GoAwayCode.NORMAL, reason))
        elif self.transport is not None and not self.transport_gone:
            self.transport.loseConnection()
        return closed

    def when_connected(self) -> Deferred[YamuxProtocol]:
        """A Deferred firing with this protocol once its transport is connected."""
        if self.connection is not None:
            return succeed(self)
        d: Deferred[YamuxProtocol] = Deferred()
        self._connected.append(d)
        return d

    def when_go_away(self) -> Deferred[None]:
        """A Deferred firing when the peer's Go Away (normal) comes (at once if it came);
        it fails with the session's end first."""
        if self.go_away_received:
            return succeed(None)
        if self.closed_error is not None:
            return fail(failure_for(self.closed_error))
        d: Deferred[None] = Deferred()
        self._going_away.append(d)
        return d

    def when_closed(self) -> Deferred[None]:
        """A Deferred firing with None once the session is over and its transport gone."""
        if self.transport_gone or (self.connection is not None and self.released):
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._lost.append(d)
        return d

    def release(self) -> None:
        super().release()
        self.streams = {}


@implementer(IStreamClientEndpoint)
class StreamEndpoint:
    """An ``IStreamClientEndpoint`` whose connections are new streams of one yamux session:
    ``connectProtocol(StreamEndpoint(session), protocol)``, or any code written for Twisted
    endpoints.

    :param session: the connected :class:`YamuxProtocol`.
    """

    def __init__(self, session: YamuxProtocol) -> None:
        self.session = session

    def connect(self, protocolFactory) -> Deferred:  # noqa: N803 - Twisted's name
        """Open a stream and connect ``protocolFactory.buildProtocol(address)`` to it.

        :returns: a Deferred firing with the protocol at once, or failing with
            :class:`~rsocket_tx.yamux.errors.LocalProtocolError` (no new stream possible) or
            ``ValueError`` (the factory built None).
        """
        session = self.session
        transport = session.transport
        address = YamuxAddress(session.connection.ids.next_id if session.connection else 0,
                               transport.getPeer() if transport is not None else None)
        protocol = protocolFactory.buildProtocol(address)
        if protocol is None:
            return fail(ValueError(f"{protocolFactory!r} built no protocol"))
        try:
            session.open_stream(protocol)
        except LocalProtocolError as error:
            return fail(error)
        return succeed(protocol)

