"""A closed RSocket connection is freed at once by reference counting (issue 15): with the
cyclic garbage collector disabled, no reference cycle keeps a connection, its protocol or
its frame buffers alive after ``connectionLost``.

Each test switches the cyclic collector off, runs connections with requests of every
interaction model in flight (a pending request-response on both sides, a stream, a channel,
fire-and-forget, fragments half reassembled, output queued), ends them (closed by either
side, aborted, expired), drops its own references, and checks weak references to the
protocols and sans-IO connections (and, for the buffers, which take no weak reference, that
nothing but the test holds them: ``sys.getrefcount``).
"""

from __future__ import annotations

import itertools
import sys
from typing import Any

import pytest
import pytest_twisted
from freed_support import Watching, assert_freed, cyclic_gc_off, live_count, refs, turns
from twisted.internet import defer, reactor
from twisted.internet.endpoints import (
    TCP4ClientEndpoint,
    TCP4ServerEndpoint,
    connectProtocol,
)
from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted_support import RawClient, wait, wire

from rsocket_tx import Payload, Responder, connect
from rsocket_tx.core import errors as E
from rsocket_tx.core.connection import RSocketConnection
from rsocket_tx.core.frames import (
    KeepaliveFrame,
    RequestResponseFrame,
    SetupFrame,
)
from rsocket_tx.protocol import RSocketProtocol, RSocketServerFactory
from rsocket_tx.transports.websocket import WebSocketClientEndpoint, WebSocketServerEndpoint

aio = pytest_twisted.ensureDeferred

TOKEN = b"freed-token-0123"


class Busy(Responder):
    """Keeps every interaction model busy: request-response b"hang" never answers; streams
    never end (items as credit allows); a channel echoes until the connection ends."""

    def __init__(self) -> None:
        self.fnf: list[bytes] = []

    def request_response(self, payload):
        if payload.data == b"hang":
            return defer.Deferred()
        return Payload(payload.data)

    def fire_and_forget(self, payload):
        self.fnf.append(payload.data)

    def request_stream(self, payload):
        return (Payload(b"%d" % i) for i in itertools.count())

    async def request_channel(self, payload, inbound):
        yield payload
        async for item in inbound:
            yield item


class Watched(Watching, RSocketServerFactory):
    """A server factory that tells when each connection is over (``lost()``) and remembers
    (weakly: only the test's :func:`refs`) what it built."""


async def listen(transport: str, factory: Watched) -> tuple[Any, Any]:
    """Listen with ``factory`` over ``transport`` ("tcp" or "ws"); returns (port, a client
    endpoint connecting to it)."""
    tcp = TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1")
    if transport == "tcp":
        port = await wait(tcp.listen(factory))
        number = port.getHost().port
        return port, TCP4ClientEndpoint(reactor, "127.0.0.1", number)
    port = await wait(WebSocketServerEndpoint(reactor, tcp, "/rsocket").listen(factory))
    number = port.getHost().port
    inner = TCP4ClientEndpoint(reactor, "127.0.0.1", number)
    return port, WebSocketClientEndpoint(reactor, inner, f"ws://localhost:{number}/rsocket")


async def busy_connection(transport: str, how: str, lease: bool = False) -> tuple[dict, list]:
    """One connection with every interaction model in flight, ended ``how`` ("client
    closes", "server closes", "client aborts"): request-responses pending both ways (one
    awaited by an application coroutine), a stream, a channel whose outbound source waits,
    a coroutine iterating a channel, fire-and-forget, output queued. Returns weak
    references to both protocols and connections and to the requester handle, and what the
    application keeps: the failed Deferreds of its pending request-responses and their
    Failures. (What is logged meanwhile, captured by the test's log check, must not keep
    them either.)"""
    factory = Watched(Busy, reactor=reactor)
    port, endpoint = await listen(transport, factory)
    try:
        rs = await wait(connect(endpoint, reactor=reactor, lease=lease))
        client = rs._protocol
        assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"
        kept: list[Any] = []
        pending = rs.request_response(Payload(b"hang"))
        pending.addErrback(kept.append)
        kept.append(pending)
        await wait(rs.fire_and_forget(Payload(b"f")))
        stream = rs.request_stream(Payload(b"s"), prefetch=4)
        assert [(await wait(stream.__anext__())).data for _ in range(2)] == [b"0", b"1"]
        never: defer.Deferred = defer.Deferred()

        async def outbound():
            yield Payload(b"o1")
            await never

        channel = rs.request_channel(Payload(b"c"), outbound(), prefetch=4)
        assert (await wait(channel.__anext__())).data == b"c"
        assert (await wait(channel.__anext__())).data == b"o1"
        # an application coroutine waiting for the next item of a stream
        waiting = rs.request_stream(Payload(b"s"), prefetch=1)
        assert (await wait(waiting.__anext__())).data == b"0"
        waiting.cancel()

        async def consume(stream):
            async for _ in stream:
                pass

        idle = rs.request_channel(Payload(b"idle"), outbound(), prefetch=1)
        assert (await wait(idle.__anext__())).data == b"idle"
        consumer = defer.ensureDeferred(consume(idle))
        ended: list[Failure] = []
        consumer.addErrback(ended.append)

        async def ask(rsocket):
            return await rsocket.request_response(Payload(b"hang"))

        asking = defer.ensureDeferred(ask(rs))
        asking.addErrback(ended.append)
        server = factory.built[0]()
        # a request-response the server's requester makes, pending when the connection ends
        back = server.rsocket.request_response(Payload(b"to the client"))
        back.addErrback(kept.append)
        kept.append(back)
        # output queued and not yet written (the write happens at the end of this turn)
        client.rsocket.fire_and_forget(Payload(b"queued" * 1000)).addErrback(lambda f: None)
        weak = refs(client=client, client_connection=client.connection, server=server,
                    server_connection=server.connection, client_handle=rs)
        lost = factory.lost(1)
        closed = rs.closed  # (fires once the client's transport is gone too)
        if how == "client closes":
            await wait(rs.close(drain_timeout=0))
        elif how == "server closes":
            await wait(server.close_gracefully(drain_timeout=0))
        else:
            client.transport.abortConnection()
        await lost
        await wait(closed)
        del rs, client, server, stream, channel, outbound, waiting, idle, consumer, asking
        del closed, lost
        await wait(pending.addBoth(lambda _: None))
        await turns()
        # the coroutine failed with the connection's error (the application drops its
        # Failure: a Failure kept with its traceback keeps the frames it went through)
        assert ended[0].check(E.ConnectionError, E.ConnectionLostError, E.ConnectionCloseError)
        del ended
        return weak, kept
    finally:
        await wait(defer.maybeDeferred(port.stopListening))


@pytest.mark.parametrize("how", ["client closes", "server closes", "client aborts"])
@pytest.mark.parametrize("transport", ["tcp", "ws"])
@aio
async def test_a_closed_connection_is_freed_by_reference_counting(transport, how):
    with cyclic_gc_off():
        weak, kept = await busy_connection(transport, how)
        await turns()
        # the application still holds its failed Deferreds (and their Failures): they do
        # not keep the connection alive
        assert any(isinstance(k, Failure) for k in kept)
        assert_freed(weak)
        del kept


@aio
async def test_a_closed_connection_with_leases_is_freed():
    with cyclic_gc_off():
        weak, kept = await busy_connection("tcp", "client closes", lease=True)
        await turns()
        assert_freed(weak)
        del kept


@aio
async def test_half_reassembled_fragments_are_freed_with_the_connection():
    """A raw client sends the first fragment of a request, then goes away: the server's
    protocol, connection, frame reader and the reassembly holding the fragment are freed."""
    with cyclic_gc_off():
        factory = Watched(Busy, reactor=reactor)
        port, _ = await listen("tcp", factory)
        try:
            endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port)
            raw = await wait(connectProtocol(endpoint, RawClient()))
            raw.send(wire(
                SetupFrame(keepalive_interval=60_000, max_lifetime=120_000,
                           metadata_mime_type=b"application/octet-stream",
                           data_mime_type=b"application/octet-stream"),
                RequestResponseFrame(stream_id=1, data=b"a" * 5000, follows=True),
                KeepaliveFrame(respond=True)))
            await raw.frame(lambda f: isinstance(f, KeepaliveFrame))  # all of it was read
            server = factory.built[0]()
            conn = server.connection
            stream = conn._streams.get(1)
            assert stream is not None and stream.reassembly is not None  # half reassembled
            reassembly, reader, outbox = stream.reassembly, conn._reader, conn._out
            weak = refs(server=server, server_connection=conn)
            lost = factory.lost(1)
            raw.transport.loseConnection()
            await lost
            del server, conn, stream, raw
            await turns()
            assert_freed(weak)
            # nothing but this test's name holds the buffers (getrefcount's argument: +1)
            assert sys.getrefcount(reassembly) == 2
            assert sys.getrefcount(reader) == 2
            assert sys.getrefcount(outbox) == 2
        finally:
            await wait(defer.maybeDeferred(port.stopListening))


def setup_frame(resume: bool) -> bytes:
    return wire(SetupFrame(keepalive_interval=60_000, max_lifetime=120_000,
                           metadata_mime_type=b"application/octet-stream",
                           data_mime_type=b"application/octet-stream",
                           resume_token=TOKEN if resume else None))


def lose(proto: RSocketProtocol, transport: StringTransport) -> None:
    """The transport is lost, as a real one is: it forgets its producer, then tells the
    protocol."""
    transport.unregisterProducer()
    proto.connectionLost(Failure(ConnectionLost("cut")))


def test_a_detached_resumable_session_is_kept_until_it_expires_then_freed():
    """A resumable session that lost its transport is kept on purpose (it waits for RESUME)
    until ``resume_session_timeout``; once it expires, nothing keeps it."""
    with cyclic_gc_off():
        clock = Clock()
        factory = RSocketServerFactory(Busy, reactor=clock, resume=True,
                                       resume_session_timeout=1000)
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(setup_frame(resume=True)
                           + wire(RequestResponseFrame(stream_id=1, data=b"hang")))
        lose(proto, transport)
        weak = refs(server=proto, server_connection=proto.connection)
        del proto, transport
        clock.advance(0.5)
        assert weak["server"]() is not None  # kept on purpose: the session waits for RESUME
        assert factory.sessions.get(TOKEN) is not None
        clock.advance(0.6)  # expired
        assert factory.sessions.get(TOKEN) is None
        assert not factory.connections
        assert_freed(weak)


def test_a_detached_resumable_session_ended_by_the_server_is_freed():
    with cyclic_gc_off():
        clock = Clock()
        factory = RSocketServerFactory(Busy, reactor=clock, resume=True)
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        proto.dataReceived(setup_frame(resume=True))
        lose(proto, transport)
        del transport
        weak = refs(server=proto, server_connection=proto.connection)
        closed = proto.close()
        assert closed.called
        del proto, closed
        assert_freed(weak)


@aio
async def test_a_resumed_session_and_its_relay_are_freed_after_the_session_ends():
    """Resume on over loopback TCP: the server cuts the client's transport, the client
    reconnects and resumes (a second server protocol relays to the session), streams go
    on; when the session is closed, the session, its relay and the client are freed."""
    with cyclic_gc_off():
        factory = Watched(Busy, reactor=reactor, resume=True)
        port, endpoint = await listen("tcp", factory)
        try:
            weak = await resumed_then_closed(factory, endpoint)
            await turns()
            assert_freed(weak)
        finally:
            await wait(defer.maybeDeferred(port.stopListening))


async def resumed_then_closed(factory: Watched, endpoint: Any) -> dict:
    rs = await wait(connect(endpoint, reactor=reactor, resume=True,
                            reconnect_initial_delay=0))
    stream = rs.request_stream(Payload(b"s"), prefetch=2)
    assert (await wait(stream.__anext__())).data == b"0"
    session = factory.built[0]()
    resumed = rs.resumed
    session.transport.abortConnection()  # the client's transport is cut
    await wait(resumed)
    relay = factory.built[1]()
    assert (await wait(rs.request_response(Payload(b"again")))).data == b"again"
    weak = refs(client=rs._protocol, client_connection=rs._protocol.connection,
                session=session, session_connection=session.connection, relay=relay,
                relay_connection=relay.connection)
    lost = factory.lost(2)
    await wait(rs.close(drain_timeout=0))
    # the server session would wait for another resume until its timeout: end it
    await wait(session.close())
    await lost
    return weak


def test_the_sans_io_connection_alone_is_freed():
    """RSocketConnection (resume and lease on), with streams open and a fragment half
    reassembled, freed by reference counting once the transport is lost."""
    with cyclic_gc_off():
        conn = RSocketConnection("server")
        conn.receive_data(setup_frame(resume=False), 0.0)
        conn.receive_data(wire(RequestResponseFrame(stream_id=1, data=b"a" * 100,
                                                    follows=True)), 0.0)
        events = conn.connection_lost("gone")
        assert events
        weak = refs(connection=conn)
        del conn, events
        assert_freed(weak)


@aio
async def test_200_connections_leave_no_protocol_or_connection_behind():
    """200 connections, half of them hostile (an oversize frame prefix, garbage, a SETUP and
    nothing else, or a client that vanishes mid-request), half normal (a request-response
    and a stream, then close): after they are all gone, the number of live RSocketProtocol
    and RSocketConnection objects is back to what it was before."""
    with cyclic_gc_off():
        factory = Watched(Busy, reactor=reactor)
        port, endpoint = await listen("tcp", factory)
        try:
            baseline = live_count(RSocketProtocol, RSocketConnection)
            await many_connections(factory, endpoint, port.getHost().port, 200)
            await turns()
            assert live_count(RSocketProtocol, RSocketConnection) == baseline
        finally:
            await wait(defer.maybeDeferred(port.stopListening))


HOSTILE = [
    b"\xff\xff\xff" + b"\x00" * 100,  # a frame announcing 16 MiB, never completed
    b"GET / HTTP/1.1\r\n\r\n",  # not RSocket
    None,  # a SETUP, then nothing (the client goes away)
    b"half",  # a SETUP and half a request frame
]


async def many_connections(factory: Watched, endpoint: Any, number: int, count: int) -> None:
    raw_endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", number)
    for i in range(count):
        if i % 2:
            rs = await wait(connect(endpoint, reactor=reactor))
            assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"
            stream = rs.request_stream(Payload(b"s"), prefetch=2)
            assert (await wait(stream.__anext__())).data == b"0"
            await wait(rs.close(drain_timeout=0))
            del rs, stream
        else:
            raw = await wait(connectProtocol(raw_endpoint, RawClient()))
            attack = HOSTILE[(i // 2) % len(HOSTILE)]
            if attack is None:
                raw.send(setup_frame(resume=False))
            elif attack == b"half":
                raw.send(setup_frame(resume=False)
                         + wire(RequestResponseFrame(stream_id=1, data=b"abcdef"))[:7])
            else:
                raw.send(attack)
            raw.transport.loseConnection()
            await wait(raw.lost)
            del raw
        await factory.lost(i + 1)


def test_fresh_error_copies_class_args_and_attributes_without_the_traceback():
    from rsocket_tx.bridge import DetachedFailure, failure_for, fresh_error

    try:
        raise E.UnknownFrameTypeError(0x3F, ignore=True)  # (an __init__ of its own)
    except E.UnknownFrameTypeError as exc:
        error = exc
    copy = fresh_error(error)
    assert type(copy) is E.UnknownFrameTypeError and copy is not error
    assert copy.args == error.args and vars(copy) == vars(error)
    assert copy.__traceback__ is None and error.__traceback__ is not None
    failure = failure_for(error)
    assert isinstance(failure, DetachedFailure) and failure.value is not error
    assert failure.check(E.UnknownFrameTypeError) and failure.tb is None
