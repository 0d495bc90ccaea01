"""``rsocket-tx jini`` (rsocket_tx.jini.cli): argument checks, and requests against real Jini
ERI mux servers on loopback (TCP and TLS), in process and as a child process."""

from __future__ import annotations

import json

import pytest
import pytest_twisted
from tlscerts import make_tls_files
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted_support import run_command, wait

from rsocket_tx.faces.cli import format_data
from rsocket_tx.faces.main import parse_args
from rsocket_tx.jini import tap
from rsocket_tx.jini.cli import format_response
from rsocket_tx.jini.config import JiniMuxConfig
from rsocket_tx.jini.server import Dispatcher, serve

from .test_tap import spawn

aio = pytest_twisted.ensureDeferred
CLI = "from rsocket_tx.faces.main import main; main()"


# -- arguments -----------------------------------------------------------------------------------


def test_request_defaults():
    args = parse_args(["jini", "request", "jini+tcp://localhost:9000"])
    assert (args.command, args.jini_command) == ("jini", "request")
    assert args.data is None and args.data_file is None
    assert (args.repeat, args.concurrency, args.timeout, args.output) == (1, 1, None, "text")
    assert args.config == JiniMuxConfig()


def test_request_every_option():
    args = parse_args(["jini", "request", "tcp:host=h:port=1", "body", "--ration", "512",
                       "--fragment-size", "100", "--max-sessions", "4", "-n", "10", "-c", "3",
                       "--timeout", "2.5", "-o", "raw"])
    assert args.data == "body"
    assert (args.repeat, args.concurrency, args.timeout, args.output) == (10, 3, 2.5, "raw")
    assert args.config == JiniMuxConfig(initial_ration=512, fragment_size=100, max_sessions=4)


@pytest.mark.parametrize(("argv", "message"), [
    (["request", "ep", "text", "--data-file", "f"], "give the data once: as DATA, with"),
    (["request", "ep", "--repeat", "0"], "--repeat: must be at least 1"),
    (["request", "ep", "--concurrency", "many"], "--concurrency: expected an integer"),
    (["request", "ep", "--ration", "100"], "--initial-ration: must be a multiple of 256"),
    (["request", "ep", "--fragment-size", "0"], "--fragment-size: must be an integer in"),
    (["request", "ep", "--timeout", "-1"], "--timeout: must be a positive number"),
    (["request", "ep", "--timeout", "soon"], "--timeout: expected a number of seconds"),
    (["request", "ep", "--drain-timeout", "5"], "unrecognized arguments: --drain-timeout"),
    (["request"], "the following arguments are required: ENDPOINT"),
    (["ping", "ep", "--count", "0"], "--count: must be at least 1"),
    (["pong", "ep"], "invalid choice: 'pong'"),
    ([], "the following arguments are required: JINI_COMMAND"),
])
@aio
async def test_usage_errors(argv, message):
    result = await run(["jini", *argv])
    assert result.status == 2
    assert message in result.err
    assert result.err.startswith("usage: rsocket-tx ")


def test_format_response_is_the_shared_one():
    # (its cases: tests/test_cli.py test_format_data)
    assert format_response is format_data


# -- against a server, in process ----------------------------------------------------------------


#: ``await run(argv, stdin=b"")``: ``rsocket-tx ARGV`` in process (status, out, err)
run = run_command


class TestDispatcher(Dispatcher):
    """Echoes; counts its instances (one per connection) in ``connections``; ``b"abort"``
    is aborted as not processed; ``b"hang"`` is answered once the test releases it."""

    __test__ = False
    connections = 0
    hanging: list[Deferred] = []

    def __init__(self) -> None:
        type(self).connections += 1

    async def dispatch(self, request):
        body = await request.read_all()
        if body == b"abort":
            request.response.abort(partial=False, detail="not today")
            return
        if body == b"hang":
            d: Deferred = Deferred()
            self.hanging.append(d)
            await d
        request.response.write(body)


@pytest_twisted.async_yield_fixture
async def server():
    """``jini+tcp://127.0.0.1:PORT`` of a server with a 256-byte ration."""
    TestDispatcher.connections = 0
    port = await serve(reactor, "tcp:0:interface=127.0.0.1", TestDispatcher,
                       JiniMuxConfig(initial_ration=256))
    try:
        yield f"jini+tcp://127.0.0.1:{port.getHost().port}"
    finally:
        for d in TestDispatcher.hanging:
            d.callback(None)
        TestDispatcher.hanging.clear()
        await port.stopListening()
        await wait(port.factory.close_connections())


@aio
async def test_request_prints_the_response(server):
    result = await run(["jini", "request", server, "hello"])
    assert (result.status, result.out, result.err) == (0, b"hello\n", "")


@aio
async def test_request_twisted_endpoint_string_and_empty_body(server):
    port = server.rpartition(":")[2]
    result = await run(["jini", "request", f"tcp:host=127.0.0.1:port={port}", "-o", "raw"])
    assert (result.status, result.out) == (0, b"")


@aio
async def test_request_body_from_a_file_and_from_stdin(server, tmp_path):
    body = bytes(range(256)) * 300  # 76,800 bytes: past both 256-byte rations, many times
    path = tmp_path / "body.bin"
    path.write_bytes(body)
    small = ["--ration", "256", "--fragment-size", "100", "-o", "raw"]
    from_file = await run(["jini", "request", server, "--data-file", str(path), *small])
    assert (from_file.status, from_file.out) == (0, body)
    from_stdin = await run(["jini", "request", server, "-f", "-", *small], stdin=body)
    assert (from_stdin.status, from_stdin.out) == (0, body)


@aio
async def test_repeat_with_concurrency_past_128_sessions(server):
    result = await run(["jini", "request", server, "hi", "-n", "300", "-c", "200", "-o",
                        "json"])
    assert result.status == 0, result.err
    assert [json.loads(line) for line in result.out.splitlines()] == [{"data": "hi"}] * 300
    assert TestDispatcher.connections >= 2  # 200 at once do not fit in 128 sessions


@aio
async def test_tls(tmp_path):
    certs = make_tls_files(tmp_path)
    endpoint = tap.server_endpoint(
        reactor, f"jini+tls://127.0.0.1:0?privateKey={certs.server_key}"
        f"&certKey={certs.server_cert}")
    port = await serve(reactor, endpoint, TestDispatcher)
    try:
        where = f"jini+tls://localhost:{port.getHost().port}?trustRoots={certs.ca}"
        result = await run(["jini", "request", where, "secret"])
        assert (result.status, result.out) == (0, b"secret\n"), result.err
        untrusted = f"jini+tls://localhost:{port.getHost().port}?trustRoots={certs.other_ca}"
        result = await run(["jini", "request", untrusted, "secret"])
        assert result.status == 3 and result.out == b""
    finally:
        await port.stopListening()
        await wait(port.factory.close_connections())


@aio
async def test_ping(server):
    result = await run(["jini", "ping", server, "--count", "3"])
    assert result.status == 0, result.err
    lines = result.out.decode().splitlines()
    assert len(lines) == 3
    assert all(line.startswith(f"PingAck {i} from {server}: ") and line.endswith(" ms")
               for i, line in enumerate(lines, 1))


@aio
async def test_aborted_request_exits_1(server):
    result = await run(["jini", "request", server, "abort"])
    assert (result.status, result.out) == (1, b"")
    assert "the server aborted the request (it was not processed, a retry is safe): " \
           "not today" in result.err


@aio
async def test_timeout_exits_4(server):
    result = await run(["jini", "request", server, "hang", "--timeout", "0.2"])
    assert (result.status, result.out) == (4, b"")
    assert "timed out after 0.2 seconds" in result.err


@aio
async def test_connection_refused_exits_3():
    listening = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
        Factory.forProtocol(Protocol))
    free = listening.getHost().port
    await listening.stopListening()
    result = await run(["jini", "request", f"jini+tcp://127.0.0.1:{free}", "x"])
    assert result.status == 3
    assert f"cannot connect to jini+tcp://127.0.0.1:{free}" in result.err


class ErrorServer(Protocol):
    """Answers the client's header with its own, then with an Error message, and closes."""

    def __init__(self) -> None:
        self.received = b""

    def dataReceived(self, chunk: bytes) -> None:  # noqa: N802 - Twisted's name
        self.received += chunk
        if len(self.received) >= 8 and len(self.received) - len(chunk) < 8:
            self.transport.write(b"Jmux\x01\x00\x80\x00" + b"\x08\x00\x00\x04nope")
            self.transport.loseConnection()


@aio
async def test_server_error_message_exits_3():
    listening = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
        Factory.forProtocol(ErrorServer))
    try:
        result = await run(["jini", "request", f"jini+tcp://127.0.0.1:"
                            f"{listening.getHost().port}", "x", "--timeout", "10"])
    finally:
        await listening.stopListening()
    assert (result.status, result.out) == (3, b""), result.err
    assert "nope" in result.err


@pytest.mark.parametrize(("argv", "message"), [
    (["jini", "request", "ws://localhost:8080/", "x"], "not over WebSocket"),
    (["jini", "request", "jini+udp://localhost:1", "x"], "unsupported URI scheme 'udp'"),
    (["jini", "request", "jini+tcp://localhost:9000", "-f", "/no/such/file"],
     "cannot read input"),
])
@aio
async def test_bad_endpoint_or_input_exits_2(argv, message):
    result = await run(argv)
    assert result.status == 2
    assert message in result.err


def test_rsocket_tx_help_lists_jini():
    from rsocket_tx.faces.main import build_parser

    assert "jini" in build_parser().format_help()


# -- as a process ---------------------------------------------------------------------------------


@aio
async def test_process_request_body_from_a_pipe(server):
    body = b"piped\n" * 10_000
    process = spawn(["-c", CLI, "jini", "request", server, "--data-file", "-", "-o", "raw"],
                    stdin=body)
    reason = await wait(process.ended, 60)
    assert reason.exitCode == 0, process.output[-2000:].decode()
    assert process.output == body


@aio
async def test_process_exit_status_and_output(server):
    ok = spawn(["-c", CLI, "jini", "request", server, "from a process", "-n", "2"])
    assert (await wait(ok.ended, 60)).exitCode == 0
    assert ok.output == b"from a process\nfrom a process\n"
    aborted = spawn(["-c", CLI, "jini", "request", server, "abort"])
    assert (await wait(aborted.ended, 60)).exitCode == 1
    assert b"rsocket-tx: the server aborted the request" in aborted.output
