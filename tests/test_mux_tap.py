"""rsocket_tx.faces.mux, the ``twistd mux`` plugin (one port, every protocol): options and
their validation (each protocol's options checked by its own plugin), the plugin, the service
in process (RSocket and the Jini mux on one port over TCP, TLS and WebSocket, closed gracefully),
and a real ``twistd mux``."""

from __future__ import annotations

import functools
import re

import pytest
import pytest_twisted
from process_support import REPO, TWISTD, assert_ended_cleanly, spawn
from test_tap import repo_on_path  # noqa: F401 - a fixture
from tlscerts import make_tls_files
from twisted.application.service import IServiceMaker
from twisted.internet import reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, wrapClientTLS
from twisted.plugin import getPlugins
from twisted_support import options_usage_error, parse_options, wait

from rsocket_tx import Payload, Responder, connect
from rsocket_tx.faces import mux
from rsocket_tx.faces.serving import SettingsError
from rsocket_tx.jini import JiniMuxClient
from rsocket_tx.jini.server import Dispatcher
from rsocket_tx.rsnet.client import connect as rsnet_connect
from rsocket_tx.transports.oneport import ByteStreamWebSocketClientEndpoint, OnePortFactory
from rsocket_tx.transports.tls import client_options
from rsocket_tx.transports.websocket import WebSocketClientEndpoint

aio = pytest_twisted.ensureDeferred
LISTENING = re.compile(rb"one-port server listening on 127\.0\.0\.1:(\d+)")

parse = functools.partial(parse_options, mux.Options)
usage_error = functools.partial(options_usage_error, mux.Options)


class Upper(Responder):
    def request_response(self, payload):
        return Payload(payload.data.upper())


class Reverse(Dispatcher):
    async def dispatch(self, request):
        request.response.write((await request.read_all())[::-1])


UPPER = f"{__name__}:Upper"
REVERSE = f"{__name__}:Reverse"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("mux-tls"))


# -- options -------------------------------------------------------------------------------------


def test_defaults_serve_every_protocol_on_7878():
    settings = parse()["settings"]
    assert settings.listen == ("tcp:7878",)
    # every registered protocol with a twistd plugin
    assert [p.name for p in settings.protocols] == ["rsocket", "jini-mux", "rsnet", "rs2015",
                                                    "yamux"]
    assert settings.tls_key is None and settings.websocket
    assert settings.config.sniff_timeout == 10_000


def test_each_protocol_takes_its_own_plugins_options():
    settings = parse("--listen", "tcp:0", "--protocol", f"rsocket --responder {UPPER}",
                     "--protocol", f"jini-mux --dispatcher {REVERSE} --initial-ration 512",
                     "--sniff-timeout", "500", "--max-sniff-size", "1024",
                     "--no-websocket")["settings"]
    rsocket, jini = settings.protocols
    assert rsocket.settings.responder_factory is Upper
    assert jini.settings.dispatcher_factory is Reverse
    assert jini.settings.config.initial_ration == 512
    assert settings.config.sniff_timeout == 500 and settings.config.max_sniff_size == 1024
    assert not settings.websocket


@pytest.mark.parametrize("argv, message", [
    (["--protocol", "smtp"],
     "--protocol: unknown protocol 'smtp' (known: rsocket, jini-mux, rsnet, rs2015, yamux)"),
    (["--protocol", "jini-mux --initial-ration 100"],
     "--protocol jini-mux: --initial-ration: must be a multiple of 256"),
    (["--protocol", "rsocket --listen tcp:1"], "--listen is an option of twistd mux itself"),
    (["--protocol", "rsocket", "--protocol", "rsocket"], "rsocket is given twice"),
    (["--protocol", "rsocket 'unclosed"], "--protocol: No closing quotation"),
    (["--listen", "ws:8080"], "recognises WebSocket on every endpoint"),
    (["--tls-cert", "cert.pem"], "give --tls-key too"),
    (["--tls-key", "/nonexistent/key.pem"], "--tls-key:"),
    (["--sniff-timeout", "0"], "--sniff-timeout: must be at least 1 milliseconds"),
    (["--max-sniff-size", "8"], "--max-sniff-size: must be at least 16 bytes"),
])
def test_bad_options_say_what_to_fix(argv, message):
    assert message in usage_error(*argv)


def test_parse_protocol_keeps_what_was_typed():
    protocol = mux.parse_protocol(f"jini-mux --dispatcher {REVERSE}")
    assert protocol.args == ("--dispatcher", REVERSE)
    assert protocol.tap == "rsocket_tx.jini.tap"
    with pytest.raises(SettingsError, match="empty"):
        mux.parse_protocol("  ")


def test_plugin_is_discovered(repo_on_path):  # noqa: F811 - the fixture
    makers = {maker.tapname: maker for maker in getPlugins(IServiceMaker)}
    maker = makers["mux"]
    assert maker.options is mux.Options
    assert maker.makeService is mux.makeService


def test_plugin_module_is_lazy():
    source = (REPO / "twisted" / "plugins" / "rsocket_tx_mux_plugin.py").read_text()
    assert "import rsocket_tx" not in source and "from rsocket_tx" not in source


# -- the service, in process ---------------------------------------------------------------------


@aio
async def test_service_serves_both_protocols_on_one_port_and_closes_gracefully(certs):
    settings = mux.parse_server_settings(
        listen=["tcp:0:interface=127.0.0.1"],
        protocols=[f"rsocket --responder {UPPER}", f"jini-mux --dispatcher {REVERSE}", "rsnet"],
        tls_key=certs.server_key, tls_cert=certs.server_cert)
    service = mux.build_service(settings, reactor)
    assert isinstance(service.factory, OnePortFactory)
    assert service.name == "mux"
    service.startService()
    (port,) = [p.getHost().port for p in await wait(service.when_listening())]
    tcp = functools.partial(TCP4ClientEndpoint, reactor, "127.0.0.1", port)

    def tls():
        return wrapClientTLS(client_options("localhost", trust_roots=certs.ca), tcp())

    url = f"ws://localhost:{port}/"
    rsockets = [await wait(connect(endpoint, reactor=reactor)) for endpoint in (
        tcp(), tls(), WebSocketClientEndpoint(reactor, tcp(), url))]
    jinis = [JiniMuxClient(reactor, endpoint) for endpoint in (
        tcp(), tls(), ByteStreamWebSocketClientEndpoint(reactor, tcp(), url, "jini-mux"))]
    try:
        for rsocket in rsockets:
            assert (await wait(rsocket.request_response(Payload(b"abc")))).data == b"ABC"
        for jini in jinis:
            assert await wait(jini.request(b"abc")) == b"cba"
        rsnet = await wait(rsnet_connect(reactor, tcp()))  # the demo publishers
        try:
            assert len([item async for item in rsnet.subscribe("count/3")]) == 3
        finally:
            await wait(rsnet.close())
        stopped = service.stopService()
        await wait(stopped)
        assert not service.running
        for rsocket in rsockets:  # closed by the server
            await wait(rsocket.closed)
    finally:
        for rsocket in rsockets:
            await rsocket.close()
        for jini in jinis:
            await wait(jini.close())


# -- twistd, for real ----------------------------------------------------------------------------


@aio
async def test_twistd_mux_serves_rsocket_and_jini_on_one_port(certs):
    argv = ["-c", TWISTD, "-n", "--pidfile=", "mux", "--listen", "tcp:0:interface=127.0.0.1",
            "--protocol", "rsocket", "--protocol", "jini-mux --initial-ration 256",
            "--tls-key", certs.server_key, "--tls-cert", certs.server_cert]
    process = spawn(argv, None, pattern=LISTENING)
    try:
        port = await wait(process.ready, 60)
        rsocket = await wait(connect(f"tls://localhost:{port}?trustRoots={certs.ca}",
                                     reactor=reactor))
        try:
            response = await wait(rsocket.request_response(Payload(b"ping")))
            assert response.data == b"ping"  # the demo responder echoes
        finally:
            await rsocket.close()
        client = JiniMuxClient(reactor, f"tcp:host=127.0.0.1:port={port}")
        try:
            assert await wait(client.request(b"x" * 5000)) == b"x" * 5000  # the echo demo
        finally:
            await wait(client.close())
    finally:
        reason = await process.stop()
    assert_ended_cleanly(process, reason)
