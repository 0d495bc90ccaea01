"""Interceptors: observe every RSocket connection and request, on both sides.

An :class:`Interceptor` is told when a connection opens and closes and when a request
starts and ends, whether this side is its requester or its responder (RSocket 1.0 Protocol
§Terminology). Register interceptors on a server (``serve(..., interceptors=[...])``,
:class:`~rsocket_tx.protocol.RSocketServerFactory` ``(interceptors=...)``) or a client
(``connect(..., interceptors=[...])``,
:class:`~rsocket_tx.protocol.RSocketClientFactory` ``(interceptors=...)``). The
Prometheus exporter (:mod:`rsocket_tx.metrics`) and the OpenTelemetry tracing
(:mod:`rsocket_tx.otel`) are interceptors.

What an interceptor sees:

* :meth:`Interceptor.connection_opened` / :meth:`Interceptor.connection_closed` with a
  :class:`ConnectionInfo` (side ``"client"``/``"server"``, the peer address). A resumable
  session (spec §Resuming Operation) is one connection however many transports it used.
* :meth:`Interceptor.request_started` / :meth:`Interceptor.request_ended` with a
  :class:`RequestInfo`: the :class:`Side` (requester or responder), the :class:`Interaction`,
  the route (the first routing tag of the request's metadata, ``Extensions/Routing.md``,
  when the connection's metadata MIME type is composite or routing), and at the end the
  duration (seconds, by the reactor's clock), the outcome (:data:`COMPLETE`,
  :data:`CANCELLED`, or the spec name of the error code, e.g. ``"APPLICATION_ERROR"``,
  spec §Error Codes) and the payload bytes (data + metadata) and items each way. The request
  payload is the first item of its side. Fire-and-forget and metadata-push end as soon as
  they are sent (requester) or handed to the responder (responder).
* :class:`RouteLabels` turns a request into a label value from a bounded set (the
  ``@route`` pattern that serves it, :data:`UNMATCHED`, at most
  :data:`DEFAULT_MAX_ROUTE_LABELS` values, then :data:`OTHER`): the metrics and span names
  of :mod:`rsocket_tx.metrics` and :mod:`rsocket_tx.otel` use it, so a peer sending many
  distinct routes cannot grow them.
* A requester-side :meth:`Interceptor.request_started` may add entries to the request's
  composite metadata (:meth:`RequestInfo.add_metadata_entry`) before it is sent: that is how
  :mod:`rsocket_tx.otel` carries the trace context.

An interceptor's exceptions are logged with their traceback (``log.failure``) and do not
disturb the connection, nor the interceptors after it, which are still told.
With no interceptor registered nothing of this module runs: the factory builds plain
connections.

How it is wired (the seams are public names): :func:`observe` gives a protocol a
:class:`ConnectionTap`, which wraps the protocol's event table
(:attr:`~rsocket_tx.bridge.MuxProtocol.event_handlers`: SETUP, requests and items received,
errors, cancels, the connection's end) and builds its sans-IO connection from a subclass of its
``connection_class`` whose public request and send methods report to the tap (requests made,
items, COMPLETE, ERROR and CANCEL sent). A stream ends when the sans-IO connection no longer
has it (``has_stream``), with the outcome of the frame that ended it.
"""

from __future__ import annotations

import enum
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from twisted.internet.interfaces import IReactorTime
from twisted.logger import Logger

from .core import errors as E
from .core.events import (
    CancelReceived,
    ConnectionClosed,
    MetadataPushReceived,
    PayloadReceived,
    PayloadsReceived,
    RequestReceived,
    SetupReceived,
    StreamErrored,
)
from .core.frames import FrameType
from .core.payload import Payload
from .extensions import COMPOSITE_METADATA, encode_composite, parse_metadata
from .routing import route_pattern

__all__ = [
    "CANCELLED",
    "COMPLETE",
    "DEFAULT_MAX_ROUTE_LABELS",
    "OTHER",
    "UNMATCHED",
    "ConnectionInfo",
    "ConnectionTap",
    "Interaction",
    "Interceptor",
    "RequestInfo",
    "RouteLabels",
    "Side",
    "observe",
    "outcome_of",
]

log = Logger()

_Event = TypeVar("_Event")
#: a protocol's handler of one event type (what the ``wrap_*`` methods wrap)
_On = Callable[[_Event], None]

#: The outcome of a request whose every half completed (PAYLOAD with C, or COMPLETE).
COMPLETE = "complete"
#: The outcome of a request ended by a CANCEL (either side's; spec §CANCEL Frame).
CANCELLED = "cancelled"

#: The route label of a responder-side request with a route that no ``@route`` pattern
#: serves (a fallback serves it, it is rejected, or the responder declares no routes).
UNMATCHED = "<unmatched>"
#: The route label every value past :attr:`RouteLabels.max_values` folds into.
OTHER = "<other>"
#: How many distinct route label values a :class:`RouteLabels` keeps by default.
DEFAULT_MAX_ROUTE_LABELS = 100


class Interaction(enum.Enum):
    """The interaction model of a request (spec §Interaction Types); the value is what
    metrics and spans show."""

    REQUEST_RESPONSE = "request-response"
    FIRE_AND_FORGET = "fire-and-forget"
    REQUEST_STREAM = "request-stream"
    REQUEST_CHANNEL = "request-channel"
    METADATA_PUSH = "metadata-push"


class Side(enum.Enum):
    """Which end of a request this side is (spec §Terminology)."""

    REQUESTER = "requester"
    RESPONDER = "responder"


_INTERACTIONS = {
    FrameType.REQUEST_RESPONSE: Interaction.REQUEST_RESPONSE,
    FrameType.REQUEST_FNF: Interaction.FIRE_AND_FORGET,
    FrameType.REQUEST_STREAM: Interaction.REQUEST_STREAM,
    FrameType.REQUEST_CHANNEL: Interaction.REQUEST_CHANNEL,
}


def outcome_of(error: BaseException | None) -> str:
    """The outcome naming ``error``: the spec name of its error code for an
    :class:`~rsocket_tx.core.errors.RSocketError` (``"APPLICATION_ERROR"``, ``"REJECTED"``,
    ``"CONNECTION_ERROR"``, ``"0x00000301"`` for an application-defined code; spec §Error
    Codes), :data:`CANCELLED` for ``CANCELED``, the class name for another exception (a
    request refused locally, e.g. ``"LeaseError"`` is a REJECTED), :data:`COMPLETE` for None.
    """
    if error is None:
        return COMPLETE
    if isinstance(error, E.RSocketError):
        if error.error_code == E.ErrorCode.CANCELED:
            return CANCELLED
        return E.error_code_name(error.error_code)
    return type(error).__name__


@dataclass(slots=True, eq=False)
class ConnectionInfo:
    """One connection, as interceptors see it.

    :ivar side: ``"client"`` or ``"server"``.
    :ivar peer: the peer's address as the connection's log lines give it
        (:func:`~rsocket_tx.bridge.describe_peer`: ``"127.0.0.1:50312"``, ``"[::1]:50312"``,
        a UNIX socket's path; ``"?"`` when the transport does not say).
    :ivar protocol_ref: a weak reference to the
        :class:`~rsocket_tx.protocol.RSocketProtocol` (see :attr:`protocol`).
    :ivar opened: when it opened, seconds (``reactor.seconds()``).
    :ivar closed: when it closed, seconds; None while open.
    :ivar error: why it closed (an :class:`~rsocket_tx.core.errors.RSocketError`), None for
        a local close without error or while open.
    :ivar context: a dict for interceptors' own per-connection state (key it by the
        interceptor).
    """

    side: str
    peer: str
    protocol_ref: Callable[[], Any]
    opened: float
    closed: float | None = None
    error: BaseException | None = None
    context: dict[object, Any] = field(default_factory=dict)

    @property
    def protocol(self) -> Any:
        """The :class:`~rsocket_tx.protocol.RSocketProtocol` (its ``setup_info``,
        ``rsocket``, ...), or None once it has been freed (it is referred to weakly: no
        reference cycle)."""
        return self.protocol_ref()

    @property
    def metadata_mime_type(self) -> str | None:
        """The connection's metadata MIME type (SETUP; spec §SETUP Frame), None before the
        server has the client's SETUP."""
        protocol = self.protocol_ref()
        setup = None if protocol is None else protocol.setup_info
        return None if setup is None else setup.metadata_mime_type


@dataclass(slots=True, eq=False)
class RequestInfo:
    """One request (a stream, or a fire-and-forget or metadata-push), as interceptors see it.

    :ivar connection: its :class:`ConnectionInfo`.
    :ivar side: :class:`Side`: whether this side is the requester or the responder.
    :ivar interaction: :class:`Interaction`.
    :ivar stream_id: the stream id (0 for metadata-push; before the requester's stream is
        opened, in its ``request_started``, 0 too).
    :ivar route: the first routing tag of the request metadata, or None.
    :ivar route_pattern: responder side: the ``@route`` pattern of the responder that serves
        :attr:`route` (``"orders.{id}"`` for ``"orders.42"``; a literal route is its own
        pattern; :func:`rsocket_tx.routing.route_pattern`), None when none does (no route, a
        fallback serves it, or nothing) and on the requester side.
    :ivar metadata: the request's metadata bytes (or None); a requester's ``request_started``
        may replace it (see :meth:`add_metadata_entry`), and what it holds then is sent.
    :ivar started: when it started, seconds (``reactor.seconds()``).
    :ivar ended: when it ended, seconds; None while running.
    :ivar outcome: None while running, then :data:`COMPLETE`, :data:`CANCELLED` or the error
        code name (see :func:`outcome_of`).
    :ivar error: the error that ended it (the peer's, or ours), else None.
    :ivar bytes_sent: payload bytes (data + metadata) this side sent on it.
    :ivar bytes_received: payload bytes this side received on it.
    :ivar items_sent: payloads this side sent (the request payload counts for the requester).
    :ivar items_received: payloads this side received (the request payload counts for the
        responder).
    :ivar context: a dict for interceptors' own per-request state (key it by the
        interceptor).
    """

    connection: ConnectionInfo
    side: Side
    interaction: Interaction
    stream_id: int
    route: str | None
    metadata: bytes | None
    started: float
    ended: float | None = None
    outcome: str | None = None
    error: BaseException | None = None
    route_pattern: str | None = None
    bytes_sent: int = 0
    bytes_received: int = 0
    items_sent: int = 0
    items_received: int = 0
    context: dict[object, Any] = field(default_factory=dict)

    @property
    def duration(self) -> float | None:
        """Seconds from start to end; None while running."""
        return None if self.ended is None else self.ended - self.started

    def add_metadata_entry(self, mime_type: str, content: bytes) -> bool:
        """Requester, in ``request_started``: append a composite metadata entry
        (``Extensions/CompositeMetadata.md``) to the request before it is sent.

        :param mime_type: the entry's MIME type (well-known ones take 1 byte).
        :param content: the entry's bytes (at most 16,777,215).
        :returns: True if added; False when the connection's metadata MIME type is not
            composite (nothing can be added without changing what the metadata means).
        :raises ValueError: a MIME type or content the composite format cannot carry.
        """
        if self.connection.metadata_mime_type != COMPOSITE_METADATA:
            return False
        entry = encode_composite([(mime_type, content)])
        self.metadata = entry if self.metadata is None else self.metadata + entry
        return True


class Interceptor:
    """The base of interceptors: every method does nothing; override those you need.

    Methods are called on the reactor thread, synchronously, in the order the interceptors
    were registered; they must not block. An exception is logged and ignored.
    """

    def connection_opened(self, connection: ConnectionInfo) -> None:
        """A connection opened: a client's when its transport connected (its SETUP is on
        its way), a server's when the client's SETUP arrived.

        :param connection: the :class:`ConnectionInfo`.
        """

    def connection_closed(self, connection: ConnectionInfo) -> None:
        """A connection closed (its ``closed`` and ``error`` are set); every request on it
        has ended before.

        :param connection: the :class:`ConnectionInfo`.
        """

    def request_started(self, request: RequestInfo) -> None:
        """A request started: the requester is about to send it, or the responder received
        it and is about to call its handler.

        :param request: the :class:`RequestInfo`; a requester-side interceptor may add
            metadata entries (:meth:`RequestInfo.add_metadata_entry`).
        """

    def request_ended(self, request: RequestInfo) -> None:
        """A request ended: ``ended``, ``outcome`` and ``error`` are set, and the counts of
        bytes and items are final.

        :param request: the :class:`RequestInfo`.
        """


class RouteLabels:
    """Labels requests by route with a bounded set of values: the ``route`` label of
    :mod:`rsocket_tx.metrics` and the span name of :mod:`rsocket_tx.otel`. The routes of a
    server's requests are chosen by its peers; a label value per distinct route would let a
    peer grow the metrics (memory, scrape size and time) without end.

    The label of a request (:meth:`__call__`):

    * with ``route_label`` given: ``route_label(request.route)``;
    * else on the responder side: the ``@route`` pattern that serves it
      (:attr:`RequestInfo.route_pattern`, e.g. ``"orders.{id}"``), :data:`UNMATCHED` when
      none does;
    * else (the requester side: this side's application chose the route): the route;
    * ``""`` for a request without a route (without ``route_label``).

    At most ``max_values`` distinct values are kept (``""``, :data:`UNMATCHED` and
    :data:`OTHER` not counted); every further one is :data:`OTHER`, and the first time that
    happens a warning is logged (once per instance). Values once kept stay kept.

    :param max_values: the cap on distinct values (>= 1; default
        :data:`DEFAULT_MAX_ROUTE_LABELS`).
    :param route_label: ``callable(route: str | None) -> str`` replacing the default
        mapping (the cap still applies), or None.
    :param name: what the values label, for the warning (e.g. ``"the Prometheus route
        label"``).
    :raises ValueError: ``max_values`` is not an int >= 1.
    :raises TypeError: ``route_label`` is not callable.
    """

    __slots__ = ("max_values", "route_label", "name", "values", "folded")

    def __init__(self, max_values: int = DEFAULT_MAX_ROUTE_LABELS, *,
                 route_label: Callable[[str | None], str] | None = None,
                 name: str = "the route label") -> None:
        if isinstance(max_values, bool) or not isinstance(max_values, int) or max_values < 1:
            raise ValueError(f"max_values must be an int >= 1 (distinct route label values); "
                             f"got {max_values!r}")
        if route_label is not None and not callable(route_label):
            raise TypeError(f"route_label must be callable(route) -> str, got "
                            f"{type(route_label).__name__}")
        self.max_values = max_values
        self.route_label = route_label
        self.name = name
        #: the values kept
        self.values: set[str] = set()
        #: requests labelled :data:`OTHER` so far
        self.folded = 0

    def __call__(self, request: RequestInfo) -> str:
        """The label value of ``request`` (see the class docstring).

        :param request: the :class:`RequestInfo`.
        :returns: a value from a set of at most ``max_values + 3``.
        """
        if self.route_label is not None:
            value = str(self.route_label(request.route))
        elif request.route is None:
            return ""
        elif request.side is Side.RESPONDER:
            value = request.route_pattern or UNMATCHED
        else:
            value = request.route
        return self.bound(value)

    def bound(self, value: str) -> str:
        """``value`` if it is kept or there is room to keep it, else :data:`OTHER`."""
        values = self.values
        if value in values or value in ("", UNMATCHED, OTHER):
            return value
        if len(values) < self.max_values:
            values.add(value)
            return value
        if not self.folded:
            log.warn("{name}: more than {max_values} distinct values; further ones are "
                     "counted as {other!r} (first: {value!r}). Raise the cap, or map routes to "
                     "fewer values (@route patterns, route_label=)",
                     name=self.name, max_values=self.max_values, other=OTHER, value=value)
        self.folded += 1
        return OTHER


def _size(payload: Payload) -> int:
    metadata = payload.metadata
    return len(payload.data) if metadata is None else len(payload.data) + len(metadata)


#: protocol -> its tap (weak: the tap dies with its protocol)
_taps: weakref.WeakKeyDictionary[Any, ConnectionTap] = weakref.WeakKeyDictionary()


def observe(protocol: Any, interceptors: Iterable[Interceptor]) -> ConnectionTap:
    """Make ``interceptors`` observe ``protocol`` (an
    :class:`~rsocket_tx.protocol.RSocketProtocol` not connected yet). The factories call it
    from ``buildProtocol`` when they have interceptors.

    :param protocol: the protocol.
    :param interceptors: the :class:`Interceptor` instances, in the order they are told.
    :returns: its :class:`ConnectionTap` (the same one when called again).
    """
    tap = _taps.get(protocol)
    if tap is None:
        tap = _taps[protocol] = ConnectionTap(protocol, interceptors)
    return tap


class ConnectionTap:
    """Reports one protocol's connection and requests to its interceptors (see the module
    docstring for how). Refers to the protocol weakly: no reference cycle.

    :param protocol: the :class:`~rsocket_tx.protocol.RSocketProtocol`, not connected yet.
    :param interceptors: the :class:`Interceptor` instances.
    :ivar requests: the running requests by stream id.
    :ivar connection: the :class:`ConnectionInfo` once the transport connected.
    """

    def __init__(self, protocol: Any, interceptors: Iterable[Interceptor]) -> None:
        self.interceptors = tuple(interceptors)
        self.protocol_ref = weakref.ref(protocol)
        self.reactor: IReactorTime = protocol.reactor
        self.conn_ref: Callable[[], Any] = lambda: None
        self.requests: dict[int, RequestInfo] = {}
        self.connection: ConnectionInfo | None = None
        self.told_open = False
        base = protocol.connection_class
        observed = _observed_class(base)
        tap = self

        def build(*args: Any, **kwargs: Any) -> Any:
            conn = observed(*args, **kwargs)
            conn.tap = tap
            tap.opened(conn)
            return conn

        protocol.connection_class = build
        handlers = protocol.event_handlers
        for event_class, wrap in ((RequestReceived, self.wrap_request),
                                  (PayloadReceived, self.wrap_payload),
                                  (PayloadsReceived, self.wrap_payloads),
                                  (StreamErrored, self.wrap_errored),
                                  (CancelReceived, self.wrap_cancel),
                                  (MetadataPushReceived, self.wrap_metadata_push),
                                  (ConnectionClosed, self.wrap_closed),
                                  (SetupReceived, self.wrap_setup)):
            handler = handlers.get(event_class)
            if handler is not None:
                handlers[event_class] = wrap(handler)

    # ------------------------------------------------------------------ telling

    def tell(self, method: str, info: Any) -> None:
        """Call ``method`` of every interceptor with ``info``; log what raises."""
        for interceptor in self.interceptors:
            try:
                getattr(interceptor, method)(info)
            except Exception:  # noqa: BLE001 - an interceptor bug must not hurt the connection
                log.failure("interceptor {interceptor!r} raised in {method}",
                            interceptor=interceptor, method=method)

    def now(self) -> float:
        """The reactor's time, seconds."""
        return self.reactor.seconds()

    def opened(self, conn: Any) -> None:
        """The protocol built its sans-IO connection ``conn``: its transport connected. A
        client's connection opens for interceptors now, a server's with the client's SETUP
        (a server connection that begins with RESUME is handed to the session it resumes:
        one connection however many transports it used)."""
        # (the words of the connection's log lines: ConnectionLogger.peer, set from the
        # transport just before the connection is built)
        peer = getattr(getattr(self.protocol_ref(), "log", None), "peer", None) or "?"
        side = "client" if conn.is_client else "server"
        self.conn_ref = weakref.ref(conn)
        self.connection = ConnectionInfo(side, peer, self.protocol_ref, self.now())
        if conn.is_client:  # (a server's opens with the client's SETUP: wrap_setup)
            self.told_open = True
            self.tell("connection_opened", self.connection)

    def closed(self, error: BaseException | None) -> None:
        """The connection is over: end what still runs, then tell (once)."""
        info = self.connection
        if info is None or info.closed is not None:
            return
        failure = error if error is not None else E.ConnectionLostError(
            "the connection was closed")
        for sid in list(self.requests):
            self.finish(sid, outcome_of(failure), failure)
        info.closed = self.now()
        info.error = error
        if self.told_open:
            self.tell("connection_closed", info)

    # ------------------------------------------------------------------ requests

    def start(self, side: Side, interaction: Interaction, stream_id: int,
              metadata: bytes | None) -> RequestInfo:
        connection = self.connection
        assert connection is not None
        route = None
        if metadata:
            mime = connection.metadata_mime_type
            if mime is not None:
                route = parse_metadata(metadata, mime).route
        info = RequestInfo(connection, side, interaction, stream_id, route, metadata,
                           self.now())
        if route is not None and side is Side.RESPONDER:
            protocol = self.protocol_ref()
            responder = None if protocol is None else protocol.responder
            if responder is not None:
                info.route_pattern = route_pattern(
                    responder, interaction.value.replace("-", "_"), route)
        return info

    def requesting(self, interaction: Interaction, payload: Payload) -> tuple[RequestInfo,
                                                                              Payload]:
        """Requester: a request is about to be sent: tell, and return the payload to send
        (with the metadata the interceptors left)."""
        metadata = payload.metadata
        info = self.start(Side.REQUESTER, interaction, 0, metadata)
        self.tell("request_started", info)
        if info.metadata is not metadata:
            try:
                payload = Payload(payload.data, info.metadata)
            except TypeError:  # an interceptor bug must not hurt the request either
                log.failure("an interceptor left request metadata that is not bytes "
                            "({type}): the request is sent with its own metadata",
                            type=type(info.metadata).__name__)
                info.metadata = metadata
        info.items_sent = 1
        info.bytes_sent = _size(payload)
        return info, payload

    def sent_request(self, info: RequestInfo, stream_id: int) -> None:
        info.stream_id = stream_id
        if info.interaction is Interaction.FIRE_AND_FORGET:
            self.end(info, COMPLETE, None)
        else:
            self.requests[stream_id] = info

    def end(self, info: RequestInfo, outcome: str, error: BaseException | None) -> None:
        info.ended = self.now()
        info.outcome = outcome
        info.error = error
        self.tell("request_ended", info)

    def finish(self, stream_id: int, outcome: str, error: BaseException | None = None) -> None:
        """End the request on ``stream_id`` (if one runs) with ``outcome``."""
        info = self.requests.pop(stream_id, None)
        if info is not None:
            self.end(info, outcome, error)

    def settle(self, stream_id: int, outcome: str) -> None:
        """End the request on ``stream_id`` with ``outcome`` if its stream is over."""
        if stream_id in self.requests:
            conn = self.conn_ref()
            if conn is None or not conn.has_stream(stream_id):
                self.finish(stream_id, outcome)

    def sent(self, stream_id: int, payload: Payload) -> None:
        info = self.requests.get(stream_id)
        if info is not None:
            info.items_sent += 1
            info.bytes_sent += _size(payload)

    def sent_batch(self, stream_id: int, payloads: list[Payload]) -> None:
        """Items sent by the batch path (``send_payloads``): counted at once."""
        info = self.requests.get(stream_id)
        if info is not None:
            info.items_sent += len(payloads)
            info.bytes_sent += sum(map(_size, payloads))

    # ------------------------------------------------------------------ event wrappers

    def wrap_request(self, handler: _On[RequestReceived]) -> _On[RequestReceived]:
        def on_request(event: RequestReceived) -> None:
            interaction = _INTERACTIONS[event.frame_type]
            payload = event.payload
            info = self.start(Side.RESPONDER, interaction, event.stream_id, payload.metadata)
            info.items_received = 1
            info.bytes_received = _size(payload)
            if interaction is not Interaction.FIRE_AND_FORGET:
                self.requests[event.stream_id] = info
            self.tell("request_started", info)
            try:
                handler(event)
            finally:
                if interaction is Interaction.FIRE_AND_FORGET:
                    self.end(info, COMPLETE, None)
        return on_request

    def wrap_payload(self, handler: _On[PayloadReceived]) -> _On[PayloadReceived]:
        def on_payload(event: PayloadReceived) -> None:
            sid = event.stream_id
            info = self.requests.get(sid)
            payload = event.payload
            if info is not None:
                if payload is not None:
                    info.items_received += 1
                    info.bytes_received += _size(payload)
                if event.complete:
                    # (told before the application sees the last item: the stream is over)
                    self.settle(sid, COMPLETE)
            handler(event)
        return on_payload

    def wrap_payloads(self, handler: _On[PayloadsReceived]) -> _On[PayloadsReceived]:
        """The batch receive path (several items of one stream, none completing it): counted
        at once; the protocol keeps that path on because this wraps it."""
        def on_payloads(event: PayloadsReceived) -> None:
            info = self.requests.get(event.stream_id)
            if info is not None:
                payloads = event.payloads
                info.items_received += len(payloads)
                info.bytes_received += sum(map(_size, payloads))
            handler(event)
        return on_payloads

    def wrap_errored(self, handler: _On[StreamErrored]) -> _On[StreamErrored]:
        def on_errored(event: StreamErrored) -> None:
            self.finish(event.stream_id, outcome_of(event.error), event.error)
            handler(event)
        return on_errored

    def wrap_cancel(self, handler: _On[CancelReceived]) -> _On[CancelReceived]:
        def on_cancel(event: CancelReceived) -> None:
            self.settle(event.stream_id, CANCELLED)
            handler(event)
        return on_cancel

    def wrap_metadata_push(self, handler: _On[MetadataPushReceived]) -> _On[MetadataPushReceived]:
        def on_metadata_push(event: MetadataPushReceived) -> None:
            info = self.start(Side.RESPONDER, Interaction.METADATA_PUSH, 0, None)
            info.metadata = event.metadata
            info.items_received = 1
            info.bytes_received = len(event.metadata)
            self.tell("request_started", info)
            try:
                handler(event)
            finally:
                self.end(info, COMPLETE, None)
        return on_metadata_push

    def wrap_closed(self, handler: _On[ConnectionClosed]) -> _On[ConnectionClosed]:
        def on_closed(event: ConnectionClosed) -> None:
            try:
                handler(event)
            finally:
                self.closed(event.error)
        return on_closed

    def wrap_setup(self, handler: _On[SetupReceived]) -> _On[SetupReceived]:
        """Server: the connection opens for interceptors with the client's SETUP (one that
        begins with RESUME continues a session that is open already)."""
        def on_setup(event: SetupReceived) -> None:
            if self.connection is not None and not self.told_open:
                self.told_open = True
                self.tell("connection_opened", self.connection)
            handler(event)
        return on_setup


_observed: dict[type, type] = {}


def _observed_class(base: Any) -> type:
    """A subclass of the sans-IO connection class ``base`` whose public request and send
    methods report to its ``tap`` (a :class:`ConnectionTap`); one per base class."""
    cls = _observed.get(base)
    if cls is not None:
        return cls

    def request(interaction: Interaction,
                method: Callable[..., int]) -> Callable[..., int]:
        def send_request(self: Any, payload: Payload, *args: Any) -> int:
            tap = self.tap
            info, payload = tap.requesting(interaction, payload)
            try:
                sid = method(self, payload, *args)
            except BaseException as exc:
                tap.end(info, outcome_of(exc), exc)
                raise
            tap.sent_request(info, sid)
            return sid
        send_request.__name__ = method.__name__
        return send_request

    def metadata_push(self: Any, metadata: bytes) -> Any:
        tap = self.tap
        info = tap.start(Side.REQUESTER, Interaction.METADATA_PUSH, 0, None)
        info.metadata = metadata
        tap.tell("request_started", info)
        info.items_sent = 1
        info.bytes_sent = len(info.metadata or b"")
        try:
            result = base.metadata_push(self, info.metadata)
        except BaseException as exc:
            tap.end(info, outcome_of(exc), exc)
            raise
        tap.end(info, COMPLETE, None)
        return result

    def send_payload(self: Any, stream_id: int, payload: Payload,
                     complete: bool = False) -> None:
        base.send_payload(self, stream_id, payload, complete)
        tap = self.tap
        tap.sent(stream_id, payload)
        tap.settle(stream_id, COMPLETE)

    def send_payloads(self: Any, stream_id: int, payloads: list[Payload]) -> None:
        # (the batch send path stays on: this class overrides both send methods; where the
        # base sends item by item through send_payload, those items are counted already)
        tap = self.tap
        info = tap.requests.get(stream_id)
        counted = None if info is None else info.items_sent
        base.send_payloads(self, stream_id, payloads)
        if info is not None and info.items_sent == counted:
            tap.sent_batch(stream_id, payloads)

    def send_complete(self: Any, stream_id: int) -> None:
        base.send_complete(self, stream_id)
        self.tap.settle(stream_id, COMPLETE)

    def send_error(self: Any, stream_id: int, error: E.RSocketError) -> None:
        base.send_error(self, stream_id, error)
        self.tap.finish(stream_id, outcome_of(error), error)

    def send_cancel(self: Any, stream_id: int) -> None:
        base.send_cancel(self, stream_id)
        self.tap.settle(stream_id, CANCELLED)

    namespace = {
        "__doc__": f"{base.__name__}, observed by interceptors.",
        "__module__": __name__,
        "request_response": request(Interaction.REQUEST_RESPONSE, base.request_response),
        "fire_and_forget": request(Interaction.FIRE_AND_FORGET, base.fire_and_forget),
        "request_stream": request(Interaction.REQUEST_STREAM, base.request_stream),
        "request_channel": request(Interaction.REQUEST_CHANNEL, base.request_channel),
        "metadata_push": metadata_push,
        "send_payload": send_payload,
        "send_complete": send_complete,
        "send_error": send_error,
        "send_cancel": send_cancel,
    }
    if hasattr(base, "send_payloads"):  # (the 2015 draft's connection has no batch send)
        namespace["send_payloads"] = send_payloads
    cls = _observed[base] = type(f"Observed{base.__name__}", (base,), namespace)
    return cls
