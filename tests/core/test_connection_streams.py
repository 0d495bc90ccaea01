"""RSocketConnection: the five interaction models in both directions, stream ids and flow
control (spec §Stream Identifiers, §Stream Sequences and Lifetimes, §Request Channel,
§Flow Control: Reactive Streams Semantics).

Every interaction runs client->server and server->client: "One connection holds both the
requester and the responder side".
"""

from __future__ import annotations

import pytest

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import (
    ApplicationError,
    CanceledError,
    InvalidError,
    LocalProtocolError,
    RejectedError,
    StreamIdsExhaustedError,
)
from rsocket_tx.core.events import (
    CancelReceived,
    MetadataPushReceived,
    PayloadReceived,
    RequestNReceived,
    RequestReceived,
    StreamErrored,
)
from rsocket_tx.core.frames import FrameType
from rsocket_tx.core.payload import Payload

from .conn_helpers import DIRECTIONS, MAX_U31, Pair, decode_all, roles, sent, wire

directions = pytest.mark.parametrize("direction", DIRECTIONS)


def _open(pair: Pair, direction: str, kind: str, n: int = 1, payload: Payload | None = None,
          complete: bool = False):
    """Open a stream from the requester; return (rq, rs, sid, responder's events)."""
    rq, rs = roles(pair, direction)
    payload = payload or Payload(b"req", b"req-meta")
    if kind == "response":
        sid = rq.request_response(payload)
    elif kind == "stream":
        sid = rq.request_stream(payload, n)
    else:
        sid = rq.request_channel(payload, n, complete=complete)
    events = pair.deliver(rq)
    return rq, rs, sid, events


def _gone(pair: Pair, sid: int) -> bool:
    return not pair.client.has_stream(sid) and not pair.server.has_stream(sid)


# ---------------------------------------------------------------------------------------------
# stream ids
# ---------------------------------------------------------------------------------------------


def test_client_stream_ids_are_odd_from_1() -> None:
    # "Stream IDs on the client MUST start at 1 and increment by 2 sequentially"
    pair = Pair()
    c = pair.client
    ids = [c.request_response(Payload()), c.fire_and_forget(Payload()),
           c.request_stream(Payload(), 1), c.request_channel(Payload(), 1)]
    assert ids == [1, 3, 5, 7]
    assert [f.stream_id for f in sent(c)] == [1, 3, 5, 7]


def test_server_stream_ids_are_even_from_2() -> None:
    # "Stream IDs on the server MUST start at 2 and increment by 2 sequentially"
    pair = Pair()
    s = pair.server
    ids = [s.request_response(Payload()), s.fire_and_forget(Payload()),
           s.request_stream(Payload(), 1), s.request_channel(Payload(), 1)]
    assert ids == [2, 4, 6, 8]
    assert [f.stream_id for f in sent(s)] == [2, 4, 6, 8]


@pytest.mark.parametrize(("side", "last_id"), [("client", MAX_U31), ("server", MAX_U31 - 1)])
def test_stream_ids_exhausted(side: str, last_id: int) -> None:
    # "No new streams can be created, thus a new connection MUST be established to create new
    # streams once the max has been met."
    pair = Pair()
    conn = getattr(pair, side)
    conn._next_stream_id = last_id
    assert conn.fire_and_forget(Payload(b"last")) == last_id
    assert [f.stream_id for f in sent(conn)] == [last_id]
    for make in (lambda: conn.request_response(Payload()),
                 lambda: conn.fire_and_forget(Payload()),
                 lambda: conn.request_stream(Payload(), 1),
                 lambda: conn.request_channel(Payload(), 1)):
        with pytest.raises(StreamIdsExhaustedError):
            make()
    assert issubclass(StreamIdsExhaustedError, LocalProtocolError)
    assert conn.data_to_send() == b""
    assert conn.is_open


# ---------------------------------------------------------------------------------------------
# request-response
# ---------------------------------------------------------------------------------------------


@directions
def test_request_response(direction: str) -> None:
    pair = Pair()
    rq, rs, sid, events = _open(pair, direction, "response")
    assert events == [RequestReceived(sid, FrameType.REQUEST_RESPONSE,
                                      Payload(b"req", b"req-meta"), 0, False)]
    rs.send_payload(sid, Payload(b"answer", b"am"))
    out = rs.data_to_send()
    (frame,) = decode_all(out)
    # "RS -> RQ: PAYLOAD with COMPLETE"
    assert isinstance(frame, F.PayloadFrame) and frame.next and frame.complete
    assert pair.other(rs).receive_data(out) == [
        PayloadReceived(sid, Payload(b"answer", b"am"), True)]
    # "Upon sending a response, the stream is terminated on the Responder." and on the
    # requester upon receiving the COMPLETE
    assert _gone(pair, sid)
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"twice"))
    assert rs.data_to_send() == b""


@directions
@pytest.mark.parametrize("error", [ApplicationError("app"), RejectedError("busy"),
                                   CanceledError("stop"), InvalidError("bad")],
                         ids=lambda e: type(e).__name__)
def test_request_response_error(direction: str, error) -> None:
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "response")
    rs.send_error(sid, error)
    events = pair.deliver(rs)
    assert len(events) == 1 and isinstance(events[0], StreamErrored)
    assert events[0].stream_id == sid
    assert type(events[0].error) is type(error)
    assert events[0].error.message == error.message
    assert _gone(pair, sid)


@directions
def test_request_response_cancel(direction: str) -> None:
    # "Upon receiving a CANCEL, the stream is terminated on the Responder and the response
    # SHOULD not be sent.  Upon sending a CANCEL, the stream is terminated on the Requester."
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "response")
    rq.send_cancel(sid)
    assert not rq.has_stream(sid)
    assert pair.deliver(rq) == [CancelReceived(sid)]
    assert not rs.has_stream(sid)
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"late"))
    assert rs.data_to_send() == b""


# ---------------------------------------------------------------------------------------------
# fire-and-forget and metadata-push
# ---------------------------------------------------------------------------------------------


@directions
def test_fire_and_forget(direction: str) -> None:
    # "Upon reception, the stream is terminated by the Responder. Upon being sent, the stream
    # is terminated by the Requester."
    pair = Pair()
    rq, rs = roles(pair, direction)
    sid = rq.fire_and_forget(Payload(b"fnf", b""))
    assert not rq.has_stream(sid)
    assert pair.deliver(rq) == [RequestReceived(sid, FrameType.REQUEST_FNF,
                                                Payload(b"fnf", b""), 0, False)]
    assert _gone(pair, sid)
    assert rs.data_to_send() == b""


@directions
def test_metadata_push(direction: str) -> None:
    pair = Pair()
    rq, rs = roles(pair, direction)
    rq.metadata_push(b"routing-table-v2")
    out = rq.data_to_send()
    (frame,) = decode_all(out)
    assert isinstance(frame, F.MetadataPushFrame) and frame.stream_id == 0
    assert rs.receive_data(out) == [MetadataPushReceived(b"routing-table-v2")]
    assert rs.data_to_send() == b""


# ---------------------------------------------------------------------------------------------
# request-stream
# ---------------------------------------------------------------------------------------------


@directions
def test_request_stream_with_flow_control(direction: str) -> None:
    # §Flow Control example: REQUEST_STREAM (REQUEST_N=3), 3 PAYLOADs, wait, REQUEST_N (N=3),
    # PAYLOAD, PAYLOAD with COMPLETE
    pair = Pair()
    rq, rs, sid, events = _open(pair, direction, "stream", n=3)
    assert events == [RequestReceived(sid, FrameType.REQUEST_STREAM,
                                      Payload(b"req", b"req-meta"), 3, False)]
    assert rs.credit(sid) == 3
    for i in range(3):
        rs.send_payload(sid, Payload(b"%d" % i))
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"too many"))
    events = pair.deliver(rs)
    assert events == [PayloadReceived(sid, Payload(b"%d" % i), False) for i in range(3)]
    rq.send_request_n(sid, 3)
    assert pair.deliver(rq) == [RequestNReceived(sid, 3)]
    assert rs.credit(sid) == 3
    rs.send_payload(sid, Payload(b"3"))
    rs.send_payload(sid, Payload(b"4"), complete=True)
    assert pair.deliver(rs) == [PayloadReceived(sid, Payload(b"3"), False),
                                PayloadReceived(sid, Payload(b"4"), True)]
    assert _gone(pair, sid)


@directions
def test_request_stream_cancel(direction: str) -> None:
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "stream", n=10)
    rs.send_payload(sid, Payload(b"0"))
    pair.deliver(rs)
    rq.send_cancel(sid)
    assert not rq.has_stream(sid)
    assert pair.deliver(rq) == [CancelReceived(sid)]
    assert not rs.has_stream(sid)
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"1"))


@directions
def test_request_stream_error_from_responder(direction: str) -> None:
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "stream", n=10)
    rs.send_payload(sid, Payload(b"0"))
    rs.send_error(sid, ApplicationError("disk on fire"))
    events = pair.deliver(rs)
    assert events[0] == PayloadReceived(sid, Payload(b"0"), False)
    assert isinstance(events[1], StreamErrored) and isinstance(events[1].error, ApplicationError)
    assert events[1].error.message == "disk on fire"
    assert _gone(pair, sid)


@directions
def test_request_n_on_request_stream_is_only_sent_while_receiving(direction: str) -> None:
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "stream", n=1)
    rs.send_payload(sid, Payload(b"only"), complete=True)
    pair.deliver(rs)
    rq.send_request_n(sid, 5)  # the stream is over: nothing to grant
    assert rq.data_to_send() == b""


# ---------------------------------------------------------------------------------------------
# request-channel
# ---------------------------------------------------------------------------------------------


@directions
def test_channel_requester_waits_for_responders_request_n(direction: str) -> None:
    # "A requester MUST not send PAYLOAD frames after the REQUEST_CHANNEL frame until the
    # responder sends a REQUEST_N frame granting credits"; the initial request n is the
    # credit of the responder.
    pair = Pair()
    rq, rs, sid, events = _open(pair, direction, "channel", n=4)
    assert events == [RequestReceived(sid, FrameType.REQUEST_CHANNEL,
                                      Payload(b"req", b"req-meta"), 4, False)]
    assert rq.credit(sid) == 0
    with pytest.raises(LocalProtocolError):
        rq.send_payload(sid, Payload(b"too early"))
    assert rq.data_to_send() == b""
    assert rs.credit(sid) == 4
    # "a Responder MUST respond to an initial REQUEST_CHANNEL frame with a REQUEST_N frame"
    rs.send_request_n(sid, 2)
    (frame,) = decode_all(out := rs.data_to_send())
    assert frame == F.RequestNFrame(stream_id=sid, request_n=2)
    assert rq.receive_data(out) == [RequestNReceived(sid, 2)]
    assert rq.credit(sid) == 2
    rq.send_payload(sid, Payload(b"a"))
    rq.send_payload(sid, Payload(b"b"))
    with pytest.raises(LocalProtocolError):
        rq.send_payload(sid, Payload(b"c"))
    assert pair.deliver(rq) == [PayloadReceived(sid, Payload(b"a"), False),
                                PayloadReceived(sid, Payload(b"b"), False)]


@directions
def test_channel_complete_flag_on_request_channel(direction: str) -> None:
    # "A Requester may indicate COMPLETE by setting the C bit on either the initial
    # REQUEST_CHANNEL frame, or on the last PAYLOAD frame sent. A Requester MUST NOT send any
    # additional PAYLOAD frames after sending a frame with the C bit set."
    pair = Pair()
    rq, rs = roles(pair, direction)
    sid = rq.request_channel(Payload(b"all I have"), 2, complete=True)
    out = rq.data_to_send()
    (frame,) = decode_all(out)
    assert isinstance(frame, F.RequestChannelFrame) and frame.complete
    assert rs.receive_data(out) == [RequestReceived(sid, FrameType.REQUEST_CHANNEL,
                                                    Payload(b"all I have"), 2, True)]
    with pytest.raises(LocalProtocolError):
        rq.send_payload(sid, Payload(b"more"))
    with pytest.raises(LocalProtocolError):
        rq.send_complete(sid)
    rs.send_request_n(sid, 5)  # its inbound half is over: no REQUEST_N needed
    assert rs.data_to_send() == b""
    rs.send_payload(sid, Payload(b"r1"))
    rs.send_payload(sid, Payload(b"r2"), complete=True)
    assert pair.deliver(rs) == [PayloadReceived(sid, Payload(b"r1"), False),
                                PayloadReceived(sid, Payload(b"r2"), True)]
    assert _gone(pair, sid)


@directions
def test_channel_requester_completes_first_responder_goes_on(direction: str) -> None:
    # "In absence of ERROR or CANCEL, the stream is terminated after both Requester and
    # Responder have sent and received COMPLETE."
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "channel", n=5)
    rs.send_request_n(sid, 5)
    pair.deliver(rs)
    rq.send_payload(sid, Payload(b"last"), complete=True)
    assert pair.deliver(rq) == [PayloadReceived(sid, Payload(b"last"), True)]
    assert rq.has_stream(sid) and rs.has_stream(sid)
    with pytest.raises(LocalProtocolError):
        rq.send_payload(sid, Payload(b"after C"))
    rs.send_payload(sid, Payload(b"r1"))
    assert pair.deliver(rs) == [PayloadReceived(sid, Payload(b"r1"), False)]
    rs.send_complete(sid)
    assert pair.deliver(rs) == [PayloadReceived(sid, None, True)]
    assert _gone(pair, sid)


@directions
def test_channel_responder_completes_first_requester_goes_on(direction: str) -> None:
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "channel", n=5)
    rs.send_request_n(sid, 3)
    rs.send_payload(sid, Payload(b"r1"), complete=True)
    assert pair.deliver(rs) == [RequestNReceived(sid, 3),
                                PayloadReceived(sid, Payload(b"r1"), True)]
    assert rq.has_stream(sid) and rs.has_stream(sid)
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"after C"))
    rq.send_payload(sid, Payload(b"q1"))
    rq.send_complete(sid)
    assert pair.deliver(rq) == [PayloadReceived(sid, Payload(b"q1"), False),
                                PayloadReceived(sid, None, True)]
    assert _gone(pair, sid)


@directions
@pytest.mark.parametrize("requester_completed", [False, True],
                         ids=["requester-open", "requester-completed"])
def test_channel_error_from_responder_ends_both(direction: str,
                                                requester_completed: bool) -> None:
    # "Error from Responder, Requester terminates" / "... Requester already Completed";
    # "Upon sending an ERROR[...], the stream is terminated on both the Requester and
    # Responder."
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "channel", n=5, complete=requester_completed)
    if not requester_completed:
        rs.send_request_n(sid, 5)
        pair.deliver(rs)
    rs.send_payload(sid, Payload(b"r1"))
    rs.send_error(sid, RejectedError("no more"))
    assert not rs.has_stream(sid)
    events = pair.deliver(rs)
    assert events[0] == PayloadReceived(sid, Payload(b"r1"), False)
    assert isinstance(events[1], StreamErrored) and isinstance(events[1].error, RejectedError)
    assert _gone(pair, sid)
    with pytest.raises(LocalProtocolError):
        rq.send_payload(sid, Payload(b"q"))
    assert rq.data_to_send() == b""


@directions
@pytest.mark.parametrize("responder_completed", [False, True],
                         ids=["responder-open", "responder-completed"])
def test_channel_error_from_requester_ends_both(direction: str,
                                                responder_completed: bool) -> None:
    # "Error from Requester, Responder terminates" / "... Responder already Completed"
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "channel", n=5)
    rs.send_request_n(sid, 5)
    if responder_completed:
        rs.send_complete(sid)
    pair.deliver(rs)
    rq.send_payload(sid, Payload(b"q1"))
    rq.send_error(sid, ApplicationError("requester broke"))
    assert not rq.has_stream(sid)
    events = pair.deliver(rq)
    assert events[0] == PayloadReceived(sid, Payload(b"q1"), False)
    assert isinstance(events[1], StreamErrored) and isinstance(events[1].error, ApplicationError)
    assert events[1].error.message == "requester broke"
    assert _gone(pair, sid)
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"r"))
    assert rs.data_to_send() == b""


@directions
def test_channel_cancel_from_requester_ends_both(direction: str) -> None:
    # "Cancel from Requester, Responder terminates": REQUEST_CHANNEL, PAYLOAD*, COMPLETE,
    # CANCEL.  "Upon receiving a CANCEL, the stream is terminated on the Responder. Upon
    # sending a CANCEL, the stream is terminated on the Requester."
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "channel", n=5)
    rs.send_request_n(sid, 1)
    pair.deliver(rs)
    rq.send_payload(sid, Payload(b"q1"), complete=True)
    rq.send_cancel(sid)
    assert not rq.has_stream(sid)
    assert pair.deliver(rq) == [PayloadReceived(sid, Payload(b"q1"), True), CancelReceived(sid)]
    assert _gone(pair, sid)
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"r"))


@directions
def test_channel_cancel_from_responder_stops_requesters_outbound(direction: str) -> None:
    # The responder's CANCEL ends the requester's outbound half only: the requester stops
    # sending, the responder may still send and complete.
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "channel", n=5)
    rs.send_request_n(sid, 10)
    pair.deliver(rs)
    rs.send_cancel(sid)
    (frame,) = decode_all(out := rs.data_to_send())
    assert frame == F.CancelFrame(stream_id=sid)
    assert rq.receive_data(out) == [CancelReceived(sid)]
    assert rq.credit(sid) == 0
    with pytest.raises(LocalProtocolError):
        rq.send_payload(sid, Payload(b"q"))
    assert rq.data_to_send() == b""
    # the responder's outbound half is still live
    rs.send_payload(sid, Payload(b"r1"))
    assert pair.deliver(rs) == [PayloadReceived(sid, Payload(b"r1"), False)]
    rs.send_complete(sid)
    assert pair.deliver(rs) == [PayloadReceived(sid, None, True)]
    assert _gone(pair, sid)


# ---------------------------------------------------------------------------------------------
# flow control
# ---------------------------------------------------------------------------------------------


@directions
def test_sending_beyond_credit_raises_and_sends_nothing(direction: str) -> None:
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "stream", n=1)
    rs.send_payload(sid, Payload(b"ok"))
    rs.data_to_send()
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"no credit"))
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"no credit"), complete=True)
    assert rs.data_to_send() == b""
    assert rs.has_stream(sid)  # the stream is still usable once credit comes
    rq.send_request_n(sid, 1)
    pair.deliver(rq)
    rs.send_payload(sid, Payload(b"now"), complete=True)
    assert pair.deliver(rs) == [PayloadReceived(sid, Payload(b"now"), True)]


@directions
def test_credits_are_cumulative(direction: str) -> None:
    # "sending request(3) and request(2) accumulates to a value of 5, allowing the Responder
    # to send 5 PAYLOADs."
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "stream", n=3)
    rq.send_request_n(sid, 2)
    assert pair.deliver(rq) == [RequestNReceived(sid, 2)]
    assert rs.credit(sid) == 5
    for i in range(5):
        rs.send_payload(sid, Payload(b"%d" % i))
    with pytest.raises(LocalProtocolError):
        rs.send_payload(sid, Payload(b"6th"))
    assert len(pair.deliver(rs)) == 5


@directions
def test_credit_saturates_at_2_pow_31_minus_1(direction: str) -> None:
    pair = Pair()
    rq, rs, sid, _ = _open(pair, direction, "stream", n=1)
    rq.send_request_n(sid, MAX_U31)
    rq.send_request_n(sid, MAX_U31)
    events = pair.deliver(rq)
    assert events == [RequestNReceived(sid, MAX_U31), RequestNReceived(sid, MAX_U31)]
    assert rs.credit(sid) == MAX_U31
    rs.send_payload(sid, Payload(b"x"))
    assert rs.credit(sid) == MAX_U31 - 1
    assert rs.is_open and rq.is_open


@pytest.mark.parametrize("form", ["C-on-last-payload", "separate-complete"])
def test_both_completion_forms_are_accepted(form: str) -> None:
    # PAYLOAD "Both (C)omplete and (N)ext set" and "Just (C)omplete set" both end the stream.
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 5)
    pair.to_server()
    if form == "C-on-last-payload":
        frames = [F.PayloadFrame(stream_id=sid, data=b"1", next=True),
                  F.PayloadFrame(stream_id=sid, data=b"2", next=True, complete=True)]
        expected = [PayloadReceived(sid, Payload(b"1"), False),
                    PayloadReceived(sid, Payload(b"2"), True)]
    else:
        frames = [F.PayloadFrame(stream_id=sid, data=b"1", next=True),
                  F.PayloadFrame(stream_id=sid, data=b"2", next=True),
                  F.PayloadFrame(stream_id=sid, complete=True)]
        expected = [PayloadReceived(sid, Payload(b"1"), False),
                    PayloadReceived(sid, Payload(b"2"), False),
                    PayloadReceived(sid, None, True)]
    assert pair.client.receive_data(b"".join(wire(f) for f in frames)) == expected
    assert not pair.client.has_stream(sid)
    # and the sender side produces exactly these forms
    pair2 = Pair()
    sid2 = pair2.client.request_stream(Payload(b"s"), 5)
    pair2.to_server()
    pair2.server.send_payload(sid2, Payload(b"1"))
    if form == "C-on-last-payload":
        pair2.server.send_payload(sid2, Payload(b"2"), complete=True)
    else:
        pair2.server.send_payload(sid2, Payload(b"2"))
        pair2.server.send_complete(sid2)
    assert sent(pair2.server) == frames


def test_empty_data_payload_is_delivered_as_next() -> None:
    # "0 length data can be considered a valid PAYLOAD resulting in a delivery to the
    # application layer with a PAYLOAD containing 0 bytes of data."
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 5)
    pair.to_server()
    pair.server.send_payload(sid, Payload(b""))
    assert pair.to_client() == [PayloadReceived(sid, Payload(b""), False)]
