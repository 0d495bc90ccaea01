"""A plain WebSocket server (rsocket_tx.transports.websocket, ``ws:`` listening) serving the 2015
draft accepts the draft's subprotocol, which an ``rs2015+ws://`` client offers
(``reactivesocket-2015``), and no subprotocol; it refuses any other, RSocket 1.0's included.
An RSocket 1.0 server still accepts ``rsocket`` and refuses the draft's."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted_support import wait

from rsocket_tx import connect as connect_rsocket
from rsocket_tx import serve
from rsocket_tx.core.payload import Payload
from rsocket_tx.protocol import RSocketServerFactory
from rsocket_tx.reactivesocket import (
    WEBSOCKET_SUBPROTOCOL,
    ReactiveSocketServerFactory,
    connect,
)
from rsocket_tx.reactivesocket.client import client_endpoint as draft_client_endpoint
from rsocket_tx.reactivesocket.client import server_endpoint
from rsocket_tx.responder import Responder
from rsocket_tx.transports.endpoints import client_endpoint
from rsocket_tx.transports.websocket import WebSocketHandshakeError

aio = pytest_twisted.ensureDeferred


class Upper(Responder):
    def request_response(self, payload):
        return Payload(payload.data.upper())


@pytest_twisted.async_yield_fixture
async def draft_port():
    """A ``ws:`` server of the draft only (no one-port server): its port number."""
    factory = ReactiveSocketServerFactory(Upper, reactor=reactor)
    port = await wait(server_endpoint(reactor, "ws:0:interface=127.0.0.1:path=/rs")
                      .listen(factory))
    yield port.getHost().port
    await wait(defer.maybeDeferred(factory.close_connections, 0))
    await wait(defer.maybeDeferred(port.stopListening))


def offering(port: int, subprotocols: list[str]):
    endpoint = client_endpoint(reactor, f"ws://127.0.0.1:{port}/rs")
    endpoint.subprotocols = tuple(subprotocols)
    return endpoint


def test_each_factory_names_its_subprotocol():
    assert RSocketServerFactory.websocket_subprotocol == "rsocket"
    assert ReactiveSocketServerFactory.websocket_subprotocol == WEBSOCKET_SUBPROTOCOL \
        == "reactivesocket-2015"


def test_only_rs2015_ws_offers_the_draft_subprotocol():
    assert client_endpoint(reactor, "ws://127.0.0.1:1/rs").subprotocols == ()
    assert draft_client_endpoint(reactor, "rs2015+ws://127.0.0.1:1/rs").subprotocols == (
        WEBSOCKET_SUBPROTOCOL,)


@aio
@pytest.mark.parametrize("client", [
    "rs2015+ws",  # offers reactivesocket-2015
    "ws",  # offers none
    "among others",  # offers mqtt, then reactivesocket-2015
])
async def test_the_draft_subprotocol_or_none_is_served(draft_port, client):
    where = {"rs2015+ws": f"rs2015+ws://127.0.0.1:{draft_port}/rs",
             "ws": f"ws://127.0.0.1:{draft_port}/rs",
             "among others": offering(draft_port, ["mqtt", WEBSOCKET_SUBPROTOCOL])}[client]
    rs = await wait(connect(where, reactor=reactor))
    try:
        assert await wait(rs.request_response(Payload(b"abc"))) == Payload(b"ABC")
    finally:
        await wait(rs.close())


@aio
@pytest.mark.parametrize("offered", [["rsocket"], ["mqtt", "jini-mux"]])
async def test_a_wrong_subprotocol_is_refused(draft_port, offered):
    with pytest.raises(WebSocketHandshakeError, match="unsupported WebSocket subprotocol"):
        await wait(connect(offering(draft_port, offered), reactor=reactor))


@aio
async def test_an_rsocket_server_refuses_the_draft_subprotocol():
    port = await wait(serve("ws:0:interface=127.0.0.1:path=/rs", Upper, reactor=reactor))
    number = port.getHost().port
    try:
        with pytest.raises(WebSocketHandshakeError, match="speaks 'rsocket'"):
            await wait(connect(f"rs2015+ws://127.0.0.1:{number}/rs", reactor=reactor))
        rsocket = await wait(connect_rsocket(offering(number, ["rsocket"]), reactor=reactor))
        try:
            assert (await wait(rsocket.request_response(Payload(b"z")))).data == b"Z"
        finally:
            await rsocket.close()
    finally:
        await wait(defer.maybeDeferred(port.factory.close_connections, 0))
        await wait(defer.maybeDeferred(port.stopListening))
