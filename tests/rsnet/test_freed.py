"""A closed RS-network connection is freed by reference counting alone (as
``tests/test_freed.py`` checks for RSocket and ``tests/jini/test_freed.py`` for the Jini mux;
issue "Hard to break"): with the cyclic collector off, subscriptions in flight both ways, the
connection ended by goodbye, by either side's close, or by an abort, weak references to both
protocols and both sans-IO connections must be dead once the test drops its own references."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import pytest_twisted
from freed_support import Watching, assert_freed, cyclic_gc_off, live_count, refs, turns
from twisted.internet import reactor

from rsocket_tx.rsnet.client import connect
from rsocket_tx.rsnet.connection import RSNetConnection
from rsocket_tx.rsnet.errors import ConnectionClosedError
from rsocket_tx.rsnet.protocol import RSNetProtocol
from rsocket_tx.rsnet.server import RSNetServerFactory

from .twisted_helpers import wait

aio = pytest_twisted.ensureDeferred


def endless(request: Any):
    return (b"%d" % i for i in itertools.count())


PUBLISHERS = {"endless": endless, "three": lambda request: [b"a", b"b", b"c"]}


class Watched(Watching, RSNetServerFactory):
    """The server factory of these tests: remembers its protocols weakly, tells when they
    are lost."""


async def listen(factory: Any) -> Any:
    from twisted.internet.endpoints import TCP4ServerEndpoint

    return await wait(TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory))


async def scenario(port: Any, factory: Watched, how: str, lost: int) -> dict[str, Any]:
    """One connection with subscriptions in flight both ways, ended ``how``; returns weak
    references to what must be freed."""
    client = await wait(connect(reactor, f"rsnet+tcp://127.0.0.1:{port.getHost().port}",
                                PUBLISHERS))
    assert await wait(client.subscribe("three").collect()) == [b"a", b"b", b"c"]
    ours = client.subscribe("endless", window=4)
    assert await wait(ours.__anext__()) == b"0"
    server = factory.built[-1]()
    theirs = server.subscribe("endless", window=4)
    assert await wait(theirs.__anext__()) == b"0"
    weak = refs(client=client, client_connection=client.connection, server=server,
                server_connection=server.connection, subscription=ours,
                server_subscription=theirs)
    if how == "goodbye":
        await wait(client.goodbye("done"))
    elif how == "client closes":
        await wait(client.close())
    elif how == "server closes":
        await wait(server.close())
    else:
        client.transport.abortConnection()
    await wait(factory.lost(lost))
    for subscription in (ours, theirs):  # what was buffered, then the end of the connection
        with pytest.raises(ConnectionClosedError):
            async for _ in subscription:
                pass
    del client, server, ours, theirs
    await turns()
    return weak


@pytest.mark.parametrize("how", ["goodbye", "client closes", "server closes", "client aborts"])
@aio
async def test_a_closed_connection_is_freed_by_reference_counting(how):
    with cyclic_gc_off():
        factory = Watched(PUBLISHERS, reactor=reactor)
        port = await listen(factory)
        try:
            weak = await scenario(port, factory, how, 1)
            assert_freed(weak)
        finally:
            await wait(port.stopListening())


@aio
async def test_many_connections_leave_no_protocol_or_connection_behind():
    with cyclic_gc_off():
        factory = Watched(PUBLISHERS, reactor=reactor)
        port = await listen(factory)
        try:
            await turns()
            before = live_count(RSNetProtocol, RSNetConnection)
            hows = ["goodbye", "client closes", "server closes", "client aborts"]
            for i in range(40):
                await scenario(port, factory, hows[i % 4], i + 1)
            await turns()
            assert live_count(RSNetProtocol, RSNetConnection) == before
        finally:
            await wait(port.stopListening())
