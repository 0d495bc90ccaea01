"""RSocketConnection: spec §Handling the Unexpected, one test per item, plus malformed input
(§Frame Header Format, §Handling Ignore Flag, §Metadata Optional Header, §Max Frame Size).

"This protocol attempts to be very lenient in processing of received frames and SHOULD ignore
conditions that do not make sense given the current context."
"""

from __future__ import annotations

import pytest

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import (
    ApplicationError,
    ConnectionError,
    ErrorCode,
    LocalProtocolError,
)
from rsocket_tx.core.events import (
    ConnectionClosed,
    PayloadReceived,
    RequestNReceived,
    RequestReceived,
)
from rsocket_tx.core.frames import (
    FLAG_COMPLETE,
    FLAG_FOLLOWS,
    FLAG_IGNORE,
    FLAG_METADATA,
    FLAG_NEXT,
    FrameType,
)
from rsocket_tx.core.framing import FrameReader
from rsocket_tx.core.payload import Payload

from .conn_helpers import (
    Pair,
    feed_bytewise,
    hand_frame,
    make_server,
    sent,
    setup_frame,
    wire,
    with_stream_id,
)


def _assert_ignored(conn, events) -> None:
    assert events == []
    assert conn.is_open
    assert conn.data_to_send() == b""


def _assert_connection_error(conn, events) -> F.ErrorFrame:
    """One ConnectionClosed, exactly one ERROR[CONNECTION_ERROR] on stream 0 with a reason."""
    assert len(events) == 1
    closed = events[0]
    assert isinstance(closed, ConnectionClosed) and closed.by_peer
    assert isinstance(closed.error, ConnectionError)
    assert not conn.is_open
    frames = sent(conn)
    assert len(frames) == 1
    err = frames[0]
    assert isinstance(err, F.ErrorFrame)
    assert err.stream_id == 0 and err.error_code == ErrorCode.CONNECTION_ERROR
    assert err.data  # the reason
    return err


# ---------------------------------------------------------------------------------------------
# the numbered items
# ---------------------------------------------------------------------------------------------


def test_lack_of_request_n_is_not_handled_by_the_protocol() -> None:
    # "Lack of REQUEST_N frames that stops a stream is an application concern and SHALL NOT be
    # handled by the protocol."
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 1)
    pair.to_server()
    pair.server.send_payload(sid, Payload(b"0"))
    pair.to_client()
    for t in range(1, 120):  # two minutes of keepalive, no REQUEST_N
        pair.client.tick(float(t))
        pair.to_server()
        pair.server.tick(float(t))
        pair.to_client()
    assert pair.client.has_stream(sid) and pair.server.has_stream(sid)
    assert pair.client.is_open and pair.server.is_open


def test_payload_for_request_response_without_complete_is_complete() -> None:
    # "If a PAYLOAD for a REQUEST_RESPONSE is received that does not have a COMPLETE flag set,
    # the implementation MUST assume it is set and act accordingly."
    pair = Pair()
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    events = feed_bytewise(pair.client,
                           wire(F.PayloadFrame(stream_id=sid, data=b"answer", next=True)))
    assert events == [PayloadReceived(sid, Payload(b"answer"), True)]
    assert not pair.client.has_stream(sid)
    # a second answer finds no stream: ignored
    _assert_ignored(pair.client, pair.client.receive_data(
        wire(F.PayloadFrame(stream_id=sid, data=b"again", next=True))))


@pytest.mark.parametrize("fragments", [
    [F.PayloadFrame(stream_id=1, data=b"all", follows=True, complete=True, next=True)],
    [F.PayloadFrame(stream_id=1, data=b"a", follows=True, next=True),
     F.PayloadFrame(stream_id=1, data=b"ll", follows=True, complete=True, next=True)],
], ids=["single", "after-a-fragment"])
def test_payload_with_follows_and_complete_ignores_follows(fragments) -> None:
    # "A PAYLOAD with both F and C flags set, implicitly ignores the F flag."
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 5)
    assert sid == 1
    pair.to_server()
    events = feed_bytewise(pair.client, b"".join(wire(f) for f in fragments))
    assert events == [PayloadReceived(sid, Payload(b"all"), True)]
    assert not pair.client.has_stream(sid)
    # nothing is left waiting for more fragments
    _assert_ignored(pair.client, pair.client.receive_data(
        wire(F.PayloadFrame(stream_id=sid, data=b"x", next=True))))


def test_unknown_flag_bits_are_ignored() -> None:
    # "Flag bits not specified for a particular frame MUST be ignored."
    pair = Pair()
    server, client = pair.server, pair.client
    # REQUEST_RESPONSE defines only I, M, F: C, N and the five low bits are unspecified
    extra = FLAG_COMPLETE | FLAG_NEXT | 0x1F
    events = server.receive_data(hand_frame(101, FrameType.REQUEST_RESPONSE, extra, b"rr"))
    assert events == [RequestReceived(101, FrameType.REQUEST_RESPONSE, Payload(b"rr"), 0,
                                      False)]
    # REQUEST_STREAM: C, N, low bits unspecified
    events = server.receive_data(hand_frame(103, FrameType.REQUEST_STREAM, extra,
                                            (2).to_bytes(4, "big") + b"rs"))
    assert events == [RequestReceived(103, FrameType.REQUEST_STREAM, Payload(b"rs"), 2, False)]
    # REQUEST_FNF
    events = server.receive_data(hand_frame(105, FrameType.REQUEST_FNF, extra, b"ff"))
    assert events == [RequestReceived(105, FrameType.REQUEST_FNF, Payload(b"ff"), 0, False)]
    # REQUEST_N and CANCEL define no flags but I and M
    sid = client.request_stream(Payload(b"s"), 1)
    pair.to_server()
    server.send_payload(sid, Payload(b"0"))
    pair.to_client()
    events = server.receive_data(hand_frame(sid, FrameType.REQUEST_N, 0xFF,
                                            (4).to_bytes(4, "big")))
    assert events == [RequestNReceived(sid, 4)]
    # PAYLOAD: the five low bits are unspecified
    events = client.receive_data(hand_frame(sid, FrameType.PAYLOAD, FLAG_NEXT | 0x1F, b"p"))
    assert events == [PayloadReceived(sid, Payload(b"p"), False)]
    # KEEPALIVE: all but R unspecified -- still answered
    events = server.receive_data(hand_frame(0, FrameType.KEEPALIVE, 0x80 | 0x7F,
                                            bytes(8) + b"ka"))
    assert events == []
    assert F.KeepaliveFrame(respond=False, data=b"ka") in sent(server)
    events = server.receive_data(hand_frame(sid, FrameType.CANCEL, 0xFF))
    assert [type(e).__name__ for e in events] == ["CancelReceived"]
    assert server.is_open and client.is_open


def test_unknown_flag_bits_on_setup_are_ignored() -> None:
    server = make_server()
    setup = setup_frame(metadata=None)
    raw = bytearray(wire(setup))
    raw[8] |= 0x3F  # the six low flag bits after M, R, L
    assert [type(e).__name__ for e in server.receive_data(bytes(raw))] == ["SetupReceived"]
    assert server.data_to_send() == b""


@pytest.mark.parametrize("kind", ["REQUEST_RESPONSE", "REQUEST_FNF", "REQUEST_STREAM",
                                  "REQUEST_CHANNEL"])
def test_request_on_stream_id_in_use_is_ignored(kind: str) -> None:
    # "Receiving a Request frame on a Stream ID that is already in use MUST be ignored."
    pair = Pair()
    sid = pair.client.request_channel(Payload(b"first"), 3)
    assert len(pair.to_server()) == 1
    frame = {
        "REQUEST_RESPONSE": F.RequestResponseFrame(stream_id=sid, data=b"dup"),
        "REQUEST_FNF": F.RequestFnfFrame(stream_id=sid, data=b"dup"),
        "REQUEST_STREAM": F.RequestStreamFrame(stream_id=sid, initial_request_n=9, data=b"dup"),
        "REQUEST_CHANNEL": F.RequestChannelFrame(stream_id=sid, initial_request_n=9,
                                                 data=b"dup", complete=True),
    }[kind]
    _assert_ignored(pair.server, pair.server.receive_data(wire(frame)))
    # the original stream is untouched: same credit, still receiving
    assert pair.server.credit(sid) == 3
    pair.server.send_request_n(sid, 1)
    pair.to_client()
    pair.client.send_payload(sid, Payload(b"still the channel"))
    assert pair.to_server() == [PayloadReceived(sid, Payload(b"still the channel"), False)]


def test_request_on_stream_id_in_use_by_fragments_is_ignored() -> None:
    pair = Pair()
    server = pair.server
    server.receive_data(wire(F.RequestResponseFrame(stream_id=1, data=b"he", follows=True)))
    _assert_ignored(server, server.receive_data(
        wire(F.RequestFnfFrame(stream_id=1, data=b"intruder"))))
    events = server.receive_data(wire(F.PayloadFrame(stream_id=1, data=b"llo", next=True)))
    assert events == [RequestReceived(1, FrameType.REQUEST_RESPONSE, Payload(b"hello"), 0,
                                      False)]


@pytest.mark.parametrize("sid", [0, 1, 2, 9, 2**31 - 1])
def test_cancel_on_unknown_stream_is_ignored(sid: int) -> None:
    # "Receiving a CANCEL on an unknown Stream ID (including 0) MUST be ignored."
    pair = Pair()
    for conn in (pair.server, pair.client):
        _assert_ignored(conn, feed_bytewise(conn, wire(F.CancelFrame(stream_id=sid))))


@pytest.mark.parametrize("sid", [1, 2, 9, 2**31 - 1])
@pytest.mark.parametrize("code", [ErrorCode.APPLICATION_ERROR, ErrorCode.CANCELED,
                                  ErrorCode.INVALID, 0x301])
def test_error_on_unknown_stream_is_ignored(sid: int, code: int) -> None:
    # "Receiving an ERROR on an unknown Stream ID MUST be ignored."
    pair = Pair()
    for conn in (pair.server, pair.client):
        _assert_ignored(conn, conn.receive_data(
            wire(F.ErrorFrame(stream_id=sid, error_code=code, data=b"who?"))))


@pytest.mark.parametrize("sid", [0, 1, 2, 9])
@pytest.mark.parametrize("flags", [{"next": True}, {"complete": True},
                                   {"next": True, "complete": True},
                                   {"next": True, "follows": True}],
                         ids=["N", "C", "NC", "NF"])
def test_payload_on_unknown_stream_is_ignored(sid: int, flags) -> None:
    # "Receiving a PAYLOAD on an unknown Stream ID (including 0) MUST be ignored."
    pair = Pair()
    for conn in (pair.server, pair.client):
        frame = F.PayloadFrame(stream_id=sid, data=b"stray", **flags)
        _assert_ignored(conn, conn.receive_data(wire(frame)))
        assert conn.stream_count == 0


@pytest.mark.parametrize("sid", [1, 2, 7])
def test_metadata_push_on_nonzero_stream_is_ignored(sid: int) -> None:
    # "Receiving a METADATA_PUSH with a non-0 Stream ID MUST be ignored."
    pair = Pair()
    for conn in (pair.server, pair.client):
        raw = with_stream_id(wire(F.MetadataPushFrame(metadata=b"meta")), sid)
        _assert_ignored(conn, conn.receive_data(raw))


def test_payload_on_finished_half_is_ignored() -> None:
    # a frame the current state does not account for: PAYLOAD after the COMPLETE of that side
    pair = Pair()
    sid = pair.client.request_channel(Payload(b"c"), 5, complete=True)
    pair.to_server()
    _assert_ignored(pair.server, pair.server.receive_data(
        wire(F.PayloadFrame(stream_id=sid, data=b"after C", next=True))))
    assert pair.server.has_stream(sid)


def test_request_n_on_unknown_stream_is_ignored() -> None:
    pair = Pair()
    for conn in (pair.server, pair.client):
        _assert_ignored(conn, conn.receive_data(wire(F.RequestNFrame(stream_id=5, request_n=3))))


# ---------------------------------------------------------------------------------------------
# frames not understood (§Handling Ignore Flag) and malformed frames
# ---------------------------------------------------------------------------------------------

UNKNOWN_TYPES = [0x00, 0x0F, 0x10, 0x2A, 0x3E]


@pytest.mark.parametrize("frame_type", UNKNOWN_TYPES, ids=lambda t: f"0x{t:02X}")
@pytest.mark.parametrize("side", ["client", "server"])
def test_unknown_frame_type_without_ignore_is_connection_error(side: str,
                                                               frame_type: int) -> None:
    # "An implementation MAY send an ERROR[CONNECTION_ERROR] frame and close the underlying
    # transport connection on reception of a frame that it does not understand with this bit
    # not set."
    pair = Pair()
    conn = getattr(pair, side)
    events = feed_bytewise(conn, hand_frame(0, frame_type, 0, b"\x01\x02\x03\x04"))
    _assert_connection_error(conn, events)


@pytest.mark.parametrize("frame_type", UNKNOWN_TYPES, ids=lambda t: f"0x{t:02X}")
@pytest.mark.parametrize("side", ["client", "server"])
def test_unknown_frame_type_with_ignore_is_ignored(side: str, frame_type: int) -> None:
    # "(I)gnore: Ignore frame if not understood"
    pair = Pair()
    conn = getattr(pair, side)
    events = feed_bytewise(conn, hand_frame(3, frame_type, FLAG_IGNORE | FLAG_METADATA,
                                            b"\x01\x02\x03\x04"))
    _assert_ignored(conn, events)
    conn.receive_data(wire(F.KeepaliveFrame(respond=True, data=b"alive")))
    assert sent(conn) == [F.KeepaliveFrame(respond=False, data=b"alive")]


@pytest.mark.parametrize("ignore", [False, True], ids=["no-I", "I"])
def test_ext_frame_not_understood(ignore: bool) -> None:
    # EXT: "(I)gnore: Can the frame be ignored if not understood?"
    pair = Pair()
    raw = wire(F.ExtFrame(stream_id=0, extended_type=77, ignore=ignore, body=b"ext"))
    events = pair.server.receive_data(raw)
    if ignore:
        _assert_ignored(pair.server, events)
    else:
        _assert_connection_error(pair.server, events)


@pytest.mark.parametrize("raw", [
    # metadata length 100 in a frame with 4 bytes after it
    pytest.param(hand_frame(1, FrameType.REQUEST_RESPONSE, FLAG_METADATA,
                            (100).to_bytes(3, "big") + b"abcd"), id="metadata-length-too-big"),
    pytest.param(hand_frame(1, FrameType.PAYLOAD, FLAG_METADATA | FLAG_NEXT, b"\x00"),
                 id="no-room-for-metadata-length"),
    pytest.param(hand_frame(1, FrameType.PAYLOAD, FLAG_METADATA | FLAG_NEXT,
                            (100).to_bytes(3, "big") + b"abcd"),
                 id="payload-metadata-length-too-big"),
    pytest.param(hand_frame(1, FrameType.REQUEST_STREAM, 0, b"\x00\x01"),
                 id="request-stream-too-short"),
    pytest.param(hand_frame(1, FrameType.REQUEST_STREAM, 0, bytes(4) + b"x"),
                 id="initial-request-n-zero"),
    pytest.param(hand_frame(1, FrameType.REQUEST_N, 0, bytes(4)), id="request-n-zero"),
    pytest.param(hand_frame(0, FrameType.ERROR, 0, b"\x00\x00"), id="error-too-short"),
    pytest.param(hand_frame(0, FrameType.KEEPALIVE, 0x80, b"\x00"), id="keepalive-too-short"),
    pytest.param(hand_frame(0x80000001, FrameType.CANCEL, 0), id="reserved-stream-id-bit"),
])
@pytest.mark.parametrize("side", ["client", "server"])
def test_malformed_frame_is_connection_error_with_reason(side: str, raw: bytes) -> None:
    # §Metadata Optional Header: "If Metadata Length is not equal to this value, the frame is
    # invalid and the receiver MUST send an ERROR[CONNECTION_ERROR] frame and close the
    # underlying transport connection on reception unless the frame's IGNORE flag is set."
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 1)  # stream 1 is open on both sides
    assert sid == 1
    pair.to_server()
    conn = getattr(pair, side)
    events = feed_bytewise(conn, raw)
    _assert_connection_error(conn, events)
    assert not conn.has_stream(sid)


def test_malformed_frame_with_ignore_flag_is_ignored() -> None:
    # "... unless the frame's IGNORE flag is set."
    pair = Pair()
    raw = hand_frame(1, FrameType.REQUEST_RESPONSE, FLAG_IGNORE | FLAG_METADATA,
                     (100).to_bytes(3, "big") + b"abcd")
    _assert_ignored(pair.server, pair.server.receive_data(raw))


def test_frame_over_max_frame_size_is_connection_error() -> None:
    pair = Pair(server_config={"max_frame_size": 1_000})
    ok = wire(F.RequestFnfFrame(stream_id=1, data=bytes(1_000 - 6)))
    assert len(pair.server.receive_data(ok)) == 1  # exactly the limit is fine
    too_big = wire(F.RequestFnfFrame(stream_id=3, data=bytes(1_000 - 5)))
    # the 3-byte prefix is enough to know
    events = pair.server.receive_data(too_big[:3])
    _assert_connection_error(pair.server, events)
    assert pair.server.receive_data(too_big[3:]) == []


def test_frame_over_max_frame_size_on_client_is_connection_error() -> None:
    pair = Pair(client_config={"max_frame_size": 200})
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    pair.server.send_payload(sid, Payload(bytes(300)))
    events = pair.to_client()
    _assert_connection_error(pair.client, events)


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x04\xde\xad\xbe\xef",   # a 4-byte "frame": shorter than a header
    b"\x00\x00\x00",                   # a 0-byte frame
    b"\x00\x00\x06\xff\xff\xff\xff\xfd\xff",  # all ones but the I flag
    b"\x00\x00\x08\x00\x00\x00\x00\x00\x00\x99\x99",  # RESERVED type 0 without I on stream 0
], ids=["short", "empty", "all-ones", "type-0"])
def test_garbage_bytes_are_connection_error(garbage: bytes) -> None:
    pair = Pair()
    events = feed_bytewise(pair.client, garbage)
    _assert_connection_error(pair.client, events)


def test_garbage_before_setup_closes_the_server() -> None:
    server = make_server()
    events = server.receive_data(b"\x00\x00\x02\xff\xff")
    assert [type(e) for e in events] == [ConnectionClosed]
    assert not server.is_open
    (err,) = sent(server)
    assert isinstance(err, F.ErrorFrame) and err.stream_id == 0
    assert err.error_code in (ErrorCode.CONNECTION_ERROR, ErrorCode.INVALID_SETUP)


def test_frames_after_a_fatal_frame_in_the_same_read_are_dropped() -> None:
    pair = Pair()
    data = (hand_frame(0, 0x10, 0, b"") + wire(F.RequestFnfFrame(stream_id=1, data=b"x"))
            + wire(F.KeepaliveFrame(respond=True)))
    events = pair.server.receive_data(data)
    _assert_connection_error(pair.server, events)


# ---------------------------------------------------------------------------------------------
# after close
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["local-close", "local-close-with-error", "peer-error",
                                 "connection-lost", "protocol-error"])
def test_after_close_nothing_is_received_or_sent(how: str) -> None:
    # "An implementation MAY "close" a transport connection due to protocol processing. When
    # this occurs, it is assumed that the connection will have no further frames sent and all
    # frames will be ignored."
    pair = Pair()
    server = pair.server
    sid = pair.client.request_channel(Payload(b"c"), 5)
    pair.to_server()
    if how == "local-close":
        events = server.close()
    elif how == "local-close-with-error":
        events = server.close(ConnectionError("shutting down"))
    elif how == "peer-error":
        # (CONNECTION_ERROR: a CONNECTION_CLOSE lets the open channel finish first; see
        # test_connection_limits.py)
        events = server.receive_data(wire(F.ErrorFrame(
            stream_id=0, error_code=ErrorCode.CONNECTION_ERROR, data=b"bye")))
    elif how == "connection-lost":
        events = server.connection_lost()
    else:
        events = server.receive_data(hand_frame(0, 0x10))
    assert [type(e) for e in events] == [ConnectionClosed]
    assert not server.is_open
    server.data_to_send()  # whatever the close itself sent
    assert server.stream_count == 0
    later = b"".join([
        wire(F.KeepaliveFrame(respond=True, data=b"ka")),
        wire(F.RequestResponseFrame(stream_id=3, data=b"q")),
        wire(F.PayloadFrame(stream_id=sid, data=b"p", next=True)),
        hand_frame(0, 0x10),
    ])
    assert server.receive_data(later) == []
    assert server.tick(1_000.0) == []
    assert server.close() == []
    assert server.close(ConnectionError("again")) == []
    assert server.connection_lost() == []
    with pytest.raises(LocalProtocolError):
        server.request_response(Payload(b"q"))
    with pytest.raises(LocalProtocolError):
        server.send_payload(sid, Payload(b"r"))
    with pytest.raises(LocalProtocolError):
        server.metadata_push(b"m")
    server.send_cancel(sid)
    server.send_request_n(sid, 1)
    assert server.data_to_send() == b""
    assert server.next_deadline() is None


def test_local_close_with_error_sends_it() -> None:
    pair = Pair()
    events = pair.client.close(ConnectionError("client shutting down"))
    assert len(events) == 1 and isinstance(events[0], ConnectionClosed)
    assert not events[0].by_peer
    (err,) = sent(pair.client)
    assert err == F.ErrorFrame(stream_id=0, error_code=ErrorCode.CONNECTION_ERROR,
                               data=b"client shutting down")


def test_connection_lost_ends_open_streams() -> None:
    pair = Pair()
    pair.client.request_stream(Payload(b"s"), 1)
    events = pair.client.connection_lost()
    assert len(events) == 1 and isinstance(events[0], ConnectionClosed)
    assert events[0].by_peer and events[0].error.error_code == ErrorCode.CONNECTION_ERROR
    assert pair.client.stream_count == 0


def test_flags_used_in_tests_are_the_spec_values() -> None:
    # guards the hand-built frames of this module
    assert (FLAG_IGNORE, FLAG_METADATA, FLAG_FOLLOWS, FLAG_COMPLETE, FLAG_NEXT) == (
        0x200, 0x100, 0x80, 0x40, 0x20)


def test_error_message_longer_than_a_frame_is_cut_to_fit() -> None:
    # an ERROR frame cannot be fragmented: a huge application message is shortened, never
    # turned into a frame the 24-bit length cannot describe
    pair = Pair(server_config={"fragment_size": 256})
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    pair.server.send_error(sid, ApplicationError("x" * 10_000))
    (frame,) = FrameReader().feed(pair.server.data_to_send())
    assert len(frame) <= 256
    decoded = F.decode(frame)
    assert decoded.data.endswith(b"...") and decoded.data.startswith(b"xxx")
