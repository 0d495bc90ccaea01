"""Interceptors (rsocket_tx.interceptors) over real loopback TCP: what each side is told of
its connections and of every interaction, as requester and as responder."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted_support import wait

from rsocket_tx import ApplicationError, Payload, Request, Responder, connect, route, serve
from rsocket_tx.extensions import COMPOSITE_METADATA, ROUTING, TRACING_ZIPKIN, parse_metadata
from rsocket_tx.interceptors import (
    CANCELLED,
    COMPLETE,
    Interaction,
    Interceptor,
    RequestInfo,
    Side,
    outcome_of,
)
from rsocket_tx.protocol import RSocketServerFactory
from rsocket_tx.routing import Payloads

aio = pytest_twisted.ensureDeferred


class Recorder(Interceptor):
    """Records every call; ``closed`` fires at the connection's end."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []
        self.closed: Deferred = Deferred()

    def connection_opened(self, connection) -> None:
        self.calls.append(("opened", connection))

    def connection_closed(self, connection) -> None:
        self.calls.append(("closed", connection))
        self.closed.callback(connection)

    def request_started(self, request) -> None:
        self.calls.append(("started", request))

    def request_ended(self, request) -> None:
        assert request.outcome is not None and request.ended is not None
        self.calls.append(("ended", request))

    def ended(self) -> list[RequestInfo]:
        return [info for what, info in self.calls if what == "ended"]

    def names(self) -> list[str]:
        return [what for what, _ in self.calls]


class Shop(Responder):
    @route("echo")
    def echo(self, request: Request):
        return Payload(request.data + b"!")

    @route("boom")
    def boom(self, request: Request):
        raise ApplicationError("no such item")

    @route("count", interaction="request_stream")
    def count(self, request: Request):
        return Payloads([Payload(b"%d" % i) for i in range(3)])

    @route("forever")
    @route("forever", interaction="request_stream")
    async def forever(self, request: Request):
        await Deferred()  # never ends: the requester cancels

    @route("hold")
    def hold(self, request: Request):
        return Deferred()  # answered never: the connection's end cancels it

    @route("double", interaction="request_channel")
    async def double(self, request: Request):
        yield request.data * 2
        async for item in request.inbound:
            yield request.decode(item) * 2

    @route("log", interaction="fire_and_forget")
    def log(self, request: Request):
        pass

    def metadata_push(self, metadata: bytes) -> None:
        pass


async def pair(server_recorder: Recorder, client_recorder: Recorder, **options):
    port = await serve("tcp:0:interface=127.0.0.1", Shop, reactor=reactor,
                       interceptors=[server_recorder])
    rs = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}", reactor=reactor,
                       metadata_mime_type=options.pop("metadata_mime_type",
                                                      COMPOSITE_METADATA),
                       interceptors=[client_recorder], **options)
    return port, rs


def by_route(infos: list[RequestInfo], name: str | None) -> RequestInfo:
    found = [info for info in infos if info.route == name]
    assert len(found) == 1, (name, infos)
    return found[0]


@aio
async def test_every_interaction_is_told_to_both_sides_with_counts_and_outcome():
    server, client = Recorder(), Recorder()
    port, rs = await pair(server, client)
    try:
        assert (await wait(rs.request_response(b"tea", route="echo"))).data == b"tea!"
        with pytest.raises(ApplicationError):
            await wait(rs.request_response(b"", route="boom"))
        items = await wait(rs.request_stream(b"", route="count").collect())
        assert [p.data for p in items] == [b"0", b"1", b"2"]
        channel = rs.request_channel(b"a", [Payload(b"b"), Payload(b"cc")], route="double")
        assert [p.data for p in await wait(channel.collect())] == [b"aa", b"bb", b"cccc"]
        await wait(rs.fire_and_forget(b"event", route="log"))
        await wait(rs.metadata_push(b"pushed"))
        pending = rs.request_response(b"", route="forever")
        pending.addErrback(lambda f: None)
        pending.cancel()
    finally:
        await wait(rs.close())
        await wait(server.closed)
        await port.stopListening()

    for recorder, side, own in ((client, "client", Side.REQUESTER),
                                (server, "server", Side.RESPONDER)):
        names = recorder.names()
        assert names[0] == "opened" and names[-1] == "closed"
        connection = recorder.calls[0][1]
        assert connection.side == side and connection.closed is not None
        assert connection.peer.startswith("127.0.0.1:")
        assert names.count("started") == names.count("ended") == 7
        ended = recorder.ended()
        assert {info.side for info in ended} == {own}
        assert all(info.connection is connection and info.duration >= 0 for info in ended)

        echo = by_route(ended, "echo")
        assert (echo.interaction, echo.outcome) == (Interaction.REQUEST_RESPONSE, COMPLETE)
        request_bytes = len(b"tea") + len(echo.metadata)
        if own is Side.REQUESTER:
            assert (echo.items_sent, echo.items_received) == (1, 1)
            assert (echo.bytes_sent, echo.bytes_received) == (request_bytes, 4)
        else:
            assert (echo.items_sent, echo.items_received) == (1, 1)
            assert (echo.bytes_sent, echo.bytes_received) == (4, request_bytes)

        boom = by_route(ended, "boom")
        assert boom.outcome == "APPLICATION_ERROR"
        assert isinstance(boom.error, ApplicationError)

        count = by_route(ended, "count")
        assert (count.interaction, count.outcome) == (Interaction.REQUEST_STREAM, COMPLETE)
        streamed = (count.items_received if own is Side.REQUESTER else count.items_sent)
        assert streamed == 3

        double = by_route(ended, "double")
        assert (double.interaction, double.outcome) == (Interaction.REQUEST_CHANNEL, COMPLETE)
        # the request payload is the first item of the requester's side
        assert (double.items_sent, double.items_received) == (3, 3)
        out, back = (4, 8) if own is Side.REQUESTER else (8, 4)
        sent_data = double.bytes_sent - len(double.metadata) * (own is Side.REQUESTER)
        received_data = double.bytes_received - len(double.metadata) * (own is Side.RESPONDER)
        assert (sent_data, received_data) == (out, back)

        log = by_route(ended, "log")
        assert (log.interaction, log.outcome) == (Interaction.FIRE_AND_FORGET, COMPLETE)

        push = [i for i in ended if i.interaction is Interaction.METADATA_PUSH]
        assert len(push) == 1 and push[0].metadata == b"pushed" and push[0].route is None
        assert push[0].bytes_sent + push[0].bytes_received == len(b"pushed")

        forever = by_route(ended, "forever")
        assert forever.outcome == CANCELLED


@aio
async def test_requests_running_when_the_connection_ends_end_with_its_error():
    server, client = Recorder(), Recorder()
    port, rs = await pair(server, client)
    try:
        stream = rs.request_stream(b"", route="forever")
        started = server.names().count("started")
        while server.names().count("started") == started:  # the server has the request
            d = Deferred()
            reactor.callLater(0, d.callback, None)
            await wait(d)
    finally:
        await wait(rs.close(drain_timeout=0))
        await wait(server.closed)
        await port.stopListening()
    with pytest.raises(Exception):  # noqa: B017 - the stream failed with the connection
        await wait(stream.collect())
    (client_info,) = client.ended()
    assert client_info.outcome == "CONNECTION_CLOSE"  # our close, with drain timeout 0
    assert client_info.error is not None
    (server_info,) = server.ended()
    assert server_info.side is Side.RESPONDER
    assert server_info.outcome == "CONNECTION_CLOSE"
    assert client.names()[-1] == "closed" and server.names()[-1] == "closed"


class Tagger(Interceptor):
    """Adds a tracing entry to each request it makes."""

    def request_started(self, request) -> None:
        if request.side is Side.REQUESTER:
            request.add_metadata_entry(TRACING_ZIPKIN, b"\x20")  # sampled, no ids


class SeenMetadata(Responder):
    seen: list = []

    def request_response(self, payload):
        self.seen.append(payload.metadata)
        return Payload(b"ok")


@aio
async def test_a_requester_interceptor_adds_composite_metadata_entries():
    SeenMetadata.seen = []
    port = await serve("tcp:0:interface=127.0.0.1", SeenMetadata, reactor=reactor)
    rs = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}", reactor=reactor,
                       metadata_mime_type=COMPOSITE_METADATA, interceptors=[Tagger()])
    try:
        await wait(rs.request_response(b"x", route="a.b"))
    finally:
        await wait(rs.close())
        await port.stopListening()
    (metadata,) = SeenMetadata.seen
    parsed = parse_metadata(metadata, COMPOSITE_METADATA)
    assert parsed.route == "a.b" and parsed.tracing is not None
    assert parsed.tracing.sampled is True


@aio
async def test_no_composite_metadata_nothing_added_and_routing_metadata_gives_the_route():
    server, client = Recorder(), Recorder()
    port, rs = await pair(server, client, metadata_mime_type=ROUTING)
    tagger = Tagger()
    try:
        await wait(rs.request_response(b"tea", route="echo"))
    finally:
        await wait(rs.close())
        await wait(server.closed)
        await port.stopListening()
    assert [i.route for i in client.ended()] == [i.route for i in server.ended()] == ["echo"]
    assert not RequestInfo(client.calls[0][1], Side.REQUESTER, Interaction.FIRE_AND_FORGET,
                           0, None, None, 0.0).add_metadata_entry(TRACING_ZIPKIN, b"\x20")
    assert tagger is not None


class Broken(Interceptor):
    def request_started(self, request) -> None:
        raise RuntimeError("interceptor bug")


@pytest.mark.logs_failure("an interceptor that raises is logged",
                          match="interceptor bug")
@aio
async def test_an_interceptor_that_raises_is_logged_and_the_request_goes_on():
    port = await serve("tcp:0:interface=127.0.0.1", Shop, reactor=reactor,
                       interceptors=[Broken()])
    rs = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}", reactor=reactor,
                       metadata_mime_type=COMPOSITE_METADATA, interceptors=[Broken()])
    try:
        assert (await wait(rs.request_response(b"x", route="echo"))).data == b"x!"
    finally:
        await wait(rs.close())
        await port.stopListening()


def test_outcome_names_are_the_spec_error_code_names():
    assert outcome_of(None) == COMPLETE
    assert outcome_of(ApplicationError("x")) == "APPLICATION_ERROR"
    assert outcome_of(ApplicationError("x", error_code=0x301)) == "0x00000301"
    from rsocket_tx.core.errors import CanceledError, RejectedError
    assert outcome_of(CanceledError("x")) == CANCELLED
    assert outcome_of(RejectedError("x")) == "REJECTED"
    assert outcome_of(KeyError("x")) == "KeyError"


def test_without_interceptors_the_factory_builds_plain_connections():
    factory = RSocketServerFactory(Shop, reactor=Clock())
    proto = factory.buildProtocol(None)
    assert "connection_class" not in vars(proto)
    observed = RSocketServerFactory(Shop, reactor=Clock(), interceptors=[Recorder()])
    assert "connection_class" in vars(observed.buildProtocol(None))


@aio
async def test_an_observed_connection_is_freed_by_reference_counting():
    from freed_support import assert_freed, cyclic_gc_off, refs, turns

    with cyclic_gc_off():
        server, client = Recorder(), Recorder()
        port, rs = await pair(server, client)
        try:
            await wait(rs.request_response(b"x", route="echo"))
            pending = rs.request_response(b"", route="hold")
            pending.addErrback(lambda f: None)
            started = server.names().count("started")
            while server.names().count("started") == started:
                d = Deferred()
                reactor.callLater(0, d.callback, None)
                await wait(d)
            (served,) = port.factory.connections
            weak = refs(client=rs._protocol, client_connection=rs._protocol.connection,
                        server=served, server_connection=served.connection, handle=rs)
            del served
            await wait(rs.close(drain_timeout=0))
            await wait(server.closed)
        finally:
            await port.stopListening()
        del rs, pending
        await turns()
        # the interceptors keep what they were told: that keeps no connection alive
        assert len(server.ended()) == len(client.ended()) == 2
        assert client.ended()[-1].connection.protocol is None
        assert_freed(weak)


def test_a_resumed_session_is_one_connection_and_its_stream_one_request():
    from test_resume import _collect, _expected, _setup, _wire_size

    server, client = Recorder(), Recorder()
    net, rs, _, factory = _setup(server_kw={"interceptors": [server]},
                                 client_kw={"interceptors": [client]})
    stream = rs.request_stream(Payload(b"300"), prefetch=300)
    got, done = _collect(stream)
    net.to_server_only()
    net.cut(deliver_to_client=_wire_size(40))  # the transport dies mid-stream
    net.advance(0.1)  # the client reconnects and resumes
    assert rs.resumes == 1 and done.called and got == _expected(300)
    assert client.names() == server.names() == ["opened", "started", "ended"]
    (requested,), (served,) = client.ended(), server.ended()
    assert requested.outcome == served.outcome == COMPLETE
    assert requested.items_received == served.items_sent == 300  # none counted twice
    assert sum(len(b"%d" % i) for i in range(300)) == served.bytes_sent
    rs.close()
    net.flush()
    assert client.names()[-1] == server.names()[-1] == "closed"


def test_stream_items_are_counted_with_the_batch_paths_on(monkeypatch):
    from twisted.test.iosim import connectedServerAndClient

    from rsocket_tx.client import make_setup
    from rsocket_tx.core.events import PayloadsReceived
    from rsocket_tx.interceptors import ConnectionTap
    from rsocket_tx.protocol import RSocketClientFactory

    batches: list[int] = []  # items per batch the tap counted, sent and received
    sent_batch, wrap_payloads = ConnectionTap.sent_batch, ConnectionTap.wrap_payloads

    def counting_sent_batch(self, stream_id, payloads):
        batches.append(len(payloads))
        sent_batch(self, stream_id, payloads)

    def counting_wrap_payloads(self, handler):
        wrapped = wrap_payloads(self, handler)

        def on_payloads(event):
            batches.append(-len(event.payloads))
            wrapped(event)
        return on_payloads

    monkeypatch.setattr(ConnectionTap, "sent_batch", counting_sent_batch)
    monkeypatch.setattr(ConnectionTap, "wrap_payloads", counting_wrap_payloads)

    class Many(Responder):
        def request_stream(self, payload):
            return [Payload(b"item %d" % i) for i in range(200)]

    server, client = Recorder(), Recorder()
    clock = Clock()
    server_factory = RSocketServerFactory(Many, reactor=clock, interceptors=[server])
    client_factory = RSocketClientFactory(make_setup(), reactor=clock, interceptors=[client])
    client_proto, server_proto, pump = connectedServerAndClient(
        lambda: server_factory.buildProtocol(None),
        lambda: client_factory.buildProtocol(None), clock=clock)
    assert client_proto.connection.batch_payloads and server_proto.connection.batch_payloads
    assert PayloadsReceived in client_proto.event_handlers
    stream = client_proto.rsocket.request_stream(Payload(b""), prefetch=1000)
    result = stream.collect()
    for _ in range(10):
        clock.advance(0)
        pump.flush()
    assert [p.data for p in result.result] == [b"item %d" % i for i in range(200)]
    # both batch paths ran: items sent several at a time, and received several at a time
    assert any(n > 1 for n in batches) and any(n < -1 for n in batches)
    (requested,), (served,) = client.ended(), server.ended()
    expected_bytes = sum(len(b"item %d" % i) for i in range(200))
    assert requested.outcome == served.outcome == COMPLETE
    assert (served.items_sent, served.bytes_sent) == (200, expected_bytes)
    assert (requested.items_received, requested.bytes_received) == (200, expected_bytes)
    assert (requested.items_sent, served.items_received) == (1, 1)  # the request payload


class RaisesEverywhere(Interceptor):
    """Every hook raises; the requester's also leaves metadata that is not bytes."""

    def connection_opened(self, connection) -> None:
        raise RuntimeError("hook bug: connection_opened")

    def connection_closed(self, connection) -> None:
        raise RuntimeError("hook bug: connection_closed")

    def request_started(self, request) -> None:
        request.metadata = "not bytes"
        raise RuntimeError("hook bug: request_started")

    def request_ended(self, request) -> None:
        raise RuntimeError("hook bug: request_ended")


@pytest.mark.logs_failure("every hook of an interceptor raises",
                          match="hook bug|metadata that is not bytes|route label bug")
def test_a_hook_that_raises_is_logged_with_its_traceback_and_the_others_still_run():
    from interceptor_support import ObservedPair
    from prometheus_client import CollectorRegistry, generate_latest
    from twisted.logger import capturedLogs

    from rsocket_tx.metrics import PrometheusInterceptor

    def label(route):
        raise ValueError("route label bug")

    server, client = Recorder(), Recorder()
    metrics = PrometheusInterceptor(CollectorRegistry(), route_label=label)
    with capturedLogs() as events:
        pair = ObservedPair(Shop, server=[RaisesEverywhere(), metrics, server],
                            client=[RaisesEverywhere(), client])
        assert pair.requests(["echo", "echo"], b"x") == [Payload(b"x!")] * 2
        pair.close()
    # the interceptors after the one that raised were told everything
    for recorder in (server, client):
        names = recorder.names()
        assert (names[0], names[-1], len(names)) == ("opened", "closed", 6)
        assert names.count("started") == names.count("ended") == 2
        assert [info.outcome for info in recorder.ended()] == [COMPLETE, COMPLETE]
    # the requester sent its own metadata: the server saw the route
    assert [info.route for info in server.ended()] == ["echo", "echo"]
    failures = [e for e in events if "log_failure" in e]
    hooks = [e["method"] for e in failures if "method" in e]
    assert sorted(set(hooks)) == ["connection_closed", "connection_opened", "request_ended",
                                  "request_started"]
    assert hooks.count("request_started") == 2 + 2 + 2  # both sides, and the metrics' label
    assert all(e["log_failure"].getTraceback() for e in failures)
    assert b"rsocket_requests_total" in generate_latest(metrics.registry)


class Patterns(Responder):
    seen: list = []

    @route("orders.{id}", "orders.{id}.lines")
    def order(self, request: Request, id: str):
        Patterns.seen.append(request.route_pattern)
        return Payload(id.encode())

    @route("orders.{id}", interaction="request_stream")
    def lines(self, request: Request, id: str):
        return Payloads([])

    @route.fallback("request_response")
    def other(self, request: Request):
        Patterns.seen.append(request.route_pattern)
        return Payload(b"?")


def test_the_responder_side_is_told_the_route_pattern_that_serves_the_request():
    from interceptor_support import ObservedPair

    from rsocket_tx.routing import route_pattern

    server, client = Recorder(), Recorder()
    Patterns.seen.clear()
    pair = ObservedPair(Patterns, server=[server], client=[client])
    assert pair.requests(["orders.7", "orders.8.lines", "elsewhere"]) == [
        Payload(b"7"), Payload(b"8"), Payload(b"?")]
    pair.close()
    assert [(i.route, i.route_pattern) for i in server.ended()] == [
        ("orders.7", "orders.{id}"), ("orders.8.lines", "orders.{id}.lines"),
        ("elsewhere", None)]
    assert Patterns.seen == ["orders.{id}", "orders.{id}.lines", None]
    assert [i.route_pattern for i in client.ended()] == [None] * 3  # (no responder's routes)
    responder = Patterns()
    assert route_pattern(responder, "request_stream", "orders.1") == "orders.{id}"
    assert route_pattern(responder, "request_stream", "orders.1.lines") is None
    assert route_pattern(responder, "metadata_push", "orders.1") is None
    assert route_pattern(responder, "request_response", None) is None
    assert route_pattern(object(), "request_response", "orders.1") is None
