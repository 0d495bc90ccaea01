"""The Prometheus exporter (rsocket_tx.metrics), scraped over real HTTP while requests run
against a real loopback server, and ``twistd rsocket --metrics``."""

from __future__ import annotations

import pytest
import pytest_twisted
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import UNIXClientEndpoint
from twisted.internet.protocol import Protocol
from twisted.python import usage
from twisted.web.client import Agent, ResponseDone
from twisted.web.iweb import IAgentEndpointFactory
from twisted_support import wait
from zope.interface import implementer

from rsocket_tx import ApplicationError, Payload, Request, Responder, connect, route, serve
from rsocket_tx.extensions import COMPOSITE_METADATA
from rsocket_tx.faces.tap import Options, makeService
from rsocket_tx.interceptors import Interceptor
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


def test_route_label_maps_routes_to_a_bounded_set():
    registry = CollectorRegistry()
    metrics = PrometheusInterceptor(registry, route_label=lambda r: (r or "").split(".")[0])
    assert metrics.route_label("items.123") == "items"
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
        metrics.registry.unregister(metrics.started)
        for collector in (metrics.ended, metrics.duration, metrics.bytes, metrics.items,
                          metrics.connections_open, metrics.connections):
            metrics.registry.unregister(collector)
    assert value(found, "rsocket_requests_total", interaction="request-response", route="",
                 side="responder", outcome="complete") == 2
    assert value(found, "rsocket_connections_total", side="server") == 1
