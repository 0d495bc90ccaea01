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


_REQUEST_TYPES = {"response": FrameType.REQUEST_RESPONSE, "stream": FrameType.REQUEST_STREAM,
                  "channel": FrameType.REQUEST_CHANNEL}


def _open(direction: str, kind: str, n: int = 1, complete: bool = False):
    """Open a stream from the requester of a new :class:`Pair`; return (pair, rq, rs, sid).

    Checks that the responder saw exactly the request (request n 0 for request-response).
    """
    pair = Pair()
    rq, rs = roles(pair, direction)
    payload = Payload(b"req", b"req-meta")
    if kind == "response":
        sid = rq.request_response(payload)
        n = 0
    elif kind == "stream":
        sid = rq.request_stream(payload, n)
    else:
        sid = rq.request_channel(payload, n, complete=complete)
    assert pair.deliver(rq) == [RequestReceived(sid, _REQUEST_TYPES[kind], payload, n, complete)]
    return pair, rq, rs, sid


def _gone(pair: Pair, sid: int) -> bool:
    return not pair.client.has_stream(sid) and not pair.server.has_stream(sid)


def _refuses_payload(conn, sid: int, *, quiet: bool = False) -> None:
    """``send_payload`` on ``sid`` raises :class:`LocalProtocolError`; with ``quiet``, ``conn``
    also has nothing to send afterwards."""
    with pytest.raises(LocalProtocolError):
        conn.send_payload(sid, Payload(b"refused"))
    if quiet:
        assert conn.data_to_send() == b""


def _grant(pair: Pair, rs, sid: int, n: int) -> None:
    """The responder grants ``n`` credits and the requester receives exactly that REQUEST_N."""
    rs.send_request_n(sid, n)
    assert pair.deliver(rs) == [RequestNReceived(sid, n)]


def _assert_errored(events, sid: int, before: list, error_type: type, message: str) -> None:
    """``events`` are ``before`` then one :class:`StreamErrored` carrying exactly that error."""
    *head, last = events
    assert head == before
    assert isinstance(last, StreamErrored) and last.stream_id == sid
    assert type(last.error) is error_type and last.error.message == message


def _error_ends_both(pair: Pair, sender, sid: int, last: bytes, error) -> None:
    """``sender`` sends a PAYLOAD ``last`` then ``error``: the stream ends on its side at once;
    the peer gets that PAYLOAD then exactly that error, and the stream is gone on both sides,
    the peer unable to send on it."""
    sender.send_payload(sid, Payload(last))
    sender.send_error(sid, error)
    assert not sender.has_stream(sid)
    _assert_errored(pair.deliver(sender), sid, [PayloadReceived(sid, Payload(last), False)],
                    type(error), error.message)
    assert _gone(pair, sid)
    _refuses_payload(pair.other(sender), sid, quiet=True)


def _responder_ends_with(pair: Pair, rs, sid: int, first: bytes, last: bytes) -> None:
    """The responder sends PAYLOAD ``first``, then ``last`` with COMPLETE: the requester gets
    both, the second complete, and the stream is gone on both sides."""
    rs.send_payload(sid, Payload(first))
    rs.send_payload(sid, Payload(last), complete=True)
    assert pair.deliver(rs) == [PayloadReceived(sid, Payload(first), False),
                                PayloadReceived(sid, Payload(last), True)]
    assert _gone(pair, sid)


def _responder_sends_r1_then_completes(pair: Pair, rs, sid: int) -> None:
    """The responder's outbound half still works: one PAYLOAD, then COMPLETE ends the stream."""
    rs.send_payload(sid, Payload(b"r1"))
    assert pair.deliver(rs) == [PayloadReceived(sid, Payload(b"r1"), False)]
    rs.send_complete(sid)
    assert pair.deliver(rs) == [PayloadReceived(sid, None, True)]
    assert _gone(pair, sid)


# ---------------------------------------------------------------------------------------------
# stream ids
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("side", "expected"), [("client", [1, 3, 5, 7]),
                                                ("server", [2, 4, 6, 8])])
def test_stream_ids_odd_on_client_even_on_server(side: str, expected: list[int]) -> None:
    # "Stream IDs on the client MUST start at 1 and increment by 2 sequentially"
    # "Stream IDs on the server MUST start at 2 and increment by 2 sequentially"
    conn = getattr(Pair(), side)
    ids = [conn.request_response(Payload()), conn.fire_and_forget(Payload()),
           conn.request_stream(Payload(), 1), conn.request_channel(Payload(), 1)]
    assert ids == expected
    assert [f.stream_id for f in sent(conn)] == expected


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
    pair, rq, rs, sid = _open(direction, "response")
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
    _refuses_payload(rs, sid, quiet=True)


@directions
@pytest.mark.parametrize("error", [ApplicationError("app"), RejectedError("busy"),
                                   CanceledError("stop"), InvalidError("bad")],
                         ids=lambda e: type(e).__name__)
def test_request_response_error(direction: str, error) -> None:
    pair, rq, rs, sid = _open(direction, "response")
    rs.send_error(sid, error)
    _assert_errored(pair.deliver(rs), sid, [], type(error), error.message)
    assert _gone(pair, sid)


@directions
@pytest.mark.parametrize("kind", ["response", "stream"])
def test_cancel_from_requester(direction: str, kind: str) -> None:
    # "Upon receiving a CANCEL, the stream is terminated on the Responder and the response
    # SHOULD not be sent.  Upon sending a CANCEL, the stream is terminated on the Requester."
    pair, rq, rs, sid = _open(direction, kind, n=10)
    if kind == "stream":  # a stream is cancelled after some of it has arrived
        rs.send_payload(sid, Payload(b"0"))
        assert pair.deliver(rs) == [PayloadReceived(sid, Payload(b"0"), False)]
    rq.send_cancel(sid)
    assert not rq.has_stream(sid)
    assert pair.deliver(rq) == [CancelReceived(sid)]
    assert not rs.has_stream(sid)
    _refuses_payload(rs, sid, quiet=True)


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
    pair, rq, rs, sid = _open(direction, "stream", n=3)
    assert rs.credit(sid) == 3
    for i in range(3):
        rs.send_payload(sid, Payload(b"%d" % i))
    _refuses_payload(rs, sid)
    events = pair.deliver(rs)
    assert events == [PayloadReceived(sid, Payload(b"%d" % i), False) for i in range(3)]
    rq.send_request_n(sid, 3)
    assert pair.deliver(rq) == [RequestNReceived(sid, 3)]
    assert rs.credit(sid) == 3
    _responder_ends_with(pair, rs, sid, b"3", b"4")


@directions
def test_request_stream_error_from_responder(direction: str) -> None:
    pair, rq, rs, sid = _open(direction, "stream", n=10)
    _error_ends_both(pair, rs, sid, b"0", ApplicationError("disk on fire"))


@directions
def test_request_n_on_request_stream_is_only_sent_while_receiving(direction: str) -> None:
    pair, rq, rs, sid = _open(direction, "stream", n=1)
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
    pair, rq, rs, sid = _open(direction, "channel", n=4)
    assert rq.credit(sid) == 0
    _refuses_payload(rq, sid, quiet=True)
    assert rs.credit(sid) == 4
    # "a Responder MUST respond to an initial REQUEST_CHANNEL frame with a REQUEST_N frame"
    rs.send_request_n(sid, 2)
    (frame,) = decode_all(out := rs.data_to_send())
    assert frame == F.RequestNFrame(stream_id=sid, request_n=2)
    assert rq.receive_data(out) == [RequestNReceived(sid, 2)]
    assert rq.credit(sid) == 2
    rq.send_payload(sid, Payload(b"a"))
    rq.send_payload(sid, Payload(b"b"))
    _refuses_payload(rq, sid)
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
    _refuses_payload(rq, sid)
    with pytest.raises(LocalProtocolError):
        rq.send_complete(sid)
    rs.send_request_n(sid, 5)  # its inbound half is over: no REQUEST_N needed
    assert rs.data_to_send() == b""
    _responder_ends_with(pair, rs, sid, b"r1", b"r2")


@directions
def test_channel_requester_completes_first_responder_goes_on(direction: str) -> None:
    # "In absence of ERROR or CANCEL, the stream is terminated after both Requester and
    # Responder have sent and received COMPLETE."
    pair, rq, rs, sid = _open(direction, "channel", n=5)
    _grant(pair, rs, sid, 5)
    rq.send_payload(sid, Payload(b"last"), complete=True)
    assert pair.deliver(rq) == [PayloadReceived(sid, Payload(b"last"), True)]
    assert rq.has_stream(sid) and rs.has_stream(sid)
    _refuses_payload(rq, sid)
    _responder_sends_r1_then_completes(pair, rs, sid)


@directions
def test_channel_responder_completes_first_requester_goes_on(direction: str) -> None:
    pair, rq, rs, sid = _open(direction, "channel", n=5)
    rs.send_request_n(sid, 3)
    rs.send_payload(sid, Payload(b"r1"), complete=True)
    assert pair.deliver(rs) == [RequestNReceived(sid, 3),
                                PayloadReceived(sid, Payload(b"r1"), True)]
    assert rq.has_stream(sid) and rs.has_stream(sid)
    _refuses_payload(rs, sid)
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
    pair, rq, rs, sid = _open(direction, "channel", n=5, complete=requester_completed)
    if not requester_completed:
        _grant(pair, rs, sid, 5)
    _error_ends_both(pair, rs, sid, b"r1", RejectedError("no more"))


@directions
@pytest.mark.parametrize("responder_completed", [False, True],
                         ids=["responder-open", "responder-completed"])
def test_channel_error_from_requester_ends_both(direction: str,
                                                responder_completed: bool) -> None:
    # "Error from Requester, Responder terminates" / "... Responder already Completed"
    pair, rq, rs, sid = _open(direction, "channel", n=5)
    rs.send_request_n(sid, 5)
    if responder_completed:
        rs.send_complete(sid)
    pair.deliver(rs)
    _error_ends_both(pair, rq, sid, b"q1", ApplicationError("requester broke"))


@directions
def test_channel_cancel_from_requester_ends_both(direction: str) -> None:
    # "Cancel from Requester, Responder terminates": REQUEST_CHANNEL, PAYLOAD*, COMPLETE,
    # CANCEL.  "Upon receiving a CANCEL, the stream is terminated on the Responder. Upon
    # sending a CANCEL, the stream is terminated on the Requester."
    pair, rq, rs, sid = _open(direction, "channel", n=5)
    _grant(pair, rs, sid, 1)
    rq.send_payload(sid, Payload(b"q1"), complete=True)
    rq.send_cancel(sid)
    assert not rq.has_stream(sid)
    assert pair.deliver(rq) == [PayloadReceived(sid, Payload(b"q1"), True), CancelReceived(sid)]
    assert _gone(pair, sid)
    _refuses_payload(rs, sid)


@directions
def test_channel_cancel_from_responder_stops_requesters_outbound(direction: str) -> None:
    # The responder's CANCEL ends the requester's outbound half only: the requester stops
    # sending, the responder may still send and complete.
    pair, rq, rs, sid = _open(direction, "channel", n=5)
    _grant(pair, rs, sid, 10)
    rs.send_cancel(sid)
    (frame,) = decode_all(out := rs.data_to_send())
    assert frame == F.CancelFrame(stream_id=sid)
    # responding=False: our outbound half alone ends (the protocol keeps the inbound half)
    assert rq.receive_data(out) == [CancelReceived(sid, responding=False)]
    assert rq.credit(sid) == 0
    _refuses_payload(rq, sid, quiet=True)
    # the responder's outbound half is still live
    _responder_sends_r1_then_completes(pair, rs, sid)


# ---------------------------------------------------------------------------------------------
# flow control
# ---------------------------------------------------------------------------------------------


@directions
def test_sending_beyond_credit_raises_and_sends_nothing(direction: str) -> None:
    pair, rq, rs, sid = _open(direction, "stream", n=1)
    rs.send_payload(sid, Payload(b"ok"))
    rs.data_to_send()
    _refuses_payload(rs, sid)
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
    pair, rq, rs, sid = _open(direction, "stream", n=3)
    rq.send_request_n(sid, 2)
    assert pair.deliver(rq) == [RequestNReceived(sid, 2)]
    assert rs.credit(sid) == 5
    for i in range(5):
        rs.send_payload(sid, Payload(b"%d" % i))
    _refuses_payload(rs, sid)
    assert len(pair.deliver(rs)) == 5


@directions
def test_credit_saturates_at_2_pow_31_minus_1(direction: str) -> None:
    pair, rq, rs, sid = _open(direction, "stream", n=1)
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
