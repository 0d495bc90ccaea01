"""RSocketConnection: connection establishment (spec §Connection Establishment, §SETUP Frame,
§Resume Operation, §Handling the Unexpected items about SETUP and setup errors).

"Immediately upon successful connection, the client MUST send either a SETUP or RESUME frame
with Stream ID of 0. Any other frame received that is NOT a SETUP|RESUME frame or a
SETUP|RESUME frame with a Stream ID > 0, MUST cause the server to send an ERROR[INVALID_SETUP]
and close the connection."
"""

from __future__ import annotations

import pytest

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import (
    ConnectionError,
    ErrorCode,
    InvalidSetupError,
    RejectedResumeError,
    RejectedSetupError,
    RSocketError,
)
from rsocket_tx.core.events import ConnectionClosed, RequestReceived, SetupReceived
from rsocket_tx.core.payload import Payload

from .conn_helpers import (
    DATA_MIME,
    KEEPALIVE_MS,
    LIFETIME_MS,
    METADATA_MIME,
    Pair,
    feed_bytewise,
    make_client,
    make_server,
    sent,
    setup_frame,
    wire,
    with_stream_id,
)

SETUP_ERROR_CODES = [
    ErrorCode.INVALID_SETUP,
    ErrorCode.UNSUPPORTED_SETUP,
    ErrorCode.REJECTED_SETUP,
    ErrorCode.REJECTED_RESUME,
]


def _closed_with_only_error(conn, events, code: int) -> F.ErrorFrame:
    """Assert ``conn`` closed (one ConnectionClosed) after sending exactly one ERROR[code]."""
    assert [type(e) for e in events] == [ConnectionClosed]
    assert not conn.is_open
    frames = sent(conn)
    assert len(frames) == 1
    (err,) = frames
    assert isinstance(err, F.ErrorFrame)
    assert err.stream_id == 0
    assert err.error_code == code
    return err


# ---------------------------------------------------------------------------------------------
# the client's side
# ---------------------------------------------------------------------------------------------


def test_client_first_output_is_exactly_one_setup() -> None:
    client = make_client(setup_frame())
    frames = sent(client)
    assert len(frames) == 1
    (setup,) = frames
    assert isinstance(setup, F.SetupFrame)
    assert setup.stream_id == 0
    assert (setup.major_version, setup.minor_version) == (1, 0)
    assert setup.keepalive_interval == KEEPALIVE_MS
    assert setup.max_lifetime == LIFETIME_MS
    assert setup.metadata_mime_type == METADATA_MIME
    assert setup.data_mime_type == DATA_MIME
    assert setup.data == b"setup-data"
    assert setup.metadata == b"setup-meta"
    assert setup.resume_token is None and not setup.lease
    assert client.data_to_send() == b""


def test_client_requests_sent_before_an_answer_follow_the_setup() -> None:
    # "The client-side Requester that has NOT set the L flag in the SETUP frame may send
    # requests immediately" -- but SETUP stays first on the wire.
    client = make_client()
    client.request_response(Payload(b"q"))
    frames = sent(client)
    assert [type(f) for f in frames] == [F.SetupFrame, F.RequestResponseFrame]


def test_client_ignores_setup() -> None:
    # "A client MUST ignore a SETUP frame."
    client = make_client()
    client.data_to_send()
    events = feed_bytewise(client, wire(setup_frame(major_version=7)))
    assert events == []
    assert client.is_open
    assert client.data_to_send() == b""


@pytest.mark.parametrize("code", SETUP_ERROR_CODES, ids=lambda c: c.name)
def test_client_setup_error_before_establishment_is_fatal(code: int) -> None:
    # "A client assumes a SETUP is rejected if it receives an ERROR."
    client = make_client()
    sid = client.request_response(Payload(b"q"))
    client.data_to_send()
    events = client.receive_data(wire(F.ErrorFrame(stream_id=0, error_code=code, data=b"no")))
    assert len(events) == 1
    (closed,) = events
    assert isinstance(closed, ConnectionClosed)
    assert closed.by_peer
    assert closed.error.error_code == code
    assert closed.error.message == "no"
    assert not client.is_open
    assert not client.has_stream(sid)


def _establish_by_response(pair: Pair) -> None:
    sid = pair.client.request_response(Payload(b"q"))
    pair.to_server()
    pair.server.send_payload(sid, Payload(b"a"))
    pair.to_client()


def _establish_by_request(pair: Pair) -> None:
    pair.server.fire_and_forget(Payload(b"hello client"))
    events = pair.to_client()
    assert [type(e) for e in events] == [RequestReceived]


def _establish_by_lease(pair: Pair) -> None:
    pair.client.receive_data(wire(F.LeaseFrame(ttl=1000, number_of_requests=5)))


@pytest.mark.parametrize("code", SETUP_ERROR_CODES, ids=lambda c: c.name)
@pytest.mark.parametrize("establish", [_establish_by_response, _establish_by_request,
                                       _establish_by_lease],
                         ids=["after-response", "after-request", "after-lease"])
def test_client_ignores_setup_errors_after_establishment(establish, code: int) -> None:
    # "A client assumes a SETUP is accepted if it receives a response to a request, a LEASE
    # frame, or if it sees a REQUEST type."  "A client MUST ignore an ERROR[INVALID_SETUP|
    # UNSUPPORTED_SETUP|REJECTED_SETUP|REJECTED_RESUME] frame after it has completed connection
    # establishment."
    pair = Pair()
    establish(pair)
    pair.client.data_to_send()
    sid = pair.client.request_stream(Payload(b"s"), 1)
    pair.client.data_to_send()
    events = pair.client.receive_data(
        wire(F.ErrorFrame(stream_id=0, error_code=code, data=b"late")))
    assert events == []
    assert pair.client.is_open
    assert pair.client.has_stream(sid)
    assert pair.client.data_to_send() == b""


# ---------------------------------------------------------------------------------------------
# the server's side
# ---------------------------------------------------------------------------------------------


def test_server_emits_setup_received_with_the_clients_setup() -> None:
    setup = setup_frame(data=b"hello", metadata=b"")
    server = make_server()
    assert server.is_open and not server.is_established  # waiting for SETUP
    events = feed_bytewise(server, wire(setup))
    assert events == [SetupReceived(setup)]
    assert server.is_open and server.is_established
    assert server.data_to_send() == b""  # accepting a SETUP needs no answer (no LEASE)


def test_server_handles_requests_that_follow_setup_at_once() -> None:
    # Sequences without LEASE: "Client connects & sends SETUP & sends REQUEST; Server accepts
    # SETUP, handles REQUEST".
    pair = Pair(establish=False)
    sid = pair.client.request_response(Payload(b"q"))
    events = pair.to_server()
    assert [type(e) for e in events] == [SetupReceived, RequestReceived]
    assert events[1].stream_id == sid


def test_server_may_request_immediately_after_accepting_setup() -> None:
    # "The server-side Requester may send requests immediately upon receiving a SETUP frame
    # that it accepts if the L flag is not set"
    pair = Pair()
    sid = pair.server.request_response(Payload(b"from server"))
    events = pair.to_client()
    assert [type(e) for e in events] == [RequestReceived]
    assert events[0].stream_id == sid


def test_reject_setup_sends_rejected_setup_with_reason_and_closes() -> None:
    pair = Pair(establish=False)
    pair.client.request_response(Payload(b"q"))
    pair.to_server()
    events = pair.server.reject_setup(RejectedSetupError("go away: no tenant"))
    err = _closed_with_only_error(pair.server, events, ErrorCode.REJECTED_SETUP)
    assert err.data == b"go away: no tenant"
    # the client sees the rejection as fatal, with the server's reason
    client_events = pair.client.receive_data(wire(err))
    assert len(client_events) == 1
    closed = client_events[0]
    assert isinstance(closed, ConnectionClosed) and closed.by_peer
    assert isinstance(closed.error, RejectedSetupError)
    assert closed.error.message == "go away: no tenant"
    assert not pair.client.is_open


@pytest.mark.parametrize("first", [
    F.RequestResponseFrame(stream_id=1, data=b"q"),
    F.RequestFnfFrame(stream_id=1, data=b"q"),
    F.KeepaliveFrame(respond=True),
    F.MetadataPushFrame(metadata=b"m"),
    F.ErrorFrame(stream_id=0, error_code=ErrorCode.CONNECTION_CLOSE, data=b"bye"),
    F.LeaseFrame(ttl=10, number_of_requests=1),
], ids=lambda f: type(f).__name__)
def test_first_frame_not_setup_is_invalid_setup(first) -> None:
    server = make_server()
    events = feed_bytewise(server, wire(first))
    err = _closed_with_only_error(server, events, ErrorCode.INVALID_SETUP)
    assert err.data  # a reason
    assert isinstance(events[0].error, InvalidSetupError)
    # and the SETUP that follows is not looked at
    assert server.receive_data(wire(setup_frame())) == []
    assert server.data_to_send() == b""


def test_setup_on_nonzero_stream_id_is_invalid_setup() -> None:
    server = make_server()
    events = feed_bytewise(server, with_stream_id(wire(setup_frame()), 1))
    _closed_with_only_error(server, events, ErrorCode.INVALID_SETUP)
    assert not any(isinstance(e, SetupReceived) for e in events)


def test_setup_version_2_0_is_invalid_setup() -> None:
    # spec §Error Codes: INVALID_SETUP "The Setup frame is invalid for the server (it could be
    # that the client is too recent for the old server)"; rsocket-java answers the same
    server = make_server()
    events = server.receive_data(wire(setup_frame(major_version=2, minor_version=0)))
    err = _closed_with_only_error(server, events, ErrorCode.INVALID_SETUP)
    assert b"version 2.0" in err.data
    assert isinstance(events[0].error, InvalidSetupError)


def test_setup_version_0_2_is_accepted() -> None:
    setup = setup_frame(major_version=0, minor_version=2)
    server = make_server()
    assert server.receive_data(wire(setup)) == [SetupReceived(setup)]
    assert server.is_open
    assert server.data_to_send() == b""


def test_setup_with_resume_flag_is_rejected_setup() -> None:
    # "A server that receives a SETUP frame that has (R)esume Enabled set, but does not
    # support resuming operation, MUST reject the SETUP with an ERROR[REJECTED_SETUP]."
    # (the L flag is honoured: tests/core/test_lease.py)
    server = make_server()
    events = server.receive_data(wire(setup_frame(resume_token=b"token-1")))
    err = _closed_with_only_error(server, events, ErrorCode.REJECTED_SETUP)
    assert err.data
    assert isinstance(events[0].error, RejectedSetupError)


def test_resume_as_first_frame_is_rejected_resume() -> None:
    # "On receiving a RESUME frame, the server: MUST send an ERROR[REJECTED_RESUME] frame if
    # the server does not support resuming operation."
    server = make_server()
    resume = F.ResumeFrame(token=b"tok", last_received_server_position=0,
                           first_available_client_position=0)
    events = feed_bytewise(server, wire(resume))
    _closed_with_only_error(server, events, ErrorCode.REJECTED_RESUME)
    assert isinstance(events[0].error, RejectedResumeError)


def test_resume_after_setup_is_connection_error() -> None:
    # "A Server that receives a RESUME frame after a SETUP frame, SHOULD send an
    # ERROR[CONNECTION_ERROR]."
    pair = Pair()
    resume = F.ResumeFrame(token=b"tok", last_received_server_position=0,
                           first_available_client_position=0)
    events = pair.server.receive_data(wire(resume))
    _closed_with_only_error(pair.server, events, ErrorCode.CONNECTION_ERROR)


def test_setup_timeout_closes_the_server() -> None:
    server = make_server(now=100.0, setup_timeout=2_000)
    assert server.tick(101.999) == []
    assert server.is_open
    events = server.tick(102.0)
    assert [type(e) for e in events] == [ConnectionClosed]
    assert not server.is_open
    assert isinstance(events[0].error, RSocketError)
    # nothing is accepted any more
    assert server.receive_data(wire(setup_frame())) == []


def test_setup_before_timeout_stops_the_setup_timer() -> None:
    server = make_server(now=0.0, setup_timeout=2_000)
    server.tick(1.0)
    assert [type(e) for e in server.receive_data(wire(setup_frame()))] == [SetupReceived]
    server.tick(1.5)
    assert server.receive_data(wire(F.KeepaliveFrame(respond=False))) == []
    assert server.tick(2.5) == []
    assert server.is_open


def test_server_ignores_a_second_setup() -> None:
    # "A server MUST ignore a SETUP frame after it has accepted a previous SETUP."
    pair = Pair()
    for second in (setup_frame(data=b"again"), setup_frame(major_version=2),
                   setup_frame(resume_token=b"x")):
        events = pair.server.receive_data(wire(second))
        assert events == []
        assert pair.server.is_open
        assert pair.server.data_to_send() == b""
    assert pair.server.setup == setup_frame()


@pytest.mark.parametrize("code", SETUP_ERROR_CODES, ids=lambda c: c.name)
def test_server_ignores_setup_errors(code: int) -> None:
    # "A server MUST ignore an ERROR[INVALID_SETUP|UNSUPPORTED_SETUP|REJECTED_SETUP|
    # REJECTED_RESUME] frame."
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 4)
    pair.to_server()
    events = pair.server.receive_data(wire(F.ErrorFrame(stream_id=0, error_code=code)))
    assert events == []
    assert pair.server.is_open
    assert pair.server.has_stream(sid)
    assert pair.server.data_to_send() == b""


def test_connection_error_from_the_peer_closes_without_answer() -> None:
    pair = Pair()
    events = pair.server.receive_data(
        wire(F.ErrorFrame(stream_id=0, error_code=ErrorCode.CONNECTION_ERROR, data=b"boom")))
    assert len(events) == 1
    assert isinstance(events[0], ConnectionClosed) and events[0].by_peer
    assert isinstance(events[0].error, ConnectionError)
    assert events[0].error.message == "boom"
    assert pair.server.data_to_send() == b""
