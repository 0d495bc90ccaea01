"""The Jini ERI mux over the transports and address forms rsocket_tx accepts: endpoint
strings and URIs, plain TCP and TLS (certificates made at test time), and the Twisted producer
kinds a request body can come from."""

from __future__ import annotations

import io

import pytest
import pytest_twisted
from tlscerts import make_tls_files
from twisted.protocols.basic import FileSender

from rsocket_tx.jini import EchoDispatcher

from .twisted_helpers import pattern, wait

aio = pytest_twisted.ensureDeferred


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("jini-tls"))


@aio
async def test_tcp_uri(loop):
    port = await loop.serve(EchoDispatcher, endpoint="tcp://127.0.0.1:0")
    client = loop.client(None, endpoint=f"tcp://127.0.0.1:{port.getHost().port}")
    assert await wait(client.request(b"uri")) == b"uri"


@pytest.mark.parametrize("form", ["uri", "string"])
@aio
async def test_tls(loop, certs, form):
    if form == "uri":
        spec = f"tls://127.0.0.1:0?privateKey={certs.server_key}&certKey={certs.server_cert}"
    else:
        spec = (f"ssl:0:interface=127.0.0.1:privateKey={certs.server_key}:"
                f"certKey={certs.server_cert}")
    port = await loop.serve(EchoDispatcher, endpoint=spec, initial_ration=1_024)
    number = port.getHost().port
    client_spec = (f"tls://127.0.0.1:{number}?trustRoots={certs.ca}" if form == "uri" else
                   f"tls:host=127.0.0.1:port={number}:trustRoots={certs.ca_dir}")
    client = loop.client(None, endpoint=client_spec, initial_ration=1_024)
    body = pattern(300_000)
    assert await wait(client.request(body)) == body
    assert await wait(client.request(b"")) == b""


@aio
async def test_jini_tcp_uri(loop):
    """``serve`` and ``JiniMuxClient`` take the ``jini+tcp://`` URIs docs/jini.rst lists."""
    port = await loop.serve(EchoDispatcher, endpoint="jini+tcp://127.0.0.1:0")
    client = loop.client(None, endpoint=f"jini+tcp://127.0.0.1:{port.getHost().port}")
    assert await wait(client.request(b"jini uri")) == b"jini uri"
    everywhere = await loop.serve(EchoDispatcher, endpoint="jini+tcp://:0")  # every interface
    client = loop.client(None, endpoint=f"JINI+TCP://localhost:{everywhere.getHost().port}")
    assert await wait(client.request(b"any")) == b"any"


@aio
async def test_jini_tls_uri(loop, certs):
    port = await loop.serve(EchoDispatcher, endpoint=f"jini+tls://127.0.0.1:0?privateKey="
                            f"{certs.server_key}&certKey={certs.server_cert}")
    number = port.getHost().port
    client = loop.client(None, endpoint=f"jini+tls://localhost:{number}?trustRoots={certs.ca}")
    body = pattern(70_000)
    assert await wait(client.request(body)) == body
    untrusted = loop.client(None, endpoint=f"jini+tls://localhost:{number}"
                            f"?trustRoots={certs.other_ca}")
    with pytest.raises(Exception):  # noqa: B017 - the TLS error type depends on the side
        await wait(untrusted.request(b"never"))


@pytest.mark.parametrize(("spec", "message"), [
    ("jini+ws://localhost:9000/x", "not over WebSocket"),
    ("jini+://localhost:9000", "missing transport"),
    ("jini+udp://localhost:9000", "unsupported URI scheme 'udp'"),
])
def test_bad_jini_uris_raise_at_the_call(spec, message):
    from twisted.internet import reactor

    from rsocket_tx.jini import JiniMuxClient, serve

    with pytest.raises(ValueError, match=message):
        JiniMuxClient(reactor, spec)
    with pytest.raises(ValueError, match=message):
        serve(reactor, spec.replace("localhost", ""), EchoDispatcher)


@aio
async def test_tls_wrong_ca_fails_the_request(loop, certs):
    spec = f"tls://127.0.0.1:0?privateKey={certs.server_key}&certKey={certs.server_cert}"
    port = await loop.serve(EchoDispatcher, endpoint=spec)
    client = loop.client(None, endpoint=(f"tls://127.0.0.1:{port.getHost().port}"
                                         f"?trustRoots={certs.other_ca}"))
    with pytest.raises(Exception):  # noqa: B017 - the TLS error type depends on the side
        await wait(client.request(b"never"))


@aio
async def test_pull_producer_request_body(loop):
    """A non-streaming producer (Twisted's FileSender) feeds a request body through a small
    ration: it is asked for more each time what it wrote went out."""
    port = await loop.serve(EchoDispatcher, initial_ration=1_024)
    client = loop.client(port)
    outbound = await wait(client.new_request())
    body = pattern(200_000)
    sent = FileSender().beginFileTransfer(io.BytesIO(body), outbound)
    collected = outbound.read_all()
    await wait(sent)
    outbound.finish()
    assert await wait(collected) == body
