"""OpenTelemetry tracing for RSocket requests, with the trace context carried in the Zipkin
tracing metadata extension (``Extensions/Tracing-Zipkin.md``).

Needs the ``otel`` extra (``pip install 'rsocket_tx[otel]'``: ``opentelemetry-api`` and
``opentelemetry-sdk``). :class:`TracingInterceptor` is an
:class:`~rsocket_tx.interceptors.Interceptor`; register it on both ends::

    from rsocket_tx import connect, serve
    from rsocket_tx.otel import TracingInterceptor

    serve("tcp:7878", MyResponder, interceptors=[TracingInterceptor()])
    rs = await connect("tcp:host=localhost:port=7878",
                       metadata_mime_type="message/x.rsocket.composite-metadata.v0",
                       interceptors=[TracingInterceptor()])

* The **requester** starts a span of kind ``CLIENT`` per request, a child of the span current
  when the request is made (if any), and writes its trace context into the request's
  composite metadata as a tracing entry (trace id, 128 bits; span id; the sampled flag). The
  connection's metadata MIME type must be composite
  (``message/x.rsocket.composite-metadata.v0``) for the context to travel; a request whose
  metadata already has a tracing entry (``tracing=`` given) keeps it.
* The **responder** starts a span of kind ``SERVER`` per request; when the request carries a
  tracing entry with ids, the span continues that trace: its parent is the requester's span.
* Attributes: ``rpc.system`` = ``"rsocket"``, ``rpc.method`` and ``rsocket.route`` = the
  route label (when there is a route; see below), ``rsocket.interaction``,
  ``rsocket.stream_id``, ``rsocket.outcome``, ``net.peer.name`` (the peer address) and the
  bytes and items each way (``rsocket.bytes_sent`` ...); with ``record_route=True`` also
  ``rsocket.request_route`` = the route as sent. A request that ends with an error has status
  ``ERROR`` and ``error.type`` = the error code name (``"APPLICATION_ERROR"``); a cancelled
  one does not.
* The span's name is the route label, or the interaction (``"request-stream"``) without a
  route.

The route label is low-cardinality, as the OpenTelemetry semantic conventions ask of span
names and ``rpc.method``, whatever routes peers send
(:class:`~rsocket_tx.interceptors.RouteLabels`): on the responder side the ``@route`` pattern
that serves the request (``orders.{id}``, not ``orders.42``), ``<unmatched>`` when none does;
on the requester side the route; at most ``max_routes`` distinct values, further ones are
``<other>`` (a warning is logged once).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
)

from .extensions import TRACING_ZIPKIN, ZipkinTrace, encode_tracing, parse_metadata
from .interceptors import (
    CANCELLED,
    COMPLETE,
    DEFAULT_MAX_ROUTE_LABELS,
    Interceptor,
    RequestInfo,
    RouteLabels,
    Side,
)

__all__ = ["TracingInterceptor", "trace_context"]

#: the instrumentation scope's name
INSTRUMENTATION = "rsocket_tx"


def trace_context(tracing: ZipkinTrace | None) -> Any:
    """The OpenTelemetry context whose current span is the remote span ``tracing`` names
    (a requester's span, from a request's tracing metadata); None when ``tracing`` has no
    ids.

    :param tracing: a decoded Zipkin tracing entry, or None.
    :returns: an ``opentelemetry.context.Context``, or None.
    """
    if tracing is None or tracing.trace_id is None or tracing.span_id is None:
        return None
    flags = TraceFlags(TraceFlags.SAMPLED if tracing.sampled or tracing.debug
                       else TraceFlags.DEFAULT)
    remote = SpanContext(trace_id=tracing.trace_id, span_id=tracing.span_id, is_remote=True,
                         trace_flags=flags)
    if not remote.is_valid:
        return None
    return trace.set_span_in_context(NonRecordingSpan(remote))


class TracingInterceptor(Interceptor):
    """A span per request on each side, the trace context carried in Zipkin tracing metadata
    (see the module docstring).

    :param tracer_provider: the ``TracerProvider`` (default: the global one, as set by
        ``opentelemetry.trace.set_tracer_provider``).
    :param route_label: ``callable(route: str | None) -> str`` replacing the default route
        label (the ``@route`` pattern on the responder side); ``max_routes`` still applies.
    :param max_routes: the cap on distinct route labels (>= 1; default
        :data:`~rsocket_tx.interceptors.DEFAULT_MAX_ROUTE_LABELS`); further ones are
        ``"<other>"``.
    :param record_route: also record the route as sent, ``rsocket.request_route`` (a value
        per distinct route: only where the tracing backend copes with that).
    :ivar routes: the :class:`~rsocket_tx.interceptors.RouteLabels` labelling requests.
    :raises ValueError: ``max_routes`` < 1.
    """

    def __init__(self, tracer_provider: Any = None, *,
                 route_label: Callable[[str | None], str] | None = None,
                 max_routes: int = DEFAULT_MAX_ROUTE_LABELS,
                 record_route: bool = False) -> None:
        self.tracer = trace.get_tracer(INSTRUMENTATION, tracer_provider=tracer_provider)
        self.routes = RouteLabels(max_routes, route_label=route_label,
                                  name="rsocket_tx.otel: the span name (route label)")
        self.record_route = bool(record_route)

    def request_started(self, request: RequestInfo) -> None:
        interaction = request.interaction.value
        route = request.route
        attributes: dict[str, Any] = {
            "rpc.system": "rsocket",
            "rsocket.interaction": interaction,
            "net.peer.name": request.connection.peer,
        }
        name = interaction
        if route is not None:
            name = attributes["rpc.method"] = attributes["rsocket.route"] = \
                self.routes(request) or interaction
            if self.record_route:
                attributes["rsocket.request_route"] = route
        mime = request.connection.metadata_mime_type
        carried = None
        if request.metadata and mime is not None:
            carried = parse_metadata(request.metadata, mime).tracing
        if request.side is Side.REQUESTER:
            span = self.tracer.start_span(name, kind=SpanKind.CLIENT,
                                          attributes=attributes)
            if carried is None:
                ctx = span.get_span_context()
                if ctx.is_valid:
                    request.add_metadata_entry(TRACING_ZIPKIN, encode_tracing(ZipkinTrace(
                        trace_id=ctx.trace_id, span_id=ctx.span_id, trace_id_128=True,
                        sampled=ctx.trace_flags.sampled)))
        else:
            parent = trace_context(carried)
            span = self.tracer.start_span(name, kind=SpanKind.SERVER,
                                          context=parent if parent is not None
                                          else otel_context.Context(),
                                          attributes=attributes)
        request.context[self] = span

    def request_ended(self, request: RequestInfo) -> None:
        span = request.context.pop(self, None)
        if span is None:
            return
        outcome = request.outcome
        span.set_attributes({
            "rsocket.stream_id": request.stream_id,
            "rsocket.outcome": outcome or "",
            "rsocket.bytes_sent": request.bytes_sent,
            "rsocket.bytes_received": request.bytes_received,
            "rsocket.items_sent": request.items_sent,
            "rsocket.items_received": request.items_received,
        })
        if outcome not in (COMPLETE, CANCELLED):
            span.set_attribute("error.type", outcome or "")
            error = request.error
            span.set_status(Status(StatusCode.ERROR,
                                   str(error) if error is not None else outcome))
        span.end()
