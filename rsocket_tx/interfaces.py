"""The seams of the Twisted layer, as documented interfaces (the model is AMP's
``IBoxSender``/``IBoxReceiver``).

The modules of the Twisted side talk to each other only through these, never through each
other's underscore names (``tests/test_seams.py`` enforces it)::

    IFrameTransport        a message transport (WebSocket) under a MuxProtocol
    IMuxConnection         the sans-IO connection a MuxProtocol (rsocket_tx.bridge) drives
    IConnectionObserver    a factory watching the connections it built
    IStreamHost            what streams and pumps (rsocket_tx.streams) ask of their connection
    IStreamReceiver        what the connection tells an inbound stream
    ILeaseHost             what a LeaseHandle (rsocket_tx.lease) asks of its connection
    IRequesterHost         what the requester handle (rsocket_tx.requester.RSocket) asks

Providers: :class:`~rsocket_tx.protocol.RSocketProtocol` provides ``IStreamHost``,
``ILeaseHost`` and ``IRequesterHost``; :class:`~rsocket_tx.streams.RequestStream` provides
``IStreamReceiver``; the RSocket factories provide ``IConnectionObserver``; the WebSocket
protocols of :mod:`rsocket_tx.transports.websocket` provide ``IFrameTransport``.
"""

from __future__ import annotations

from zope.interface import Attribute, Interface

__all__ = [
    "IConnectionObserver",
    "IFrameTransport",
    "ILeaseHost",
    "IMuxConnection",
    "IRequesterHost",
    "IStreamHost",
    "IStreamReceiver",
]


class IFrameTransport(Interface):
    """A message transport (WebSocket): each protocol frame travels as one message, with no
    length prefix (RSocket 1.0 Protocol §Framing: the transport keeps frame boundaries).

    A :class:`~rsocket_tx.bridge.MuxProtocol` whose transport provides it is fed whole frames
    through ``frameReceived``/``framesReceived`` and writes with :meth:`writeFrames`; an
    :class:`~rsocket_tx.protocol.RSocketProtocol` then makes its connection with
    ``length_prefixed=False``. The protocol registers itself as the transport's streaming
    producer (``registerProducer(producer, True)``), which must pause it while the underlying
    socket's buffer is full. ``loseConnection`` closes the message channel cleanly after what
    was written (the WebSocket close handshake), ``abortConnection`` drops it at once. (Also
    exported as ``rsocket_tx.protocol.IFrameTransport`` and
    ``rsocket_tx.transports.websocket.IFrameTransport``.)
    """

    def writeFrames(frames: list[bytes]) -> None:
        """Send each item of ``frames`` (one whole frame, no length prefix) as one message, in
        order. Frames written after the transport began closing are dropped."""

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


class IMuxConnection(Interface):
    """The sans-IO connection a :class:`~rsocket_tx.bridge.MuxProtocol` drives (duck-typed:
    nothing checks ``providedBy``; the model is python-hyper's h2 ``H2Connection``).

    Time comes in as an argument (seconds, the reactor's clock); the connection reads no clock
    and does no I/O. Every method that takes input returns the events it caused, a list of
    event objects whose class selects the handler in ``MuxProtocol.event_handlers``.
    :class:`~rsocket_tx.core.connection.RSocketConnection` provides it.
    """

    is_open = Attribute("bool: the connection has not ended (False once closed or lost).")

    def receive_data(data: bytes, now: float) -> list:
        """Bytes from a byte-stream transport (TCP, TLS): any split, frames may straddle
        calls. :returns: the events they caused."""

    def receive_frame(frame: bytes, now: float) -> list:
        """One whole frame from a message transport (:class:`IFrameTransport`), no length
        prefix. Needed only for protocols served over WebSocket. :returns: the events."""

    def chunks_to_send() -> list[bytes]:
        """Take what is queued for the transport (possibly an empty list). For a message
        transport each chunk is one whole frame; for a byte stream the chunks are written in
        order, as they are."""

    def tick(now: float) -> list:
        """Time has passed: run the deadlines due at ``now`` (keepalive, timeouts).
        :returns: the events they caused."""

    def next_deadline() -> float | None:
        """When :meth:`tick` is next due (same clock as ``now``), or None for never."""

    def connection_lost(why: str) -> list:
        """The transport is gone (``why``: what happened, in words): end every stream.
        :returns: the events (a connection-closed event at least, when it was open)."""


class IConnectionObserver(Interface):
    """A factory that watches the connections it built (instead of the protocol calling
    private hooks of its factory). An :class:`~rsocket_tx.protocol.RSocketProtocol` whose
    ``factory`` does not provide it is simply not observed.

    For a resumable session (RSocket 1.0 Protocol §Resuming Operation) one protocol outlives
    several transports: :meth:`connection_made` is called for its first transport only,
    :meth:`connection_lost` once the session is over.
    """

    sessions = Attribute(
        "Server: the :class:`~rsocket_tx.core.resume.SessionStore` of resumable sessions by "
        "resume token, or None when resumption is not enabled. Clients: None.")

    def connection_made(protocol) -> None:
        """``protocol`` is connected (its first transport; its SETUP, for a client, is
        written)."""

    def connection_lost(protocol) -> None:
        """``protocol`` is no connection any more: its session is over and its transport gone,
        or (server) it began with RESUME and handed its transport to the session it
        resumes."""

    def transport_lost(protocol) -> None:
        """A resumable session lost its transport and waits for a resume (a client
        reconnects; a server waits for the client's RESUME). The observer may end the session
        with ``protocol.end_session(why)``."""

    def session_resumed(protocol) -> None:
        """A resumable session resumed on a new transport."""

    def session_ended(protocol) -> None:
        """A resumable session ended (closed, expired, refused a resume)."""


class IStreamHost(Interface):
    """What a stream's Twisted objects (:class:`~rsocket_tx.streams.RequestStream`,
    :class:`~rsocket_tx.streams.OutboundPump`) ask of the connection that carries them.

    Stream ids are the connection's (RSocket: 31-bit, odd for streams the client opened);
    credit counts items (RSocket 1.0 Protocol §Flow Control: request-n).
    """

    paused = Attribute(
        "bool: the transport's write buffer is full (IPushProducer paused), or there is no "
        "transport (a resumable session waiting): pumps must not pull now.")
    reactor = Attribute("The ``IReactorTime`` provider to schedule later work with.")

    def credit(stream_id: int) -> int:
        """Items the peer still allows us to send on ``stream_id`` (0 when none; negative
        when the stream is gone)."""

    def send_item(stream_id: int, payload) -> None:
        """Queue ``payload`` (a :class:`~rsocket_tx.core.payload.Payload`) as the next item
        of ``stream_id`` (uses one credit). Written at the next :meth:`flush`."""

    def send_items(stream_id: int, payloads) -> None:
        """Queue ``payloads`` (a list of :class:`~rsocket_tx.core.payload.Payload`) as the
        next items of ``stream_id``, one credit each: :meth:`send_item` for each, in one
        call (a pump's batch). Written at the next :meth:`flush`."""

    def request_more(stream_id: int, n: int) -> None:
        """Grant the peer ``n`` more items on ``stream_id`` (REQUEST_N), written at once."""

    def cancel(stream_id: int) -> None:
        """The local consumer cancelled ``stream_id``: CANCEL to the peer."""

    def flush(force: bool = False) -> None:
        """Write what is queued. While a read is being handled, writes wait for its end
        (batching) unless ``force``."""

    def wake_later(stream) -> bool:
        """While a read is being handled: queue ``stream`` (an :class:`IStreamReceiver`) to be
        woken (its ``wake()``) once every event of the read is delivered, and return True.
        Outside a read return False (the caller wakes it now)."""

    def pump_complete(pump) -> None:
        """``pump``'s source ended: complete its stream (COMPLETE, needing no credit)."""

    def pump_failed(pump, error) -> None:
        """``pump``'s source failed with ``error`` (an
        :class:`~rsocket_tx.core.errors.RSocketError`): ERROR on its stream."""


class IStreamReceiver(Interface):
    """What the connection tells an inbound stream (Reactive Streams' signals)."""

    def on_next(payload) -> None:
        """An item (:class:`~rsocket_tx.core.payload.Payload`) arrived."""

    def on_next_batch(payloads) -> None:
        """Several items (a list of :class:`~rsocket_tx.core.payload.Payload`, in order)
        arrived in one read: :meth:`on_next` for each, in one call."""

    def on_complete() -> None:
        """The peer completed the stream."""

    def on_error(error: BaseException) -> None:
        """The stream failed (the peer's ERROR, a CANCEL from the peer, the connection's
        end)."""

    def wake() -> None:
        """Hand a waiting consumer the first queued item (see
        :meth:`IStreamHost.wake_later`)."""


class ILeaseHost(Interface):
    """What a :class:`~rsocket_tx.lease.LeaseHandle` asks of its connection (RSocket 1.0
    Protocol §Lease Semantics)."""

    connection = Attribute(
        "The sans-IO :class:`~rsocket_tx.core.connection.RSocketConnection`, or None before "
        "the transport is connected.")
    reactor = Attribute("The ``IReactorTime`` provider of the policy's rounds.")
    log = Attribute("The connection's ``twisted.logger.Logger`` (a "
                    ":class:`~rsocket_tx.bridge.ConnectionLogger`: its lines carry the "
                    "connection id and peer).")

    def flush(force: bool = False) -> None:
        """Write what is queued (held to the end of a read being handled)."""

    def flush_soon() -> None:
        """Write what is queued at the end of this reactor turn."""


class IRequesterHost(Interface):
    """What the requester handle (:class:`~rsocket_tx.requester.RSocket`) asks of its
    connection. Every request method raises
    :class:`~rsocket_tx.core.errors.LocalProtocolError` when the connection is closed."""

    setup_info = Attribute("The connection's :class:`~rsocket_tx.responder.SetupInfo`, or None.")
    close_reason = Attribute("Why the connection closed (an RSocketError), or None.")
    is_open = Attribute("bool: the connection is open.")
    is_resumable = Attribute("bool: the connection was set up resumable (SETUP R flag).")
    is_closing = Attribute("bool: a graceful close is draining the open streams.")
    resumes = Attribute("int: successful resumptions of this session.")
    lease = Attribute("The connection's :class:`~rsocket_tx.lease.LeaseHandle`.")
    reactor = Attribute("The ``IReactorTime`` provider request timeouts are scheduled with.")
    connection = Attribute(
        "The sans-IO :class:`~rsocket_tx.core.connection.RSocketConnection` (its ``config``: "
        "the send limits), or None before the transport is connected.")
    max_send_buffer_size = Attribute(
        "int: bytes that may wait in the transport for the peer to read (the "
        "``ConnectionConfig`` setting); a payload that needs more is refused before it is "
        "sent (:func:`~rsocket_tx.streams.check_send_size`).")

    def request_response(payload):
        """Request-response: a Deferred of the response Payload."""

    def fire_and_forget(payload):
        """Fire-and-forget: a Deferred firing once the frame is handed to the transport."""

    def fire_and_forget_many(payloads):
        """Fire-and-forget each of a list of Payloads, in order: one Deferred firing once
        every frame is handed to the transport."""

    def metadata_push(metadata: bytes):
        """METADATA_PUSH: a Deferred firing once the frame is handed to the transport."""

    def request_stream(payload, prefetch: int | None):
        """Request-stream: a :class:`~rsocket_tx.streams.RequestStream` (``prefetch`` None:
        the default window, sized by bytes too; a number: a fixed window of items)."""

    def request_channel(payload, outbound, prefetch: int | None, complete: bool, encode=None):
        """Request-channel: the responder's items as a
        :class:`~rsocket_tx.streams.RequestStream`; ``encode`` (a codec's ``encode``, or
        None) turns ``outbound`` items that are not Payloads into payload data."""

    def when_closed():
        """A Deferred firing with None once the connection is over and its transport gone."""

    def when_resumed():
        """A Deferred firing with None at the session's next resumption."""

    def close_gracefully(drain_timeout: int | None = None):
        """Close gracefully (CONNECTION_CLOSE): a Deferred firing once the transport is
        gone."""
