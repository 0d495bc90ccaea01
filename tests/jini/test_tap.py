"""rsocket_tx.jini.tap, the ``twistd jini-mux`` plugin: endpoint strings and URIs, options and
their validation, the plugin, the service (in process), and a real ``twistd`` serving TCP and
TLS on loopback."""

from __future__ import annotations

import functools
import re

import pytest
import pytest_twisted
from process_support import REPO, TWISTD, assert_ended_cleanly
from process_support import spawn as spawn_child
from tlscerts import make_tls_files
from twisted.application.service import IServiceMaker
from twisted.internet import error as internet_error
from twisted.internet import reactor
from twisted.internet.endpoints import HostnameEndpoint, TCP4ServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.plugin import getPlugins
from twisted_support import failed_start_on_a_taken_port, options_usage_error, parse_options, wait

from rsocket_tx.jini import tap
from rsocket_tx.jini.client import JiniMuxClient
from rsocket_tx.jini.config import JiniMuxConfig
from rsocket_tx.jini.echo import EchoDispatcher
from rsocket_tx.jini.server import Dispatcher

aio = pytest_twisted.ensureDeferred
LISTENING = re.compile(
    rb"Jini ERI mux server listening on 127\.0\.0\.1:(\d+) \(endpoint ([^)\n]+)\)")


class UpperDispatcher(Dispatcher):
    """Answers each request with its body in upper case (for ``--dispatcher``)."""

    async def dispatch(self, request):
        request.response.write((await request.read_all()).upper())


class NotADispatcher:
    pass


UPPER = f"{__name__}:UpperDispatcher"


#: ``parse(*argv)``: the options parsed; ``usage_error(*argv)``: the UsageError's message
parse = functools.partial(parse_options, tap.Options)
usage_error = functools.partial(options_usage_error, tap.Options)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


# -- endpoints -----------------------------------------------------------------------------------


@pytest.mark.parametrize("spec", [
    "jini+tcp://127.0.0.1:9000", "JINI+TCP://127.0.0.1:9000", "tcp://127.0.0.1:9000",
    "tcp:host=127.0.0.1:port=9000",
])
def test_client_endpoint_forms(spec):
    endpoint = tap.client_endpoint(reactor, spec)
    assert endpoint is not None
    if "://" in spec:
        assert isinstance(endpoint, HostnameEndpoint)


def test_client_endpoint_object_is_returned_unchanged():
    endpoint = HostnameEndpoint(reactor, "localhost", 9000)
    assert tap.client_endpoint(reactor, endpoint) is endpoint


@aio
async def test_server_uri_listens_on_its_host():
    endpoint = tap.server_endpoint(reactor, "jini+tcp://127.0.0.1:0")
    port = await endpoint.listen(Factory.forProtocol(Protocol))
    try:
        assert port.getHost().host == "127.0.0.1"
    finally:
        await port.stopListening()


def test_tls_uri_reads_its_files(certs, tmp_path):
    assert tap.client_endpoint(reactor, f"jini+tls://localhost:9443?trustRoots={certs.ca}")
    assert tap.server_endpoint(
        reactor, f"jini+tls://127.0.0.1:0?privateKey={certs.server_key}"
        f"&certKey={certs.server_cert}")
    with pytest.raises(ValueError, match="missing"):
        tap.client_endpoint(reactor, f"jini+tls://localhost:9443?trustRoots={tmp_path}/missing")


@pytest.mark.parametrize(("spec", "message"), [
    ("ws://localhost:8080/", "not over WebSocket"),
    ("jini+wss://localhost:8443/", "not over WebSocket"),
    ("ws:host=localhost:port=8080", "not over WebSocket"),
    ("jini+://localhost:9000", "missing transport"),
    ("jini+http://localhost:9000", "unsupported URI scheme 'http'"),
    ("jini+tcp://localhost", "missing port"),
    ("nope:9000", "invalid client endpoint"),
])
def test_bad_client_endpoints(spec, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        tap.client_endpoint(reactor, spec)


# -- options -------------------------------------------------------------------------------------


def test_defaults():
    settings = parse()["settings"]
    assert settings.listen == (tap.DEFAULT_LISTEN,) == ("tcp:9000",)
    assert settings.dispatcher_factory is EchoDispatcher
    assert settings.config == JiniMuxConfig()


ALL_OPTIONS = {
    "initial-ration": ("65536", 65_536),
    "fragment-size": ("100", 100),
    "max-sessions": ("16", 16),
    "max-session-buffer": ("2_000_000", 2_000_000),
    "max-connection-buffer": ("30000000", 30_000_000),
    "handshake-timeout": ("500", 500),
    "ping-timeout": ("600", 600),
    "max-send-buffer-size": ("4096", 4096),
    "drain-timeout": ("0", 0),
    "idle-timeout": ("1000", 1000),
}


def test_every_option():
    argv = ["--listen", "tcp:0:interface=127.0.0.1", "-l", "jini+tcp://127.0.0.1:0",
            "--listen=tcp://[::1]:0", "--dispatcher", UPPER]
    for name, (value, _) in ALL_OPTIONS.items():
        argv += [f"--{name}", value]
    settings = parse(*argv)["settings"]
    assert settings.listen == ("tcp:0:interface=127.0.0.1", "jini+tcp://127.0.0.1:0",
                               "tcp://[::1]:0")
    assert settings.dispatcher == UPPER and settings.dispatcher_factory is UpperDispatcher
    for name, (_, number) in ALL_OPTIONS.items():
        assert getattr(settings.config, name.replace("-", "_")) == number, name
    assert set(ALL_OPTIONS) == {o.name for o in tap.CONFIG_OPTIONS}


def test_unlimited_ration_and_a_large_one():
    assert parse("--initial-ration", "0")["settings"].config.ration is None
    big = parse("--initial-ration", str(0xFFFF * 256))["settings"].config
    assert big.initial_ration == 0xFFFF * 256
    # the session buffers follow a ration larger than their defaults
    assert big.max_session_buffer >= big.initial_ration


@pytest.mark.parametrize(("argv", "message"), [
    (["--initial-ration", "100"], "--initial-ration: must be a multiple of 256"),
    (["--initial-ration", "lots"], "--initial-ration: expected an integer number of bytes"),
    (["--initial-ration", str(0x10000 * 256)], "--initial-ration: must be a multiple of 256"),
    (["--fragment-size", "0"], "--fragment-size: must be an integer in [1, 65535]"),
    (["--fragment-size", "65536"], "--fragment-size: must be an integer in [1, 65535]"),
    (["--max-sessions", "129"], "--max-sessions: must be an integer in [1, 128]"),
    (["--max-session-buffer", "100"], "--max-session-buffer: must be an integer in [131072,"),
    (["--handshake-timeout", "0"], "--handshake-timeout: must be an integer in [1,"),
    (["--drain-timeout", "-1"], "--drain-timeout: must be at least 0"),
    (["--listen", "nope:9000"], "--listen: invalid server endpoint 'nope:9000'"),
    (["--listen", "ws:8080"], "--listen: 'ws:8080': the Jini ERI mux runs over a byte stream"),
    (["--listen", "jini+ws://:8080/"], "not over WebSocket"),
    (["--listen", "tcp:9000", "--listen", "tcp:9000"], "--listen: the same endpoint is given"),
    (["--dispatcher", "nomodule"], "--dispatcher: expected package.module:Class"),
    (["--dispatcher", "no_such_module_xyz:D"], "--dispatcher: cannot import module"),
    (["--dispatcher", f"{__name__}:Missing"], "has no attribute 'Missing'"),
    (["--dispatcher", f"{__name__}:NotADispatcher"], "is not a subclass of"
     " rsocket_tx.jini.Dispatcher"),
])
def test_usage_errors_say_what_to_fix(argv, message):
    assert message in usage_error(*argv)


def test_plugin_is_found_and_lazy():
    (maker,) = [p for p in getPlugins(IServiceMaker) if p.tapname == "jini-mux"]
    assert maker.options is tap.Options
    assert maker.makeService is tap.makeService
    source = (REPO / "twisted/plugins/rsocket_tx_jini_plugin.py").read_text()
    assert "import rsocket_tx" not in source and "from rsocket_tx" not in source


# -- the service, in process ---------------------------------------------------------------------


@aio
async def test_service_serves_every_endpoint_and_closes_gracefully():
    settings = tap.parse_server_settings(
        listen=["tcp:0:interface=127.0.0.1", "jini+tcp://127.0.0.1:0"], initial_ration="256")
    service = tap.build_service(settings, reactor)
    assert service.name == "jini-mux"
    service.startService()
    ports = [p.getHost().port for p in await wait(service.when_listening())]
    clients = [JiniMuxClient(reactor, tap.client_endpoint(reactor, f"jini+tcp://127.0.0.1:{port}"))
               for port in ports]
    try:
        for client in clients:
            assert await wait(client.request(b"x" * 5000)) == b"x" * 5000
        # a request in flight (the echo has answered its first part) when the service stops
        # is served to its end; then the connections are shut down
        in_flight = await wait(clients[0].new_request())
        in_flight.write(b"first half ")
        received = await wait(in_flight.response.next_chunk())
        stopped = service.stopService()
        assert not stopped.called
        in_flight.write(b"second half")
        in_flight.finish()
        received += await wait(in_flight.read_all())
        assert received == b"first half second half"
        await wait(stopped)
        assert not service.running
        for client in clients:
            with pytest.raises(internet_error.ConnectError):
                await wait(client.request(b"refused"))
    finally:
        for client in clients:
            await wait(client.close())


@aio
async def test_service_start_fails_when_an_endpoint_cannot_listen():
    async with failed_start_on_a_taken_port(tap) as service:
        with pytest.raises(internet_error.CannotListenError):
            await wait(service.when_listening())
        # the endpoint that did listen was stopped: nothing is left behind
        first = service.endpoints[0].outcome.getHost().port
        await wait(service.listen_services[0].listening)
        client = JiniMuxClient(reactor, f"tcp:host=127.0.0.1:port={first}")
        with pytest.raises(internet_error.ConnectionRefusedError):
            await wait(client.request(b"x"))
        await wait(client.close())


# -- twistd, for real --------------------------------------------------------------------------


#: a dispatcher module for the child processes (``--dispatcher upper_dispatcher:Upper``)
UPPER_MODULE = """
from rsocket_tx.jini.server import Dispatcher

class Upper(Dispatcher):
    async def dispatch(self, request):
        request.response.write((await request.read_all()).upper())
"""


#: ``spawn(argv, count=0, pythonpath=None, stdin=b"")``: ``python argv`` from the repository
#: root (:func:`process_support.spawn`), ready once ``count`` endpoints listen
spawn = functools.partial(spawn_child, pattern=LISTENING)


@aio
async def test_twistd_serves_tcp_and_tls(certs, tmp_path):
    (tmp_path / "upper_dispatcher.py").write_text(UPPER_MODULE)
    specs = ["tcp:0:interface=127.0.0.1",
             f"jini+tls://127.0.0.1:0?privateKey={certs.server_key}&certKey={certs.server_cert}"]
    argv = ["-c", TWISTD, "-n", "--pidfile=", "jini-mux", "--dispatcher", "upper_dispatcher:Upper",
            "--initial-ration", "256", "--fragment-size", "100"]
    for spec in specs:
        argv += ["--listen", spec]
    process = spawn(argv, count=len(specs), pythonpath=tmp_path)
    try:
        ports = await wait(process.ready, 60)
        assert sorted(ports) == sorted(specs)
        tcp = f"jini+tcp://127.0.0.1:{ports[specs[0]]}"
        tls = f"jini+tls://localhost:{ports[specs[1]]}?trustRoots={certs.ca}"
        for where in (tcp, tls):
            client = JiniMuxClient(reactor, tap.client_endpoint(reactor, where))
            try:
                body = b"abc" * 10_000  # past the 256-byte ration, in 100-byte fragments
                assert await wait(client.request(body)) == body.upper()
                assert await wait(client.request(b"")) == b""
            finally:
                await wait(client.close())
    finally:
        reason = await process.stop()
    assert_ended_cleanly(process, reason, shut_down=True)


@aio
async def test_twistd_usage_error_says_what_to_fix():
    process = spawn(["-c", TWISTD, "-n", "--pidfile=", "jini-mux", "--initial-ration", "100"])
    reason = await wait(process.ended, 60)
    assert reason.exitCode != 0
    assert b"--initial-ration: must be a multiple of 256" in process.output


@aio
async def test_twistd_fails_when_the_port_is_taken():
    taken = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
        Factory.forProtocol(Protocol))
    try:
        process = spawn(["-c", TWISTD, "-n", "--pidfile=", "jini-mux", "--listen",
                         f"tcp:{taken.getHost().port}:interface=127.0.0.1"])
        reason = await wait(process.ended, 60)
    finally:
        await taken.stopListening()
    assert reason.exitCode != 0
    assert b"Address already in use" in process.output or b"CannotListen" in process.output
