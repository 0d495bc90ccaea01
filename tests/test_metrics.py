"""The Prometheus exporter (rsocket_tx.metrics), scraped over real HTTP while requests run
against a real loopback server, and ``twistd rsocket --metrics``."""

from __future__ import annotations

import subprocess
import sys

import pytest
import pytest_twisted
from interceptor_support import ObservedPair
from process_support import REPO, TWISTD
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import UNIXClientEndpoint
from twisted.internet.protocol import Protocol
from twisted.logger import LogLevel, capturedLogs, formatEvent
from twisted.python import usage
from twisted.web.client import Agent, ResponseDone
from twisted.web.iweb import IAgentEndpointFactory
from twisted_support import wait
from zope.interface import implementer

from rsocket_tx import (
    ApplicationError,
    Payload,
    RejectedError,
    Request,
    Responder,
    connect,
    route,
    serve,
)
from rsocket_tx.extensions import COMPOSITE_METADATA
from rsocket_tx.faces.tap import Options, makeService
from rsocket_tx.interceptors import DEFAULT_MAX_ROUTE_LABELS, Interceptor, RouteLabels
from rsocket_tx.metrics import PrometheusInterceptor, serve_metrics

aio = pytest_twisted.ensureDeferred


class Shop(Responder):
    @route("echo")
    def echo(self, request: Request):
        return Payload(request.data)

    @route("boom")
    def boom(self, request: Request):
        raise ApplicationError("no")

    holding: Deferred | None = None

    @route("hold", interaction="request_stream")
    async def hold(self, request: Request):
        Shop.holding.callback(None)
        await Deferred()  # runs until the requester cancels
        yield b""


class Closed(Interceptor):
    """``closed`` fires when a connection closes."""

    def __init__(self) -> None:
        self.closed = Deferred()

    def connection_closed(self, connection) -> None:
        self.closed.callback(connection)


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """``{(sample name, sorted labels): value}`` of a Prometheus text exposition."""
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[sample.name, tuple(sorted(sample.labels.items()))] = sample.value
    return found


def value(found: dict, name: str, **labels) -> float | None:
    return found.get((name, tuple(sorted(labels.items()))))


class Body(Protocol):
    """Collects a response body; ``done`` fires with it."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.done: Deferred = Deferred()

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.chunks.append(data)

    def connectionLost(self, reason) -> None:  # noqa: N802 - Twisted's name
        if reason.check(ResponseDone):
            self.done.callback(b"".join(self.chunks))
        else:
            self.done.errback(reason)


async def scrape(url: bytes, agent=None) -> dict:
    response = await wait((agent or Agent(reactor)).request(b"GET", url))
    assert response.code == 200
    assert response.headers.getRawHeaders(b"content-type")[0].startswith(b"text/plain")
    body = Body()
    response.deliverBody(body)
    return samples((await wait(body.done)).decode())


@aio
async def test_a_scrape_counts_the_requests_done_and_the_ones_running():
    registry = CollectorRegistry()
    metrics = PrometheusInterceptor(registry)
    closed = Closed()
    Shop.holding = Deferred()
    port = await serve("tcp:0:interface=127.0.0.1", Shop, reactor=reactor,
                       interceptors=[metrics, closed])
    web = await serve_metrics("tcp:0:interface=127.0.0.1", registry)
    url = b"http://127.0.0.1:%d/metrics" % web.getHost().port
    rs = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}", reactor=reactor,
                       metadata_mime_type=COMPOSITE_METADATA)
    try:
        for n in range(5):
            assert (await wait(rs.request_response(b"x" * n, route="echo"))).data == b"x" * n
        with pytest.raises(ApplicationError):
            await wait(rs.request_response(b"", route="boom"))
        held = rs.request_stream(b"", route="hold")
        await wait(Shop.holding)  # the server runs the stream
        running = await scrape(url)
        held.cancel()
    finally:
        await wait(rs.close())
    await port.stopListening()

    # while the stream runs: started, not ended; one connection open
    assert value(running, "rsocket_connections_open", side="server") == 1
    assert value(running, "rsocket_connections_total", side="server") == 1
    assert value(running, "rsocket_requests_total", interaction="request-stream",
                 route="hold", side="responder", outcome="cancelled") is None
    assert value(running, "rsocket_requests_total", interaction="request-response",
                 route="echo", side="responder", outcome="complete") == 5
    assert value(running, "rsocket_requests_total", interaction="request-response",
                 route="boom", side="responder", outcome="APPLICATION_ERROR") == 1
    assert value(running, "rsocket_request_duration_seconds_count",
                 interaction="request-response", route="echo", side="responder") == 5
    assert value(running, "rsocket_requests_started_total", interaction="request-response",
                 route="echo", side="responder") == 5
    assert value(running, "rsocket_requests_started_total", interaction="request-stream",
                 route="hold", side="responder") == 1
    # items and bytes are counted as requests end: 6 requests and 5 responses so far
    assert value(running, "rsocket_items_total", direction="received") == 6
    assert value(running, "rsocket_items_total", direction="sent") == 5

    # the connection closed: the canceled stream ended, nothing is open
    await wait(closed.closed)
    after = await scrape(url)
    await web.stopListening()
    assert value(after, "rsocket_connections_open", side="server") == 0
    assert value(after, "rsocket_items_total", direction="received") == 7
    assert value(after, "rsocket_requests_total", interaction="request-stream",
                 route="hold", side="responder", outcome="cancelled") == 1
    assert value(after, "rsocket_payload_bytes_total", direction="sent") == 0 + 1 + 2 + 3 + 4


@aio
async def test_a_client_counts_its_own_requests_as_requester():
    registry = CollectorRegistry()
    port = await serve("tcp:0:interface=127.0.0.1", Shop, reactor=reactor)
    rs = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}", reactor=reactor,
                       metadata_mime_type=COMPOSITE_METADATA,
                       interceptors=[PrometheusInterceptor(registry)])
    try:
        for _ in range(3):
            await wait(rs.request_response(b"abc", route="echo"))
    finally:
        await wait(rs.close())
        await port.stopListening()
    found = samples(generate(registry))
    assert value(found, "rsocket_requests_total", interaction="request-response",
                 route="echo", side="requester", outcome="complete") == 3
    assert value(found, "rsocket_connections_total", side="client") == 1
    assert value(found, "rsocket_connections_open", side="client") == 0
    assert value(found, "rsocket_payload_bytes_total", direction="received") == 9


def generate(registry) -> str:
    from prometheus_client import generate_latest
    return generate_latest(registry).decode()


class Orders(Responder):
    @route("orders.{id}")
    def order(self, request: Request, id: str):
        return Payload(id.encode())

    @route("orders.list")
    def listing(self, request: Request):
        return Payload(b"all")


class Anything(Responder):
    @route.fallback()
    def anything(self, request: Request):
        return Payload(b"")


def route_values(text: str) -> set[str]:
    """The values of the ``route`` label in a scrape."""
    return {dict(labels)["route"] for (name, labels) in samples(text)
            if name == "rsocket_requests_total"}


def test_a_peers_routes_are_labelled_by_the_route_pattern_that_serves_them():
    registry = CollectorRegistry()
    pair = ObservedPair(Orders, server=[PrometheusInterceptor(registry)])
    assert isinstance(pair.requests(["orders.0", "nowhere.0", "orders.list"])[1], RejectedError)
    first = generate(registry)
    # a peer sends 3,000 distinct routes: ids, and routes that nothing serves
    results = pair.requests([f"orders.{n}" for n in range(1, 1500)]
                            + [f"nowhere.{n}" for n in range(1, 1500)])
    assert results[0] == Payload(b"1") and isinstance(results[-1], RejectedError)
    after = generate(registry)
    pair.close()
    assert route_values(after) == {"orders.{id}", "orders.list", "<unmatched>"}
    found = samples(after)
    assert value(found, "rsocket_requests_total", interaction="request-response",
                 route="orders.{id}", side="responder", outcome="complete") == 1500
    assert value(found, "rsocket_requests_total", interaction="request-response",
                 route="<unmatched>", side="responder", outcome="REJECTED") == 1500
    assert value(found, "rsocket_requests_started_total", interaction="request-response",
                 route="orders.list", side="responder") == 1
    # the scrape has the same series as after the first three requests: it does not grow
    assert len(after.splitlines()) == len(first.splitlines())
    assert len(after) < len(first) + 200  # (only the counts' digits)


def test_past_max_routes_further_values_are_other_and_a_warning_is_logged_once():
    server = PrometheusInterceptor(CollectorRegistry(), route_label=lambda route: route or "")
    client = PrometheusInterceptor(CollectorRegistry(), max_routes=10)
    assert server.routes.max_values == DEFAULT_MAX_ROUTE_LABELS == 100
    pair = ObservedPair(Anything, server=[server], client=[client])
    with capturedLogs() as events:
        pair.requests([f"item.{n}" for n in range(3000)])
    pair.close()
    for metrics, kept in ((server, 100), (client, 10)):
        text = generate(metrics.registry)
        routes = route_values(text)
        assert len(routes) == kept + 1 and "<other>" in routes
        side = "responder" if metrics is server else "requester"
        assert value(samples(text), "rsocket_requests_total", interaction="request-response",
                     route="<other>", side=side, outcome="complete") == 3000 - kept
        assert metrics.routes.folded == 3000 - kept
        assert len(text) < (kept + 1) * 4_000  # (3,000 label values: megabytes)
    warnings = [formatEvent(e) for e in events if e["log_level"] is LogLevel.warn]
    assert len(warnings) == 2  # one per interceptor
    assert all("more than" in w and "'<other>'" in w for w in warnings)
    assert any("Prometheus route label: more than 100 distinct" in w for w in warnings)


def test_route_labels_check_their_arguments():
    with pytest.raises(ValueError, match="max_values must be an int >= 1"):
        PrometheusInterceptor(CollectorRegistry(), max_routes=0)
    with pytest.raises(TypeError, match="route_label must be callable"):
        RouteLabels(route_label="orders")
    registry = CollectorRegistry()
    PrometheusInterceptor(registry)
    with pytest.raises(ValueError):  # one interceptor per registry
        PrometheusInterceptor(registry)


# -- twistd rsocket --metrics ----------------------------------------------------------------


@implementer(IAgentEndpointFactory)
class UnixEndpoints:
    def __init__(self, path: str) -> None:
        self.path = path

    def endpointForURI(self, uri):  # noqa: N802 - Twisted's name
        return UNIXClientEndpoint(reactor, self.path)


def test_metrics_option_rejects_a_bad_endpoint():
    with pytest.raises(usage.UsageError, match="--metrics 'nonsense:1'"):
        Options().parseOptions(["--metrics", "nonsense:1"])


@aio
async def test_twistd_rsocket_metrics_serves_the_servers_counters(tmp_path):
    sock = str(tmp_path / "metrics.sock")
    options = Options()
    options.parseOptions(["--listen", "tcp:0:interface=127.0.0.1", "--metrics", f"unix:{sock}"])
    service = makeService(options)
    (metrics,) = [i for i in service.factory.interceptors if isinstance(i, PrometheusInterceptor)]
    # (the global registry has one PrometheusInterceptor only: this test's)
    service.startService()
    try:
        (port,) = await service.when_listening()
        rs = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}", reactor=reactor)
        try:
            for _ in range(2):
                await wait(rs.request_response(Payload(b"hi")))  # the demo responder echoes
        finally:
            await wait(rs.close())
        agent = Agent.usingEndpointFactory(reactor, UnixEndpoints(sock))
        found = await scrape(b"http://metrics/metrics", agent)
    finally:
        await service.stopService()
        unregister(metrics)
    assert value(found, "rsocket_requests_total", interaction="request-response", route="",
                 side="responder", outcome="complete") == 2
    assert value(found, "rsocket_connections_total", side="server") == 1


def unregister(metrics: PrometheusInterceptor) -> None:
    """Take ``metrics``' collectors out of its registry (the global one, for twistd)."""
    for collector in (metrics.started, metrics.ended, metrics.duration, metrics.bytes,
                      metrics.items, metrics.connections_open, metrics.connections):
        metrics.registry.unregister(collector)


def without_prometheus_client(monkeypatch) -> None:
    """As if the ``metrics`` extra were not installed."""
    import rsocket_tx

    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    monkeypatch.delitem(sys.modules, "rsocket_tx.metrics")
    monkeypatch.delattr(rsocket_tx, "metrics")


NO_EXTRA = r"^--metrics needs prometheus_client, which is not installed: pip install " \
           r"'rsocket_tx\[metrics\]'$"


def test_metrics_without_the_extra_is_a_usage_error_naming_it(monkeypatch):
    from rsocket_tx.faces.mux import Options as MuxOptions

    without_prometheus_client(monkeypatch)
    with pytest.raises(usage.UsageError, match=NO_EXTRA):
        Options().parseOptions(["--metrics", "tcp:9100"])
    with pytest.raises(usage.UsageError, match=r"^--protocol rsocket: --metrics needs "
                                               r"prometheus_client.*rsocket_tx\[metrics\]'$"):
        MuxOptions().parseOptions(["--protocol", "rsocket --metrics tcp:9100"])


def test_twistd_metrics_without_the_extra_says_so_in_one_line():
    # a real twistd, in a child whose prometheus_client cannot be imported
    code = "import sys; sys.modules['prometheus_client'] = None; " + TWISTD
    done = subprocess.run([sys.executable, "-c", code, "-n", "rsocket", "--metrics", "tcp:0"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    output = done.stdout + done.stderr
    assert done.returncode != 0
    assert "Traceback" not in output
    assert ("twistd rsocket: error: --metrics needs prometheus_client, which is not "
            "installed: pip install 'rsocket_tx[metrics]'") in output.splitlines()


@aio
async def test_twistd_mux_metrics_serves_the_counters_of_the_rsocket_connections(tmp_path):
    from rsocket_tx.faces.mux import Options as MuxOptions
    from rsocket_tx.faces.mux import makeService as make_mux_service

    sock = str(tmp_path / "metrics.sock")
    options = MuxOptions()
    options.parseOptions(["--listen", "tcp:0:interface=127.0.0.1",
                          "--protocol", f"rsocket --metrics unix:{sock}"])
    service = make_mux_service(options)
    rsocket_factory = service.protocol_services["rsocket"].factory
    (metrics,) = [i for i in rsocket_factory.interceptors
                  if isinstance(i, PrometheusInterceptor)]
    service.startService()
    try:
        (port,) = await service.when_listening()
        rs = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}", reactor=reactor)
        try:
            for _ in range(3):
                await wait(rs.request_response(Payload(b"hi")))
        finally:
            await wait(rs.close())
        agent = Agent.usingEndpointFactory(reactor, UnixEndpoints(sock))
        found = await scrape(b"http://metrics/metrics", agent)
    finally:
        await service.stopService()
        unregister(metrics)
    assert value(found, "rsocket_requests_total", interaction="request-response", route="",
                 side="responder", outcome="complete") == 3
    assert value(found, "rsocket_connections_total", side="server") == 1


class Where:
    """A collector that records whether it is collected in the reactor thread."""

    def __init__(self) -> None:
        self.in_reactor_thread: list[bool] = []

    def collect(self):
        from twisted.python.threadable import isInIOThread

        self.in_reactor_thread.append(isInIOThread())
        return []


class Raising:
    def collect(self):
        raise RuntimeError("collector bug")


@aio
async def test_a_scrape_is_rendered_off_the_reactor_thread():
    registry = CollectorRegistry()
    where = Where()
    registry.register(where)
    PrometheusInterceptor(registry)
    web = await serve_metrics("tcp:0:interface=127.0.0.1", registry)
    try:
        found = await scrape(b"http://127.0.0.1:%d/metrics" % web.getHost().port)
    finally:
        await web.stopListening()
    assert value(found, "rsocket_connections_total", side="server") is None  # none yet
    assert "rsocket_requests_started_total" not in found  # (families without samples)
    assert where.in_reactor_thread == [False]


@pytest.mark.logs_failure("a collector that raises is logged", match="collector bug")
@aio
async def test_a_collector_that_raises_answers_500_and_the_server_goes_on():
    registry = CollectorRegistry()
    registry.register(Raising())
    web = await serve_metrics("tcp:0:interface=127.0.0.1", registry)
    try:
        url = b"http://127.0.0.1:%d/metrics" % web.getHost().port
        response = await wait(Agent(reactor).request(b"GET", url))
        body = Body()
        response.deliverBody(body)
        assert b"rendering the metrics failed" in await wait(body.done)
        assert response.code == 500
    finally:
        await web.stopListening()
