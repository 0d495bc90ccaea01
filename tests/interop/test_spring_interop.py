"""Spring Boot RSocket, as its users use it, against rsocket_tx, both directions.

The peer is ``peers/spring`` (Spring Boot 4.0.7, Spring Framework 7.0, Spring Security 7.0,
rsocket-java 1.1.5), driven by :mod:`spring_peer`; its server and its client each start ONCE
per session (``spring_server`` / ``spring_client`` in conftest.py).

OUR SIDE CALLS SPRING: ``rsocket_tx.connect(url, auth=...)`` with ``route=``/``auth=`` per
request (in-process, pytest-twisted) and our CLI ``rsocket-tx`` (subprocess) call the Spring
server's ``@MessageMapping`` routes behind Spring Security RSocket, over TCP and WebSocket:
request-response with JSON (and CBOR) objects, a ``Flux`` stream, a ``Flux -> Flux`` channel,
a ``Mono<Void>`` fire-and-forget, a route that throws; simple and bearer (JWT) credentials per
request and in the SETUP, accepted and refused with what Spring really sends.

SPRING CALLS US: Spring's ``RSocketRequester`` (the client daemon) calls our routed responders
served by ``twistd rsocket``: ``rsocket_tx.apps.orders:OrderService`` (the same answers with
JSON and CBOR data, and as our own CLI gets them) and
``tests.interop.routed_responders:RoutedInterop`` (whose ``echo`` route reports what our
library decoded from Spring's metadata: per-stream data MIME, accept MIME, credentials).

What Spring does on the wire and its quirks: ``peers/spring/README.md``.  Every wait has a
deadline; nothing sleeps.
"""

from __future__ import annotations

import base64
import json
import subprocess
import uuid

import pytest
import pytest_twisted
import spring_peer
from twisted.internet import defer, reactor

from rsocket_tx import (
    ApplicationError,
    Payload,
    RejectedSetupError,
    connect,
)
from rsocket_tx.codecs import codec_for
from rsocket_tx.extensions import COMPOSITE_METADATA, BearerAuth, CustomAuth, SimpleAuth

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("no_logged_errors")]

TRANSPORTS = ["tcp", "ws"]
JSON = "application/json"
CBOR = "application/cbor"
APPLICATION_ERROR = 0x201
REJECTED = 0x202
INVALID = 0x204
REJECTED_SETUP = 0x003
ROUTING_MIME = "message/x.rsocket.routing.v0"
AUTH_MIME = "message/x.rsocket.authentication.v0"
PER_STREAM_MIME = "message/x.rsocket.mime-type.v0"
ACCEPT_MIME = "message/x.rsocket.accept-mime-types.v0"
ALICE = SimpleAuth("alice", "secret")
#: seconds any single wait of the in-process tests may take
WAIT = 30
#: seconds a CLI run may take
CLI_TIMEOUT = 60
ORDERS = "rsocket_tx.apps.orders:OrderService"
ROUTED = "tests.interop.routed_responders:RoutedInterop"


def nonce() -> str:
    """A value no other test sends: events and orders are matched on it."""
    return uuid.uuid4().hex[:12]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def cbor(data: bytes):
    return codec_for(CBOR).decode(data)


def wait(d, timeout: float = WAIT) -> defer.Deferred:
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


# =============================================================================================
# our side calls Spring: rsocket_tx.connect()
# =============================================================================================

@pytest_twisted.async_yield_fixture
async def spring_connect(spring_server):
    """``await spring_connect(transport, **connect_kwargs)``: our RSocket to the Spring server,
    composite metadata and JSON data unless told otherwise; all closed afterwards."""
    opened = []

    async def open_(transport: str = "tcp", **kwargs):
        options = {"metadata_mime_type": COMPOSITE_METADATA, "data_mime_type": JSON, **kwargs}
        rsocket = await wait(connect(spring_server.url_for(transport), reactor=reactor,
                                     **options))
        opened.append(rsocket)
        return rsocket

    yield open_
    for rsocket in opened:
        if rsocket.is_open:
            await wait(rsocket.close())


def spring_event(server, name: str, **match):
    """A Deferred for the Spring server's next event ``name`` whose fields equal ``match``
    (waits in a thread: the reactor keeps running)."""
    return wait(server.wait_event_deferred(name, WAIT - 5, **match))


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest_twisted.ensureDeferred
async def test_create_and_get_order_json(transport, spring_connect, spring_server):
    """request-response with JSON objects: Spring decodes our JSON into its NewOrder record,
    the principal comes from our per-request simple credentials, and the order it returns is
    the one ``orders.{id}`` (a @DestinationVariable) gives back."""
    rsocket = await spring_connect(transport)
    item = nonce()
    order = await wait(rsocket.request_response({"item": item, "qty": 2}, route="orders.create",
                                                auth=ALICE, decode=True))
    assert order == {"id": order["id"], "item": item, "qty": 2, "owner": "alice"}
    again = await wait(rsocket.request_response(None, route=f"orders.{order['id']}", auth=ALICE,
                                                decode=True))
    assert again == order


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest_twisted.ensureDeferred
async def test_create_order_cbor(transport, spring_connect, spring_server):
    """SETUP data MIME ``application/cbor``: Spring's Jackson CBOR codec reads our CBOR and
    answers CBOR; a JSON connection then reads the same order."""
    rsocket = await spring_connect(transport, data_mime_type=CBOR, auth=ALICE)
    await spring_event(spring_server, "setup", data_mime_type=CBOR, principal="alice")
    item = nonce()
    response = await wait(rsocket.request_response({"item": item, "qty": 7},
                                                   route="orders.create"))
    order = cbor(response.data)
    assert order == {"id": order["id"], "item": item, "qty": 7, "owner": "alice"}
    with pytest.raises(ValueError):
        json.loads(response.data)  # really CBOR
    other = await spring_connect(transport)
    assert await wait(other.request_response(None, route=f"orders.{order['id']}", auth=ALICE,
                                             decode=True)) == order


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest_twisted.ensureDeferred
async def test_stream_and_channel_of_one_owner(transport, spring_connect):
    """A request-channel (``Flux<NewOrder> -> Flux<Order>``) creates orders as a JWT subject;
    the request-stream ``orders.feed`` filtered on that owner returns exactly them, with our
    request-n batches of 1."""
    subject = f"svc-{nonce()}"
    rsocket = await spring_connect(transport, auth=BearerAuth(spring_peer.make_jwt(subject)))
    wanted = [{"item": f"part-{i}", "qty": i + 1} for i in range(4)]
    outbound = [Payload(json.dumps(order).encode()) for order in wanted[1:]]
    created = await wait(rsocket.request_channel(wanted[0], outbound, route="orders.bulk",
                                                 decode=True).collect())
    assert [{"item": o["item"], "qty": o["qty"]} for o in created] == wanted
    assert {o["owner"] for o in created} == {subject}
    feed = await wait(rsocket.request_stream({"owner": subject}, route="orders.feed", prefetch=1,
                                             decode=True).collect())
    assert feed == created


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest_twisted.ensureDeferred
async def test_stream_request_n_and_completion(transport, spring_connect, spring_server):
    """``Flux.range`` on a public route: every item arrives with request-n batches of 2 and the
    stream completes (Spring's Flux completed after 7)."""
    rsocket = await spring_connect(transport)
    items = await wait(rsocket.request_stream({"count": 7}, route="public.count", prefetch=2,
                                              decode=True).collect())
    assert items == [{"n": i} for i in range(7)]
    await spring_event(spring_server, "complete", route="public.count", sent=7)


@pytest_twisted.ensureDeferred
async def test_stream_cancel(spring_connect, spring_server):
    """Cancelling after 3 of 100 000 items cancels Spring's Flux."""
    rsocket = await spring_connect("tcp")
    stream = rsocket.request_stream({"count": 100000}, route="public.count", prefetch=4,
                                    decode=True)
    items = await wait(stream.collect(take=3))
    assert items == [{"n": 0}, {"n": 1}, {"n": 2}]
    event = await spring_event(spring_server, "cancel", route="public.count")
    assert 3 <= event["sent"] < 100000


@pytest_twisted.ensureDeferred
async def test_channel_echo_anonymous(spring_connect):
    """``Flux<Object> -> Flux<Object>`` on a public route, no credentials: JSON values of every
    kind come back as sent."""
    rsocket = await spring_connect("ws")
    values = [{"a": [1, 2.5, None]}, "text", 42, [True, False]]
    outbound = [Payload(json.dumps(value).encode()) for value in values[1:]]
    echoed = await wait(rsocket.request_channel(values[0], outbound, route="public.echo",
                                                decode=True).collect())
    assert echoed == values


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest_twisted.ensureDeferred
async def test_one_mib_json_fragmented(transport, spring_connect):
    """A 1 MiB JSON string through Spring's echo channel: we fragment it at 4096 bytes, Spring
    reassembles it, decodes and re-encodes it, and sends it back (it fragments nothing:
    ``spring.rsocket.server.fragment-size`` is unset)."""
    rsocket = await spring_connect(transport, fragment_size=4096)
    big = "x" * (1 << 20)
    echoed = await wait(rsocket.request_channel(big, route="public.echo", complete=True,
                                                decode=True).collect())
    assert echoed == [big]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest_twisted.ensureDeferred
async def test_fire_and_forget(transport, spring_connect, spring_server):
    """A ``Mono<Void>`` route serves fire-and-forget; the principal is the SETUP's."""
    rsocket = await spring_connect(transport, auth=SimpleAuth("bob", "hunter2"))
    marker = {"note": nonce()}
    await wait(rsocket.fire_and_forget(marker, route="orders.audit"))
    event = await spring_event(spring_server, "audit", data=marker)
    assert event["principal"] == "bob"


@pytest.mark.parametrize("route, data, message", [
    ("orders.fail", {}, "failed as asked"),
    ("orders.no-such-id", None, "no order 'no-such-id'"),
    ("orders.create", {"item": "x", "qty": 0}, "order.qty must be an integer >= 1"),
], ids=["throws", "mono-error", "validation"])
@pytest_twisted.ensureDeferred
async def test_application_errors(route, data, message, spring_connect):
    """An exception from a handler (thrown, or a ``Mono.error``) is ERROR[APPLICATION_ERROR]
    with the exception's message, and the connection stays usable."""
    rsocket = await spring_connect("tcp", auth=ALICE)
    with pytest.raises(ApplicationError) as caught:
        await wait(rsocket.request_response(data, route=route))
    assert caught.value.error_code == APPLICATION_ERROR
    assert caught.value.message == message
    assert (await wait(rsocket.request_response(None, route="whoami", decode=True))
            )["principal"] == "alice"


@pytest_twisted.ensureDeferred
async def test_unknown_route(spring_connect):
    """No handler: Spring answers ERROR[APPLICATION_ERROR] naming the destination (not
    REJECTED)."""
    rsocket = await spring_connect("tcp", auth=ALICE)
    with pytest.raises(ApplicationError) as caught:
        await wait(rsocket.request_response({}, route="no.such.route"))
    assert caught.value.error_code == APPLICATION_ERROR
    assert caught.value.message.startswith(
        "Destination 'no.such.route' does not support REQUEST_RESPONSE")


# ---------------------------------------------------------------------------------------------
# Spring Security
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest_twisted.ensureDeferred
async def test_missing_credentials_access_denied(transport, spring_connect):
    """No credentials: the request runs as ``anonymousUser``; an authenticated route answers
    ERROR[APPLICATION_ERROR] "Access Denied", a public one serves it."""
    rsocket = await spring_connect(transport)
    with pytest.raises(ApplicationError) as caught:
        await wait(rsocket.request_response({"item": "x", "qty": 1}, route="orders.create"))
    assert (caught.value.error_code, caught.value.message) == (APPLICATION_ERROR, "Access Denied")
    info = await wait(rsocket.request_response({}, route="public.info", decode=True))
    assert info["principal"] == "anonymousUser" and info["spring_boot"] == "4.0.7"


@pytest.mark.parametrize("auth, message", [
    (SimpleAuth("alice", "wrong"), "Invalid Credentials"),
    (SimpleAuth("mallory", "secret"), "Invalid Credentials"),
    (BearerAuth(spring_peer.make_jwt("carol", key=b"another key, another signature!")),
     "Failed to validate the token"),
    (BearerAuth("not.a.jwt"), "An error occurred while attempting to decode the Jwt: "),
], ids=["bad-password", "unknown-user", "bad-signature", "malformed-token"])
@pytest_twisted.ensureDeferred
async def test_bad_request_credentials(auth, message, spring_connect):
    """Refused per-request credentials: ERROR[APPLICATION_ERROR] with Spring Security's
    message (not REJECTED), on a public route too; the connection stays usable.  (``message``
    is the whole message, or its start when it ends with a space.)"""
    rsocket = await spring_connect("tcp")
    for route in ("whoami", "public.info"):
        with pytest.raises(ApplicationError) as caught:
            await wait(rsocket.request_response({}, route=route, auth=auth))
        assert caught.value.error_code == APPLICATION_ERROR
        if message.endswith(" "):
            assert caught.value.message.startswith(message), caught.value.message
        else:
            assert caught.value.message == message
    assert (await wait(rsocket.request_response({}, route="whoami", auth=ALICE, decode=True))
            )["principal"] == "alice"


@pytest_twisted.ensureDeferred
async def test_expired_token(spring_connect):
    rsocket = await spring_connect("tcp")
    with pytest.raises(ApplicationError) as caught:
        await wait(rsocket.request_response(
            {}, route="whoami", auth=BearerAuth(spring_peer.make_jwt("carol", lifetime=-600))))
    assert caught.value.error_code == APPLICATION_ERROR
    assert caught.value.message.startswith("Jwt expired at ")


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kind", ["simple", "bearer"])
@pytest_twisted.ensureDeferred
async def test_good_request_credentials(kind, transport, spring_connect):
    subject = f"jwt-{nonce()}"
    auth = ALICE if kind == "simple" else BearerAuth(spring_peer.make_jwt(subject, scope="read"))
    rsocket = await spring_connect(transport)
    who = await wait(rsocket.request_response({}, route="whoami", auth=auth, decode=True))
    if kind == "simple":
        assert who["principal"] == "alice" and "ROLE_USER" in who["authorities"]
        assert who["authentication"] == "UsernamePasswordAuthenticationToken"
    else:
        assert who["principal"] == subject and "SCOPE_read" in who["authorities"]
        assert who["authentication"] == "JwtAuthenticationToken"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("kind", ["simple", "bearer"])
@pytest_twisted.ensureDeferred
async def test_setup_credentials(kind, transport, spring_connect, spring_server):
    """Credentials in the SETUP metadata (``connect(auth=...)``) authenticate every request of
    the connection that carries none of its own (Spring Security's PayloadSocketAcceptor keeps
    the SETUP's security context)."""
    subject = f"jwt-{nonce()}"
    auth = SimpleAuth("bob", "hunter2") if kind == "simple" \
        else BearerAuth(spring_peer.make_jwt(subject))
    name = "bob" if kind == "simple" else subject
    rsocket = await spring_connect(transport, auth=auth)
    await spring_event(spring_server, "setup", principal=name)
    who = await wait(rsocket.request_response({}, route="whoami", decode=True))
    assert who["principal"] == name
    items = await wait(rsocket.request_stream({"owner": name}, route="orders.feed",
                                              decode=True).collect())
    assert all(order["owner"] == name for order in items)


@pytest_twisted.ensureDeferred
async def test_request_credentials_override_setup(spring_connect):
    subject = f"jwt-{nonce()}"
    rsocket = await spring_connect("tcp", auth=ALICE)
    who = await wait(rsocket.request_response(
        {}, route="whoami", auth=BearerAuth(spring_peer.make_jwt(subject)), decode=True))
    assert who["principal"] == subject
    assert (await wait(rsocket.request_response({}, route="whoami", decode=True))
            )["principal"] == "alice"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("auth, message", [
    (SimpleAuth("alice", "wrong"), "Invalid Credentials"),
    (BearerAuth(spring_peer.make_jwt("carol", key=b"another key, another signature!")),
     "Failed to validate the token"),
], ids=["simple", "bearer"])
@pytest_twisted.ensureDeferred
async def test_bad_setup_credentials(auth, message, transport, spring_connect):
    """Refused SETUP credentials: ERROR[REJECTED_SETUP] on stream 0 with Spring Security's
    message; the pending request fails with it and the connection closes."""
    rsocket = await spring_connect(transport, auth=auth)
    with pytest.raises(RejectedSetupError) as caught:
        await wait(rsocket.request_response({}, route="public.info"))
    assert (caught.value.error_code, caught.value.message) == (REJECTED_SETUP, message)
    await wait(rsocket.closed)
    assert not rsocket.is_open


@pytest_twisted.ensureDeferred
async def test_authority_required(spring_connect):
    """``admin.*`` needs the authority SCOPE_admin: a user without it gets "Access Denied", a
    JWT whose scope says ``admin`` is served."""
    rsocket = await spring_connect("tcp")
    with pytest.raises(ApplicationError) as caught:
        await wait(rsocket.request_response({}, route="admin.stats", auth=ALICE))
    assert caught.value.message == "Access Denied"
    stats = await wait(rsocket.request_response(
        {}, route="admin.stats", auth=BearerAuth(spring_peer.make_jwt("root", scope="admin")),
        decode=True))
    assert stats["principal"] == "root" and stats["orders"] >= 0


@pytest_twisted.ensureDeferred
async def test_custom_auth_type_is_ignored(spring_connect):
    """Spring Security reads only the well-known simple and bearer types: a custom auth type
    counts as no credentials at all (anonymous), not as bad ones."""
    rsocket = await spring_connect("tcp")
    custom = CustomAuth("x.custom", b"opaque")
    with pytest.raises(ApplicationError) as caught:
        await wait(rsocket.request_response({}, route="whoami", auth=custom))
    assert caught.value.message == "Access Denied"
    info = await wait(rsocket.request_response({}, route="public.info", auth=custom,
                                               decode=True))
    assert info["principal"] == "anonymousUser"


@pytest_twisted.ensureDeferred
async def test_per_stream_mime_types_ignored_by_spring(spring_connect):
    """Spring reads data by the SETUP's data MIME type only: a per-stream data MIME entry
    (here CBOR data on a JSON connection) is ignored, so the CBOR bytes reach its JSON decoder;
    an accept-MIME entry asking for CBOR still gets JSON."""
    rsocket = await spring_connect("tcp", auth=ALICE)
    with pytest.raises(ApplicationError) as caught:
        await wait(rsocket.request_response({"item": "x", "qty": 1}, route="orders.create",
                                            data_mime_type=CBOR))
    assert caught.value.error_code == APPLICATION_ERROR
    response = await wait(rsocket.request_response({}, route="whoami",
                                                   accept_mime_types=[CBOR]))
    assert json.loads(response.data)["principal"] == "alice"
    assert response.metadata is None


@pytest.fixture(scope="module")
def spring_docs_server():
    """A second Spring server whose security is ``simpleAuthentication()`` + ``jwt()`` as the
    Spring Security reference shows them side by side (``--security docs``)."""
    server = spring_peer.start_server(security="docs")
    yield server
    server.stop()


@pytest_twisted.ensureDeferred
async def test_spring_security_simple_plus_jwt_quirk(spring_docs_server):
    """Spring Security 7.0.6 with ``simpleAuthentication()`` and ``jwt()`` together (README.md,
    quirk 1): a bearer token reaches the user-details manager ("Invalid Credentials"), and
    valid simple credentials stop the interceptor chain in the JWT interceptor, so the request
    runs with NO security context and NO authorization check (``admin.*`` is served to alice,
    principal empty).  The main server (``--security either``) routes each token to its own
    manager instead."""
    rsocket = await wait(connect(spring_docs_server.url_for("tcp"), reactor=reactor,
                                 metadata_mime_type=COMPOSITE_METADATA, data_mime_type=JSON))
    try:
        with pytest.raises(ApplicationError) as caught:
            await wait(rsocket.request_response(
                {}, route="whoami", auth=BearerAuth(spring_peer.make_jwt("carol"))))
        assert caught.value.message == "Invalid Credentials"
        assert await wait(rsocket.request_response({}, route="whoami", auth=ALICE)) is None
        stats = await wait(rsocket.request_response({}, route="admin.stats", auth=ALICE,
                                                    decode=True))
        assert stats["principal"] == ""
    finally:
        await wait(rsocket.close())


# =============================================================================================
# our side calls Spring: the rsocket-tx CLI
# =============================================================================================

def cli(rsocket_tx_cli: str, command: str, endpoint: str, *args: str, stdin: str = "",
        ) -> subprocess.CompletedProcess:
    """Run ``rsocket-tx COMMAND ENDPOINT ARGS`` (JSON data MIME), bounded by a timeout."""
    return subprocess.run([rsocket_tx_cli, command, endpoint, "--data-mime", JSON,
                           "--timeout", str(CLI_TIMEOUT - 10), *args],
                          input=stdin.encode(), capture_output=True, timeout=CLI_TIMEOUT)


def lines(completed: subprocess.CompletedProcess) -> list:
    assert completed.returncode == 0, completed
    return [json.loads(line) for line in completed.stdout.decode().splitlines()]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cli_request_response_and_stream(transport, spring_server, rsocket_tx_cli):
    endpoint = spring_server.url_for(transport)
    item = nonce()
    [order] = lines(cli(rsocket_tx_cli, "request", endpoint, "--route", "orders.create",
                        "--auth-simple", "alice:secret", "-d",
                        json.dumps({"item": item, "qty": 3})))
    assert order == {"id": order["id"], "item": item, "qty": 3, "owner": "alice"}
    items = lines(cli(rsocket_tx_cli, "stream", spring_server.endpoint(transport),
                      "--route", "public.count", "--request-n", "2", "-d", '{"count": 5}'))
    assert items == [{"n": i} for i in range(5)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_cli_channel_and_fire_and_forget(transport, spring_server, rsocket_tx_cli):
    """A channel from standard input as a bearer (JWT) subject whose token is in the SETUP
    (``--setup-auth``), then a fire-and-forget with per-request simple credentials.  (A
    fire-and-forget with SETUP credentials from the CLI is lost: README.md, quirk 6.)"""
    subject = f"cli-{nonce()}"
    endpoint = spring_server.url_for(transport)
    created = lines(cli(rsocket_tx_cli, "channel", endpoint, "--route", "orders.bulk",
                        "--setup-auth", "--auth-bearer", spring_peer.make_jwt(subject),
                        stdin='{"item": "a", "qty": 1}\n{"item": "b", "qty": 2}\n'))
    assert [(o["item"], o["qty"], o["owner"]) for o in created] == [("a", 1, subject),
                                                                    ("b", 2, subject)]
    marker = {"cli": nonce()}
    completed = cli(rsocket_tx_cli, "fnf", endpoint, "--route", "orders.audit",
                    "--auth-simple", "bob:hunter2", "-d", json.dumps(marker))
    assert completed.returncode == 0, completed
    assert spring_server.wait_event("audit", WAIT, data=marker)["principal"] == "bob"


@pytest.mark.parametrize("args, expected", [
    (("--route", "orders.create", "-d", "{}"), "APPLICATION_ERROR: Access Denied"),
    (("--route", "whoami", "--auth-simple", "alice:nope", "-d", "{}"),
     "APPLICATION_ERROR: Invalid Credentials"),
    (("--route", "whoami", "--setup-auth", "--auth-simple", "alice:nope", "-d", "{}"),
     "REJECTED_SETUP: Invalid Credentials"),
    (("--route", "orders.fail", "--auth-simple", "alice:secret", "-d", "{}"),
     "APPLICATION_ERROR: failed as asked"),
], ids=["no-credentials", "bad-credentials", "bad-setup-credentials", "throws"])
def test_cli_errors(args, expected, spring_server, rsocket_tx_cli):
    """Exit status 1 and the ERROR's code name and message on standard error."""
    completed = cli(rsocket_tx_cli, "request", spring_server.url_for("tcp"), *args)
    assert completed.returncode == 1, completed
    assert expected in completed.stderr.decode(), completed


# =============================================================================================
# Spring calls us: RSocketRequester -> twistd rsocket
# =============================================================================================

@pytest.fixture(scope="module")
def orders_server(our_server_class):
    """``rsocket_tx.apps.orders:OrderService`` on TCP and WebSocket, frame log on."""
    server = our_server_class("--responder", ORDERS, "--debug", transports=("tcp", "ws"),
                              name="twistd rsocket (OrderService)")
    yield server
    server.stop_and_check()


@pytest.fixture(scope="module")
def routed_server(our_server_class):
    """``RoutedInterop`` (what our library decoded, per request), TCP, frame log on."""
    server = our_server_class("--responder", ROUTED, "--debug",
                              name="twistd rsocket (RoutedInterop)")
    yield server
    server.stop_and_check()


def our_url(server, transport: str = "tcp") -> str:
    port = server.port_for(transport)
    return f"tcp://127.0.0.1:{port}" if transport == "tcp" else f"ws://127.0.0.1:{port}/rsocket"


def ok(answer: dict) -> dict:
    assert answer["ok"], answer
    return answer


def refused(answer: dict) -> dict:
    assert not answer["ok"] and "error" in answer, answer
    return answer["error"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_spring_requester_json_and_cbor_same_answers(transport, spring_client, orders_server,
                                                     rsocket_tx_cli):
    """Spring creates an order with JSON data, reads it back with CBOR data, and our own CLI
    reads the same document: the same answers whatever the data MIME type."""
    url = our_url(orders_server, transport)
    mark = orders_server.mark()
    item = nonce()
    created = ok(spring_client.call(url, route="orders.create", data_mime=JSON,
                                    setup_auth={"simple": ["alice", "secret"]},
                                    data={"item": item, "qty": 4}))
    order = created["value"]
    assert order == {"id": order["id"], "item": item, "qty": 4, "owner": "alice"}
    orders_server.wait_line(r"recv SETUP .*data_mime_type=b'application/json'", mark)
    mark = orders_server.mark()
    via_cbor = ok(spring_client.call(url, route="orders.{id}", route_vars=[order["id"]],
                                     data_mime=CBOR, auth={"simple": ["alice", "secret"]}))
    assert via_cbor["value"] == order
    orders_server.wait_line(r"recv SETUP .*data_mime_type=b'application/cbor'", mark)
    ours = cli(rsocket_tx_cli, "request", url, "--route", f"orders.{order['id']}",
               "--auth-simple", "alice:secret")
    assert lines(ours) == [order]


@pytest.mark.parametrize("mime", [JSON, CBOR])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_spring_requester_channel_and_stream(transport, mime, spring_client, orders_server,
                                             rsocket_tx_cli):
    """``retrieveFlux`` of a channel (``data(Flux)``) creates orders as the bearer's principal;
    then Spring's feed and our CLI's feed are the same list, ending with them."""
    url = our_url(orders_server, transport)
    wanted = [{"item": nonce(), "qty": i + 1} for i in range(3)]
    created = ok(spring_client.call(url, "request-channel", route="orders.bulk", data_mime=mime,
                                    setup_auth={"bearer": "demo-token"}, items=wanted))
    assert created["completed"]
    assert [{"item": o["item"], "qty": o["qty"]} for o in created["values"]] == wanted
    assert {o["owner"] for o in created["values"]} == {"service"}
    feed = ok(spring_client.call(url, "request-stream", route="orders.feed", data_mime=mime,
                                 auth={"bearer": "demo-token"}, data={"owner": "service"}))
    assert feed["values"][-3:] == created["values"]
    ours = lines(cli(rsocket_tx_cli, "stream", url, "--route", "orders.feed", "--auth-bearer",
                     "demo-token", "-d", '{"owner": "service"}'))
    assert ours == feed["values"]


def test_spring_requester_fire_and_forget(spring_client, orders_server):
    url = our_url(orders_server)
    mark = orders_server.mark()
    marker = nonce()
    answer = ok(spring_client.call(url, "fire-and-forget", route="orders.audit", data_mime=JSON,
                                   auth={"simple": ["bob", "hunter2"]}, data={"note": marker}))
    assert answer["sent"]
    orders_server.wait_line(rf"audit from bob: \{{'note': '{marker}'\}}", mark)


def test_spring_default_data_mime_is_cbor(spring_client, orders_server):
    """With a CBOR codec on the classpath (Spring Boot registers it before JSON), an
    RSocketRequester without ``dataMimeType`` sends SETUP ``application/cbor``: our server
    serves it."""
    url = our_url(orders_server)
    mark = orders_server.mark()
    item = nonce()
    answer = ok(spring_client.call(url, route="orders.create",
                                   setup_auth={"simple": ["alice", "secret"]},
                                   data={"item": item, "qty": 1}))
    assert answer["setup"] == {"data_mime_type": CBOR, "metadata_mime_type": COMPOSITE_METADATA}
    assert answer["value"]["item"] == item
    orders_server.wait_line(r"recv SETUP .*data_mime_type=b'application/cbor'", mark)


@pytest.mark.parametrize("command, code, message", [
    ({"route": "orders.{id}", "route_vars": ["999999"], "auth": {"bearer": "demo-token"}},
     INVALID, "no order '999999'"),
    ({"route": "orders.create", "data": {"item": "x", "qty": 1}}, REJECTED,
     "authentication required: send credentials in the SETUP or the request metadata"),
    ({"route": "orders.create", "data": {"item": "x", "qty": 1},
      "auth": {"simple": ["alice", "nope"]}}, REJECTED, "invalid simple credentials"),
    ({"route": "orders.create", "data": {"item": "x", "qty": 1},
      "setup_auth": {"bearer": "stolen"}}, REJECTED_SETUP, "invalid bearer credentials"),
], ids=["invalid", "no-credentials", "bad-credentials", "bad-setup-credentials"])
def test_spring_requester_errors(command, code, message, spring_client, orders_server):
    """Our typed errors reach Spring as rsocket-java's exceptions with the same code and
    message (ERROR[REJECTED_SETUP] as RejectedSetupException)."""
    error = refused(spring_client.call(our_url(orders_server), data_mime=JSON, **command))
    assert (error["code"], error["message"]) == (code, message)


def test_spring_requester_unknown_route(spring_client, orders_server):
    error = refused(spring_client.call(our_url(orders_server), "request-stream",
                                       route="orders.nowhere.at.all", data_mime=JSON,
                                       auth={"bearer": "demo-token"}))
    assert error["code"] == REJECTED and error["class"] == "RejectedException"
    assert "no route 'orders.nowhere.at.all' for request-stream" in error["message"]


def test_spring_per_stream_data_mime(spring_client, orders_server, routed_server):
    """Spring has no API for per-stream MIME types: its users add the entry themselves
    (``.metadata(bytes, "message/x.rsocket.mime-type.v0")``, written with rsocket-java's
    MimeTypeMetadataCodec) and encode the data with the codec of that type.  Our router decodes
    CBOR data on a JSON connection by it and answers in it."""
    value = {"item": nonce(), "qty": 5}
    seen = json.loads(base64.b64decode(ok(spring_client.call(
        our_url(routed_server), route="echo", data_mime=JSON, stream_data_mime=CBOR,
        data=value, retrieve="bytes"))["value"]["b64"]))
    assert seen["data_mime_type"] == CBOR and seen["per_stream_mime"] == CBOR
    assert seen["data"] == value
    # Spring writes every entry but the route with its MIME type as a string (length-1
    # prefix), never as a well-known id: our parser takes both
    assert seen["entries"] == [
        {"mime": ROUTING_MIME, "id": 0x7E, "content_b64": b64(b"\x04echo")},
        {"mime": PER_STREAM_MIME, "id": None, "content_b64": b64(bytes([0x80 | 0x01]))},
    ]
    answer = ok(spring_client.call(our_url(orders_server), route="orders.create",
                                   data_mime=JSON, auth={"simple": ["alice", "secret"]},
                                   stream_data_mime=CBOR, data=value, retrieve="bytes"))
    order = cbor(base64.b64decode(answer["value"]["b64"]))
    assert order == {"id": order["id"], **value, "owner": "alice"}


def test_spring_accept_mime_types(spring_client, orders_server, routed_server):
    """An accept-MIME entry (``message/x.rsocket.accept-mime-types.v0``) as Spring's users
    write it: our router answers CBOR on a JSON connection and names the MIME type in the
    response's composite metadata (Spring cannot read it: RSocketRequester hides response
    metadata and decodes by the SETUP's type, so the client asks for the raw bytes)."""
    accept = [CBOR, "text/plain", "application/x.custom"]
    seen = json.loads(base64.b64decode(ok(spring_client.call(
        our_url(routed_server), route="echo", data_mime=JSON, accept=accept, data={},
        retrieve="bytes"))["value"]["b64"]))
    assert seen["accept_mime_types"] == accept
    assert seen["entries"][1]["mime"] == ACCEPT_MIME and seen["entries"][1]["id"] is None
    mark = orders_server.mark()
    item = nonce()
    answer = ok(spring_client.call(our_url(orders_server), route="orders.create",
                                   data_mime=JSON, auth={"bearer": "demo-token"}, accept=[CBOR],
                                   data={"item": item, "qty": 2}, retrieve="bytes"))
    order = cbor(base64.b64decode(answer["value"]["b64"]))
    assert order["item"] == item and order["owner"] == "service"
    # the response names its MIME type: composite entry 0x7A (per-stream MIME), value 0x81
    orders_server.wait_line(r"send PAYLOAD stream=1 data=.* metadata=b'\\xfa\\x00\\x00\\x01"
                            r"\\x81' complete next", mark)


@pytest.mark.parametrize("where", ["request", "setup"])
def test_spring_credentials_on_the_wire(where, spring_client, routed_server):
    """Spring Security's SimpleAuthenticationEncoder / BearerTokenAuthenticationEncoder, per
    request (``.metadata(UsernamePasswordMetadata, auth MIME)``) and in the SETUP
    (``setupMetadata``): our library reads them as the simple and bearer types."""
    key = "auth" if where == "request" else "setup_auth"
    seen = json.loads(base64.b64decode(ok(spring_client.call(
        our_url(routed_server), route="echo", data_mime=JSON, data={}, retrieve="bytes",
        **{key: {"simple": ["alice", "secret"]}}))["value"]["b64"]))
    simple = {"type": "simple", "username": "alice", "password": "secret"}
    assert seen["principal"] == "alice"
    if where == "request":
        assert seen["auth"] == simple and seen["setup_auth"] is None
        assert seen["entries"][1] == {"mime": AUTH_MIME, "id": None,
                                      "content_b64": b64(b"\x80\x00\x05alicesecret")}
    else:
        assert seen["setup_auth"] == simple and seen["auth"] is None
    seen = json.loads(base64.b64decode(ok(spring_client.call(
        our_url(routed_server), route="echo", data_mime=JSON, data={}, retrieve="bytes",
        **{key: {"bearer": "t0ken"}}))["value"]["b64"]))
    assert seen["principal"] == "service"
    assert seen[key] == {"type": "bearer", "token": "t0ken"}


@pytest.mark.parametrize("interaction, command, items", [
    ("request-stream", {"route": "echo.stream", "data": {"count": 3}}, 4),
    ("request-channel", {"route": "echo.channel", "items": [{"i": 0}, {"i": 1}, {"i": 2}]}, 3),
], ids=["stream", "channel"])
@pytest.mark.parametrize("mode", ["request", "limit-rate"])
def test_spring_exact_credit_completes(mode, interaction, command, items, spring_client,
                                       routed_server):
    """A Reactor subscriber that requests exactly as many items as come (``request(n)``
    once), or ``limitRate(2)``, gets them AND the completion: completion needs no credit
    (issue 11, item 8; before the fix the exact-credit stream and channel never completed)."""
    credit = {"request_n": items} if mode == "request" else {"limit_rate": 2}
    answer = ok(spring_client.call(our_url(routed_server), interaction, data_mime=JSON,
                                   timeout=15, **credit, **command))
    assert answer["completed"] and len(answer["values"]) == items, answer
    values = answer["values"]
    if interaction == "request-stream":
        assert values[1:] == [{"index": 0}, {"index": 1}, {"index": 2}]
    else:
        assert [value["index"] for value in values] == [0, 1, 2]
        assert [value["data"] for value in values] == command["items"]


def test_spring_take_cancels(spring_client, routed_server):
    """``take(2)`` cancels our stream: CANCEL reaches our server."""
    mark = routed_server.mark()
    answer = ok(spring_client.call(our_url(routed_server), "request-stream",
                                   route="echo.stream", data_mime=JSON, data={"count": 500},
                                   take=2))
    assert answer["cancelled"] and len(answer["values"]) == 2
    routed_server.wait_frame("recv", "CANCEL", mark)
