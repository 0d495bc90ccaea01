"""RSocketConnection: the bytes one connection holds in reassembly across all its streams
(``max_reassembly_buffer_size``; spec §Fragmentation And Reassembly, §Error Codes).

Without it a peer could make one connection hold max_concurrent_streams x
max_reassembled_size bytes (1,024 x 64 MiB = 64 GiB with the defaults) in unfinished
fragments. Past it only the stream whose fragment would not fit ends, and what it held is
released: a request still arriving gets ERROR[REJECTED] (the responder guarantees it did not
process it), the inbound half of a channel we serve gets ERROR[CANCELED] (it may have been
processed), a response we receive is CANCELed. The connection and its other streams go on.
"""

from __future__ import annotations

import pytest

from rsocket_tx.core import frames as F
from rsocket_tx.core.config import DEFAULT_MAX_REASSEMBLY_BUFFER_SIZE, ConnectionConfig
from rsocket_tx.core.errors import ErrorCode, PayloadTooLargeError, ReassemblyBudgetError
from rsocket_tx.core.events import (
    PayloadReceived,
    RequestReceived,
    StreamErrored,
)
from rsocket_tx.core.payload import Payload

from .conn_helpers import Pair, make_server, sent, setup_frame, wire

BUDGET = 4096
LIMIT = 3000  # max_reassembled_size: one payload of it fits the budget, two do not


def server(**config):
    conn = make_server(max_reassembly_buffer_size=BUDGET, max_reassembled_size=LIMIT, **config)
    conn.receive_data(wire(setup_frame()))
    return conn


def request_fragment(sid: int, size: int, kind=F.RequestResponseFrame, **kw) -> bytes:
    return wire(kind(stream_id=sid, data=b"r" * size, follows=True, **kw))


def payload_fragment(sid: int, size: int, follows: bool = True) -> bytes:
    return wire(F.PayloadFrame(stream_id=sid, data=b"p" * size, follows=follows, next=True))


def test_the_default_budget_is_64_mib_and_at_least_max_reassembled_size() -> None:
    assert ConnectionConfig().reassembly_budget == DEFAULT_MAX_REASSEMBLY_BUFFER_SIZE == 2**26
    config = ConnectionConfig(max_reassembled_size=2**27)
    assert config.reassembly_budget == 2**27  # one largest payload always fits
    assert ConnectionConfig(max_reassembly_buffer_size=10).reassembly_budget == \
        ConnectionConfig().max_reassembled_size


def test_the_fragment_that_would_pass_the_budget_ends_only_its_stream() -> None:
    conn = server()
    conn.receive_data(request_fragment(1, 2500))
    conn.receive_data(request_fragment(3, 1000))
    assert conn.reassembly_held == 3500
    events = conn.receive_data(payload_fragment(3, 1000))  # 4,500 > 4,096
    assert events == []  # the request was never delivered: nothing to report
    (error,) = sent(conn)
    assert (error.stream_id, error.error_code) == (3, ErrorCode.REJECTED)
    assert b"max_reassembly_buffer_size" in error.data and b"4096" in error.data
    assert conn.reassembly_held == 2500  # stream 3's bytes are released
    assert not conn.has_stream(3)
    # stream 1 completes; the budget is free again
    [event] = conn.receive_data(payload_fragment(1, 400, follows=False))
    assert isinstance(event, RequestReceived) and event.payload.data == b"r" * 2500 + b"p" * 400
    assert conn.reassembly_held == 0
    # later fragments of the refused stream 3 are ignored (unknown stream)
    assert conn.receive_data(payload_fragment(3, 10, follows=False)) == []
    assert sent(conn) == []
    assert conn.is_open


def test_a_first_fragment_past_the_budget_is_rejected() -> None:
    conn = server()
    conn.receive_data(request_fragment(1, 2900))
    conn.receive_data(request_fragment(3, 1196))  # exactly 4,096 held
    assert conn.reassembly_held == 4096
    conn.receive_data(request_fragment(5, 1, kind=F.RequestStreamFrame, initial_request_n=1))
    (error,) = sent(conn)
    assert (error.stream_id, error.error_code) == (5, ErrorCode.REJECTED)
    assert conn.reassembly_held == 4096


def test_max_reassembled_size_still_answers_invalid() -> None:
    conn = server()
    conn.receive_data(request_fragment(1, 2000))
    conn.receive_data(payload_fragment(1, 1001))  # 3,001 > 3,000 (the budget has room)
    (error,) = sent(conn)
    assert (error.stream_id, error.error_code) == (1, ErrorCode.INVALID)
    assert conn.reassembly_held == 0


def test_channel_inbound_fragments_past_the_budget_are_canceled() -> None:
    pair = Pair(server_config={"max_reassembly_buffer_size": BUDGET,
                               "max_reassembled_size": LIMIT})
    sid = pair.client.request_channel(Payload(b"open"), 1)
    [event] = pair.to_server()
    assert isinstance(event, RequestReceived)
    other = pair.client.request_response(Payload(b"x"))
    pair.to_server()
    conn = pair.server
    conn.receive_data(request_fragment(other + 2, 2500))  # another request holds 2,500
    assert conn.receive_data(payload_fragment(sid, 1000)) == []
    events = conn.receive_data(payload_fragment(sid, 1000))
    assert [type(e) for e in events] == [StreamErrored]
    assert isinstance(events[0].error, ReassemblyBudgetError)
    assert isinstance(events[0].error, PayloadTooLargeError)
    (error,) = sent(conn)
    assert (error.stream_id, error.error_code) == (sid, ErrorCode.CANCELED)
    assert conn.reassembly_held == 2500
    assert conn.is_open


def test_a_response_past_the_budget_is_canceled_by_the_requester() -> None:
    pair = Pair(client_config={"max_reassembly_buffer_size": BUDGET,
                               "max_reassembled_size": LIMIT})
    a = pair.client.request_response(Payload(b"a"))
    b = pair.client.request_response(Payload(b"b"))
    pair.to_server()
    client = pair.client
    assert client.receive_data(payload_fragment(a, 2500)) == []
    events = client.receive_data(payload_fragment(b, 2000))
    assert [type(e) for e in events] == [StreamErrored]
    assert events[0].stream_id == b and isinstance(events[0].error, ReassemblyBudgetError)
    (cancel,) = sent(client)
    assert isinstance(cancel, F.CancelFrame) and cancel.stream_id == b
    [done] = client.receive_data(payload_fragment(a, 10, follows=False))
    assert isinstance(done, PayloadReceived) and len(done.payload.data) == 2510
    assert client.reassembly_held == 0


@pytest.mark.parametrize("how", ["peer-cancel", "error", "close"])
def test_ended_streams_release_their_bytes(how) -> None:
    conn = server()
    conn.receive_data(request_fragment(1, 2000))
    assert conn.reassembly_held == 2000
    if how == "peer-cancel":
        conn.receive_data(wire(F.CancelFrame(stream_id=1)))
    elif how == "error":
        conn.receive_data(wire(F.ErrorFrame(stream_id=1, error_code=ErrorCode.APPLICATION_ERROR,
                                            data=b"x")))
    else:
        conn.close()
    assert conn.reassembly_held == 0


def test_many_streams_cannot_hold_more_than_the_budget() -> None:
    conn = server(max_concurrent_streams=1024)
    for i in range(100):
        conn.receive_data(request_fragment(2 * i + 1, 1000))
    assert conn.reassembly_held <= BUDGET
    errors = [f for f in sent(conn) if isinstance(f, F.ErrorFrame)]
    assert len(errors) == 100 - BUDGET // 1000
    assert {e.error_code for e in errors} == {ErrorCode.REJECTED}
