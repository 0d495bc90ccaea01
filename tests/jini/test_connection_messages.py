"""The behaviour each message's section of the Jini ERI Multiplexing Protocol requires:
§NoOperation, §Shutdown, §Ping, §PingAck, §Error, §Abort, §Close, §Acknowledgment and the
ackRequired flag of §Data, with two sans-IO connections (or one, hand-driven)."""

from __future__ import annotations

import pytest

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.connection import SessionState
from rsocket_tx.jini.errors import LocalProtocolError
from rsocket_tx.jini.events import (
    AcknowledgmentReceived,
    ConnectionTerminated,
    DataReceived,
    PingAckReceived,
    SessionAborted,
    SessionClosed,
    SessionOpened,
    SessionReleased,
    ShutdownReceived,
)

from .conn_helpers import Pair, make_client, make_server, sent

# -------------------------------------------------------------------------------------------
# §NoOperation


def test_no_operation_is_ignored() -> None:
    server = make_server()
    assert server.receive_data(C.NoOperation(b"padding").encode(), 0) == []
    assert server.receive_data(C.NoOperation().encode(), 0) == []
    assert sent(server) == [] and server.is_open


# -------------------------------------------------------------------------------------------
# §Ping / §PingAck


def test_ping_is_answered_with_the_same_cookie() -> None:
    """"After receiving a Ping message with a given cookie value, an endpoint should
    immediately respond with a PingAck message with the same cookie value"."""
    for conn in (make_client(), make_server()):
        assert conn.receive_data(C.Ping(0xBEEF).encode(), 0) == []
        assert sent(conn) == [C.PingAck(0xBEEF)]


def test_ping_round_trip_both_ways() -> None:
    pair = Pair()
    cookie = pair.client.ping(0.0)
    client_events, _ = pair.pump()
    assert client_events == [PingAckReceived(cookie)]
    cookie2 = pair.server.ping(0.0)
    assert cookie2 == 0
    _, server_events = pair.pump()
    assert server_events == [PingAckReceived(cookie2)]
    assert pair.client.next_deadline() is None


def test_ping_timeout_ends_the_connection() -> None:
    """"if it is not received, the sender may consider the receiver to have gone down ... it
    should discard the connection and consider all open sessions aborted (with partial
    processing, if the sender is the client)"."""
    client = make_client(ping_timeout=500)
    sid = client.open_session()
    client.send_data(sid, b"req")
    client.ping(10.0)
    assert client.next_deadline() == pytest.approx(10.5)
    assert client.tick(10.4) == []
    events = client.tick(10.5)
    assert events == [SessionAborted(sid, True, events[0].detail, by_peer=False),
                      ConnectionTerminated(events[-1].reason, by_peer=False)]
    assert "PingAck" in events[-1].reason
    assert sent(client)[-1] == C.Ping(0)  # no Error: the peer broke no rule


def test_distinct_cookies_for_outstanding_pings() -> None:
    client = make_client()
    assert [client.ping(0.0) for _ in range(3)] == [0, 1, 2]
    assert client.receive_data(C.PingAck(1).encode(), 0) == [PingAckReceived(1)]


# -------------------------------------------------------------------------------------------
# §Error


def test_error_received_ends_the_connection_with_partial_aborts() -> None:
    """"When the client receives an Error message, it should discard the connection and
    consider all established sessions that were not finished with respect to the server as if
    they have been aborted ... with possible partial processing"."""
    client = make_client()
    a = client.open_session()
    b = client.open_session()
    client.send_data(a, b"x")
    client.send_data(b, b"y", eof=True)
    sent(client)
    client.receive_data(C.Data(b, b"done", eof=True).encode(), 0)  # b finished by the server
    events = client.receive_data(C.Error(b"you did wrong").encode(), 0)
    reason = "the server reported a protocol error: you did wrong"
    assert events == [SessionAborted(a, True, reason, by_peer=False),
                      ConnectionTerminated(reason, by_peer=True)]
    assert sent(client) == []  # an Error is not answered


def test_server_receiving_error_aborts_every_session() -> None:
    server = make_server()
    server.receive_data(C.Data(4, b"q", open=True, eof=True).encode(), 0)
    events = server.receive_data(C.Error().encode(), 0)
    assert events[0] == SessionAborted(4, False, events[0].detail, by_peer=False)
    assert events[-1].by_peer and not server.is_open


# -------------------------------------------------------------------------------------------
# §Shutdown


def test_shutdown_aborts_unfinished_sessions_without_partial() -> None:
    """"consider all established sessions that were not finished with respect to the server
    as if they have been aborted ... with no partial processing"."""
    pair = Pair()
    a = pair.client.open_session()
    b = pair.client.open_session()
    pair.client.send_data(a, b"1", eof=True)
    pair.client.send_data(b, b"2", eof=True)
    pair.pump()
    pair.server.send_data(b, b"r", eof=True, ack_required=True)  # finished, ack pending
    pair.pump()
    server_events = pair.server.shutdown("maintenance")
    assert server_events[-1] == ConnectionTerminated("shutdown: maintenance", by_peer=False)
    assert not pair.server.is_open
    client_events, _ = pair.pump()
    reason = "the server shut the connection down: maintenance"
    assert client_events == [ShutdownReceived("maintenance"),
                             SessionAborted(a, False, reason, by_peer=False),
                             ConnectionTerminated(reason, by_peer=True)]
    assert pair.messages("S")[-1] == C.Shutdown(b"maintenance")


def test_shutdown_is_server_only() -> None:
    with pytest.raises(LocalProtocolError):
        make_client().shutdown()


# -------------------------------------------------------------------------------------------
# §Abort


def test_server_abort_with_partial_is_answered_by_the_client() -> None:
    """"If the session is not yet terminated with respect to the receiver, then the receiver
    should ... respond in a timely fashion with an Abort message"; partial tells the client
    it cannot retry."""
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"half")
    pair.pump()
    pair.server.abort(sid, detail="failed")
    client_events, server_events = pair.pump()
    assert client_events == [SessionAborted(sid, True, "failed", by_peer=True),
                             SessionReleased(sid)]
    assert pair.messages() == [C.Data(sid, b"half", open=True), C.Abort(sid, True, b"failed"),
                               C.Abort(sid)]
    assert server_events == []
    assert pair.server.session(sid) is None


def test_server_abort_without_partial_allows_retry() -> None:
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"req", eof=True)
    pair.pump()
    pair.server.abort(sid, partial=False)
    client_events, _ = pair.pump()
    assert client_events == [SessionAborted(sid, False, "", by_peer=True), SessionReleased(sid)]
    # the client had finished: no answering Abort is needed (implicitly terminated)
    assert pair.messages("C") == [C.Data(sid, b"req", open=True, eof=True)]


def test_client_may_not_set_partial() -> None:
    client = make_client()
    sid = client.open_session()
    client.send_data(sid, b"x")
    with pytest.raises(LocalProtocolError, match="partial"):
        client.abort(sid, partial=True)


def test_abort_twice_is_refused() -> None:
    client = make_client()
    sid = client.open_session()
    client.send_data(sid, b"x")
    client.abort(sid)
    with pytest.raises(LocalProtocolError, match="already terminated"):
        client.abort(sid)


def test_crossing_aborts() -> None:
    """Both ends abort at once: each Abort is the other's answer, nothing else is sent."""
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"x")
    pair.pump()
    pair.client.abort(sid)
    pair.server.abort(sid)
    client_events, server_events = pair.pump()
    assert client_events == [SessionReleased(sid)]
    assert server_events == []
    assert pair.client.is_open and pair.server.is_open
    assert pair.server.session(sid) is None and pair.client.session(sid) is None


def test_data_crossing_a_client_abort_is_discarded() -> None:
    client = make_client()
    sid = client.open_session()
    client.send_data(sid, b"x")
    client.abort(sid)
    assert client.receive_data(C.Data(sid, b"late").encode(), 0) == []
    assert client.receive_data(C.Abort(sid, True).encode(), 0) == [SessionReleased(sid)]
    assert client.is_open


# -------------------------------------------------------------------------------------------
# §Close


def test_close_before_the_client_finished_is_answered_with_abort() -> None:
    """"the client must not consider the session to have failed; instead, it must provide the
    data received as the complete response ... the remainder of the request data ... should
    be silently discarded"."""
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"begin")
    pair.pump()
    pair.server.send_data(sid, b"enough", eof=True)
    pair.server.close(sid)
    client_events, _ = pair.pump()
    assert client_events == [DataReceived(sid, b"enough", eof=True),
                             SessionClosed(sid, request_complete=False), SessionReleased(sid)]
    assert pair.messages()[-2:] == [C.Close(sid), C.Abort(sid)]
    assert pair.server.session(sid) is None


def test_close_needs_the_session_finished_by_the_server() -> None:
    server = make_server()
    server.receive_data(C.Data(0, b"x", open=True).encode(), 0)
    with pytest.raises(LocalProtocolError, match="finished"):
        server.close(0)
    with pytest.raises(LocalProtocolError):
        make_client().close(0)


# -------------------------------------------------------------------------------------------
# §Acknowledgment and Data's ackRequired


def test_ack_required_and_acknowledgment() -> None:
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"req", eof=True)
    pair.pump()
    pair.server.send_data(sid, b"resp", eof=True, ack_required=True)
    client_events, _ = pair.pump()
    assert pair.messages("S") == [C.Data(sid, b"resp", eof=True, close=True, ack_required=True)]
    assert client_events == [DataReceived(sid, b"resp", eof=True, ack_required=True),
                             SessionClosed(sid, request_complete=True)]
    # River keeps the id until the Acknowledgment is sent
    assert pair.client.session(sid) is not None
    assert pair.client.open_session() == sid + 1
    pair.client.acknowledge(sid)
    _, server_events = pair.pump()
    assert server_events == [AcknowledgmentReceived(sid, positive=True)]
    assert pair.client.session(sid) is None  # released (a local call returns no events)
    with pytest.raises(LocalProtocolError):
        pair.client.acknowledge(sid)


def test_reopen_is_a_negative_acknowledgment() -> None:
    """"or the server receives a Data message with the open flag set and the same sessionID
    ... then that constitutes a negative acknowledgment"."""
    server = make_server()
    server.receive_data(C.Data(0, b"q", open=True, eof=True).encode(), 0)
    server.send_data(0, b"a", eof=True, ack_required=True)
    events = server.receive_data(C.Data(0, b"next", open=True).encode(), 0)
    assert events == [AcknowledgmentReceived(0, positive=False), SessionOpened(0),
                      DataReceived(0, b"next")]


def test_abort_is_a_negative_acknowledgment() -> None:
    server = make_server()
    server.receive_data(C.Data(0, b"q", open=True, eof=True).encode(), 0)
    server.send_data(0, b"a", eof=True, ack_required=True)
    assert server.receive_data(C.Abort(0).encode(), 0) == [
        AcknowledgmentReceived(0, positive=False)]
    assert server.session(0) is None


def test_connection_end_is_a_negative_acknowledgment() -> None:
    server = make_server()
    server.receive_data(C.Data(0, b"q", open=True, eof=True).encode(), 0)
    server.send_data(0, b"a", eof=True, ack_required=True)
    events = server.connection_lost("gone")
    assert events == [AcknowledgmentReceived(0, positive=False),
                      ConnectionTerminated("gone", by_peer=True)]


def test_ack_required_is_server_only_and_needs_eof() -> None:
    client = make_client()
    sid = client.open_session()
    with pytest.raises(LocalProtocolError):
        client.send_data(sid, b"x", eof=True, ack_required=True)
    server = make_server()
    server.receive_data(C.Data(0, b"q", open=True).encode(), 0)
    with pytest.raises(LocalProtocolError):
        server.send_data(0, b"x", ack_required=True)
    with pytest.raises(LocalProtocolError):
        server.acknowledge(0)


def test_client_abort_releases_an_id_held_for_acknowledgment() -> None:
    client = make_client()
    sid = client.open_session()
    client.send_data(sid, b"q", eof=True)
    client.receive_data(C.Data(sid, b"a", eof=True, close=True, ack_required=True).encode(), 0)
    assert client.session(sid).send is SessionState.FINISHED
    sent(client)
    client.abort(sid)
    assert sent(client) == []  # implicitly terminated already: no Abort on the wire
    assert client.session(sid) is None


def test_connection_lost_aborts_sessions_in_progress() -> None:
    client = make_client()
    a = client.open_session()
    b = client.open_session()
    c = client.open_session()
    client.send_data(a, b"1")
    client.send_data(b, b"2", eof=True)
    client.receive_data(C.Data(b, b"r", eof=True).encode(), 0)
    events = client.connection_lost("reset")
    assert events == [SessionAborted(a, True, "reset", by_peer=False),
                      SessionAborted(c, False, "reset", by_peer=False),
                      ConnectionTerminated("reset", by_peer=True)]
