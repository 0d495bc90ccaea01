"""A closed 2015-draft connection is freed by reference counting alone (as
``tests/test_freed.py`` checks for RSocket): with the cyclic collector off, requests of every
interaction in flight, the connection ended by either side, weak references to both
protocols, both sans-IO connections and the requester handle must be dead."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import pytest_twisted
from freed_support import assert_freed, cyclic_gc_off, refs, turns
from twisted.internet import defer, reactor

from rsocket_tx.core.payload import Payload
from rsocket_tx.reactivesocket import ReactiveSocketServerFactory, connect
from rsocket_tx.reactivesocket.client import server_endpoint
from rsocket_tx.responder import Responder

aio = pytest_twisted.ensureDeferred


def wait(d, timeout: float = 10):
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


class Busy(Responder):
    def request_response(self, payload):
        if payload.data == b"hang":
            return defer.Deferred()
        return Payload(payload.data)

    def request_stream(self, payload):
        return (Payload(b"%d" % i) for i in itertools.count())


class Watched(ReactiveSocketServerFactory):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.built: list[Any] = []
        self.gone: defer.Deferred = defer.Deferred()

    def buildProtocol(self, addr):  # noqa: N802 - Twisted's name
        proto = super().buildProtocol(addr)
        self.built.append(refs(server=proto)["server"])
        return proto

    def connection_lost(self, protocol) -> None:
        super().connection_lost(protocol)
        if not self.gone.called:
            self.gone.callback(None)


@pytest.mark.parametrize("how", ["client closes", "server closes", "client aborts"])
@aio
async def test_a_closed_connection_is_freed_by_reference_counting(how):
    with cyclic_gc_off():
        factory = Watched(Busy, reactor=reactor)
        port = await wait(server_endpoint(reactor, "tcp://127.0.0.1:0").listen(factory))
        try:
            rs = await wait(connect(f"rs2015+tcp://127.0.0.1:{port.getHost().port}",
                                    reactor=reactor))
            assert (await wait(rs.request_response(Payload(b"x")))).data == b"x"
            kept: list[Any] = []
            pending = rs.request_response(Payload(b"hang"))
            pending.addErrback(kept.append)
            stream = rs.request_stream(Payload(b"s"), prefetch=4)
            assert (await wait(stream.__anext__())).data == b"0"
            sub = rs.request_subscription(Payload(b"u"), prefetch=2)
            assert (await wait(sub.__anext__())).data == b"0"
            server = factory.built[0]()
            client = server.rsocket  # (the server's requester handle)
            weak = refs(client_handle=rs, client_connection=rs.host.connection,
                        client=rs.host, server=server, server_connection=server.connection)
            del client
            if how == "client closes":
                await wait(rs.close(drain_timeout=0))
            elif how == "server closes":
                await wait(server.close_gracefully(drain_timeout=0))
            else:
                rs.host.transport.abortConnection()
            await wait(factory.gone)
            await wait(pending.addBoth(lambda _: None))
            del rs, server, stream, sub, pending
            await turns()
            assert_freed(weak)
            del kept
        finally:
            await port.stopListening()
