"""Resource limits and graceful close in the sans-IO core: max concurrent streams (spec
§Stream Sequences and Lifetimes: a responder may REJECT a request), the new settings' ranges,
and CONNECTION_CLOSE (spec §Error Codes: no new requests, open streams finish, then close)."""

from __future__ import annotations

import pytest

from rsocket_tx.core import frames as F
from rsocket_tx.core.config import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_RESUME_BUFFER_SIZE,
    DEFAULT_MAX_SEND_BUFFER_SIZE,
    ConnectionConfig,
)
from rsocket_tx.core.errors import (
    ConnectionCloseError,
    ErrorCode,
    LocalProtocolError,
    RejectedError,
)
from rsocket_tx.core.events import (
    ConnectionClosed,
    ConnectionClosing,
    PayloadReceived,
    RequestReceived,
    StreamErrored,
)
from rsocket_tx.core.payload import Payload

from .conn_helpers import (
    DIRECTIONS,
    Pair,
    decode_all,
    error_frames,
    roles,
    sent,
    setup_frame,
    wire,
)

LIMIT = 3


def limited(direction: str, limit: int = LIMIT) -> tuple[Pair, object, object]:
    """A pair whose *responder* side allows ``limit`` concurrent streams."""
    config = {"max_concurrent_streams": limit}
    if direction == "client-requests":
        pair = Pair(server_config=config)
    else:
        pair = Pair(client_config=config)
    requester, responder = roles(pair, direction)
    return pair, requester, responder


def same(actual: object, expected: object) -> bool:
    """Events carrying errors compare by their repr (exceptions have no equality)."""
    return repr(actual) == repr(expected)


def rejected(frames: list) -> list[F.ErrorFrame]:
    return [f for f in error_frames(frames) if f.error_code == ErrorCode.REJECTED]


# ---------------------------------------------------------------------------------------------
# settings
# ---------------------------------------------------------------------------------------------


def test_defaults() -> None:
    config = ConnectionConfig()
    assert config.max_concurrent_streams == DEFAULT_MAX_CONCURRENT_STREAMS == 256
    assert config.max_send_buffer_size == DEFAULT_MAX_SEND_BUFFER_SIZE == 64 * 1024 * 1024
    assert config.drain_timeout == DEFAULT_DRAIN_TIMEOUT == 10_000
    assert config.max_resume_buffer_size == DEFAULT_MAX_RESUME_BUFFER_SIZE == 16 * 1024 * 1024


@pytest.mark.parametrize(("name", "value"), [
    ("max_concurrent_streams", 0),
    ("max_concurrent_streams", 2**31),
    ("max_concurrent_streams", True),
    ("max_concurrent_streams", 1.5),
    ("max_send_buffer_size", 0),
    ("max_send_buffer_size", "1"),
    ("drain_timeout", -1),
    ("drain_timeout", 2**31),
    ("drain_timeout", None),
    ("max_resume_buffer_size", 0),
    ("max_resume_buffer_size", 2**62 + 1),
])
def test_out_of_range_settings_are_refused(name: str, value: object) -> None:
    with pytest.raises(ValueError, match=name):
        ConnectionConfig(**{name: value})


@pytest.mark.parametrize("ends", [
    {"max_concurrent_streams": 1, "max_send_buffer_size": 1, "drain_timeout": 0,
     "max_resume_buffer_size": 1},
    {"max_concurrent_streams": 2**31 - 1, "max_send_buffer_size": 2**62,
     "drain_timeout": 2**31 - 1, "max_resume_buffer_size": 2**62},
], ids=["low", "high"])
def test_range_ends_are_accepted(ends: dict) -> None:
    """Each range's end is a valid setting, kept as given."""
    config = ConnectionConfig(**ends)
    assert {name: getattr(config, name) for name in ends} == ends


# ---------------------------------------------------------------------------------------------
# max concurrent streams
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_a_request_past_the_limit_is_rejected_and_the_connection_stays_up(
        direction: str) -> None:
    pair, requester, responder = limited(direction)
    sids = [requester.request_stream(Payload(b"s%d" % i), 1) for i in range(LIMIT)]
    events = pair.deliver(requester)
    assert [type(e) for e in events] == [RequestReceived] * LIMIT
    assert responder.peer_stream_count == LIMIT

    extra = requester.request_response(Payload(b"one too many"))
    assert pair.deliver(requester) == []  # not delivered to the responder
    assert responder.is_open
    (error,) = sent(responder)
    assert error.stream_id == extra and error.error_code == ErrorCode.REJECTED
    message = error.data.decode()
    assert "max_concurrent_streams" in message and str(LIMIT) in message

    # the requester sees a plain REJECTED on that stream only
    (event,) = responder_to_requester(pair, responder, error)
    assert same(event, StreamErrored(extra, RejectedError(message, ErrorCode.REJECTED)))
    assert requester.has_stream(sids[0]) and not requester.has_stream(extra)

    # once one stream ends there is room for one more
    responder.send_payload(sids[0], Payload(b"last"), complete=True)
    pair.deliver(responder)
    assert responder.peer_stream_count == LIMIT - 1
    again = requester.request_response(Payload(b"room"))
    (event,) = pair.deliver(requester)
    assert isinstance(event, RequestReceived) and event.stream_id == again
    assert responder.peer_stream_count == LIMIT


def responder_to_requester(pair: Pair, responder, error: F.ErrorFrame) -> list:
    return pair.other(responder).receive_data(wire(error))


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_our_own_requests_do_not_count(direction: str) -> None:
    pair, requester, responder = limited(direction, limit=1)
    for i in range(5):  # the limited side requests: no limit on that
        responder.request_stream(Payload(b"%d" % i), 1)
    assert len([e for e in pair.deliver(responder) if isinstance(e, RequestReceived)]) == 5
    assert responder.peer_stream_count == 0 and responder.stream_count == 5
    requester.request_response(Payload(b"q"))
    assert [type(e) for e in pair.deliver(requester)] == [RequestReceived]
    assert rejected(sent(responder)) == []


def test_every_kind_of_stream_counts_until_it_ends() -> None:
    pair, client, server = limited("client-requests", limit=4)
    rr = client.request_response(Payload(b"rr"))
    st = client.request_stream(Payload(b"st"), 1)
    ch = client.request_channel(Payload(b"ch"), 1)
    pair.to_server()
    assert server.peer_stream_count == 3
    server.send_payload(rr, Payload(b"answer"))  # request-response: one answer ends it
    assert server.peer_stream_count == 2
    server.send_complete(st)
    assert server.peer_stream_count == 1
    server.send_complete(ch)  # the channel's inbound half is still open
    assert server.peer_stream_count == 1
    pair.to_client()
    client.send_complete(ch)
    pair.to_server()
    assert server.peer_stream_count == 0 and server.stream_count == 0


def test_cancel_and_error_free_a_slot() -> None:
    pair, client, server = limited("client-requests", limit=2)
    a = client.request_stream(Payload(b"a"), 1)
    b = client.request_stream(Payload(b"b"), 1)
    pair.to_server()
    client.send_cancel(a)
    pair.to_server()
    server.send_error(b, RejectedError("no"))
    assert server.peer_stream_count == 0
    client.request_response(Payload(b"c"))
    client.request_response(Payload(b"d"))
    assert [type(e) for e in pair.to_server()] == [RequestReceived] * 2


def test_fire_and_forget_holds_no_stream_and_is_not_limited() -> None:
    pair, client, server = limited("client-requests", limit=1)
    client.request_stream(Payload(b"s"), 1)
    for i in range(3):
        client.fire_and_forget(Payload(b"f%d" % i))
    events = pair.to_server()
    assert [type(e) for e in events] == [RequestReceived] * 4
    assert rejected(sent(server)) == []


def test_a_fragmented_request_counts_while_it_arrives() -> None:
    _, _, server = limited("client-requests", limit=1)
    # a request arriving in fragments holds a stream from its first fragment
    first = F.RequestResponseFrame(stream_id=1, data=b"a" * 10, follows=True)
    assert server.receive_data(wire(first)) == []
    assert server.peer_stream_count == 1
    # a second request (even a fragmented fire-and-forget) is past the limit
    fnf = F.RequestFnfFrame(stream_id=3, data=b"b" * 10, follows=True)
    rest = F.PayloadFrame(stream_id=3, data=b"c", next=True)
    assert server.receive_data(wire(fnf) + wire(rest)) == []
    (error,) = sent(server)
    assert (error.stream_id, error.error_code) == (3, ErrorCode.REJECTED)
    # the first one completes and is delivered; its stream stays counted
    (event,) = server.receive_data(wire(F.PayloadFrame(stream_id=1, data=b"z", next=True)))
    assert event.payload == Payload(b"a" * 10 + b"z")
    assert server.peer_stream_count == 1


def test_the_limit_check_happens_on_the_fast_path_too() -> None:
    # requests fed in one read go through the no-frame-object fast path
    pair, client, server = limited("client-requests", limit=2)
    for i in range(4):
        client.request_stream(Payload(b"%d" % i), 1)
    events = pair.to_server()
    assert [e.stream_id for e in events] == [1, 3]
    assert [f.stream_id for f in rejected(sent(server))] == [5, 7]


# ---------------------------------------------------------------------------------------------
# graceful close, ours
# ---------------------------------------------------------------------------------------------


def test_close_with_nothing_open_sends_connection_close_at_once() -> None:
    pair = Pair()
    events = pair.client.begin_close(reason="bye")
    assert events == [ConnectionClosing(None, False, 0), ConnectionClosed(None, False)]
    assert sent(pair.client) == [F.ErrorFrame(stream_id=0,
                                              error_code=ErrorCode.CONNECTION_CLOSE,
                                              data=b"bye")]
    assert not pair.client.is_open


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_close_waits_for_open_streams_then_sends_connection_close(direction: str) -> None:
    pair = Pair()
    requester, responder = roles(pair, direction)
    sid = requester.request_response(Payload(b"q"))
    pair.deliver(requester)

    events = responder.begin_close(now=0.0, reason="shutting down")
    assert events == [ConnectionClosing(None, False, 1)]
    assert responder.is_open and responder.is_closing
    assert responder.data_to_send() == b""  # nothing is announced while streams run

    # our new requests are refused locally
    with pytest.raises(LocalProtocolError, match="closing"):
        responder.request_response(Payload(b"mine"))
    with pytest.raises(LocalProtocolError, match="closing"):
        responder.fire_and_forget(Payload(b"mine"))
    # the peer's new requests (every kind) get REJECTED "connection closing"
    new = [requester.request_response(Payload(b"late")),
           requester.request_stream(Payload(b"late"), 1),
           requester.request_channel(Payload(b"late"), 1),
           requester.fire_and_forget(Payload(b"late"))]
    assert pair.deliver(requester) == []
    refused = sent(responder)
    assert [(f.stream_id, f.error_code, f.data) for f in refused] == [
        (s, ErrorCode.REJECTED, b"connection closing") for s in new]
    # metadata push is not a request: it still goes both ways
    responder.metadata_push(b"m")
    requester.metadata_push(b"m")
    pair.deliver(requester)
    responder.data_to_send()

    # the outstanding request is answered; then CONNECTION_CLOSE, and the connection closes
    responder.send_payload(sid, Payload(b"answer"))
    assert not responder.is_open
    assert responder.pending_events() == [ConnectionClosed(None, False)]
    assert responder.pending_events() == []
    frames = sent(responder)
    assert frames == [F.PayloadFrame(stream_id=sid, data=b"answer", next=True, complete=True),
                      F.ErrorFrame(stream_id=0, error_code=ErrorCode.CONNECTION_CLOSE,
                                   data=b"shutting down")]
    # the requester gets its answer before the close
    events = pair.other(responder).receive_data(b"".join(wire(f) for f in frames))
    assert isinstance(events[0], PayloadReceived) and events[0].payload == Payload(b"answer")


def test_close_completes_inside_receive_when_the_peer_ends_the_last_stream() -> None:
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 2)
    pair.to_server()
    pair.client.begin_close(now=0.0)
    pair.server.send_payload(sid, Payload(b"1"))
    pair.server.send_payload(sid, Payload(b"2"), complete=True)
    # a KEEPALIVE after the last item in the same read is not answered: the connection closed
    data = pair.server.data_to_send() + wire(F.KeepaliveFrame(respond=True))
    events = pair.client.receive_data(data)
    assert [type(e) for e in events] == [PayloadReceived, PayloadReceived, ConnectionClosed]
    assert events[-1] == ConnectionClosed(None, False)
    assert [f.error_code for f in sent(pair.client)] == [ErrorCode.CONNECTION_CLOSE]


def test_drain_timeout_closes_with_the_streams_still_open() -> None:
    pair = Pair(client_config={"drain_timeout": 2_000},
                setup=setup_frame(keepalive_interval=60_000, max_lifetime=120_000))
    sid = pair.client.request_stream(Payload(b"s"), 1)
    pair.to_server()
    pair.client.begin_close(now=10.0)
    assert pair.client.next_deadline() == 12.0  # before the keepalive or lifetime deadline
    assert pair.client.tick(11.999) == []
    assert pair.client.is_open
    pair.client.data_to_send()
    (event,) = pair.client.tick(12.0)
    assert isinstance(event, ConnectionClosed) and not event.by_peer
    assert isinstance(event.error, ConnectionCloseError)
    assert event.error.message == "1 stream still open after the drain timeout of 2000 ms"
    (error,) = sent(pair.client)
    assert (error.stream_id, error.error_code) == (0, ErrorCode.CONNECTION_CLOSE)
    assert error.data == event.error.message.encode()
    assert not pair.client.has_stream(sid)


def test_drain_timeout_argument_overrides_the_setting_and_zero_closes_at_once() -> None:
    pair = Pair()
    pair.client.request_stream(Payload(b"a"), 1)
    pair.client.request_stream(Payload(b"b"), 1)
    pair.to_server()
    events = pair.client.begin_close(now=0.0, drain_timeout=0)
    assert [type(e) for e in events] == [ConnectionClosing, ConnectionClosed]
    assert events[1].error.message == "2 streams still open after the drain timeout of 0 ms"
    assert [f.error_code for f in sent(pair.client)] == [ErrorCode.CONNECTION_CLOSE]


def test_closing_again_only_shortens_the_timeout() -> None:
    pair = Pair()
    pair.client.request_stream(Payload(b"s"), 1)
    pair.client.begin_close(now=0.0, drain_timeout=5_000)
    assert pair.client.begin_close(now=1.0, drain_timeout=10_000) == []
    assert pair.client.next_deadline() == 1.0  # the keepalive comes first
    assert pair.client.begin_close(now=1.0, drain_timeout=1_000) == []
    pair.client.tick(1.0)
    assert pair.client.next_deadline() == 2.0
    assert [type(e) for e in pair.client.tick(2.0)] == [ConnectionClosed]


def test_begin_close_checks_its_timeout_and_does_nothing_when_closed() -> None:
    pair = Pair()
    with pytest.raises(ValueError, match="drain_timeout"):
        pair.client.begin_close(drain_timeout=-1)
    pair.client.close()
    assert pair.client.begin_close() == []


def test_a_server_closing_before_setup_closes_at_once() -> None:
    pair = Pair(establish=False)
    events = pair.server.begin_close()
    assert [type(e) for e in events] == [ConnectionClosing, ConnectionClosed]
    assert [f.error_code for f in sent(pair.server)] == [ErrorCode.CONNECTION_CLOSE]


def test_a_fragmented_request_begun_before_the_close_is_still_served() -> None:
    pair = Pair()
    server = pair.server
    server.receive_data(wire(F.RequestResponseFrame(stream_id=1, data=b"a", follows=True)))
    server.begin_close(now=0.0)
    (event,) = server.receive_data(wire(F.PayloadFrame(stream_id=1, data=b"b", next=True)))
    assert isinstance(event, RequestReceived) and event.payload == Payload(b"ab")
    assert server.is_open
    server.send_payload(1, Payload(b"answer"))
    assert server.pending_events() == [ConnectionClosed(None, False)]


def test_a_fragmented_fire_and_forget_begun_before_the_close_ends_it() -> None:
    pair = Pair()
    server = pair.server
    server.receive_data(wire(F.RequestFnfFrame(stream_id=1, data=b"a", follows=True)))
    server.begin_close(now=0.0)
    events = server.receive_data(wire(F.PayloadFrame(stream_id=1, data=b"b", next=True)))
    assert [type(e) for e in events] == [RequestReceived, ConnectionClosed]


# ---------------------------------------------------------------------------------------------
# graceful close, the peer's (ERROR[CONNECTION_CLOSE] received)
# ---------------------------------------------------------------------------------------------


def connection_close(message: bytes = b"bye") -> bytes:
    return wire(F.ErrorFrame(stream_id=0, error_code=ErrorCode.CONNECTION_CLOSE, data=message))


@pytest.mark.parametrize("direction", DIRECTIONS)
def test_peer_connection_close_lets_open_streams_finish(direction: str) -> None:
    pair = Pair()
    requester, responder = roles(pair, direction)
    sid = requester.request_stream(Payload(b"s"), 5)
    pair.deliver(requester)

    # the responder receives the peer's CONNECTION_CLOSE while serving the stream
    events = responder.receive_data(connection_close(b"peer leaving"))
    assert same(events, [ConnectionClosing(ConnectionCloseError("peer leaving"), True, 1)])
    assert responder.is_open and responder.is_closing
    with pytest.raises(LocalProtocolError, match="closing"):
        responder.request_response(Payload(b"x"))
    requester_late = requester.request_response(Payload(b"late"))
    assert pair.deliver(requester) == []
    assert [(f.stream_id, f.error_code) for f in sent(responder)] == [
        (requester_late, ErrorCode.REJECTED)]

    responder.send_payload(sid, Payload(b"1"))
    assert responder.pending_events() == []
    responder.send_complete(sid)
    (event,) = responder.pending_events()
    assert same(event, ConnectionClosed(ConnectionCloseError("peer leaving"), True))
    # the peer asked for the close: nothing more than the stream's frames goes back
    assert [type(f) for f in sent(responder)] == [F.PayloadFrame, F.PayloadFrame]


def test_peer_connection_close_with_nothing_open_closes_at_once() -> None:
    pair = Pair()
    (event,) = pair.server.receive_data(connection_close())
    assert same(event, ConnectionClosed(ConnectionCloseError("bye"), True))
    assert pair.server.data_to_send() == b""


def test_peer_connection_close_drain_timeout() -> None:
    pair = Pair(server_config={"drain_timeout": 500})
    pair.client.request_channel(Payload(b"c"), 1)
    pair.to_server()
    pair.server.tick(3.0)
    pair.server.data_to_send()
    events = pair.server.receive_data(connection_close(), now=3.0)
    assert [type(e) for e in events] == [ConnectionClosing]
    assert pair.server.next_deadline() == 3.5
    (event,) = pair.server.tick(3.5)
    assert event.by_peer and isinstance(event.error, ConnectionCloseError)
    assert "drain timeout of 500 ms" in event.error.message
    (error,) = sent(pair.server)
    assert error.error_code == ErrorCode.CONNECTION_CLOSE


def test_peer_connection_close_while_we_close_keeps_our_deadline() -> None:
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 1)
    pair.to_server()
    pair.server.begin_close(now=0.0, drain_timeout=1_000)
    assert pair.server.receive_data(connection_close()) == []
    assert pair.server.next_deadline() == 1.0
    pair.server.send_complete(sid)
    assert [type(e) for e in pair.server.pending_events()] == [ConnectionClosed]
    frames = decode_all(pair.server.data_to_send())
    assert [type(f) for f in frames] == [F.PayloadFrame, F.ErrorFrame]


def test_the_transport_lost_after_the_peers_connection_close_reports_the_peers_reason() -> None:
    # the peer closes once its own drain timeout passed: its message says why our streams end
    pair = Pair()
    pair.client.request_response(Payload(b"q"))
    pair.to_server()
    pair.client.receive_data(connection_close(b"1 stream still open after the drain timeout"))
    (event,) = pair.client.connection_lost()
    assert same(event, ConnectionClosed(
        ConnectionCloseError("1 stream still open after the drain timeout"), True))


def test_the_transport_lost_during_our_close_is_a_lost_connection() -> None:
    pair = Pair()
    pair.client.request_response(Payload(b"q"))
    pair.client.begin_close()
    (event,) = pair.client.connection_lost("gone")
    assert event.by_peer and type(event.error).__name__ == "ConnectionLostError"

