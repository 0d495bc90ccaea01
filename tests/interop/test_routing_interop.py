"""Routing, composite metadata and authentication against third-party peers.

OUR ROUTED SERVER (``twistd -n rsocket --responder tests.interop.routed_responders:…``, a
subprocess) against the third-party ROUTING CLIENTS (``peers.run_routing_client``):

* rsocket-py 0.4.20 (``peers/py/routing_client.py``: ``rsocket.extensions`` helpers);
* rsocket-js 1.0.0-alpha.3 (``peers/js-1.0.0-alpha.3/messaging_client.js``: rsocket-messaging's
  ``RSocketRequester`` + rsocket-composite-metadata).

Both write the metadata of a request with their own library, and our responder reports back
(in the reply and in its log) what our library decoded: route, path variables, principal,
credentials, data MIME type, data and every composite entry.

OUR CLIENT (``rsocket_tx.connect()`` with ``route=``/``auth=``, in-process under
pytest-twisted) against rsocket-py's ROUTING SERVER (``peers.start_routing_server``:
``RequestRouter`` + ``RoutingRequestHandler``), whose replies say what rsocket-py decoded from
our metadata.

Wire facts these tests rely on are recorded in ``peers/README.md`` ("Routing and composite
metadata").  Everything is bounded by timeouts; nothing sleeps.
"""

from __future__ import annotations

import base64
import json
import uuid

import peers
import pytest
import pytest_twisted
from twisted.internet import defer, reactor

from rsocket_tx import (
    ApplicationError,
    Payload,
    RejectedError,
    RejectedSetupError,
    RSocketError,
    connect,
)
from rsocket_tx.extensions import (
    COMPOSITE_METADATA,
    BearerAuth,
    CustomAuth,
    SimpleAuth,
    encode_composite,
    parse_metadata,
)

pytestmark = [pytest.mark.interop,
              pytest.mark.usefixtures("routing_peers_installed", "no_logged_errors")]

CLIENT_PEERS = list(peers.ROUTING_CLIENTS)
ROUTED = "tests.interop.routed_responders:RoutedInterop"
STRICT = "tests.interop.routed_responders:StrictRoutedInterop"

APPLICATION_ERROR = 0x201
REJECTED = 0x202
REJECTED_SETUP = 0x003
#: peers/README.md, "Routing and composite metadata", rsocket-py 2
ROUTING_MIME = "message/x.rsocket.routing.v0"
AUTH_MIME = "message/x.rsocket.authentication.v0"
PER_STREAM_MIME = "message/x.rsocket.mime-type.v0"
#: seconds any single wait of the in-process tests may take
WAIT = 30
#: (our auth, what rsocket-py's routing server decodes from it, the principal it gives)
GOOD_CREDENTIALS = [
    (SimpleAuth("alice", "secret"),
     {"type": "simple", "username": "alice", "password": "secret"}, "alice"),
    (BearerAuth("t0ken"), {"type": "bearer", "token": "t0ken"}, "bearer:t0ken"),
]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def nonce() -> str:
    """A value no other test sends: events are matched on it."""
    return uuid.uuid4().hex


# ---------------------------------------------------------------------------------------------
# fixtures
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def routed_server(our_server_class):
    """Our server with RoutedInterop (anonymous requests allowed), frame log on."""
    server = our_server_class("--responder", ROUTED, "--debug",
                              name="twistd rsocket (RoutedInterop)")
    yield server
    server.stop_and_check()


@pytest.fixture(scope="module")
def strict_server(our_server_class):
    """Our server with StrictRoutedInterop (every request must be authenticated)."""
    server = our_server_class("--responder", STRICT, name="twistd rsocket (StrictRoutedInterop)")
    yield server
    server.stop_and_check()


def routed(peer: str, server, interaction: str = "request-response", **options) -> dict:
    """Run ``peer``'s routing client against our ``server``."""
    return peers.run_routing_client(peer, server.port, interaction, **options)


def reply(result: dict) -> dict:
    """The JSON document of a successful request-response result."""
    assert result["exit_code"] == 0, result
    payload = result["payload"]
    document = payload["json"]
    if document is None:  # a non-JSON data MIME type: our responder still answers JSON
        document = json.loads(payload["data"])
    return document


def entry_mimes(document: dict) -> list[str | None]:
    return [entry["mime"] for entry in document["entries"]]


# ---------------------------------------------------------------------------------------------
# our routed server <- third-party routing clients: routes, data, interaction models
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_route_with_json_data(peer, routed_server):
    mark = routed_server.mark()
    value = {"q": [1, "two", None], "n": nonce()}
    seen = reply(routed(peer, routed_server, route="echo", data=value))
    assert seen["route"] == "echo" and seen["tags"] == ["echo"]
    assert seen["data"] == value
    assert seen["data_mime_type"] == "application/json" and seen["per_stream_mime"] is None
    assert seen["principal"] is None and seen["auth"] is None and seen["setup_auth"] is None
    assert seen["errors"] == []
    # the routing entry was written with its well-known id, its content is <len>"echo"
    assert seen["entries"] == [{"mime": ROUTING_MIME, "id": 0x7E,
                                "content_b64": b64(b"\x04echo")}]
    setup = routed_server.wait_event("setup", mark)
    assert setup["metadata_mime_type"] == COMPOSITE_METADATA
    assert setup["data_mime_type"] == "application/json"
    event = routed_server.wait_event("routed", mark, interaction="request-response")
    assert event["seen"]["data"] == value


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_route_with_path_variables(peer, routed_server):
    document = reply(routed(peer, routed_server, route="users.bob.orders.42", data={}))
    assert document == {"user": "bob", "order": "42", "principal": None}


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_unknown_request_response_route_goes_to_the_fallback(peer, routed_server):
    document = reply(routed(peer, routed_server, route="nowhere.at.all", data={}))
    assert document == {"fallback": "nowhere.at.all"}


@pytest.mark.parametrize("interaction", ["request-stream", "request-channel"])
@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_unknown_route_rejected_naming_it(peer, interaction, routed_server):
    """No fallback for streams and channels: ERROR[REJECTED] whose message names the route."""
    result = routed(peer, routed_server, interaction, route="no.such.route", data={})
    assert result["exit_code"] == 1, result
    assert result["error"]["code"] == REJECTED
    assert "no.such.route" in result["error"]["message"]
    assert result["payloads"] == []


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_request_without_route_rejected(peer, routed_server):
    result = routed(peer, routed_server, "request-stream", data={})
    assert result["exit_code"] == 1, result
    assert result["error"]["code"] == REJECTED
    assert "route" in result["error"]["message"]


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_handler_error_is_application_error(peer, routed_server):
    result = routed(peer, routed_server, route="fail", data={})
    assert result["exit_code"] == 1, result
    assert result["error"] == {"code": APPLICATION_ERROR, "message": "failed as asked"}


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_request_stream(peer, routed_server):
    result = routed(peer, routed_server, "request-stream", route="echo.stream",
                    data={"count": 3})
    assert result["exit_code"] == 0 and result["completed"], result
    documents = [p["json"] for p in result["payloads"]]
    assert documents[0]["route"] == "echo.stream"
    assert documents[0]["interaction"] == "request_stream"
    assert documents[0]["data"] == {"count": 3}
    assert documents[1:] == [{"index": 0}, {"index": 1}, {"index": 2}]


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_request_stream_cancelled(peer, routed_server):
    result = routed(peer, routed_server, "request-stream", route="echo.stream",
                    data={"count": 50}, take=2)
    assert result["exit_code"] == 0 and result["cancelled"], result
    assert [p["json"].get("index") for p in result["payloads"]] == [None, 0]


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_request_channel(peer, routed_server):
    """The first payload carries the metadata (route); the next ones carry none and belong to
    the same routed channel."""
    mark = routed_server.mark()
    result = routed(peer, routed_server, "request-channel", route="echo.channel",
                    data={"i": 0}, next=[{"i": 1}, {"i": 2}])
    assert result["exit_code"] == 0 and result["completed"], result
    documents = [p["json"] for p in result["payloads"]]
    assert documents[0]["route"] == "echo.channel" and documents[0]["index"] == 0
    assert documents[0]["data"] == {"i": 0}
    assert documents[1:] == [{"index": 1, "data": {"i": 1}}, {"index": 2, "data": {"i": 2}}]
    routed_server.wait_event("channel_next", mark, index=2)


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_request_channel_single_payload(peer, routed_server):
    """REQUEST_CHANNEL with C (no further payloads): one answer, then completion."""
    result = routed(peer, routed_server, "request-channel", route="echo.channel",
                    data={"only": True})
    assert result["exit_code"] == 0 and result["completed"], result
    assert len(result["payloads"]) == 1
    assert result["payloads"][0]["json"]["data"] == {"only": True}


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_fire_and_forget(peer, routed_server):
    mark = routed_server.mark()
    value = {"fnf": nonce()}
    result = routed(peer, routed_server, "fire-and-forget", route="echo.fnf", data=value,
                    auth_simple=("alice", "secret"))
    assert result["exit_code"] == 0 and result["sent"], result
    event = routed_server.wait_event("routed", mark, interaction="fire-and-forget")
    assert event["seen"]["route"] == "echo.fnf"
    assert event["seen"]["data"] == value
    assert event["seen"]["principal"] == "alice"


# ---------------------------------------------------------------------------------------------
# our routed server <- third-party routing clients: metadata entries and MIME types
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_custom_mime_entry(peer, routed_server):
    """A custom-MIME composite entry (written by each library with a length-1 prefix) is
    decoded with its name and content; the route still works next to it."""
    seen = reply(routed(peer, routed_server, route="echo", data={},
                        custom_entries=[("application/x.custom", "hello entry")]))
    assert seen["route"] == "echo" and seen["errors"] == []
    assert entry_mimes(seen) == [ROUTING_MIME, "application/x.custom"]
    assert seen["entries"][1] == {"mime": "application/x.custom", "id": None,
                                  "content_b64": b64(b"hello entry")}


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_per_stream_data_mime_type(peer, routed_server):
    """A per-stream ``text/plain`` entry (well-known id 0x21) overrides the connection's JSON:
    our handler gets the data as text."""
    seen = reply(routed(peer, routed_server, route="echo", data_text="plain words",
                        stream_data_mime="text/plain"))
    assert seen["data_mime_type"] == "text/plain" and seen["per_stream_mime"] == "text/plain"
    assert seen["data"] == "plain words"
    assert entry_mimes(seen) == [ROUTING_MIME, PER_STREAM_MIME]
    assert seen["entries"][1]["content_b64"] == b64(bytes([0x80 | 0x21]))


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_custom_per_stream_data_mime_type(peer, routed_server):
    """A per-stream MIME type that is not well known is a length-1 prefixed string; the data
    then reaches the handler as bytes."""
    seen = reply(routed(peer, routed_server, route="echo", data_text="raw",
                        stream_data_mime="application/x.raw"))
    assert seen["data_mime_type"] == "application/x.raw"
    assert seen["data"] == {"b64": b64(b"raw")}
    assert seen["entries"][1]["content_b64"] == b64(bytes([len("application/x.raw") - 1])
                                                    + b"application/x.raw")


# ---------------------------------------------------------------------------------------------
# our routed server <- third-party routing clients: authentication
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_simple_auth_per_request(peer, routed_server):
    seen = reply(routed(peer, routed_server, route="echo", data={},
                        auth_simple=("alice", "secret")))
    assert seen["principal"] == "alice"
    assert seen["auth"] == {"type": "simple", "username": "alice", "password": "secret"}
    assert entry_mimes(seen) == [ROUTING_MIME, AUTH_MIME]
    # simple auth: 0x80|0 (well-known type simple), username length (2 bytes), user, password
    assert seen["entries"][1]["content_b64"] == b64(b"\x80\x00\x05alicesecret")


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_bearer_auth_per_request(peer, routed_server):
    seen = reply(routed(peer, routed_server, route="users.carol.orders.7", data={},
                        auth_bearer="t0ken"))
    assert seen == {"user": "carol", "order": "7", "principal": "service"}


@pytest.mark.parametrize("credentials", [
    {"auth_simple": ("alice", "wrong")},
    {"auth_simple": ("mallory", "secret")},
    {"auth_bearer": "not-the-token"},
    {"auth_custom": ("x.custom", "opaque")},
], ids=["bad-password", "unknown-user", "bad-token", "custom-type"])
@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_bad_request_credentials_rejected(peer, credentials, routed_server):
    """ERROR[REJECTED] naming the kind of credentials, and the handler is never called: the
    only routed event after the refusal is the next request's."""
    mark = routed_server.mark()
    result = routed(peer, routed_server, route="users.x.orders.1", data={}, **credentials)
    assert result["exit_code"] == 1, result
    assert result["error"]["code"] == REJECTED
    assert "invalid" in result["error"]["message"]
    if "auth_custom" in credentials:
        assert "x.custom" in result["error"]["message"]  # our side read the custom type name
    marker = {"after": nonce()}
    reply(routed(peer, routed_server, route="echo", data=marker))
    routed_server.wait_event("routed", mark, interaction="request-response")
    assert [e["seen"]["route"] for e in routed_server.events(mark)
            if e["event"] == "routed"] == ["echo"]


@pytest.mark.parametrize("setup, principal", [
    ({"setup_auth_simple": ("alice", "secret")}, "alice"),
    ({"setup_auth_bearer": "t0ken"}, "service"),
], ids=["simple", "bearer"])
@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_setup_credentials(peer, setup, principal, routed_server):
    """Credentials in the SETUP metadata authenticate every request of the connection."""
    mark = routed_server.mark()
    seen = reply(routed(peer, routed_server, route="echo", data={}, **setup))
    assert seen["principal"] == principal
    assert seen["auth"] is None
    assert seen["setup_auth"]["type"] == ("simple" if "setup_auth_simple" in setup else "bearer")
    event = routed_server.wait_event("setup", mark)
    assert event["auth"] == seen["setup_auth"]


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_request_credentials_override_setup(peer, routed_server):
    seen = reply(routed(peer, routed_server, route="echo", data={},
                        setup_auth_simple=("alice", "secret"), auth_bearer="t0ken"))
    assert seen["principal"] == "service"
    assert seen["setup_auth"] == {"type": "simple", "username": "alice", "password": "secret"}
    assert seen["auth"] == {"type": "bearer", "token": "t0ken"}


@pytest.mark.parametrize("setup", [
    {"setup_auth_simple": ("alice", "wrong")},
    {"setup_auth_bearer": "stolen"},
], ids=["simple", "bearer"])
@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_bad_setup_credentials_rejected_setup(peer, setup, routed_server):
    """Our server answers ERROR[REJECTED_SETUP] on stream 0, closes, and never routes the
    request; both clients report that ERROR as the connection's error.  rsocket-py writes its
    SETUP in several writes and used to lose the ERROR to the RST our kernel sent for its
    unread bytes when we closed at once: we half-close and read on instead."""
    mark = routed_server.mark()
    result = routed(peer, routed_server, route="echo", data={"never": "served"}, **setup)
    assert result["exit_code"] == 1, result
    error = result["connection_error"]
    assert error is not None and error["code"] == REJECTED_SETUP, result
    assert "invalid" in error["message"], result
    routed_server.wait_line(r"\[rsocket_tx\.frames#debug\] (?:\[c\d+ [^\]]*\] )?"
                            r"send ERROR stream=0 "
                            r"error_code=REJECTED_SETUP data=b'invalid ", mark)
    marker = {"after": nonce()}
    reply(routed(peer, routed_server, route="echo", data=marker))
    event = routed_server.wait_event("routed", mark, interaction="request-response")
    assert event["seen"]["data"] == marker


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_strict_server_requires_credentials(peer, strict_server):
    result = peers.run_routing_client(peer, strict_server.port, "request-response",
                                      route="echo", data={})
    assert result["exit_code"] == 1, result
    assert result["error"]["code"] == REJECTED
    assert "authentication required" in result["error"]["message"]
    for credentials, principal in (({"auth_simple": ("alice", "secret")}, "alice"),
                                   ({"setup_auth_bearer": "t0ken"}, "service")):
        seen = reply(peers.run_routing_client(peer, strict_server.port, "request-response",
                                              route="echo", data={}, **credentials))
        assert seen["principal"] == principal


@pytest.mark.parametrize("peer", CLIENT_PEERS)
def test_strict_server_stream_and_channel_need_credentials(peer, strict_server):
    for interaction, route in (("request-stream", "echo.stream"),
                               ("request-channel", "echo.channel")):
        refused = peers.run_routing_client(peer, strict_server.port, interaction, route=route,
                                           data={})
        assert refused["exit_code"] == 1 and refused["error"]["code"] == REJECTED, refused
        served = peers.run_routing_client(peer, strict_server.port, interaction, route=route,
                                          data={"count": 1}, auth_bearer="t0ken")
        assert served["exit_code"] == 0 and served["completed"], served
        assert served["payloads"][0]["json"]["principal"] == "service"


# ---------------------------------------------------------------------------------------------
# our client -> rsocket-py's routing server
# ---------------------------------------------------------------------------------------------

def wait(d, timeout: float = WAIT) -> defer.Deferred:
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


@pytest.fixture(scope="module")
def py_routing_server():
    """rsocket-py's routing server (users alice:secret, token t0ken)."""
    server = peers.start_routing_server()
    yield server
    server.stop()


@pytest_twisted.async_yield_fixture
async def routing_client(py_routing_server):
    """``await routing_client(**connect_kwargs)``: our RSocket to the py routing server, with
    composite metadata and JSON data; all closed afterwards."""
    opened = []

    async def open_(**kwargs):
        options = {"metadata_mime_type": COMPOSITE_METADATA,
                   "data_mime_type": "application/json", **kwargs}
        rsocket = await wait(connect(f"tcp://127.0.0.1:{py_routing_server.port}",
                                     reactor=reactor, **options))
        opened.append(rsocket)
        return rsocket

    yield open_
    for rsocket in opened:
        if rsocket.is_open:
            await wait(rsocket.close())


async def routed_event(server, interaction: str, marker) -> dict:
    """The py server's ``routed`` event of ``interaction`` whose JSON data equals ``marker``;
    waits in a thread (the reactor keeps running)."""
    def predicate(event: dict) -> bool:
        return (event.get("event") == "routed" and event.get("interaction") == interaction
                and event["seen"].get("json") == marker)

    return await wait(server.next_event_deferred(WAIT - 5, predicate))


def as_json(payload: Payload):
    return json.loads(payload.data)


@pytest_twisted.ensureDeferred
async def test_our_route_and_json_data(routing_client):
    rsocket = await routing_client()
    value = {"q": 1, "n": nonce()}
    seen = await wait(rsocket.request_response(value, route="echo", decode=True))
    assert seen["route"] == "echo" and seen["tags"] == ["echo"]
    assert seen["json"] == value and seen["metadata_error"] is None
    assert seen["auth"] is None and seen["custom"] == []
    assert seen["setup"]["data_mime_type"] == "application/json"
    assert seen["setup"]["metadata_mime_type"] == COMPOSITE_METADATA
    assert seen["entries"] == [{"mime": ROUTING_MIME, "content_b64": b64(b"\x04echo"),
                                "tags": ["echo"]}]


@pytest_twisted.ensureDeferred
async def test_our_client_reads_rsocket_py_response_metadata(routing_client):
    """rsocket-py's reply carries composite metadata (routing + a custom MIME entry)."""
    rsocket = await routing_client()
    response = await wait(rsocket.request_response({}, route="echo"))
    metadata = parse_metadata(response.metadata, COMPOSITE_METADATA)
    assert metadata.errors == []
    assert metadata.route == "echo.reply"
    assert [(e.mime_type, e.content) for e in metadata.entries][1:] == [
        ("application/x.rsocket-py", b"from rsocket-py")]


@pytest_twisted.ensureDeferred
async def test_our_routing_tags(routing_client):
    rsocket = await routing_client()
    seen = await wait(rsocket.request_response({}, route=["echo", "extra.tag", "ünïcode"],
                                               decode=True))
    assert seen["route"] == "echo"
    assert seen["tags"] == ["echo", "extra.tag", "ünïcode"]


@pytest.mark.parametrize("auth, expected, principal", GOOD_CREDENTIALS,
                         ids=["simple", "bearer"])
@pytest_twisted.ensureDeferred
async def test_our_request_credentials(auth, expected, principal, routing_client):
    rsocket = await routing_client()
    seen = await wait(rsocket.request_response({}, route="secure.echo", auth=auth,
                                               decode=True))
    assert seen["auth"] == expected
    assert seen["principal"] == principal
    assert [e["mime"] for e in seen["entries"]] == [ROUTING_MIME, AUTH_MIME]


@pytest.mark.parametrize("auth", [SimpleAuth("alice", "nope"), BearerAuth("nope")],
                         ids=["simple", "bearer"])
@pytest_twisted.ensureDeferred
async def test_our_bad_request_credentials_rejected(auth, routing_client):
    rsocket = await routing_client()
    with pytest.raises(RejectedError) as caught:
        await wait(rsocket.request_response({}, route="secure.echo", auth=auth))
    assert caught.value.error_code == REJECTED
    assert "bad" in caught.value.message and "credentials" in caught.value.message
    assert rsocket.is_open  # a per-request refusal leaves the connection usable
    seen = await wait(rsocket.request_response({}, route="echo", decode=True))
    assert seen["route"] == "echo"


@pytest.mark.parametrize("auth, expected, principal", GOOD_CREDENTIALS,
                         ids=["simple", "bearer"])
@pytest_twisted.ensureDeferred
async def test_our_setup_credentials(auth, expected, principal, routing_client,
                                     py_routing_server):
    """connect(auth=...) puts an authentication entry in the SETUP metadata: rsocket-py reads
    it (in on_setup) and the secure route accepts requests without their own credentials."""
    rsocket = await routing_client(auth=auth)
    seen = await wait(rsocket.request_response({}, route="secure.echo", decode=True))
    assert seen["setup"]["auth"] == expected
    assert seen["setup"]["entries"][0]["mime"] == AUTH_MIME
    assert seen["auth"] is None
    assert seen["principal"] == principal


@pytest_twisted.ensureDeferred
async def test_our_bad_setup_credentials(routing_client):
    """rsocket-py answers ERROR[REJECTED_SETUP] (and keeps the TCP connection open): our
    client fails the request with RejectedSetupError and closes."""
    rsocket = await routing_client(auth=SimpleAuth("alice", "wrong"))
    with pytest.raises(RejectedSetupError) as caught:
        await wait(rsocket.request_response({}, route="echo"))
    assert caught.value.error_code == REJECTED_SETUP
    assert caught.value.message == "bad SETUP credentials"
    assert not rsocket.is_open


@pytest_twisted.ensureDeferred
async def test_our_custom_mime_entries(routing_client):
    """Entries of the Payload's own composite metadata follow the route: a custom MIME type
    (length-1 prefix) and a well-known one written as an id are both read by rsocket-py."""
    rsocket = await routing_client()
    own = encode_composite([("application/x.custom", b"hello"), ("text/plain", b"well known")])
    data = {"n": nonce()}
    response = await wait(rsocket.request_response(
        Payload(json.dumps(data).encode(), own), route="echo"))
    seen = as_json(response)
    assert seen["route"] == "echo" and seen["json"] == data
    assert seen["custom"] == [
        {"mime": "application/x.custom", "content_b64": b64(b"hello"), "text": "hello"},
        {"mime": "text/plain", "content_b64": b64(b"well known"), "text": "well known"},
    ]


@pytest_twisted.ensureDeferred
async def test_our_per_stream_and_accept_mime_types(routing_client):
    rsocket = await routing_client()
    response = await wait(rsocket.request_response(
        "plain words", route="echo", data_mime_type="text/plain",
        accept_mime_types=["application/json", "application/x.custom"]))
    seen = as_json(response)  # rsocket-py answers JSON whatever we asked
    assert seen["data_mime_type"] == "text/plain"
    assert seen["accept_mime_types"] == ["application/json", "application/x.custom"]
    assert seen["data"] == "plain words"
    assert seen["json"] is None  # not JSON: it was sent as text/plain


@pytest_twisted.ensureDeferred
async def test_our_request_stream(routing_client):
    rsocket = await routing_client()
    items = await wait(rsocket.request_stream({"count": 3}, route="echo.stream",
                                              auth=BearerAuth("t0ken"), decode=True).collect())
    assert items[0]["route"] == "echo.stream"
    assert items[0]["auth"] == {"type": "bearer", "token": "t0ken"}
    assert items[0]["json"] == {"count": 3}
    assert items[1:] == [{"index": 0}, {"index": 1}, {"index": 2}]


@pytest_twisted.ensureDeferred
async def test_our_request_channel(routing_client):
    """The route travels with the first payload only; rsocket-py sees no metadata on the
    others."""
    rsocket = await routing_client()
    outbound = [Payload(json.dumps({"i": i}).encode()) for i in (1, 2)]
    items = await wait(rsocket.request_channel({"i": 0}, outbound, route="echo.channel",
                                               decode=True).collect())
    assert [item["index"] for item in items] == [0, 1, 2]
    assert [item["json"] for item in items] == [{"i": 0}, {"i": 1}, {"i": 2}]
    assert [item["route"] for item in items] == ["echo.channel", None, None]


@pytest_twisted.ensureDeferred
async def test_our_fire_and_forget(routing_client, py_routing_server):
    rsocket = await routing_client()
    value = {"fnf": nonce()}
    await wait(rsocket.fire_and_forget(value, route="echo.fnf",
                                       auth=SimpleAuth("alice", "secret")))
    event = await routed_event(py_routing_server, "fire-and-forget", value)
    assert event["seen"]["route"] == "echo.fnf"
    assert event["seen"]["auth"] == {"type": "simple", "username": "alice",
                                     "password": "secret"}


@pytest_twisted.ensureDeferred
async def test_our_unknown_route(routing_client):
    """rsocket-py's RequestRouter answers an unknown route with ERROR[APPLICATION_ERROR] whose
    message is the route itself."""
    rsocket = await routing_client()
    with pytest.raises(ApplicationError) as caught:
        await wait(rsocket.request_response({}, route="no.such.route"))
    assert caught.value.message == "no.such.route"


@pytest_twisted.ensureDeferred
async def test_our_custom_auth_type_read_by_rsocket_py(routing_client):
    """rsocket-py has no class for custom auth types: it fails the whole request with the
    KeyError of its auth factory, whose text is the type name it decoded from our bytes."""
    rsocket = await routing_client()
    with pytest.raises(RSocketError) as caught:
        await wait(rsocket.request_response({}, route="echo",
                                            auth=CustomAuth("x.custom", b"opaque")))
    assert caught.value.error_code == APPLICATION_ERROR
    assert caught.value.message == "b'x.custom'"
