"""``rsocket-tx rs2015``: every client command against a 2015-draft server on loopback, the
exit statuses, and the usage errors."""

from __future__ import annotations

import itertools
import json

import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted_support import CommandResult, run_command

from rsocket_tx.core import errors as E
from rsocket_tx.core.payload import Payload
from rsocket_tx.faces.cli import (
    EXIT_OK,
    EXIT_RSOCKET_ERROR,
    EXIT_USAGE,
    UsageError,
)
from rsocket_tx.faces.main import parse_args
from rsocket_tx.reactivesocket import ReactiveSocketServerFactory
from rsocket_tx.reactivesocket.client import server_endpoint
from rsocket_tx.responder import Responder

aio = pytest_twisted.ensureDeferred
pushed: list[bytes] = []
both_arrived: list[defer.Deferred] = []


def note(data: bytes) -> None:
    pushed.append(data)
    if len(pushed) == 2:
        for d in both_arrived:
            d.callback(None)


class CliResponder(Responder):
    setups: list = []

    def accept_setup(self, setup):
        CliResponder.setups.append(setup)
        return super().accept_setup(setup)

    def request_response(self, payload):
        if payload.data == b"fail":
            raise E.RejectedError("no thanks")
        return Payload(payload.data.upper(), payload.metadata)

    def fire_and_forget(self, payload):
        note(payload.data)

    def metadata_push(self, metadata):
        note(metadata)

    def request_stream(self, payload):
        if payload.data == b"ticks":
            return (Payload(b"t%d" % i) for i in itertools.count())
        return (Payload(b"%d" % i) for i in range(int(payload.data)))


@pytest_twisted.async_yield_fixture
async def url():
    factory = ReactiveSocketServerFactory(CliResponder)
    port = await server_endpoint(reactor, "rs2015+tcp://127.0.0.1:0").listen(factory)
    yield f"rs2015+tcp://127.0.0.1:{port.getHost().port}"
    await factory.close_connections(0)
    await port.stopListening()


async def cli(*argv: str, stdin: bytes = b"") -> CommandResult:
    return await run_command(argv, stdin, timeout=10)


@aio
async def test_request(url):
    assert await cli("rs2015", "request", url, "hello", "-m", "md", "-o", "json") == (
        EXIT_OK, json.dumps({"data": "HELLO", "metadata": "md"}).encode() + b"\n", "")


@aio
async def test_request_error(url):
    status, out, err = await cli("rs2015", "request", url, "fail")
    assert status == EXIT_RSOCKET_ERROR and out == b"" and "no thanks" in err


@aio
async def test_stream_and_sub(url):
    assert await cli("rs2015", "stream", url, "4", "-n", "1") == (EXIT_OK, b"0\n1\n2\n3\n", "")
    assert await cli("rs2015", "sub", url, "ticks", "--take", "3") == (
        EXIT_OK, b"t0\nt1\nt2\n", "")


@aio
async def test_fnf_and_metadata_push(url):
    pushed.clear()
    arrived = defer.Deferred()
    both_arrived[:] = [arrived]
    assert (await cli("rs2015", "fnf", url, "-", stdin=b"from stdin"))[0] == EXIT_OK
    assert (await cli("rs2015", "metadata-push", url, "-m", "meta"))[0] == EXIT_OK
    await arrived.addTimeout(10, reactor)
    assert pushed == [b"from stdin", b"meta"]


@aio
async def test_setup_payload_reaches_the_server(url):
    """``--setup-data`` and ``--setup-metadata`` (the SETUP payload, as RSocket's commands
    take it), in the forms of ``--data``."""
    CliResponder.setups.clear()
    status, out, err = await cli("rs2015", "request", url, "-d", "x", "--setup-data", "sd",
                                 "--setup-metadata", "-", stdin=b"setup meta")
    assert (status, out, err) == (EXIT_OK, b"X\n", "")
    [setup] = CliResponder.setups
    assert setup.payload == Payload(b"sd", b"setup meta")


def test_usage_errors():
    with pytest.raises(UsageError, match="--metadata: required by metadata-push"):
        parse_args(["rs2015", "metadata-push", "tcp://h:1"])
    with pytest.raises(UsageError, match="only one option can read standard input"):
        parse_args(["rs2015", "fnf", "tcp://h:1", "-d", "-", "--setup-data", "-"])
    with pytest.raises(UsageError, match="request-n"):
        parse_args(["rs2015", "stream", "tcp://h:1", "x", "--request-n", "0"])
    with pytest.raises(UsageError, match="responder"):
        parse_args(["rs2015", "serve", "tcp:0", "--responder", "no.such:Thing"])
    args = parse_args(["rs2015", "serve", "tcp:0", "--responder",
                       "rsocket_tx.responder:Responder"])
    assert args.responder is Responder


@aio
async def test_bad_endpoint():
    status, _, err = await cli("rs2015", "request", "rs2015+://x:1", "x")
    assert status == EXIT_USAGE and "missing transport" in err
