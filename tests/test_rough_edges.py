"""The rough edges a new user of ``twistd rsocket`` and ``rsocket-tx`` hits (issue 16, item 8):
``module:Class`` options find modules in the current directory and an import error names the file
and line; a twistd usage error comes first, not after the help; a port in use is one line;
``rsocket-tx --version``; "did you mean"; library log lines only with ``--debug``; a TLS or
WebSocket client at the wrong kind of port fails fast with a hint; secrets given on the command
line are never written back."""

from __future__ import annotations

import io
import os
import re
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_twisted
from process_support import TWISTD as TWISTD_CODE
from process_support import ChildProcess, spawn
from twisted.internet.protocol import Factory, Protocol

import rsocket_tx
from rsocket_tx.faces import cli
from rsocket_tx.faces.clikit import (
    EXIT_CONNECTION,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    redact,
    secrets_in,
)
from rsocket_tx.faces.main import log_level, parse_args, run
from rsocket_tx.faces.serving import (
    ListenFailed,
    SettingsError,
    import_named,
    scheme_hint,
    suggest_option,
)
from rsocket_tx.faces.tap import parse_server_settings
from rsocket_tx.responder import Responder

REPO = Path(__file__).resolve().parent.parent
SAFETY = 60  # seconds: only so that a broken test fails instead of hanging; never reached
#: the installed ``twistd`` console script: unlike ``python -c`` or ``-m``, it does not put
#: the current directory on sys.path
TWISTD = Path(sys.executable).with_name("twistd")


def _reactor():
    from twisted.internet import reactor

    return reactor


@dataclass
class Result:
    status: int
    stdout: bytes
    stderr: str


async def run_cli(argv) -> Result:
    stdout, stderr = io.BytesIO(), io.StringIO()
    d = run(_reactor(), argv, stdin=io.BytesIO(b""), stdout=stdout, stderr=stderr)
    status = await d.addTimeout(SAFETY, _reactor())
    return Result(status, stdout.getvalue(), stderr.getvalue())


# -- module:Class from the current directory, import errors with file and line -------------------


@pytest.fixture
def in_directory(tmp_path, monkeypatch):
    """``tmp_path`` as the current directory, which is not on sys.path (as under an installed
    console script); the test modules written there (``edge_*``) are forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith("edge_")]:
        del sys.modules[name]


def test_responder_module_in_the_current_directory_is_found(in_directory):
    (in_directory / "edge_cwd_responders.py").write_text(
        "from rsocket_tx import Responder\n\nclass Mine(Responder):\n    pass\n")
    settings = parse_server_settings(responder="edge_cwd_responders:Mine")
    assert settings.responder_factory.__name__ == "Mine"
    assert issubclass(settings.responder_factory, Responder)
    assert sys.path[0] == str(in_directory)  # put first, as gunicorn does
    import_named("publishers", "edge_cwd_responders:Mine")
    assert sys.path.count(str(in_directory)) == 1  # once


def test_import_error_names_file_and_line(in_directory):
    path = in_directory / "edge_broken.py"
    path.write_text("import os\n\nvalue = undefined_name\n")
    with pytest.raises(SettingsError) as raised:
        parse_server_settings(responder="edge_broken:X")
    assert str(raised.value) == (f"--responder: cannot import module 'edge_broken' from {path}"
                                 " line 3: NameError: name 'undefined_name' is not defined")


def test_syntax_error_names_file_and_line(in_directory):
    path = in_directory / "edge_syntax.py"
    path.write_text("import os\ndef f(:\n    pass\n")
    with pytest.raises(SettingsError) as raised:
        parse_server_settings(lease_policy="edge_syntax:Policy")
    assert str(raised.value).startswith(
        f"--lease-policy: cannot import module 'edge_syntax' from {path} line 2: SyntaxError")


def test_missing_module_says_where_it_looked(in_directory):
    with pytest.raises(SettingsError) as raised:
        parse_server_settings(responder="edge_nowhere:X")
    assert str(raised.value) == (
        "--responder: cannot import module 'edge_nowhere': no module named 'edge_nowhere'"
        f" (looked in the current directory {in_directory} and the Python path)")


def test_missing_module_inside_the_users_module_names_its_line(in_directory):
    path = in_directory / "edge_needs.py"
    path.write_text("import edge_not_installed_xyz\n")
    with pytest.raises(SettingsError) as raised:
        parse_server_settings(responder="edge_needs:X")
    assert f"from {path} line 1: ModuleNotFoundError" in str(raised.value)


@pytest_twisted.ensureDeferred
async def test_twistd_finds_the_responder_in_its_working_directory(tmp_path):
    """The real console script, started in the folder holding the module."""
    from twisted.internet import reactor

    (tmp_path / "edge_served.py").write_text(
        "from rsocket_tx import Payload, Responder\n\n"
        "class Upper(Responder):\n"
        "    def request_response(self, payload):\n"
        "        return Payload(payload.data.upper())\n")
    process = ChildProcess(re.compile(rb"listening on 127\.0\.0\.1:(\d+)"))
    # the repository on PYTHONPATH finds its twisted/plugins whatever the install mode; it
    # does not put the working directory on sys.path
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, [str(REPO),
                                                        os.environ.get("PYTHONPATH")])))
    reactor.spawnProcess(process, str(TWISTD), [str(TWISTD), "-n", "--pidfile=", "rsocket",
                                                "--listen", "tcp:0:interface=127.0.0.1",
                                                "--responder", "edge_served:Upper"],
                         env=env, path=str(tmp_path))
    try:
        port = await process.ready.addTimeout(SAFETY, reactor)
        rsocket = await rsocket_tx.connect(f"tcp://127.0.0.1:{port}", reactor=reactor)
        try:
            response = await rsocket.request_response(rsocket_tx.Payload(b"shout"))
        finally:
            await rsocket.close()
    finally:
        await process.stop()
    assert response.data == b"SHOUT"


# -- twistd: the cause first; a port in use in one line ------------------------------------------


@pytest.fixture
def twistd_options(monkeypatch):
    """twistd's own ServerOptions, with this repository's plugins (as in tests/test_tap.py)."""
    from twisted.plugin import pluginPackagePaths
    from twisted.scripts.twistd import ServerOptions

    import twisted.plugins

    if str(REPO) not in sys.path:
        monkeypatch.syspath_prepend(str(REPO))
    paths = [p for p in pluginPackagePaths("twisted.plugins") if p not in twisted.plugins.__path__]
    monkeypatch.setattr(twisted.plugins, "__path__", list(twisted.plugins.__path__) + paths)
    return ServerOptions()


def test_twistd_usage_error_comes_first(twistd_options, capsys):
    with pytest.raises(SystemExit) as exited:
        twistd_options.parseOptions(["-n", "rsocket", "--fragment-size", "10"])
    assert exited.value.code == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [
        "twistd rsocket: error: --fragment-size: must be at least 64 bytes, got 10",
        "usage: twistd [options] rsocket [options] ('twistd rsocket --help' lists them)",
    ]


def test_twistd_unknown_option_did_you_mean(twistd_options, capsys):
    with pytest.raises(SystemExit):
        twistd_options.parseOptions(["jini-mux", "--dispatchr", "m:C"])
    first = capsys.readouterr().err.splitlines()[0]
    assert first == ("twistd jini-mux: error: option --dispatchr not recognized"
                     " (did you mean --dispatcher?)")


def test_options_outside_twistd_still_raise_usage_error():
    from twisted.python import usage

    from rsocket_tx.faces.tap import Options

    with pytest.raises(usage.UsageError, match=r"did you mean --fragment-size\?"):
        Options().parseOptions(["--fragmen-size", "100"])


@pytest.fixture
def busy_port():
    """A port on 127.0.0.1 some other socket listens on."""
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    yield busy.getsockname()[1]
    busy.close()


def test_listen_failure_under_twistd_is_an_exit_not_a_traceback(busy_port):
    from rsocket_tx.faces.tap import build_service

    service = build_service(parse_server_settings(listen=[f"tcp:{busy_port}:interface=127.0.0.1"]),
                            _reactor())
    with pytest.raises(ListenFailed) as raised:
        service.privilegedStartService()
    assert isinstance(raised.value, SystemExit) and raised.value.code == 1
    assert isinstance(raised.value, Exception)  # twistd tells a daemon's parent, removes its pid
    assert str(raised.value) == f"cannot listen on 127.0.0.1:{busy_port}: Address already in use"
    assert not service.running


@pytest_twisted.ensureDeferred
async def test_twistd_port_in_use_is_one_line(busy_port):
    process = spawn(["-c", TWISTD_CODE, "-n", "--pidfile=", "rsocket",
                     "--listen", f"tcp:{busy_port}:interface=127.0.0.1"],
                    pattern=re.compile(rb"$^"))
    reason = await process.ended.addTimeout(SAFETY, _reactor())
    output = process.output.decode()
    assert reason.exitCode == 1, output
    assert "Traceback" not in output
    lines = [line for line in output.splitlines() if "cannot listen" in line]
    assert len(lines) == 1, output
    assert lines[0].endswith(
        f"RSocket server: cannot listen on 127.0.0.1:{busy_port}: Address already in use")


@pytest_twisted.ensureDeferred
async def test_cli_serve_port_in_use_says_the_same(busy_port):
    result = await run_cli(["serve", f"tcp:{busy_port}:interface=127.0.0.1"])
    assert result.status == EXIT_CONNECTION
    assert result.stderr == (f"rsocket-tx: cannot listen on 127.0.0.1:{busy_port}:"
                             " Address already in use\n")


def test_unreadable_tls_key_is_a_usage_error(tmp_path):
    with pytest.raises(SettingsError, match="No such file or directory"):
        parse_server_settings(listen=[f"ssl:0:privateKey={tmp_path / 'missing.pem'}"])


# -- --version, "did you mean" -------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_version():
    result = await run_cli(["--version"])
    assert (result.status, result.stderr) == (EXIT_OK, "")
    build = "compiled: mypyc" if rsocket_tx.compiled else "pure Python"
    assert result.stdout == f"rsocket-tx {rsocket_tx.__version__} ({build})\n".encode()


def test_did_you_mean_an_option():
    with pytest.raises(UsageError, match=r"unrecognized arguments: --fragmnt 100 \(did you mean"
                                         r" --fragment\?\)"):
        parse_args(["stream", "tcp://h:1", "--fragmnt", "100"])
    with pytest.raises(UsageError, match=r"did you mean --responder-arg\?"):
        parse_args(["serve", "--responder-ars", "a=b"])


def test_did_you_mean_a_command_and_a_choice():
    with pytest.raises(UsageError, match=r"invalid choice: 'stram'.*\(did you mean 'stream'\?\)"):
        parse_args(["stram", "tcp://h:1"])
    with pytest.raises(UsageError, match=r"\(did you mean 'json'\?\)"):
        parse_args(["request", "tcp://h:1", "--output", "jsn"])


def test_suggest_option():
    assert suggest_option("--fragmnt-size", ["fragment-size=", "help"]) == \
        " (did you mean --fragment-size?)"
    assert suggest_option("--zzz", ["fragment-size=", "help"]) == ""


@pytest.mark.parametrize(("typed", "hint"), [
    ("localhost:7878", " (did you mean tcp://localhost:7878?)"),
    ("127.0.0.1:7878", " (did you mean tcp://127.0.0.1:7878?)"),
    ("[::1]:7878", " (did you mean tcp://[::1]:7878?)"),
    ("7878", " (did you mean tcp://localhost:7878?)"),
    ("tcp://localhost:7878", ""),
    ("some words", ""),
])
def test_scheme_hint(typed, hint):
    assert scheme_hint(typed) == hint


@pytest_twisted.ensureDeferred
async def test_host_port_without_a_scheme():
    result = await run_cli(["request", "localhost:7878", "-d", "x"])
    assert result.status == EXIT_USAGE
    assert result.stderr.rstrip().endswith("(did you mean tcp://localhost:7878?)")
    with pytest.raises(UsageError, match=r"did you mean tcp://localhost:7878\?"):
        parse_args(["serve", "localhost:7878"])


# -- library log lines only with --debug ---------------------------------------------------------


def test_log_level_of_each_command():
    from twisted.logger import LogLevel

    assert log_level(parse_args(["request", "tcp://h:1"])) == LogLevel.critical
    assert log_level(parse_args(["request", "tcp://h:1", "--debug"])) == LogLevel.debug
    assert log_level(parse_args(["serve"])) == LogLevel.info
    assert log_level(parse_args(["serve", "--debug"])) == LogLevel.debug


class _Silent(Protocol):
    """Accepts a connection and never answers (a server of another protocol waiting for more)."""


@pytest_twisted.async_yield_fixture
async def silent_port():
    from twisted.internet.endpoints import TCP4ServerEndpoint

    port = await TCP4ServerEndpoint(_reactor(), 0, interface="127.0.0.1").listen(
        Factory.forProtocol(_Silent))
    yield port.getHost().port
    await port.stopListening()


@pytest_twisted.ensureDeferred
async def test_no_library_log_lines_without_debug(silent_port):
    """A real process: a WebSocket client whose handshake times out logs nothing but its one
    line of error."""
    process = spawn(["-c", "from rsocket_tx.faces.main import main; main()", "request",
                     f"ws://127.0.0.1:{silent_port}/rsocket", "--connect-timeout", "0.5"],
                    pattern=re.compile(rb"$^"))
    reason = await process.ended.addTimeout(SAFETY, _reactor())
    lines = process.output.decode().splitlines()
    assert reason.exitCode == EXIT_CONNECTION
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"rsocket-tx: cannot connect to ws://127.0.0.1:{silent_port}/")


# -- a TLS or WebSocket client at the wrong kind of port -----------------------------------------


@pytest_twisted.async_yield_fixture
async def plain_port():
    """A plain TCP RSocket server (the demo responder)."""
    from rsocket_tx import serve
    from rsocket_tx.apps.demo import DemoResponder

    port = await serve("tcp:0:interface=127.0.0.1", DemoResponder, reactor=_reactor())
    yield port.getHost().port
    await port.stopListening()


@pytest_twisted.ensureDeferred
async def test_tls_client_at_a_plain_tcp_server(plain_port):
    uri = f"tls://127.0.0.1:{plain_port}"
    result = await run_cli(["request", uri, "-d", "x"])
    assert result.status == EXIT_CONNECTION
    assert result.stderr.startswith(f"rsocket-tx: cannot connect to {uri}: ")
    assert result.stderr.endswith(f"; the server at {uri} did not answer a TLS handshake: is it a"
                                  " plain tcp:// server?\n")


@pytest_twisted.ensureDeferred
async def test_websocket_client_at_a_plain_tcp_server(plain_port):
    uri = f"ws://127.0.0.1:{plain_port}/rsocket"
    result = await run_cli(["request", uri, "-d", "x"])
    assert result.status == EXIT_CONNECTION
    assert result.stderr.endswith(f"; the server at {uri} did not answer a WebSocket (HTTP)"
                                  " handshake: is it a tcp:// or tls:// server?\n")


@pytest_twisted.ensureDeferred
async def test_tls_client_at_a_server_that_never_answers(silent_port):
    """Without a connect timeout this waits for ever: the handshake never ends."""
    uri = f"tls://127.0.0.1:{silent_port}"
    result = await run_cli(["request", uri, "-d", "x", "--connect-timeout", "0.2"])
    assert result.status == EXIT_CONNECTION
    assert result.stderr == (f"rsocket-tx: cannot connect to {uri}: no connection within 0.2 s;"
                             f" the server at {uri} did not answer a TLS handshake: is it a"
                             " plain tcp:// server?\n")


def test_connect_timeout_option():
    assert parse_args(["request", "tcp://h:1"]).connect_timeout == cli.DEFAULT_CONNECT_TIMEOUT
    assert parse_args(["fnf", "tcp://h:1", "--connect-timeout", "2.5"]).connect_timeout == 2.5
    with pytest.raises(UsageError, match="--connect-timeout: must be a positive number"):
        parse_args(["fnf", "tcp://h:1", "--connect-timeout", "0"])


# -- secrets are never written back --------------------------------------------------------------


def test_secrets_in_a_command_line():
    assert secrets_in(["request", "tcp://h:1", "--auth-simple", "alice:pa:ss"]) == ["pa:ss"]
    assert secrets_in(["request", "tcp://h:1", "--auth-simple=justapassword"]) == \
        ["justapassword"]
    assert secrets_in(["request", "tcp://h:1", "--auth-b", "tok3n"]) == ["tok3n"]  # abbreviated
    assert secrets_in(["request", "tcp://bob:hunter2@h:1"]) == ["hunter2"]
    assert secrets_in(["request", "tcp://h:1", "-d", "alice:x"]) == []
    assert redact("a 'hunter2' b", ["hunter2"]) == "a '***' b"


@pytest_twisted.ensureDeferred
async def test_usage_errors_do_not_echo_secrets():
    result = await run_cli(["request", "tcp://h:1", "--auth-simple", "no-colon-s3cret"])
    assert result.status == EXIT_USAGE
    assert "--auth-simple: expected USER:PASSWORD" in result.stderr
    assert "s3cret" not in result.stderr
    result = await run_cli(["request", "tcp://bob:s3cret-pw@127.0.0.1:1", "-d", "x"])
    assert result.status == EXIT_USAGE
    assert "s3cret-pw" not in result.stderr and "tcp://bob:***@127.0.0.1:1" in result.stderr


@pytest.mark.parametrize("auth", [
    ["--auth-simple", "alice:" + "s3cret-" * 12],  # long: its frame's metadata is cut
    ["--auth-bearer", "t0ken-" + "x" * 20],
    ["--auth-simple", "alice:s3cret-pw", "--setup-auth"],
])
@pytest_twisted.ensureDeferred
async def test_debug_frames_do_not_show_secrets(plain_port, auth):
    secret = auth[1].partition(":")[2] or auth[1]
    result = await run_cli(["request", f"tcp://127.0.0.1:{plain_port}", "-d", "hi",
                            "--route", "r", "--debug", *auth])
    assert result.status == EXIT_OK, result.stderr
    assert "send REQUEST_RESPONSE" in result.stderr
    for part in (secret, secret[:8], secret[-8:]):
        assert part not in result.stderr
    assert "***" in result.stderr
