"""The request hot paths of the sans-IO connection: request-response and fire-and-forget.

A request on an open, plain connection is built inline, and a request-response is held as a
bare stream id on both sides until answered. Everything else takes the general path: these
tests flip each input that decides it (state, graceful close, lease, resumption, frame
logger, message transport, frame size, metadata) and check that the general path is taken.
They also check that every spec path still works on a request held as a bare id (fragments,
ERROR, CANCEL, graceful close, the stream limit), and ``fire_and_forget_many``.
"""

from __future__ import annotations

import sys

import pytest

from rsocket_tx.core import errors as E
from rsocket_tx.core import frames as F
from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.connection import Role, RSocketConnection
from rsocket_tx.core.events import (
    CancelReceived,
    ConnectionClosed,
    ConnectionClosing,
    PayloadReceived,
    RequestReceived,
    StreamErrored,
)
from rsocket_tx.core.lease import Lease
from rsocket_tx.core.payload import Payload

from .conn_helpers import (
    Pair,
    decode_all,
    error_frames,
    hand_frame,
    make_client,
    make_server,
    sent,
    setup_frame,
    split_frames,
)


class Spied(RSocketConnection):
    """A connection that records the requests taking the general path once
    :func:`spy_general_path` armed it (a subclass: the compiled build's connection has no
    per-instance attributes to replace a method with)."""

    spy: list | None = None

    def _send_request(self, kind, payload, initial_n, complete=False):
        if self.spy is not None:
            self.spy.append(kind)
        return super()._send_request(kind, payload, initial_n, complete)


@pytest.fixture(autouse=True)
def spied_connections(monkeypatch) -> None:
    """Every connection these tests make (here and in conn_helpers) is a :class:`Spied`."""
    monkeypatch.setattr(sys.modules[make_client.__module__], "RSocketConnection", Spied)
    monkeypatch.setitem(globals(), "RSocketConnection", Spied)


def spy_general_path(conn: RSocketConnection, monkeypatch) -> list:
    """Record the requests that take the general path of ``conn`` (a :class:`Spied`)."""
    assert isinstance(conn, Spied)
    conn.spy = []
    return conn.spy


# ----------------------------------------------------------------------- when the hot path

@pytest.mark.parametrize("method", ["request_response", "fire_and_forget"])
def test_plain_open_connection_takes_the_hot_path(method, monkeypatch) -> None:
    pair = Pair()
    calls = spy_general_path(pair.client, monkeypatch)
    getattr(pair.client, method)(Payload(b"ping"))
    assert calls == []
    [event] = pair.to_server()
    assert isinstance(event, RequestReceived) and event.payload == Payload(b"ping")
    assert event.frame_type == (F.FrameType.REQUEST_RESPONSE if method == "request_response"
                                else F.FrameType.REQUEST_FNF)


def test_server_takes_the_hot_path_once_setup_arrived(monkeypatch) -> None:
    server = make_server()
    calls = spy_general_path(server, monkeypatch)
    with pytest.raises(E.LocalProtocolError, match="not established"):
        server.request_response(Payload(b"early"))
    assert len(calls) == 1  # before SETUP: the general path, which refuses
    client = make_client()
    server.receive_data(client.data_to_send())
    server.request_response(Payload(b"now"))
    assert len(calls) == 1  # open now: the hot path
    [event] = client.receive_data(server.data_to_send())
    assert isinstance(event, RequestReceived) and event.stream_id == 2


@pytest.mark.parametrize("method", ["request_response", "fire_and_forget"])
@pytest.mark.parametrize("flip", ["closed", "closing", "metadata", "large"])
def test_each_input_off_takes_the_general_path(method, flip, monkeypatch) -> None:
    pair = Pair()
    client = pair.client
    calls = spy_general_path(client, monkeypatch)
    payload = Payload(b"x")
    if flip == "closed":
        client.close()
    elif flip == "closing":
        client.request_response(Payload(b"outstanding"))  # keeps the close draining
        calls.clear()
        client.begin_close()
    elif flip == "metadata":
        payload = Payload(b"x", b"m")
    else:
        payload = Payload(b"x" * 20_000)  # past the size the hot path builds inline
    if flip in ("closed", "closing"):
        with pytest.raises(E.LocalProtocolError):
            getattr(client, method)(payload)
    else:
        getattr(client, method)(payload)
        events = pair.to_server()
        assert [e.payload for e in events if isinstance(e, RequestReceived)] == [payload]
    assert len(calls) == 1


@pytest.mark.parametrize("method", ["request_response", "fire_and_forget"])
def test_frame_size_limit_off_the_hot_path(method, monkeypatch) -> None:
    pair = Pair(client_config={"fragment_size": 64})
    calls = spy_general_path(pair.client, monkeypatch)
    getattr(pair.client, method)(Payload(b"y" * 200))
    assert len(calls) == 1
    frames = split_frames(pair.client.data_to_send())
    assert len(frames) > 1  # fragmented, as the general path does
    pair.client._out.clear()


@pytest.mark.parametrize("method", ["request_response", "fire_and_forget"])
def test_lease_takes_the_general_path(method, monkeypatch) -> None:
    pair = Pair(setup=setup_frame(lease=True))
    calls = spy_general_path(pair.client, monkeypatch)
    with pytest.raises(E.LeaseError):  # no LEASE yet: refused, nothing sent
        getattr(pair.client, method)(Payload(b"x"))
    assert len(calls) == 1 and pair.client.data_to_send() == b""
    pair.server.send_lease(Lease(ttl=10_000, number_of_requests=1))
    pair.to_client()
    getattr(pair.client, method)(Payload(b"x"))
    assert len(calls) == 2
    assert pair.client.lease_available() == 0


@pytest.mark.parametrize("method", ["request_response", "fire_and_forget"])
def test_resumption_takes_the_general_path(method, monkeypatch) -> None:
    client = make_client(setup_frame(resume_token=b"token"))
    client.data_to_send()
    calls = spy_general_path(client, monkeypatch)
    getattr(client, method)(Payload(b"kept"))
    assert len(calls) == 1
    assert client.resume_buffer is not None and len(client.resume_buffer) > 0


@pytest.mark.parametrize("method", ["request_response", "fire_and_forget"])
def test_frame_logger_takes_the_general_path(method, monkeypatch) -> None:
    logged: list = []
    client = RSocketConnection(Role.CLIENT, ConnectionConfig(), setup=setup_frame(),
                               frame_logger=lambda direction, frame: logged.append(frame))
    calls = spy_general_path(client, monkeypatch)
    getattr(client, method)(Payload(b"seen"))
    assert len(calls) == 1
    assert [type(f) for f in logged] == [F.SetupFrame, (
        F.RequestResponseFrame if method == "request_response" else F.RequestFnfFrame)]


@pytest.mark.parametrize("method", ["request_response", "fire_and_forget"])
def test_message_transport_takes_the_general_path(method, monkeypatch) -> None:
    client = RSocketConnection(Role.CLIENT, ConnectionConfig(length_prefixed=False),
                               setup=setup_frame())
    client.frames_to_send()
    calls = spy_general_path(client, monkeypatch)
    getattr(client, method)(Payload(b"message"))
    assert len(calls) == 1
    [frame] = client.frames_to_send()  # one whole frame, no length prefix
    assert F.decode(frame).data == b"message"


# ------------------------------------------------------- a request-response held as a bare id

def test_bare_request_response_counts_as_an_open_stream_on_both_sides() -> None:
    pair = Pair()
    sid = pair.client.request_response(Payload(b"q"))
    assert pair.client.has_stream(sid) and pair.client.stream_count == 1
    pair.to_server()
    assert pair.server.has_stream(sid) and pair.server.stream_count == 1
    assert pair.server.peer_stream_count == 1
    assert pair.server.send_response(sid, Payload(b"a"))
    assert not pair.server.has_stream(sid) and pair.server.stream_count == 0
    [event] = pair.to_client()
    assert isinstance(event, PayloadReceived)
    assert (event.stream_id, event.payload, event.complete) == (sid, Payload(b"a"), True)
    assert not pair.client.has_stream(sid) and pair.client.stream_count == 0


def test_fragmented_answer_to_a_bare_request() -> None:
    pair = Pair(server_config={"fragment_size": 64})
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    big = Payload(b"z" * 500, b"meta")
    assert pair.server.send_response(sid, big)
    data = pair.server.data_to_send()
    assert len(split_frames(data)) > 1
    [event] = pair.client.receive_data(data)
    assert isinstance(event, PayloadReceived) and event.payload == big and event.complete
    assert pair.client.stream_count == 0 and pair.server.stream_count == 0


@pytest.mark.parametrize("metadata", [None, b"m"])
def test_answer_with_and_without_metadata(metadata) -> None:
    pair = Pair()
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    pair.server.send_response(sid, Payload(b"a", metadata))
    [event] = pair.to_client()
    assert event.payload == Payload(b"a", metadata)


def test_error_on_a_bare_request() -> None:
    pair = Pair()
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    pair.server.send_error(sid, E.ApplicationError("no"))
    assert pair.server.stream_count == 0
    [event] = pair.to_client()
    assert isinstance(event, StreamErrored) and event.stream_id == sid
    assert isinstance(event.error, E.ApplicationError) and event.error.message == "no"
    assert pair.client.stream_count == 0


def test_cancel_of_a_bare_request() -> None:
    pair = Pair()
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    pair.client.send_cancel(sid)
    assert pair.client.stream_count == 0
    [event] = pair.to_client() or pair.to_server()
    assert isinstance(event, CancelReceived) and event.stream_id == sid
    assert pair.server.stream_count == 0
    # the answer that crossed the CANCEL: nothing sent, and a late one would be ignored
    assert pair.server.send_response(sid, Payload(b"late")) is False
    assert pair.server.data_to_send() == b""
    late = F.PayloadFrame(stream_id=sid, data=b"late", next=True, complete=True)
    assert pair.client.receive_data(len(F.encode(late)).to_bytes(3, "big") +
                                    F.encode(late)) == []


@pytest.mark.parametrize("closing", ["requester", "responder"])
def test_graceful_close_waits_for_the_answer(closing) -> None:
    pair = Pair()
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    conn = pair.client if closing == "requester" else pair.server
    events = conn.begin_close()
    assert [type(e) for e in events] == [ConnectionClosing]
    assert events[0].open_streams == 1 and conn.is_open
    with pytest.raises(E.LocalProtocolError, match="closing"):
        conn.request_response(Payload(b"refused"))
    assert pair.server.send_response(sid, Payload(b"a"))
    if closing == "responder":
        assert [type(e) for e in pair.server.pending_events()] == [ConnectionClosed]
    events = pair.to_client()
    assert [type(e) for e in events] == [PayloadReceived, ConnectionClosed]
    assert not pair.client.is_open


def test_connection_close_forgets_bare_requests() -> None:
    pair = Pair()
    pair.client.request_response(Payload(b"q"))
    pair.to_server()
    [closed] = pair.client.close(E.ConnectionError("bye"))
    assert isinstance(closed, ConnectionClosed) and pair.client.stream_count == 0
    [closed] = pair.to_server()
    assert isinstance(closed, ConnectionClosed)
    assert not pair.server.is_open and pair.server.stream_count == 0


def test_bare_requests_count_against_max_concurrent_streams() -> None:
    pair = Pair(server_config={"max_concurrent_streams": 1})
    first = pair.client.request_response(Payload(b"1"))
    second = pair.client.request_response(Payload(b"2"))
    [event] = pair.to_server()
    assert event.stream_id == first
    [refusal] = error_frames(sent(pair.server))
    assert refusal.stream_id == second and refusal.error_code == E.ErrorCode.REJECTED
    assert pair.server.peer_stream_count == 1
    pair.server.send_response(first, Payload(b"a"))
    pair.to_client()
    third = pair.client.request_response(Payload(b"3"))
    [event] = pair.to_server()
    assert event.stream_id == third


def test_request_on_the_id_of_a_bare_request_is_ignored() -> None:
    pair = Pair()
    pair.client.request_response(Payload(b"q"))
    data = pair.client.data_to_send()
    assert len(pair.server.receive_data(data)) == 1
    assert pair.server.receive_data(data) == []  # the same id again: ignored (spec)


def test_request_n_and_payload_on_a_bare_request_are_ignored() -> None:
    pair = Pair()
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    for frame in (F.RequestNFrame(stream_id=sid, request_n=5),
                  F.PayloadFrame(stream_id=sid, data=b"from the requester", next=True)):
        encoded = F.encode(frame)
        assert pair.server.receive_data(len(encoded).to_bytes(3, "big") + encoded) == []
    assert pair.server.send_response(sid, Payload(b"a"))
    [event] = pair.to_client()
    assert event.payload == Payload(b"a")


def test_sending_on_our_own_bare_request_is_refused() -> None:
    pair = Pair()
    sid = pair.client.request_response(Payload(b"q"))
    with pytest.raises(E.LocalProtocolError, match="already complete"):
        pair.client.send_payload(sid, Payload(b"no"))
    with pytest.raises(E.LocalProtocolError, match="already complete"):
        pair.client.send_response(sid, Payload(b"no"))
    assert pair.client.credit(sid) == 0


def test_send_response_falls_back_for_other_streams() -> None:
    pair = Pair()
    assert pair.server.send_response(99, Payload(b"x")) is False  # unknown stream
    sid = pair.client.request_stream(Payload(b"s"), 1)
    pair.to_server()
    assert pair.server.send_response(sid, Payload(b"item"))  # N|C on a stream: the last item
    [event] = pair.to_client()
    assert event.complete and event.payload == Payload(b"item")


# ------------------------------------------------------- a fire-and-forget received inline

@pytest.mark.parametrize("sid", [0, 2])  # stream 0; an id of the server's own parity
def test_fire_and_forget_on_an_id_the_peer_may_not_open_is_ignored(sid) -> None:
    pair = Pair()
    assert pair.server.receive_data(hand_frame(sid, F.FrameType.REQUEST_FNF, 0, b"x")) == []


def test_fire_and_forget_on_an_id_in_use_is_ignored() -> None:
    pair = Pair()
    rr = pair.client.request_response(Payload(b"q"))
    stream = pair.client.request_stream(Payload(b"s"), 1)
    pair.to_server()
    for sid in (rr, stream):
        assert pair.server.receive_data(hand_frame(sid, F.FrameType.REQUEST_FNF, 0, b"x")) == []
    [event] = pair.server.receive_data(hand_frame(99, F.FrameType.REQUEST_FNF, 0, b"y"))
    assert isinstance(event, RequestReceived) and event.payload == Payload(b"y")


def test_fire_and_forget_during_a_graceful_close_is_refused() -> None:
    pair = Pair()
    pair.client.request_response(Payload(b"q"))  # keeps the close draining
    pair.to_server()
    pair.server.begin_close()
    assert pair.server.receive_data(hand_frame(99, F.FrameType.REQUEST_FNF, 0, b"x")) == []
    [refusal] = error_frames(sent(pair.server))
    assert refusal.stream_id == 99 and refusal.error_code == E.ErrorCode.REJECTED


def test_fire_and_forget_past_the_lease_is_refused() -> None:
    pair = Pair(setup=setup_frame(lease=True))
    pair.server.send_lease(Lease(ttl=10_000, number_of_requests=1))
    pair.to_client()
    pair.server.data_to_send()
    fnf = [hand_frame(sid, F.FrameType.REQUEST_FNF, 0, b"x") for sid in (1, 3)]
    events = pair.server.receive_data(b"".join(fnf))
    assert [e.stream_id for e in events] == [1]
    [refusal] = error_frames(sent(pair.server))
    assert refusal.stream_id == 3 and refusal.error_code == E.ErrorCode.REJECTED


# ----------------------------------------------------------------------- fire_and_forget_many

def test_fire_and_forget_many_sends_what_one_by_one_sends() -> None:
    payloads = [Payload(b"a"), Payload(b"b", b"meta"), Payload(b"c" * 20_000), Payload(b""),
                Payload(b"d")]
    one, many = make_client(), make_client()
    one.data_to_send()
    many.data_to_send()
    for payload in payloads:
        one.fire_and_forget(payload)
    assert many.fire_and_forget_many(payloads) == len(payloads)
    expected = one.data_to_send()
    assert many.data_to_send() == expected
    frames = decode_all(expected)
    assert [f.stream_id for f in frames] == [1, 3, 5, 7, 9]
    assert all(isinstance(f, F.RequestFnfFrame) for f in frames)


def test_fire_and_forget_many_reaches_the_responder_in_order() -> None:
    pair = Pair()
    pair.client.fire_and_forget_many(Payload(b"%d" % i) for i in range(5))
    events = pair.to_server()
    assert [e.payload.data for e in events] == [b"0", b"1", b"2", b"3", b"4"]
    assert pair.server.stream_count == 0 and pair.client.stream_count == 0


def test_fire_and_forget_many_through_a_subclass_sends_one_by_one() -> None:
    seen: list = []

    class Observed(RSocketConnection):
        def fire_and_forget(self, payload: Payload) -> int:
            seen.append(payload)
            return super().fire_and_forget(payload)

    client = Observed(Role.CLIENT, ConnectionConfig(), setup=setup_frame())
    client.data_to_send()
    payloads = [Payload(b"1"), Payload(b"2")]
    assert client.fire_and_forget_many(payloads) == 2
    assert seen == payloads
    assert len(decode_all(client.data_to_send())) == 2


def test_fire_and_forget_many_stops_where_the_lease_runs_out() -> None:
    pair = Pair(setup=setup_frame(lease=True))
    pair.server.send_lease(Lease(ttl=10_000, number_of_requests=2))
    pair.to_client()
    with pytest.raises(E.LeaseError):
        pair.client.fire_and_forget_many([Payload(b"1"), Payload(b"2"), Payload(b"3")])
    events = pair.to_server()
    assert [e.payload.data for e in events if isinstance(e, RequestReceived)] == [b"1", b"2"]


def test_fire_and_forget_many_on_a_closed_connection() -> None:
    client = make_client()
    client.close()
    with pytest.raises(E.LocalProtocolError, match="closed"):
        client.fire_and_forget_many([Payload(b"x")])
