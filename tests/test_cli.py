"""``rsocket-tx`` (rsocket_tx.faces.main, RSocket's commands in rsocket_tx.faces.cli):
parsing, input/output forms, and end to end against a real server on a loopback port
(in-process with :func:`rsocket_tx.faces.main.run`, and as a subprocess with
``python -m rsocket_tx``)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import sys
from pathlib import Path

import pytest
import pytest_twisted
from twisted.internet import defer
from twisted.internet import error as internet_error
from twisted.internet.defer import Deferred
from twisted.internet.protocol import ProcessProtocol
from twisted.internet.testing import MemoryReactorClock
from twisted.protocols.policies import WrappingFactory
from twisted.python import usage
from twisted_support import SERVER_OPTIONS_ARGV

from rsocket_tx.apps.demo import DemoResponder
from rsocket_tx.core.errors import ApplicationError, ConnectionLostError
from rsocket_tx.core.payload import Payload
from rsocket_tx.faces import main as cli
from rsocket_tx.faces.cli import (
    EXIT_INTERRUPTED,
    Streams,
    exit_status_for,
    format_data,
    format_payload,
    read_source,
)
from rsocket_tx.faces.main import (
    EXIT_CONNECTION,
    EXIT_OK,
    EXIT_RSOCKET_ERROR,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    UsageError,
    parse_args,
)
from rsocket_tx.faces.tap import DEFAULT_LISTEN, Options
from rsocket_tx.responder import Responder
from rsocket_tx.transports.tls import TLSError

REPO = Path(__file__).resolve().parent.parent
SAFETY = 60  # seconds: only so that a broken test fails instead of hanging; never reached


def _reactor():
    from twisted.internet import reactor

    return reactor


# -- parsing -------------------------------------------------------------------------------------


def test_request_defaults():
    args = parse_args(["request", "tcp://localhost:7878"])
    assert args.command == "request"
    assert args.endpoint == "tcp://localhost:7878"
    assert args.data is None and args.metadata is None
    assert args.setup_data is None and args.setup_metadata is None
    assert args.setup_data_mime == args.metadata_mime == "application/octet-stream"
    assert args.stream_data_mime is None and args.auth is None and args.route is None
    assert args.keepalive == 20_000
    assert args.max_lifetime == 90_000
    assert args.fragment is None
    assert args.timeout is None
    assert args.debug is False
    assert args.output == "text"


def test_stream_all_options():
    args = parse_args(
        [
            "stream",
            "tcp:host=localhost:port=7878",
            "-d",
            "5",
            "-m",
            "@meta.bin",
            "--data-mime",
            "text/plain",
            "--metadata-mime",
            "application/json",
            "--setup-data",
            "sd",
            "--setup-metadata",
            "-",
            "--take",
            "3",
            "--request-n",
            "2",
            "--fragment",
            "128",
            "--keepalive",
            "500",
            "--max-lifetime",
            "1500",
            "--timeout",
            "2.5",
            "--debug",
            "--output",
            "json",
        ]
    )
    assert (args.data, args.metadata, args.setup_data, args.setup_metadata) == (
        "5",
        "@meta.bin",
        "sd",
        "-",
    )
    assert (args.data_mime, args.metadata_mime) == ("text/plain", "application/json")
    assert (args.take, args.request_n, args.fragment) == (3, 2, 128)
    assert (args.keepalive, args.max_lifetime, args.timeout) == (500, 1500, 2.5)
    assert args.debug is True
    assert args.output == "json"


def test_fragment_size_alias():
    assert parse_args(["request", "tcp://h:1", "--fragment-size", "64"]).fragment == 64


def test_stream_defaults():
    args = parse_args(["stream", "tcp://h:1"])
    assert args.take is None
    assert args.request_n == 256


def test_channel_reads_stdin_by_default():
    assert parse_args(["channel", "tcp://h:1"]).data == "-"
    assert parse_args(["channel", "tcp://h:1", "-d", "@lines.txt"]).data == "@lines.txt"


def _usage_error(argv) -> str:
    with pytest.raises(UsageError) as info:
        parse_args(argv)
    return str(info.value)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "required: COMMAND"),
        (["nope"], "invalid choice: 'nope'"),
        (["request"], "required: ENDPOINT"),
        (["request", "tcp://h:1", "--fragment", "63"], "must be at least 64 bytes, got 63"),
        (["request", "tcp://h:1", "--fragment", "big"], "expected an integer number of bytes"),
        (["request", "tcp://h:1", "--keepalive", "0"], "--keepalive: must be at least 1"),
        (["request", "tcp://h:1", "--keepalive", "1s"], "--keepalive: expected an integer"),
        (["request", "tcp://h:1", "--max-lifetime", "2147483648"], "must be at most 2147483647"),
        (["stream", "tcp://h:1", "--take", "0"], "--take: must be at least 1"),
        (["stream", "tcp://h:1", "--request-n", "0"], "--request-n: must be at least 1"),
        (["stream", "tcp://h:1", "--request-n", "x"], "--request-n: expected an integer"),
        (["request", "tcp://h:1", "--take", "3"], "unrecognized arguments: --take"),
        (["request", "tcp://h:1", "--timeout", "-1"], "--timeout: must be a positive number"),
        (["request", "tcp://h:1", "--timeout", "0"], "--timeout: must be a positive number"),
        (["request", "tcp://h:1", "--timeout", "soon"], "--timeout: expected a number"),
        (["request", "tcp://h:1", "--timeout", "nan"], "--timeout: must be a positive number"),
        (["request", "tcp://h:1", "-o", "xml"], "invalid choice: 'xml'"),
        (["request", "tcp://h:1", "-d", "-", "-m", "-"], "only one option can read standard"),
        (["channel", "tcp://h:1", "-m", "-"], "'-' for --data, --metadata"),
        (["metadata-push", "tcp://h:1"], "--metadata: required by metadata-push"),
        (["fnf", "tcp://h:1", "--output", "json"], "unrecognized arguments"),
        (["fnf", "tcp://h:1", "--data-mime", "tëxt/plain"], "--data-mime: expected 1 to 255 ASCII"),
        (["fnf", "tcp://h:1", "--metadata-mime", "x" * 256], "--metadata-mime: expected 1 to 255"),
        (["fnf", "tcp://h:1", "--metadata-mime", ""], "--metadata-mime: expected 1 to 255"),
    ],
)
def test_client_usage_errors(argv, message):
    assert message in _usage_error(argv)


def test_usage_error_carries_the_subcommand_usage():
    with pytest.raises(UsageError) as info:
        parse_args(["stream", "tcp://h:1", "--take", "0"])
    assert info.value.usage.startswith("usage: rsocket-tx stream")


def test_serve_defaults():
    settings = parse_args(["serve"]).settings
    assert settings.listen == (DEFAULT_LISTEN,)
    assert settings.responder_factory is DemoResponder


def test_serve_options_build_the_same_settings_as_twistd():
    argv = SERVER_OPTIONS_ARGV
    from_cli = parse_args(["serve", "tcp:7000", "tcp://127.0.0.1:7001", *argv]).settings
    options = Options()
    options.parseOptions(["--listen", "tcp:7000", "--listen", "tcp://127.0.0.1:7001", *argv])
    assert from_cli == options["settings"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--fragment-size", "10"],
        ["--max-frame-size", "16777216"],
        ["--setup-timeout", "x"],
        ["--responder", "no_such_module_xyz:R"],
        ["--responder", "rsocket_tx.core.payload:Payload"],
    ],
)
def test_serve_errors_are_the_same_as_twistd(argv):
    with pytest.raises(usage.UsageError) as twistd_error:
        Options().parseOptions(argv)
    assert _usage_error(["serve", *argv]) == str(twistd_error.value)


def test_serve_bad_endpoint():
    assert "--listen: unsupported URI scheme 'foo'" in _usage_error(["serve", "foo://x:1"])


# -- inputs and outputs ----------------------------------------------------------------------------


def test_read_source_forms(tmp_path):
    path = tmp_path / "d.bin"
    path.write_bytes(b"\x00\xffbytes")
    stdin = io.BytesIO(b"from stdin\n")
    assert read_source(None, stdin) is None
    assert read_source("hello", stdin) == b"hello"
    assert read_source("", stdin) == b""
    assert read_source("héllo", stdin) == "héllo".encode()
    assert read_source(f"@{path}", stdin) == b"\x00\xffbytes"
    assert read_source("@@literal", stdin) == b"@literal"
    assert read_source("-", stdin) == b"from stdin\n"


def test_read_source_missing_file(tmp_path):
    with pytest.raises(OSError):
        read_source(f"@{tmp_path / 'missing'}", io.BytesIO())


@pytest.mark.parametrize(
    ("payload", "text", "obj"),
    [
        (Payload(b"hi", b"m"), b"hi\n", {"data": "hi", "metadata": "m"}),
        (Payload(b"hi"), b"hi\n", {"data": "hi", "metadata": None}),
        (Payload(b"", b""), b"\n", {"data": "", "metadata": ""}),
        (Payload("é".encode()), "é\n".encode(), {"data": "é", "metadata": None}),
        (
            Payload(b"\xff\x00", b"\x80"),
            b"\xff\x00\n",
            {"data_base64": "/wA=", "metadata_base64": "gA=="},
        ),
    ],
)
def test_format_payload(payload, text, obj):
    assert format_payload(payload, "text") == text
    line = format_payload(payload, "json")
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == obj


@pytest.mark.parametrize(("data", "output", "expected"), [
    (b"hi", "text", b"hi\n"),
    (b"hi", "raw", b"hi"),
    (b"", "raw", b""),
    (b"h\xc3\xa9", "json", b'{"data": "h\xc3\xa9"}\n'),
    (b"\xff\x00", "json", b'{"data_base64": "/wA="}\n'),
])
def test_format_data(data, output, expected):
    # the jini and rsnet commands' output (no metadata)
    assert format_data(data, output) == expected


class _ProtocolFailure(Exception):
    pass


def _protocol_status(error):
    return 7 if isinstance(error, (_ProtocolFailure, ConnectionLostError)) else None


@pytest.mark.parametrize(("error", "status", "message"), [
    (BrokenPipeError(), EXIT_OK, ""),
    (TLSError("bad certificate"), EXIT_CONNECTION, "rsocket-tx: bad certificate\n"),
    (_ProtocolFailure(), 7, ""),
    (internet_error.ConnectionRefusedError("refused"), EXIT_CONNECTION, "cannot connect to ep: "),
    (internet_error.ConnectionLost("gone"), EXIT_CONNECTION, "connection lost: "),
    (defer.CancelledError(), EXIT_INTERRUPTED, "rsocket-tx: cancelled\n"),
])
def test_exit_status_for(error, status, message):
    # the protocol commands' shared mapping: TLS before the protocol's own (a TLSError is a
    # ConnectionLostError), the protocol's before the generic connection failures
    streams = Streams(io.BytesIO(), io.BytesIO(), io.StringIO())
    assert exit_status_for(error, "ep", streams, _protocol_status) == status
    assert message in streams.stderr.getvalue()
    if not message:
        assert streams.stderr.getvalue() == ""


def test_exit_status_for_reraises_the_unexpected():
    streams = Streams(io.BytesIO(), io.BytesIO(), io.StringIO())
    with pytest.raises(KeyError):
        exit_status_for(KeyError("bug"), "ep", streams)


# -- run(): in-process ----------------------------------------------------------------------------


class Result:
    def __init__(self, status, stdout: io.BytesIO, stderr: io.StringIO) -> None:
        self.status = status
        self.stdout = stdout.getvalue()
        self.stderr = stderr.getvalue()

    @property
    def lines(self) -> list[bytes]:
        return self.stdout.splitlines()


async def run_cli(argv, stdin: bytes = b"", reactor=None) -> Result:
    stdout, stderr = io.BytesIO(), io.StringIO()
    reactor = reactor or _reactor()
    d = cli.run(reactor, argv, stdin=io.BytesIO(stdin), stdout=stdout, stderr=stderr)
    status = await d.addTimeout(SAFETY, reactor)
    return Result(status, stdout, stderr)


@pytest_twisted.ensureDeferred
async def test_run_usage_error():
    result = await run_cli(["stream", "tcp://h:1", "--take", "0"])
    assert result.status == EXIT_USAGE
    assert "usage: rsocket-tx stream" in result.stderr
    assert "rsocket-tx: error: --take: must be at least 1" in result.stderr


@pytest_twisted.ensureDeferred
async def test_run_bad_uri_scheme():
    result = await run_cli(["request", "foo://localhost:7878", "-d", "x"])
    assert result.status == EXIT_USAGE
    assert "unsupported URI scheme 'foo'" in result.stderr


@pytest_twisted.ensureDeferred
async def test_run_unreadable_input(tmp_path):
    result = await run_cli(["request", "tcp://127.0.0.1:1", "-d", f"@{tmp_path / 'nope'}"])
    assert result.status == EXIT_USAGE
    assert "cannot read input" in result.stderr


@pytest_twisted.ensureDeferred
async def test_timeout_while_connecting():
    """--timeout covers connecting too; a memory reactor never connects, its clock is ours."""
    reactor = MemoryReactorClock()
    stdout, stderr = io.BytesIO(), io.StringIO()
    d = cli.run(
        reactor,
        ["request", "tcp:host=127.0.0.1:port=7878", "-d", "x", "--timeout", "2"],
        stdin=io.BytesIO(),
        stdout=stdout,
        stderr=stderr,
    )
    assert reactor.tcpClients  # it is trying
    assert not d.called
    reactor.advance(1.9)
    assert not d.called
    reactor.advance(0.1)
    assert d.called
    status = await d
    assert status == EXIT_TIMEOUT
    assert stderr.getvalue() == "rsocket-tx: timed out after 2 seconds\n"
    assert stdout.getvalue() == b""


# The rest needs a server.


async def _serve(responder_factory=DemoResponder):
    from rsocket_tx import serve

    port = await serve("tcp:0:interface=127.0.0.1", responder_factory, reactor=_reactor())
    return port, port.getHost().port


@pytest_twisted.async_yield_fixture
async def demo():
    """The port of a demo server on 127.0.0.1."""
    port, number = await _serve()
    yield number
    await port.stopListening()


class Recorder(Responder):
    """Records what it receives; ``received`` fires at the first fnf / metadata-push."""

    setups: list = []
    received: Deferred

    def accept_setup(self, setup):
        Recorder.setups.append(setup)

    def request_response(self, payload):
        raise ApplicationError("boom: no answer for you")

    def fire_and_forget(self, payload):
        Recorder.received.callback(("fnf", payload))

    def metadata_push(self, metadata):
        Recorder.received.callback(("metadata-push", metadata))


class Silent(Responder):
    def request_response(self, payload):
        return Deferred()  # never answers


@pytest_twisted.async_yield_fixture
async def recorder():
    Recorder.setups = []
    Recorder.received = Deferred()
    port, number = await _serve(Recorder)
    yield number
    await port.stopListening()


@pytest_twisted.ensureDeferred
async def test_request_text(demo):
    result = await run_cli(["request", f"tcp://127.0.0.1:{demo}", "-d", "hello", "-m", "meta"])
    assert (result.status, result.stdout, result.stderr) == (EXIT_OK, b"hello\n", "")


@pytest_twisted.ensureDeferred
async def test_request_twisted_endpoint_string_json(demo):
    result = await run_cli(
        ["request", f"tcp:host=127.0.0.1:port={demo}", "-d", "hello", "-m", "meta", "-o", "json"]
    )
    assert result.status == EXIT_OK
    assert [json.loads(line) for line in result.lines] == [{"data": "hello", "metadata": "meta"}]


@pytest_twisted.ensureDeferred
async def test_request_data_from_stdin_and_file(demo, tmp_path):
    path = tmp_path / "meta.bin"
    path.write_bytes(b"\xff\xfe")
    result = await run_cli(
        ["request", f"tcp://127.0.0.1:{demo}", "-d", "-", "-m", f"@{path}", "-o", "json"],
        stdin=b"line one\nline two\n",
    )
    assert result.status == EXIT_OK
    assert json.loads(result.stdout) == {
        "data": "line one\nline two\n",
        "metadata_base64": "//4=",
    }


@pytest_twisted.ensureDeferred
async def test_request_fragmented(demo):
    data = "x" * 1000
    result = await run_cli(
        ["request", f"tcp://127.0.0.1:{demo}", "-d", data, "--fragment", "64", "--debug"]
    )
    assert result.status == EXIT_OK
    assert result.stdout == data.encode() + b"\n"
    assert "send REQUEST_RESPONSE stream=1" in result.stderr
    assert " follows" in result.stderr


@pytest_twisted.ensureDeferred
async def test_stream(demo):
    result = await run_cli(["stream", f"tcp://127.0.0.1:{demo}", "-d", "5"])
    assert (result.status, result.lines) == (EXIT_OK, [b"0", b"1", b"2", b"3", b"4"])


@pytest_twisted.ensureDeferred
async def test_stream_default_count(demo):
    result = await run_cli(["stream", f"tcp://127.0.0.1:{demo}"])
    assert result.lines == [str(i).encode() for i in range(10)]


@pytest_twisted.ensureDeferred
async def test_stream_take_cancels(demo):
    result = await run_cli(
        ["stream", f"tcp://127.0.0.1:{demo}", "-d", "1000000", "--take", "3", "--debug"]
    )
    assert (result.status, result.lines) == (EXIT_OK, [b"0", b"1", b"2"])
    # Only what is taken is requested, then the stream is canceled.
    assert "send REQUEST_STREAM stream=1 initial_request_n=3" in result.stderr
    assert "send CANCEL stream=1" in result.stderr


@pytest_twisted.ensureDeferred
async def test_stream_request_n_batches(demo):
    result = await run_cli(
        ["stream", f"tcp://127.0.0.1:{demo}", "-d", "4", "--request-n", "1", "--debug"]
    )
    assert result.lines == [b"0", b"1", b"2", b"3"]
    assert "send REQUEST_STREAM stream=1 initial_request_n=1" in result.stderr
    assert "send REQUEST_N stream=1 request_n=1" in result.stderr


@pytest_twisted.ensureDeferred
async def test_stream_json(demo):
    result = await run_cli(["stream", f"tcp://127.0.0.1:{demo}", "-d", "2", "-o", "json"])
    assert [json.loads(line) for line in result.lines] == [
        {"data": "0", "metadata": None},
        {"data": "1", "metadata": None},
    ]


@pytest_twisted.ensureDeferred
async def test_stream_error(demo):
    result = await run_cli(["stream", f"tcp://127.0.0.1:{demo}", "-d", "abc"])
    assert result.status == EXIT_RSOCKET_ERROR
    assert result.stdout == b""
    assert "INVALID: request-stream data must be a decimal count" in result.stderr


@pytest_twisted.ensureDeferred
async def test_channel_from_stdin(demo):
    result = await run_cli(["channel", f"tcp://127.0.0.1:{demo}"], stdin=b"a\nb\r\n\nc")
    assert (result.status, result.lines) == (EXIT_OK, [b"a", b"b", b"", b"c"])


@pytest_twisted.ensureDeferred
async def test_channel_metadata_on_first_payload(demo):
    result = await run_cli(
        ["channel", f"tcp://127.0.0.1:{demo}", "-m", "first", "-o", "json"], stdin=b"a\nb\n"
    )
    assert [json.loads(line) for line in result.lines] == [
        {"data": "a", "metadata": "first"},
        {"data": "b", "metadata": None},
    ]


@pytest_twisted.ensureDeferred
async def test_channel_from_file_with_take(demo, tmp_path):
    path = tmp_path / "lines.txt"
    path.write_bytes(b"".join(b"%d\n" % i for i in range(100)))
    result = await run_cli(["channel", f"tcp://127.0.0.1:{demo}", "-d", f"@{path}", "--take", "2"])
    assert (result.status, result.lines) == (EXIT_OK, [b"0", b"1"])


@pytest_twisted.ensureDeferred
async def test_channel_without_input(demo):
    result = await run_cli(["channel", f"tcp://127.0.0.1:{demo}"], stdin=b"")
    assert result.status == EXIT_USAGE
    assert "channel: no input payloads" in result.stderr


@pytest_twisted.ensureDeferred
async def test_fire_and_forget(recorder):
    result = await run_cli(["fnf", f"tcp://127.0.0.1:{recorder}", "-d", "logme", "-m", "m"])
    assert (result.status, result.stdout) == (EXIT_OK, b"")
    kind, payload = await Recorder.received.addTimeout(SAFETY, _reactor())
    assert (kind, payload) == ("fnf", Payload(b"logme", b"m"))


@pytest_twisted.ensureDeferred
async def test_metadata_push(recorder):
    result = await run_cli(["metadata-push", f"tcp://127.0.0.1:{recorder}", "-m", "tenant=blue"])
    assert (result.status, result.stdout) == (EXIT_OK, b"")
    received = await Recorder.received.addTimeout(SAFETY, _reactor())
    assert received == ("metadata-push", b"tenant=blue")


@pytest_twisted.ensureDeferred
async def test_setup_options_reach_the_server(recorder):
    await run_cli(
        [
            "metadata-push",
            f"tcp://127.0.0.1:{recorder}",
            "-m",
            "x",
            "--setup-data",
            "sd",
            "--setup-metadata",
            "-",
            "--data-mime",
            "text/plain",
            "--metadata-mime",
            "application/json",
            "--keepalive",
            "1234",
            "--max-lifetime",
            "5678",
        ],
        stdin=b"setup meta",
    )
    await Recorder.received.addTimeout(SAFETY, _reactor())
    [setup] = Recorder.setups
    assert setup.payload == Payload(b"sd", b"setup meta")
    assert (setup.data_mime_type, setup.metadata_mime_type) == ("text/plain", "application/json")
    assert (setup.keepalive_interval, setup.max_lifetime) == (1234, 5678)


@pytest_twisted.ensureDeferred
async def test_application_error(recorder):
    result = await run_cli(["request", f"tcp://127.0.0.1:{recorder}", "-d", "x"])
    assert result.status == EXIT_RSOCKET_ERROR
    assert result.stdout == b""
    assert result.stderr == "rsocket-tx: error: APPLICATION_ERROR: boom: no answer for you\n"


@pytest_twisted.ensureDeferred
async def test_rejected_when_not_implemented():
    port, number = await _serve(Responder)
    try:
        result = await run_cli(["stream", f"tcp://127.0.0.1:{number}"])
    finally:
        await port.stopListening()
    assert result.status == EXIT_RSOCKET_ERROR
    assert "REJECTED: request-stream is not implemented" in result.stderr


@pytest_twisted.ensureDeferred
async def test_setup_refused_by_the_servers_keepalive_limit():
    """The server of ``rsocket-tx serve --min-keepalive-interval`` refuses a faster client."""
    from rsocket_tx.faces.tap import build_service, parse_server_settings

    service = build_service(
        parse_server_settings(listen=["tcp:0:interface=127.0.0.1"], min_keepalive_interval=1000),
        _reactor(),
    )
    service.startService()
    try:
        [port] = await service.when_listening()
        url = f"tcp://127.0.0.1:{port.getHost().port}"
        refused = await run_cli(["request", url, "-d", "x", "--keepalive", "999"])
        accepted = await run_cli(["request", url, "-d", "x", "--keepalive", "1000"])
    finally:
        await service.stopService()
    assert refused.status == EXIT_RSOCKET_ERROR
    assert "UNSUPPORTED_SETUP: keepalive interval 999 ms is below" in refused.stderr
    assert (accepted.status, accepted.stdout) == (EXIT_OK, b"x\n")


@pytest_twisted.ensureDeferred
async def test_timeout_waiting_for_the_response():
    port, number = await _serve(Silent)
    try:
        result = await run_cli(["request", f"tcp://127.0.0.1:{number}", "--timeout", "0.05"])
    finally:
        await port.stopListening()
    assert result.status == EXIT_TIMEOUT
    assert result.stderr == "rsocket-tx: timed out after 0.05 seconds\n"


@pytest_twisted.ensureDeferred
async def test_connection_refused():
    port, number = await _serve()
    await port.stopListening()  # nobody listens there any more
    result = await run_cli(["request", f"tcp://127.0.0.1:{number}", "-d", "x"])
    assert result.status == EXIT_CONNECTION
    assert f"cannot connect to tcp://127.0.0.1:{number}" in result.stderr


@pytest_twisted.ensureDeferred
async def test_debug_frame_log(demo):
    result = await run_cli(["request", f"tcp://127.0.0.1:{demo}", "-d", "x", "--debug"])
    lines = result.stderr.splitlines()
    assert lines[0].startswith("send SETUP stream=0 keepalive_interval=20000")
    assert "send REQUEST_RESPONSE stream=1 data=b'x'" in lines
    assert any(line.startswith("recv PAYLOAD stream=1 data=b'x'") for line in lines)


@pytest_twisted.ensureDeferred
async def test_serve_cannot_listen(demo):
    result = await run_cli(["serve", f"tcp:{demo}:interface=127.0.0.1"])
    assert result.status == EXIT_CONNECTION
    assert "cannot listen" in result.stderr


# -- python -m rsocket_tx: a real process ------------------------------------------------------


class _Process(ProcessProtocol):
    """Feeds ``stdin`` to a child, collects its output; ``matched`` fires with the first match
    of ``pattern`` in its stderr."""

    def __init__(self, stdin: bytes | None = b"", pattern: re.Pattern | None = None) -> None:
        self.stdin = stdin
        self.pattern = pattern
        self.stdout = b""
        self.stderr = b""
        self.matched: Deferred = Deferred()
        self.ended: Deferred = Deferred()

    def connectionMade(self):
        if self.stdin is not None:
            self.transport.write(self.stdin)
            self.transport.closeStdin()

    def outReceived(self, data):
        self.stdout += data

    def errReceived(self, data):
        self.stderr += data
        if self.pattern is not None and not self.matched.called:
            match = self.pattern.search(self.stderr)
            if match:
                self.matched.callback(match)

    def processEnded(self, reason):
        if not self.matched.called:
            self.matched.errback(AssertionError(f"ended first:\n{self.stderr.decode()}"))
            self.matched.addErrback(lambda _: None)
        self.ended.callback(reason.value.exitCode)


def spawn(argv, stdin: bytes | None = b"", pattern=None) -> _Process:
    process = _Process(stdin, pattern)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    args = [sys.executable, "-m", "rsocket_tx", *argv]
    _reactor().spawnProcess(process, sys.executable, args, env=env, path=str(REPO))
    return process


async def run_process(argv, stdin: bytes = b""):
    process = spawn(argv, stdin)
    code = await process.ended.addTimeout(SAFETY, _reactor())
    return code, process.stdout, process.stderr.decode()


@pytest_twisted.ensureDeferred
async def test_process_stream(demo):
    code, out, err = await run_process(["stream", f"tcp://127.0.0.1:{demo}", "-d", "3"])
    assert (code, out, err) == (0, b"0\n1\n2\n", "")


@pytest_twisted.ensureDeferred
async def test_process_channel_from_a_pipe(demo):
    code, out, err = await run_process(["channel", f"tcp://127.0.0.1:{demo}"], stdin=b"a\nb\n")
    assert (code, out, err) == (0, b"a\nb\n", "")


@pytest_twisted.ensureDeferred
async def test_process_request_twisted_endpoint(demo):
    code, out, _ = await run_process(
        ["request", f"tcp:host=127.0.0.1:port={demo}", "-d", "hello", "-m", "meta"]
    )
    assert (code, out) == (0, b"hello\n")


@pytest_twisted.ensureDeferred
async def test_process_error_exit_status(recorder):
    code, out, err = await run_process(["request", f"tcp://127.0.0.1:{recorder}"])
    assert (code, out) == (EXIT_RSOCKET_ERROR, b"")
    assert "APPLICATION_ERROR: boom" in err


class _WatchedFactory(WrappingFactory):
    """Wraps a server factory; ``lost`` fires when its first connection is gone."""

    def __init__(self, wrapped) -> None:
        super().__init__(wrapped)
        self.lost: Deferred = Deferred()

    def unregisterProtocol(self, protocol) -> None:
        super().unregisterProtocol(protocol)
        if not self.lost.called:
            self.lost.callback(None)


@pytest_twisted.ensureDeferred
async def test_process_fire_and_forget_is_delivered():
    """The process exits right after fnf: the frame must have left before it does."""
    from twisted.internet.endpoints import TCP4ServerEndpoint

    from rsocket_tx.protocol import RSocketServerFactory

    Recorder.setups = []
    Recorder.received = Deferred()
    reactor = _reactor()
    watched = _WatchedFactory(RSocketServerFactory(Recorder, reactor=reactor))
    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(watched)
    try:
        code, _, err = await run_process(
            ["fnf", f"tcp://127.0.0.1:{port.getHost().port}", "-d", "bye"]
        )
        assert (code, err) == (0, "")
        await watched.lost.addTimeout(SAFETY, reactor)  # all it sent has been read by now
    finally:
        await port.stopListening()
    assert Recorder.received.called, "the fnf frame was lost: the client exited too early"
    assert await Recorder.received == ("fnf", Payload(b"bye"))


@pytest_twisted.ensureDeferred
async def test_process_usage_error():
    code, out, err = await run_process(["stream", "tcp://h:1", "--fragment", "10"])
    assert (code, out) == (EXIT_USAGE, b"")
    assert "rsocket-tx: error: --fragment-size: must be at least 64 bytes, got 10" in err


@pytest_twisted.ensureDeferred
async def test_process_serve_until_sigterm():
    from rsocket_tx import connect

    process = spawn(
        ["serve", "tcp:0:interface=127.0.0.1", "--debug"],
        stdin=None,
        pattern=re.compile(rb"listening on 127\.0\.0\.1:(\d+)"),
    )
    try:
        match = await process.matched.addTimeout(SAFETY, _reactor())
        rsocket = await connect(f"tcp://127.0.0.1:{int(match.group(1))}", reactor=_reactor())
        try:
            assert await rsocket.request_response(Payload(b"ping")) == Payload(b"ping")
        finally:
            await rsocket.close()
    finally:
        if not process.ended.called:
            process.transport.signalProcess(signal.SIGTERM)
        code = await process.ended.addTimeout(SAFETY, _reactor())
    assert code == 0
    assert b"recv REQUEST_RESPONSE stream=1 data=b'ping'" in process.stderr


# -- leases and resume (the reliability options of the client commands) -------------------------


@pytest_twisted.ensureDeferred
async def test_lease_option_asks_for_leases_and_honours_them():
    from rsocket_tx import serve
    from rsocket_tx.lease import FixedRateLeasePolicy

    # one request per minute: the first is allowed, the second (a new connection, a new
    # lease) too; the server counts per connection
    port = await serve("tcp:0:interface=127.0.0.1", DemoResponder, reactor=_reactor(),
                       lease_policy=FixedRateLeasePolicy(ttl=60_000, requests=1))
    uri = f"tcp://127.0.0.1:{port.getHost().port}"
    try:
        ok = await run_cli(["request", uri, "--lease", "-d", "hi"])
        # a lease of 0 requests lets nothing through: the request is never sent
        zero = await serve("tcp:0:interface=127.0.0.1", DemoResponder, reactor=_reactor(),
                           lease_policy=FixedRateLeasePolicy(ttl=60_000, requests=0))
        try:
            refused = await run_cli(["request", f"tcp://127.0.0.1:{zero.getHost().port}",
                                     "--lease", "-d", "hi"])
        finally:
            await zero.stopListening()
    finally:
        await port.stopListening()
    assert (ok.status, ok.stdout) == (EXIT_OK, b"hi\n")
    assert refused.status == EXIT_RSOCKET_ERROR
    assert "request not sent" in refused.stderr and "0 requests" in refused.stderr
