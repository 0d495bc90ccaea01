"""Routed responders, authentication and the requester's metadata helpers, over loopback TCP.

The wire formats themselves are proven by tests/extensions (golden vectors from the spec text);
here each test checks what a user of ``@route``, ``Authenticator`` and ``route=``/``auth=`` sees.
"""

from __future__ import annotations

import cbor2
import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted_support import wait

from rsocket_tx import (
    ApplicationError,
    InvalidError,
    Payload,
    RejectedError,
    RejectedSetupError,
    Request,
    Responder,
    route,
)
from rsocket_tx.authentication import (
    AnyAuthenticator,
    Authenticator,
    BearerAuthenticator,
    SimpleAuthenticator,
)
from rsocket_tx.extensions import (
    COMPOSITE_METADATA,
    ROUTING,
    BearerAuth,
    CustomAuth,
    SimpleAuth,
    ZipkinTrace,
    build_metadata,
    parse_metadata,
)
from rsocket_tx.routing import Payloads

aio = pytest_twisted.ensureDeferred
JSON = "application/json"
CBOR = "application/cbor"


def later(value) -> Deferred:
    d = Deferred()
    reactor.callLater(0, d.callback, value)
    return d


class Shop(Responder):
    """Routes for every interaction; records what handlers saw."""

    seen: list = []
    closed: list = []

    @route("items.{id}")
    def item(self, request: Request, id):  # noqa: A002
        self.seen.append(request)
        return {"id": id, "data": request.data}

    @route("items.special")
    def special(self, request: Request):
        return {"special": True}

    @route("items.{kind}.{id}")
    def nested(self, request, kind, id):  # noqa: A002
        return {"kind": kind, "id": id}

    @route("later")
    async def later_route(self, request):
        return await later({"later": request.data})

    @route("raw")
    def raw(self, request):
        return Payload(b"as-is", b"m")

    @route("nothing")
    def nothing(self, request):
        return None

    @route("count", interaction="request_stream")
    def count(self, request):
        def gen():
            try:
                for n in range(request.data["n"]):
                    yield {"n": n}
            finally:
                self.closed.append("count")
        return gen()

    @route("acount", interaction="request_stream")
    async def acount(self, request):
        for n in range(request.data["n"]):
            yield await later(n)

    @route("payloads", interaction="request_stream")
    def payloads(self, request):
        source = (Payload(b"p%d" % n, b"m%d" % n) for n in range(request.data["n"]))
        self.sources.append(source)
        return Payloads(source)

    @route("bad-stream", interaction="request_stream")
    def bad_stream(self, request):
        return {"not": "an iterable"}

    @route("double", interaction="request_channel")
    async def double(self, request):
        yield request.data * 2
        async for payload in request.inbound:
            yield request.decode(payload) * 2

    @route("log", interaction="fire_and_forget")
    def log(self, request):
        self.seen.append(("log", request.data))

    @route("both")
    @route("both", interaction="request_stream")
    def both(self, request):
        if request.interaction == "request_stream":
            return ["s1", "s2"]
        return "rr"


class WithFallback(Shop):
    @route.fallback("request_response")
    def fallback(self, request):
        return {"fallback": request.route}


@pytest.fixture(autouse=True)
def _reset():
    Shop.seen = []
    Shop.closed = []


async def shop(harness, responder=Shop, data_mime=JSON, **kw):
    port = await harness.serve(responder)
    return await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                                 data_mime_type=data_mime, **kw)


@aio
async def test_route_with_path_variable_and_json_objects(harness):
    rs = await shop(harness)
    reply = await wait(rs.request_response({"qty": 2}, route="items.42", decode=True))
    assert reply == {"id": "42", "data": {"qty": 2}}
    request = Shop.seen[0]
    assert request.route == "items.42" and request.variables == {"id": "42"}
    # without decode the application gets the Payload, JSON on the wire
    raw = await wait(rs.request_response({"qty": 2}, route="items.42"))
    assert raw.data == b'{"id":"42","data":{"qty":2}}'


@aio
async def test_literal_routes_win_over_patterns_and_variables_match_one_segment(harness):
    rs = await shop(harness)
    assert await wait(rs.request_response(None, route="items.special", decode=True)) == \
        {"special": True}
    assert await wait(rs.request_response(None, route="items.a.b", decode=True)) == \
        {"kind": "a", "id": "b"}


@aio
async def test_unknown_route_is_rejected_naming_it(harness):
    rs = await shop(harness)
    with pytest.raises(RejectedError, match="no route 'nope' for request-response"):
        await wait(rs.request_response(None, route="nope"))
    # a route served for another interaction says so
    with pytest.raises(RejectedError, match=r"no route 'count' for request-response "
                                            r"\(it serves request-stream\)"):
        await wait(rs.request_response(None, route="count"))
    with pytest.raises(RejectedError, match="has no route"):
        await wait(rs.request_response(Payload(b"no metadata at all")))


@aio
async def test_fallback_serves_unknown_routes_of_its_interactions(harness):
    rs = await shop(harness, WithFallback)
    assert await wait(rs.request_response(None, route="x.y", decode=True)) == \
        {"fallback": "x.y"}
    assert await wait(rs.request_response(None, route="items.7", decode=True)) == \
        {"id": "7", "data": None}
    with pytest.raises(RejectedError, match="no route 'x.y' for request-stream"):
        await wait(rs.request_stream(None, route="x.y").collect())


@aio
async def test_async_handlers_payloads_and_none(harness):
    rs = await shop(harness)
    assert await wait(rs.request_response("hi", route="later", decode=True)) == {"later": "hi"}
    assert await wait(rs.request_response(None, route="raw")) == Payload(b"as-is", b"m")
    assert await wait(rs.request_response(None, route="nothing")) is None


@aio
async def test_stream_routes_encode_each_item(harness):
    rs = await shop(harness)
    items = await wait(rs.request_stream({"n": 3}, route="count", decode=True).collect())
    assert items == [{"n": 0}, {"n": 1}, {"n": 2}]
    items = await wait(rs.request_stream({"n": 3}, route="acount", decode=True).collect())
    assert items == [0, 1, 2]
    got = [item async for item in rs.request_stream({"n": 2}, route="count", decode=True)]
    assert got == [{"n": 0}, {"n": 1}]


@aio
async def test_a_payloads_source_is_sent_as_is_without_an_encoding_step(harness):
    Shop.sources = []
    rs = await shop(harness)
    items = await wait(rs.request_stream({"n": 3}, route="payloads").collect())
    assert [(p.data, p.metadata) for p in items] == [(b"p0", b"m0"), (b"p1", b"m1"),
                                                      (b"p2", b"m2")]
    (source,) = Shop.sources
    request = Request(None, "request_stream", Payload(b""), None, {})
    assert request.encode_items(Payloads(source)) is source  # not wrapped
    plain = iter([Payload(b"x")])
    assert request.encode_items(plain) is not plain  # other sources go through encoding


@aio
async def test_cancel_closes_the_handlers_generator(harness):
    rs = await shop(harness)
    items = await wait(rs.request_stream({"n": 10**9}, route="count", prefetch=4,
                                         decode=True).collect(take=3))
    assert len(items) == 3
    for _ in range(50):  # the CANCEL reaches the server within a few reactor turns
        if Shop.closed:
            break
        await later(None)
    assert Shop.closed == ["count"]


@pytest.mark.logs_failure("a handler returning the wrong type is a bug: the server logs it",
                          match=r"TypeError: a request-stream handler must return an iterable")
@aio
async def test_a_stream_handler_returning_a_non_iterable_is_an_application_error(harness):
    rs = await shop(harness)
    with pytest.raises(ApplicationError, match="TypeError: .*must return an iterable"):
        await wait(rs.request_stream(None, route="bad-stream").collect())


@aio
async def test_channel_route_decodes_inbound(harness):
    rs = await shop(harness)
    stream = rs.request_channel(1, [Payload(b"2"), Payload(b"3")], route="double", decode=True)
    assert await wait(stream.collect()) == [2, 4, 6]


@aio
async def test_fire_and_forget_route(harness):
    rs = await shop(harness)
    await wait(rs.fire_and_forget({"event": 1}, route="log"))
    for _ in range(50):
        if Shop.seen:
            break
        await later(None)
    assert Shop.seen == [("log", {"event": 1})]


@aio
async def test_one_method_serving_two_interactions(harness):
    rs = await shop(harness)
    assert await wait(rs.request_response(None, route="both", decode=True)) == "rr"
    assert await wait(rs.request_stream(None, route="both", decode=True).collect()) == \
        ["s1", "s2"]


@aio
async def test_malformed_request_data_is_invalid(harness):
    rs = await shop(harness)
    with pytest.raises(InvalidError, match="cannot decode the request data as application/json"):
        await wait(rs.request_response(Payload(b"{not json"), route="items.1"))


@aio
async def test_per_stream_data_mime_and_accept_types(harness):
    rs = await shop(harness)
    # the request says its data is CBOR on a JSON connection: the server decodes CBOR
    reply = await wait(rs.request_response({"k": [1, 2]}, route="items.9",
                                           data_mime_type=CBOR))
    # no accept types: the response uses the request's data MIME type, CBOR; per spec it is
    # not announced again (it is what the requester specified)
    assert cbor2.loads(reply.data) == {"id": "9", "data": {"k": [1, 2]}}
    assert Shop.seen[-1].data_mime_type == CBOR
    # accept CBOR on a JSON request: the response is CBOR and says so in its metadata
    reply = await wait(rs.request_response({"k": 1}, route="items.9",
                                           accept_mime_types=[CBOR]))
    assert cbor2.loads(reply.data) == {"id": "9", "data": {"k": 1}}
    assert parse_metadata(reply.metadata, COMPOSITE_METADATA).data_mime_type == CBOR
    # and decode=True follows the response's own MIME entry
    assert await wait(rs.request_response({"k": 1}, route="items.9",
                                          accept_mime_types=[CBOR], decode=True)) == \
        {"id": "9", "data": {"k": 1}}


@aio
async def test_payload_metadata_entries_follow_the_composed_ones(harness):
    rs = await shop(harness)
    own = build_metadata(COMPOSITE_METADATA, entries=[("application/x.custom", b"c")])
    trace = ZipkinTrace(trace_id=1, span_id=2, sampled=True)
    await wait(rs.request_response(Payload(b"{}", own), route="items.1", tracing=trace))
    metadata = Shop.seen[0].metadata
    assert metadata.route == "items.1"
    assert metadata.tracing == trace
    assert [(e.mime_type, e.content) for e in metadata.entries][-1] == \
        ("application/x.custom", b"c")


@aio
async def test_routing_metadata_mime_type_alone(harness):
    port = await harness.serve(Shop)
    rs = await harness.connect(port, metadata_mime_type=ROUTING, data_mime_type=JSON)
    assert await wait(rs.request_response(None, route="items.3", decode=True)) == \
        {"id": "3", "data": None}
    with pytest.raises(ValueError, match="composite"):
        rs.request_response(None, route="items.3", auth=BearerAuth("t"))


@aio
async def test_requester_argument_errors(harness):
    port = await harness.serve(Shop)
    rs = await harness.connect(port)  # octet-stream data and metadata
    with pytest.raises(ValueError, match="composite"):
        rs.request_response(Payload(b""), route="items.1")
    with pytest.raises(TypeError, match="dict"):
        rs.request_response({"an": "object"})
    # bytes are sent as the data of a Payload (which Shop, with no route in it, rejects)
    with pytest.raises(RejectedError, match="has no route"):
        await wait(rs.request_response(b"x"))


def test_route_declaration_errors():
    with pytest.raises(ValueError, match="at least one"):
        route()
    with pytest.raises(ValueError, match="interaction must be one of"):
        route("a", interaction="stream")
    with pytest.raises(ValueError, match="a variable is written"):
        route("a.{b")
    with pytest.raises(ValueError, match="twice"):
        route("{a}.{a}")
    with pytest.raises(TypeError, match=r"served by both one\(\) and two\(\)"):
        class Twice(Responder):
            @route("x")
            def one(self, request): ...

            @route("x")
            def two(self, request): ...
    with pytest.raises(TypeError, match="two fallbacks serve request-response"):
        class TwoFallbacks(Responder):
            @route.fallback()
            def one(self, request): ...

            @route.fallback("request_response")
            def two(self, request): ...


def test_a_subclass_override_replaces_the_inherited_route():
    class Base(Responder):
        @route("x")
        def handler(self, request):
            return "base"

    class Child(Base):
        @route("y")
        def handler(self, request):
            return "child"

    assert Child._router.routes()["request_response"] == ["y"]
    assert Base._router.routes()["request_response"] == ["x"]


# -- authentication -----------------------------------------------------------------------------


class Guarded(Responder):
    authenticator = AnyAuthenticator(SimpleAuthenticator({"alice": "secret"}),
                                     BearerAuthenticator({"tok": "svc"}))

    @route("whoami")
    def whoami(self, request):
        return {"principal": request.principal, "connection": self.principal,
                "auth": type(request.auth).__name__ if request.auth else None}


class Open(Guarded):
    authenticator = SimpleAuthenticator({"alice": "secret"}, required=False)


@aio
async def test_setup_credentials_authenticate_the_connection(harness):
    port = await harness.serve(Guarded)
    rs = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                               data_mime_type=JSON, auth=SimpleAuth("alice", "secret"))
    assert await wait(rs.request_response(None, route="whoami", decode=True)) == \
        {"principal": "alice", "connection": "alice", "auth": None}
    # per-request credentials override the connection's for that request
    assert await wait(rs.request_response(None, route="whoami", auth=BearerAuth("tok"),
                                          decode=True)) == \
        {"principal": "svc", "connection": "alice", "auth": "BearerAuth"}
    with pytest.raises(RejectedError, match="invalid bearer credentials"):
        await wait(rs.request_response(None, route="whoami", auth=BearerAuth("bad")))


@aio
async def test_bad_setup_credentials_are_rejected_setup(harness):
    port = await harness.serve(Guarded)
    rs = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                               data_mime_type=JSON, auth=SimpleAuth("alice", "wrong"))
    with pytest.raises(RejectedSetupError, match="invalid simple credentials"):
        await wait(rs.request_response(None, route="whoami"))


@aio
async def test_requests_need_credentials_when_required(harness):
    port = await harness.serve(Guarded)
    rs = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                               data_mime_type=JSON)
    with pytest.raises(RejectedError, match="authentication required"):
        await wait(rs.request_response(None, route="whoami"))
    assert await wait(rs.request_response(None, route="whoami",
                                          auth=SimpleAuth("alice", "secret"), decode=True)) \
        == {"principal": "alice", "connection": None, "auth": "SimpleAuth"}
    # a custom auth type is decoded and handed to the authenticator, which refuses it here
    with pytest.raises(RejectedError, match="invalid custom"):
        await wait(rs.request_response(None, route="whoami",
                                       auth=CustomAuth("x-api-key", b"k")))


@aio
async def test_anonymous_requests_when_not_required(harness):
    port = await harness.serve(Open)
    rs = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                               data_mime_type=JSON)
    assert await wait(rs.request_response(None, route="whoami", decode=True)) == \
        {"principal": None, "connection": None, "auth": None}


class Slow(Authenticator):
    """verify answers later (a Deferred), like a lookup in a database would."""

    def verify(self, credentials):
        return later(credentials.token.upper() if credentials.token != "bad" else None)


class SlowGuarded(Guarded):
    authenticator = Slow()


@aio
async def test_asynchronous_authenticators(harness):
    port = await harness.serve(SlowGuarded)
    rs = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                               data_mime_type=JSON, auth=BearerAuth("abc"))
    assert await wait(rs.request_response(None, route="whoami", decode=True)) == \
        {"principal": "ABC", "connection": "ABC", "auth": None}
    with pytest.raises(RejectedError, match="invalid bearer"):
        await wait(rs.request_response(None, route="whoami", auth=BearerAuth("bad")))
    rs2 = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                                data_mime_type=JSON, auth=BearerAuth("bad"))
    with pytest.raises(RejectedSetupError):
        await wait(rs2.request_response(None, route="whoami"))


def test_authenticator_argument_errors():
    with pytest.raises(TypeError, match="mapping of username to password or a callable"):
        SimpleAuthenticator(["alice"])
    with pytest.raises(TypeError, match="mapping of token"):
        BearerAuthenticator(42)
    with pytest.raises(ValueError, match="at least one"):
        AnyAuthenticator()
    users = SimpleAuthenticator({"alice": "secret"})
    assert users.verify(SimpleAuth("alice", "secret")) == "alice"
    assert users.verify(SimpleAuth("alice", "secre")) is None
    assert users.verify(SimpleAuth("eve", "secret")) is None
    assert users.verify(BearerAuth("secret")) is None
    assert SimpleAuthenticator(lambda u, p: u if p == "x" else None).verify(
        SimpleAuth("bob", "x")) == "bob"
