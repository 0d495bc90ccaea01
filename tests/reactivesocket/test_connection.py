"""ReactiveSocketConnection, sans-IO: the draft's sequences (§Connection Establishment,
§Stream Sequences and Lifetimes, §Fragmentation And Reassembly, §Lease Frame) between two
connections, and every rule rsocket_tx decided for the draft's "Handling the Unexpected: TBD"
(docs/reactivesocket.rst), one test each, on hand-built frames."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.core import errors as E
from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.events import (
    CancelReceived,
    ConnectionClosed,
    ConnectionClosing,
    LeaseReceived,
    MetadataPushReceived,
    PayloadReceived,
    RequestNReceived,
    RequestReceived,
    SetupReceived,
    StreamErrored,
)
from rsocket_tx.core.frames import FrameType as CoreType
from rsocket_tx.core.lease import Lease
from rsocket_tx.core.payload import Payload
from rsocket_tx.reactivesocket import frames as F
from rsocket_tx.reactivesocket.connection import MAX_REQUEST_N, ReactiveSocketConnection

from .conn_helpers import SETUP, Pair, make_client, make_server, open_server, sent, wire

# ----------------------------------------------------------------- establishment


def test_the_client_sends_setup_first():
    client = make_client()
    assert sent(client) == [SETUP]
    assert client.is_established


def test_the_server_reports_setup_in_rsocket_form():
    server = make_server()
    [event] = server.receive_data(wire(SETUP), 0.0)
    assert isinstance(event, SetupReceived)
    setup = event.setup
    assert (setup.major_version, setup.minor_version) == (0, 0)
    assert setup.data_mime_type == b"text/plain"
    assert (setup.data, setup.metadata) == (b"setup-data", b"setup-meta")
    assert server.draft_setup == SETUP


def test_requests_right_after_setup_in_one_read():
    """Draft §Sequences without LEASE: the client sends SETUP and a REQUEST at once."""
    server = make_server()
    events = server.receive_data(
        wire(SETUP) + wire(F.RequestResponseFrame(stream_id=1, data=b"q")), 0.0)
    assert isinstance(events[0], SetupReceived)
    assert events[1] == RequestReceived(1, CoreType.REQUEST_RESPONSE, Payload(b"q"), 0)


def test_a_first_frame_other_than_setup_is_invalid_setup():
    server = make_server()
    events = server.receive_data(wire(F.RequestFnfFrame(stream_id=1)), 0.0)
    [closed] = events
    assert isinstance(closed, ConnectionClosed) and isinstance(closed.error,
                                                               E.InvalidSetupError)
    [error] = sent(server)
    assert error == F.SetupErrorFrame(
        error_code=F.SetupErrorCode.INVALID_SETUP,
        data=b"the first frame must be SETUP, got REQUEST_FNF")
    assert not server.is_open


def test_another_version_is_unsupported_setup():
    server = make_server()
    raw = bytearray(F.encode(SETUP))
    raw[0] = 1
    [closed] = server.receive_data(F.frame_with_length(bytes(raw)), 0.0)
    assert isinstance(closed.error, E.UnsupportedSetupError)
    [error] = sent(server)
    assert error.error_code == F.SetupErrorCode.UNSUPPORTED_SETUP


def test_setup_on_a_stream_is_invalid():
    server = make_server()
    bad = F.SetupFrame(metadata_mime_type=b"", data_mime_type=b"", stream_id=3)
    [closed] = server.receive_data(wire(bad), 0.0)
    assert isinstance(closed.error, E.InvalidSetupError)
    assert sent(server)[0].error_code == F.SetupErrorCode.INVALID_SETUP


def test_setup_timeout():
    server = make_server(now=10.0, setup_timeout=500)
    assert server.next_deadline() == 10.5
    assert server.tick(10.4) == []
    [closed] = server.tick(10.5)
    assert isinstance(closed.error, E.InvalidSetupError)
    assert sent(server)[0].error_code == F.SetupErrorCode.INVALID_SETUP


def test_a_second_setup_is_ignored_and_a_client_ignores_setup():
    server = open_server()
    assert server.receive_data(wire(SETUP), 0.0) == []
    assert server.is_open and server.data_to_send() == b""
    client = make_client()
    client.data_to_send()
    assert client.receive_data(wire(SETUP), 0.0) == []
    assert client.is_open


@pytest.mark.parametrize("error, code", [
    (E.InvalidSetupError("bad"), F.SetupErrorCode.INVALID_SETUP),
    (E.UnsupportedSetupError("old"), F.SetupErrorCode.UNSUPPORTED_SETUP),
    (E.RejectedSetupError("no"), F.SetupErrorCode.REJECTED_SETUP),
])
def test_reject_setup_and_the_client_sees_the_same_error(error, code):
    pair = Pair()
    pair.take()
    events = pair.server.reject_setup(error)
    assert isinstance(events[0], ConnectionClosed)
    [frame] = F.FrameReader(1024).feed(pair.server.data_to_send())
    assert F.decode(frame) == F.SetupErrorFrame(error_code=code, data=error.message.encode())
    [closed] = pair.client.receive_data(F.frame_with_length(frame), 0.0)
    assert type(closed.error) is type(error) and closed.error.message == error.message


def test_setup_error_after_the_setup_was_confirmed_is_ignored():
    client = make_client()
    client.data_to_send()
    client.receive_data(wire(F.LeaseFrame(time=0, number_of_requests=0)), 0.0)  # confirms
    assert client.receive_data(wire(F.SetupErrorFrame(error_code=1)), 0.0) == []
    assert client.is_open


def test_setup_error_with_an_unknown_code():
    client = make_client()
    [closed] = client.receive_data(wire(F.SetupErrorFrame(error_code=0x77, data=b"?")), 0.0)
    assert isinstance(closed.error, E.RejectedSetupError)
    assert "0x0077" in closed.error.message


def test_a_server_ignores_setup_error():
    server = open_server()
    assert server.receive_data(wire(F.SetupErrorFrame(error_code=1)), 0.0) == []


# ----------------------------------------------------------------- interactions


def test_request_response():
    pair = Pair()
    pair.take()
    sid = pair.client.request_response(Payload(b"q", b"m"))
    assert sid == 1
    pair.pump()
    _, [request] = pair.take()
    assert request == RequestReceived(1, CoreType.REQUEST_RESPONSE, Payload(b"q", b"m"), 0)
    pair.server.send_payload(1, Payload(b"a"))
    assert sent(pair.server) == [F.ResponseFrame(stream_id=1, data=b"a", complete=True)]


def test_request_response_answered_with_nothing():
    pair = Pair()
    pair.client.request_response(Payload(b"q"))
    pair.pump()
    pair.take()
    pair.server.send_complete(1)
    pair.pump()
    [event], _ = pair.take()
    assert event == PayloadReceived(1, None, True)
    assert not pair.client.has_stream(1)


def test_request_response_answer_is_complete_without_c():
    client = make_client()
    client.request_response(Payload(b"q"))
    client.data_to_send()
    [event] = client.receive_data(wire(F.ResponseFrame(stream_id=1, data=b"a")), 0.0)
    assert event == PayloadReceived(1, Payload(b"a"), True)


def test_fire_and_forget_holds_no_stream():
    pair = Pair()
    sid = pair.client.fire_and_forget(Payload(b"f"))
    pair.pump()
    _, [event] = pair.take()
    assert event == RequestReceived(sid, CoreType.REQUEST_FNF, Payload(b"f"), 0)
    assert pair.client.stream_count == 0 and pair.server.stream_count == 0


def test_request_stream_with_flow_control():
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 2)
    pair.pump()
    _, [request] = pair.take()
    assert request == RequestReceived(sid, CoreType.REQUEST_STREAM, Payload(b"s"), 2)
    server = pair.server
    assert server.credit(sid) == 2
    server.send_payload(sid, Payload(b"1"))
    server.send_payload(sid, Payload(b"2"))
    with pytest.raises(E.LocalProtocolError, match="no credit"):
        server.send_payload(sid, Payload(b"3"))
    pair.client.send_request_n(sid, 1 << 40)  # 64-bit request-n
    pair.pump()
    items, [more] = pair.take()
    assert [e.payload.data for e in items] == [b"1", b"2"]
    assert more == RequestNReceived(sid, 1 << 40)
    assert server.credit(sid) == 1 << 40
    server.send_payload(sid, Payload(b"3"), complete=True)
    pair.pump()
    [last], _ = pair.take()
    assert last == PayloadReceived(sid, Payload(b"3"), True)
    assert pair.client.stream_count == 0 and server.stream_count == 0


def test_request_n_saturates_at_2_63_minus_1():
    server = open_server()
    server.receive_data(wire(F.RequestStreamFrame(stream_id=1, initial_request_n=F.MAX_U64)),
                        0.0)
    assert server.credit(1) == MAX_REQUEST_N
    server.receive_data(wire(F.RequestNFrame(stream_id=1, request_n=F.MAX_U64)), 0.0)
    assert server.credit(1) == MAX_REQUEST_N


def test_a_bare_complete_after_an_empty_item():
    """A RESPONSE with C and nothing in it carries no item: an empty last item goes out as an
    item then a bare COMPLETE."""
    server = open_server()
    server.receive_data(wire(F.RequestStreamFrame(stream_id=1, initial_request_n=5)), 0.0)
    server.send_payload(1, Payload(b""), complete=True)
    assert sent(server) == [F.ResponseFrame(stream_id=1, metadata=b""),
                            F.ResponseFrame(stream_id=1, complete=True)]


def test_request_subscription_is_served_as_a_stream_and_never_completes():
    pair = Pair()
    pair.client.request_subscription(Payload(b"sub"), 3)
    pair.pump()
    _, [request] = pair.take()
    assert request == RequestReceived(1, CoreType.REQUEST_STREAM, Payload(b"sub"), 3)
    server = pair.server
    assert server.is_subscription(1)
    server.send_payload(1, Payload(b"x"))
    with pytest.raises(E.LocalProtocolError, match="no COMPLETE"):
        server.send_payload(1, Payload(b"y"), complete=True)
    server.send_complete(1)  # the source ended: ERROR instead of COMPLETE
    pair.pump()
    [item, errored], _ = pair.take()
    assert item == PayloadReceived(1, Payload(b"x"), False)
    assert isinstance(errored, StreamErrored)
    assert isinstance(errored.error, E.ApplicationError)
    assert "subscription ended" in errored.error.message


def test_subscription_next_sends_request_sub():
    client = make_client()
    client.data_to_send()
    with client.subscription_next():
        client.request_stream(Payload(b"s"), 9)
    client.request_stream(Payload(b"t"), 9)
    assert sent(client) == [F.RequestSubFrame(stream_id=1, initial_request_n=9, data=b"s"),
                            F.RequestStreamFrame(stream_id=3, initial_request_n=9, data=b"t")]


def test_cancel():
    pair = Pair()
    pair.client.request_stream(Payload(b"s"), 1)
    pair.pump()
    pair.take()
    pair.client.send_cancel(1)
    pair.pump()
    _, [cancel] = pair.take()
    assert cancel == CancelReceived(1)
    assert pair.server.stream_count == 0


def test_error_on_a_stream():
    pair = Pair()
    pair.client.request_response(Payload(b"q"))
    pair.pump()
    pair.take()
    pair.server.send_error(1, E.RejectedError("busy"))
    assert F.decode(F.FrameReader(99).feed(pair.server.data_to_send())[0]) == \
        F.ErrorFrame(stream_id=1, data=b"busy")


def test_error_data_becomes_an_application_error():
    client = make_client()
    client.request_response(Payload(b"q"))
    [errored] = client.receive_data(wire(F.ErrorFrame(stream_id=1, data=b"\xffbad")), 0.0)
    assert errored == StreamErrored(1, errored.error)
    assert isinstance(errored.error, E.ApplicationError)
    assert errored.error.message == "\ufffdbad"


def test_the_server_requests_with_even_ids():
    pair = Pair()
    assert pair.server.request_response(Payload(b"a")) == 2
    assert pair.server.request_stream(Payload(b"b"), 1) == 4
    pair.pump()
    [r1, r2], _ = pair.take()
    assert (r1.stream_id, r2.stream_id) == (2, 4)


def test_metadata_push_both_ways():
    pair = Pair()
    pair.client.metadata_push(b"up")
    pair.server.metadata_push(b"down")
    pair.pump()
    assert pair.take() == ([MetadataPushReceived(b"down")], [MetadataPushReceived(b"up")])


def test_metadata_push_on_a_stream_is_ignored():
    server = open_server()
    assert server.receive_data(wire(F.MetadataPushFrame(metadata=b"m", stream_id=1)), 0) == []


def test_request_channel_is_refused_locally():
    with pytest.raises(E.LocalProtocolError, match="no REQUEST_CHANNEL"):
        make_client().request_channel(Payload(b"x"), 1)


def test_resume_is_refused():
    with pytest.raises(ValueError, match="no RESUME"):
        ReactiveSocketConnection("server", ConnectionConfig(resume=True))


# ----------------------------------------------------------------- fragmentation


def test_large_responses_are_fragmented_and_reassembled():
    pair = Pair(server_config={"fragment_size": 64})
    pair.client.request_response(Payload(b"q"))
    pair.pump()
    pair.take()
    big = Payload(bytes(range(200)), b"meta" * 5)
    pair.server.send_payload(1, big)
    frames = sent(pair.server)
    assert len(frames) > 3 and all(f.follows for f in frames[:-1]) and frames[-1].complete
    assert all(len(F.encode(f)) <= 64 for f in frames)
    for f in frames:
        pair.client_events += pair.client.receive_data(wire(f), 0.0)
    [event], _ = pair.take()
    assert event == PayloadReceived(1, big, True)


def test_fragments_concatenate_metadata_and_data():
    client = make_client()
    client.request_stream(Payload(b"q"), 5)
    events = client.receive_data(
        wire(F.ResponseFrame(stream_id=1, data=b"ab", metadata=b"m1", follows=True)) +
        wire(F.ResponseFrame(stream_id=1, data=b"cd", follows=True, complete=True)) +
        wire(F.ResponseFrame(stream_id=1, data=b"e", metadata=b"m2")), 0.0)
    assert events == [PayloadReceived(1, Payload(b"abcde", b"m1m2"), True)]


def test_reassembly_past_the_limit_cancels_the_stream():
    client = make_client(max_reassembled_size=10)
    client.request_stream(Payload(b"q"), 5)
    client.data_to_send()
    events = client.receive_data(
        wire(F.ResponseFrame(stream_id=1, data=b"123456", follows=True)) +
        wire(F.ResponseFrame(stream_id=1, data=b"789012", follows=True)), 0.0)
    [errored] = events
    assert isinstance(errored.error, E.PayloadTooLargeError)
    assert sent(client) == [F.CancelFrame(stream_id=1)]
    assert client.is_open and client.stream_count == 0


# ----------------------------------------------------------------- leases


def test_lease_client_waits_for_the_first_lease():
    pair = Pair(setup=F.SetupFrame(metadata_mime_type=b"", data_mime_type=b"", lease=True))
    client, server = pair.client, pair.server
    assert client.lease_enabled and server.lease_enabled
    with pytest.raises(E.LeaseError):
        client.request_response(Payload(b"early"))
    server.send_lease(Lease(2_000, 1), now=0.0)
    assert sent(server) == [F.LeaseFrame(time=2_000_000_000, number_of_requests=1)]
    [event] = client.receive_data(wire(F.LeaseFrame(time=2_000_000_000, number_of_requests=1)),
                                  0.0)
    assert isinstance(event, LeaseReceived)
    # in RSocket 1.0's form, as the Twisted layer reads every connection's events: ms, not ns
    assert (event.lease.ttl, event.lease.number_of_requests) == (2_000, 1)
    assert client.lease_available() == 1
    client.request_response(Payload(b"ok"))
    with pytest.raises(E.LeaseError):
        client.request_response(Payload(b"one too many"))


def test_lease_time_is_nanoseconds_from_reception():
    client = make_client(setup=F.SetupFrame(metadata_mime_type=b"", data_mime_type=b"",
                                            lease=True))
    client.receive_data(wire(F.LeaseFrame(time=1_500_000, number_of_requests=F.MAX_U64)), 10.0)
    lease = client.requester_lease.lease
    assert (lease.ttl, lease.number_of_requests) == (1, 2**31 - 1)  # ms rounded down; capped
    assert client.lease_available() == 2**31 - 1
    assert client.next_deadline() == pytest.approx(10.001)
    client.tick(10.001)
    assert client.lease_available() == 0


def test_server_requests_hold_the_implicit_lease_of_setup():
    server = open_server(F.SetupFrame(metadata_mime_type=b"", data_mime_type=b"", lease=True))
    assert server.lease_available() is None
    server.request_response(Payload(b"allowed"))  # no LEASE from the client needed
    server.receive_data(wire(F.LeaseFrame(time=10**9, number_of_requests=0)), 0.0)
    with pytest.raises(E.LeaseError):
        server.request_response(Payload(b"now the client's lease applies"))


def test_a_request_past_our_grant_is_rejected():
    server = open_server(F.SetupFrame(metadata_mime_type=b"", data_mime_type=b"", lease=True),
                         lease_grace=0)
    server.send_lease(Lease(1_000, 1), now=0.0)
    server.data_to_send()
    events = server.receive_data(wire(F.RequestFnfFrame(stream_id=1)) +
                                 wire(F.RequestFnfFrame(stream_id=3)), 0.0)
    assert [e.stream_id for e in events] == [1]
    [error] = sent(server)
    assert error.stream_id == 3 and error.data.startswith(b"rejected:")


def test_lease_without_l_is_ignored():
    client = make_client()
    client.data_to_send()
    assert client.receive_data(wire(F.LeaseFrame(time=1, number_of_requests=1)), 0.0) == []
    with pytest.raises(E.LocalProtocolError, match="does not use leases"):
        client.send_lease(Lease(1, 1))


# ----------------------------------------------------------------- the unexpected (TBD)


def assert_ignored(conn, events):
    assert events == []
    assert conn.is_open
    assert conn.data_to_send() == b""


def assert_connection_error(conn, events, reason: str):
    [closed] = events
    assert isinstance(closed, ConnectionClosed) and closed.by_peer
    assert isinstance(closed.error, E.ProtocolError)
    assert not conn.is_open
    [error] = sent(conn)
    assert error.stream_id == 0 and isinstance(error, F.ErrorFrame)
    assert reason in error.data.decode()


@pytest.mark.parametrize("frame", [
    F.RequestNFrame(stream_id=9, request_n=1),
    F.CancelFrame(stream_id=9),
    F.ResponseFrame(stream_id=9, data=b"x"),
    F.ErrorFrame(stream_id=9, data=b"x"),
    F.LeaseFrame(time=1, number_of_requests=1, stream_id=5),
    F.SetupErrorFrame(error_code=1, stream_id=5),
    F.RequestResponseFrame(stream_id=0),  # stream 0
], ids=lambda f: f"{type(f).__name__}-{f.stream_id}")
def test_frames_on_unknown_streams_are_ignored(frame):
    server = open_server()
    assert_ignored(server, server.receive_data(wire(frame), 0.0))


def test_a_request_on_a_stream_in_use_is_ignored():
    server = open_server()
    server.receive_data(wire(F.RequestStreamFrame(stream_id=1, initial_request_n=1)), 0.0)
    assert_ignored(server, server.receive_data(wire(F.RequestResponseFrame(stream_id=1)), 0.0))


def test_frames_a_side_does_not_receive_are_ignored():
    """A RESPONSE on a stream we respond to; a CANCEL from the responder of our request."""
    server = open_server()
    server.receive_data(wire(F.RequestStreamFrame(stream_id=1, initial_request_n=1)), 0.0)
    assert_ignored(server, server.receive_data(wire(F.ResponseFrame(stream_id=1)), 0.0))
    client = make_client()
    client.request_stream(Payload(b"s"), 1)
    client.data_to_send()
    assert_ignored(client, client.receive_data(wire(F.CancelFrame(stream_id=1)), 0.0))
    assert client.has_stream(1)


def test_initial_request_n_zero_errors_the_stream():
    server = open_server()
    events = server.receive_data(wire(F.RequestSubFrame(stream_id=1, initial_request_n=0)), 0)
    assert events == [] and server.is_open and server.stream_count == 0
    [error] = sent(server)
    assert error.stream_id == 1 and b"positive" in error.data


def test_request_n_zero_errors_the_stream():
    server = open_server()
    server.receive_data(wire(F.RequestStreamFrame(stream_id=1, initial_request_n=1)), 0.0)
    [errored] = server.receive_data(wire(F.RequestNFrame(stream_id=1, request_n=0)), 0.0)
    assert isinstance(errored, StreamErrored) and isinstance(errored.error, E.InvalidError)
    [error] = sent(server)
    assert error.stream_id == 1 and b"positive" in error.data
    assert server.is_open and server.stream_count == 0


def test_too_many_concurrent_streams_are_rejected_on_their_stream():
    server = open_server(max_concurrent_streams=1)
    events = server.receive_data(wire(F.RequestResponseFrame(stream_id=1)) +
                                 wire(F.RequestResponseFrame(stream_id=3)), 0.0)
    assert [e.stream_id for e in events] == [1]
    [error] = sent(server)
    assert error.stream_id == 3 and b"too many concurrent streams" in error.data
    # a fire-and-forget holds no stream: still served
    assert len(server.receive_data(wire(F.RequestFnfFrame(stream_id=5)), 0.0)) == 1


def test_unknown_frame_type_fails_the_connection_unless_ignorable():
    server = open_server()
    ignorable = F.frame_with_length(bytes.fromhex("0080 0099 0000000000000000"))
    assert_ignored(server, server.receive_data(ignorable, 0.0))
    fatal = F.frame_with_length(bytes.fromhex("0000 0099 0000000000000000"))
    assert_connection_error(server, server.receive_data(fatal, 0.0), "unknown frame type")


def test_ext_without_i_fails_the_connection_with_i_is_ignored():
    server = open_server()
    assert_ignored(server, server.receive_data(
        wire(F.ExtFrame(stream_id=0, extended_type=7, flags=0x80)), 0.0))
    assert_connection_error(server, server.receive_data(
        wire(F.ExtFrame(stream_id=0, extended_type=7)), 0.0), "unsupported EXT")


def test_a_malformed_frame_fails_the_connection():
    server = open_server()
    bad = F.frame_with_length(bytes.fromhex("0040 0011 0000000000000001 00000009"))
    assert_connection_error(server, server.receive_data(bad, 0.0), "metadata length")


def test_a_malformed_frame_with_i_is_ignored():
    server = open_server()
    bad = F.frame_with_length(bytes.fromhex("00c0 0011 0000000000000001 00000009"))
    assert_ignored(server, server.receive_data(bad, 0.0))


def test_a_frame_over_max_frame_size():
    server = open_server(max_frame_size=100)
    big = wire(F.RequestFnfFrame(stream_id=1, data=bytes(89)))  # 12 + 89 = 101 bytes
    assert_connection_error(server, server.receive_data(big, 0.0), "max frame size")


def test_the_r_bit_fails_the_connection():
    server = open_server()
    raw = bytearray(wire(F.CancelFrame(stream_id=1)))
    raw[0] |= 0x80
    assert_connection_error(server, server.receive_data(bytes(raw), 0.0), "reserved R bit")


def test_error_on_stream_0_ends_the_connection():
    pair = Pair()
    pair.client.request_stream(Payload(b"s"), 1)
    pair.pump()
    pair.take()
    events = pair.client.receive_data(wire(F.ErrorFrame(stream_id=0, data=b"bye")), 0.0)
    [closed] = events
    assert isinstance(closed.error, E.ConnectionError) and closed.error.message == "bye"
    assert pair.client.data_to_send() == b""  # nothing answered


def test_graceful_close():
    pair = Pair()
    pair.client.request_stream(Payload(b"s"), 5)
    pair.pump()
    pair.take()
    events = pair.server.begin_close(0.0, 1_000, "maintenance")
    assert events == [ConnectionClosing(None, False, 1)]
    # new requests are refused meanwhile
    pair.client.request_response(Payload(b"late"))
    pair.pump()
    [refused], _ = pair.take()
    assert isinstance(refused, StreamErrored) and "connection closing" in refused.error.message
    pair.server.send_payload(1, Payload(b"last"), complete=True)
    [closed] = pair.server.pending_events()
    assert isinstance(closed, ConnectionClosed) and closed.error is None
    pair.pump()
    [item, client_closed], _ = pair.take()
    assert item == PayloadReceived(1, Payload(b"last"), True)
    assert client_closed.error.message == "maintenance"


def test_graceful_close_drain_timeout():
    server = open_server()
    server.receive_data(wire(F.RequestStreamFrame(stream_id=1, initial_request_n=1)), 0.0)
    server.begin_close(0.0, 500)
    assert server.next_deadline() == 0.5
    [closed] = server.tick(0.5)
    assert isinstance(closed.error, E.ConnectionCloseError)
    assert "still open after the drain timeout" in sent(server)[-1].data.decode()


def test_requests_after_close_raise():
    client = make_client()
    client.close()
    with pytest.raises(E.LocalProtocolError, match="closed"):
        client.request_response(Payload(b"x"))
    assert client.receive_data(b"anything", 0.0) == []


# ----------------------------------------------------------------- hostile input


@settings(max_examples=300)
@given(st.binary(max_size=120), st.booleans())
def test_any_bytes_never_raise(data, established):
    conn = open_server() if established else make_server()
    events = conn.receive_data(data, 0.0)
    assert all(e.__class__.__module__ == "rsocket_tx.core.events" for e in events)


@settings(max_examples=200)
@given(st.lists(st.binary(max_size=40), max_size=10))
def test_any_frames_never_raise(frames):
    """A message transport (WebSocket): any messages after SETUP."""
    conn = ReactiveSocketConnection("server", ConnectionConfig(length_prefixed=False))
    conn.receive_frame(F.encode(SETUP), 0.0)
    conn.request_stream(Payload(b"x"), 3)
    for frame in frames:
        events = conn.receive_frame(frame, 0.0)
        assert all(e.__class__.__module__ == "rsocket_tx.core.events" for e in events)


def test_the_reassembly_budget_is_shared_by_the_streams():
    client = make_client(max_reassembled_size=8, max_reassembly_buffer_size=12)
    client.request_stream(Payload(b"a"), 5)
    client.request_stream(Payload(b"b"), 5)
    client.data_to_send()
    assert client.receive_data(
        wire(F.ResponseFrame(stream_id=1, data=b"1234567", follows=True)), 0.0) == []
    [errored] = client.receive_data(
        wire(F.ResponseFrame(stream_id=3, data=b"123456", follows=True)), 0.0)
    assert isinstance(errored.error, E.ReassemblyBudgetError)
    assert sent(client) == [F.CancelFrame(stream_id=3)]
    # stream 1 ends: what it held is given back; stream 3's successor fits again
    client.send_cancel(1)
    client.request_stream(Payload(b"c"), 5)
    client.data_to_send()
    events = client.receive_data(
        wire(F.ResponseFrame(stream_id=5, data=b"123456", follows=True)) +
        wire(F.ResponseFrame(stream_id=5, data=b"78")), 0.0)
    assert events == [PayloadReceived(5, Payload(b"12345678"), False)]


def test_the_first_frame_is_bounded_by_max_setup_frame_size():
    server = make_server(max_setup_frame_size=100)
    big_setup = F.SetupFrame(metadata_mime_type=b"", data_mime_type=b"", data=bytes(100))
    [closed] = server.receive_data(wire(big_setup)[:8], 0.0)  # decided from the length word
    assert isinstance(closed.error, E.InvalidSetupError)
    assert sent(server)[0].error_code == F.SetupErrorCode.INVALID_SETUP
    # after SETUP, max_frame_size applies
    server = open_server(max_setup_frame_size=100)
    assert len(server.receive_data(wire(F.RequestFnfFrame(stream_id=1, data=bytes(500))),
                                   0.0)) == 1
