"""The Reactive Streams network protocol over every transport, on real loopback ports: TCP
(Twisted endpoint strings and ``rsnet+tcp://``), TLS (``rsnet+tls://``, the server's
certificate verified) and WebSocket (``rsnet+ws://``, ``rsnet+wss://``: the byte stream in
binary messages, subprotocol ``WEBSOCKET_SUBPROTOCOL``); and the endpoint forms."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.endpoints import HostnameEndpoint, TCP4ServerEndpoint

from rsocket_tx.rsnet import codec
from rsocket_tx.rsnet.client import connect
from rsocket_tx.rsnet.endpoints import (
    RSNetWebSocketServerEndpoint,
    client_endpoint,
    server_endpoint,
    transport_spec,
)
from rsocket_tx.rsnet.protocol import WEBSOCKET_SUBPROTOCOL
from rsocket_tx.transports.oneport import ByteStreamWebSocketClientEndpoint
from rsocket_tx.transports.tls import TLSError
from rsocket_tx.transports.websocket import WebSocketHandshakeError

from .twisted_helpers import wait

aio = pytest_twisted.ensureDeferred


PUBLISHERS = {"count/5": lambda r: (b"%d" % i for i in range(1, 6)),
              "big": lambda r: [bytes(range(256)) * 1000]}


async def both_ways(loop, port, where: str) -> None:
    """Subscribe to the server, and have the server subscribe to the client, over ``where``."""
    client = await loop.connect(port, {"up": lambda r: [b"u", b"p"]}, endpoint=where)
    assert await wait(client.subscribe("count/5", window=2).collect()) == \
        [b"1", b"2", b"3", b"4", b"5"]
    assert await wait(client.subscribe("big").collect()) == [bytes(range(256)) * 1000]
    (server_side,) = [p for p in port.factory.protocols if p.is_open]
    assert await wait(server_side.subscribe("up").collect()) == [b"u", b"p"]
    await wait(client.goodbye("done"))
    assert client.transport_gone and not client.is_open


@aio
async def test_tcp_endpoint_strings_and_uris(loop):
    port = await loop.serve(PUBLISHERS, endpoint="rsnet+tcp://127.0.0.1:0")
    number = port.getHost().port
    for where in (f"tcp:host=127.0.0.1:port={number}", f"tcp://127.0.0.1:{number}",
                  f"RSNET+TCP://127.0.0.1:{number}"):
        await both_ways(loop, port, where)


@aio
async def test_tls_verifies_the_server(loop, certs):
    port = await loop.serve(PUBLISHERS, endpoint=f"rsnet+tls://127.0.0.1:0?privateKey="
                            f"{certs.server_key}&certKey={certs.server_cert}")
    number = port.getHost().port
    await both_ways(loop, port, f"rsnet+tls://localhost:{number}?trustRoots={certs.ca}")
    with pytest.raises(TLSError):
        await wait(connect(reactor, f"rsnet+tls://localhost:{number}?trustRoots="
                           f"{certs.other_ca}"))


@aio
async def test_websocket_carries_the_byte_stream(loop):
    port = await loop.serve(PUBLISHERS, endpoint="rsnet+ws://127.0.0.1:0/rsnet")
    number = port.getHost().port
    await both_ways(loop, port, f"rsnet+ws://127.0.0.1:{number}/rsnet")
    await both_ways(loop, port, f"ws://localhost:{number}/any/path")
    # the same port takes plain RS-network connections too
    await both_ways(loop, port, f"rsnet+tcp://127.0.0.1:{number}")


@aio
async def test_websocket_carries_elements_larger_than_a_message(loop):
    # a 1 MiB element (the default max_element_size) is more than one WebSocket message of
    # the default limit (1 MiB) once framed: the byte stream is split across messages, both
    # ways
    element = bytes(range(256)) * 4096
    port = await loop.serve({"max": lambda r: [element]}, endpoint="rsnet+ws://127.0.0.1:0/")
    client = await loop.connect(port, {"max": lambda r: [element]},
                                endpoint=f"rsnet+ws://127.0.0.1:{port.getHost().port}/")
    assert await wait(client.subscribe("max").collect()) == [element]
    (server_side,) = [p for p in port.factory.protocols if p.is_open]
    assert await wait(server_side.subscribe("max").collect()) == [element]
    await wait(client.goodbye("done"))


@aio
async def test_secure_websocket(loop, certs):
    port = await loop.serve(PUBLISHERS, endpoint=f"rsnet+wss://127.0.0.1:0/rsnet?privateKey="
                            f"{certs.server_key}&certKey={certs.server_cert}")
    number = port.getHost().port
    await both_ways(loop, port, f"rsnet+wss://localhost:{number}/rsnet?trustRoots={certs.ca}")
    with pytest.raises((TLSError, WebSocketHandshakeError)):
        await wait(connect(reactor, f"rsnet+wss://localhost:{number}/rsnet?trustRoots="
                           f"{certs.other_ca}"))


@aio
async def test_a_websocket_client_offering_another_subprotocol_is_refused(loop):
    port = await loop.serve(PUBLISHERS, endpoint="rsnet+ws://127.0.0.1:0/")
    number = port.getHost().port
    other = ByteStreamWebSocketClientEndpoint(
        reactor, HostnameEndpoint(reactor, "127.0.0.1", number),
        f"ws://127.0.0.1:{number}/", "not-rs-network")
    with pytest.raises(WebSocketHandshakeError):
        await wait(connect(reactor, other))


def test_the_websocket_subprotocol_is_the_codecs():
    assert WEBSOCKET_SUBPROTOCOL is codec.WEBSOCKET_SUBPROTOCOL
    endpoint = client_endpoint(reactor, "rsnet+ws://h:1/p")
    assert isinstance(endpoint, ByteStreamWebSocketClientEndpoint)
    assert endpoint.subprotocol == WEBSOCKET_SUBPROTOCOL and endpoint.url == "ws://h:1/p"


@pytest.mark.parametrize(("spec", "expected"), [
    ("rsnet+tcp://h:1", "tcp://h:1"),
    ("RSnet+TLS://h:1?trustRoots=x", "TLS://h:1?trustRoots=x"),
    ("tcp:host=h:port=1", "tcp:host=h:port=1"),
    ("  rsnet+ws://h:1/p ", "ws://h:1/p"),
])
def test_transport_spec(spec, expected):
    assert transport_spec(spec) == expected


def test_server_endpoint_forms(certs):
    assert isinstance(server_endpoint(reactor, "rsnet+tcp://127.0.0.1:0"), TCP4ServerEndpoint)
    ws = server_endpoint(reactor, "rsnet+ws://:8080/x")
    assert isinstance(ws, RSNetWebSocketServerEndpoint)
    existing = TCP4ServerEndpoint(reactor, 0)
    assert server_endpoint(reactor, existing) is existing


@pytest.mark.parametrize(("spec", "message"), [
    ("rsnet+://h:1", "missing transport"),
    ("rsnet+tcp://h", "missing port"),
    ("rsnet+udp://h:1", "unsupported URI scheme 'udp'"),
    ("ws:host=h:port=1", "write a URI (rsnet+ws://HOST:PORT/PATH)"),
])
def test_bad_endpoints(spec, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")
                       .replace("+", r"\+")):
        client_endpoint(reactor, spec)
