"""rsocket_tx.rsnet.tap, the ``twistd rsnet`` plugin: options and their validation, the plugin,
the demo publishers, the service in process, and a real ``twistd`` serving TCP, TLS and
WebSocket on loopback."""

from __future__ import annotations

import functools
import re

import pytest
import pytest_twisted
from process_support import REPO, TWISTD, assert_ended_cleanly
from process_support import spawn as spawn_child
from twisted.application.service import IServiceMaker
from twisted.internet import error as internet_error
from twisted.internet import reactor
from twisted.plugin import getPlugins
from twisted_support import failed_start_on_a_taken_port, options_usage_error, parse_options

from rsocket_tx.rsnet import tap
from rsocket_tx.rsnet.client import connect
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.demo import DemoPublisher
from rsocket_tx.rsnet.errors import ConnectionClosedError, SubscriptionError
from rsocket_tx.rsnet.publishers import Publisher, PublisherMap

from .twisted_helpers import wait

aio = pytest_twisted.ensureDeferred
LISTENING = re.compile(
    rb"RS-network server listening on 127\.0\.0\.1:(\d+) \(endpoint ([^)\n]+)\)")

#: ``parse(*argv)``: the options parsed; ``usage_error(*argv)``: the UsageError's message
parse = functools.partial(parse_options, tap.Options)
usage_error = functools.partial(options_usage_error, tap.Options)


class Letters(Publisher):
    """``letters``: a, b, c (for ``--publishers``)."""

    def subscribe(self, request):
        if request.publisher == "letters":
            return [b"a", b"b", b"c"]
        return super().subscribe(request)


MAPPING = {"one": lambda request: [b"1"]}
NOT_PUBLISHERS = 42


# -- options -------------------------------------------------------------------------------------


def test_defaults():
    settings = parse()["settings"]
    assert settings.listen == (tap.DEFAULT_LISTEN,) == ("tcp:7880",)
    assert isinstance(settings.publishers, DemoPublisher)
    assert settings.config == RSNetConfig()


ALL_OPTIONS = {
    "max-element-size": ("2_000_000", 2_000_000),
    "max-reassembled-size": ("30000000", 30_000_000),
    "max-part-size": ("1000", 1000),
    "max-peer-subscriptions": ("16", 16),
    "hello-timeout": ("500", 500),
    "goodbye-timeout": ("600", 600),
    "max-send-buffer-size": ("4096", 4096),
    "drain-timeout": ("0", 0),
}


def test_every_option():
    argv = ["--listen", "tcp:0:interface=127.0.0.1", "-l", "rsnet+tcp://127.0.0.1:0",
            "--listen=rsnet+ws://127.0.0.1:0/x", "--publishers", f"{__name__}:Letters"]
    for name, (value, _) in ALL_OPTIONS.items():
        argv += [f"--{name}", value]
    settings = parse(*argv)["settings"]
    assert settings.listen == ("tcp:0:interface=127.0.0.1", "rsnet+tcp://127.0.0.1:0",
                               "rsnet+ws://127.0.0.1:0/x")
    assert isinstance(settings.publishers, Letters)
    assert settings.publishers_name == f"{__name__}:Letters"
    for name, (_, number) in ALL_OPTIONS.items():
        assert getattr(settings.config, name.replace("-", "_")) == number, name
    # a larger element raises the buffered-input bound with it
    assert settings.config.max_buffered_input >= 2_000_000
    assert set(ALL_OPTIONS) == {o.name for o in tap.CONFIG_OPTIONS}


def test_publishers_may_be_a_mapping_or_an_instance():
    assert isinstance(parse("--publishers", f"{__name__}:MAPPING")["settings"].publishers,
                      PublisherMap)
    instance = tap.load_publishers(Letters())
    assert isinstance(instance, Letters)


@pytest.mark.parametrize(("argv", "message"), [
    (["--max-element-size", "0"], "--max-element-size: must be an integer in [1,"),
    (["--hello-timeout", "soon"], "--hello-timeout: expected an integer number of milliseconds"),
    (["--drain-timeout", "-1"], "--drain-timeout: must be at least 0"),
    (["--listen", "nope:9000"], "--listen: invalid server endpoint 'nope:9000'"),
    (["--listen", "rsnet+://:1"], "--listen: missing transport"),
    (["--listen", "tcp:7880", "--listen", "tcp:7880"], "--listen: the same endpoint is given"),
    (["--publishers", "no_such_module_xyz:P"], "--publishers: cannot import module"),
    (["--publishers", f"{__name__}:Missing"], "has no attribute 'Missing'"),
    (["--publishers", f"{__name__}:NOT_PUBLISHERS"], "--publishers:"),
])
def test_usage_errors_say_what_to_fix(argv, message):
    assert message in usage_error(*argv)


def test_plugin_is_found_and_lazy():
    (maker,) = [p for p in getPlugins(IServiceMaker) if p.tapname == "rsnet"]
    assert maker.options is tap.Options
    assert maker.makeService is tap.makeService
    source = (REPO / "twisted/plugins/rsocket_tx_rsnet_plugin.py").read_text()
    assert "import rsocket_tx" not in source and "from rsocket_tx" not in source


# -- the demo publishers -------------------------------------------------------------------------


@pytest.mark.logs_failure("the demo's 'error' publisher fails on purpose: the server logs it",
                          match=r"ValueError: the demo publisher failed")
@aio
async def test_the_demo_publishers(loop):
    port = await loop.serve(DemoPublisher())
    client = await loop.connect(port, {"lines": lambda r: [b"x", b"y"]})
    assert await wait(client.subscribe("count/3").collect()) == [b"1", b"2", b"3"]
    assert await wait(client.subscribe("count", window=2).collect(take=5)) == \
        [b"1", b"2", b"3", b"4", b"5"]
    ints = client.subscribe("ints/3")
    assert await wait(ints.collect()) == [b"\0\0\0\0", b"\0\0\0\1", b"\0\0\0\2"]
    assert ints.element_size == 4
    assert await wait(client.subscribe("echo/lines").collect()) == [b"x", b"y"]
    with pytest.raises(SubscriptionError) as info:
        await wait(client.subscribe("error").collect())
    assert info.value.error == "ValueError: the demo publisher failed"
    for name in ("echo/missing", "count/x", "nope", "ints/"):
        with pytest.raises(SubscriptionError, match="no such publisher"):
            await wait(client.subscribe(name).collect())


# -- the service, in process ---------------------------------------------------------------------


@aio
async def test_service_serves_every_endpoint_and_closes_gracefully():
    settings = tap.parse_server_settings(
        listen=["tcp:0:interface=127.0.0.1", "rsnet+ws://127.0.0.1:0/rsnet"],
        drain_timeout="100")
    service = tap.build_service(settings, reactor)
    assert service.name == "rsnet"
    service.startService()
    ports = [p.getHost().port for p in await wait(service.when_listening())]
    tcp = await wait(connect(reactor, f"rsnet+tcp://127.0.0.1:{ports[0]}"))
    ws = await wait(connect(reactor, f"rsnet+ws://127.0.0.1:{ports[1]}/rsnet"))
    assert await wait(tcp.subscribe("count/2").collect()) == [b"1", b"2"]
    assert await wait(ws.subscribe("count/2").collect()) == [b"1", b"2"]
    endless = tcp.subscribe("count", window=1)
    assert await wait(endless.__anext__()) == b"1"
    stopped = service.stopService()
    with pytest.raises(ConnectionClosedError):
        await wait(endless.collect())  # the publication never ends: 100 ms, then goodbye
    await wait(stopped)
    await wait(tcp.when_closed())
    await wait(ws.when_closed())
    assert not service.running
    with pytest.raises(internet_error.ConnectError):
        await wait(connect(reactor, f"rsnet+tcp://127.0.0.1:{ports[0]}"))


@aio
async def test_service_start_fails_when_an_endpoint_cannot_listen():
    async with failed_start_on_a_taken_port(tap) as service:
        await wait(service.listen_services[0].listening)


# -- twistd, for real --------------------------------------------------------------------------


#: a publishers module for the child processes (``--publishers my_publishers:PUBLISHERS``)
PUBLISHERS_MODULE = """
PUBLISHERS = {"shout": lambda request: [b"HEY", b"HO"]}
"""


#: ``spawn(argv, count=0, pythonpath=None, stdin=b"")``: ``python argv`` from the repository
#: root (:func:`process_support.spawn`), ready once ``count`` endpoints listen
spawn = functools.partial(spawn_child, pattern=LISTENING)


@aio
async def test_twistd_serves_tcp_tls_and_websocket(certs, tmp_path):
    (tmp_path / "my_publishers.py").write_text(PUBLISHERS_MODULE)
    specs = ["tcp:0:interface=127.0.0.1",
             f"rsnet+tls://127.0.0.1:0?privateKey={certs.server_key}&certKey={certs.server_cert}",
             "rsnet+ws://127.0.0.1:0/rsnet"]
    argv = ["-c", TWISTD, "-n", "--pidfile=", "rsnet", "--publishers",
            "my_publishers:PUBLISHERS", "--max-part-size", "100"]
    for spec in specs:
        argv += ["--listen", spec]
    process = spawn(argv, count=len(specs), pythonpath=tmp_path)
    try:
        ports = await wait(process.ready, 60)
        assert sorted(ports) == sorted(specs)
        for where in (f"rsnet+tcp://127.0.0.1:{ports[specs[0]]}",
                      f"rsnet+tls://localhost:{ports[specs[1]]}?trustRoots={certs.ca}",
                      f"rsnet+ws://127.0.0.1:{ports[specs[2]]}/rsnet"):
            client = await wait(connect(reactor, where))
            try:
                assert await wait(client.subscribe("shout").collect()) == [b"HEY", b"HO"]
                with pytest.raises(SubscriptionError, match="no such publisher: count"):
                    await wait(client.subscribe("count").collect())
            finally:
                await wait(client.goodbye())
    finally:
        reason = await process.stop()
    assert_ended_cleanly(process, reason, shut_down=True)


@aio
async def test_twistd_usage_error_says_what_to_fix():
    process = spawn(["-c", TWISTD, "-n", "--pidfile=", "rsnet", "--hello-timeout", "0"])
    reason = await wait(process.ended, 60)
    assert reason.exitCode != 0
    assert b"--hello-timeout: must be an integer in [1," in process.output
