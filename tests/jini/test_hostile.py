"""A raw peer against a real listening Jini ERI mux server: the handshake timeout and a Ping
before any session. (Each violation of the seed's rules has its test in
``test_hostile_server.py``.)"""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import defer, protocol, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol

from rsocket_tx.jini import EchoDispatcher
from rsocket_tx.jini import codec as C

from .twisted_helpers import wait

aio = pytest_twisted.ensureDeferred

HEADER = C.ClientConnectionHeader(0x80).encode()


class Raw(protocol.Protocol):
    """Records what the server sends; ``closed`` fires when the connection is gone."""

    def __init__(self) -> None:
        self.received = b""
        self.closed: defer.Deferred = defer.Deferred()

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.received += data

    def connectionLost(self, reason=None) -> None:  # noqa: N802
        self.closed.callback(None)


@pytest.fixture
def server(loop):
    async def start():
        port = await loop.serve(EchoDispatcher, initial_ration=32_768)
        return port, loop.client(port)
    return start


async def raw_connection(port) -> Raw:
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port)
    return await wait(connectProtocol(endpoint, Raw()))


@aio
async def test_a_peer_that_sends_nothing_is_dropped_after_the_handshake_timeout(loop):
    port = await loop.serve(EchoDispatcher, handshake_timeout=200)
    raw = await raw_connection(port)
    await wait(raw.closed, timeout=30)
    assert raw.received == b""


@aio
async def test_ping_from_a_raw_peer_is_answered(server):
    port, _ = await server()
    raw = await raw_connection(port)
    answered: defer.Deferred = defer.Deferred()
    original = raw.dataReceived

    def data_received(data: bytes) -> None:
        original(data)
        if len(raw.received) >= 12 and not answered.called:
            answered.callback(None)

    raw.dataReceived = data_received
    raw.transport.write(HEADER + C.Ping(0x1234).encode())
    await wait(answered)
    assert raw.received == C.ServerConnectionHeader(0x80).encode() + C.PingAck(0x1234).encode()
    raw.transport.loseConnection()
    await wait(raw.closed)
