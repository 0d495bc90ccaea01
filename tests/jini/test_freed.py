"""A closed Jini ERI mux connection is freed at once by reference counting (issue 15): with
the cyclic garbage collector disabled, no reference cycle keeps a connection, its protocol,
its requests or its buffers alive after ``connectionLost``.

Sessions in every state are in flight when the connection ends: a request whose body is
half sent (no eof), one whose response is half read, one whose dispatcher never answers, and
a request waiting for its response (see ``tests/freed_support.py`` for the method).
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from freed_support import Watching, assert_freed, cyclic_gc_off, live_count, refs, turns
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
from twisted.internet.error import ConnectionLost
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure

from rsocket_tx.jini import EchoDispatcher, JiniMuxClient, JiniMuxConfig
from rsocket_tx.jini import codec as C
from rsocket_tx.jini.connection import JiniMuxConnection, Role
from rsocket_tx.jini.server import (
    Dispatcher,
    InboundRequest,
    JiniMuxServerFactory,
    JiniServerProtocol,
)

from .test_hostile import Raw
from .twisted_helpers import pattern, wait

aio = pytest_twisted.ensureDeferred

HEADER = C.ClientConnectionHeader(0x80).encode()  # ration 0x80 * 256 = 32 KiB


class Mixed(Dispatcher):
    """b"hang..." never answers; b"big..." answers with 1 MiB (more than the client's
    ration: the rest waits in the writer); anything else is echoed. Keeps (weakly, via
    :func:`refs`) the requests it got."""

    def __init__(self, seen: list) -> None:
        self.seen = seen

    async def dispatch(self, request: InboundRequest) -> Any:
        self.seen.append(refs(request=request)["request"])
        first = await request.body.next_chunk()
        if first is not None and first.startswith(b"hang"):
            await defer.Deferred()  # never: cancelled when the connection ends
        if first is not None and first.startswith(b"big"):
            request.response.write(pattern(1 << 20))
            return None
        if first is not None:
            request.response.write(first)
        async for chunk in request.body:
            request.response.write(chunk)
        return None


class Watched(Watching, JiniMuxServerFactory):
    """A server factory that tells when a connection's transport is gone."""


async def listen(factory: Watched) -> Any:
    from twisted.internet.endpoints import TCP4ServerEndpoint
    return await wait(TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory))


async def busy_connection(how: str) -> dict:
    seen: list = []
    factory = Watched(lambda: Mixed(seen), JiniMuxConfig(), reactor)
    port = await listen(factory)
    client = JiniMuxClient(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
    try:
        assert await wait(client.request(b"echo")) == b"echo"
        half_sent = await wait(client.new_request())
        half_sent.write(b"part one")  # no eof
        hung = await wait(client.new_request())
        hung.write(b"hang")
        hung.finish()
        big = await wait(client.new_request())
        big.write(b"big")
        big.finish()
        assert len(await wait(big.response.next_chunk())) > 0  # a response half read
        waiting = client.request(b"hang too")  # a Deferred the application holds
        failures: list[Failure] = []
        waiting.addErrback(failures.append)
        protocol = client.protocols[0]
        server = factory.built[0]()
        weak = refs(client=protocol, client_connection=protocol.connection, server=server,
                    server_connection=server.connection, client_request=half_sent,
                    **{f"server_request_{i}": r() for i, r in enumerate(seen)
                       if r() is not None})  # (the finished echo's is gone already)
        assert len(weak) >= 8
        lost = factory.lost(1)
        closed = protocol.when_lost()
        if how == "client closes":
            await wait(client.close())
        elif how == "server closes":
            await wait(server.close())
        else:
            protocol.transport.abortConnection()
        await lost
        await wait(closed)
        await wait(waiting.addBoth(lambda _: None))
        assert failures and failures[0].check(Exception)
        del protocol, server, half_sent, hung, big, waiting, failures
        await turns()
        return weak
    finally:
        await wait(client.close())
        await wait(defer.maybeDeferred(port.stopListening))


@pytest.mark.parametrize("how", ["client closes", "server closes", "client aborts"])
@aio
async def test_a_closed_jini_connection_is_freed_by_reference_counting(how):
    with cyclic_gc_off():
        weak = await busy_connection(how)
        await turns()
        assert_freed(weak)


def test_the_sans_io_connection_alone_is_freed():
    with cyclic_gc_off():
        server = JiniMuxConnection(Role.SERVER)
        server.receive_data(HEADER + C.Data(0, b"x" * 100, open=True).encode()
                            + C.Data(1, b"y" * 100, open=True).encode()
                            + b"\x80\x02\x10\x00" + b"z" * 10, 0.0)  # half a Data message
        server.connection_lost()
        weak = refs(connection=server)
        del server
        assert_freed(weak)


def test_a_server_protocol_on_an_in_memory_transport_is_freed():
    """A header wait, a half-read request, and a half message, on a StringTransport with a
    Clock: after connectionLost nothing keeps the protocol, its connection, its requests."""
    with cyclic_gc_off():
        seen: list = []
        factory = JiniMuxServerFactory(lambda: Mixed(seen), JiniMuxConfig(), Clock())
        protocol = factory.buildProtocol(None)
        transport = StringTransport()
        protocol.makeConnection(transport)
        protocol.dataReceived(HEADER + C.Data(0, b"hang", open=True, eof=True).encode()
                              + C.Data(1, b"half", open=True).encode() + b"\x80\x02")
        assert len(seen) == 2
        weak = refs(server=protocol, server_connection=protocol.connection,
                    **{f"request_{i}": r() for i, r in enumerate(seen)})
        transport.unregisterProducer()  # (as a real transport does when it is lost)
        protocol.connectionLost(Failure(ConnectionLost("cut")))
        del protocol, transport
        assert not factory.protocols
        assert_freed(weak)


@aio
async def test_200_connections_leave_no_protocol_or_connection_behind():
    """200 connections, half hostile (half a header, garbage, a header and half a message,
    Data past the ration), half normal (a request, then the client closes): after they are
    gone the number of live Jini protocols and connections is back to what it was."""
    from rsocket_tx.jini.client import JiniClientProtocol
    with cyclic_gc_off():
        factory = Watched(EchoDispatcher, JiniMuxConfig(), reactor)
        port = await listen(factory)
        try:
            kinds = (JiniServerProtocol, JiniClientProtocol, JiniMuxConnection)
            baseline = live_count(*kinds)
            await many_connections(factory, port.getHost().port, 200)
            await turns()
            assert live_count(*kinds) == baseline
        finally:
            await wait(defer.maybeDeferred(port.stopListening))


HOSTILE = [
    HEADER[:5],  # half a header
    b"GET / HTTP/1.1\r\n\r\n",  # not the Jini mux
    HEADER + b"\x80\x00\xff",  # a header and half a Data message
    HEADER + C.Data(0, b"", open=True).encode() + b"\x80\x00\xff\xff" + b"x" * 65535,  # past
]


async def many_connections(factory: Watched, number: int, count: int) -> None:
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", number)
    for i in range(count):
        if i % 2:
            client = JiniMuxClient(reactor, f"tcp:host=127.0.0.1:port={number}")
            assert await wait(client.request(b"x" * 100)) == b"x" * 100
            await wait(client.close())
            del client
        else:
            raw = await wait(connectProtocol(endpoint, Raw()))
            raw.transport.write(HOSTILE[(i // 2) % len(HOSTILE)])
            raw.transport.loseConnection()
            await wait(raw.closed)
            del raw
        await factory.lost(i + 1)

