"""What one client can make a Jini ERI mux server hold, and for how long (issue 15): the
header wait, the connection with no session, and the memory of sessions whose data the
application does not read (sessions x inbound ration, one partial message, the header).

The time bounds run on a ``Clock`` with the server protocol on an in-memory transport; the
memory attacks run against a real listening :class:`~rsocket_tx.jini.server.JiniMuxServerFactory`
with a raw TCP client sending hand-built bytes (no sleeps: the client waits for the PingAck of
a Ping it sends after its data, which the server answers only once it has read everything
before it).
"""

from __future__ import annotations

from typing import Any

import pytest
import pytest_twisted
from twisted.internet import defer, protocol, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol

from rsocket_tx.jini import JiniMuxConfig
from rsocket_tx.jini import codec as C
from rsocket_tx.jini.config import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_INITIAL_RATION,
    DEFAULT_MAX_CONNECTION_BUFFER,
    RIVER_INITIAL_RATION,
)
from rsocket_tx.jini.server import Dispatcher, InboundRequest, JiniMuxServerFactory

from .clock_helpers import SHUTDOWN, assert_shut_down_after, server_on_clock
from .twisted_helpers import wait

aio = pytest_twisted.ensureDeferred

#: the client's connection header (its ration: 0x80 * 256 = 32 KiB)
HEADER = C.ClientConnectionHeader(0x80).encode()
RATION = DEFAULT_INITIAL_RATION  # the server's ration per session, bytes


# ----------------------------------------------------------------------------- header wait


@pytest.mark.parametrize("sent", [b"", HEADER[:1], HEADER[:4], HEADER[:7]],
                         ids=["nothing", "1 byte", "half", "7 bytes"])
def test_a_connection_without_a_whole_header_is_closed_at_the_handshake_timeout(sent):
    server, transport, clock = server_on_clock(handshake_timeout=2_000)
    if sent:
        server.dataReceived(sent)
    clock.advance(1.999)
    assert not transport.disconnecting and server.is_open
    clock.advance(0.001)
    assert transport.disconnecting and not server.is_open
    assert server.connection.terminated_reason == \
        "no connection header from the client within 2000 ms"


def test_the_default_header_wait_is_15_seconds():
    server, transport, clock = server_on_clock()
    clock.advance(14.999)
    assert not transport.disconnecting
    clock.advance(0.001)
    assert transport.disconnecting


def test_a_whole_header_in_time_ends_the_header_wait():
    server, transport, clock = server_on_clock(handshake_timeout=2_000, idle_timeout=0)
    server.dataReceived(HEADER[:4])
    clock.advance(1.5)
    server.dataReceived(HEADER[4:])
    clock.advance(60)
    assert not transport.disconnecting and server.is_open
    assert transport.value() == C.ServerConnectionHeader.for_ration(RATION).encode()


# ----------------------------------------------------------------------------- no session


def test_a_connection_with_no_session_is_shut_down_at_the_idle_timeout():
    server, transport, clock = server_on_clock(idle_timeout=3_000)
    server.dataReceived(HEADER)
    transport.clear()
    clock.advance(2.999)
    assert not transport.disconnecting
    clock.advance(0.001)
    # §Shutdown Message: the graceful end; the client opens a new connection when it needs one
    assert transport.value()[:1] == SHUTDOWN and transport.disconnecting


def test_the_idle_timeout_counts_from_the_end_of_the_last_session():
    server, transport, clock = server_on_clock(idle_timeout=3_000)
    server.dataReceived(HEADER + C.Data(0, b"ping", open=True).encode())  # no eof yet
    clock.advance(10)  # a session in progress: not idle however long it takes
    assert server.is_open and not transport.disconnecting
    server.dataReceived(C.Data(0, b"", eof=True).encode())  # the request ends
    clock.advance(0)  # (the echo's response goes out)
    assert server.connection.active_sessions == 0
    assert_shut_down_after(transport, clock, 3)


def test_a_new_session_restarts_the_idle_timer():
    server, transport, clock = server_on_clock(idle_timeout=3_000)
    server.dataReceived(HEADER)
    clock.advance(2)
    server.dataReceived(C.Data(0, b"x", open=True, eof=True).encode())  # opened and done
    clock.advance(0)
    clock.advance(2.999)
    assert not transport.disconnecting
    clock.advance(0.001)
    assert transport.disconnecting


def test_idle_timeout_0_keeps_an_idle_connection():
    server, transport, clock = server_on_clock(idle_timeout=0)
    server.dataReceived(HEADER)
    clock.advance(DEFAULT_IDLE_TIMEOUT * 10 / 1000)
    assert server.is_open and not transport.disconnecting


def test_idle_timeout_is_a_validated_setting():
    assert JiniMuxConfig().idle_timeout == 300_000
    with pytest.raises(ValueError, match="idle_timeout"):
        JiniMuxConfig(idle_timeout=-1)


# ----------------------------------------------------------------------------- memory


class Hoarder(Dispatcher):
    """Reads nothing and never answers: what the client sends stays buffered."""

    def __init__(self, requests: list) -> None:
        self.requests = requests

    def dispatch(self, request: InboundRequest) -> defer.Deferred:
        self.requests.append(request)
        return defer.Deferred()  # cancelled when the connection ends


class RawClient(protocol.Protocol):
    """A raw TCP peer: ``wait_for(predicate)`` fires once what it received satisfies it."""

    def __init__(self) -> None:
        self.received = b""
        self.closed: defer.Deferred = defer.Deferred()
        self._waiters: list[tuple[Any, defer.Deferred]] = []

    def dataReceived(self, data: bytes) -> None:  # noqa: N802
        self.received += data
        for pair in list(self._waiters):
            if pair[0](self.received):
                self._waiters.remove(pair)
                pair[1].callback(self.received)

    def connectionLost(self, reason=None) -> None:  # noqa: N802
        self.closed.callback(None)
        waiters, self._waiters = self._waiters, []
        for _, d in waiters:
            d.errback(AssertionError(f"connection lost; received {self.received[:64]!r}"))

    def wait_for(self, predicate) -> defer.Deferred:
        if predicate(self.received):
            return defer.succeed(self.received)
        d: defer.Deferred = defer.Deferred()
        self._waiters.append((predicate, d))
        return wait(d, timeout=60)

    async def sync(self, cookie: int) -> None:
        """Wait until the server has read everything sent before (its PingAck)."""
        ack = C.PingAck(cookie).encode()
        self.transport.write(C.Ping(cookie).encode())
        await self.wait_for(lambda received: ack in received)


async def hoarding_server(**settings: Any) -> tuple[Any, list, Any]:
    requests: list[InboundRequest] = []
    factory = JiniMuxServerFactory(lambda: Hoarder(requests), JiniMuxConfig(**settings),
                                   reactor)
    endpoint = TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1")
    port = await wait(endpoint.listen(factory))
    return port, requests, factory


async def raw_client(port: Any) -> RawClient:
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port)
    raw = await wait(connectProtocol(endpoint, RawClient()))
    raw.transport.write(HEADER)
    return raw


def session_filled(sid: int, n: int) -> bytes:
    """Data messages opening session ``sid`` with ``n`` bytes (at most 65,535 per message)."""
    return b"".join(C.Data(sid, b"r" * min(65_535, n - pos), open=not pos).encode()
                    for pos in range(0, n, 65_535))


def held(factory: JiniMuxServerFactory) -> int:
    """Bytes of request data the server holds for its applications (received, not read)."""
    return sum(request.body.buffered for server in factory.protocols
               for request in server.requests.values())


@pytest_twisted.async_yield_fixture
async def hoard():
    ports = []

    async def start(**settings):
        port, requests, factory = await hoarding_server(**settings)
        ports.append(port)
        return port, requests, factory

    yield start
    for port in ports:
        await wait(defer.maybeDeferred(port.stopListening))
        for server in list(port.factory.protocols):
            await wait(server.close())


@aio
async def test_128_sessions_each_filled_to_the_ration_hold_128_rations_and_no_more(hoard):
    """The most one connection's sessions can make the server hold: every session id
    (0..127) opened, each sent its whole ration, nothing read: 128 x 128 KiB = 16 MiB (the
    default max_connection_buffer, never passed by a peer that keeps to its rations). One
    byte more on any session is Data past the ration: a violation, the connection ends."""
    port, requests, factory = await hoard()
    raw = await raw_client(port)
    raw.transport.write(b"".join(session_filled(sid, RATION) for sid in range(128)))
    await raw.sync(1)
    assert len(requests) == 128
    assert held(factory) == 128 * RATION == 16 * 1024 * 1024 == DEFAULT_MAX_CONNECTION_BUFFER
    server = next(iter(factory.protocols))
    assert server.connection.session(7).inbound.available == 0  # no ration left to grant
    lost = server.when_lost()
    raw.transport.write(C.Data(7, b"!").encode())
    await wait(raw.closed)
    await wait(lost)
    assert b"exceeds its inbound ration" in raw.received  # (the detail of its Error)
    assert not factory.protocols


@aio
async def test_sessions_past_max_sessions_are_refused_and_hold_nothing(hoard):
    port, requests, factory = await hoard(max_sessions=4)
    raw = await raw_client(port)
    raw.transport.write(b"".join(session_filled(sid, RATION) for sid in range(6)))
    await raw.sync(2)
    assert len(requests) == 4 and held(factory) == 4 * RATION
    # sessions 4 and 5: refused with an Abort without the partial flag (the client may retry)
    for sid in (4, 5):
        assert C.Abort(sid, False, b"more than 4 sessions").encode() in raw.received


@aio
async def test_with_an_unlimited_ration_max_session_buffer_bounds_a_session(hoard):
    """Unlimited ration (0): nothing paces the client, so past ``max_session_buffer`` the
    session is aborted (not the connection)."""
    port, requests, factory = await hoard(initial_ration=0, max_session_buffer=65_536,
                                          max_connection_buffer=131_072)
    raw = await raw_client(port)
    raw.transport.write(C.Data(0, b"a" * 65_535, open=True).encode() + C.Data(0, b"a").encode())
    await raw.sync(3)
    assert held(factory) == 65_536
    raw.transport.write(C.Data(0, b"a").encode())
    await raw.sync(4)
    assert b"more than max_session_buffer" in raw.received  # its Abort
    assert held(factory) == 0 and factory.protocols  # the connection goes on


@aio
async def test_with_an_unlimited_ration_max_connection_buffer_bounds_the_connection(hoard):
    port, requests, factory = await hoard(initial_ration=0, max_session_buffer=65_536,
                                          max_connection_buffer=131_072)
    raw = await raw_client(port)
    chunk = b"c" * 65_535
    raw.transport.write(b"".join(C.Data(sid, chunk, open=True).encode() for sid in range(3)))
    await raw.sync(5)
    assert held(factory) == 2 * 65_535  # the third would pass 131,072: aborted
    assert b"more than max_connection_buffer" in raw.received
    assert factory.protocols


def test_a_partial_message_is_held_whole_then_judged():
    """Before a Data message is complete the decoder holds it (at most 4 + 65,535 bytes);
    complete, a body past the ration (River's 32 KiB here) is a violation."""
    server, transport, clock = server_on_clock(initial_ration=RIVER_INITIAL_RATION)
    server.dataReceived(HEADER + C.Data(0, b"", open=True).encode())
    server.dataReceived(b"\x80\x00\xff\xff" + b"x" * 65_534)  # one byte short
    assert server.is_open
    server.dataReceived(b"x")
    assert not server.is_open
    assert "exceeds its inbound ration" in server.connection.terminated_reason
