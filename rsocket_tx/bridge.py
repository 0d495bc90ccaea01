"""One Twisted bridge under every multiplexed protocol (the model is Twisted's
``twisted/web/_http2.py``: a sans-IO core under a Twisted producer).

:class:`MuxProtocol` is an ``IProtocol`` and an ``IPushProducer`` that feeds what its
transport receives to a sans-IO connection (:class:`~rsocket_tx.interfaces.IMuxConnection`,
duck-typed) and writes what that connection queues. It knows nothing of any wire format: a
protocol (RSocket: :class:`~rsocket_tx.protocol.RSocketProtocol`; the Jini ERI mux)
subclasses it, builds its connection in :meth:`MuxProtocol.make_connection` and registers one
handler per event class in :attr:`MuxProtocol.event_handlers`.

What the bridge does, for every protocol:

* **Reads**: bytes from a byte stream (``dataReceived``) go to ``connection.receive_data(data,
  now)``; whole frames from a message transport
  (:class:`~rsocket_tx.interfaces.IFrameTransport`, WebSocket: ``frameReceived``,
  ``framesReceived``) to ``connection.receive_frame(frame, now)``. The events returned are
  dispatched through :attr:`~MuxProtocol.event_handlers` (event class -> handler).
* **Batched writes**: everything the connection queues while one read is handled goes out in
  one ``transport.write`` at the end of the read; writes caused by application calls outside a
  read are coalesced to the end of the reactor turn (:meth:`~MuxProtocol.flush_soon`, a
  ``callLater(0)``, which runs before the reactor next polls: no latency is added).
* **Backpressure and the send-buffer guard**: the protocol registers itself as its transport's
  streaming producer. What is written while the transport is paused is counted; past
  :attr:`~MuxProtocol.max_send_buffer_size` bytes the peer is taken not to read and
  :meth:`~MuxProtocol.excessive_buffering` ends the connection.
* **Time**: one ``callLater`` at ``connection.next_deadline()`` runs ``connection.tick(now)``
  (:meth:`~MuxProtocol.schedule_tick`).
* **The end**: once the connection is no longer open its transport is closed after the last
  frame: a message transport with its clean close (the WebSocket close handshake); TCP with a
  half-close (FIN after the last byte, reading on until the peer closes) and an abort
  :data:`ABORT_DELAY` seconds later (:meth:`~MuxProtocol.end_transport`).
* **TLS**: a TLS failure the transport was lost to becomes a
  :class:`~rsocket_tx.transports.tls.TLSError` (:attr:`~MuxProtocol.tls_failure`);
  :meth:`~MuxProtocol.when_secured` waits for the handshake.

A subclass provides the hooks (all public, documented below; the defaults suit a protocol with
no session outliving its transport): :meth:`~MuxProtocol.make_connection` (required),
:meth:`~MuxProtocol.connection_started`, :meth:`~MuxProtocol.transport_lost`,
:meth:`~MuxProtocol.transport_error`, :meth:`~MuxProtocol.excessive_buffering`,
:meth:`~MuxProtocol.producing_resumed`, :meth:`~MuxProtocol.data_flushed`,
:meth:`~MuxProtocol.connection_ended`, :meth:`~MuxProtocol.events_handled`,
:meth:`~MuxProtocol.release`. Its event
handlers and API methods use the public state and methods: :attr:`~MuxProtocol.connection`,
:attr:`~MuxProtocol.reactor`, :attr:`~MuxProtocol.paused`, :attr:`~MuxProtocol.dispatching`,
:attr:`~MuxProtocol.aborting`, :attr:`~MuxProtocol.transport_gone`,
:attr:`~MuxProtocol.ended`, :attr:`~MuxProtocol.held`, :meth:`~MuxProtocol.handle_events`,
:meth:`~MuxProtocol.handle_read`, :meth:`~MuxProtocol.handle_events_now`,
:meth:`~MuxProtocol.flush`, :meth:`~MuxProtocol.flush_soon`, :meth:`~MuxProtocol.schedule_tick`,
:meth:`~MuxProtocol.stop_timers`, :meth:`~MuxProtocol.abort_later`,
:meth:`~MuxProtocol.end_transport`, :meth:`~MuxProtocol.transport_attached`,
:attr:`~MuxProtocol.live_transport`.

A minimal subclass::

    class EchoMuxProtocol(MuxProtocol):
        def __init__(self, reactor):
            super().__init__(reactor, max_send_buffer_size=1 << 20)
            self.event_handlers = {DataReceived: self.on_data,
                                   ConnectionClosed: self.on_closed}

        def make_connection(self):
            return EchoConnection(now=self.reactor.seconds())

        def on_data(self, event):
            self.connection.send(event.session, event.data)  # written at the read's end

        def on_closed(self, event):
            self.ended = True
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast
from typing import Protocol as TypingProtocol

from twisted.internet.address import IPv4Address, IPv6Address, UNIXAddress
from twisted.internet.defer import Deferred, succeed
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import (
    IHalfCloseableDescriptor,
    IHandshakeListener,
    IPushProducer,
)
from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.protocols.tls import TLSMemoryBIOProtocol
from twisted.python.failure import Failure
from zope.interface import implementer

from .interfaces import IFrameTransport
from .transports.peers import guess_client
from .transports.tls import TLSError, tls_error

if TYPE_CHECKING:  # pragma: no cover
    from .transports.limits import ConnectionLimit

__all__ = ["ABORT_DELAY", "FIRST_BYTES_KEPT", "FIRST_BYTES_WATCHED", "ConnectionLogger",
           "MuxProtocol", "describe_loss", "describe_peer",
           "fresh_error", "failure_for", "DetachedFailure"]


#: the per-process connection counter behind the ids "c1", "c2", ... (ConnectionLogger)
_connection_ids = itertools.count(1)

#: Seconds after the transport was half-closed (or after a graceful close's drain timeout) at
#: which a transport that has still not closed (its peer does not read the last bytes) is
#: aborted.
ABORT_DELAY = 1.0

#: Bytes of a connection's beginning a protocol keeps (:attr:`MuxProtocol.first_bytes`), to
#: name a peer that speaks another protocol (:mod:`rsocket_tx.transports.peers`): enough for an
#: HTTP status line or an RSocket ERROR's text.
FIRST_BYTES_KEPT = 256
#: Bytes after which the first reads are no longer watched: every sniffer has decided by then
#: (:mod:`rsocket_tx.mux.sniff`; the 2015 draft's needs the most, 16).
FIRST_BYTES_WATCHED = 16


def describe_loss(reason: Failure | None,
                  clean: str = "the peer closed the connection") -> str:
    """Words for why a transport was lost, as given to ``connection.connection_lost``.

    :param reason: ``connectionLost``'s Failure (None: a clean close).
    :param clean: the words for a clean close (a protocol names what the peer did not send,
        e.g. RSocket's "the peer closed the connection without CONNECTION_CLOSE").
    :returns: ``clean`` or ``"connection lost: <message>"``.
    """
    if reason is None or reason.check(ConnectionDone):
        return clean
    return f"connection lost: {reason.getErrorMessage()}"


def describe_peer(address) -> str:
    """A transport's peer address in a log line's words.

    :param address: ``transport.getPeer()``: an ``IPv4Address`` or ``IPv6Address`` (``"host:port"``,
        ``"[::1]:port"``), a ``UNIXAddress`` (its path, or ``"unix"``), anything else
        (``str()``), or None (``"-"``).
    :returns: the words.
    """
    if isinstance(address, IPv4Address):
        return f"{address.host}:{address.port}"
    if isinstance(address, IPv6Address):
        return f"[{address.host}]:{address.port}"
    if isinstance(address, UNIXAddress):
        name = address.name
        if isinstance(name, bytes):
            return name.decode("utf-8", "replace") or "unix"
        return name or "unix"
    if address is None:
        return "-"
    return str(address)


class ConnectionLogger(Logger):
    """A ``twisted.logger.Logger`` for one connection: every event it emits carries the
    fields ``conn`` (the connection id, ``"c17"``: a per-process counter) and ``peer`` (the
    peer's address, :func:`describe_peer`), and its text begins ``"[c17 127.0.0.1:54321] "``,
    so an observer can filter one connection's lines (``event["conn"] == "c17"``) and a
    person can follow them.

    :param namespace: the log namespace (e.g. ``"rsocket_tx.protocol"``).
    :param conn: the connection id; None: the next one of the per-process counter.
    :param peer: the peer's address in words (see :attr:`peer`).
    :param parent: the logger whose ``conn`` and ``peer`` this one's events carry (see
        :meth:`child`); None: its own.

    :ivar conn: the connection id (str).
    :ivar peer: the peer's address in words; ``"-"`` until a transport is attached (a
        resumed session's new transport may change it).
    """

    def __init__(self, namespace: str, conn: str | None = None, peer: str = "-",
                 parent: ConnectionLogger | None = None) -> None:
        super().__init__(namespace=namespace)
        self.conn = conn if conn is not None else f"c{next(_connection_ids)}"
        self.peer = peer
        self._parent = parent

    def child(self, namespace: str) -> ConnectionLogger:
        """A logger of another namespace for the same connection (the same ``conn``, and the
        ``peer`` this one has when an event is emitted): e.g. the frame debug log,
        ``rsocket_tx.frames``.

        :param namespace: its log namespace.
        :returns: the :class:`ConnectionLogger`.
        """
        return ConnectionLogger(namespace, self.conn, self.peer, parent=self)

    def emit(self, level, format=None, **kwargs) -> None:  # noqa: A002 - Twisted's name
        """``Logger.emit`` with the ``conn`` and ``peer`` fields, and the text prefixed."""
        owner = self._parent or self
        kwargs["conn"] = owner.conn
        kwargs["peer"] = owner.peer
        if format is not None:
            format = "[{conn} {peer}] " + format  # noqa: A001
        super().emit(level, format, **kwargs)


def fresh_error(error: BaseException) -> BaseException:
    """A new exception equal to ``error`` (same class, ``args`` and attributes, no
    traceback), for one consumer to raise.

    An error shared by several consumers (the connection's close reason, a stream's error)
    is never raised itself: raising it gives it a traceback whose frames hold the consumer
    (a coroutine's locals, the stream), which holds the error: a reference cycle that only
    the cyclic garbage collector would free, with the connection in it.

    :param error: the exception.
    :returns: the copy (``error`` itself, without its traceback, if it cannot be copied).
    """
    cls = type(error)
    try:
        copy = cls.__new__(cls)
        copy.__dict__.update(error.__dict__)
        copy.args = error.args
    except Exception:  # noqa: BLE001 - an exotic exception class: share it, untraced
        return error.with_traceback(None)
    return copy


class DetachedFailure(Failure):
    """A Failure for a Deferred handed to the application. Thrown into a coroutine that
    awaits the Deferred, it raises a fresh copy of its exception (:func:`fresh_error`).

    Twisted's ``Failure.throwExceptionIntoGenerator`` raises the Failure's own exception,
    whose traceback then holds the frames it went through, among them the frame of
    ``_inlineCallbacks`` that holds the Failure: a reference cycle with every frame of the
    stack that failed the Deferred (our protocol's, when a connection ends), freed only by
    the cyclic garbage collector. The copy's traceback leads back to no one that holds it.
    """

    def throwExceptionIntoGenerator(self, g):  # noqa: N802 - Twisted's name
        error = self.value
        assert error is not None  # (a Failure always has its exception)
        return g.throw(fresh_error(error))


def failure_for(error: BaseException) -> Failure:
    """The :class:`DetachedFailure` to fail an application's Deferred with ``error`` (a
    copy of it, without traceback: an error shared by several Deferreds never gets one).

    :param error: the exception.
    :returns: the Failure (``d.errback(failure_for(error))``).
    """
    return DetachedFailure(fresh_error(error))


class MuxTransport(TypingProtocol):
    """What the bridge calls on its transport (:attr:`MuxProtocol.live_transport`): a
    byte stream's ``ITCPTransport`` and ``IConsumer`` (TCP, TLS, the WebSocket transports
    too), and ``writeFrames`` on an :class:`~rsocket_tx.interfaces.IFrameTransport` (called
    only when :attr:`MuxProtocol.message_transport`)."""

    def write(self, data: bytes) -> None: ...

    def writeSequence(self, data: Iterable[bytes]) -> None: ...  # noqa: N802 - Twisted's

    def writeFrames(self, frames: list[bytes]) -> None: ...  # noqa: N802 - Twisted's

    def loseConnection(self) -> None: ...  # noqa: N802 - Twisted's

    def loseWriteConnection(self) -> None: ...  # noqa: N802 - Twisted's

    def abortConnection(self) -> None: ...  # noqa: N802 - Twisted's

    def registerProducer(self, producer: Any, streaming: bool) -> None: ...  # noqa: N802

    def unregisterProducer(self) -> None: ...  # noqa: N802 - Twisted's

    def getPeer(self) -> Any: ...  # noqa: N802 - Twisted's


def _peer_of(transport) -> str:
    """:func:`describe_peer` of ``transport.getPeer()`` (``"?"`` if that fails)."""
    try:
        return describe_peer(transport.getPeer())
    except Exception:  # noqa: BLE001 - an odd transport: the log line still goes out
        return "?"


@implementer(IPushProducer, IHandshakeListener)
class MuxProtocol(Protocol):
    """A Twisted protocol driving one sans-IO multiplexed connection (see the module
    docstring for what it does and the hooks a subclass provides).

    :param reactor: the ``IReactorTime`` provider for ticks, coalesced writes and aborts.
    :param max_send_buffer_size: bytes that may wait in the transport for the peer to read:
        the write that filled the transport's buffer (it paused us) plus what is written until
        it has drained (it resumes us). Past it :meth:`excessive_buffering` is called.

    :ivar connection: the sans-IO connection
        (:class:`~rsocket_tx.interfaces.IMuxConnection`), built by :meth:`make_connection`
        when the first transport connects; None before.
    :ivar reactor: the reactor.
    :ivar event_handlers: ``{event class: handler(event)}``: the dispatch table. An event
        whose class has no handler, or whose handler raises, is logged and skipped.
    :ivar max_send_buffer_size: bytes (see above).
    :ivar message_transport: the transport provides
        :class:`~rsocket_tx.interfaces.IFrameTransport` (one frame per message, written with
        ``writeFrames``).
    :ivar paused: the transport asked us to stop producing (its buffer is full), or a
        subclass has no transport for now. Pumps of outbound data check it.
    :ivar buffered: bytes written since the transport paused us (see
        ``max_send_buffer_size``).
    :ivar dispatching: events of a read (or a tick) are being dispatched: writes wait for the
        end of the batch.
    :ivar held: None, or the list of events held back: while it is a list,
        :meth:`handle_events` appends to it instead of dispatching (a handler that must wait
        for the application, e.g. an asynchronous SETUP acceptor, sets ``held = []``; the rest
        of the batch joins it).
    :ivar ended: the connection is over (a subclass sets it in its connection-closed
        handler): the rest of the batch being dispatched is dropped.
    :ivar aborting: the transport is being aborted: nothing more is written and the
        connection's end does not close it gracefully.
    :ivar transport_gone: the transport was lost (``connectionLost``).
    :ivar released: the connection is over and its transport gone: :meth:`release` dropped
        the references that would keep it alive in a cycle; events are no longer dispatched.
    :ivar tls_failure: the :class:`~rsocket_tx.transports.tls.TLSError` the transport was lost to (a
        certificate or host name rejected, by us or by the peer), else None.
    :ivar log: the connection's :class:`ConnectionLogger` (namespace :attr:`log_namespace`):
        every line it logs carries the connection id and the peer. The bridge logs one info
        line when the connection opens (``connectionMade``) and one when it is over
        (:meth:`release`), with :attr:`end_reason`.
    :ivar end_reason: words for why the connection ended, for its "closed" line: a subclass
        sets it when it knows (e.g. the peer's error); else the words of the transport's loss
        (:func:`describe_loss`).
    :ivar first_bytes: with :attr:`watch_first_bytes`, over a byte stream: the first bytes the
        peer sent (up to :data:`FIRST_BYTES_KEPT`, those of the reads until
        :data:`FIRST_BYTES_WATCHED` had come), to name a peer of another protocol
        (:mod:`rsocket_tx.transports.peers`); ``b""`` until then, or when not watched.
    """

    #: keep the peer's :attr:`first_bytes` (and call :meth:`first_bytes_seen`): the first
    #: reads of a byte stream go through one more call, later reads do not
    watch_first_bytes = False

    #: the log namespace of :attr:`log` (None: the subclass's module, e.g.
    #: ``"rsocket_tx.protocol"``)
    log_namespace: str | None = None
    #: what the log lines call this kind of connection (e.g. ``"RSocket server"``)
    protocol_name = "mux"

    def __init__(self, reactor, *, max_send_buffer_size: int) -> None:
        self.reactor = reactor
        self.log = ConnectionLogger(self.log_namespace or type(self).__module__)
        self.end_reason: str | None = None
        self.first_bytes = b""
        self._closed_logged = False
        # (duck-typed: each protocol's own sans-IO connection class)
        self.connection: Any = None
        self.event_handlers: dict[type, Callable] = {}
        self.max_send_buffer_size = max_send_buffer_size
        self.message_transport = False
        self.paused = False
        self.buffered = 0
        self.dispatching = False
        self.held: list | None = None
        self.ended = False
        self.aborting = False
        self.transport_gone = False
        self.released = False
        #: the server's :class:`~rsocket_tx.transports.limits.ConnectionLimit` that counts
        #: this connection (set by the factory), released when the transport is lost
        self.connection_limit: ConnectionLimit | None = None
        self.tls_failure: TLSError | None = None
        self._write_closed = False  # TCP half-closed after our last frame
        self._timer = None  # the next tick
        self._flush_call = None  # a pending flush_soon
        self._abort_call = None  # the last resort of a closing transport
        self._secured: list[Deferred] = []  # when_secured() waiters
        self._handshake_done = False

    # ------------------------------------------------------------------ hooks

    def make_connection(self):
        """Hook (required): build the sans-IO connection, when the first transport connects
        (:attr:`message_transport` is already set). Returning it makes it
        :attr:`connection`.

        :returns: an :class:`~rsocket_tx.interfaces.IMuxConnection`.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement make_connection()")

    def connection_started(self) -> None:
        """Hook: the connection is built and the protocol registered as the transport's
        producer; what it queues now (e.g. a client's first frames) goes out in the write
        that follows."""

    def transport_lost(self, reason: Failure | None) -> None:
        """Hook: the transport is gone (``connectionLost``, after TLS failures were put in
        words). The default ends the connection: stops the timers, marks
        :attr:`transport_gone` and dispatches ``connection.connection_lost(why)``'s events.
        A protocol whose sessions outlive their transport overrides it."""
        self.stop_timers()
        self.transport_gone = True
        if self.connection is not None:
            self.handle_events(self.connection.connection_lost(describe_loss(reason)))

    def transport_error(self, reason: str) -> None:
        """Hook: the transport received something that is no frame of the protocol (a
        WebSocket text message, a message past the maximum size). The default closes the
        transport; a protocol tells its peer first."""
        if self.transport is not None:
            self.transport.loseConnection()

    def excessive_buffering(self, message: str) -> None:
        """Hook: more than :attr:`max_send_buffer_size` bytes wait for a peer that does not
        read. :attr:`aborting` is already set and nothing more is written. The default ends
        the connection (its ``connection_lost(message)``: its streams fail), dispatches what
        that returns at once, and aborts the transport.

        :param message: what happened, with the byte counts.
        """
        self.log.warn("connection aborted: {message}", message=message)
        conn = self.connection
        if conn is not None and conn.is_open:
            self.handle_events_now(conn.connection_lost(message))
        self.live_transport.abortConnection()

    def producing_resumed(self) -> None:
        """Hook: the transport drained its buffer (``resumeProducing``): outbound pumps may go
        on."""

    def data_flushed(self) -> None:
        """Hook: :meth:`flush` handed what was queued to the transport (called on every flush
        that was not held back, even with nothing to write)."""

    def connection_ended(self) -> None:
        """Hook: :meth:`flush` found the connection no longer open while a transport is
        attached and not being aborted. The default closes the transport after the last
        frame (:meth:`end_transport`), unless it is gone."""
        if not self.transport_gone:
            self.end_transport()

    def events_handled(self) -> None:
        """Hook: every event of one read (or tick, or API call) has been dispatched (called
        once per outermost batch, before its write)."""

    def first_bytes_seen(self) -> bool:
        """Hook (with :attr:`watch_first_bytes`): called on each read of a byte stream until
        :data:`FIRST_BYTES_WATCHED` bytes have come (they are in :attr:`first_bytes`), before
        the read is handed to the connection. A protocol that recognises another protocol's
        client there may close the connection (with its own error) and return True: the read
        is then not handed on.

        :returns: False (the default): the bytes go to the connection as usual.
        """
        return False

    def name_wrong_client(self, own_protocol: str) -> bool:
        """A server closing a connection whose first message it rejected: when its
        :attr:`first_bytes` are another protocol's client's
        (:func:`~rsocket_tx.transports.peers.guess_client`), log (level warn) what they look
        like and which server to give them to.

        :param own_protocol: this protocol's name among the one-port server's
            (``"rsocket"``, ``"jini-mux"``, ...): its own sniffer is not asked.
        :returns: whether a line was logged.
        """
        guess = guess_client(self.first_bytes, exclude=own_protocol)
        if guess is None:
            return False
        self.log.warn("{protocol} connection: the first bytes are not this protocol's; they "
                      "look like {guess}", protocol=self.protocol_name, guess=guess)
        return True

    def release(self) -> None:
        """Hook: the connection is over and its transport is gone: drop what would make a
        reference cycle through this protocol (the dispatch table of bound methods, pending
        timers), so that reference counting frees the protocol, its connection and their
        buffers at once, without waiting for the cyclic garbage collector. The bridge calls
        it at the end of ``connectionLost`` when the connection is no longer open; a protocol
        whose session outlives its transport calls it when the session ends. A subclass
        extends it to clear its own tables (and calls this one). Called once; events handed
        to :meth:`handle_events` afterwards are dropped."""
        if self.released:
            return
        self.released = True
        self.__dict__.pop("dataReceived", None)  # (the first reads' watch: no cycle left)
        self.log_closed()
        self.stop_timers()
        self.event_handlers = {}
        self.held = None

    def log_closed(self) -> None:
        """Log the connection's "closed" line (level info, with :attr:`end_reason`), once;
        :meth:`release` calls it (a protocol that tells others of the end first, e.g. fires
        Deferreds, calls it before that)."""
        if self._closed_logged or self.connection is None:
            return
        self._closed_logged = True
        self.log.info("{protocol} connection closed: {why}", protocol=self.protocol_name,
                      why=self.end_reason or "closed")

    # ------------------------------------------------------------------ IProtocol

    def makeConnection(self, transport) -> None:
        self._handshake_done = False  # (a TLS handshake of this transport is still to come)
        super().makeConnection(transport)

    def connectionMade(self) -> None:
        """Build the connection (:meth:`make_connection`), become the transport's producer,
        run :meth:`connection_started`, write what is queued and schedule the first tick."""
        self.message_transport = IFrameTransport.providedBy(self.transport)
        self.log.peer = _peer_of(self.transport)
        self.log.info("{protocol} connection opened", protocol=self.protocol_name)
        self.connection = self.make_connection()
        if self.watch_first_bytes and not self.message_transport:
            # the first reads go through _first_reads, an instance attribute removed once
            # they are in: the class's dataReceived stays the path of every later read
            self.dataReceived = self._first_reads  # type: ignore[method-assign]
        self.live_transport.registerProducer(self, True)
        self.connection_started()
        self.flush()
        self.schedule_tick()

    def dataReceived(self, data: bytes) -> None:
        self.handle_read(self.connection.receive_data(data, self.reactor.seconds()))

    def _first_reads(self, data: bytes) -> None:
        """The reads of a byte stream until :data:`FIRST_BYTES_WATCHED` bytes are in: keep
        them (:attr:`first_bytes`), ask :meth:`first_bytes_seen`, hand them on."""
        kept = self.first_bytes
        kept = self.first_bytes = kept + data[:FIRST_BYTES_KEPT - len(kept)]
        if len(kept) >= FIRST_BYTES_WATCHED:
            del self.dataReceived  # (the class's again, for every later read)
        if self.first_bytes_seen():
            self.flush()
            return
        type(self).dataReceived(self, data)

    def frameReceived(self, frame: bytes) -> None:
        """One whole frame (no length prefix) from an
        :class:`~rsocket_tx.interfaces.IFrameTransport`: one WebSocket binary message."""
        self.handle_read(self.connection.receive_frame(frame, self.reactor.seconds()))

    def framesReceived(self, frames: list[bytes]) -> None:
        """Several whole frames from an :class:`~rsocket_tx.interfaces.IFrameTransport` (the
        messages of one read), handled as one read of a byte stream: their events in one
        batch, one write."""
        now = self.reactor.seconds()
        receive = self.connection.receive_frame
        events = []
        for frame in frames:
            events += receive(frame, now)
        self.handle_read(events)

    def connectionLost(self, reason: Failure | None = None) -> None:
        limit, self.connection_limit = self.connection_limit, None
        if limit is not None:
            limit.release()  # (a server's count of open connections)
        error = tls_error(reason) if reason is not None else None
        if error is not None:  # OpenSSL's tuple of codes becomes words
            self.tls_failure = error
            reason = Failure(error)
        if self.end_reason is None:
            self.end_reason = describe_loss(reason)  # (unless the protocol knows better)
        waiters, self._secured = self._secured, []
        try:
            self.transport_lost(reason)
        finally:
            for d in waiters:
                d.errback(reason if reason is not None else Failure(ConnectionDone()))
            if not self.is_open:
                self.release()

    # ------------------------------------------------------------------ TLS

    def handshakeCompleted(self) -> None:
        """``IHandshakeListener``: the TLS handshake under this protocol is done (the peer's
        certificate and host name verified)."""
        self._handshake_done = True
        waiters, self._secured = self._secured, []
        for d in waiters:
            d.callback(self)

    def when_secured(self) -> Deferred:
        """A Deferred firing with this protocol once its TLS handshake is done (at once when
        the transport is not TLS, or the handshake is already done); it fails with the
        :class:`~rsocket_tx.transports.tls.TLSError` (or other reason) the connection was lost
        to."""
        if not isinstance(self.transport, TLSMemoryBIOProtocol) or self._handshake_done:
            return succeed(self)
        d = Deferred()
        self._secured.append(d)
        return d

    # ------------------------------------------------------------------ IPushProducer

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        self.buffered = 0  # a transport resumes us once its buffer has drained
        self.producing_resumed()

    def stopProducing(self) -> None:
        self.paused = True

    # ------------------------------------------------------------------ state

    @property
    def live_transport(self) -> MuxTransport:
        """The transport (:class:`MuxTransport`), for code that runs only while there is
        one (``transport`` is None before ``makeConnection``).

        :raises AssertionError: there is no transport.
        """
        transport = self.transport
        assert transport is not None, "no transport yet"
        # (Twisted declares ``transport`` an ITransport; ours provide ITCPTransport and
        # IConsumer as well, or IFrameTransport)
        return cast(MuxTransport, transport)

    @property
    def is_open(self) -> bool:
        """True while the connection is open (built and not ended)."""
        conn = self.connection
        return conn is not None and conn.is_open

    def transport_attached(self) -> None:
        """A subclass gave this protocol a new transport (a resumed session): clear what the
        previous transport left (:attr:`transport_gone`, :attr:`aborting`,
        :attr:`buffered`, the half-close)."""
        self.transport_gone = False
        self.aborting = False
        self.buffered = 0
        self._write_closed = False
        self.log.peer = _peer_of(self.transport)

    # ------------------------------------------------------------------ output

    def flush(self, force: bool = False) -> None:
        """Write what the connection queued, in one ``transport.write``.

        While a read is being handled, writes are held until its end (batching), unless
        ``force``: an outbound pump forces a write every few hundred KiB so the transport can
        apply backpressure (``pauseProducing``) mid-batch. Then :meth:`data_flushed`, and
        :meth:`connection_ended` if the connection is no longer open.
        """
        if self.dispatching and not force:
            return
        conn = self.connection
        if conn is None:
            return
        chunks = conn.chunks_to_send()
        if chunks:
            paused = self.paused
            if paused:
                # the transport's buffer is full: what we add now waits for the peer to read
                self.buffered += sum(map(len, chunks))
                if self.buffered > self.max_send_buffer_size:
                    self._excessive_buffering()
                    return
            transport = self.live_transport
            if self.message_transport:
                # a message transport: with no length prefix each chunk is one whole frame
                transport.writeFrames(chunks)
            elif len(chunks) <= 4:
                # one frame, or a large payload queued as header + data: no copy here
                transport.writeSequence(chunks)
            else:
                transport.write(b"".join(chunks))  # many small frames: one C-level join
            if self.paused and not paused:
                # this write filled the transport's buffer: it waits for the peer, in full
                self.buffered = sum(map(len, chunks))
                if self.buffered > self.max_send_buffer_size:
                    self._excessive_buffering()
                    return
        self.data_flushed()
        if not conn.is_open and self.transport is not None and not self.aborting:
            self.connection_ended()

    def _excessive_buffering(self) -> None:
        self.aborting = True
        self.excessive_buffering(
            f"the peer is not reading: {self.buffered} bytes are queued for it, more than the "
            f"max_send_buffer_size of {self.max_send_buffer_size} bytes; the connection is "
            "aborted")

    def flush_soon(self) -> None:
        """Write what the connection queued at the end of this reactor turn.

        Calls made by application code (outside a read) are coalesced: a burst of requests
        issued in one turn goes out in one ``transport.write``. No latency is added: a
        transport writes to its socket only when the reactor next polls, and this delayed call
        runs before that poll.
        """
        if self.dispatching or self._flush_call is not None:
            return  # the end of the read being handled, or the pending call, writes it
        self._flush_call = self.reactor.callLater(0, self._flush_later)

    def _flush_later(self) -> None:
        self._flush_call = None
        self.flush()

    def end_transport(self) -> None:
        """Close the transport after our last frame (often an error frame).

        On a message transport (WebSocket): its clean close (the close handshake). On TCP:
        half-close (FIN after the last byte) and keep reading until the peer closes,
        aborting after :data:`ABORT_DELAY` seconds. Closing outright while the peer is still
        sending (e.g. the rest of a frame written in several writes) makes our kernel answer
        with RST, and a peer that receives RST may drop our last frame unread.
        """
        transport = self.live_transport
        if self.message_transport or not IHalfCloseableDescriptor.providedBy(transport):
            # (a WebSocket, or not a real TCP socket)
            transport.loseConnection()
            return
        if self._write_closed:
            return
        self._write_closed = True
        transport.loseWriteConnection()
        if self._abort_call is None:  # (a graceful close's abort timer may be running)
            self._abort_call = self.reactor.callLater(ABORT_DELAY, transport.abortConnection)

    def abort_later(self, delay: float, why: str) -> None:
        """Abort the transport in ``delay`` seconds unless it is gone by then (the last
        resort of a graceful close whose peer does not close); an abort already due sooner
        stays.

        :param delay: seconds.
        :param why: logged (level info) when the abort happens.
        """
        call = self._abort_call
        if call is None:
            self._abort_call = self.reactor.callLater(delay, self._abort_transport, why)
        elif call.getTime() > self.reactor.seconds() + delay:
            call.reset(delay)

    def _abort_transport(self, why: str) -> None:
        self._abort_call = None
        if self.transport is None or self.transport_gone:
            return
        self.log.info("{why}", why=why)
        self.aborting = True
        self.live_transport.abortConnection()

    # ------------------------------------------------------------------ time

    def schedule_tick(self) -> None:
        """(Re)schedule the tick at ``connection.next_deadline()`` (none if it is None)."""
        deadline = self.connection.next_deadline()
        if deadline is None:
            return
        delay = max(0.0, deadline - self.reactor.seconds())
        if self._timer is not None and self._timer.active():
            self._timer.reset(delay)
        else:
            self._timer = self.reactor.callLater(delay, self._tick)

    def _tick(self) -> None:
        self._timer = None
        self.handle_read(self.connection.tick(self.reactor.seconds()))
        self.schedule_tick()

    def stop_timers(self, abort: bool = True) -> None:
        """Cancel the pending tick and coalesced write, and (``abort``) the pending abort of
        the transport."""
        calls = (self._timer, self._flush_call, self._abort_call) if abort else \
            (self._timer, self._flush_call)
        for call in calls:
            if call is not None and call.active():
                call.cancel()
        self._timer = self._flush_call = None
        if abort:
            self._abort_call = None

    def cancel_tick(self) -> None:
        """Cancel the pending tick (the connection has no deadline left)."""
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        self._timer = None

    # ------------------------------------------------------------------ events

    def handle_events(self, events: list) -> None:
        """Dispatch ``events`` through :attr:`event_handlers`, then write (unless called
        inside another dispatch, whose end writes).

        While :attr:`held` is a list the events join it instead. A handler that raises is
        logged (an application bug must not kill the connection); once :attr:`ended` is set
        the rest of the batch is dropped; a handler that sets :attr:`held` holds the rest of
        the batch. After the outermost batch :meth:`events_handled` runs.
        """
        if self.held is not None:
            self.held.extend(events)
            return
        if self.released:
            return
        was = self.dispatching
        self.dispatching = True
        try:
            handlers = self.event_handlers
            for i, event in enumerate(events):
                try:
                    handlers[event.__class__](event)
                except Exception:  # noqa: BLE001 - an app bug must not kill the connection
                    self.log.failure("error handling {event!r}", event=event)
                if self.held is not None:  # the application is deciding: hold the rest
                    self.held.extend(events[i + 1:])
                    return
                if self.ended:
                    # the connection closed (e.g. its opening refused): the rest is moot
                    break
            if not was:
                self.events_handled()
        finally:
            self.dispatching = was
        self.flush()

    def handle_read(self, events: list) -> None:
        """Dispatch the events of one read (or tick) with :meth:`handle_events`, then write
        what the connection queued, once: :meth:`flush` (handle_events has written already
        unless it held the events, or there were none)."""
        if events:
            self.handle_events(events)
            if self.held is None and not self.released:
                return  # (handle_events wrote at its end)
        self.flush()

    def handle_events_now(self, events: list) -> None:
        """Dispatch ``events`` even while others are :attr:`held` (e.g. the end of the
        connection); the held ones stay held if the connection is still open."""
        held, self.held = self.held, None
        self.handle_events(events)
        if held is not None and self.connection.is_open:
            self.held = held
