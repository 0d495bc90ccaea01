"""Graceful close (spec §Error Codes, CONNECTION_CLOSE) in the Twisted layer: a connection
closed with close_gracefully(), a server factory closing all its connections, the twistd
service stopped (SIGTERM), and the peer's ERROR[CONNECTION_CLOSE] honoured. New requests are
refused, outstanding ones finish within the drain timeout, then ERROR[CONNECTION_CLOSE]."""

from __future__ import annotations

import re
import signal
import sys

import pytest
import pytest_twisted
from test_limits import Held, MemoryPair, server_on_string_transport
from test_tap import REPO, TWISTD, _Process
from twisted.internet import error as internet_error
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.test.iosim import connectedServerAndClient
from twisted_support import EchoResponder, parse, server_protocol, wait, wire

from rsocket_tx import (
    ConnectionCloseError,
    LocalProtocolError,
    Payload,
    RejectedError,
    RSocketClientFactory,
    RSocketServerFactory,
    connect,
)
from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import (
    ErrorFrame,
    PayloadFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
)
from rsocket_tx.faces.tap import build_service, parse_server_settings
from rsocket_tx.protocol import ABORT_DELAY

aio = pytest_twisted.ensureDeferred

CONNECTION_CLOSE = 0x102
REJECTED = 0x202


def rejected_for_closing(d: Deferred) -> bool:
    failure = d.result
    d.addErrback(lambda f: None)
    return failure.check(RejectedError) is not None and "connection closing" in str(failure)


# --------------------------------------------------------------------- one connection


def test_close_gracefully_lets_an_outstanding_request_finish():
    responder = Held()
    pair = MemoryPair(lambda: responder)
    pending = pair.rsocket.request_response(Payload(b"slow"))
    pair.pump.flush()

    assert not pair.server.is_closing
    closed = pair.server.close_gracefully(reason="maintenance")
    pair.pump.flush()
    assert not closed.called and pair.server.rsocket.is_open and pair.server.is_closing
    assert not pair.client.is_closing  # it is told only at the end
    # nothing new either way
    late = pair.rsocket.request_response(Payload(b"late"))
    pair.pump.flush()
    assert rejected_for_closing(late)
    assert len(responder.held) == 1
    with pytest.raises(LocalProtocolError, match="closing"):
        pair.server.rsocket.request_response(Payload(b"from the server"))

    responder.held[0].callback(Payload(b"done"))
    pair.pump.flush()
    assert pending.result == Payload(b"done")  # answered before the close
    assert closed.called
    assert not pair.rsocket.is_open
    reason = pair.rsocket.close_reason
    assert isinstance(reason, ConnectionCloseError) and reason.message == "maintenance"
    assert pair.server.rsocket.close_reason is None  # closed locally


def test_a_client_closing_gracefully_finishes_its_stream_first():
    pair = MemoryPair()
    stream = pair.rsocket.request_stream(Payload(b"6"), prefetch=2)
    pair.pump.flush()
    closed = pair.client.close_gracefully()
    with pytest.raises(LocalProtocolError, match="closing"):
        pair.rsocket.request_response(Payload(b"x"))
    with pytest.raises(LocalProtocolError, match="closing"):
        pair.rsocket.fire_and_forget(Payload(b"x"))
    collected = stream.collect()  # consuming grants more credit: the stream goes on
    pair.pump.flush()
    assert [p.data for p in collected.result] == [b"%d" % i for i in range(6)]
    assert closed.called
    assert isinstance(pair.server.rsocket.close_reason, ConnectionCloseError)


def test_nothing_outstanding_closes_at_once_with_connection_close():
    pair = MemoryPair()
    pair.pump.flush()
    closed = pair.client.close_gracefully(reason="bye")
    pair.pump.flush()
    assert closed.called
    assert str(pair.server.rsocket.close_reason) == "CONNECTION_CLOSE: bye"


def test_the_drain_timeout_fails_what_is_still_open():
    responder = Held()
    pair = MemoryPair(lambda: responder, server={"drain_timeout": 2_000})
    pending = pair.rsocket.request_response(Payload(b"never"))
    pair.pump.flush()
    closed = pair.server.close_gracefully()
    pair.clock.advance(1.999)
    pair.pump.flush()
    assert not pending.called and not closed.called
    pair.clock.advance(0.001)
    pair.pump.flush()
    assert closed.called
    failure = pending.result
    pending.addErrback(lambda f: None)
    assert failure.check(ConnectionCloseError)
    assert "1 stream still open after the drain timeout of 2000 ms" in str(failure.value)
    assert responder.held[0].called  # the handler was canceled
    responder.held[0].addErrback(lambda f: None)
    assert pair.clock.getDelayedCalls() == []


def test_the_argument_overrides_the_setting_and_zero_closes_at_once():
    responder = Held()
    pair = MemoryPair(lambda: responder)
    pending = pair.rsocket.request_response(Payload(b"never"))
    pair.pump.flush()
    closed = pair.server.close_gracefully(drain_timeout=0)
    pair.pump.flush()
    assert closed.called
    assert pending.result.check(ConnectionCloseError)
    pending.addErrback(lambda f: None)
    responder.held[0].addErrback(lambda f: None)


def test_close_gracefully_checks_its_timeout():
    pair = MemoryPair()
    with pytest.raises(ValueError, match="drain_timeout"):
        pair.client.close_gracefully(drain_timeout=-5)


def test_a_transport_that_never_closes_is_aborted():
    # a StringTransport never calls connectionLost: a peer that does not read
    proto, transport, clock = server_protocol(Held, drain_timeout=1_000)
    proto.dataReceived(wire(make_setup(), RequestResponseFrame(stream_id=1, data=b"q")))
    proto.close_gracefully()
    clock.advance(1.0)
    assert transport.disconnecting and not transport.disconnected  # closed, waiting to flush
    frames = parse(transport.value())
    assert frames[-1].error_code == CONNECTION_CLOSE
    clock.advance(ABORT_DELAY)
    assert transport.disconnected  # aborted


def test_close_gracefully_after_the_close_is_harmless():
    pair = MemoryPair()
    pair.pump.flush()
    pair.client.close()
    pair.pump.flush()
    d = pair.client.close_gracefully()
    assert d.called


# --------------------------------------------------------------------- the peer's close


def test_the_peers_connection_close_is_honoured():
    proto, transport = server_on_string_transport(EchoResponder)
    # a stream of 3 items with credit for 1
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=1, data=b"3")))
    transport.clear()
    proto.dataReceived(wire(ErrorFrame(stream_id=0, error_code=CONNECTION_CLOSE,
                                       data=b"client leaving")))
    assert not transport.disconnecting and proto.rsocket.is_open and proto.is_closing
    with pytest.raises(LocalProtocolError, match="closing"):
        proto.rsocket.request_response(Payload(b"x"))
    proto.dataReceived(wire(RequestResponseFrame(stream_id=3, data=b"new")))
    assert parse(transport.value()) == [ErrorFrame(stream_id=3, error_code=REJECTED,
                                                   data=b"connection closing")]
    transport.clear()
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=5)))
    frames = parse(transport.value())
    assert [f.data for f in frames if isinstance(f, PayloadFrame) and f.next] == [b"1", b"2"]
    assert frames[-1].complete
    assert not any(isinstance(f, ErrorFrame) for f in frames)  # the client asked: no answer
    assert transport.disconnecting
    assert str(proto.close_reason) == "CONNECTION_CLOSE: client leaving"


def test_the_peers_connection_close_drain_timeout():
    proto, transport, clock = server_protocol(EchoResponder, drain_timeout=500)
    proto.dataReceived(wire(make_setup(),
                            RequestStreamFrame(stream_id=1, initial_request_n=1, data=b"3"),
                            ErrorFrame(stream_id=0, error_code=CONNECTION_CLOSE, data=b"bye")))
    clock.advance(0.499)
    assert not transport.disconnecting
    clock.advance(0.001)
    assert transport.disconnecting
    assert "drain timeout of 500 ms" in str(proto.close_reason)


# --------------------------------------------------------------------- the server factory


def test_close_connections_drains_every_connection_and_refuses_new_ones():
    clock = Clock()
    responder = Held()
    server_factory = RSocketServerFactory(lambda: responder, reactor=clock)

    def connected():
        client_factory = RSocketClientFactory(make_setup(), reactor=clock)
        client, server, pump = connectedServerAndClient(
            lambda: server_factory.buildProtocol(None),
            lambda: client_factory.buildProtocol(None), clock=clock)
        return client, server, pump

    (c1, s1, p1), (c2, s2, p2) = connected(), connected()
    pending = [c.rsocket.request_response(Payload(b"q")) for c in (c1, c2)]
    p1.flush()
    p2.flush()
    assert server_factory.connections == {s1, s2}

    closed = server_factory.close_connections(reason="restarting")
    p1.flush()
    p2.flush()
    assert not closed.called
    c3, s3, p3 = connected()  # a connection that slips in is closed at once
    p3.flush()
    assert str(c3.rsocket.close_reason) == "CONNECTION_CLOSE: restarting"

    responder.held[0].callback(Payload(b"a"))
    p1.flush()
    assert pending[0].result == Payload(b"a") and not closed.called
    responder.held[1].callback(Payload(b"b"))
    p2.flush()
    assert pending[1].result == Payload(b"b")
    assert closed.called
    assert server_factory.connections == set()


# --------------------------------------------------------------------- the twistd service


@aio
async def test_stopping_the_service_drains_its_connections():
    settings = parse_server_settings(listen=["tcp:0:interface=127.0.0.1"])
    service = build_service(settings, reactor)
    service.startService()
    (port,) = await wait(service.when_listening())
    address = f"tcp://127.0.0.1:{port.getHost().port}"
    rsocket = await wait(connect(address, reactor=reactor))
    try:
        stream = rsocket.request_stream(Payload(b"5"), prefetch=2)
        first = await wait(stream.__anext__())
        assert first.data == b"0"
        stopped = service.stopService()
        with pytest.raises(RejectedError, match="connection closing"):
            await wait(rsocket.request_response(Payload(b"late")))
        with pytest.raises(internet_error.ConnectError):
            await wait(connect(address, reactor=reactor))  # no longer listening
        assert not stopped.called
        rest = [p.data async for p in stream]
        assert rest == [b"1", b"2", b"3", b"4"]
        await wait(stopped)
        await wait(rsocket.closed)
        assert str(rsocket.close_reason) == "CONNECTION_CLOSE: the server is shutting down"
    finally:
        rsocket.close()
        if service.running:
            await service.stopService()


@aio
async def test_twistd_drains_on_sigterm():
    process = _Process(re.compile(rb"listening on 127\.0\.0\.1:(\d+)"))
    argv = [sys.executable, "-c", TWISTD, "-n", "--pidfile=", "rsocket",
            "--listen", "tcp:0:interface=127.0.0.1", "--drain-timeout", "30000"]
    reactor.spawnProcess(process, sys.executable, argv, path=str(REPO))
    try:
        match = await process.matched.addTimeout(60, reactor)
        rsocket = await wait(connect(f"tcp://127.0.0.1:{int(match.group(1))}",
                                     reactor=reactor))
        stream = rsocket.request_stream(Payload(b"4"), prefetch=1)
        assert (await wait(stream.__anext__())).data == b"0"
        process.transport.signalProcess(signal.SIGTERM)
        # the server refuses new requests and waits for the stream
        for _ in range(100):
            late = rsocket.request_response(Payload(b"late"))
            try:
                await wait(late)
            except RejectedError as e:
                assert "connection closing" in str(e)
                break
        else:  # pragma: no cover
            raise AssertionError("the server never started closing")
        assert not process.ended.called
        assert [p.data async for p in stream] == [b"1", b"2", b"3"]
        await wait(rsocket.closed)
        assert isinstance(rsocket.close_reason, ConnectionCloseError)
        await process.ended.addTimeout(60, reactor)
    finally:
        if not process.ended.called:
            process.transport.signalProcess(signal.SIGKILL)
            await process.ended.addTimeout(60, reactor)
    assert b"Closing 1 RSocket connection(s) gracefully" in process.output
