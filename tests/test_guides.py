"""The guides' examples (docs/guides.rst, examples/guides/) work as the guides say: a server
embedded in a ``.tac`` application with ``strports``, loaded the way ``twistd -y`` loads it;
and rsocket_tx under the asyncio reactor next to asyncio code."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest_twisted
from twisted.application import service

from rsocket_tx import ConnectionCloseError, Payload, connect

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "guides"


@pytest_twisted.ensureDeferred
async def test_the_tac_application_serves_and_closes_connections_on_stop(monkeypatch):
    # a short directory: a Unix socket path is limited to about 100 bytes
    directory = tempfile.TemporaryDirectory(prefix="rsocket-tx-")
    socket = Path(directory.name) / "hello.sock"
    monkeypatch.setenv("HELLO_LISTEN", f"unix:{socket}")
    # what twistd -y does: execute the .tac, take its `application`
    application = service.loadApplication(str(EXAMPLES / "hello.tac"), "python")
    top = service.IService(application)
    assert top.name == "hello"
    top.startService()
    try:
        rsocket = await connect(f"unix:path={socket}")
        response = await rsocket.request_response(Payload(b"tac"))
        assert response == Payload(b"hello tac")
    finally:
        await top.stopService()  # what twistd does at shutdown
    assert not rsocket.is_open
    # the server said goodbye: ERROR[CONNECTION_CLOSE], not a dropped transport
    assert isinstance(rsocket.close_reason, ConnectionCloseError)
    assert not socket.exists()  # the port is closed
    directory.cleanup()


def test_rsocket_tx_runs_on_the_asyncio_reactor_beside_asyncio_code():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run([sys.executable, str(EXAMPLES / "asyncio_reactor.py")],
                            capture_output=True, text=True, timeout=120, env=env,
                            cwd=EXAMPLES)
    assert result.returncode == 0, result.stdout + result.stderr
    # the handler awaited asyncio code (lookup), the client was an asyncio coroutine, and an
    # asyncio task ran to its end meanwhile, all on the asyncio reactor
    assert result.stdout.splitlines() == [
        "reactor: AsyncioSelectorReactor",
        "answers: HELLO ASYNCIO",
        "ticks: [0, 1, 2]",
    ], result.stdout + result.stderr
