"""The Jini ERI multiplexing protocol (seed 004) against Apache River 2.2.3, both ways.

* River's ``TcpEndpoint`` client (``river_peer.RiverClient``, one JVM per ration per session)
  against OUR server (``rsocket_tx.jini.serve`` in-process, with :class:`InteropDispatcher`);
* OUR client (``rsocket_tx.jini.JiniMuxClient`` in-process) against River's
  ``TcpServerEndpoint`` (``river_peer.start_server``, one JVM per ration per session);
* River against River first (``test_river_to_river_*``): the peer itself works.

Bodies of 0, 1, 1,023, 1,024, 1,025, 70,000 bytes and 10 MiB go through with each side's
default ration (River's 32,768 bytes, our 131,072) and with :data:`SMALL` rations on both sides
(River reads its initial ration from a system property; ours is
``JiniMuxConfig.initial_ration``): a 10 MiB body through a 1 KiB window only arrives whole if
both sides' flow control runs (River closes the connection on any Data past its ration).
Then 128 concurrent requests on ONE connection,
1,000 sequential requests on one connection (session ids must be reused: there are only 128),
aborts both ways in the middle of the request and of the response, a slow reader that must
not stall the other sessions of its connection, and our Ping answered by River's PingAck.

Everything waits through Deferreds with generous timeouts (the River JVMs are driven from
threads); nothing sleeps and no test asserts a duration.  The River peer is built by the
tests (``river_peer.ensure_built``); the module skips only when Java is missing.
"""

from __future__ import annotations

import base64
import functools
import json
import re

import peers
import pytest
import pytest_twisted
import river_peer
import twisted_support
from process_support import TWISTD, assert_ended_cleanly, spawn
from river_peer import command, digest, pattern
from twisted.internet import defer, reactor, threads

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("no_logged_errors")]

#: this module needs none of the RSocket peers (conftest.py: ``peers_installed``)
RSOCKET_PEERS = False

MIB = 1024 * 1024
SIZES = [0, 1, 1_023, 1_024, 1_025, 70_000, 10 * MIB]
#: the small initial ration, in bytes, of both sides in the flow-control cases: River's
#: fragment size, so that each of River's Data messages is bounded by the ration
SMALL = 1_024
#: (River's ration, our ration), bytes; None = each side's default (River's 32,768, our
#: 131,072), 0 = unlimited
RATIONS = {"default": (None, None), "small": (SMALL, SMALL), "unlimited": (0, 0)}
#: seconds any single wait may take (10 MiB through a 1 KiB window on a loaded machine)
WAIT = 240
#: a body big enough to spend a small ration many times over
BIG = 200_000

#: ``wait(d)``: ``d`` (a Deferred or coroutine) failing with TimeoutError after :data:`WAIT` s
wait = functools.partial(twisted_support.wait, timeout=WAIT)


def jini():
    """The module under test (imported late: the test ids do not need it)."""
    import rsocket_tx.jini

    return rsocket_tx.jini


def config(ration: int | None):
    """Our settings with this initial ration (None: the default)."""
    mux = jini()
    return mux.JiniMuxConfig() if ration is None else mux.JiniMuxConfig(initial_ration=ration)


def check_echoes(results: list[dict], offset_of=lambda result: 0) -> None:
    """Every result of a River client op is the echo of its pattern body, without error."""
    assert results, "no results"
    for result in results:
        assert result["error"] is None, result
        expected = digest(pattern(result["size"], offset_of(result)))
        assert {"length": result["length"], "sha256": result["sha256"]} == expected, result


# ---------------------------------------------------------------------------------------------
# Our server's dispatcher
# ---------------------------------------------------------------------------------------------

class Observed:
    """What :class:`InteropDispatcher` instances saw, shared by a test's server."""

    def __init__(self) -> None:
        self.requests = 0
        #: the session id of every request, in order
        self.session_ids: list[int] = []
        #: name -> the InboundRequest of ``hold NAME``
        self.held_requests: dict = {}
        self.active = 0
        self.max_active = 0
        #: (command, exception) of requests whose body or response failed
        self.failures: list[tuple[str, BaseException]] = []
        self._failure_waiters: list[defer.Deferred] = []
        #: name -> Deferred fired by ``release NAME`` (``hold NAME`` waits for it)
        self.holds: dict[str, defer.Deferred] = {}
        #: name -> Deferred fired when ``hold NAME`` was dispatched
        self.held: dict[str, defer.Deferred] = {}

    def hold(self, name: str) -> defer.Deferred:
        return self.holds.setdefault(name, defer.Deferred())

    def was_held(self, name: str) -> defer.Deferred:
        return self.held.setdefault(name, defer.Deferred())

    def failed(self, what: str, exc: BaseException) -> None:
        self.failures.append((what, exc))
        waiters, self._failure_waiters = self._failure_waiters, []
        for waiter in waiters:
            waiter.callback(None)

    async def failure(self, what: str) -> BaseException:
        """The first failure of a request whose command is ``what`` (waits for it)."""
        while True:
            for name, exc in self.failures:
                if name == what:
                    return exc
            waiter = defer.Deferred()
            self._failure_waiters.append(waiter)
            await waiter


def make_dispatcher_class():
    """:class:`InteropDispatcher`, made on first use (``rsocket_tx.jini`` imported late)."""

    class InteropDispatcher(jini().Dispatcher):
        """Echoes a request body (read whole, then written back), unless the body starts with
        ``river_peer.MAGIC``: then its first line is a command, as for River's server:
        ``bytes N`` (answer N pattern bytes), ``big N`` (the same, and wait until the client
        took the response: a client's abort is recorded as a failure of ``big N``),
        ``abort N`` (write N pattern bytes, then abort the response), ``hold NAME`` (read
        nothing more until ``release NAME`` arrived, then answer the body's digest) and
        ``release NAME``.  A failure (e.g. the client's abort) is recorded in
        :class:`Observed` under the command's name, never raised."""

        def __init__(self, observed: Observed) -> None:
            self.observed = observed

        async def dispatch(self, request) -> None:
            observed = self.observed
            observed.requests += 1
            observed.session_ids.append(request.session_id)
            observed.active += 1
            observed.max_active = max(observed.max_active, observed.active)
            state = {"what": "echo"}  # one dispatcher serves every request of a connection
            try:
                await self._serve(request, state)
            except Exception as exc:  # recorded; the tests look at it
                observed.failed(state["what"], exc)
            finally:
                observed.active -= 1

        async def _serve(self, request, state: dict) -> None:
            magic = river_peer.MAGIC
            first = b""
            # the first line names a command: a held body must not be read past it
            async for chunk in request.body:
                first += chunk
                if len(first) >= len(magic) and (not first.startswith(magic) or b"\n" in first):
                    break
            if not first.startswith(magic):
                request.response.write(first + await request.read_all())
                return
            while b"\n" not in first:
                more = await request.body.next_chunk()
                if more is None:
                    break
                first += more
            line, _, head = first[len(magic):].partition(b"\n")
            state["what"] = line.decode("ascii")
            words = state["what"].split()
            response = request.response
            if words[0] == "hold":
                self.observed.held_requests[words[1]] = request
                self.observed.was_held(words[1]).callback(None)
                await self.observed.hold(words[1])
            received = head + await request.read_all()
            if words[0] == "hold":
                response.write(json.dumps(digest(received)).encode())
            elif words[0] == "release":
                self.observed.hold(words[1]).callback(None)
                response.write(b"released " + words[1].encode())
            elif words[0] in ("bytes", "big"):
                response.write(pattern(int(words[1])))
                if words[0] == "big":
                    response.finish()
                    await response.notify_finish()
            elif words[0] == "abort":
                response.write(pattern(int(words[1])))
                response.abort()
            else:
                raise ValueError(f"unknown command {state['what']!r}")

    return InteropDispatcher


@pytest_twisted.async_yield_fixture
async def our_server(request):
    """``await our_server(ration)``: OUR Jini mux server on 127.0.0.1 with that initial ration
    (bytes, None = default) and :class:`InteropDispatcher`; returns ``(port, observed)``.
    Stopped at the end of the test."""
    mux = jini()
    dispatcher_class = make_dispatcher_class()
    ports = []

    async def start(ration: int | None):
        observed = Observed()
        listening = await wait(mux.serve(reactor, "tcp:0:interface=127.0.0.1",
                                         lambda: dispatcher_class(observed), config(ration)))
        ports.append(listening)
        return listening.getHost().port, observed

    yield start
    for listening in ports:
        await wait(defer.maybeDeferred(listening.stopListening))
        await wait(listening.factory.close_connections())


@pytest_twisted.async_yield_fixture
async def our_client(request):
    """``our_client(port, ration)``: OUR Jini mux client to 127.0.0.1:port with that initial
    ration (bytes, None = default); closed at the end of the test."""
    mux = jini()
    clients = []

    def make(port: int, ration: int | None = None):
        client = mux.JiniMuxClient(reactor, f"tcp:host={peers.HOST}:port={port}",
                                   config(ration))
        clients.append(client)
        return client

    yield make
    for client in clients:
        await wait(defer.maybeDeferred(client.close))


async def river_stats(client, server) -> dict:
    """River's server's counters (``connections``, ``requests``) asked through our client."""
    return json.loads(await wait(client.request(command("stats"))))


async def collect(outbound) -> tuple[bytes, BaseException | None]:
    """Every response chunk of ``outbound`` until its end or its failure."""
    chunks: list[bytes] = []
    try:
        async for chunk in outbound.response:
            chunks.append(chunk)
    except Exception as exc:  # the failure is the result
        return b"".join(chunks), exc
    return b"".join(chunks), None


# ---------------------------------------------------------------------------------------------
# River against River: the peer works before anything of ours is involved
# ---------------------------------------------------------------------------------------------

@pytest_twisted.ensureDeferred
async def test_river_to_river_bodies(river):
    server = await river.server_deferred()
    client = await river.client_deferred()
    assert (server.ration, client.ration) == (river_peer.DEFAULT_RATION,) * 2
    answer = await wait(client.call_deferred("send", port=server.port, sizes=SIZES, fresh=True))
    check_echoes(answer["results"])
    assert answer["connections"] == 1


@pytest_twisted.ensureDeferred
async def test_river_to_river_small_rations_concurrent(river):
    server = await river.server_deferred(SMALL)
    client = await river.client_deferred(SMALL)
    assert (server.ration, client.ration) == (SMALL, SMALL)
    answer = await wait(client.call_deferred("concurrent", port=server.port, count=128,
                                             size=3_000))
    check_echoes([dict(r, size=3_000) for r in answer["results"]], lambda r: r["index"])
    assert len(answer["results"]) == 128
    assert answer["connections"] == 1


@pytest_twisted.ensureDeferred
async def test_river_activation_stand_in(river):
    """A second ``TcpEndpoint.getInstance`` for the same host and port (River's NIO path)
    reaches ``java.rmi.activation.ActivationID``, which Java 17 removed: the stand-in
    (``--patch-module``) makes it work."""
    server = await river.server_deferred()
    client = await river.client_deferred()
    for _ in range(2):
        answer = await wait(client.call_deferred("send", port=server.port, sizes=[5], nio=True,
                                                 fresh=True))
        check_echoes(answer["results"])


# ---------------------------------------------------------------------------------------------
# River's client against our server
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rations", list(RATIONS))
@pytest_twisted.ensureDeferred
async def test_river_client_bodies(river, our_server, rations):
    river_ration, our_ration = RATIONS[rations]
    port, observed = await our_server(our_ration)
    client = await river.client_deferred(river_ration)
    answer = await wait(client.call_deferred("send", port=port, sizes=SIZES, fresh=True))
    check_echoes(answer["results"])
    assert answer["connections"] == 1
    assert observed.failures == []


@pytest_twisted.ensureDeferred
async def test_river_client_bodies_nio(river, our_server):
    """River's default transport (SocketChannel, no socket factory) too."""
    port, _ = await our_server(None)
    client = await river.client_deferred()
    answer = await wait(client.call_deferred("send", port=port, sizes=SIZES, nio=True))
    check_echoes(answer["results"])


@pytest.mark.parametrize("rations", ["default", "small"])
@pytest_twisted.ensureDeferred
async def test_river_client_128_concurrent(river, our_server, rations):
    """River opens 128 requests at once (all bodies written, none finished) on ONE
    connection: our server has 128 sessions dispatched at the same time."""
    river_ration, our_ration = RATIONS[rations]
    port, observed = await our_server(our_ration)
    client = await river.client_deferred(river_ration)
    answer = await wait(client.call_deferred("concurrent", port=port, count=128, size=3_000))
    assert len(answer["results"]) == 128
    check_echoes([dict(r, size=3_000) for r in answer["results"]], lambda r: r["index"])
    assert answer["connections"] == 1
    assert observed.max_active == 128


@pytest_twisted.ensureDeferred
async def test_river_client_1000_sequential(river, our_server):
    """1,000 requests one after the other on one connection: River reuses session ids (it
    takes the lowest free one), so our server must accept an id again once its session
    ended."""
    port, observed = await our_server(SMALL)
    client = await river.client_deferred(SMALL)
    answer = await wait(client.call_deferred("sequential", port=port, count=1_000, size=100,
                                             fresh=True))
    assert answer["ok"] == 1_000, answer["last"]
    assert answer["connections"] == 1
    assert observed.requests == 1_000
    assert observed.failures == []
    assert max(observed.session_ids) < 128
    assert len(set(observed.session_ids)) < 1_000  # ids were used again


@pytest_twisted.ensureDeferred
async def test_river_client_aborts_request(river, our_server):
    """River aborts a request whose body is half sent: our dispatcher's read fails; the
    connection goes on serving."""
    port, observed = await our_server(SMALL)
    client = await river.client_deferred(SMALL)
    answer = await wait(client.call_deferred("abort", port=port, size=5_000))
    assert answer["aborted"] is True
    failure = await wait(observed.failure("echo"))
    assert isinstance(failure, jini().SessionAbortedError), repr(failure)
    after = await wait(client.call_deferred("send", port=port, sizes=[1_025]))
    check_echoes(after["results"])
    assert after["connections"] == 0  # the same connection


@pytest_twisted.ensureDeferred
async def test_river_client_aborts_response(river, our_server):
    """River reads 2,000 bytes of a 1 MiB response, then aborts: our response writer learns
    it; the connection goes on serving."""
    port, observed = await our_server(SMALL)
    client = await river.client_deferred(SMALL)
    answer = await wait(client.call_deferred("abort-read", port=port, size=0, read=2_000,
                                             prefix=command(f"big {MIB}")))
    assert answer["aborted"] is True and answer["read"] == 2_000
    failure = await wait(observed.failure(f"big {MIB}"))
    assert isinstance(failure, jini().SessionAbortedError), repr(failure)
    after = await wait(client.call_deferred("send", port=port, sizes=[70_000]))
    check_echoes(after["results"])
    assert after["connections"] == 0


@pytest_twisted.ensureDeferred
async def test_our_server_aborts_response(river, our_server):
    """Our dispatcher writes 5,000 bytes, then aborts: River's client reads at most those
    bytes, then fails with River's "request aborted by remote endpoint"."""
    port, _ = await our_server(None)
    client = await river.client_deferred()
    answer = await wait(client.call_deferred("send", port=port, sizes=[0], keep=True,
                                             prefix=command("abort 5000")))
    (result,) = answer["results"]
    assert "java.io.IOException: request aborted by remote endpoint" in result["error"], result
    assert result["length"] <= 5_000
    assert pattern(5_000).startswith(base64.b64decode(result["b64"]))


@pytest_twisted.ensureDeferred
async def test_our_server_slow_reader_does_not_stall_others(river, our_server):
    """Our dispatcher does not read a 200,000-byte body (River's writer stops at our small
    ration) while another request on the SAME connection is served; then it reads it all."""
    port, observed = await our_server(SMALL)
    client = await river.client_deferred(SMALL)
    held = client.call_deferred("send", port=port, sizes=[BIG], prefix=command("hold slow"),
                                keep=True)
    await wait(observed.was_held("slow"))
    other = await wait(client.call_deferred("send", port=port, sizes=[0],
                                            prefix=command("release slow"), keep=True))
    assert other["connections"] == 0  # it went on the held request's connection
    # what River sent of the held body and nobody read yet is within the ration we granted
    assert observed.held_requests["slow"].body.buffered <= SMALL
    (released,) = other["results"]
    assert base64.b64decode(released["b64"]) == b"released slow"
    answer = await wait(held)
    (result,) = answer["results"]
    assert result["error"] is None, result
    assert json.loads(base64.b64decode(result["b64"])) == digest(pattern(BIG))


#: what ``twistd jini-mux`` logs for each endpoint it listens on (group 1: the port)
TWISTD_LISTENING = re.compile(
    rb"Jini ERI mux server listening on 127\.0\.0\.1:(\d+) \(endpoint ([^)\n]+)\)")


@pytest.mark.parametrize("rations", ["default", "small"])
@pytest_twisted.ensureDeferred
async def test_river_client_1_mib_to_the_default_twistd_echo(river, rations):
    """``twistd jini-mux`` with no ``--dispatcher`` serves the demo EchoDispatcher. River's
    client writes the whole 1 MiB body before it reads the response and grants no ration for
    the response until then: the echo must keep reading while its response waits (it once
    stopped reading when River's ration was spent, and both sides waited for ever)."""
    river_ration, _ = RATIONS[rations]
    client = await river.client_deferred(river_ration)
    process = spawn(["-c", TWISTD, "-n", "--pidfile=", "jini-mux",
                     "--listen", "tcp:0:interface=127.0.0.1"],
                    count=1, pattern=TWISTD_LISTENING)
    try:
        (port,) = (await wait(process.ready)).values()
        answer = await wait(client.call_deferred("send", port=port, sizes=[MIB], fresh=True,
                                                 keep=True))
        check_echoes(answer["results"])
        (result,) = answer["results"]
        assert base64.b64decode(result["b64"]) == pattern(MIB)
    finally:
        reason = await process.stop()
    assert_ended_cleanly(process, reason, shut_down=True)


# ---------------------------------------------------------------------------------------------
# Our client against River's server
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("rations", list(RATIONS))
@pytest_twisted.ensureDeferred
async def test_our_client_bodies(river, our_client, rations):
    river_ration, our_ration = RATIONS[rations]
    server = await river.server_deferred(river_ration)
    client = our_client(server.port, our_ration)
    before = await river_stats(client, server)
    for size in SIZES:
        body = pattern(size)
        response = await wait(client.request(body))
        assert digest(response) == digest(body), size
    after = await river_stats(client, server)
    assert after["connections"] == before["connections"]  # one connection for all


@pytest.mark.parametrize("rations", ["default", "small"])
@pytest_twisted.ensureDeferred
async def test_our_client_large_response_and_streaming(river, our_client, rations):
    """Responses bigger than the request (River's ``bytes N``) and River's streaming echo
    (it writes while it reads): both rations run at once."""
    river_ration, our_ration = RATIONS[rations]
    server = await river.server_deferred(river_ration)
    client = our_client(server.port, our_ration)
    response = await wait(client.request(command(f"bytes {10 * MIB}")))
    assert digest(response) == digest(pattern(10 * MIB))
    body = pattern(BIG * 5)
    response = await wait(client.request(command("stream", body)))
    assert digest(response) == digest(body)


@pytest.mark.parametrize("rations", ["default", "small"])
@pytest_twisted.ensureDeferred
async def test_our_client_128_concurrent(river, our_client, rations):
    """128 requests at once on one connection: every request is finished only once River's
    server has dispatched all 128 (each read its command line and waits for the rest)."""
    river_ration, our_ration = RATIONS[rations]
    server = await river.server_deferred(river_ration)
    client = our_client(server.port, our_ration)
    before = await river_stats(client, server)
    outbound = [await wait(client.new_request()) for _ in range(128)]
    bodies = [pattern(3_000, index) for index in range(128)]
    tag = f"#c128-{rations}"
    for request, body in zip(outbound, bodies, strict=True):
        request.write(command(f"digest {tag}", body))
    await wait(threads.deferToThread(
        lambda: [server.wait_event("command", timeout=WAIT, command=f"digest {tag}")
                 for _ in range(128)]))
    for request in outbound:
        request.finish()
    responses = await wait(defer.gatherResults([request.read_all() for request in outbound],
                                               consumeErrors=True))
    assert [json.loads(r) for r in responses] == [digest(b) for b in bodies]
    after = await river_stats(client, server)
    assert after["connections"] == before["connections"]
    assert after["requests"] == before["requests"] + 128 + 1
    assert after["max_active"] == 128  # River's server had the 128 requests at once


@pytest_twisted.ensureDeferred
async def test_our_client_1000_sequential(river, our_client):
    """1,000 requests one after the other on one connection: only 128 session ids exist,
    so ours are reused (River's server checks that a reused id is free)."""
    server = await river.server_deferred(SMALL)
    client = our_client(server.port, SMALL)
    before = await river_stats(client, server)
    session_ids = []
    for index in range(1_000):
        body = pattern(100, index)
        outbound = await wait(client.new_request())
        session_ids.append(outbound.session_id)
        outbound.write(body)
        outbound.finish()
        assert await wait(outbound.read_all()) == body, index
    assert max(session_ids) < 128 and len(set(session_ids)) < 1_000
    after = await river_stats(client, server)
    assert after["connections"] == before["connections"]
    assert after["requests"] == before["requests"] + 1_000 + 1


@pytest_twisted.ensureDeferred
async def test_our_client_aborts_request(river, our_client):
    """We abort a request whose body is half sent: River's dispatcher fails reading it
    (its ``request_failed`` event) and the connection goes on."""
    server = await river.server_deferred(SMALL)
    client = our_client(server.port, SMALL)
    before = await river_stats(client, server)
    outbound = await wait(client.new_request())
    outbound.write(command("digest #our-abort", pattern(5_000)))
    # River has read the command line: what fails is the read of the body
    await wait(server.wait_event_deferred("command", timeout=WAIT, command="digest #our-abort"))
    outbound.abort()
    _, error = await wait(collect(outbound))
    assert isinstance(error, jini().SessionAbortedError), repr(error)
    event = await wait(server.wait_event_deferred("request_failed", timeout=WAIT,
                                                  command="digest #our-abort"))
    # River's reader
    assert event["error"] == "java.io.IOException: request aborted by remote endpoint", event
    assert event["received"] <= 5_000
    assert await wait(client.request(pattern(1_025))) == pattern(1_025)
    after = await river_stats(client, server)
    assert after["connections"] == before["connections"]


@pytest_twisted.ensureDeferred
async def test_river_server_aborts_response(river, our_client):
    """River's dispatcher writes 5,000 bytes, then aborts: our response yields at most those
    bytes, then fails; the connection goes on."""
    server = await river.server_deferred(SMALL)
    client = our_client(server.port, SMALL)
    before = await river_stats(client, server)
    outbound = await wait(client.new_request())
    outbound.write(command("abort 5000 #river-abort", pattern(100)))
    outbound.finish()
    received, error = await wait(collect(outbound))
    assert isinstance(error, jini().SessionAbortedError), repr(error)
    assert pattern(5_000).startswith(received)
    await wait(server.wait_event_deferred("aborted", timeout=WAIT,
                                          command="abort 5000 #river-abort"))
    assert await wait(client.request(pattern(1_023))) == pattern(1_023)
    after = await river_stats(client, server)
    assert after["connections"] == before["connections"]


@pytest_twisted.ensureDeferred
async def test_our_client_aborts_response(river, our_client):
    """We read a part of a 1 MiB response of River's, then abort: River's writer fails (its
    ``request_failed`` event) and the connection goes on."""
    server = await river.server_deferred(SMALL)
    client = our_client(server.port, SMALL)
    before = await river_stats(client, server)
    outbound = await wait(client.new_request())
    outbound.write(command(f"bytes {MIB} #our-abort-read"))
    outbound.finish()
    first = await wait(outbound.response.next_chunk())
    assert first and pattern(MIB).startswith(first)
    outbound.abort()
    event = await wait(server.wait_event_deferred("request_failed", timeout=WAIT,
                                                  command=f"bytes {MIB} #our-abort-read"))
    assert event["error"] == "java.io.IOException: session terminated", event  # River's writer
    assert await wait(client.request(pattern(70_000))) == pattern(70_000)
    after = await river_stats(client, server)
    assert after["connections"] == before["connections"]


@pytest_twisted.ensureDeferred
async def test_our_client_respects_river_ration_with_a_slow_reader(river, our_client):
    """River's dispatcher does not read a 200,000-byte body (a held request): our writer
    must stop at River's 1 KiB ration (River closes the connection on any byte past it),
    and the SAME connection serves another request meanwhile, which releases the first."""
    server = await river.server_deferred(SMALL)
    client = our_client(server.port, SMALL)
    before = await river_stats(client, server)
    held = await wait(client.new_request())
    body = command("hold our-slow", pattern(BIG))
    held.write(body)
    held.finish()
    await wait(server.next_event_deferred(
        WAIT, lambda event: event.get("event") == "held" and event.get("name") == "our-slow"))
    # River's dispatcher read the command line only: its ration let through SMALL bytes
    assert held.writer.pending >= len(body) - SMALL
    assert await wait(client.request(command("release our-slow"))) == b"released our-slow"
    response = json.loads(await wait(held.read_all()))
    assert response == digest(pattern(BIG))
    after = await river_stats(client, server)
    assert after["connections"] == before["connections"]


@pytest_twisted.ensureDeferred
async def test_our_ping_answered_by_river(river, our_client):
    """Our Ping gets River's PingAck (River never pings itself)."""
    server = await river.server_deferred()
    client = our_client(server.port)
    assert await wait(client.request(b"ping first")) == b"ping first"
    before = await river_stats(client, server)
    round_trip = await wait(client.ping())
    assert isinstance(round_trip, float) and round_trip >= 0
    assert await wait(client.request(b"still open")) == b"still open"
    after = await river_stats(client, server)
    assert after["connections"] == before["connections"]  # River kept the connection

