"""The 2015 draft beside RSocket 1.0 on one port (rsocket_tx.transports.oneport): a 2015
client is told apart by its SETUP (TCP) or its WebSocket subprotocol (``rs2015+ws://``
offers ``reactivesocket-2015``), and an RSocket 1.0 client on the same port still gets RSocket."""

from __future__ import annotations

import pytest_twisted
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ServerEndpoint

from rsocket_tx import connect as connect_rsocket
from rsocket_tx.core.payload import Payload
from rsocket_tx.protocol import RSocketServerFactory
from rsocket_tx.reactivesocket import ReactiveSocketServerFactory, connect
from rsocket_tx.responder import Responder
from rsocket_tx.transports.oneport import OnePortFactory

aio = pytest_twisted.ensureDeferred


def wait(d, timeout: float = 10):
    return d.addTimeout(timeout, reactor)


class Which(Responder):
    def __init__(self, name: bytes) -> None:
        self.name = name

    def request_response(self, payload):
        return Payload(self.name + b":" + payload.data)


@pytest_twisted.async_yield_fixture
async def port():
    factory = OnePortFactory({
        "rsocket": RSocketServerFactory(lambda: Which(b"1.0"), reactor=reactor),
        "rs2015": ReactiveSocketServerFactory(lambda: Which(b"2015"), reactor=reactor),
    }, reactor=reactor)
    listening = await wait(TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1")
                           .listen(factory))
    yield listening.getHost().port
    for served in factory.served:
        await wait(defer.maybeDeferred(served.factory.close_connections, 0))
    await listening.stopListening()


@aio
async def test_tcp(port):
    rs = await wait(connect(f"rs2015+tcp://127.0.0.1:{port}"))
    assert await wait(rs.request_response(Payload(b"x"))) == Payload(b"2015:x")
    other = await wait(connect_rsocket(f"tcp://127.0.0.1:{port}"))
    assert await wait(other.request_response(Payload(b"y"))) == Payload(b"1.0:y")
    await wait(rs.close())
    await wait(other.close())


@aio
async def test_websocket_subprotocol(port):
    rs = await wait(connect(f"rs2015+ws://127.0.0.1:{port}/any"))
    assert await wait(rs.request_response(Payload(b"x"))) == Payload(b"2015:x")
    await wait(rs.close())
