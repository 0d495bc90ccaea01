"""Prometheus metrics for RSocket servers and clients, served over HTTP by Twisted.

Needs the ``metrics`` extra (``pip install 'rsocket_tx[metrics]'``: ``prometheus_client``).
:class:`PrometheusInterceptor` is an :class:`~rsocket_tx.interceptors.Interceptor`: register it
on a server or a client, and serve the registry with :func:`serve_metrics` (or
``twistd rsocket --metrics tcp:9100:interface=127.0.0.1``)::

    from rsocket_tx import serve
    from rsocket_tx.metrics import PrometheusInterceptor, serve_metrics

    serve("tcp:7878", MyResponder, interceptors=[PrometheusInterceptor()])
    serve_metrics("tcp:9100:interface=127.0.0.1")   # GET http://127.0.0.1:9100/metrics

The metrics (labels in braces; ``side`` is ``requester`` or ``responder``, ``interaction`` one
of ``request-response``, ``fire-and-forget``, ``request-stream``, ``request-channel``,
``metadata-push``, ``route`` see below, ``outcome``
``complete``, ``cancelled`` or the spec name of the error code, e.g. ``APPLICATION_ERROR``):

=====================================================  =============================================
``rsocket_requests_started_total``                     counter {interaction, route, side}
``rsocket_requests_total``                             counter {interaction, route, side, outcome}:
                                                       requests ended
``rsocket_request_duration_seconds``                   histogram {interaction, route, side}
``rsocket_payload_bytes_total``                        counter {direction}: payload data + metadata
                                                       bytes, ``direction`` ``sent``/``received``
``rsocket_items_total``                                counter {direction}: payloads
``rsocket_connections_open``                           gauge {side}: ``client``/``server``
``rsocket_connections_total``                          counter {side}: connections opened
=====================================================  =============================================

The ``route`` label takes values from a bounded set (:class:`~rsocket_tx.interceptors.
RouteLabels`), so that a peer sending many distinct routes cannot grow the metrics: on the
responder side the ``@route`` pattern that serves the request (``orders.{id}``, not
``orders.42``), ``<unmatched>`` when none does; on the requester side the route; ``""``
without one. At most ``max_routes`` distinct values (default
:data:`~rsocket_tx.interceptors.DEFAULT_MAX_ROUTE_LABELS`, 100) are kept; further ones are
counted as ``<other>`` and a warning is logged once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from twisted.logger import Logger

from .interceptors import (
    DEFAULT_MAX_ROUTE_LABELS,
    ConnectionInfo,
    Interceptor,
    RequestInfo,
    RouteLabels,
)

if TYPE_CHECKING:  # pragma: no cover
    from twisted.application.internet import StreamServerEndpointService
    from twisted.internet.defer import Deferred
    from twisted.internet.interfaces import IListeningPort
    from twisted.python.failure import Failure
    from twisted.web.resource import IResource
    from twisted.web.server import Request, Site

__all__ = [
    "DEFAULT_BUCKETS",
    "PrometheusInterceptor",
    "check_metrics_endpoint",
    "install_metrics",
    "metrics_resource",
    "metrics_service",
    "metrics_site",
    "serve_metrics",
]

log = Logger()

#: Request duration histogram buckets, seconds: 0.5 ms to 60 s.
DEFAULT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                   2.5, 5.0, 10.0, 30.0, 60.0)


class PrometheusInterceptor(Interceptor):
    """Counts connections and requests into Prometheus metrics (listed in the module
    docstring).

    :param registry: the ``prometheus_client`` registry to register the metrics in (default:
        the global ``REGISTRY``, which also has the process metrics). One registry holds one
        interceptor's metrics: a second one on the same registry raises ``ValueError``
        (duplicated time series); share the instance between servers and clients instead.
    :param namespace: the metric name prefix (``"rsocket"``).
    :param buckets: the duration histogram's buckets, seconds (:data:`DEFAULT_BUCKETS`).
    :param route_label: ``callable(route: str | None) -> str``, the ``route`` label of a
        request, replacing the default mapping (the ``@route`` pattern on the responder side,
        see the module docstring); ``max_routes`` still applies to what it returns.
    :param max_routes: the cap on distinct ``route`` label values (>= 1; default
        :data:`~rsocket_tx.interceptors.DEFAULT_MAX_ROUTE_LABELS`): further values are counted
        as ``"<other>"``, and a warning is logged the first time.
    :ivar routes: the :class:`~rsocket_tx.interceptors.RouteLabels` labelling requests (its
        ``values`` are the route label values kept, ``folded`` the requests counted as
        ``"<other>"``).
    :raises ValueError: ``max_routes`` < 1; metrics of these names are in ``registry``
        already.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *,
                 namespace: str = "rsocket",
                 buckets: tuple[float, ...] = DEFAULT_BUCKETS,
                 route_label: Callable[[str | None], str] | None = None,
                 max_routes: int = DEFAULT_MAX_ROUTE_LABELS) -> None:
        if registry is None:
            registry = REGISTRY
        self.registry = registry
        self.routes = RouteLabels(max_routes, route_label=route_label,
                                  name="rsocket_tx.metrics: the Prometheus route label")
        request_labels = ("interaction", "route", "side")
        self.started = Counter("requests_started", "RSocket requests started.",
                               request_labels, namespace=namespace, registry=registry)
        self.ended = Counter("requests", "RSocket requests ended, by outcome.",
                             (*request_labels, "outcome"), namespace=namespace,
                             registry=registry)
        self.duration = Histogram("request_duration_seconds",
                                  "RSocket request duration, seconds.", request_labels,
                                  namespace=namespace, registry=registry, buckets=buckets)
        self.bytes = Counter("payload_bytes", "RSocket payload bytes (data + metadata).",
                             ("direction",), namespace=namespace, registry=registry)
        self.items = Counter("items", "RSocket payloads (items).", ("direction",),
                             namespace=namespace, registry=registry)
        self.connections_open = Gauge("connections_open", "RSocket connections open.",
                                      ("side",), namespace=namespace, registry=registry)
        self.connections = Counter("connections", "RSocket connections opened.", ("side",),
                                   namespace=namespace, registry=registry)
        self.bytes_sent = self.bytes.labels("sent")
        self.bytes_received = self.bytes.labels("received")
        self.items_sent = self.items.labels("sent")
        self.items_received = self.items.labels("received")

    def connection_opened(self, connection: ConnectionInfo) -> None:
        self.connections.labels(connection.side).inc()
        self.connections_open.labels(connection.side).inc()

    def connection_closed(self, connection: ConnectionInfo) -> None:
        self.connections_open.labels(connection.side).dec()

    def request_started(self, request: RequestInfo) -> None:
        route = request.context[self] = self.routes(request)
        self.started.labels(request.interaction.value, route, request.side.value).inc()

    def request_ended(self, request: RequestInfo) -> None:
        interaction = request.interaction.value
        route = request.context.pop(self, None)
        if route is None:  # (its request_started raised)
            route = self.routes(request)
        side = request.side.value
        self.ended.labels(interaction, route, side, request.outcome).inc()
        duration = request.duration
        if duration is not None:
            self.duration.labels(interaction, route, side).observe(max(duration, 0.0))
        if request.bytes_sent:
            self.bytes_sent.inc(request.bytes_sent)
        if request.bytes_received:
            self.bytes_received.inc(request.bytes_received)
        if request.items_sent:
            self.items_sent.inc(request.items_sent)
        if request.items_received:
            self.items_received.inc(request.items_received)


def metrics_resource(registry: CollectorRegistry | None = None, *, reactor: Any = None,
                     in_thread: bool = True) -> IResource:
    """The twisted.web resource serving ``registry``: the Prometheus text format, or
    OpenMetrics when the scraper's ``Accept`` asks for it (``prometheus_client``'s
    ``choose_encoder``), over any transport (``prometheus_client.twisted.MetricsResource``
    goes through WSGI, which needs an IP peer address: it fails over a UNIX socket).

    By default the exposition is rendered in the reactor's thread pool, so that a large
    registry does not stall the connections the reactor serves meanwhile (100 route label
    values, every interaction and outcome of each: 1.6 MB, 0.2 s to render; served from the
    reactor thread such a scrape held the other connections 0.9 s, from the pool 30-60 ms);
    ``prometheus_client`` collects safely from another thread. A collector that raises
    answers 500 and is logged.

    :param registry: default: the global ``REGISTRY``.
    :param reactor: the reactor whose thread pool renders (default: the global reactor).
    :param in_thread: False renders in the reactor thread, at once (for a small registry,
        or a reactor without threads).
    :returns: an ``IResource``.
    """
    from prometheus_client.exposition import choose_encoder
    from twisted.internet.threads import deferToThreadPool
    from twisted.web.resource import Resource
    from twisted.web.server import NOT_DONE_YET

    source = REGISTRY if registry is None else registry
    if in_thread and reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor

    class MetricsResource(Resource):
        isLeaf = True

        def __init__(self) -> None:  # (typed: Resource's __init__ is not)
            Resource.__init__(self)

        def render_GET(self, request: Request) -> bytes | int:  # noqa: N802 - twisted.web's
            accept = request.getHeader(b"accept")
            encoder, content_type = choose_encoder(
                accept.decode("latin-1") if accept is not None else "")
            request.setHeader(b"content-type", content_type.encode("ascii"))
            if not in_thread:
                return encoder(source)
            gone: list[bool] = []
            request.notifyFinish().addErrback(lambda _: gone.append(True))

            def rendered(body: bytes) -> None:
                if not gone:
                    request.write(body)
                    request.finish()

            def failed(failure: Failure) -> None:
                log.failure("rendering the metrics failed", failure)
                if not gone:
                    request.setResponseCode(500)
                    request.setHeader(b"content-type", b"text/plain; charset=utf-8")
                    request.write(b"rendering the metrics failed: see the server's log\n")
                    request.finish()

            deferToThreadPool(reactor, reactor.getThreadPool(), encoder, source
                              ).addCallbacks(rendered, failed)
            return NOT_DONE_YET

    return MetricsResource()


def metrics_site(registry: CollectorRegistry | None = None, *, reactor: Any = None) -> Site:
    """A twisted.web ``Site`` serving ``registry`` at ``/metrics`` (and at ``/``), rendered
    in ``reactor``'s thread pool (:func:`metrics_resource`).

    :param registry: default: the global ``REGISTRY``.
    :param reactor: default: the global reactor.
    :returns: the ``Site`` (a protocol factory for any stream server endpoint).
    """
    from twisted.web.resource import Resource
    from twisted.web.server import Site

    metrics = metrics_resource(registry, reactor=reactor)
    root = Resource()
    root.putChild(b"metrics", metrics)
    root.putChild(b"", metrics)
    site = Site(root)
    site.noisy = False
    return site


def serve_metrics(endpoint: str, registry: CollectorRegistry | None = None, *,
                  reactor: Any = None) -> Deferred[IListeningPort]:
    """Serve the metrics over HTTP on ``endpoint``: ``GET /metrics``.

    :param endpoint: a Twisted server endpoint string, e.g. ``"tcp:9100:interface=127.0.0.1"``
        (anything ``serverFromString`` takes).
    :param registry: default: the global ``REGISTRY``.
    :param reactor: default: the global reactor.
    :returns: a Deferred firing with the ``IListeningPort`` (``stopListening()`` ends it).
    :raises ValueError: a bad endpoint string.
    """
    from twisted.internet.endpoints import serverFromString

    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor
    listening: Deferred[IListeningPort] = serverFromString(reactor, endpoint).listen(
        metrics_site(registry, reactor=reactor))
    return listening


def metrics_service(endpoint: str, registry: CollectorRegistry | None = None, *,
                    reactor: Any = None) -> StreamServerEndpointService:
    """A twisted ``Service`` serving the metrics on ``endpoint`` while it runs (what
    ``twistd rsocket --metrics ENDPOINT`` adds to its application).

    :param endpoint: a Twisted server endpoint string.
    :param registry: default: the global ``REGISTRY``.
    :param reactor: default: the global reactor.
    :returns: a ``StreamServerEndpointService`` (a failed listen fails ``startService``).
    :raises ValueError: a bad endpoint string.
    """
    from twisted.application.internet import StreamServerEndpointService
    from twisted.internet.endpoints import serverFromString

    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor
    service = StreamServerEndpointService(serverFromString(reactor, endpoint),
                                          metrics_site(registry, reactor=reactor))
    service.setName("metrics")
    return service


def install_metrics(service: Any, endpoint: str,
                    registry: CollectorRegistry | None = None, *, reactor: Any = None,
                    factory: Any = None) -> PrometheusInterceptor:
    """Count the requests of a server service (``twistd rsocket``'s
    :class:`~rsocket_tx.faces.tap.RSocketServerService`, or any service with a ``factory``
    whose ``interceptors`` is a list) and serve them on ``endpoint`` while it runs.

    :param service: the server service (a ``MultiService``; the metrics service becomes its
        child).
    :param endpoint: a Twisted server endpoint string for the HTTP metrics.
    :param registry: default: the global ``REGISTRY``.
    :param reactor: default: the global reactor.
    :param factory: the factory whose connections are counted (one with an
        ``interceptors`` list, e.g. an :class:`~rsocket_tx.protocol.RSocketServerFactory`);
        default: ``service.factory`` (``twistd mux`` gives the RSocket factory it carries).
    :returns: the :class:`PrometheusInterceptor` registered on the factory.
    :raises ValueError: a bad endpoint string; the registry has these metrics already.
    """
    child = metrics_service(endpoint, registry, reactor=reactor)
    interceptor = PrometheusInterceptor(registry)
    (service.factory if factory is None else factory).interceptors.append(interceptor)
    child.setServiceParent(service)
    return interceptor


def check_metrics_endpoint(endpoint: str) -> str:
    """``endpoint`` if it is a server endpoint string Twisted can parse (``--metrics``).

    :raises ValueError: it cannot be parsed (the message says why).
    """
    from twisted.internet import reactor
    from twisted.internet.endpoints import serverFromString

    try:
        serverFromString(reactor, endpoint)
    except Exception as exc:  # noqa: BLE001 - every parse failure is a usage error
        raise ValueError(f"--metrics {endpoint!r}: not a server endpoint string ({exc})"
                         ) from None
    return endpoint
