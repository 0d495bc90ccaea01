"""yamux's faces: endpoint strings, ``twistd yamux`` (options and a real child process),
``rsocket-tx yamux`` (in process and as a child), and ``twistd mux`` serving yamux and RSocket
on one port (a real child, told apart by the first bytes)."""

from __future__ import annotations

import re

import pytest
import pytest_twisted
from process_support import CLI, TWISTD, assert_ended_cleanly, spawn
from twisted.internet import reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint
from twisted.internet.protocol import Factory
from twisted_support import run_command, wait

from rsocket_tx import Payload, Responder, connect
from rsocket_tx.faces.main import parse_args
from rsocket_tx.faces.serving import SettingsError
from rsocket_tx.transports.oneport import PROTOCOLS
from rsocket_tx.yamux.config import YamuxConfig
from rsocket_tx.yamux.echo import Echo, EchoFactory
from rsocket_tx.yamux.endpoints import client_endpoint, server_endpoint, transport_spec
from rsocket_tx.yamux.factory import YamuxServerFactory
from rsocket_tx.yamux.factory import connect as yamux_connect
from rsocket_tx.yamux.tap import Options, parse_server_settings

aio = pytest_twisted.ensureDeferred
YAMUX_LISTENING = re.compile(rb"yamux server listening on 127\.0\.0\.1:(\d+)")
MUX_LISTENING = re.compile(rb"one-port server listening on 127\.0\.0\.1:(\d+)")


# -- endpoints ---------------------------------------------------------------------------------

def test_uris_name_yamux_over_tcp_and_tls() -> None:
    assert transport_spec("yamux+tcp://h:1") == "tcp://h:1"
    assert transport_spec("YAMUX+tls://h:1?trustRoots=ca.pem") == "tls://h:1?trustRoots=ca.pem"
    assert transport_spec("tcp:host=h:port=1") == "tcp:host=h:port=1"
    assert client_endpoint(reactor, "yamux+tcp://127.0.0.1:7890") is not None
    assert server_endpoint(reactor, "yamux+tcp://127.0.0.1:0") is not None
    for bad, words in (("yamux+://h:1", "missing transport"),
                       ("yamux+ws://h:1/x", "byte stream"), ("ws://h:1/x", "byte stream"),
                       ("wss:h:1", "byte stream")):
        with pytest.raises(ValueError, match=words):
            transport_spec(bad)


# -- twistd yamux: options ---------------------------------------------------------------------

def test_twistd_options_build_validated_settings() -> None:
    options = Options()
    options.parseOptions(["--listen", "tcp:0", "--max-streams", "8", "--receive-window",
                          "1048576", "--keepalive-interval", "0", "--stream-close-timeout",
                          "9", "--stream-factory", "rsocket_tx.yamux.echo:EchoFactory"])
    settings = options["settings"]
    assert settings.listen == ("tcp:0",) and isinstance(settings.stream_factory, EchoFactory)
    assert settings.config == YamuxConfig(max_streams=8, receive_window=1 << 20,
                                          keepalive_interval=None, stream_close_timeout=9)


@pytest.mark.parametrize(("kwargs", "words"), [
    ({"receive_window": "1000"}, "--receive-window"),
    ({"ping_timeout": "0"}, "--ping-timeout"),
    ({"accept_backlog": "x"}, "--accept-backlog"),
    ({"stream_factory": "rsocket_tx.yamux.echo:Echo"}, "no IProtocolFactory"),
    ({"stream_factory": "rsocket_tx.yamux.echo:Nothing"}, "--stream-factory"),
    ({"listen": ["yamux+ws://:1/x"]}, "byte stream"),
])
def test_twistd_options_refuse_bad_values_naming_them(kwargs, words) -> None:
    with pytest.raises((SettingsError, ValueError), match=words):
        parse_server_settings(**kwargs)


# -- rsocket-tx yamux --------------------------------------------------------------------------

def test_cli_arguments() -> None:
    args = parse_args(["yamux", "yamux+tcp://h:1", "-d", "x", "--max-streams", "3"])
    assert (args.data, args.ping, args.config.max_streams) == ("x", False, 3)
    args = parse_args(["yamux", "yamux+tcp://h:1"])
    assert args.data == "-"


@pytest_twisted.async_yield_fixture
async def echo_server():
    factory = YamuxServerFactory(EchoFactory(), YamuxConfig(keepalive_interval=None), reactor)
    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)
    try:
        yield port.getHost().port
    finally:
        await port.stopListening()
        await factory.close_connections()


@aio
async def test_cli_sends_on_one_stream_and_prints_the_reply(echo_server) -> None:
    uri = f"yamux+tcp://127.0.0.1:{echo_server}"
    result = await run_command(["yamux", uri], stdin=b"over one stream\n" * 1000)
    assert (result.status, result.out) == (0, b"over one stream\n" * 1000), result.err
    result = await run_command(["yamux", uri, "--ping"])
    assert result.status == 0 and re.fullmatch(rb"\d+\.\d{3} ms\n", result.out)


@aio
async def test_cli_reports_a_reset_and_a_refused_connection() -> None:
    class Resetter(Echo):
        def dataReceived(self, data: bytes) -> None:  # noqa: N802
            self.transport.abortConnection()

    factory = YamuxServerFactory(Factory.forProtocol(Resetter),
                                 YamuxConfig(keepalive_interval=None), reactor)
    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)
    number = port.getHost().port
    try:
        result = await run_command(["yamux", f"tcp://127.0.0.1:{number}", "-d", "x"])
        assert result.status == 1 and "the stream was reset" in result.err
    finally:
        await port.stopListening()
        await factory.close_connections()
    result = await run_command(["yamux", f"tcp://127.0.0.1:{number}", "-d", "x"])
    assert result.status == 3 and "cannot connect" in result.err


# -- real child processes ----------------------------------------------------------------------

@aio
async def test_twistd_yamux_serves_the_echo_to_the_cli_child() -> None:
    server = spawn(["-c", TWISTD, "-n", "--pidfile=", "yamux", "--listen",
                    "tcp:0:interface=127.0.0.1"], None, pattern=YAMUX_LISTENING)
    try:
        port = await wait(server.ready, 60)
        client = spawn(["-c", CLI, "yamux", f"yamux+tcp://127.0.0.1:{port}"], 0,
                       stdin=b"through twistd yamux", pattern=YAMUX_LISTENING)
        ended = await wait(client.ended, 60)
        assert ended.exitCode == 0, client.output.decode()
        assert client.output == b"through twistd yamux"
    finally:
        assert_ended_cleanly(server, await server.stop(), shut_down=True)


class Hello(Responder):
    def request_response(self, payload):
        return Payload(b"rsocket on the same port")


def test_the_one_port_server_knows_yamux() -> None:
    assert PROTOCOLS["yamux"].tap == "rsocket_tx.yamux.tap"


@aio
async def test_twistd_mux_serves_yamux_and_rsocket_on_one_port() -> None:
    argv = ["-c", TWISTD, "-n", "--pidfile=", "mux", "--listen", "tcp:0:interface=127.0.0.1",
            "--protocol", "rsocket", "--protocol", "yamux --max-streams 16"]
    server = spawn(argv, None, pattern=MUX_LISTENING)
    try:
        port = await wait(server.ready, 60)
        session = await wait(yamux_connect(reactor, TCP4ClientEndpoint(
            reactor, "127.0.0.1", port), YamuxConfig(keepalive_interval=None)))
        from twisted_support import BytesClient  # (records the echo)

        class Collect(BytesClient):
            def connectionMade(self) -> None:  # noqa: N802
                self.transport.write(b"yamux on the shared port")
                self.transport.loseConnection()

        collect = Collect()
        session.open_stream(collect)
        await wait(collect.closed)
        assert collect.received == b"yamux on the shared port"
        await wait(session.close())
        rsocket = await wait(connect(f"tcp://127.0.0.1:{port}"))
        reply = await wait(rsocket.request_response(Payload(b"hi")))
        assert reply.data  # the demo responder answered: RSocket was told apart from yamux
        await wait(rsocket.close())
    finally:
        assert_ended_cleanly(server, await server.stop(), shut_down=True)


def test_a_server_of_another_protocol_names_a_yamux_client() -> None:
    from rsocket_tx.transports.peers import guess_client

    guess = guess_client(bytes.fromhex("00 01 0001 00000001 00000000"), exclude="rsocket")
    assert guess.protocol == "yamux" and guess.what == "a yamux client"
    assert "twistd yamux" in guess.advice
