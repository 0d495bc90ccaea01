"""``rsocket-tx rsnet`` (rsocket_tx.rsnet.cli): argument checks, and ``subscribe`` /
``publish`` against real servers on loopback (TCP, TLS, WebSocket), in process and as a child
process."""

from __future__ import annotations

import json

import pytest
import pytest_twisted
from tlscerts import make_tls_files
from twisted.internet import defer, reactor
from twisted_support import run_command

from rsocket_tx.faces.main import parse_args
from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.cli import read_lines
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.demo import DemoPublisher
from rsocket_tx.rsnet.events import RequestReceived
from rsocket_tx.rsnet.publishers import DEFAULT_WINDOW
from rsocket_tx.rsnet.server import serve

from .test_faces_tap import spawn
from .twisted_helpers import wait, wire_server

aio = pytest_twisted.ensureDeferred
CLI = "from rsocket_tx.faces.main import main; main()"


# -- arguments -----------------------------------------------------------------------------------


def test_subscribe_defaults():
    args = parse_args(["rsnet", "subscribe", "rsnet+tcp://localhost:7880", "count"])
    assert (args.command, args.rsnet_command, args.name) == ("rsnet", "subscribe", "count")
    assert (args.demand, args.limit, args.timeout, args.output) == \
        (DEFAULT_WINDOW, None, None, "text")
    assert args.config == RSNetConfig()


def test_publish_defaults_and_options():
    args = parse_args(["rsnet", "publish", "tcp:host=h:port=1", "lines"])
    assert (args.through, args.serve_only, args.data) == ("echo/lines", False, "-")
    args = parse_args(["rsnet", "publish", "ep", "lines", "--through", "relay", "--demand", "3",
                       "--max-part-size", "100", "--timeout", "2.5", "-o", "raw"])
    assert (args.through, args.demand, args.timeout, args.output) == ("relay", 3, 2.5, "raw")
    assert args.config.max_part_size == 100
    args = parse_args(["rsnet", "publish", "ep", "lines", "--serve-only"])
    assert args.through is None and args.serve_only


@pytest.mark.parametrize(("argv", "message"), [
    (["subscribe", "ep", "n", "--demand", "0"], "--demand: must be at least 1"),
    (["subscribe", "ep", "n", "--limit", "many"], "--limit: expected an integer"),
    (["subscribe", "ep", "n", "--hello-timeout", "0"], "--hello-timeout: must be an integer"),
    (["subscribe", "ep", "n", "--drain-timeout", "5"], "unrecognized arguments: --drain"),
    (["subscribe", "ep", "n", "-d", "2"], "unrecognized arguments: -d 2"),  # -d: data only
    (["subscribe", "ep"], "the following arguments are required: NAME"),
    (["publish", "ep", "n", "--through", "x", "--serve-only"], "either --through or"),
    (["nope", "ep"], "invalid choice: 'nope'"),
    ([], "the following arguments are required: RSNET_COMMAND"),
])
@aio
async def test_usage_errors(argv, message):
    result = await run(["rsnet", *argv])
    assert result.status == 2
    assert message in result.err
    assert result.err.startswith("usage: rsocket-tx ")


def test_read_lines():
    assert read_lines(b"") == []
    assert read_lines(b"a\r\nb\n\nc") == [b"a", b"b", b"", b"c"]


# -- against a server, in process ----------------------------------------------------------------


#: ``await run(argv, stdin=b"")``: ``rsocket-tx ARGV`` in process (status, out, err)
run = run_command


@pytest_twisted.async_yield_fixture
async def server():
    """``(rsnet+tcp://127.0.0.1:PORT, the requests the server received)`` of a demo server."""
    requests: list[int] = []

    def spy(protocol):
        handler = protocol.event_handlers[RequestReceived]

        def on_request(event):
            requests.append(event.n)
            handler(event)
        protocol.event_handlers[RequestReceived] = on_request

    port = await serve(reactor, "tcp:0:interface=127.0.0.1", DemoPublisher(),
                       on_connection=spy)
    try:
        yield f"rsnet+tcp://127.0.0.1:{port.getHost().port}", requests
    finally:
        await port.stopListening()
        await wait(defer.DeferredList([p.close() for p in list(port.factory.protocols)]))


@aio
async def test_subscribe_prints_the_elements(server):
    where, requests = server
    result = await run(["rsnet", "subscribe", where, "count/5"])
    assert (result.status, result.out, result.err) == (0, b"1\n2\n3\n4\n5\n", "")


@aio
async def test_subscribe_demand_and_limit(server):
    where, requests = server
    result = await run(["rsnet", "subscribe", where, "count", "--limit", "7", "--demand", "2"])
    assert (result.status, result.out) == (0, b"".join(b"%d\n" % i for i in range(1, 8)))
    # a window of 2: one more requested for each element printed, until the limit
    assert requests and set(requests) == {1}
    json_out = await run(["rsnet", "subscribe", where.replace("rsnet+tcp", "tcp"), "ints/2",
                          "-o", "json"])
    assert [json.loads(line) for line in json_out.out.splitlines()] == \
        [{"data": "\0\0\0\0"}, {"data": "\0\0\0\1"}]


@pytest.mark.logs_failure("the demo's 'error' publisher fails on purpose: the server logs it",
                          match=r"ValueError: the demo publisher failed")
@aio
async def test_subscribe_errors_and_exit_statuses(server):
    where, _ = server
    result = await run(["rsnet", "subscribe", where, "error"])
    assert (result.status, result.out) == (1, b"1\n")
    assert "onError: ValueError: the demo publisher failed" in result.err
    result = await run(["rsnet", "subscribe", where, "nope"])
    assert result.status == 1 and "no such publisher: nope" in result.err
    result = await run(["rsnet", "subscribe", "rsnet+tcp://127.0.0.1:1", "count"])
    assert result.status == 3 and "cannot connect" in result.err
    result = await run(["rsnet", "subscribe", "rsnet+bad://x", "count"])
    assert result.status == 2
    result = await run(["rsnet", "subscribe", where, "count", "--timeout", "0.2"])
    assert result.status == 4 and "timed out" in result.err


@aio
async def test_publish_lines_the_server_subscribes_to(server):
    where, _ = server
    result = await run(["rsnet", "publish", where, "lines"], stdin=b"one\ntwo\r\nthree")
    assert (result.status, result.out, result.err) == (0, b"one\ntwo\nthree\n", "")
    empty = await run(["rsnet", "publish", where, "nothing"], stdin=b"")
    assert (empty.status, empty.out) == (0, b"")


@aio
async def test_publish_serve_only_to_a_server_that_subscribes_by_itself(tmp_path):
    got: defer.Deferred = defer.Deferred()

    def subscribe_back(protocol):
        async def pull():
            await protocol.when_ready()
            return await protocol.subscribe("feed").collect()
        defer.ensureDeferred(pull()).chainDeferred(got)

    port = await serve(reactor, "tcp:0:interface=127.0.0.1", {}, on_connection=subscribe_back)
    try:
        path = tmp_path / "lines.txt"
        path.write_bytes(b"a\nb\n")
        result = await run(["rsnet", "publish", f"rsnet+tcp://127.0.0.1:{port.getHost().port}",
                            "feed", "--serve-only", "-f", str(path)])
        assert (result.status, result.out, result.err) == (0, b"", "")
        assert await wait(got) == [b"a", b"b"]
    finally:
        await port.stopListening()
        await wait(defer.DeferredList([p.close() for p in list(port.factory.protocols)]))


@aio
async def test_an_unsupported_server_version_is_said_goodbye_to_before_the_exit():
    """Draft §Protocol negotiation: the side that receives a hello of a version it does not
    support MUST send goodbye and close. The command ends (and ``main`` stops the reactor)
    only once its transport is closed, its goodbye written."""
    port, connected = await wire_server()
    try:
        command = defer.ensureDeferred(run(
            ["rsnet", "subscribe", f"rsnet+tcp://127.0.0.1:{port.getHost().port}", "count"]))
        peer = await wait(connected)
        peer.send(C.ServerHello(version=3))
        result = await wait(command)
        assert result.status == 3 and "unsupported protocol version 3" in result.err
        assert peer.lost.called  # the server saw the close already ...
        goodbye = peer.messages[-1]  # ... after the goodbye
        assert isinstance(goodbye, C.Goodbye), peer.messages
        assert "unsupported protocol version 3" in goodbye.reason
    finally:
        await port.stopListening()


@aio
async def test_tls_and_websocket(tmp_path):
    certs = make_tls_files(tmp_path)
    tls = await serve(reactor, f"rsnet+tls://127.0.0.1:0?privateKey={certs.server_key}"
                      f"&certKey={certs.server_cert}", DemoPublisher())
    ws = await serve(reactor, "rsnet+ws://127.0.0.1:0/rsnet", DemoPublisher())
    try:
        where = f"rsnet+tls://localhost:{tls.getHost().port}?trustRoots={certs.ca}"
        result = await run(["rsnet", "subscribe", where, "count/2"])
        assert (result.status, result.out) == (0, b"1\n2\n"), result.err
        untrusted = f"rsnet+tls://localhost:{tls.getHost().port}?trustRoots={certs.other_ca}"
        result = await run(["rsnet", "subscribe", untrusted, "count/2"])
        assert result.status == 3 and result.out == b""
        where = f"rsnet+ws://127.0.0.1:{ws.getHost().port}/rsnet"
        result = await run(["rsnet", "publish", where, "up"], stdin=b"x\ny\n")
        assert (result.status, result.out) == (0, b"x\ny\n"), result.err
    finally:
        for port in (tls, ws):
            await port.stopListening()
            await wait(defer.DeferredList([p.close() for p in list(port.factory.protocols)]))


@aio
async def test_as_a_child_process(server):
    where, _ = server
    process = spawn(["-c", CLI, "rsnet", "publish", where, "lines"], stdin=b"p\nq\n")
    reason = await wait(process.ended, 60)
    assert reason.exitCode == 0, process.output.decode()
    assert process.output == b"p\nq\n"
