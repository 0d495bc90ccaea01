"""The routed, authenticated example service (rsocket_tx.apps.orders) driven by the CLI's
--route / --auth-* / --data-mime options: in-process, and through ``twistd rsocket --responder``
with ``python -m rsocket_tx`` as a separate process, as a user would run them."""

from __future__ import annotations

import json
import os
import re
import sys

import pytest
import pytest_twisted
from test_cli import REPO, _reactor, _serve, run_cli
from test_tap import TWISTD, _Process
from twisted.internet.defer import Deferred
from twisted.internet.protocol import ProcessProtocol

from rsocket_tx.apps.orders import OrderBook, OrderService
from rsocket_tx.extensions import COMPOSITE_METADATA, BearerAuth, SimpleAuth
from rsocket_tx.faces.cli import EXIT_OK, EXIT_RSOCKET_ERROR, EXIT_USAGE
from rsocket_tx.faces.main import parse_args

aio = pytest_twisted.ensureDeferred
JSON = "application/json"
ALICE = ["--auth-simple", "alice:secret", "--data-mime", JSON]


@pytest_twisted.async_yield_fixture
async def orders(monkeypatch):
    monkeypatch.setattr(OrderService, "book", OrderBook())
    port, number = await _serve(OrderService)
    yield f"tcp://127.0.0.1:{number}"
    await port.stopListening()


def test_extension_options_parse():
    args = parse_args(["request", "tcp://h:1", "--route", "orders.1", *ALICE])
    assert args.route == "orders.1"
    assert args.auth == SimpleAuth("alice", "secret")
    # --data-mime alone is the SETUP's data MIME type, so no per-stream MIME entry is needed
    assert (args.setup_data_mime, args.stream_data_mime) == (JSON, None)
    assert args.metadata_mime == COMPOSITE_METADATA
    args = parse_args(["stream", "tcp://h:1", "--auth-bearer", "t", "--setup-auth",
                       "--setup-data-mime", JSON, "--data-mime", "application/cbor"])
    assert args.auth == BearerAuth("t") and args.setup_auth
    assert (args.setup_data_mime, args.stream_data_mime) == (JSON, "application/cbor")
    # nothing extension-related: the plain defaults of the TCP issue
    args = parse_args(["request", "tcp://h:1"])
    assert args.metadata_mime == "application/octet-stream"


@pytest.mark.parametrize("argv, message", [
    (["--auth-simple", "alice"], "--auth-simple: expected USER:PASSWORD"),
    (["--auth-simple", "a:b", "--auth-bearer", "t"], "give only one"),
    (["--auth-bearer", ""], "the token is empty"),
    (["--setup-auth"], "--setup-auth: give the credentials"),
    (["--route", "x", "--metadata-mime", "application/json"], "composite"),
    (["--route", "x", "-m", "raw", "--metadata-mime", "text/plain"], "--metadata with --route"),
    (["--route", "x" * 256], "255"),
])
@aio
async def test_extension_usage_errors(argv, message):
    result = await run_cli(["request", "tcp://127.0.0.1:1", *argv])
    assert result.status == EXIT_USAGE, result.stderr
    assert message in result.stderr


@aio
async def test_cli_calls_every_route(orders):
    created = await run_cli(["request", orders, "--route", "orders.create", *ALICE,
                             "-d", '{"item": "tea", "qty": 2}'])
    assert created.status == EXIT_OK, created.stderr
    order = json.loads(created.stdout)
    assert order["item"] == "tea" and order["qty"] == 2 and order["owner"] == "alice"

    got = await run_cli(["request", orders, "--route", f"orders.{order['id']}", *ALICE])
    assert json.loads(got.stdout) == order

    bulk = await run_cli(["channel", orders, "--route", "orders.bulk", *ALICE],
                         stdin=b'{"item": "jam", "qty": 1}\n{"item": "bun", "qty": 3}\n')
    assert bulk.status == EXIT_OK, bulk.stderr
    assert [json.loads(line)["item"] for line in bulk.lines] == ["jam", "bun"]

    # bearer credentials, sent once in SETUP
    feed = await run_cli(["stream", orders, "--route", "orders.feed", "--auth-bearer",
                          "demo-token", "--setup-auth", "--data-mime", JSON])
    assert feed.status == EXIT_OK, feed.stderr
    assert [json.loads(line)["item"] for line in feed.lines] == ["tea", "jam", "bun"]

    audit = await run_cli(["fnf", orders, "--route", "orders.audit", *ALICE, "-d", '"hello"'])
    assert audit.status == EXIT_OK, audit.stderr


@aio
async def test_cli_sees_rejections(orders):
    wrong = await run_cli(["request", orders, "--route", "orders.1", "--auth-simple",
                           "alice:nope", "--data-mime", JSON])
    assert wrong.status == EXIT_RSOCKET_ERROR
    assert "REJECTED" in wrong.stderr and "invalid simple credentials" in wrong.stderr

    anonymous = await run_cli(["request", orders, "--route", "orders.1", "--data-mime", JSON,
                               "--metadata-mime", COMPOSITE_METADATA])
    assert anonymous.status == EXIT_RSOCKET_ERROR
    assert "authentication required" in anonymous.stderr

    setup = await run_cli(["request", orders, "--route", "orders.1", "--auth-bearer", "bad",
                           "--setup-auth", "--data-mime", JSON])
    assert setup.status == EXIT_RSOCKET_ERROR
    assert "REJECTED_SETUP" in setup.stderr

    unknown = await run_cli(["request", orders, "--route", "payments.7", *ALICE])
    assert unknown.status == EXIT_RSOCKET_ERROR
    assert "no route 'payments.7' for request-response" in unknown.stderr

    invalid = await run_cli(["request", orders, "--route", "orders.create", *ALICE,
                             "-d", '{"item": "tea"}'])
    assert invalid.status == EXIT_RSOCKET_ERROR
    assert "INVALID" in invalid.stderr and "qty" in invalid.stderr


@aio
async def test_cli_per_stream_cbor_request_on_a_json_connection(orders, tmp_path):
    import cbor2

    path = tmp_path / "order.cbor"
    path.write_bytes(cbor2.dumps({"item": "oat", "qty": 5}))
    result = await run_cli(["request", orders, "--route", "orders.create", "--auth-simple",
                            "bob:hunter2", "--setup-data-mime", JSON, "--data-mime",
                            "application/cbor", "-d", f"@{path}"])
    assert result.status == EXIT_OK, result.stderr
    # no accept types were sent: the response is in the request's MIME type, CBOR
    assert cbor2.loads(result.stdout[:-1]) == {"id": "1", "item": "oat", "qty": 5,
                                               "owner": "bob"}


class _Client(ProcessProtocol):
    def __init__(self) -> None:
        self.out = b""
        self.err = b""
        self.ended: Deferred = Deferred()

    def outReceived(self, data):
        self.out += data

    def errReceived(self, data):
        self.err += data

    def processEnded(self, reason):
        self.ended.callback(reason.value.exitCode)


async def _cli_process(reactor, *argv: str) -> tuple[int, bytes, bytes]:
    client = _Client()
    reactor.spawnProcess(client, sys.executable, [sys.executable, "-m", "rsocket_tx", *argv],
                         env=dict(os.environ), path=str(REPO))
    code = await client.ended.addTimeout(60, reactor)
    return code, client.out, client.err


@aio
async def test_twistd_serves_the_routed_service_to_the_cli_process():
    from twisted.internet import reactor

    process = _Process(re.compile(rb"listening on 127\.0\.0\.1:(\d+)"))
    argv = [sys.executable, "-c", TWISTD, "-n", "--pidfile=", "rsocket", "--listen",
            "tcp:0:interface=127.0.0.1", "--responder",
            "rsocket_tx.apps.orders:OrderService"]
    reactor.spawnProcess(process, sys.executable, argv, env=dict(os.environ), path=str(REPO))
    try:
        match = await process.matched.addTimeout(60, reactor)
        uri = f"tcp://127.0.0.1:{int(match.group(1))}"
        code, out, err = await _cli_process(reactor, "request", uri, "--route",
                                            "orders.create", *ALICE,
                                            "-d", '{"item": "pen", "qty": 4}')
        assert code == EXIT_OK, err
        assert json.loads(out) == {"id": "1", "item": "pen", "qty": 4, "owner": "alice"}
        code, out, err = await _cli_process(reactor, "request", uri, "--route", "orders.1",
                                            "--auth-bearer", "demo-token", "--data-mime", JSON)
        assert code == EXIT_OK, err
        assert json.loads(out)["item"] == "pen"
    finally:
        await process.stop()


@aio
async def test_cli_resume_option(orders):
    # the orders server does not allow resume: a resumable SETUP is refused, so --resume
    # really asked for it
    refused = await run_cli(["request", orders, "--resume", "--route", "orders.feed", *ALICE])
    assert refused.status == EXIT_RSOCKET_ERROR
    assert "REJECTED_SETUP" in refused.stderr
    port, number = await _serve_resumable()
    try:
        result = await run_cli(["stream", f"tcp://127.0.0.1:{number}", "--resume", "-d", "3"])
    finally:
        await port.stopListening()
    assert (result.status, result.lines) == (EXIT_OK, [b"0", b"1", b"2"])


async def _serve_resumable():
    from rsocket_tx import serve
    from rsocket_tx.apps.demo import DemoResponder

    port = await serve("tcp:0:interface=127.0.0.1", DemoResponder, resume=True,
                       reactor=_reactor())
    return port, port.getHost().port
