"""RSocketProtocol over in-memory transports (StringTransport + Clock): producer registration,
transport backpressure, write batching, SETUP acceptance; plus backpressure over real TCP."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import defer
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IHalfCloseableDescriptor, ITCPTransport
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python.failure import Failure
from twisted_support import PauseRecordingResponder, parse, server_protocol, wait, wire
from zope.interface import implementer

from rsocket_tx import (
    ConnectionLostError,
    Payload,
    RejectedSetupError,
    Responder,
    RSocketClientFactory,
)
from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import (
    CancelFrame,
    ErrorFrame,
    FrameType,
    PayloadFrame,
    RequestChannelFrame,
    RequestNFrame,
    RequestResponseFrame,
    RequestStreamFrame,
)
from rsocket_tx.protocol import ABORT_DELAY


class CountingTransport(StringTransport):
    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def write(self, data) -> None:
        self.writes += 1
        super().write(data)

    def writeSequence(self, seq) -> None:
        # one call hands the transport every chunk at once: it counts as one write
        self.writes += 1
        super().write(b"".join(seq))


def take(transport: StringTransport) -> list:
    frames = parse(transport.value())
    transport.clear()
    return frames


def server(responder_factory, **kw):
    return server_protocol(responder_factory, transport=CountingTransport(), **kw)


def client(responder=None, **kw):
    clock = Clock()
    factory = RSocketClientFactory(make_setup(**kw), responder, reactor=clock)
    proto = factory.buildProtocol(None)
    transport = CountingTransport()
    proto.makeConnection(transport)
    return proto, transport, clock


SETUP = wire(make_setup())


class Source:
    """A synchronous stream source that records how many items were pulled."""

    def __init__(self, n: int = 1_000_000, on_pull=None) -> None:
        self.pulled = 0
        self.n = n
        self.on_pull = on_pull

    def __iter__(self):
        for i in range(self.n):
            self.pulled += 1
            if self.on_pull is not None:
                self.on_pull(self.pulled)
            yield Payload(b"%d" % i)


def payloads(frames, sid: int) -> list:
    return [f for f in frames if isinstance(f, PayloadFrame) and f.stream_id == sid and f.next]


# --------------------------------------------------------------------- producer


def test_protocol_registers_itself_as_streaming_producer():
    proto, transport, _ = client()
    assert transport.producer is proto and transport.streaming is True
    sproto, stransport, _ = server(Responder)
    assert stransport.producer is sproto and stransport.streaming is True


def test_client_sends_setup_on_connection_made():
    _, transport, _ = client(setup_payload=Payload(b"d", b"m"), keepalive_interval=500,
                             max_lifetime=2000, data_mime_type="text/plain")
    assert transport.writes == 1
    (frame,) = take(transport)
    assert frame == make_setup(setup_payload=Payload(b"d", b"m"), keepalive_interval=500,
                               max_lifetime=2000, data_mime_type="text/plain")


@pytest.mark.parametrize("kind", ["iterable", "async iterable"])
def test_paused_transport_stops_requester_pump_even_with_credit(kind):
    proto, transport, _ = client()
    take(transport)
    pulled = []

    def sync_out():
        for i in range(1000):
            pulled.append(i)
            yield Payload(b"%d" % i)

    async def async_out():
        for i in range(1000):
            pulled.append(i)
            yield Payload(b"%d" % i)

    stream = proto.rsocket.request_channel(
        Payload(b"first"), sync_out() if kind == "iterable" else async_out())
    (request,) = take(transport)
    assert isinstance(request, RequestChannelFrame) and request.stream_id == stream.stream_id
    # no credit yet: only the one item the pump pulls ahead (to see an end, which needs none)
    assert pulled == [0]

    proto.pauseProducing()
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=10)))
    assert pulled == [0] and take(transport) == []

    proto.resumeProducing()
    assert len(pulled) == 10 + 1  # (+ 1: pulled ahead again once the credit is used up)
    assert [f.data for f in payloads(take(transport), 1)] == [b"%d" % i for i in range(10)]

    proto.pauseProducing()
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=5)))
    assert len(pulled) == 11 and take(transport) == []
    proto.resumeProducing()
    assert len(pulled) == 15 + 1
    assert len(payloads(take(transport), 1)) == 5


def test_paused_transport_stops_responder_stream_pump():
    source = Source()

    class R(Responder):
        def request_stream(self, payload):
            return source

    proto, transport, _ = server(lambda: R())
    proto.dataReceived(SETUP)
    proto.pauseProducing()
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=5)))
    assert source.pulled == 0 and take(transport) == []
    proto.resumeProducing()
    assert source.pulled == 5 + 1  # (+ 1: pulled ahead once the credit is used up)
    assert len(payloads(take(transport), 1)) == 5
    proto.pauseProducing()
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=3)))
    assert source.pulled == 6
    proto.resumeProducing()
    assert source.pulled == 8 + 1
    assert len(payloads(take(transport), 1)) == 3


def test_pause_in_the_middle_of_a_pull_batch_stops_pulling():
    holder = {}

    def on_pull(n):
        if n == 3:  # the transport's buffer fills while the pump is sending
            holder["proto"].pauseProducing()

    source = Source(on_pull=on_pull)

    class R(Responder):
        def request_stream(self, payload):
            return source

    proto, transport, _ = server(lambda: R())
    holder["proto"] = proto
    proto.dataReceived(SETUP)
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=10)))
    assert source.pulled == 3
    assert len(payloads(take(transport), 1)) == 3
    proto.resumeProducing()
    assert source.pulled == 10 + 1  # (+ 1: pulled ahead once the credit is used up)
    assert len(payloads(take(transport), 1)) == 7


def test_large_sync_source_yields_to_the_reactor_between_batches():
    source = Source(n=3000)

    class R(Responder):
        def request_stream(self, payload):
            return source

    proto, transport, clock = server(lambda: R())
    proto.dataReceived(SETUP)
    proto.dataReceived(wire(RequestStreamFrame(stream_id=1, initial_request_n=5000)))
    assert 0 < source.pulled < 3000  # not everything in one reactor turn
    for _ in range(20):
        clock.advance(0)
    frames = take(transport)
    assert len(payloads(frames, 1)) == 3000
    assert frames[-1] == PayloadFrame(stream_id=1, complete=True)


@pytest.mark.parametrize("one_read", [False, True], ids=["separate-reads", "one-read"])
def test_channel_cancel_from_responder_keeps_the_requester_inbound_half(one_read):
    """Responder CANCELs the requester's outbound half, then sends and completes its own half.
    Whether those frames arrive in one read or several must not matter."""
    proto, transport, _ = client()
    source = Source()
    stream = proto.rsocket.request_channel(Payload(b"first"), iter(source), prefetch=8)
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=2)))
    assert source.pulled == 2 + 1  # (+ 1: pulled ahead once the credit is used up)
    frames = [CancelFrame(stream_id=1), PayloadFrame(stream_id=1, data=b"a", next=True),
              PayloadFrame(stream_id=1, complete=True)]
    if one_read:
        proto.dataReceived(wire(*frames))
    else:
        for frame in frames:
            proto.dataReceived(wire(frame))
    result = []
    stream.collect().addBoth(result.append)
    assert result == [[Payload(b"a")]]
    proto.dataReceived(wire(RequestNFrame(stream_id=1, request_n=5)))
    assert source.pulled == 3  # the canceled outbound half is not pulled any more


# --------------------------------------------------------------------- writes


def test_one_read_is_answered_with_one_write():
    class R(Responder):
        def request_response(self, payload):
            return Payload(payload.data.upper())

    proto, transport, _ = server(lambda: R())
    proto.dataReceived(SETUP + wire(*[RequestResponseFrame(stream_id=2 * i + 1, data=b"q%d" % i)
                                      for i in range(5)]))
    assert transport.writes == 1
    frames = take(transport)
    assert [(f.stream_id, f.data) for f in frames] == [(2 * i + 1, b"Q%d" % i) for i in range(5)]
    assert all(f.complete and f.next for f in frames)


@pytest.mark.parametrize("bad", ["not a payload", 42])
@pytest.mark.logs_failure("a stream source yielding a non-Payload is a bug: the server logs it",
                          match=r"stream items must be Payload, not (str|int)")
def test_handler_returning_a_non_payload_sends_application_error(bad):
    class R(Responder):
        def request_response(self, payload):
            return bad

        def request_stream(self, payload):
            return [Payload(b"ok"), bad]

    proto, transport, _ = server(lambda: R())
    proto.dataReceived(SETUP + wire(RequestResponseFrame(stream_id=1),
                                    RequestStreamFrame(stream_id=3, initial_request_n=10)))
    frames = take(transport)
    errors = {f.stream_id: f for f in frames if isinstance(f, ErrorFrame)}
    assert set(errors) == {1, 3}
    assert all(e.error_code == 0x201 for e in errors.values())
    assert [f.data for f in payloads(frames, 3)] == [b"ok"]
    assert proto.rsocket.is_open


def test_frame_logger_sees_both_directions():
    log = []

    class R(Responder):
        def request_response(self, payload):
            return payload

    proto, transport, _ = server(lambda: R(), frame_logger=lambda d, f: log.append((d, f)))
    proto.dataReceived(SETUP + wire(RequestResponseFrame(stream_id=1, data=b"x")))
    assert [(d, f.frame_type) for d, f in log] == [
        ("recv", FrameType.SETUP), ("recv", FrameType.REQUEST_RESPONSE),
        ("send", FrameType.PAYLOAD)]


# --------------------------------------------------------------------- SETUP acceptance


class RecordingResponder(Responder):
    def __init__(self, decision=None) -> None:
        self.handled = []
        self.decision = decision

    def accept_setup(self, setup):
        if isinstance(self.decision, Exception):
            raise self.decision
        return self.decision

    def request_response(self, payload):
        self.handled.append(payload.data)
        return Payload(b"served")


def test_rejected_setup_does_not_dispatch_pipelined_requests():
    responder = RecordingResponder(RejectedSetupError("no"))
    proto, transport, clock = server(lambda: responder)
    proto.dataReceived(SETUP + wire(RequestResponseFrame(stream_id=1, data=b"x"),
                                    RequestStreamFrame(stream_id=3, initial_request_n=1)))
    assert take(transport) == [ErrorFrame(stream_id=0, error_code=0x3, data=b"no")]
    assert transport.disconnecting
    assert responder.handled == [], "the responder served a request of a rejected connection"


def test_async_acceptor_holds_pipelined_requests_until_it_fires():
    decision = defer.Deferred()
    responder = RecordingResponder(decision)
    proto, transport, _ = server(lambda: responder)
    proto.dataReceived(SETUP + wire(RequestResponseFrame(stream_id=1, data=b"a")))
    proto.dataReceived(wire(RequestResponseFrame(stream_id=3, data=b"b")))
    assert responder.handled == [] and take(transport) == []
    decision.callback(None)
    assert responder.handled == [b"a", b"b"]
    frames = take(transport)
    assert [(f.stream_id, f.data) for f in frames] == [(1, b"served"), (3, b"served")]
    proto.dataReceived(wire(RequestResponseFrame(stream_id=5, data=b"c")))
    assert responder.handled == [b"a", b"b", b"c"]


def test_async_acceptor_rejection_drops_held_requests():
    decision = defer.Deferred()
    responder = RecordingResponder(decision)
    proto, transport, _ = server(lambda: responder)
    proto.dataReceived(SETUP + wire(RequestResponseFrame(stream_id=1, data=b"a")))
    decision.errback(RejectedSetupError("go away"))
    assert take(transport) == [ErrorFrame(stream_id=0, error_code=0x3, data=b"go away")]
    assert transport.disconnecting
    assert responder.handled == []


@pytest.mark.logs_failure("an acceptor's bug is logged with its traceback (and the SETUP "
                          "rejected)", match="accept_setup raised")
def test_acceptor_raising_a_plain_exception_rejects_the_setup():
    responder = RecordingResponder(ValueError("acceptor bug"))
    proto, transport, _ = server(lambda: responder)
    proto.dataReceived(SETUP)
    (error,) = take(transport)
    assert error.stream_id == 0 and error.error_code == 0x3
    assert b"acceptor bug" in error.data
    assert transport.disconnecting


# --------------------------------------------------------------------- connection end


def test_transport_loss_fails_requests_and_cancels_timers():
    proto, transport, clock = client()
    d = proto.rsocket.request_response(Payload(b"x"))
    stream = proto.rsocket.request_stream(Payload(b"y"))
    collected = stream.collect()
    assert clock.getDelayedCalls()  # keepalive timer running
    proto.connectionLost(Failure(ConnectionDone()))
    failures = []
    d.addErrback(failures.append)
    collected.addErrback(failures.append)
    assert [f.type for f in failures] == [ConnectionLostError, ConnectionLostError]
    assert clock.getDelayedCalls() == []
    assert not proto.rsocket.is_open


def test_local_close_with_nothing_open_says_connection_close_and_closes():
    proto, transport, clock = client()
    take(transport)
    closed = proto.rsocket.closed
    d = proto.rsocket.close()
    assert transport.disconnecting
    # nothing to drain: ERROR[CONNECTION_CLOSE] (spec §Error Codes) at once, then the close
    [frame] = take(transport)
    assert (frame.stream_id, frame.error_code) == (0, 0x102)
    # closed (and close()'s Deferred) fire once the transport is gone, not before: what was
    # written before close() (a fire-and-forget, say) has been handed over by then
    assert not closed.called and not d.called
    proto.connectionLost(Failure(ConnectionDone()))
    assert closed.called and d.called


# --------------------------------------------------------------------- real TCP backpressure


@pytest_twisted.ensureDeferred
async def test_tcp_write_buffer_pauses_the_source_until_drained(harness):
    chunk = b"x" * 65_536
    n = 200
    state = PauseRecordingResponder.new_state()

    class R(PauseRecordingResponder):
        server_protocols = harness.server_protocols

    R.n, R.chunk, R.state = n, chunk, state

    rs = await harness.connect(await harness.serve(R))
    items = await wait(rs.request_stream(Payload(b"")).collect())
    assert len(items) == n and all(p.data == chunk for p in items)
    assert state["paused_at"], "the transport never paused the protocol"
    # the transport buffers 64 KiB before pausing its producer: the source must stop long
    # before the whole credit (256 items of 64 KiB) has been pulled into memory
    assert state["paused_at"][0] < n, "the pump pulled everything before the transport paused"
    assert state["resumes"] >= 1
    assert state["pulled_while_paused"] == 0


# --------------------------------------------------------------------- coalesced writes


def test_requests_made_in_one_turn_share_one_write_and_fnf_fires_when_written():
    proto, transport, clock = client()
    take(transport)
    writes = transport.writes
    fired = [proto.rsocket.fire_and_forget(Payload(b"%d" % i)) for i in range(50)]
    pushed = proto.rsocket.metadata_push(b"m")
    response = proto.rsocket.request_response(Payload(b"q"))
    # nothing is handed to the transport before the end of the reactor turn
    assert transport.writes == writes and transport.value() == b""
    assert not any(d.called for d in fired) and not pushed.called
    clock.advance(0)
    assert transport.writes == writes + 1
    frames = take(transport)
    assert [f.frame_type for f in frames] == (
        [FrameType.REQUEST_FNF] * 50 + [FrameType.METADATA_PUSH, FrameType.REQUEST_RESPONSE])
    assert [f.data for f in frames[:50]] == [b"%d" % i for i in range(50)]
    assert all(d.called for d in fired) and pushed.called
    assert not response.called


def test_fnf_not_yet_written_fails_when_the_transport_is_lost():
    proto, transport, clock = client()
    take(transport)
    d = proto.rsocket.fire_and_forget(Payload(b"late"))
    failures = []
    d.addErrback(failures.append)
    proto.connectionLost(Failure(ConnectionDone()))
    assert [f.type for f in failures] == [ConnectionLostError]
    assert clock.getDelayedCalls() == []


def test_fnf_then_close_writes_the_frame_before_closing():
    proto, transport, clock = client()
    take(transport)
    d = proto.rsocket.fire_and_forget(Payload(b"last"))
    proto.rsocket.close()
    assert d.called  # handed over before the close
    fnf, close = take(transport)
    assert fnf.data == b"last"
    assert (close.stream_id, close.error_code) == (0, 0x102)  # then ERROR[CONNECTION_CLOSE]
    assert transport.disconnecting


# --------------------------------------------------------------------- closing a TCP transport


@implementer(ITCPTransport, IHalfCloseableDescriptor)
class TCPTransport(StringTransport):
    """A StringTransport that is TCP: it can half-close (FIN) and abort (RST)."""

    write_closed = False
    aborted = False

    def loseWriteConnection(self) -> None:
        self.write_closed = True

    def abortConnection(self) -> None:
        self.aborted = True


def test_tcp_close_after_an_error_half_closes_reads_on_then_aborts():
    proto, transport, clock = server_protocol(Responder, transport=TCPTransport())
    proto.dataReceived(b"\x00\x00\x06\x00\x00\x00\x00\xfc\x00")  # a frame of unknown type 0x3F
    [error] = parse(transport.value())
    # before SETUP: ERROR[INVALID_SETUP] (spec §Connection Establishment)
    assert (error.stream_id, error.error_code) == (0, 0x001)
    # FIN after the ERROR, not a full close: the peer may still be writing, and closing with
    # unread bytes would make the kernel send RST, which can destroy the ERROR unread
    assert transport.write_closed and not transport.disconnecting
    proto.dataReceived(b"more bytes from a peer still sending")  # read and ignored
    assert parse(transport.value()) == [error]
    clock.advance(ABORT_DELAY)  # the peer never closed its side
    assert transport.aborted


def test_tcp_close_is_done_when_the_peer_closes_its_side():
    proto, transport, clock = server_protocol(Responder, transport=TCPTransport())
    proto.dataReceived(b"\x00\x00\x06\x00\x00\x00\x00\xfc\x00")
    assert transport.write_closed
    proto.connectionLost(Failure(ConnectionDone()))
    assert clock.getDelayedCalls() == [] and not transport.aborted
