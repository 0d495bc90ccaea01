"""OpenTelemetry tracing (rsocket_tx.otel) over real loopback TCP: client and server spans of
one request share the trace, the server span's parent is the client span (the context
travels in the Zipkin tracing metadata entry)."""

from __future__ import annotations

import pytest
import pytest_twisted
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted_support import wait

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
from rsocket_tx.extensions import COMPOSITE_METADATA, TRACING_ZIPKIN, ZipkinTrace, parse_metadata
from rsocket_tx.interceptors import Interceptor
from rsocket_tx.otel import TracingInterceptor, trace_context

aio = pytest_twisted.ensureDeferred


class Shop(Responder):
    seen: list = []

    @route("echo")
    def echo(self, request: Request):
        Shop.seen.append(request.payload.metadata)
        return Payload(request.data)

    @route("boom")
    def boom(self, request: Request):
        raise ApplicationError("out of stock")

    @route("count", interaction="request_stream")
    def count(self, request: Request):
        return [b"1", b"2"]


class Closed(Interceptor):
    def __init__(self) -> None:
        self.closed = Deferred()

    def connection_closed(self, connection) -> None:
        self.closed.callback(None)


def provider() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider, exporter


async def run(requests, **connect_options):
    """Serve and connect, each side with its own TracerProvider; run ``requests(rs)``;
    return (client spans, server spans) once both sides closed."""
    server_provider, server_spans = provider()
    client_provider, client_spans = provider()
    closed = Closed()
    port = await serve("tcp:0:interface=127.0.0.1", Shop, reactor=reactor,
                       interceptors=[TracingInterceptor(server_provider), closed])
    rs = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}", reactor=reactor,
                       interceptors=[TracingInterceptor(client_provider)], **connect_options)
    try:
        await requests(rs, client_provider)
    finally:
        await wait(rs.close())
        await wait(closed.closed)
        await port.stopListening()
    return client_spans.get_finished_spans(), server_spans.get_finished_spans()


@aio
async def test_server_span_continues_the_client_span():
    async def requests(rs, _):
        await wait(rs.request_response(b"x", route="echo"))

    (client,), (server,) = await run(requests, metadata_mime_type=COMPOSITE_METADATA)
    assert client.kind is SpanKind.CLIENT and server.kind is SpanKind.SERVER
    assert client.context.trace_id == server.context.trace_id
    assert server.parent is not None and server.parent.is_remote
    assert server.parent.span_id == client.context.span_id
    for span in (client, server):
        assert span.name == "echo"
        assert span.attributes["rpc.system"] == "rsocket"
        assert span.attributes["rsocket.route"] == "echo"
        assert span.attributes["rsocket.interaction"] == "request-response"
        assert span.attributes["rsocket.outcome"] == "complete"
        assert span.status.status_code is StatusCode.UNSET
    # what travelled: the routing entry, then the tracing entry the requester added
    (metadata,) = Shop.seen[-1:]
    tracing = parse_metadata(metadata, COMPOSITE_METADATA).tracing
    assert tracing.trace_id == client.context.trace_id
    assert tracing.span_id == client.context.span_id and tracing.sampled is True


@aio
async def test_the_client_span_is_a_child_of_the_current_span_and_errors_are_marked():
    async def requests(rs, client_provider):
        tracer = client_provider.get_tracer("app")
        with tracer.start_as_current_span("checkout"):
            d = rs.request_response(b"", route="boom")
            s = rs.request_stream(b"", route="count")
        with pytest.raises(ApplicationError):
            await wait(d)
        assert len(await wait(s.collect())) == 2

    client, server = await run(requests, metadata_mime_type=COMPOSITE_METADATA)
    by_name = {span.name: span for span in client}
    outer = by_name["checkout"]
    for name in ("boom", "count"):
        assert by_name[name].parent.span_id == outer.context.span_id
        assert by_name[name].context.trace_id == outer.context.trace_id
    served = {span.name: span for span in server}
    assert set(served) == {"boom", "count"}
    for name, span in served.items():
        assert span.parent.span_id == by_name[name].context.span_id
    for span in (by_name["boom"], served["boom"]):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == "APPLICATION_ERROR"
    assert served["count"].attributes["rsocket.items_sent"] == 2
    assert by_name["count"].attributes["rsocket.items_received"] == 2


@aio
async def test_without_composite_metadata_each_side_has_its_own_trace():
    async def unrouted(rs, _):
        with pytest.raises(RejectedError):  # no route: refused by the router
            await wait(rs.request_response(Payload(b"x")))

    (client,), (server,) = await run(unrouted)
    assert server.parent is None
    assert client.context.trace_id != server.context.trace_id
    assert client.name == server.name == "request-response"
    assert client.attributes["error.type"] == "REJECTED"


@aio
async def test_a_tracing_entry_given_by_the_requester_is_kept():
    async def requests(rs, _):
        await wait(rs.request_response(b"x", route="echo",
                                       tracing=ZipkinTrace(trace_id=5, span_id=7, sampled=True)))

    _, (server,) = await run(requests, metadata_mime_type=COMPOSITE_METADATA)
    assert (server.context.trace_id, server.parent.span_id) == (5, 7)
    entries = parse_metadata(Shop.seen[-1], COMPOSITE_METADATA).entries
    assert [e.mime_type for e in entries].count(TRACING_ZIPKIN) == 1


def test_trace_context_of_a_tracing_entry():
    assert trace_context(None) is None
    assert trace_context(ZipkinTrace(sampled=True)) is None  # flags only
    ctx = trace_context(ZipkinTrace(trace_id=5, span_id=7, sampled=True))
    span_context = trace.get_current_span(ctx).get_span_context()
    assert (span_context.trace_id, span_context.span_id) == (5, 7)
    assert span_context.is_remote and span_context.trace_flags.sampled
    unsampled = trace.get_current_span(trace_context(ZipkinTrace(trace_id=5, span_id=7)))
    assert not unsampled.get_span_context().trace_flags.sampled


class Orders(Responder):
    @route("orders.{id}")
    def order(self, request: Request, id: str):
        return Payload(id.encode())


def test_span_names_and_route_attributes_are_the_route_pattern_not_the_route():
    from interceptor_support import ObservedPair

    server_provider, server_spans = provider()
    client_provider, client_spans = provider()
    pair = ObservedPair(Orders, server=[TracingInterceptor(server_provider)],
                        client=[TracingInterceptor(client_provider, max_routes=5,
                                                   record_route=True)])
    # a peer sends 2,000 distinct routes: ids, and routes that nothing serves
    pair.requests([f"orders.{n}" for n in range(1000)] + [f"nowhere.{n}" for n in range(1000)])
    pair.close()
    served = server_spans.get_finished_spans()
    assert len(served) == 2000
    assert {span.name for span in served} == {"orders.{id}", "<unmatched>"}
    assert {span.attributes["rsocket.route"] for span in served} == {"orders.{id}",
                                                                      "<unmatched>"}
    assert {span.attributes["rpc.method"] for span in served} == {"orders.{id}", "<unmatched>"}
    assert not any("rsocket.request_route" in span.attributes for span in served)
    # the requester's names are its routes, at most max_routes of them, then "<other>"
    requested = client_spans.get_finished_spans()
    assert {span.name for span in requested} == {f"orders.{n}" for n in range(5)} | {"<other>"}
    assert requested[-1].attributes["rsocket.request_route"] == "nowhere.999"
    assert requested[-1].attributes["rpc.method"] == "<other>"
