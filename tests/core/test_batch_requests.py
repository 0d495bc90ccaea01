"""The batch path of whole requests and request-response answers
(``RSocketConnection.batch_requests``).

With it, the whole fire-and-forgets and request-responses that arrive one after another in one
read come out as one :class:`RequestsReceived` per run of one kind, and the answers to our
request-responses as one :class:`ResponsesReceived`. Nothing else may change: every test here
feeds the same bytes to a connection with and without batches and checks that the batches,
taken apart, are the very events of the other one, in the same order, and that both send the
same bytes and keep the same state (spec rules on ids in use, stream limits, leases, graceful
close, fragments, malformed frames).
"""

from __future__ import annotations

import pytest

from rsocket_tx.core import errors as E
from rsocket_tx.core import frames as F
from rsocket_tx.core.connection import RSocketConnection
from rsocket_tx.core.events import (
    Event,
    PayloadReceived,
    RequestReceived,
    RequestsReceived,
    ResponsesReceived,
)
from rsocket_tx.core.lease import Lease
from rsocket_tx.core.payload import Payload

from .conn_helpers import Pair, error_frames, hand_frame, sent, setup_frame, wire

FNF = F.FrameType.REQUEST_FNF
RESPONSE = F.FrameType.REQUEST_RESPONSE


def unbatch(events: list[Event]) -> list[Event]:
    """``events`` with each batch taken apart into the events it stands for."""
    out: list[Event] = []
    for event in events:
        if isinstance(event, RequestsReceived):
            assert event.stream_ids and len(event.stream_ids) == len(event.payloads)
            out += [RequestReceived(sid, event.frame_type, payload, 0, False)
                    for sid, payload in zip(event.stream_ids, event.payloads)]
        elif isinstance(event, ResponsesReceived):
            assert event.stream_ids and len(event.stream_ids) == len(event.payloads)
            out += [PayloadReceived(sid, payload, True)
                    for sid, payload in zip(event.stream_ids, event.payloads)]
        else:
            out.append(event)
    return out


def servers(**pair_options) -> tuple[Pair, Pair]:
    """Two established pairs alike but for the server's ``batch_requests`` (on, off)."""
    batched, plain = Pair(**pair_options), Pair(**pair_options)
    batched.server.batch_requests = True
    return batched, plain


def same(events: list[Event], others: list[Event]) -> bool:
    """The same events (errors, which do not compare equal, by their class and fields)."""
    return [repr(e) for e in events] == [repr(e) for e in others]


def feed_both(batched: RSocketConnection, plain: RSocketConnection, data: bytes) -> list[Event]:
    """Feed ``data`` to both; check they agree; return the batched side's events."""
    events = batched.receive_data(data)
    assert same(unbatch(events), plain.receive_data(data))
    assert batched.data_to_send() == plain.data_to_send()
    assert batched.peer_stream_count == plain.peer_stream_count
    assert batched.is_open == plain.is_open
    return events


def request(sid: int, kind: int, data: bytes = b"x", metadata: bytes | None = None,
            follows: bool = False) -> bytes:
    frame_class = F.RequestFnfFrame if kind == FNF else F.RequestResponseFrame
    return wire(frame_class(stream_id=sid, data=data, metadata=metadata, follows=follows))


def test_runs_of_one_kind_become_one_batch_each_in_order() -> None:
    batched, plain = servers()
    data = b"".join([request(1, FNF, b"a"), request(3, FNF, b"b"),
                     request(5, RESPONSE, b"c"), request(7, RESPONSE, b"d", b"meta"),
                     request(9, FNF, b"e"),
                     wire(F.RequestStreamFrame(stream_id=11, initial_request_n=4, data=b"f")),
                     request(13, RESPONSE, b"g")])
    events = feed_both(batched.server, plain.server, data)
    shapes = [(type(e).__name__, getattr(e, "frame_type", None), getattr(e, "stream_ids", None))
              for e in events]
    assert shapes == [("RequestsReceived", FNF, [1, 3]),
                      ("RequestsReceived", RESPONSE, [5, 7]),
                      ("RequestsReceived", FNF, [9]),
                      ("RequestReceived", F.FrameType.REQUEST_STREAM, None),
                      ("RequestsReceived", RESPONSE, [13])]
    assert events[1].payloads == [Payload(b"c"), Payload(b"d", b"meta")]
    # the batched request-responses are open streams, answered as any other
    for conn in (batched.server, plain.server):
        assert conn.send_response(7, Payload(b"answer", b"m"))
        assert conn.send_response(5, Payload(b"answer"))
    assert batched.server.data_to_send() == plain.server.data_to_send()
    for pair in (batched, plain):
        pair.to_client()  # (the client had not sent these: it ignores the answers)
    assert batched.server.peer_stream_count == plain.server.peer_stream_count == 2


def test_without_batch_requests_each_request_is_its_own_event() -> None:
    pair = Pair()
    events = pair.server.receive_data(request(1, FNF) + request(3, RESPONSE))
    assert [type(e) for e in events] == [RequestReceived, RequestReceived]


@pytest.mark.parametrize("case", [
    "id in use", "our parity", "stream id 0", "past the stream limit", "graceful close",
    "fragments", "malformed metadata", "lease"])
def test_batches_keep_every_rule_of_the_single_requests(case) -> None:
    options: dict = {}
    if case == "past the stream limit":
        options = {"server_config": {"max_concurrent_streams": 2}}
    if case == "lease":
        options = {"setup": setup_frame(lease=True)}
    batched, plain = servers(**options)
    frames = [request(1, RESPONSE), request(3, FNF)]
    if case == "id in use":
        frames += [request(1, RESPONSE), request(1, FNF), request(5, RESPONSE)]
    elif case == "our parity":
        frames += [request(4, RESPONSE), request(6, FNF), request(5, RESPONSE)]
    elif case == "stream id 0":
        frames += [hand_frame(0, RESPONSE, 0, b"x"), request(5, RESPONSE)]
    elif case == "past the stream limit":
        frames += [request(5, RESPONSE), request(7, RESPONSE), request(9, FNF)]
    elif case == "graceful close":
        for pair in (batched, plain):
            pair.server.receive_data(b"".join(frames))  # (1 stays open: the close drains)
            pair.server.begin_close()
            pair.server.data_to_send()
        frames = [request(5, RESPONSE), request(7, FNF)]
    elif case == "fragments":
        frames += [request(5, RESPONSE, b"first", follows=True),
                   wire(F.PayloadFrame(stream_id=5, data=b" rest", next=True)),
                   request(7, RESPONSE)]
    elif case == "malformed metadata":  # (M flag, a metadata length past the frame)
        frames += [hand_frame(5, RESPONSE, F.FLAG_METADATA, b"\x00\x00\x09ab"),
                   request(7, RESPONSE)]
    elif case == "lease":
        for pair in (batched, plain):
            pair.server.send_lease(Lease(ttl=10_000, number_of_requests=2))
            pair.to_client()
            pair.server.data_to_send()
        frames += [request(5, RESPONSE), request(7, FNF)]
    events = feed_both(batched.server, plain.server, b"".join(frames))
    batches = [e for e in events if isinstance(e, RequestsReceived)]
    if case in ("graceful close", "lease"):
        assert batches == []  # (refusals and lease counts: the general path, one by one)
    else:
        assert batches  # (the batch path ran)


def test_refusals_past_the_stream_limit_are_sent_from_the_batch_path() -> None:
    batched, _ = servers(server_config={"max_concurrent_streams": 1})
    events = batched.server.receive_data(request(1, RESPONSE) + request(3, RESPONSE))
    assert [e.stream_ids for e in events] == [[1]]
    [refusal] = error_frames(sent(batched.server))
    assert refusal.stream_id == 3 and refusal.error_code == E.ErrorCode.REJECTED


def test_answers_of_one_read_become_one_batch() -> None:
    batched, plain = Pair(), Pair()
    batched.client.batch_requests = True
    for pair in (batched, plain):
        for i in range(4):
            pair.client.request_response(Payload(b"q%d" % i))
        pair.to_server()
        pair.server.send_response(1, Payload(b"a1"))
        pair.server.send_response(3, Payload(b"a3", b"m3"))
        pair.server.send_error(5, E.ApplicationError("no"))
        pair.server.send_response(7, Payload(b"a7"))
    data = batched.server.data_to_send()
    assert data == plain.server.data_to_send()
    events = batched.client.receive_data(data)
    assert same(unbatch(events), plain.client.receive_data(data))
    assert [type(e).__name__ for e in events] == [
        "ResponsesReceived", "StreamErrored", "ResponsesReceived"]
    assert events[0].stream_ids == [1, 3]
    assert events[0].payloads == [Payload(b"a1"), Payload(b"a3", b"m3")]
    assert events[2].stream_ids == [7]
    assert batched.client.stream_count == plain.client.stream_count == 0
