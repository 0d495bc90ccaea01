"""rsocket_tx.faces.tap (the twistd plugin): options, validation, the service, the plugin,
twistd."""

from __future__ import annotations

import functools
import os
import re
import signal
import sys
from pathlib import Path

import pytest
import pytest_twisted
from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import IServiceMaker, MultiService
from twisted.internet import error as internet_error
from twisted.internet.defer import Deferred
from twisted.internet.protocol import ProcessProtocol
from twisted.logger import LogLevel, capturedLogs, formatEvent
from twisted.plugin import getPlugins
from twisted_support import SERVER_OPTIONS_ARGV, options_usage_error, parse_options

from rsocket_tx import protocol
from rsocket_tx.apps.demo import DemoResponder
from rsocket_tx.core import frames
from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.errors import RejectedSetupError, UnsupportedSetupError
from rsocket_tx.core.payload import Payload
from rsocket_tx.faces.tap import (
    Options,
    ServerSettings,
    SettingsError,
    build_service,
    describe_frame,
    load_responder,
    make_frame_logger,
    makeService,
    parse_server_settings,
)
from rsocket_tx.responder import Responder, SetupInfo

REPO = Path(__file__).resolve().parent.parent
#: ``twistd`` itself, run with ``python -c`` (so the working directory is on sys.path).
TWISTD = "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; run()"


#: ``parse(*argv)``: the options parsed; ``usage_error(*argv)``: the UsageError's message
parse = functools.partial(parse_options, Options)
usage_error = functools.partial(options_usage_error, Options)


class EchoResponder(Responder):
    """A responder for the --responder tests (importable as test_tap:EchoResponder)."""

    def request_response(self, payload):
        return payload


class NotAResponder:
    pass


# -- options -----------------------------------------------------------------------------------


#: the settings of no options at all (``type(value)`` is checked too, so ``None`` and the
#: booleans and the responder class are checked by identity)
DEFAULT_FIELDS = {
    "listen": ("tcp:7878",),
    "responder_factory": DemoResponder,
    "fragment_size": None,
    "max_frame_size": 16_777_215,
    "max_reassembled_size": 67_108_864,
    "setup_timeout": 30_000,
    "min_keepalive_interval": 0,
    "max_lifetime_limit": 600_000,
    "max_setup_frame_size": 131_072,
    "max_reassembly_buffer_size": 67_108_864,
    "max_connections": 4096,
    "debug": False,
}
#: every option given, --listen in all three spellings
ALL_OPTIONS_ARGV = (
    "--listen",
    "tcp:7878",
    "-l",
    "tcp://[::1]:7879",
    "--listen=tcp:port=7880:interface=127.0.0.1",
    *SERVER_OPTIONS_ARGV,
)
ALL_OPTIONS_FIELDS = {
    "listen": ("tcp:7878", "tcp://[::1]:7879", "tcp:port=7880:interface=127.0.0.1"),
    "responder": "rsocket_tx.apps.demo:DemoResponder",
    "responder_factory": DemoResponder,
    "fragment_size": 1024,
    "max_frame_size": 65536,
    "max_reassembled_size": 1_000_000,
    "setup_timeout": 5000,
    "min_keepalive_interval": 100,
    "max_lifetime_limit": 300_000,
    "max_setup_frame_size": 4096,
    "max_reassembly_buffer_size": 2_000_000,
    "max_connections": 500,
    "debug": True,
}


def test_defaults_are_the_server_settings_defaults():
    assert parse()["settings"] == ServerSettings(responder_factory=DemoResponder)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [((), DEFAULT_FIELDS), (ALL_OPTIONS_ARGV, ALL_OPTIONS_FIELDS)],
    ids=["defaults", "all-options"],
)
def test_options_build_settings(argv, expected):
    settings = parse(*argv)["settings"]
    for name, value in expected.items():
        actual = getattr(settings, name)
        assert actual == value and type(actual) is type(value), name


def test_fragment_minimum_is_accepted():
    assert parse("--fragment-size", "64")["settings"].fragment_size == 64


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--fragment-size", "abc"), "--fragment-size: expected an integer number of bytes"),
        (("--fragment-size", "63"), "--fragment-size: must be at least 64 bytes, got 63"),
        (("--fragment-size", "0"), "must be at least 64"),
        (("--fragment-size", "16777216"), "must be at most 16777215"),
        (("--max-frame-size", "16777216"), "--max-frame-size: must be at most 16777215"),
        (("--max-frame-size", "10"), "--max-frame-size: must be at least 64"),
        (("--max-frame-size", "1.5"), "--max-frame-size: expected an integer"),
        (("--max-reassembled-size", "0"), "--max-reassembled-size: must be at least 1"),
        (("--setup-timeout", "0"), "--setup-timeout: must be at least 1 milliseconds"),
        (("--setup-timeout", "soon"), "--setup-timeout: expected an integer number of millis"),
        (("--min-keepalive-interval", "-1"), "--min-keepalive-interval: must be at least 0"),
        (("--max-lifetime-limit", "x"), "--max-lifetime-limit: expected an integer"),
        (("--listen", "foo://x:1"), "--listen: unsupported URI scheme 'foo'"),
        (("--listen", "tcp://0.0.0.0"), "--listen: missing port"),
        (("--listen", "bogus:1"), "Unknown endpoint type: 'bogus'"),
        (("--listen", "tcp:1", "--listen", "tcp:1"), "the same endpoint is given twice"),
        (("--responder", "no_such_module_xyz:Thing"), "cannot import module 'no_such_module_xyz'"),
        (("--responder", "rsocket_tx.apps.demo:Nope"), "has no attribute 'Nope'"),
        (("--responder", "rsocket_tx.core.payload:Payload"), "is not a subclass of"),
        (("--responder", "os:sep"), "is not a subclass of rsocket_tx.Responder"),
        (("--responder", "DemoResponder"), "expected package.module:Class"),
        (("--responder", ":X"), "expected package.module:Class"),
        (("--bogus",), "option --bogus not recognized"),
    ],
)
def test_invalid(argv, message):
    assert message in usage_error(*argv)


def test_responder_not_a_class():
    assert "is not a subclass" in usage_error("--responder", "rsocket_tx.apps.demo:parse_count")


def test_responder_forms(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    assert load_responder("test_tap:EchoResponder").__name__ == "EchoResponder"
    assert load_responder("rsocket_tx.apps.demo.DemoResponder") is DemoResponder
    assert load_responder(" rsocket_tx.apps.demo:DemoResponder ") is DemoResponder


def test_responder_nested_attribute(tmp_path, monkeypatch):
    (tmp_path / "nested_responders.py").write_text(
        "from rsocket_tx.responder import Responder\n"
        "class Outer:\n"
        "    class Inner(Responder):\n"
        "        pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert load_responder("nested_responders:Outer.Inner").__qualname__ == "Outer.Inner"


def test_responder_module_that_fails_to_import(tmp_path, monkeypatch):
    (tmp_path / "broken_responders.py").write_text("raise RuntimeError('kaboom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    message = usage_error("--responder", "broken_responders:X")
    where = tmp_path / "broken_responders.py"
    assert f"cannot import module 'broken_responders' from {where} line 1: RuntimeError: kaboom" \
        in message


def test_responder_not_a_subclass_message(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    with pytest.raises(SettingsError, match="'test_tap:NotAResponder' is not a subclass"):
        load_responder("test_tap:NotAResponder")


def test_parse_server_settings_accepts_python_values():
    settings = parse_server_settings(
        listen=["tcp:1"], responder=EchoResponder, fragment_size=128, setup_timeout=10
    )
    assert settings.responder_factory is EchoResponder
    assert settings.responder.endswith(":EchoResponder")
    assert settings.fragment_size == 128
    assert settings.setup_timeout == 10


@pytest.mark.parametrize("value", [True, 1.5, "12 bytes"])
def test_parse_server_settings_rejects_non_integers(value):
    with pytest.raises(SettingsError, match="--max-frame-size: expected an integer"):
        parse_server_settings(max_frame_size=value)


def test_parse_server_settings_rejects_non_responder_class():
    with pytest.raises(SettingsError, match="not a Responder subclass"):
        parse_server_settings(responder=NotAResponder)


class ConfiguredResponder(Responder):
    """A responder taking keyword arguments (importable as test_tap:ConfiguredResponder)."""

    made: list = []

    def __init__(self, *, greeting: str = "hello", times="1") -> None:
        self.greeting = greeting
        self.times = int(times)  # ValueError for a non-number: a responder rejecting its args
        if self.times < 1:
            raise ValueError(f"times must be >= 1, got {self.times}")
        self.made.append(self)

    def request_response(self, payload):
        return Payload(self.greeting.encode() * self.times)


def test_responder_args_are_keyword_arguments_of_the_responder(monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    settings = parse("--responder", "test_tap:ConfiguredResponder", "--responder-arg",
                     "greeting=hi=there", "--responder-arg", " times = 2")["settings"]
    # split at the first "=", the key stripped, the value kept as typed (a string)
    assert settings.responder_args == (("greeting", "hi=there"), ("times", " 2"))
    responder = settings.make_responder_factory()()
    assert (type(responder).__name__, responder.greeting, responder.times) == \
        ("ConfiguredResponder", "hi=there", 2)
    # without any: the class itself, as before
    plain = parse("--responder", "test_tap:ConfiguredResponder")["settings"]
    assert plain.responder_args == () and plain.make_responder_factory() is \
        plain.responder_factory


def test_parse_server_settings_takes_responder_args_in_several_forms():
    for form in ("times=3", ["times=3"], {"times": 3}):
        settings = parse_server_settings(responder=ConfiguredResponder, responder_args=form)
        assert settings.responder_args == (("times", "3"),)


def test_build_service_passes_responder_args_to_every_connection(recording_factory):
    settings = parse_server_settings(responder=ConfiguredResponder,
                                     responder_args=["greeting=yo", "times=2"],
                                     min_keepalive_interval=1000)
    factory = build_service(settings).factory.responder_factory
    ConfiguredResponder.made = []
    one, two = factory(), factory()
    assert one is not two and ConfiguredResponder.made == [one, two]
    assert (one.greeting, one.times) == ("yo", 2)
    # the keepalive limits still apply to the configured class
    with pytest.raises(UnsupportedSetupError):
        one.accept_setup(_setup(keepalive_interval=10))


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--responder-arg", "novalue"), "--responder-arg: expected KEY=VALUE, got 'novalue'"),
        (("--responder-arg", "=v"), "the key must be a Python identifier"),
        (("--responder-arg", "a-b=1"), "the key must be a Python identifier"),
        (("--responder-arg", "class=1"), "the key must be a Python identifier"),
        (("--responder-arg", "times=1", "--responder-arg", "times=2"), "times is given twice"),
        (("--responder-arg", "times=x"),
         "ConfiguredResponder rejected times=x: ValueError: invalid literal"),
        (("--responder-arg", "times=0"), "rejected times=0: ValueError: times must be >= 1"),
        (("--responder-arg", "colour=red"),
         "ConfiguredResponder: got an unexpected keyword argument 'colour' (it takes: "
         "greeting, times)"),
    ],
)
def test_bad_responder_args(argv, message, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    assert message in usage_error("--responder", "test_tap:ConfiguredResponder", *argv)


def test_responder_args_for_the_demo_responder_are_refused():
    assert "the demo responder: got an unexpected keyword argument 'x' (it takes no " \
        "arguments)" in usage_error("--responder-arg", "x=1")


def test_too_many_responder_args():
    with pytest.raises(SettingsError, match="at most 256"):
        parse_server_settings(responder_args=[f"k{i}=v" for i in range(257)])


def test_settings_error_is_a_value_error():
    assert issubclass(SettingsError, ValueError)


def test_usage_text_lists_options():
    text = str(Options())
    for option in (
        "--listen",
        "--responder",
        "--fragment-size",
        "--max-frame-size",
        "--max-reassembled-size",
        "--setup-timeout",
        "--min-keepalive-interval",
        "--max-lifetime-limit",
        "--responder-arg",
        "--debug",
    ):
        assert option in text


# -- the service -------------------------------------------------------------------------------


class RecordingFactory:
    """Stands in for RSocketServerFactory: records how build_service made it."""

    noisy = True

    def __init__(self, responder_factory, **kwargs):
        self.responder_factory = responder_factory
        self.kwargs = kwargs


@pytest.fixture
def recording_factory(monkeypatch):
    monkeypatch.setattr(protocol, "RSocketServerFactory", RecordingFactory)
    return RecordingFactory


def test_make_service_structure(recording_factory):
    options = parse(
        "--listen",
        "tcp:0:interface=127.0.0.1",
        "--listen",
        "tcp://127.0.0.1:0",
        "--fragment-size",
        "100",
        "--max-frame-size",
        "1000",
        "--max-reassembled-size",
        "5000",
        "--setup-timeout",
        "1234",
    )
    service = makeService(options)
    assert isinstance(service, MultiService)
    children = list(service)
    assert len(children) == 2
    assert all(isinstance(c, StreamServerEndpointService) for c in children)
    factory = service.factory
    assert all(c.factory is factory for c in children)
    assert factory.responder_factory is DemoResponder
    assert factory.kwargs == {
        "reactor": None,
        # the settings travel as one ConnectionConfig
        "config": ConnectionConfig(
            fragment_size=100,
            max_frame_size=1000,
            max_reassembled_size=5000,
            setup_timeout=1234,
            max_concurrent_streams=256,
            max_send_buffer_size=67_108_864,
            drain_timeout=10_000,
            resume=False,
            resume_session_timeout=120_000,
            max_resume_buffer_size=16_777_216,
            max_resume_sessions=10_000,
            lease_grace=1_000,
        ),
        "lease_policy": None,
        "frame_logger": None,
    }
    assert factory.noisy is False


def test_make_service_debug_sets_a_frame_logger(recording_factory):
    service = makeService(parse("--debug"))
    assert callable(service.factory.kwargs["frame_logger"])


def test_make_service_with_responder(recording_factory, monkeypatch):
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    service = makeService(parse("--responder", "test_tap:EchoResponder"))
    assert service.factory.responder_factory.__name__ == "EchoResponder"


def _setup(keepalive_interval=20_000, max_lifetime=90_000) -> SetupInfo:
    return SetupInfo(
        version=(1, 0),
        keepalive_interval=keepalive_interval,
        max_lifetime=max_lifetime,
        metadata_mime_type="application/octet-stream",
        data_mime_type="application/octet-stream",
        payload=Payload(),
    )


class PickyResponder(Responder):
    def accept_setup(self, setup):
        if setup.payload.data == b"no":
            raise RejectedSetupError("said no")


def test_keepalive_limits(recording_factory):
    settings = parse_server_settings(
        responder=PickyResponder, min_keepalive_interval=1000, max_lifetime_limit=60_000
    )
    factory = build_service(settings).factory
    # the max lifetime limit is a connection setting, enforced by the RSocket core
    # (tests/core/test_setup_invalid.py)
    assert factory.kwargs["config"].max_lifetime_limit == 60_000
    limited = factory.responder_factory
    assert issubclass(limited, PickyResponder)
    responder = limited()
    assert responder.accept_setup(_setup(1000, 60_000)) is None
    with pytest.raises(UnsupportedSetupError, match="keepalive interval 999 ms is below"):
        responder.accept_setup(_setup(keepalive_interval=999))
    refused = _setup(1000, 60_000)
    refused.payload = Payload(b"no")
    with pytest.raises(RejectedSetupError, match="said no"):
        responder.accept_setup(refused)  # the class's own check still runs


def test_no_keepalive_limits_keeps_the_class(recording_factory):
    settings = parse_server_settings(responder=PickyResponder)
    assert build_service(settings).factory.responder_factory is PickyResponder


@pytest_twisted.ensureDeferred
async def test_service_listens_and_stops():
    service = build_service(
        parse_server_settings(listen=["tcp:0:interface=127.0.0.1", "tcp://127.0.0.1:0"])
    )
    with capturedLogs() as events:
        service.startService()
        try:
            ports = await service.when_listening()
            addresses = [port.getHost() for port in ports]
        finally:
            await service.stopService()
    assert [a.host for a in addresses] == ["127.0.0.1", "127.0.0.1"]
    messages = [formatEvent(e) for e in events]
    for address in addresses:
        assert address.port > 0
        assert any(f"listening on 127.0.0.1:{address.port}" in m for m in messages)


@pytest_twisted.ensureDeferred
async def test_service_fails_to_start_when_a_port_is_taken():
    first = build_service(parse_server_settings(listen=["tcp:0:interface=127.0.0.1"]))
    first.startService()
    try:
        [port] = await first.when_listening()
        taken = port.getHost().port
        second = build_service(
            parse_server_settings(
                listen=["tcp:0:interface=127.0.0.1", f"tcp:{taken}:interface=127.0.0.1"]
            )
        )
        with pytest.raises(internet_error.CannotListenError):
            second.startService()
        assert not second.running
        # The endpoint that did listen is being closed again.
        ok, _ = second.endpoints
        stopped = await ok.when_listening()
        assert stopped.disconnecting
    finally:
        await first.stopService()


# -- the frame log -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("frame", "text"),
    [
        (
            frames.RequestStreamFrame(stream_id=1, initial_request_n=256, data=b"5"),
            "REQUEST_STREAM stream=1 initial_request_n=256 data=b'5'",
        ),
        (
            frames.PayloadFrame(stream_id=3, data=b"x", metadata=b"", complete=True, next=True),
            "PAYLOAD stream=3 data=b'x' metadata=b'' complete next",
        ),
        (
            frames.ErrorFrame(stream_id=5, error_code=0x201, data=b"boom"),
            "ERROR stream=5 error_code=APPLICATION_ERROR data=b'boom'",
        ),
        (
            frames.KeepaliveFrame(respond=True, last_received_position=0),
            "KEEPALIVE stream=0 respond last_received_position=0 data=b''",
        ),
        (frames.CancelFrame(stream_id=7), "CANCEL stream=7"),
    ],
)
def test_describe_frame(frame, text):
    assert describe_frame(frame) == text


def test_describe_frame_cuts_long_bytes():
    text = describe_frame(frames.PayloadFrame(stream_id=1, data=b"a" * 1000, next=True))
    assert "...<1000 bytes>" in text
    assert len(text) < 200


def test_frame_logger_to_twisted_logger():
    logger = make_frame_logger()
    with capturedLogs() as events:
        logger("send", frames.CancelFrame(stream_id=9))
    [event] = events
    assert event["log_level"] == LogLevel.debug
    assert event["log_namespace"] == "rsocket_tx.frames"
    assert formatEvent(event) == "send CANCEL stream=9"


def test_frame_logger_to_a_callable():
    lines = []
    make_frame_logger(lines.append)("recv", frames.RequestNFrame(stream_id=1, request_n=5))
    assert lines == ["recv REQUEST_N stream=1 request_n=5"]


# -- the twistd plugin ---------------------------------------------------------------------------


@pytest.fixture
def repo_on_path(monkeypatch):
    """Make the repo's twisted/plugins visible as it is to ``twistd`` run from the repo root
    (or with an editable install, whose .pth file adds the repo root): the repo root on
    sys.path and in the plugin package's search path (computed once, when twisted.plugins was
    first imported)."""
    from twisted.plugin import pluginPackagePaths

    import twisted.plugins

    if str(REPO) not in sys.path:
        monkeypatch.syspath_prepend(str(REPO))
    paths = [p for p in pluginPackagePaths("twisted.plugins") if p not in twisted.plugins.__path__]
    monkeypatch.setattr(twisted.plugins, "__path__", list(twisted.plugins.__path__) + paths)


def test_plugin_is_discovered(repo_on_path):
    makers = {maker.tapname: maker for maker in getPlugins(IServiceMaker)}
    assert "rsocket" in makers
    maker = makers["rsocket"]
    assert maker.name == "rsocket"
    assert maker.options is Options
    assert maker.makeService is makeService
    assert "RSocket" in maker.description


def test_plugin_module_is_lazy():
    source = (REPO / "twisted" / "plugins" / "rsocket_tx_plugin.py").read_text()
    assert "import rsocket_tx" not in source and "from rsocket_tx" not in source
    assert not (REPO / "twisted" / "plugins" / "__init__.py").exists()
    assert not (REPO / "twisted" / "__init__.py").exists()


class _Process(ProcessProtocol):
    """Collects a child's output; ``matched`` fires with the first match of ``pattern``."""

    def __init__(self, pattern: re.Pattern) -> None:
        self.pattern = pattern
        self.output = b""
        self.matched: Deferred = Deferred()
        self.ended: Deferred = Deferred()

    def connectionMade(self):
        self.transport.closeStdin()

    def outReceived(self, data):
        self._received(data)

    def errReceived(self, data):
        self._received(data)

    def _received(self, data):
        self.output += data
        if not self.matched.called:
            match = self.pattern.search(self.output)
            if match:
                self.matched.callback(match)

    def processEnded(self, reason):
        if not self.matched.called:
            self.matched.errback(AssertionError(f"ended first:\n{self.output.decode()}"))
        self.ended.callback(reason.value)

    def stop(self) -> Deferred:
        """SIGTERM the child unless it has ended; fires with how it ended (60 s at most)."""
        from twisted.internet import reactor

        if not self.ended.called:
            self.transport.signalProcess(signal.SIGTERM)
        return self.ended.addTimeout(60, reactor)


@pytest_twisted.ensureDeferred
async def test_twistd_serves_the_demo(tmp_path):
    """``twistd -n rsocket`` end to end: a request-response and a request-stream."""
    from twisted.internet import reactor

    from rsocket_tx import connect

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    process = _Process(re.compile(rb"listening on 127\.0\.0\.1:(\d+)"))
    argv = [
        sys.executable,
        "-c",
        TWISTD,
        "-n",
        "--pidfile=",
        "rsocket",
        "--listen",
        "tcp:0:interface=127.0.0.1",
        "--debug",
    ]
    # The repo root as working directory: python -c puts it on sys.path, so twisted/plugins is
    # found whatever the install mode.
    reactor.spawnProcess(process, sys.executable, argv, env=env, path=str(REPO))
    try:
        match = await process.matched.addTimeout(60, reactor)
        port = int(match.group(1))
        rsocket = await connect(f"tcp://127.0.0.1:{port}", reactor=reactor)
        try:
            response = await rsocket.request_response(Payload(b"hi", b"there"))
            assert response == Payload(b"hi", b"there")
            received = await rsocket.request_stream(Payload(b"3")).collect()
            assert [p.data for p in received] == [b"0", b"1", b"2"]
        finally:
            await rsocket.close()
    finally:
        await process.stop()
    assert b"recv REQUEST_RESPONSE" in process.output  # --debug frame log
    assert b"send PAYLOAD" in process.output


@pytest_twisted.ensureDeferred
async def test_twistd_rejects_bad_options(tmp_path):
    from twisted.internet import reactor

    process = _Process(re.compile(rb"--fragment-size: must be at least 64 bytes"))
    argv = [sys.executable, "-c", TWISTD, "-n", "rsocket", "--fragment-size", "10"]
    reactor.spawnProcess(process, sys.executable, argv, env=dict(os.environ), path=str(REPO))
    await process.matched.addTimeout(60, reactor)
    reason = await process.ended.addTimeout(60, reactor)
    assert reason.exitCode != 0
