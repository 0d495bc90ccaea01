"""rsocket_tx.reactivesocket.tap, the ``twistd rs2015`` plugin: options (``twistd rsocket``'s,
less those the draft has no use for) and their validation, the plugin, the service in process
over TCP and WebSocket, a real ``twistd rs2015``, and a real ``twistd mux`` serving the draft
beside RSocket 1.0 on one port."""

from __future__ import annotations

import functools
import os
import re
import sys

import pytest
import pytest_twisted
from process_support import REPO, TWISTD, ChildProcess, assert_ended_cleanly
from test_mux_tap import UPPER, Upper
from twisted.application.service import IServiceMaker
from twisted.internet import reactor
from twisted.plugin import getPlugins
from twisted_support import options_usage_error, parse_options, wait

from rsocket_tx import Payload, Responder
from rsocket_tx import connect as connect_rsocket
from rsocket_tx.apps.demo import DemoResponder
from rsocket_tx.core import errors as E
from rsocket_tx.faces import mux
from rsocket_tx.faces import tap as rsocket_tap
from rsocket_tx.faces.serving import SettingsError
from rsocket_tx.reactivesocket import ReactiveSocketServerFactory, connect, tap
from rsocket_tx.transports.oneport import PROTOCOLS

aio = pytest_twisted.ensureDeferred
parse = functools.partial(parse_options, tap.Options)
usage_error = functools.partial(options_usage_error, tap.Options)


class Tagged(Responder):
    """Answers with ``TAG:data``; ``tag`` comes from ``--responder-arg tag=...``."""

    def __init__(self, tag: str = "untagged") -> None:
        self.tag = tag.encode()

    def request_response(self, payload):
        return Payload(self.tag + b":" + payload.data)


TAGGED = f"{__name__}:Tagged"


# -- options -------------------------------------------------------------------------------------


def test_defaults():
    settings = parse()["settings"]
    assert settings.listen == ("tcp:7070",)
    assert settings.responder is None and settings.responder_factory is DemoResponder
    assert not settings.resume and not settings.debug
    assert settings == rsocket_tap.parse_server_settings(listen=["tcp:7070"])


def test_every_option_is_twistd_rsockets():
    argv = ["--listen", "rs2015+tcp://127.0.0.1:0", "--listen", "rs2015+ws://127.0.0.1:0/rs",
            "--responder", TAGGED, "--responder-arg", "tag=T", "--fragment-size", "1024",
            "--max-frame-size", "65536", "--max-reassembled-size", "1_000_000",
            "--setup-timeout", "5000", "--max-setup-frame-size", "4096",
            "--max-reassembly-buffer-size", "2_000_000", "--max-connections", "500",
            "--max-concurrent-streams", "8", "--max-send-buffer-size", "100000",
            "--drain-timeout", "250", "--lease-ttl", "1000", "--lease-requests", "5",
            "--lease-grace", "10", "--debug"]
    settings = parse(*argv)["settings"]
    assert settings.listen == ("rs2015+tcp://127.0.0.1:0", "rs2015+ws://127.0.0.1:0/rs")
    assert settings.responder_factory is Tagged and settings.responder_args == (("tag", "T"),)
    assert (settings.fragment_size, settings.max_frame_size, settings.max_reassembled_size,
            settings.setup_timeout, settings.max_setup_frame_size,
            settings.max_reassembly_buffer_size, settings.max_connections,
            settings.max_concurrent_streams, settings.max_send_buffer_size,
            settings.drain_timeout, settings.lease_ttl, settings.lease_requests,
            settings.lease_grace) == (1024, 65536, 1_000_000, 5000, 4096, 2_000_000, 500, 8,
                                      100_000, 250, 1000, 5, 10)
    assert settings.debug
    config = settings.connection_config()
    assert config.max_concurrent_streams == 8 and config.drain_timeout == 250


def test_the_options_the_draft_has_no_use_for_are_left_out():
    names = {o.name for o in tap.SERVER_OPTIONS}
    assert names == {o.name for o in rsocket_tap.SERVER_OPTIONS} - tap.RSOCKET_ONLY
    assert {"responder", "responder-arg", "drain-timeout", "lease-ttl"} <= names
    for argv in (["--min-keepalive-interval", "100"], ["--max-lifetime-limit", "1"],
                 ["--resume"], ["--max-resume-sessions", "3"]):
        assert "not recognized" in usage_error(*argv)
    with pytest.raises(TypeError, match="resume"):
        tap.parse_server_settings(resume=True)


@pytest.mark.parametrize("argv, message", [
    (["--responder", "no.such.module:X"], "--responder: cannot import module 'no.such.module'"),
    (["--responder", "rsocket_tx.reactivesocket.tap:Options"], "is not a subclass of"),
    (["--responder", UPPER, "--responder-arg", "x=1"], "--responder-arg:"),
    (["--fragment-size", "10"], "--fragment-size: must be at least 64 bytes"),
    (["--drain-timeout", "soon"], "--drain-timeout: expected an integer"),
    (["--lease-ttl", "1000"], "--lease-ttl: needs --lease-requests too"),
    (["--listen", "rs2015+://x"], "--listen:"),
    (["--listen", "tcp:0", "--listen", "tcp:0"], "the same endpoint is given twice"),
])
def test_bad_options_say_what_to_fix(argv, message):
    assert message in usage_error(*argv)


def test_plugin_is_found_and_lazy():
    makers = {maker.tapname: maker for maker in getPlugins(IServiceMaker)}
    maker = makers["rs2015"]
    assert maker.options is tap.Options and maker.makeService is tap.makeService
    source = (REPO / "twisted" / "plugins" / "rsocket_tx_rs2015_plugin.py").read_text()
    assert "import rsocket_tx" not in source and "from rsocket_tx" not in source


def test_twistd_mux_knows_the_plugin():
    assert PROTOCOLS["rs2015"].tap == "rsocket_tx.reactivesocket.tap"
    protocol = mux.parse_protocol(f"rs2015 --responder {UPPER} --drain-timeout 100")
    assert protocol.settings.responder_factory is Upper
    assert protocol.settings.drain_timeout == 100
    assert "rs2015" in [p.name for p in mux.parse_server_settings().protocols]
    with pytest.raises(SettingsError, match="--protocol rs2015: .*not recognized"):
        mux.parse_protocol("rs2015 --resume")


# -- the service, in process ---------------------------------------------------------------------


@aio
async def test_service_serves_tcp_and_websocket_and_closes_gracefully():
    settings = tap.parse_server_settings(
        listen=["rs2015+tcp://127.0.0.1:0", "rs2015+ws://127.0.0.1:0/rs"], responder=TAGGED,
        responder_args=["tag=draft"])
    service = tap.build_service(settings, reactor)
    assert isinstance(service.factory, ReactiveSocketServerFactory)
    assert service.name == "rs2015"
    service.startService()
    tcp, ws = [p.getHost().port for p in await wait(service.when_listening())]
    clients = [await wait(connect(where, reactor=reactor)) for where in (
        f"rs2015+tcp://127.0.0.1:{tcp}", f"rs2015+ws://127.0.0.1:{ws}/rs")]
    try:
        for client in clients:
            answer = await wait(client.request_response(Payload(b"x")))
            assert answer.data == b"draft:x"
        await wait(service.stopService())
        assert not service.running
        for client in clients:  # closed by the server, with the draft's ERROR on stream 0
            await wait(client.closed)
            assert isinstance(client.close_reason, E.ConnectionError)
    finally:
        for client in clients:
            await wait(client.close())


# -- twistd, for real ----------------------------------------------------------------------------


def twistd(*args: str, server: str) -> ChildProcess:
    """``twistd -n ARGS`` in a child process (from the repository root, so that its
    ``twisted/plugins`` is found), ready once ``server`` logs that it listens on loopback."""
    pattern = re.escape(server).encode() + rb" listening on 127\.0\.0\.1:(\d+)"
    process = ChildProcess(re.compile(pattern))
    argv = [sys.executable, "-c", TWISTD, "-n", "--pidfile=", *args]
    reactor.spawnProcess(process, sys.executable, argv, path=str(REPO),
                         env=dict(os.environ, PYTHONUNBUFFERED="1"))
    return process


@aio
async def test_twistd_rs2015_answers_the_draft_client():
    process = twistd("rs2015", "--listen", "rs2015+tcp://127.0.0.1:0", "--drain-timeout", "1000",
                     server="ReactiveSocket 2015 server")
    try:
        port = await wait(process.ready, 60)
        client = await wait(connect(f"rs2015+tcp://127.0.0.1:{port}", reactor=reactor))
        try:
            # the demo responder: request-response echoes, request-sub counts
            assert (await wait(client.request_response(Payload(b"ping")))).data == b"ping"
            items = []
            with pytest.raises(E.ApplicationError, match="subscription ended"):
                async for item in client.request_subscription(Payload(b"3")):
                    items.append(item.data)
            assert items == [b"0", b"1", b"2"]
        finally:
            await wait(client.close())
    finally:
        reason = await process.stop()
    assert_ended_cleanly(process, reason)


@aio
async def test_twistd_mux_serves_the_draft_beside_rsocket_on_one_port():
    process = twistd("mux", "--listen", "tcp:0:interface=127.0.0.1", "--protocol", "rsocket",
                     "--protocol", "rs2015 --drain-timeout 1000", server="one-port server")
    try:
        port = await wait(process.ready, 60)
        drafts = [await wait(connect(where, reactor=reactor)) for where in (
            f"rs2015+tcp://127.0.0.1:{port}", f"rs2015+ws://127.0.0.1:{port}/")]
        rsocket = await wait(connect_rsocket(f"tcp://127.0.0.1:{port}", reactor=reactor))
        try:
            for client in (*drafts, rsocket):  # the demo responders echo
                assert (await wait(client.request_response(Payload(b"hi")))).data == b"hi"
            # only the draft has request-sub: these connections are the draft's
            for client in drafts:
                stream = client.request_subscription(Payload(b"1"))
                assert (await wait(stream.__anext__())).data == b"0"
                stream.cancel()
        finally:
            for client in (*drafts, rsocket):
                await wait(client.close())
    finally:
        reason = await process.stop()
    assert_ended_cleanly(process, reason)
