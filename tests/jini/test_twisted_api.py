"""The Twisted API of the Jini ERI mux over real loopback TCP: :class:`JiniMuxClient` /
:class:`OutboundRequest` against :func:`serve` / :class:`Dispatcher` / :class:`InboundRequest`.

Bodies of every size that matters around River's 1,024-byte fragments, 70,000 and 10 MiB,
with River's rations and with small ones (so that flow control runs), 128 concurrent requests
on one connection and the 129th on a second, 1,000 sequential requests reusing session ids,
aborts both ways, producers paused by the ration, a slow reader that must not stall the
others, Ping, graceful shutdown. No sleeps: everything waits on Deferreds.
"""

from __future__ import annotations

import hashlib

import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from rsocket_tx.jini import (
    ConnectionShutdownError,
    Dispatcher,
    EchoDispatcher,
    InboundRequest,
    SessionAbortedError,
)

from .twisted_helpers import pattern, wait

aio = pytest_twisted.ensureDeferred

MIB = 1024 * 1024
SIZES = [0, 1, 1_023, 1_024, 1_025, 70_000, 10 * MIB]
#: (server ration, client ration), bytes: River's, small (flow control runs), unlimited
RATIONS = {"default": (32_768, 32_768), "small": (1_024, 512), "unlimited": (0, 0)}


def digest(data: bytes) -> tuple[int, str]:
    return len(data), hashlib.sha256(data).hexdigest()


class ReadAllEcho(Dispatcher):
    """Reads the whole body, then answers it (not streaming)."""

    def __init__(self, seen: list | None = None) -> None:
        self.seen = seen if seen is not None else []

    async def dispatch(self, request: InboundRequest) -> None:
        body = await request.read_all()
        self.seen.append(request.session_id)
        request.response.write(body)


class Recorder(Dispatcher):
    """Records the outcome of each request it serves (``outcomes``), controlled by tests."""

    def __init__(self, state: dict) -> None:
        self.state = state

    async def dispatch(self, request: InboundRequest) -> None:
        state = self.state
        state.setdefault("requests", []).append(request)
        action = state.get("action", "echo")
        arrived = state.get("arrived")
        if arrived is not None and not arrived.called:
            arrived.callback(request)
        try:
            if action == "hold":
                await state["release"]
            if action == "abort-after":
                request.response.write(pattern(state["size"]))
                request.response.abort(detail="enough")
                return
            body = await request.read_all()
            request.response.write(body)
            request.response.finish()
            await request.response.notify_finish()
            state.setdefault("outcomes", []).append("ok")
        except SessionAbortedError as exc:
            state.setdefault("outcomes", []).append(exc)
            failed = state.get("failed")
            if failed is not None and not failed.called:
                failed.callback(exc)


# -------------------------------------------------------------------------------------------
# bodies


@pytest.mark.parametrize("rations", list(RATIONS))
@aio
async def test_bodies_echoed_whole(loop, rations):
    server_ration, client_ration = RATIONS[rations]
    port = await loop.serve(ReadAllEcho, initial_ration=server_ration)
    client = loop.client(port, initial_ration=client_ration)
    for size in SIZES:
        body = pattern(size, size)
        response = await wait(client.request(body))
        assert digest(response) == digest(body), size
    assert len(client.protocols) == 1
    assert len(port.factory.protocols) == 1


@pytest.mark.parametrize("rations", ["default", "small"])
@aio
async def test_streaming_echo_chunks(loop, rations):
    """EchoDispatcher answers while it reads: the response arrives chunk by chunk (the Data
    of one read in one chunk), never more than the client's ration at once."""
    server_ration, client_ration = RATIONS[rations]
    port = await loop.serve(EchoDispatcher, initial_ration=server_ration)
    client = loop.client(port, initial_ration=client_ration)
    outbound = await wait(client.new_request())
    body = pattern(300_000)
    outbound.write(body)
    outbound.finish()
    chunks = []
    async for chunk in outbound.response:
        chunks.append(chunk)
    assert b"".join(chunks) == body
    assert max(map(len, chunks)) <= client_ration
    assert len(chunks) >= len(body) // client_ration


# -------------------------------------------------------------------------------------------
# concurrency and session reuse


@pytest.mark.parametrize("rations", ["default", "small"])
@aio
async def test_128_concurrent_on_one_connection_then_a_second(loop, rations):
    server_ration, client_ration = RATIONS[rations]
    seen: list[int] = []
    port = await loop.serve(lambda: ReadAllEcho(seen), initial_ration=server_ration)
    client = loop.client(port, initial_ration=client_ration)
    requests = [await wait(client.new_request()) for _ in range(128)]
    assert sorted(r.session_id for r in requests) == list(range(128))
    assert len(client.protocols) == 1
    bodies = [pattern(3_000, i) for i in range(128)]
    for request, body in zip(requests, bodies):
        request.write(body)
    # the 129th needs another connection
    extra = await wait(client.new_request())
    assert extra.session_id == 0 and len(client.protocols) == 2
    extra.write(b"extra")
    extra.finish()
    for request in requests:
        request.finish()
    responses = await wait(defer.gatherResults([r.read_all() for r in requests]))
    assert responses == bodies
    assert await wait(extra.read_all()) == b"extra"
    assert len(seen) == 129


@aio
async def test_waiting_for_a_free_session_with_max_sessions(loop):
    port = await loop.serve(ReadAllEcho)
    client = loop.client(port, max_sessions=2)
    first = await wait(client.new_request())
    second = await wait(client.new_request())
    third = client.new_request()  # opens a second connection
    third_request = await wait(third)
    assert len(client.protocols) == 2
    for request in (first, second, third_request):
        request.finish()
        assert await wait(request.read_all()) == b""


@aio
async def test_1000_sequential_requests_reuse_session_ids(loop):
    seen: list[int] = []
    port = await loop.serve(lambda: ReadAllEcho(seen), initial_ration=1_024)
    client = loop.client(port, initial_ration=1_024)
    for index in range(1_000):
        body = pattern(100, index)
        assert await wait(client.request(body)) == body
    assert len(client.protocols) == 1 and len(port.factory.protocols) == 1
    assert set(seen) == {0}  # the lowest free id, every time


# -------------------------------------------------------------------------------------------
# flow control and producers


@implementer(IPushProducer)
class CountingProducer:
    """Writes ``chunk`` each time it is resumed (and once at the start), up to ``total``."""

    def __init__(self, consumer, chunk: bytes, total: int) -> None:
        self.consumer = consumer
        self.chunk = chunk
        self.left = total
        self.paused = 0
        self.stopped = False
        self.done = defer.Deferred()

    def start(self) -> None:
        self.consumer.registerProducer(self, True)
        self.resumeProducing()

    def pauseProducing(self) -> None:  # noqa: N802
        self.paused += 1
        self._paused = True

    def resumeProducing(self) -> None:  # noqa: N802
        self._paused = False
        while not self._paused and self.left > 0:
            self.left -= len(self.chunk)
            self.consumer.write(self.chunk)
        if self.left <= 0 and not self.done.called:
            self.consumer.unregisterProducer()
            self.consumer.finish()
            self.done.callback(None)

    def stopProducing(self) -> None:  # noqa: N802
        self.stopped = True


@aio
async def test_push_producer_is_paused_while_the_ration_is_spent(loop):
    port = await loop.serve(ReadAllEcho, initial_ration=1_024)
    client = loop.client(port)
    outbound = await wait(client.new_request())
    producer = CountingProducer(outbound, b"p" * 500, 100_000)
    producer.start()
    assert producer.paused >= 1  # 500 + 500 + 500 > 1,024 at once
    await wait(producer.done)
    response = await wait(outbound.read_all())
    assert response == b"p" * 100_000
    assert producer.paused >= 50


@aio
async def test_slow_reader_does_not_stall_other_sessions(loop):
    """§Flow Control: a request whose body the server does not read stops at the server's
    ration; other requests on the same connection are served meanwhile."""
    release = defer.Deferred()
    state = {"action": "hold", "release": release, "arrived": defer.Deferred()}
    port = await loop.serve(lambda: Recorder(state), initial_ration=1_024)
    client = loop.client(port)
    held = await wait(client.new_request())
    held.write(pattern(200_000))
    held.finish()
    held_request = await wait(state["arrived"])
    state["action"] = "echo"
    for index in range(20):
        assert await wait(client.request(b"other %d" % index)) == b"other %d" % index
    assert len(client.protocols) == 1
    # the held body waits at the ration: at most 1,024 bytes buffered on the server
    assert held_request.body.buffered <= 1_024
    assert held.writer.pending >= 200_000 - 1_024
    release.callback(None)
    assert await wait(held.read_all()) == pattern(200_000)


# -------------------------------------------------------------------------------------------
# aborts


@aio
async def test_client_aborts_mid_request(loop):
    state = {"failed": defer.Deferred(), "arrived": defer.Deferred()}
    port = await loop.serve(lambda: Recorder(state), initial_ration=1_024)
    client = loop.client(port)
    outbound = await wait(client.new_request())
    outbound.write(pattern(5_000))
    await wait(state["arrived"])
    outbound.abort("client changed its mind")
    with pytest.raises(SessionAbortedError):
        await wait(outbound.read_all())
    error = await wait(state["failed"])
    assert error.detail == "client changed its mind" and error.partial is False
    with pytest.raises(SessionAbortedError):
        outbound.write(b"more")
    # the connection goes on
    assert await wait(client.request(b"after")) == b"after"
    assert len(client.protocols) == 1


@aio
async def test_server_aborts_mid_response(loop):
    state = {"action": "abort-after", "size": 5_000}
    port = await loop.serve(lambda: Recorder(state))
    client = loop.client(port)
    outbound = await wait(client.new_request())
    outbound.write(b"go")
    outbound.finish()
    received = b""
    with pytest.raises(SessionAbortedError) as info:
        async for chunk in outbound.response:
            received += chunk
    assert info.value.partial is True and info.value.detail == "enough"
    assert received == pattern(5_000)
    state["action"] = "echo"
    assert await wait(client.request(b"after")) == b"after"


@aio
async def test_cancelling_a_request_sends_abort(loop):
    release = defer.Deferred()
    state = {"action": "hold", "release": release, "arrived": defer.Deferred(),
             "failed": defer.Deferred()}
    port = await loop.serve(lambda: Recorder(state))
    client = loop.client(port)
    d = client.request(b"slow")
    held = await wait(state["arrived"])
    d.cancel()
    with pytest.raises(defer.CancelledError):
        await d
    # the server learns it: its response can no longer finish
    with pytest.raises(SessionAbortedError):
        await wait(held.response.notify_finish())
    release.callback(None)
    error = await wait(state["failed"])
    assert isinstance(error, SessionAbortedError)


@aio
async def test_server_closes_before_the_request_is_finished(loop):
    """The server answers without reading the rest: its Close makes our client drop the rest
    of the request silently (§Close Message) and read the complete response."""

    class Early(Dispatcher):
        def dispatch(self, request):
            request.response.write(b"no thanks")

    port = await loop.serve(Early, initial_ration=1_024)
    client = loop.client(port)
    outbound = await wait(client.new_request())
    outbound.write(pattern(100_000))
    assert await wait(outbound.read_all()) == b"no thanks"
    outbound.write(b"dropped silently")
    outbound.finish()
    assert await wait(client.request(b"next")) == b"no thanks"


@pytest.mark.logs_failure("a dispatcher that raises is logged", match="dispatch of")
@aio
async def test_failing_dispatcher_aborts_with_partial(loop):
    class Broken(Dispatcher):
        def dispatch(self, request):
            raise RuntimeError("bug")

    port = await loop.serve(Broken)
    client = loop.client(port)
    with pytest.raises(SessionAbortedError) as info:
        await wait(client.request(b"x"))
    assert info.value.partial is True and "bug" in info.value.detail


# -------------------------------------------------------------------------------------------
# acknowledgment, ping, shutdown


@aio
async def test_ack_required_is_acknowledged_after_the_response_was_read(loop):
    acks = [defer.Deferred(), defer.Deferred()]

    class Acked(Dispatcher):
        async def dispatch(self, request):
            index = int(await request.read_all())
            request.response.write(b"please confirm")
            request.response.finish(ack_required=True)
            acks[index].callback(await request.response.notify_acknowledged())

    port = await loop.serve(Acked)
    client = loop.client(port)
    assert await wait(client.request(b"0")) == b"please confirm"
    assert await wait(client.request(b"1")) == b"please confirm"
    assert await wait(defer.gatherResults(acks)) == [True, True]
    # the session id was held until the Acknowledgment went out, then reused
    (protocol,) = client.protocols
    assert protocol.connection.session_count == 0


@aio
async def test_ping(loop):
    port = await loop.serve(ReadAllEcho)
    client = loop.client(port)
    rtt = await wait(client.ping())
    assert rtt >= 0
    assert await wait(client.request(b"still")) == b"still"


@aio
async def test_graceful_shutdown_waits_for_requests(loop):
    release = defer.Deferred()
    state = {"action": "hold", "release": release, "arrived": defer.Deferred()}
    port = await loop.serve(lambda: Recorder(state))
    client = loop.client(port)
    held = client.request(b"in progress")
    await wait(state["arrived"])
    closed = port.factory.close_connections("maintenance")
    assert not closed.called
    release.callback(None)
    assert await wait(held) == b"in progress"
    await wait(closed)
    assert port.factory.protocols == set()
    # the client saw the Shutdown; a new request opens a new connection
    await wait(defer.maybeDeferred(port.stopListening))
    port2 = await loop.serve(ReadAllEcho)
    assert port2 is not None


@aio
async def test_shutdown_fails_waiting_requests_as_retryable(loop):
    release = defer.Deferred()
    state = {"action": "hold", "release": release, "arrived": defer.Deferred()}
    port = await loop.serve(lambda: Recorder(state), drain_timeout=0)
    client = loop.client(port)
    protocol_lost = None
    d = client.request(b"never answered")
    await wait(state["arrived"])
    (server_protocol,) = port.factory.protocols
    protocol_lost = server_protocol.when_lost()
    server_protocol.connection.abort(state["requests"][0].session_id, partial=False)
    events = server_protocol.connection.shutdown("bye")
    server_protocol.handle_events_now(events)
    with pytest.raises(SessionAbortedError) as info:
        await wait(d)
    assert info.value.partial is False
    await wait(protocol_lost)
    assert client.protocols == []
    release.callback(None)


@aio
async def test_requests_after_shutdown_get_a_new_connection(loop):
    port = await loop.serve(ReadAllEcho)
    client = loop.client(port)
    assert await wait(client.request(b"one")) == b"one"
    (first,) = client.protocols
    await wait(port.factory.close_connections("restart"))
    await wait(first.when_lost())
    assert isinstance(first.terminated, ConnectionShutdownError)
    assert await wait(client.request(b"two")) == b"two"
    assert client.protocols and client.protocols[0] is not first


@aio
async def test_connection_refused_fails_new_request(loop):
    port = await loop.serve(ReadAllEcho)
    number = port.getHost().port
    await wait(defer.maybeDeferred(port.stopListening))
    loop.ports.remove(port)
    client = loop.client(number)
    with pytest.raises(Exception) as info:
        await wait(client.new_request())
    assert "refused" in str(info.value).lower() or "connect" in str(info.value).lower()
    assert reactor.running
