"""One server, many transports: a real ``twistd -n rsocket`` with several ``--listen`` options
(TCP, TLS via ssl:, mutual TLS via mtls:, tls://, WebSocket, WebSocket over TLS) serves the same
responder on every one; and ``rsocket-tx serve`` does the same with several endpoints."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
import pytest_twisted
from test_tap import _Process
from tlscerts import make_tls_files

from rsocket_tx import Payload, connect

REPO = Path(__file__).resolve().parent.parent
TWISTD = "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; run()"
CLI = "from rsocket_tx.faces.main import main; main()"
LISTENING = re.compile(rb"listening on 127\.0\.0\.1:(\d+) \(endpoint ([^)\n]+)\)")


class _Server(_Process):
    """A child server; ``ready`` fires with {endpoint spec: port} once ``count`` endpoints
    listen."""

    def __init__(self, count: int) -> None:
        super().__init__(LISTENING)
        self.count = count
        self.ready = self.matched

    def _received(self, data):
        self.output += data
        found = {m.group(2).decode(): int(m.group(1)) for m in LISTENING.finditer(self.output)}
        if len(found) >= self.count and not self.matched.called:
            self.matched.callback(found)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


def _listen_specs(certs) -> list[str]:
    key, cert, ca = certs.server_key, certs.server_cert, certs.ca
    return [
        "tcp:0:interface=127.0.0.1",
        f"ssl:0:interface=127.0.0.1:privateKey={key}:certKey={cert}",
        f"mtls:0:interface=127.0.0.1:privateKey={key}:certKey={cert}:caCerts={ca}",
        f"tls://127.0.0.1:0?privateKey={key}&certKey={cert}",
        "ws:0:interface=127.0.0.1:path=/rsocket",
        f"wss://127.0.0.1:0/rsocket?privateKey={key}&certKey={cert}",
    ]


def _client_for(spec: str, port: int, certs) -> str:
    client_auth = f"&certificate={certs.client_cert}&privateKey={certs.client_key}"
    if spec.startswith("tcp:"):
        return f"tcp://127.0.0.1:{port}"
    if spec.startswith("ssl:") or spec.startswith("tls://"):
        return f"tls://localhost:{port}?trustRoots={certs.ca}"
    if spec.startswith("mtls:"):
        return f"tls://localhost:{port}?trustRoots={certs.ca}{client_auth}"
    if spec.startswith("ws:"):
        return f"ws:host=127.0.0.1:port={port}:path=/rsocket"
    if spec.startswith("wss://"):
        return f"wss://localhost:{port}/rsocket?trustRoots={certs.ca}"
    raise AssertionError(spec)


async def _serve_and_check(argv: list[str], specs: list[str], certs) -> bytes:
    from twisted.internet import reactor

    process = _Server(len(specs))
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    reactor.spawnProcess(process, sys.executable, argv, env=env, path=str(REPO))
    try:
        ports = await process.ready.addTimeout(60, reactor)
        assert sorted(ports) == sorted(specs)
        for spec, port in ports.items():
            rsocket = await connect(_client_for(spec, port, certs), reactor=reactor)
            try:
                data = spec.split(":")[0].encode()
                response = await rsocket.request_response(Payload(data, b"m"))
                assert response == Payload(data, b"m"), spec
                items = await rsocket.request_stream(Payload(b"3")).collect()
                assert [p.data for p in items] == [b"0", b"1", b"2"], spec
            finally:
                await rsocket.close()
    finally:
        await process.stop()
    return process.output


@pytest_twisted.ensureDeferred
async def test_twistd_serves_one_responder_on_every_transport(certs):
    specs = _listen_specs(certs)
    argv = [sys.executable, "-c", TWISTD, "-n", "--pidfile=", "rsocket"]
    for spec in specs:
        argv += ["--listen", spec]
    output = await _serve_and_check(argv, specs, certs)
    assert b"Traceback" not in output


@pytest_twisted.ensureDeferred
async def test_cli_serve_takes_several_endpoints(certs):
    specs = _listen_specs(certs)[::2]  # tcp, mtls, ws
    argv = [sys.executable, "-c", CLI, "serve", *specs]
    output = await _serve_and_check(argv, specs, certs)
    assert b"Traceback" not in output
