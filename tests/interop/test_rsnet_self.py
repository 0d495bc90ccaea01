"""Interop of the Reactive Streams network protocol: rsocket_tx against itself, in two
processes, over TCP, TLS and WebSocket, both directions on one connection.

The protocol has no other implementation anywhere (``MUX-PROTOCOLS.md``, seed 003): its proof
is conformance plus two independent processes talking. A real ``twistd rsnet`` (the demo
publishers) serves every transport; an in-process client subscribes to it, and has it subscribe
back (``echo/NAME``: the server subscribes to the client's publisher NAME and relays it), with
demand windows, fixed-size packed elements, split elements and cancel. Then the other way
round: an in-process server and the ``rsocket-tx rsnet`` command line as the child process.
"""

from __future__ import annotations

import functools
import re

import pytest
import pytest_twisted
from process_support import CLI, TWISTD, assert_ended_cleanly
from process_support import spawn as spawn_child
from tlscerts import make_tls_files
from twisted.internet import defer, reactor

from rsocket_tx.rsnet.client import connect
from rsocket_tx.rsnet.demo import DemoPublisher
from rsocket_tx.rsnet.errors import SubscriptionError
from rsocket_tx.rsnet.server import serve

RSOCKET_PEERS = False

aio = pytest_twisted.ensureDeferred
LISTENING = re.compile(
    rb"RS-network server listening on 127\.0\.0\.1:(\d+) \(endpoint ([^)\n]+)\)")
WAIT = 60


def wait(d, timeout: float = WAIT) -> defer.Deferred:
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


#: ``spawn(argv, count=0, stdin=b"")``: ``python argv`` from the repository root
#: (:func:`process_support.spawn`), ready once ``count`` endpoints listen
spawn = functools.partial(spawn_child, pattern=LISTENING)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest_twisted.async_yield_fixture(scope="module")
async def twistd_server(certs):
    """A ``twistd rsnet`` child serving TCP, TLS and WebSocket: ``{transport: client URI}``."""
    specs = {"tcp": "rsnet+tcp://127.0.0.1:0",
             "tls": f"rsnet+tls://127.0.0.1:0?privateKey={certs.server_key}"
                    f"&certKey={certs.server_cert}",
             "ws": "rsnet+ws://127.0.0.1:0/rsnet"}
    argv = ["-c", TWISTD, "-n", "--pidfile=", "rsnet", "--max-part-size", "4096"]
    for spec in specs.values():
        argv += ["--listen", spec]
    child = spawn(argv, count=len(specs))
    try:
        ports = await wait(child.ready)
        yield {"tcp": f"rsnet+tcp://127.0.0.1:{ports[specs['tcp']]}",
               "tls": f"rsnet+tls://localhost:{ports[specs['tls']]}?trustRoots={certs.ca}",
               "ws": f"rsnet+ws://127.0.0.1:{ports[specs['ws']]}/rsnet"}
    finally:
        # the demo publisher "error" fails on purpose, and the server logs it with its traceback
        assert_ended_cleanly(child, await child.stop(),
                             expected_failure=b"ValueError: the demo publisher failed")


BIG = bytes(range(256)) * 1200  # 307,200 bytes: split into parts both ways


@pytest.mark.parametrize("transport", ["tcp", "tls", "ws"])
@aio
async def test_our_client_against_our_twistd_both_directions(twistd_server, transport):
    sent_to_server: list[int] = []

    def lines(request):
        for i in range(50):
            sent_to_server.append(i)
            yield b"line %d" % i

    client = await wait(connect(reactor, twistd_server[transport],
                                {"lines": lines, "big": lambda r: [BIG, b"end"]}))
    try:
        # client -> server subscriptions, with small windows
        assert await wait(client.subscribe("count/100", window=7).collect()) == \
            [b"%d" % i for i in range(1, 101)]
        packed = client.subscribe("ints/1000", window=300)
        assert await wait(packed.collect()) == [i.to_bytes(4, "big") for i in range(1000)]
        assert packed.element_size == 4
        # server -> client subscriptions on the same connection (the server relays them)
        assert await wait(client.subscribe("echo/lines", window=3).collect()) == \
            [b"line %d" % i for i in range(50)]
        assert await wait(client.subscribe("echo/big", window=1).collect()) == [BIG, b"end"]
        # cancel stops delivery; errors are exceptions; the connection carries on
        endless = client.subscribe("count", window=4)
        assert [await wait(endless.__anext__()) for _ in range(10)] == \
            [b"%d" % i for i in range(1, 11)]
        await endless.aclose()
        with pytest.raises(SubscriptionError, match="ValueError: the demo publisher failed"):
            await wait(client.subscribe("error").collect())
        with pytest.raises(SubscriptionError, match="no such publisher: echo/absent|"
                                                    "no such publisher: absent"):
            await wait(client.subscribe("echo/absent").collect())
        assert await wait(client.subscribe("count/3").collect()) == [b"1", b"2", b"3"]
    finally:
        await wait(client.goodbye("interop done"))
    assert client.transport_gone


@pytest.mark.parametrize("transport", ["tcp", "ws"])
@aio
async def test_our_cli_child_against_our_server(transport):
    port = await serve(reactor, f"rsnet+{transport}://127.0.0.1:0/", DemoPublisher())
    try:
        where = f"rsnet+{transport}://127.0.0.1:{port.getHost().port}/"
        child = spawn(["-c", CLI, "rsnet", "subscribe", where, "count", "--demand", "3",
                       "--limit", "20"])
        reason = await wait(child.ended)
        assert reason.exitCode == 0, child.output.decode()
        assert child.output == b"".join(b"%d\n" % i for i in range(1, 21))
        child = spawn(["-c", CLI, "rsnet", "publish", where, "up", "--demand", "2"],
                      stdin=b"".join(b"%d\n" % i for i in range(100)))
        reason = await wait(child.ended)
        assert reason.exitCode == 0, child.output.decode()
        assert child.output == b"".join(b"%d\n" % i for i in range(100))
    finally:
        await port.stopListening()
        await wait(port.factory.close_connections())
