"""Jini ERI Multiplexing Protocol §Sessions: §Session Establishment, §Session Termination and
the reuse of session identifiers, driven with two sans-IO connections."""

from __future__ import annotations

import pytest

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.connection import SessionState
from rsocket_tx.jini.errors import LocalProtocolError, NoFreeSessionError
from rsocket_tx.jini.events import (
    DataReceived,
    SessionAborted,
    SessionClosed,
    SessionOpened,
    SessionReleased,
)

from .conn_helpers import Pair, assert_violation, make_server, sent

# -------------------------------------------------------------------------------------------
# §Session Establishment


def test_first_data_opens_the_session_lazily() -> None:
    """"To establish a new session, the client sends a Data message with the open flag set";
    River sends nothing until the first data."""
    pair = Pair()
    sid = pair.client.open_session()
    assert sid == 0 and pair.client.session(sid).send is SessionState.IDLE
    pair.pump()
    assert pair.messages() == []
    pair.client.send_data(sid, b"abc")
    _, events = pair.pump()
    assert pair.messages("C") == [C.Data(0, b"abc", open=True)]
    assert events == [SessionOpened(0), DataReceived(0, b"abc")]
    assert pair.server.session(0).recv is SessionState.ESTABLISHED


def test_open_and_eof_in_one_message_river_echo() -> None:
    """"a session can become both established and finished from a single Data message"; the
    server's last Data then carries eof+close (MUX-PROTOCOLS.md's 15-byte echo)."""
    pair = Pair()
    sid = pair.client.open_session()
    body = b"fifteen bytes!!"
    assert pair.client.send_data(sid, body, eof=True) == 15
    _, events = pair.pump()
    assert events == [SessionOpened(0), DataReceived(0, body, eof=True)]
    assert pair.server.session(0).recv is SessionState.FINISHED
    pair.server.send_data(0, body, eof=True)
    events, _ = pair.pump()
    assert pair.messages() == [C.Data(0, body, open=True, eof=True),
                               C.Data(0, body, eof=True, close=True)]
    assert events == [DataReceived(0, body, eof=True), SessionClosed(0, request_complete=True),
                      SessionReleased(0)]
    assert pair.client.session_count == 0 and pair.server.active_sessions == 0


def test_empty_send_opens_the_session() -> None:
    pair = Pair()
    sid = pair.client.open_session()
    assert pair.client.send_data(sid, b"") == 0
    _, events = pair.pump()
    assert pair.messages("C") == [C.Data(0, b"", open=True)]
    assert events == [SessionOpened(0)]


def test_lowest_free_id_and_the_128_limit() -> None:
    """"there can be at most 128 sessions concurrently established over one connection"."""
    pair = Pair()
    ids = [pair.client.open_session() for _ in range(128)]
    assert ids == list(range(128))
    assert not pair.client.can_open_session
    with pytest.raises(NoFreeSessionError):
        pair.client.open_session()
    for sid in ids:
        pair.client.send_data(sid, bytes([sid]), eof=True)
    _, events = pair.pump()
    assert sum(isinstance(e, SessionOpened) for e in events) == 128
    # free 5 and 70: the next open takes 5, then 70
    for sid in (70, 5):
        pair.server.send_data(sid, b"", eof=True)
    pair.pump()
    assert pair.client.open_session() == 5
    assert pair.client.open_session() == 70


def test_max_sessions_setting_on_the_client() -> None:
    pair = Pair(client={"max_sessions": 2})
    pair.client.open_session()
    pair.client.open_session()
    with pytest.raises(NoFreeSessionError):
        pair.client.open_session()


def test_server_refuses_sessions_past_its_limit_without_partial() -> None:
    """A server with max_sessions 1 refuses the second session with an Abort without the
    partial flag: nothing was processed, the client may retry it."""
    pair = Pair(server={"max_sessions": 1})
    a = pair.client.open_session()
    b = pair.client.open_session()
    pair.client.send_data(a, b"one")
    pair.client.send_data(b, b"two")
    client_events, server_events = pair.pump()
    assert server_events == [SessionOpened(a), DataReceived(a, b"one")]
    assert client_events == [SessionAborted(b, partial=False, detail="more than 1 sessions",
                                            by_peer=True), SessionReleased(b)]
    # the client answered the Abort with its own; both ends forgot the session
    assert C.Abort(b) in pair.messages("C")
    assert pair.server.session(b) is None and pair.client.session(b) is None


def test_server_cannot_open_sessions() -> None:
    server = make_server()
    with pytest.raises(LocalProtocolError, match="only the client"):
        server.open_session()


# -------------------------------------------------------------------------------------------
# §Session Termination and id reuse


def request_on_session_zero(pair: Pair, request: bytes, response: bytes) -> list:
    """The client opens a session, which must get id 0, sends ``request`` with eof; the
    server answers ``response`` with eof. Returns the client's events of the answer."""
    sid = pair.client.open_session()
    assert sid == 0
    pair.client.send_data(sid, request, eof=True)
    pair.pump()
    pair.server.send_data(sid, response, eof=True)
    events, _ = pair.pump()
    return events


def test_id_not_reused_until_terminated_with_respect_to_the_server() -> None:
    """The client may re-use an id only after the session is terminated with respect to the
    server (and the client finished or aborted)."""
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"req", eof=True)
    pair.pump()
    # finished by the client, not yet terminated by the server: the id stays busy
    assert pair.client.open_session() == 1
    pair.server.send_data(sid, b"resp", eof=True)  # eof + close
    events, _ = pair.pump()
    assert SessionReleased(sid) in events
    assert pair.client.open_session() == sid


def test_server_close_after_eof_when_client_finishes_later() -> None:
    """The server finishes first; when the client's eof arrives the server sends Close
    "in a timely fashion", and the id is released."""
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"part")
    pair.pump()
    pair.server.send_data(sid, b"answer", eof=True)
    pair.pump()
    assert pair.messages("S") == [C.Data(sid, b"answer", eof=True)]
    assert pair.server.session(sid).send is SessionState.FINISHED
    pair.client.send_data(sid, b"", eof=True)
    client_events, server_events = pair.pump()
    assert server_events == [DataReceived(sid, b"", eof=True)]
    assert pair.messages("S")[-1] == C.Close(sid)
    assert client_events == [SessionClosed(sid, request_complete=True), SessionReleased(sid)]


def test_reuse_after_implicit_termination_on_the_server() -> None:
    """"after it is terminated with respect to the server and the client has sent a Data
    message with the eof flag set ... the previous session ... becomes implicitly
    terminated": a new open for that id is accepted by the server."""
    pair = Pair()
    for round_ in range(3):
        events = request_on_session_zero(pair, b"r%d" % round_, b"a%d" % round_)
        assert events[-1] == SessionReleased(0)
    opened = [e for e in pair.server_events if isinstance(e, SessionOpened)]
    assert opened == [SessionOpened(0)] * 3


def test_server_keeps_a_closed_session_until_the_client_reuses_it() -> None:
    """Hand-driven server: after its Close the session lingers (terminated w.r.t. the server,
    finished by the client); a new open replaces it; an open of a still-established session
    is a violation."""
    server = make_server()
    server.receive_data(C.Data(3, b"x", open=True, eof=True).encode(), 0)
    server.send_data(3, b"y", eof=True)
    assert sent(server) == [C.Data(3, b"y", eof=True, close=True)]
    assert server.session(3).send is SessionState.TERMINATED
    events = server.receive_data(C.Data(3, b"again", open=True).encode(), 0)
    assert events == [SessionOpened(3), DataReceived(3, b"again")]
    events = server.receive_data(C.Data(3, b"bad", open=True).encode(), 0)
    assert_violation(server, events, "still established")


def test_1000_sequential_sessions_reuse_id_zero() -> None:
    pair = Pair()
    for i in range(1000):
        request_on_session_zero(pair, b"%d" % i, b"ok")
    assert pair.client.session_count == 0 and pair.server.active_sessions == 0
    assert pair.server.session_count == 1  # kept after its Close until the id is reused
    assert sum(isinstance(e, SessionReleased) for e in pair.client_events) == 1000


def test_abort_on_idle_session_sends_nothing() -> None:
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.abort(sid)
    pair.pump()
    assert pair.messages() == []
    assert pair.client.open_session() == sid


def test_session_state_after_client_abort() -> None:
    """"A session is terminated with respect to the client after the client has sent an
    Abort"; the id is free once the server's answering Abort arrives."""
    pair = Pair()
    sid = pair.client.open_session()
    pair.client.send_data(sid, b"x")
    pair.pump()
    pair.client.abort(sid, detail="changed my mind")
    assert pair.client.session(sid).send is SessionState.TERMINATED
    assert pair.client.open_session() == 1  # still busy
    client_events, server_events = pair.pump()
    assert server_events == [SessionAborted(sid, partial=False, detail="changed my mind",
                                            by_peer=True)]
    assert pair.messages() == [C.Data(sid, b"x", open=True),
                               C.Abort(sid, False, b"changed my mind"),
                               C.Abort(sid, True)]
    assert client_events == [SessionReleased(sid)]
    with pytest.raises(LocalProtocolError):
        pair.client.send_data(sid, b"more")
