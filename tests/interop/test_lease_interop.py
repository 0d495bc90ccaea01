"""Leases against rsocket-py 0.4.20 (spec §Lease Semantics), both directions.

rsocket-py honours the SETUP L flag and sends and receives LEASE frames, but its requester
*queues* what a lease does not allow (it never fails) and its responder never enforces what
it granted (``peers/py/lease_common.py``).  So:

* OUR CLIENT (``connect(lease=...)``, in-process) against rsocket-py's LEASE SERVER
  (``lease_peers.start_lease_server``): we wait for its lease, honour it (a request past it
  raises :class:`LeaseError` and never reaches the wire) and grant it leases that our
  responder enforces (ERROR[REJECTED] to rsocket-py's requests past our grant);
* rsocket-py's LEASE CLIENT (``lease_peers.run_lease_client``) against OUR SERVER (in-process
  ``serve(lease_policy=...)``, and ``twistd rsocket --lease-requests``): rsocket-py honours
  our lease (it queues the request past it), and when it ignores it, our server answers
  ERROR[REJECTED].

rsocket-js 1.0.0-alpha.3's lease client (``lease_peers.run_js_lease_client``) against our
server: it honours our lease (queueing past it) and never grants one back.

rsocket-java 1.1.5 (``lease_peers.start_java_lease_server``, ``run_java_lease_client``), both
ways: our client honours its server's leases (fail fast past them) and grants it leases that
its requester honours (queueing past them, or rejecting locally with ``MissingLeaseException``
when ``maxPendingRequests(0)``); its client honours our server's leases the same two ways and
grants our server's requester a lease; its server refuses our L flag with ERROR[INVALID_SETUP]
"lease is not supported" when it has no lease configured.

Everything is bounded by timeouts; nothing sleeps.  A request rsocket-py holds back for lack
of a lease is seen as unanswered within its ``wait`` (seconds).
"""

from __future__ import annotations

import lease_peers
import pytest
import pytest_twisted
import resume_peers
from twisted.internet import defer, reactor

from rsocket_tx import Payload, Responder, connect, serve
from rsocket_tx.core import errors as E
from rsocket_tx.lease import (
    LEASE_USED_UP,
    NO_LEASE,
    FixedRateLeasePolicy,
    Lease,
    LeaseError,
)

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("no_logged_errors")]

REJECTED = 0x202
#: how rsocket-java 1.1.5's requester rejects a request locally past a used-up lease when it
#: may not queue it (``maxPendingRequests(0)``): RequesterLeaseTracker's message, with the
#: requests *left* (0), not the ones granted, in brackets; tag "client" or "server"
JAVA_USED_UP = "[{}] Missing leases. Issued [0] request allowance is used"
#: the lease servers our client is run against: (start one, the metadata of its LEASE frames:
#: rsocket-java sets M with empty metadata on every LEASE, rsocket-py sends none)
LEASE_SERVERS = pytest.mark.parametrize("start_server, lease_metadata", [
    pytest.param(lease_peers.start_lease_server_deferred, None, id="rsocket-py"),
    pytest.param(lease_peers.start_java_lease_server_deferred, b"", id="rsocket-java"),
])
#: seconds any single wait of the in-process tests may take
WAIT = 30
#: seconds rsocket-py's requests get before they count as held back for lack of a lease
HELD = 1.5
#: the same for rsocket-java, whose first requests run cold code in a JVM on a loaded machine
JAVA_HELD = 5.0


def timed(d, timeout: float = WAIT) -> defer.Deferred:
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


class Echo(Responder):
    """``echo:<data>``, like the rsocket-py lease peers; remembers what it served."""

    def __init__(self) -> None:
        self.served: list[bytes] = []

    def request_response(self, payload):
        self.served.append(payload.data)
        return Payload(b"echo:" + payload.data)


# ------------------------------------------------------------------------------ our client


@LEASE_SERVERS
@pytest_twisted.ensureDeferred
async def test_our_client_honours_the_peer_server_leases(start_server, lease_metadata):
    server = await timed(start_server(lease_requests=2))
    try:
        rs = await timed(connect(f"tcp://127.0.0.1:{server.port}", reactor=reactor,
                                 lease=True))
        # connect() fired once the server's first LEASE had arrived
        assert rs._protocol.lease.received == Lease(60_000, 2, lease_metadata)
        assert await timed(rs.request_response(Payload(b"a"))) == Payload(b"echo:a")
        assert await timed(rs.request_response(Payload(b"b"))) == Payload(b"echo:b")
        with pytest.raises(LeaseError) as info:
            rs.request_response(Payload(b"c"))
        assert info.value.reason == LEASE_USED_UP
        await timed(rs.close())
        await timed(server.wait_event_deferred("request", timeout=WAIT, data="b"))
        assert [e["lease"] for e in server.events if e["event"] == "setup"] == [True]
        requests = [e["data"] for e in server.events if e["event"] == "request"]
        assert requests == ["a", "b"]
        assert all(e.get("data") != "c" for e in server.drain_events())  # it never left
    finally:
        server.stop()


async def _grant_and_collect_results(server, responder: Echo, requests: int):
    """Connect our client (``responder``, granting ``requests`` requests for 60 s) to the lease
    ``server`` and wait until its server-side requester is done; returns our RSocket and the
    server's ``result`` events."""
    rs = await timed(connect(f"tcp://127.0.0.1:{server.port}", reactor=reactor,
                             responder=responder,
                             lease=FixedRateLeasePolicy(ttl=60_000, requests=requests)))
    await timed(server.wait_event_deferred("results_done", timeout=WAIT))
    return rs, [e for e in server.events if e["event"] == "result"]


@pytest_twisted.ensureDeferred
async def test_our_client_grants_rsocket_py_leases_and_enforces_them():
    """rsocket-py's server-side requester, not honouring our lease, asks 3 times; our
    client's responder granted 2 and rejects the third with ERROR[REJECTED]."""
    server = await timed(lease_peers.start_lease_server_deferred(
        lease_requests=10, request_client=3, request_wait=5))
    responder = Echo()
    try:
        rs, results = await _grant_and_collect_results(server, responder, 2)
        assert [r.get("payload") for r in results[:2]] == ["echo:s0", "echo:s1"]
        assert results[2]["error"]["code"] == REJECTED
        assert "used up" in results[2]["error"]["message"]
        assert responder.served == [b"s0", b"s1"]
        granted = [e for e in server.events if e["event"] == "lease_received"]
        assert granted[0]["requests"] == 2 and granted[0]["ttl"] == 60_000
        await timed(rs.close())
    finally:
        server.stop()


@pytest_twisted.ensureDeferred
async def test_rsocket_py_honours_the_leases_our_client_grants():
    server = await timed(lease_peers.start_lease_server_deferred(
        lease_requests=10, honor_lease=True, request_client=2, request_wait=HELD))
    responder = Echo()
    try:
        rs, results = await _grant_and_collect_results(server, responder, 1)
        assert results[0]["payload"] == "echo:s0"
        assert results[1].get("queued") is True  # held back by rsocket-py: no lease left
        assert responder.served == [b"s0"]
        assert rs._protocol.lease.stats().total_rejected == 0
        await timed(rs.close())
    finally:
        server.stop()


@pytest.mark.parametrize("max_pending", [None, 0], ids=["queue", "no-queue"])
@pytest_twisted.ensureDeferred
async def test_rsocket_java_honours_the_leases_our_client_grants(max_pending):
    """rsocket-java's server-side requester (after our first LEASE) asks twice; our client
    granted 1: the second is held in its queue, or, with ``maxPendingRequests(0)``, rejected
    locally; it never reaches us."""
    server = await timed(lease_peers.start_java_lease_server_deferred(
        lease_requests=10, request_client=2, request_wait=JAVA_HELD, max_pending=max_pending,
        await_lease=True))
    responder = Echo()
    try:
        rs, results = await _grant_and_collect_results(server, responder, 1)
        assert results[0]["payload"] == "echo:s0"
        if max_pending is None:
            assert results[1].get("queued") is True, results
        else:
            assert results[1]["error"] == {"code": REJECTED,
                                           "message": JAVA_USED_UP.format("server"),
                                           "class": "MissingLeaseException"}, results
        assert responder.served == [b"s0"]
        assert rs._protocol.lease.stats().total_rejected == 0
        await timed(rs.close())
    finally:
        server.stop()


@pytest_twisted.ensureDeferred
async def test_a_java_lease_server_enforces_leases_on_our_client_without_the_l_flag():
    """An rsocket-java server configured with leases sends LEASE frames and enforces them on
    every connection, also one whose SETUP has no L flag (the spec says it MUST NOT send
    them then).  Our client without leases ignores those LEASE frames, sends its third
    request, and gets the server's ERROR[REJECTED]."""
    server = await timed(lease_peers.start_java_lease_server_deferred(lease_requests=2))
    try:
        rs = await timed(connect(f"tcp://127.0.0.1:{server.port}", reactor=reactor))
        assert await timed(rs.request_response(Payload(b"a"))) == Payload(b"echo:a")
        assert await timed(rs.request_response(Payload(b"b"))) == Payload(b"echo:b")
        with pytest.raises(E.RejectedError) as info:
            await timed(rs.request_response(Payload(b"c")))
        assert not isinstance(info.value, LeaseError)  # the server's answer, not ours
        assert str(info.value) == \
            "REJECTED: [server] Missing leases. Issued [2] request allowance is used"
        assert rs.close_reason is None  # the connection goes on
        assert rs._protocol.lease.received is None  # its LEASE (sent before "a") was ignored
        assert await timed(rs.metadata_push(b"still here")) is None
        await timed(rs.close())
        await timed(server.wait_event_deferred("closed", timeout=WAIT))
        assert [e["lease"] for e in server.events if e["event"] == "setup"] == [False]
        assert [e["requests"] for e in server.events if e["event"] == "lease_sent"] == [2]
        assert [e["data"] for e in server.events if e["event"] == "request"] == ["a", "b"]
    finally:
        server.stop()


@pytest_twisted.ensureDeferred
async def test_a_java_server_without_leases_refuses_our_lease_setup(java_reliability_installed):
    server = await timed(resume_peers.start_java_server_deferred())
    try:
        with pytest.raises(E.InvalidSetupError, match="lease is not supported"):
            await timed(connect(f"tcp://127.0.0.1:{server.port}", reactor=reactor,
                                lease=True))
    finally:
        server.stop()


# ------------------------------------------------------------------------------ our server


async def _serve_echo_granting(requests: int):
    """Our server (in-process ``serve``), an :class:`Echo` per connection, granting each
    connection ``requests`` requests for 60 s; returns the listening port and the Echo
    responders (in connection order)."""
    responders: list[Echo] = []

    def factory():
        responders.append(Echo())
        return responders[-1]

    port = await serve("tcp:0:interface=127.0.0.1", factory, reactor=reactor,
                       lease_policy=FixedRateLeasePolicy(ttl=60_000, requests=requests))
    return port, responders


@pytest_twisted.ensureDeferred
async def test_rsocket_py_honours_our_server_leases():
    port, responders = await _serve_echo_granting(2)
    try:
        result = await timed(lease_peers.run_lease_client_deferred(
            port.getHost().port, count=3, wait=HELD))
        assert result["leases"][0]["requests"] == 2 and result["leases"][0]["ttl"] == 60_000
        outcomes = result["results"]
        assert [o.get("payload") for o in outcomes[:2]] == ["echo:0", "echo:1"]
        assert outcomes[2].get("queued") is True
        assert responders[0].served == [b"0", b"1"]
    finally:
        await port.stopListening()


@pytest_twisted.ensureDeferred
async def test_our_server_rejects_rsocket_py_requests_beyond_its_lease():
    port, responders = await _serve_echo_granting(2)
    try:
        result = await timed(lease_peers.run_lease_client_deferred(
            port.getHost().port, count=3, wait=10, ignore_lease=True))
        outcomes = result["results"]
        assert [o.get("payload") for o in outcomes[:2]] == ["echo:0", "echo:1"]
        assert outcomes[2]["error"] == {
            "code": REJECTED, "message": "request rejected: the lease's requests are used up"}
        assert responders[0].served == [b"0", b"1"]
    finally:
        await port.stopListening()


@pytest.mark.parametrize("max_pending", [None, 0], ids=["queue", "no-queue"])
@pytest_twisted.ensureDeferred
async def test_rsocket_java_honours_our_server_leases(max_pending):
    """rsocket-java's client asks 3 times, our server granted 2: the third is held in its
    queue, or, with ``maxPendingRequests(0)`` (after waiting for our first LEASE), rejected
    locally; it never reaches us."""
    port, responders = await _serve_echo_granting(2)
    try:
        result = await timed(lease_peers.run_java_lease_client_deferred(
            port.getHost().port, count=3, wait=JAVA_HELD, max_pending=max_pending,
            await_lease=max_pending == 0))
        outcomes = result["results"]
        assert [o.get("payload") for o in outcomes[:2]] == ["echo:0", "echo:1"], outcomes
        if max_pending is None:
            assert outcomes[2].get("queued") is True, outcomes
        else:
            assert outcomes[2]["error"] == {"code": REJECTED,
                                            "message": JAVA_USED_UP.format("client"),
                                            "class": "MissingLeaseException"}, outcomes
        assert responders[0].served == [b"0", b"1"]
    finally:
        await port.stopListening()


@pytest.mark.parametrize("run_client", [
    pytest.param(lease_peers.run_lease_client_deferred, id="rsocket-py"),
    pytest.param(lease_peers.run_java_lease_client_deferred, id="rsocket-java"),
])
@pytest_twisted.ensureDeferred
async def test_our_server_requests_the_peer_client_within_its_lease(run_client):
    """Server-side requester: the peer's client grants our server 1 request."""
    outcomes: list = []
    done = defer.Deferred()

    class AskBack(Echo):
        async def _ask(self):
            lease = self.rsocket._protocol.lease
            await timed(lease.when_available())
            reply = await timed(self.rsocket.request_response(Payload(b"from server")))
            outcomes.append(reply)
            try:
                self.rsocket.request_response(Payload(b"second"))
            except LeaseError as exc:
                outcomes.append(exc.reason)
            done.callback(None)

        def accept_setup(self, setup):
            defer.ensureDeferred(self._ask()).addErrback(done.errback)

    port = await serve("tcp:0:interface=127.0.0.1", AskBack, reactor=reactor)
    try:
        result = await timed(run_client(port.getHost().port, count=1, wait=5,
                                        lease_requests=1, serve=3))
        await timed(done)
        assert outcomes == [Payload(b"echo:from server"), LEASE_USED_UP]
        assert result["served"] == ["from server"]
        assert result["results"][0]["payload"] == "echo:0"
    finally:
        await port.stopListening()


# ------------------------------------------------------------------------------ rsocket-js


@pytest_twisted.ensureDeferred
async def test_rsocket_js_honours_our_server_leases():
    """rsocket-js 1.0.0-alpha.3 asks for leases, waits for ours, queues what is past it; it
    never grants one, so our server's requester may not request it (fail fast)."""
    responders: list[Echo] = []
    asked: list = []

    class AskBack(Echo):
        def accept_setup(self, setup):
            try:
                self.rsocket.request_response(Payload(b"to js"))
            except LeaseError as exc:
                asked.append((setup.lease, exc.reason))
            responders.append(self)

    port = await serve("tcp:0:interface=127.0.0.1", AskBack, reactor=reactor,
                       lease_policy=FixedRateLeasePolicy(ttl=60_000, requests=2))
    try:
        result = await timed(lease_peers.run_js_lease_client_deferred(
            port.getHost().port, count=3, wait=int(HELD * 1000)))
        outcomes = result["results"]
        assert [o.get("payload") for o in outcomes[:2]] == ["echo:0", "echo:1"]
        assert outcomes[2].get("queued") is True
        assert responders[0].served == [b"0", b"1"]
        assert asked == [(True, NO_LEASE)]
    finally:
        await port.stopListening()


# ------------------------------------------------------------------------------ twistd


def test_twistd_lease_options_grant_and_enforce(our_server_class):
    server = our_server_class(
        "--lease-ttl", "60000", "--lease-requests", "2", "--debug",
        name="twistd rsocket (--lease-ttl 60000 --lease-requests 2)")
    try:
        honouring = lease_peers.run_lease_client(server.port, count=3, wait=HELD)
        assert honouring["leases"][0]["requests"] == 2
        assert [o.get("payload") is not None for o in honouring["results"]] == \
            [True, True, False]
        assert honouring["results"][2].get("queued") is True
        ignoring = lease_peers.run_lease_client(server.port, count=3, wait=10,
                                                ignore_lease=True)
        assert ignoring["results"][2]["error"]["code"] == REJECTED
    finally:
        server.stop_and_check()
