"""Jini ERI Multiplexing Protocol §Flow Control and §IncrementRation Message: byte rations in
both directions, fragments, and rations that follow the application's reading."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.connection import SessionState
from rsocket_tx.jini.errors import LocalProtocolError
from rsocket_tx.jini.events import (
    ConnectionTerminated,
    DataReceived,
    RationIncreased,
    SessionAborted,
    SessionClosed,
    SessionOpened,
)

from .conn_helpers import Pair, assert_violation, make_client, make_server, sent


def received(events: list[object], sid: int | None = None) -> bytes:
    return b"".join(e.data for e in events
                    if isinstance(e, DataReceived) and (sid is None or e.session_id == sid))


def test_data_is_fragmented_at_the_fragment_size() -> None:
    """River sends Data of at most 1,024 bytes (the default fragment size)."""
    pair = Pair()
    sid = pair.client.open_session()
    body = bytes(range(256)) * 10  # 2,560 bytes
    assert pair.client.send_data(sid, body, eof=True) == 2560
    pair.pump()
    data = [m for m in pair.messages("C") if isinstance(m, C.Data)]
    assert [len(m.data) for m in data] == [1024, 1024, 512]
    assert [(m.open, m.eof) for m in data] == [(True, False), (False, False), (False, True)]
    assert b"".join(m.data for m in data) == body


def test_send_data_stops_at_the_outbound_ration() -> None:
    """"It is a protocol violation for an endpoint to send a Data message with a length value
    greater than its current outbound ration": what does not fit is not accepted, and eof
    waits for the last byte."""
    pair = Pair(server={"initial_ration": 512})
    sid = pair.client.open_session()
    assert pair.client.send_data(sid, bytes(1000), eof=True) == 512
    assert pair.client.outbound_ration(sid) == 0
    assert pair.client.send_data(sid, bytes(488), eof=True) == 0  # nothing sent, no eof
    pair.pump()
    assert [(len(m.data), m.eof) for m in pair.messages("C")] == [(512, False)]


def test_rations_follow_the_application_reading_server_side() -> None:
    """The server grants more only as its application reads (River's rule: top up to the
    initial ration when buffered + ration falls to half of it)."""
    pair = Pair(server={"initial_ration": 1024})
    sid = pair.client.open_session()
    body = bytes(range(250)) * 40  # 10,000 bytes
    pos = pair.client.send_data(sid, body, eof=True)
    assert pos == 1024
    _, server_events = pair.pump()
    assert received(server_events) == body[:1024]
    assert not any(isinstance(m, C.IncrementRation) for m in pair.messages("S"))
    # the application reads 300 bytes: 724 buffered + 0 ration > 512: no grant yet
    pair.server.acknowledge_received_data(sid, 300)
    pair.pump()
    assert not any(isinstance(m, C.IncrementRation) for m in pair.messages("S"))
    # reads 300 more: 424 <= 512: grant 1024 - 424 = 600
    pair.server.acknowledge_received_data(sid, 300)
    client_events, _ = pair.pump()
    assert pair.messages("S") == [C.IncrementRation(sid, 600)]
    assert client_events == [RationIncreased(sid, 600, 600)]
    got = received(server_events)
    while pos < len(body):
        pos += pair.client.send_data(sid, body[pos:], eof=True)
        _, server_events = pair.pump()
        chunk = received(server_events)
        got += chunk
        pair.server.acknowledge_received_data(sid, 10**6)  # read everything
        pair.pump()
    assert got == body
    assert all(len(m.data) <= 1024 for m in pair.messages("C") if isinstance(m, C.Data))


def test_rations_both_ways_response_direction() -> None:
    """The client's inbound ration limits the server's response the same way."""
    pair = Pair(client={"initial_ration": 256})
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"q", eof=True)
    pair.pump()
    assert pair.server.send_data(sid, bytes(1000), eof=True) == 256
    client_events, _ = pair.pump()
    assert received(client_events) == bytes(256)
    pair.client.acknowledge_received_data(sid, 256)
    _, server_events = pair.pump()
    assert server_events == [RationIncreased(sid, 256, 256)]


def test_slow_reader_does_not_stall_other_sessions() -> None:
    """§Flow Control: "the processing of any one session must not interfere with ... any
    other session": a session whose application does not read stops at its ration while
    another session keeps flowing."""
    pair = Pair(server={"initial_ration": 512})
    slow = pair.client.open_session()
    fast = pair.client.open_session()
    assert pair.client.send_data(slow, bytes(5000)) == 512
    pair.pump()
    body = b"f" * 20_000
    pos = got = 0
    for _ in range(100):
        pos += pair.client.send_data(fast, body[pos:])
        _, events = pair.pump()
        got += len(received(events, fast))
        pair.server.acknowledge_received_data(fast, len(received(events, fast)))
        pair.pump()
    assert pos == got == 20_000
    assert pair.client.outbound_ration(slow) == 0
    assert pair.server.session(slow).buffered == 512


def test_explicit_increment_ration_with_shift() -> None:
    """increment_ration splits a large grant into increment << (2 * shift) messages."""
    pair = Pair(server={"initial_ration": 256})
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"")
    pair.pump()
    pair.server.increment_ration(sid, 0x123456)
    client_events, _ = pair.pump()
    grants = [m for m in pair.messages("S") if isinstance(m, C.IncrementRation)]
    assert sum(m.amount for m in grants) == 0x123456 and len(grants) >= 2
    assert any(m.shift > 0 for m in grants)
    assert pair.client.outbound_ration(sid) == 256 + 0x123456
    assert sum(e.increment for e in client_events) == 0x123456


def test_increment_ration_overflow_is_refused_locally() -> None:
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"")
    pair.pump()
    with pytest.raises(LocalProtocolError, match="overflow"):
        pair.server.increment_ration(sid, 0x7FFFFFFF)
    pair.pump()
    assert pair.messages("S") == []


def test_increment_ration_on_idle_session_is_refused() -> None:
    client = make_client()
    sid = client.open_session()
    with pytest.raises(LocalProtocolError, match="not established"):
        client.increment_ration(sid, 100)


def test_increment_ration_ignored_once_finished() -> None:
    """"If the session is finished (or terminated) with respect to the receiver, this message
    should be ignored"."""
    client = make_client()
    sid = client.open_session()
    client.send_data(sid, b"all", eof=True)
    sent(client)
    assert client.receive_data(C.IncrementRation(sid, 100).encode(), 0) == []
    assert client.is_open


def test_zero_increment_changes_nothing() -> None:
    client = make_client()
    sid = client.open_session()
    client.send_data(sid, b"x")
    assert client.receive_data(C.IncrementRation(sid, 0, 3).encode(), 0) == []
    assert client.outbound_ration(sid) == 32767


def test_data_past_the_ration_is_a_violation() -> None:
    """"if the receiver's inbound ration is less than length, the receiver should respond
    with an Error message"."""
    server = make_server(initial_ration=256)
    events = server.receive_data(C.Data(0, bytes(200), open=True).encode(), 0)
    assert isinstance(events[-1], DataReceived)
    events = server.receive_data(C.Data(0, bytes(57)).encode(), 0)
    assert_violation(server, events, "exceeds its inbound ration of 56 bytes")


def test_data_exactly_the_ration_is_fine() -> None:
    server = make_server(initial_ration=256)
    server.receive_data(C.Data(0, bytes(200), open=True).encode(), 0)
    events = server.receive_data(C.Data(0, bytes(56)).encode(), 0)
    assert events == [DataReceived(0, bytes(56))] and server.is_open


def test_ration_overflow_is_a_violation() -> None:
    """"It is a protocol violation for an IncrementRation message to cause the sender's
    inbound ration to exceed 0x7FFFFFFF"."""
    client = make_client()  # outbound ration 32,768
    sid = client.open_session()
    client.send_data(sid, b"")
    sent(client)
    events = client.receive_data(C.IncrementRation(sid, 0xFFFF, 7).encode(), 0)  # ~1 GiB
    assert events == [RationIncreased(sid, 0xFFFF << 14, 32768 + (0xFFFF << 14))]
    events = client.receive_data(C.IncrementRation(sid, 0xFFFF, 7).encode(), 0)
    assert_violation(client, events, "overflows")


def test_unlimited_ration_session_buffer_limit_aborts_the_session() -> None:
    """With an unlimited ration, a session whose application does not read is aborted past
    max_session_buffer (the seed's deadlock rule), the connection lives on."""
    server = make_server(initial_ration=None, max_session_buffer=4096)
    server.receive_data(C.Data(0, bytes(4000), open=True).encode(), 0)
    server.receive_data(C.Data(1, b"other", open=True).encode(), 0)
    events = server.receive_data(C.Data(0, bytes(100)).encode(), 0)
    assert events == [SessionAborted(0, False, events[0].detail, by_peer=False)]
    assert "max_session_buffer" in events[0].detail
    assert sent(server) == [C.Abort(0, True, events[0].detail.encode())]
    # the client's Data still in flight is discarded; the other session is unaffected
    assert server.receive_data(C.Data(0, bytes(100)).encode(), 0) == []
    assert server.receive_data(C.Data(1, b"more").encode(), 0) == [DataReceived(1, b"more")]
    assert server.is_open


def test_connection_buffer_limit() -> None:
    server = make_server(initial_ration=None, max_session_buffer=4096,
                         max_connection_buffer=6000)
    server.receive_data(C.Data(0, bytes(4000), open=True).encode(), 0)
    events = server.receive_data(C.Data(1, bytes(3000), open=True).encode(), 0)
    assert events[0] == SessionOpened(1)
    assert isinstance(events[-1], SessionAborted) and "max_connection_buffer" in events[-1].detail
    server.acknowledge_received_data(0, 4000)
    assert server.receive_data(C.Data(2, bytes(3000), open=True).encode(), 0)[-1] == \
        DataReceived(2, bytes(3000))


# -------------------------------------------------------------------------------------------
# property: any mix of sessions, rations, fragment sizes and reading speeds delivers every byte


@settings(max_examples=60, deadline=None)
@given(st.sampled_from([256, 512, 1024, 32768, None]), st.sampled_from([256, 768, None]),
       st.integers(1, 2000), st.lists(st.integers(0, 6000), min_size=1, max_size=6),
       st.integers(1, 3000))
def test_echo_of_many_sessions_under_any_rations(client_ration: int | None,
                                                 server_ration: int | None, fragment: int,
                                                 sizes: list[int], read_step: int) -> None:
    pair = Pair(client={"initial_ration": client_ration, "fragment_size": fragment},
                server={"initial_ration": server_ration, "fragment_size": fragment})
    bodies = {pair.client.open_session(): bytes([i]) * n for i, n in enumerate(sizes)}
    sent_pos = dict.fromkeys(bodies, 0)
    echo_pos = dict.fromkeys(bodies, 0)
    got_req = {sid: b"" for sid in bodies}
    got_resp = {sid: b"" for sid in bodies}
    unread_req = dict.fromkeys(bodies, 0)
    unread_resp = dict.fromkeys(bodies, 0)
    closed: set[int] = set()
    for _ in range(10_000):
        for sid, body in bodies.items():
            client_session = pair.client.session(sid)
            if client_session is not None and client_session.send <= SessionState.ESTABLISHED:
                sent_pos[sid] += pair.client.send_data(sid, body[sent_pos[sid]:], eof=True)
            # the server echoes what it has read, finishing once the request is complete
            server_session = pair.server.session(sid)
            if server_session is not None and server_session.send is SessionState.ESTABLISHED:
                pending = got_req[sid][echo_pos[sid]:]
                done = len(got_req[sid]) == len(body)
                echo_pos[sid] += pair.server.send_data(sid, pending, eof=done)
        client_events, server_events = pair.pump()
        for e in server_events:
            if isinstance(e, DataReceived):
                got_req[e.session_id] += e.data
                unread_req[e.session_id] += len(e.data)
            assert not isinstance(e, (ConnectionTerminated, SessionAborted)), e
        for e in client_events:
            if isinstance(e, DataReceived):
                got_resp[e.session_id] += e.data
                unread_resp[e.session_id] += len(e.data)
            elif isinstance(e, SessionClosed):
                closed.add(e.session_id)
            assert not isinstance(e, (ConnectionTerminated, SessionAborted)), e
        for sid in bodies:  # the applications read at their pace
            n = min(read_step, unread_req[sid])
            unread_req[sid] -= n
            pair.server.acknowledge_received_data(sid, n)
            n = min(read_step, unread_resp[sid])
            unread_resp[sid] -= n
            pair.client.acknowledge_received_data(sid, n)
        pair.pump()
        if closed == set(bodies):
            break
    assert closed == set(bodies)
    assert got_req == bodies and got_resp == bodies
    for m in pair.messages():
        if isinstance(m, C.Data):
            assert len(m.data) <= fragment
