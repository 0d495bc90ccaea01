"""Memory bounds and SETUP rules, each driven by a real attack against a listening server on
loopback: a raw TCP client sends hand-built frames (docs: Limits, "Memory budget").

* the first frame before SETUP is bounded (``max_setup_frame_size``): a prefix announcing
  16 MiB is refused at once with ERROR[INVALID_SETUP], nothing of its body held;
* the bytes one connection holds in reassembly are bounded (``max_reassembly_buffer_size``):
  the stream that would pass it gets ERROR[REJECTED], the connection goes on;
* the connections a server keeps open are bounded (``max_connections``): past it a new one is
  closed at once, before any RSocket state exists, and the log says so (once per burst);
* the max lifetime a client may declare is bounded by default (``max_lifetime_limit``);
* invalid SETUP fields get ERROR[INVALID_SETUP], never CONNECTION_ERROR;
* frames before an oversize prefix in one read are handled as if they had come alone;
* servers listen with a backlog of 1,024: a burst of 1,000 connects fits the accept queue.
"""

from __future__ import annotations

import select
import shutil
import socket
import struct
import subprocess

import pytest
import pytest_twisted
from twisted.internet import reactor
from twisted.internet.error import ConnectionLost
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.logger import capturedLogs, formatEvent
from twisted_support import EchoResponder, wait, wire

from rsocket_tx import Payload
from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import (
    ErrorFrame,
    PayloadFrame,
    RequestResponseFrame,
)
from rsocket_tx.protocol import RSocketProtocol, RSocketServerFactory
from rsocket_tx.transports.endpoints import server_endpoint
from rsocket_tx.transports.limits import (
    DEFAULT_BACKLOG,
    DEFAULT_MAX_CONNECTIONS,
    ConnectionLimit,
    RefusedConnection,
    with_backlog,
)

aio = pytest_twisted.ensureDeferred

INVALID_SETUP = 0x001
UNSUPPORTED_SETUP = 0x002
CONNECTION_ERROR = 0x101
REJECTED = 0x202


async def refused_with(raw, code: int) -> ErrorFrame:
    """Wait until the server drops ``raw``; the only frame it sent is ERROR[code] on 0."""
    await wait(raw.lost)
    assert len(raw.frames) == 1, raw.frames
    (error,) = raw.frames
    assert isinstance(error, ErrorFrame)
    assert (error.stream_id, error.error_code) == (0, code), error
    return error


async def served(harness, port: int) -> None:
    """A well-behaved client gets an answer."""
    good = await harness.connect(port)
    assert await wait(good.request_response(Payload(b"ok"))) == Payload(b"ok")


def hand_setup(keepalive: int = 20_000, lifetime: int = 90_000) -> bytes:
    """A length-prefixed SETUP built from spec §SETUP Frame: stream 0, type 0x01, version
    1.0, keepalive, max lifetime, two empty MIME types."""
    body = struct.pack(">IHHHII", 0, 0x01 << 10, 1, 0, keepalive, lifetime) + b"\x00\x00"
    return len(body).to_bytes(3, "big") + body


# -- the first frame -----------------------------------------------------------------------------


@aio
async def test_a_setup_announcing_16_mib_is_refused_at_once_without_buffering(harness):
    port = await harness.serve(EchoResponder)  # every setting at its default
    raws = [await harness.raw(port) for _ in range(5)]
    for raw in raws:
        # the attack: the largest length prefix, then (here part of) the body
        raw.send(b"\xff\xff\xff" + b"\x00" * 60_000)
    for raw in raws:
        error = await refused_with(raw, INVALID_SETUP)
        assert b"exceeds the max setup frame size of 131072 bytes" in error.data
    for proto in harness.server_protocols:
        assert proto.connection.inbound_buffered == 0
    await served(harness, port)


@aio
async def test_a_setup_within_the_limit_is_accepted(harness):
    port = await harness.serve(EchoResponder, max_setup_frame_size=4096)
    raw = await harness.raw(port)
    setup = make_setup(setup_payload=Payload(b"s" * 3000))
    raw.send(wire(setup, RequestResponseFrame(stream_id=1, data=b"d" * 10_000)))
    reply = await raw.frame(lambda f: f.stream_id == 1)
    assert isinstance(reply, PayloadFrame) and reply.data == b"d" * 10_000


@aio
async def test_a_setup_past_a_configured_limit_is_refused(harness):
    port = await harness.serve(EchoResponder, max_setup_frame_size=4096)
    raw = await harness.raw(port)
    raw.send(wire(make_setup(setup_payload=Payload(b"s" * 5000))))
    await refused_with(raw, INVALID_SETUP)


# -- invalid SETUP fields ------------------------------------------------------------------------


@pytest.mark.parametrize("setup", [hand_setup(keepalive=0), hand_setup(lifetime=0)],
                         ids=["keepalive-0", "lifetime-0"])
@aio
async def test_a_zero_setup_time_is_invalid_setup(harness, setup):
    port = await harness.serve(EchoResponder)
    raw = await harness.raw(port)
    raw.send(setup)
    await refused_with(raw, INVALID_SETUP)
    await served(harness, port)


@aio
async def test_a_max_lifetime_of_24_days_is_refused_by_default(harness):
    port = await harness.serve(EchoResponder)
    raw = await harness.raw(port)
    raw.send(hand_setup(lifetime=2**31 - 1))
    error = await refused_with(raw, UNSUPPORTED_SETUP)
    assert b"above this server's limit of 600000 ms" in error.data


# -- frames before an oversize prefix ------------------------------------------------------------


@aio
async def test_frames_before_an_oversize_prefix_are_served_then_the_connection_closes(harness):
    port = await harness.serve(EchoResponder, max_frame_size=1024)
    raw = await harness.raw(port)
    raw.send(wire(make_setup(), RequestResponseFrame(stream_id=1, data=b"hello"))
             + (1025).to_bytes(3, "big") + b"\x00" * 10)  # all in one write
    await wait(raw.lost)
    assert [type(f) for f in raw.frames] == [PayloadFrame, ErrorFrame]
    assert raw.frames[0].stream_id == 1 and raw.frames[0].data == b"hello"
    assert (raw.frames[1].stream_id, raw.frames[1].error_code) == (0, CONNECTION_ERROR)


# -- reassembly budget ---------------------------------------------------------------------------


def fragment(sid: int, size: int, first: bool = False, last: bool = False) -> bytes:
    if first:
        return wire(RequestResponseFrame(stream_id=sid, data=b"r" * size, follows=True))
    return wire(PayloadFrame(stream_id=sid, data=b"p" * size, follows=not last, next=True))


@aio
async def test_unfinished_fragments_cannot_pass_the_connection_budget(harness):
    port = await harness.serve(EchoResponder, max_reassembly_buffer_size=64 * 1024,
                               max_reassembled_size=48 * 1024)
    raw = await harness.raw(port)
    # streams 1 and 3 hold 2 x 30,000 bytes; stream 5's first 30,000 would pass 65,536
    raw.send(wire(make_setup()) + fragment(1, 30_000, first=True)
             + fragment(3, 30_000, first=True) + fragment(5, 30_000, first=True))
    error = await raw.frame(lambda f: f.stream_id == 5)
    assert isinstance(error, ErrorFrame) and error.error_code == REJECTED
    assert b"max_reassembly_buffer_size" in error.data
    (server,) = harness.server_protocols
    assert server.connection.reassembly_held == 60_000
    # the connection survives: stream 1 completes and is answered, which frees its bytes
    raw.send(fragment(1, 100, last=True))
    reply = await raw.frame(lambda f: f.stream_id == 1)
    assert isinstance(reply, PayloadFrame) and len(reply.data) == 30_100
    assert server.connection.reassembly_held == 30_000
    # and a new stream fits again
    raw.send(fragment(7, 30_000, first=True) + fragment(7, 1, last=True))
    reply = await raw.frame(lambda f: f.stream_id == 7)
    assert isinstance(reply, PayloadFrame) and len(reply.data) == 30_001
    assert server.connection.is_open


# -- connection cap ------------------------------------------------------------------------------


@aio
async def test_connections_past_max_connections_are_closed_at_once(harness):
    port = await harness.serve(EchoResponder, max_connections=2)
    first = await harness.connect(port)
    second = await harness.connect(port)
    for rs in (first, second):  # (answered: the server has accepted both)
        assert await wait(rs.request_response(Payload(b"in"))) == Payload(b"in")
    factory = harness.server_protocols[0].factory
    limit = factory.connection_limit
    assert (limit.open, limit.refused) == (2, 0)
    with capturedLogs() as events:
        extra = [await harness.raw(port) for _ in range(3)]
        for raw in extra:
            raw.send(wire(make_setup()))
            await wait(raw.lost)
            assert raw.frames == []  # closed at once: nothing read, nothing written
    assert (limit.open, limit.refused) == (2, 3)
    assert [type(p) for p in harness.server_protocols[2:]] == [RefusedConnection] * 3
    assert len(factory.connections) == 2
    lines = [formatEvent(e) for e in events if "max_connections" in formatEvent(e)]
    assert len(lines) == 1, lines  # once per burst
    assert "RSocket server: 2 connections open, at the limit of 2 (max_connections)" in lines[0]
    # one connection ends: a new client is served again
    gone = harness.server_protocols[0]
    first._protocol.transport.loseConnection()
    await wait(gone.lost)
    assert limit.open == 1
    await served(harness, port)
    assert limit.open == 2


def test_the_log_says_it_once_per_interval_with_the_count():
    clock = Clock()
    limit = ConnectionLimit(1, server_name="S", reactor=clock, log_interval=60)
    assert limit.acquire()
    with capturedLogs() as events:
        for _ in range(100):
            assert not limit.acquire()
        clock.advance(59)
        assert not limit.acquire()
        clock.advance(1)
        assert not limit.acquire()
    lines = [formatEvent(e) for e in events]
    assert len(lines) == 2
    assert "(1 refused since the last report)" in lines[0]
    assert "(101 refused since the last report)" in lines[1]
    assert limit.refused == 102
    limit.release()
    assert limit.acquire()


def test_connection_limit_checks():
    with pytest.raises(ValueError, match="max_connections must be an integer >= 1"):
        ConnectionLimit(0)
    limit = ConnectionLimit()
    assert limit.max_connections == DEFAULT_MAX_CONNECTIONS == 4096
    with pytest.raises(ValueError, match="without a connection counted"):
        limit.release()


def test_factories_may_share_one_limit():
    from rsocket_tx.jini.server import Dispatcher, JiniMuxServerFactory

    limit = ConnectionLimit(1, reactor=Clock())
    rsocket = RSocketServerFactory(EchoResponder, reactor=Clock(), connection_limit=limit)
    jini = JiniMuxServerFactory(Dispatcher, reactor=Clock(), connection_limit=limit)
    assert isinstance(rsocket.buildProtocol(None), RSocketProtocol)
    assert isinstance(jini.buildProtocol(None), RefusedConnection)
    assert (limit.open, limit.refused) == (1, 1)


def test_the_server_factory_takes_max_connections():
    factory = RSocketServerFactory(EchoResponder, reactor=Clock(), max_connections=7)
    assert factory.connection_limit.max_connections == 7
    assert RSocketServerFactory(EchoResponder, reactor=Clock()).connection_limit \
        .max_connections == 4096


# -- backlog -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("description", "expected"), [
    ("tcp:7878", "tcp:7878:backlog=1024"),
    ("tcp:port=0:interface=127.0.0.1", "tcp:port=0:interface=127.0.0.1:backlog=1024"),
    ("tcp:7878:backlog=10", "tcp:7878:backlog=10"),
    ("tcp6:0:interface=\\:\\:1", "tcp6:0:interface=\\:\\:1:backlog=1024"),
    ("unix:/run/r.sock", "unix:/run/r.sock:backlog=1024"),
    ("ws:8080", "ws:8080"),  # (our parser: its own default is 1,024)
])
def test_with_backlog(description, expected):
    assert with_backlog(description) == expected


def listen_queue(port_number: int) -> int:
    """The kernel's listen queue length (the backlog, capped by net.core.somaxconn) of the
    TCP socket listening on ``port_number``: the Send-Q column of ``ss -ltn``."""
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port_number}"], capture_output=True,
                         text=True, check=True).stdout.split()
    return int(out[2])  # State Recv-Q Send-Q Local Peer


@pytest.mark.skipif(shutil.which("ss") is None, reason="needs ss (iproute2)")
@pytest.mark.parametrize(("spec", "expected"), [
    ("tcp:0:interface=127.0.0.1", 1024),
    ("tcp://127.0.0.1:0", 1024),
    ("ws:0:interface=127.0.0.1", 1024),
    ("tcp:0:interface=127.0.0.1:backlog=7", 7),
    ("tcp://127.0.0.1:0?backlog=9", 9),
], ids=["tcp", "tcp-uri", "ws", "tcp-backlog", "tcp-uri-backlog"])
@aio
async def test_servers_listen_with_a_backlog_of_1024(spec, expected):
    assert DEFAULT_BACKLOG == 1024
    factory = RSocketServerFactory(EchoResponder, reactor=reactor)
    port = await server_endpoint(reactor, spec).listen(factory)
    try:
        assert listen_queue(port.getHost().port) == expected
    finally:
        await port.stopListening()


@aio
async def test_a_burst_of_1000_connects_fits_the_accept_queue():
    # The server accepts nothing while this runs (the reactor does not turn): every connect
    # completes only if the kernel's accept queue holds it. With Twisted's default backlog of
    # 50 the rest would wait in SYN retries (1 s, 3 s, ...) and this would time out.
    port = await server_endpoint(reactor, "tcp:0:interface=127.0.0.1").listen(
        Factory.forProtocol(Protocol))
    address = ("127.0.0.1", port.getHost().port)
    port.stopReading()
    sockets = []
    try:
        poller = select.poll()
        for _ in range(1000):
            s = socket.socket()
            s.setblocking(False)
            sockets.append(s)
            s.connect_ex(address)
            poller.register(s, select.POLLOUT)
        pending = {s.fileno() for s in sockets}
        while pending:
            ready = poller.poll(10_000)  # (a bound against hanging; on success: no wait)
            assert ready, f"{len(pending)} of 1000 connects still pending"
            for fd, _ in ready:
                poller.unregister(fd)
                pending.discard(fd)
        errors = [s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) for s in sockets]
        assert errors == [0] * 1000
    finally:
        for s in sockets:
            s.close()
        await port.stopListening()


@aio
async def test_the_cap_holds_over_websocket_too():
    from rsocket_tx import RSocketError, connect, serve
    from rsocket_tx.transports.websocket import WebSocketHandshakeError

    port = await serve("ws:0:interface=127.0.0.1", EchoResponder, reactor=reactor,
                       max_connections=1)
    limit = port.factory.connection_limit
    first = await wait(connect(f"ws://127.0.0.1:{port.getHost().port}/", reactor=reactor))
    try:
        assert await wait(first.request_response(Payload(b"in"))) == Payload(b"in")
        with capturedLogs():
            # aborted as soon as the WebSocket opens: the client sees its handshake fail (or,
            # had the server's answer gone out first, its connection lost)
            try:
                second = await wait(connect(f"ws://127.0.0.1:{port.getHost().port}/",
                                            reactor=reactor))
            except WebSocketHandshakeError:
                pass
            else:
                with pytest.raises(RSocketError):
                    await wait(second.request_response(Payload(b"no")))
        assert (limit.open, limit.refused) == (1, 1)
        assert await wait(first.request_response(Payload(b"still"))) == Payload(b"still")
    finally:
        await first.close()
        await port.stopListening()


@aio
async def test_the_cap_holds_over_tls_too(tmp_path):
    from tlscerts import make_tls_files

    from rsocket_tx import RSocketError, connect, serve

    certs = make_tls_files(tmp_path)
    port = await serve(f"tls://127.0.0.1:0?privateKey={certs.server_key}"
                       f"&certKey={certs.server_cert}", EchoResponder, reactor=reactor,
                       max_connections=1)
    address = f"tls://localhost:{port.getHost().port}?trustRoots={certs.ca}"
    limit = port.factory.connection_limit
    first = await wait(connect(address, reactor=reactor))
    try:
        assert await wait(first.request_response(Payload(b"in"))) == Payload(b"in")
        with capturedLogs():
            # the TLS transport is aborted at once, before or after the handshake
            with pytest.raises((RSocketError, ConnectionLost)):
                second = await wait(connect(address, reactor=reactor))
                await wait(second.request_response(Payload(b"no")))
        assert (limit.open, limit.refused) == (1, 1)
        assert await wait(first.request_response(Payload(b"still"))) == Payload(b"still")
    finally:
        await first.close()
        await port.stopListening()
