"""yamux interop: rsocket_tx's yamux (:mod:`rsocket_tx.yamux`) against hashicorp/yamux (Go) and
the Rust ``yamux`` crate, both directions, over real loopback TCP.

* **Our client, their server** (``PEER server``): many streams at once, FIN both ways,
  10 MiB each way byte-exact with window updates counted (the 256 KiB window, both sides'
  smallest: hashicorp/yamux refuses a smaller ``MaxStreamWindowSize``), a larger window of
  ours announced on SYN, our RST seen by the peer, their RST (a full accept backlog), Ping both
  ways, their Go Away, a stream the server opens to us.
* **Their client, our server** (``PEER client ADDR SCENARIOS``): the same from the other end;
  the peer prints ``ok NAME`` per scenario and exits 0.

Every wait is on an event or a line the peer prints (no sleeps). The peers are built by
``tests/interop/peers/yamux-*/install.sh`` (``make peers``).
"""

from __future__ import annotations

import hashlib

import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.internet.protocol import Factory
from yamux_peers import WAIT, CommandProtocol, Exchange, pattern, spawn, start_peer_server

from rsocket_tx.yamux.config import YamuxConfig
from rsocket_tx.yamux.errors import LocalProtocolError
from rsocket_tx.yamux.factory import YamuxServerFactory, connect

pytestmark = pytest.mark.interop
RSOCKET_PEERS = False
PEERS = ["go", "rust"]
aio = pytest_twisted.ensureDeferred
MIB10 = 10 << 20
#: keepalive off: a test never waits on a timer
QUIET = YamuxConfig(keepalive_interval=None)


def wait(d, timeout: float = WAIT) -> defer.Deferred:
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


async def session_to(port: int, config: YamuxConfig = QUIET):
    return await wait(connect(reactor, TCP4ClientEndpoint(reactor, "127.0.0.1", port), config,
                              stream_factory=Factory.forProtocol(CommandProtocol)))


async def exchange(session, command: str, body: bytes = b""):
    ex = Exchange(command, body)
    session.open_stream(ex)
    return await wait(ex.done)


@pytest_twisted.async_yield_fixture
async def peer_server(request):
    async for server in running(request.param):
        yield server


def peers_param():
    return pytest.mark.parametrize("peer_server", PEERS, indirect=True)


# -- our client, their server ------------------------------------------------------------------

@peers_param()
@aio
async def test_many_streams_echo_with_fin_both_ways(peer_server):
    _, port = peer_server
    session = await session_to(port)
    datas = [bytes([i % 256]) * (1000 + 37 * i) for i in range(300)]
    results = await wait(defer.gatherResults(
        [defer.ensureDeferred(exchange(session, "echo", data)) for data in datas]))
    for data, (got, reason) in zip(datas, results):
        assert got == data
        assert reason.check(ConnectionDone)  # both FINs, no reset
    assert session.streams == {} and len(session.connection.streams) == 0
    await wait(session.close())


@peers_param()
@aio
async def test_10_mib_each_way_byte_exact_with_window_updates(peer_server, request):
    _, port = peer_server
    session = await session_to(port)
    data = pattern(MIB10)
    got, reason = await exchange(session, "sink", data)
    assert got == b"got %d %s\n" % (MIB10, hashlib.sha256(data).hexdigest().encode())
    # the peer's window starts at 256 KiB: we had to wait for its updates (hashicorp/yamux's
    # stays there: dozens of times; the Rust crate grows its window as it measures the link)
    minimum = MIB10 // (256 * 1024) - 1 if request.node.callspec.params["peer_server"] == "go" \
        else 1
    assert session.connection.window_updates_received >= minimum
    got, reason = await exchange(session, f"source {MIB10}")
    assert got == data and reason.check(ConnectionDone)
    # ours gives back half the window at a time
    assert session.connection.window_updates_sent >= MIB10 // (256 * 1024) - 1
    got, _ = await exchange(session, "echo", data)
    assert got == data
    await wait(session.close())


@peers_param()
@aio
async def test_a_larger_window_of_ours_is_announced_on_syn(peer_server):
    _, port = peer_server
    config = YamuxConfig(keepalive_interval=None, receive_window=4 << 20)
    session = await session_to(port, config)
    got, _ = await exchange(session, f"source {MIB10}")
    assert got == pattern(MIB10)
    # 2 MiB given back at a time: far fewer updates than with 256 KiB
    assert session.connection.window_updates_sent <= MIB10 // (2 << 20)
    await wait(session.close())


@peers_param()
@aio
async def test_our_reset_is_seen_by_the_peer(peer_server):
    process, port = peer_server
    session = await session_to(port)
    ex = Exchange("wait-reset", b"some bytes", half_close=False)
    stream = session.open_stream(ex)
    await process.wait_line(rf"^waiting {stream.stream_id}$")  # (it has read the command)
    stream.abortConnection()
    match = await process.wait_line(rf"^(not )?reset {stream.stream_id}\b")
    assert match.group(1) is None, process.lines
    _, reason = await wait(ex.done)
    assert reason.check(Exception) and "reset by us" in reason.getErrorMessage()
    got, _ = await exchange(session, "echo", b"still fine")
    assert got == b"still fine"
    await wait(session.close())


async def running(peer: str, *args: str):
    process, port = await start_peer_server(peer, *args)
    try:
        yield process, port
    finally:
        await process.stop()
    # hashicorp/yamux logs what it found wrong on the wire with [ERR]
    assert b"[ERR]" not in process.stderr, process.stderr.decode(errors="replace")[-3000:]
    assert not [line for line in process.lines if line.startswith(("error", "FAIL"))], \
        process.lines


@pytest_twisted.async_yield_fixture
async def small_backlog_server():
    async for server in running("go", "-backlog", "2"):
        yield server


@pytest_twisted.async_yield_fixture
async def go_server():
    async for server in running("go"):
        yield server


@pytest_twisted.async_yield_fixture
async def rust_server():
    async for server in running("rust"):
        yield server


@aio
async def test_their_reset_refuses_a_stream_past_the_backlog(small_backlog_server):
    _, port = small_backlog_server
    session = await session_to(port)
    got, _ = await exchange(session, "stall")
    assert got == b"stalled\n"
    waiting = [Exchange("echo", b"x", half_close=False) for _ in range(3)]
    for ex in waiting:
        session.open_stream(ex)
    # two wait in the peer's backlog; the third is refused with RST
    _, reason = await wait(waiting[2].done)
    assert reason.check(ConnectionLost) and "reset" in reason.getErrorMessage()
    assert not waiting[0].done.called and not waiting[1].done.called
    await wait(session.close())


@peers_param()
@aio
async def test_ping_both_ways(peer_server, request):
    _, port = peer_server
    session = await session_to(port)
    rtt = await wait(session.ping())
    assert rtt >= 0
    if request.node.callspec.params["peer_server"] == "go":
        got, _ = await exchange(session, "ping")  # the peer pings us, waits for our answer
        assert got == b"pong\n"
    else:
        # the Rust crate pings by itself (its round-trip estimate) when its connection is
        # first polled, before it answers any stream; a wrong answer ends its connection
        got, _ = await exchange(session, "echo", b"after the ping")
        assert got == b"after the ping"
    assert session.connection.pings_answered >= 1
    await wait(session.close())


@aio
async def test_their_go_away_stops_new_streams_only(go_server):
    # hashicorp/yamux: Go Away (normal) and the session goes on
    _, port = go_server
    session = await session_to(port)
    open_one = Exchange("echo", b"before", half_close=False)
    session.open_stream(open_one)
    got, _ = await exchange(session, "goaway")
    assert got == b"ok\n"
    await wait(session.when_go_away())
    with pytest.raises(LocalProtocolError, match="Go Away"):
        session.open_stream(Exchange("echo"))
    open_one.transport.loseConnection()  # the stream opened before goes on
    got, reason = await wait(open_one.done)
    assert got == b"before" and reason.check(ConnectionDone)
    await wait(session.close())


@aio
async def test_their_go_away_before_they_close(rust_server):
    # the Rust crate's only Go Away is the one it sends as it closes its connection
    _, port = rust_server
    session = await session_to(port)
    got, _ = await exchange(session, "goaway")
    assert got == b"ok\n"
    await wait(session.when_go_away())
    await wait(session.when_closed())
    assert session.go_away_received and session.connection.go_away_received == 0


@aio
async def test_their_reset_of_a_stream(rust_server):
    # the Rust crate resets a stream dropped without closing it
    _, port = rust_server
    session = await session_to(port)
    ex = Exchange("reset", half_close=False)  # (after our FIN it would answer with FIN)
    session.open_stream(ex)
    _, reason = await wait(ex.done)
    assert reason.check(ConnectionLost) and "the peer reset the stream" in \
        reason.getErrorMessage()
    got, _ = await exchange(session, "echo", b"still fine")
    assert got == b"still fine"
    await wait(session.close())


@peers_param()
@aio
async def test_a_stream_the_server_opens_to_us(peer_server):
    _, port = peer_server
    session = await session_to(port)
    got, _ = await exchange(session, "open")
    assert got == b"opened ok\n"
    await wait(session.close())


# -- their client, our server ------------------------------------------------------------------

@pytest_twisted.async_yield_fixture
async def our_server():
    factory = YamuxServerFactory(Factory.forProtocol(CommandProtocol), QUIET, reactor)
    port = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(factory)
    try:
        yield port.getHost().port, factory
    finally:
        await port.stopListening()
        await defer.gatherResults([p.close() for p in list(factory.protocols)])


#: what each peer's client runs against our server ("ping": the Rust crate has no Ping API;
#: it pings by itself, and our answer must be right or it ends the connection)
SCENARIOS = {
    "go": ["streams", "sink", "source", "echo-big", "ping", "serverping", "open", "reset",
           "goaway"],
    "rust": ["streams", "sink", "source", "echo-big", "serverping", "open", "reset", "goaway"],
}


@pytest.mark.parametrize("peer", PEERS)
@aio
async def test_their_client_against_our_server(our_server, peer):
    port, factory = our_server
    scenarios = SCENARIOS[peer]
    process = spawn(peer, "client", f"127.0.0.1:{port}", *scenarios)
    code = await wait(process.ended, 300)
    oks = [line for line in process.lines if not line.startswith("session")]
    assert oks == [f"ok {name}" for name in scenarios], process.stderr[-3000:]
    assert code == 0 and b"[ERR]" not in process.stderr, process.stderr[-3000:]
