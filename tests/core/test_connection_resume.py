"""Resumption in the sans-IO core (spec §Resuming Operation): implied positions, the resume
buffer trimmed by KEEPALIVE, detaching, the RESUME / RESUME_OK handshake with retransmission,
and every way it is refused. A "cut" drops whatever was in flight, possibly in the middle of a
frame, as a dead transport does."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.core import errors as E
from rsocket_tx.core import frames as F
from rsocket_tx.core.events import (
    ConnectionClosed,
    ConnectionDetached,
    ConnectionResumed,
    PayloadReceived,
    RequestReceived,
    ResumeReceived,
    SetupReceived,
)
from rsocket_tx.core.payload import Payload
from rsocket_tx.core.resume import is_positioned

from .conn_helpers import (
    KEEPALIVE_MS,
    LIFETIME_MS,
    decode_all,
    error_frames,
    feed_bytewise,
    make_client,
    make_server,
    sent,
    setup_frame,
    split_frames,
    wire,
)

TOKEN = bytes(range(16))
SESSION_MS = 30_000


def positioned(data: bytes) -> int:
    return sum(len(f) for f in split_frames(data) if is_positioned(f))


class Session:
    """A resumable client and server, and the transports between them (no I/O)."""

    def __init__(self, client_config=None, server_config=None, token=TOKEN):
        self.now = 0.0
        self.client = make_client(setup_frame(resume_token=token), **(client_config or {}))
        self.server = make_server(resume=True, **(server_config or {}))
        events = self.server.receive_data(self.client.data_to_send(), self.now)
        assert [type(e) for e in events] == [SetupReceived]
        assert self.client.is_resumable and self.server.is_resumable

    def to_server(self):
        return self.server.receive_data(self.client.data_to_send(), self.now)

    def to_client(self):
        return self.client.receive_data(self.server.data_to_send(), self.now)

    def cut(self, deliver_to_client: int = 0, deliver_to_server: int = 0):
        """The transport dies: only the first bytes of what each side sent arrive."""
        c2s, s2c = self.client.data_to_send(), self.server.data_to_send()
        events = []
        if deliver_to_server:
            events += self.server.receive_data(c2s[:deliver_to_server], self.now)
        if deliver_to_client:
            events += self.client.receive_data(s2c[:deliver_to_client], self.now)
        events += self.client.detach(self.now, "cut")
        events += self.server.detach(self.now, "cut")
        return events

    def resume(self):
        """The client reconnects: RESUME on a new server connection, handed to the session."""
        self.client.start_resume(self.now)
        fresh = make_server(self.now, resume=True)
        [event] = fresh.receive_data(self.client.data_to_send(), self.now)
        assert isinstance(event, ResumeReceived) and event.frame.token == TOKEN
        self.server_events = self.server.resume_session(event.frame, self.now)
        self.client_events = self.to_client()
        return self.server_events, self.client_events


def items(events):
    return [e.payload.data for e in events if isinstance(e, PayloadReceived) and e.payload]


def serve_stream(s: Session, n: int, start: int = 0):
    """The server sends items start..start+n-1 on stream 1 (credit permitting)."""
    for i in range(start, start + n):
        s.server.send_payload(1, Payload(b"%d" % i))


def open_stream(s: Session, n: int = 1000):
    s.client.request_stream(Payload(b"go"), n)
    [req] = s.to_server()
    assert isinstance(req, RequestReceived) and req.stream_id == 1


def resuming(s: Session | None = None) -> Session:
    """Cut ``s`` and have its client send RESUME (taken from its output): it now waits for
    RESUME_OK. Default: a new session with one stream open."""
    if s is None:
        s = Session()
        open_stream(s)
    s.cut()
    s.client.start_resume(0)
    s.client.data_to_send()
    return s


# --------------------------------------------------------------------------------- positions

def test_positions_are_the_bytes_of_stream_frames_without_prefix():
    s = Session()
    open_stream(s)
    serve_stream(s, 10)
    out = s.server.data_to_send()
    assert s.server.sent_position == positioned(out) == 10 * (6 + 1)
    s.client.receive_data(out)
    assert s.client.received_position == s.server.sent_position
    assert s.server.received_position == s.client.sent_position > 0
    # SETUP and KEEPALIVE have no position
    assert s.client.sent_position == len(F.encode(F.RequestStreamFrame(
        stream_id=1, initial_request_n=1000, data=b"go")))


def test_fragments_count_one_by_one():
    s = Session(client_config={"fragment_size": 64})
    s.client.request_response(Payload(b"x" * 1000))
    out = s.client.data_to_send()
    assert len(split_frames(out)) > 10
    s.server.receive_data(out)
    assert s.client.sent_position == s.server.received_position == positioned(out)


def test_keepalive_carries_the_received_position_and_trims_the_peers_buffer():
    s = Session()
    open_stream(s)
    serve_stream(s, 5)
    s.to_client()
    assert s.server.resume_buffer.size == 35  # not acknowledged yet
    s.client.tick(KEEPALIVE_MS / 1000)
    [ka] = decode_all(s.client.data_to_send())
    assert ka.respond and ka.last_received_position == s.client.received_position == 35
    s.server.receive_data(wire(ka))
    assert s.server.resume_buffer.size == 0 and s.server.resume_buffer.first_position == 35
    [reply] = sent(s.server)
    assert not reply.respond and reply.last_received_position == s.server.received_position
    s.client.receive_data(wire(reply))
    assert s.client.resume_buffer.size == 0


def test_keepalive_acknowledging_unsent_bytes_is_a_connection_error():
    s = Session()
    events = s.server.receive_data(wire(F.KeepaliveFrame(respond=True,
                                                         last_received_position=1)))
    assert isinstance(events[-1], ConnectionClosed)
    [err] = error_frames(sent(s.server))
    assert err.error_code == E.ErrorCode.CONNECTION_ERROR
    assert b"acknowledged position 1" in err.data


def test_without_resume_nothing_is_kept_and_keepalive_says_zero():
    c = make_client()
    assert not c.is_resumable and c.resume_buffer is None
    c.request_response(Payload(b"x"))
    c.data_to_send()
    c.tick(KEEPALIVE_MS / 1000)
    [ka] = sent(c)
    assert ka.last_received_position == 0


# ------------------------------------------------------------------------ resume: the happy path

@pytest.mark.parametrize("delivered_frames", [0, 3, 7])
@pytest.mark.parametrize("extra_bytes", [0, 1, 5])
def test_lost_items_are_sent_again_exactly_once(delivered_frames, extra_bytes):
    s = Session()
    open_stream(s)
    serve_stream(s, 10)
    out = s.server.data_to_send()
    cut_at = 10 * delivered_frames + extra_bytes  # 10 bytes per item on the wire
    got = items(s.client.receive_data(out[:cut_at]))
    assert got == [b"%d" % i for i in range(delivered_frames)]
    assert isinstance(s.client.detach(0, "cut")[0], ConnectionDetached)
    s.server.detach(0, "cut")
    server_events, client_events = s.resume()
    assert [type(e) for e in server_events] == [ConnectionResumed]
    assert isinstance(client_events[0], ConnectionResumed)
    got += items(client_events)
    assert got == [b"%d" % i for i in range(10)]
    serve_stream(s, 3, 10)  # and the stream goes on
    assert items(s.to_client()) == [b"10", b"11", b"12"]


def test_resume_frames_carry_the_positions():
    s = Session()
    open_stream(s)
    serve_stream(s, 4)
    s.to_client()
    s.client.tick(KEEPALIVE_MS / 1000)
    s.to_server()  # the server learns the client got 28 bytes
    s.to_client()  # the client learns what the server got
    serve_stream(s, 2, 4)
    s.cut()
    s.client.start_resume(0)
    [resume] = sent(s.client)
    assert isinstance(resume, F.ResumeFrame)
    assert (resume.major_version, resume.minor_version) == (1, 0)
    assert resume.token == TOKEN
    assert resume.last_received_server_position == 28
    assert resume.first_available_client_position == s.client.resume_buffer.first_position \
        == s.client.sent_position  # all acknowledged by the server's KEEPALIVE
    fresh = make_server(0, resume=True)
    [event] = fresh.receive_data(wire(resume))
    s.server.resume_session(event.frame, 0)
    frames = sent(s.server)
    assert isinstance(frames[0], F.ResumeOkFrame)
    assert frames[0].last_received_client_position == s.server.received_position
    assert [f.data for f in frames[1:]] == [b"4", b"5"]  # from the client's position on


def test_a_channel_resumes_both_ways():
    s = Session()
    s.client.request_channel(Payload(b"c0"), 100)
    s.to_server()
    s.server.send_request_n(1, 100)
    s.to_client()
    for i in range(1, 6):
        s.client.send_payload(1, Payload(b"c%d" % i))
        s.server.send_payload(1, Payload(b"s%d" % i))
    c2s, s2c = s.client.data_to_send(), s.server.data_to_send()
    got_server = items(s.server.receive_data(c2s[:25]))  # c1, c2 and part of c3
    got_client = items(s.client.receive_data(s2c[:12]))  # s1 and part of s2
    s.client.detach(0, "cut")
    s.server.detach(0, "cut")
    server_events, client_events = s.resume()
    got_client += items(client_events)
    got_server += items(s.to_server())
    assert got_client == [b"s%d" % i for i in range(1, 6)]
    assert got_server == [b"c%d" % i for i in range(1, 6)]


def test_requests_made_while_detached_go_out_after_resume():
    s = Session()
    s.cut()
    sid = s.client.request_response(Payload(b"later"))
    assert s.client.data_to_send() == b""  # nothing is written while detached
    with pytest.raises(E.LocalProtocolError):
        s.client.metadata_push(b"m")  # METADATA_PUSH has no position: it cannot wait
    server_events, client_events = s.resume()
    requests = [e for e in server_events + s.to_server() if isinstance(e, RequestReceived)]
    assert [(r.stream_id, r.payload.data) for r in requests] == [(sid, b"later")]


def test_handshake_survives_byte_by_byte_delivery_and_a_second_cut():
    s = Session()
    open_stream(s)
    serve_stream(s, 3)
    s.cut(deliver_to_client=4)
    s.client.start_resume(0)
    fresh = make_server(0, resume=True)
    events = feed_bytewise(fresh, s.client.data_to_send())
    [event] = events
    s.server.resume_session(event.frame, 0)
    got = items(feed_bytewise(s.client, s.server.data_to_send()))
    assert got == [b"0", b"1", b"2"]
    serve_stream(s, 2, 3)
    s.cut(deliver_to_client=10)  # "3" arrives, "4" is lost
    s.resume()
    assert items(s.client_events) == [b"4"]


def test_max_lifetime_detaches_a_resumable_connection_instead_of_closing_it():
    s = Session()
    open_stream(s)
    events = s.client.tick(LIFETIME_MS / 1000 + 0.001)
    [detached] = [e for e in events if isinstance(e, ConnectionDetached)]
    assert isinstance(detached.error, E.ConnectionLostError)
    assert "max lifetime" in str(detached.error)
    assert s.client.is_open and s.client.is_detached and s.client.has_stream(1)
    assert not s.client.is_established
    events = s.server.tick(LIFETIME_MS / 1000 + KEEPALIVE_MS / 1000)
    assert any(isinstance(e, ConnectionDetached) for e in events)
    assert s.server.has_stream(1)


# ------------------------------------------------------------------------------ refusals

def test_server_buffer_overflow_rejects_the_resume_with_a_clear_error():
    s = Session(server_config={"max_resume_buffer_size": 100})
    open_stream(s)
    serve_stream(s, 30)  # 30 x 7 bytes, the first ones dropped from the buffer
    s.cut()
    s.client.start_resume(0)
    fresh = make_server(0, resume=True)
    [event] = fresh.receive_data(s.client.data_to_send())
    server_events = s.server.resume_session(event.frame, 0)
    assert isinstance(server_events[-1], ConnectionClosed)
    client_events = s.to_client()
    [closed] = client_events
    assert isinstance(closed.error, E.RejectedResumeError)
    assert "no longer kept" in str(closed.error)
    assert "resume buffer limit of 100 bytes" in str(closed.error)
    assert not s.client.is_open and not s.server.is_open


def test_client_buffer_overflow_rejects_the_resume():
    s = Session(client_config={"max_resume_buffer_size": 50})
    s.client.request_channel(Payload(b"c"), 1)
    s.to_server()
    s.server.send_request_n(1, 100)
    s.to_client()
    for _ in range(20):
        s.client.send_payload(1, Payload(b"0123456789"))
    s.cut()  # the server received none of them; the client kept only the last few
    s.client.start_resume(0)
    fresh = make_server(0, resume=True)
    [event] = fresh.receive_data(s.client.data_to_send())
    s.server.resume_session(event.frame, 0)
    [closed] = s.to_client()
    assert isinstance(closed.error, E.RejectedResumeError)
    assert "frames would be lost" in str(closed.error)


def test_detached_session_expires():
    s = Session(server_config={"resume_session_timeout": SESSION_MS},
                client_config={"resume_session_timeout": SESSION_MS})
    open_stream(s)
    s.cut()
    assert s.server.next_deadline() == pytest.approx(SESSION_MS / 1000)
    assert s.server.tick(SESSION_MS / 1000 - 0.001) == []
    [closed] = s.server.tick(SESSION_MS / 1000)
    assert isinstance(closed, ConnectionClosed)
    assert "not resumed within 30000 ms" in str(closed.error)
    [closed] = s.client.tick(SESSION_MS / 1000)
    assert isinstance(closed.error, E.ConnectionLostError)


@pytest.mark.parametrize("version", [(1, 0), (0, 1)])
def test_the_swapped_version_of_rsocket_js_is_accepted(version):
    s = Session()
    s.cut()
    resume = F.ResumeFrame(token=TOKEN, last_received_server_position=0,
                           first_available_client_position=0, major_version=version[0],
                           minor_version=version[1])
    fresh = make_server(0, resume=True)
    [event] = fresh.receive_data(wire(resume))
    assert isinstance(event, ResumeReceived)


@pytest.mark.parametrize("version", [(2, 0), (1, 1)])
def test_other_versions_are_rejected(version):
    resume = F.ResumeFrame(token=TOKEN, last_received_server_position=0,
                           first_available_client_position=0, major_version=version[0],
                           minor_version=version[1])
    fresh = make_server(0, resume=True)
    [closed] = fresh.receive_data(wire(resume))
    assert isinstance(closed.error, E.RejectedResumeError)
    [err] = error_frames(sent(fresh))
    assert err.error_code == E.ErrorCode.REJECTED_RESUME and b"version" in err.data


def test_unknown_token_is_rejected_by_the_caller():
    fresh = make_server(0, resume=True)
    [event] = fresh.receive_data(wire(F.ResumeFrame(
        token=b"nope", last_received_server_position=0, first_available_client_position=0)))
    [closed] = fresh.reject_resume("no session for this resume token")
    assert isinstance(closed.error, E.RejectedResumeError)
    [err] = error_frames(sent(fresh))
    assert err.error_code == E.ErrorCode.REJECTED_RESUME


def test_server_without_resume_refuses_both():
    server = make_server()
    [closed] = server.receive_data(wire(setup_frame(resume_token=TOKEN)))
    assert isinstance(closed.error, E.RejectedSetupError)
    server = make_server()
    [closed] = server.receive_data(wire(F.ResumeFrame(
        token=TOKEN, last_received_server_position=0, first_available_client_position=0)))
    assert isinstance(closed.error, E.RejectedResumeError)


def test_bad_resume_ok_position_ends_the_client_with_connection_error():
    s = Session()
    s.client.request_response(Payload(b"x"))
    resuming(s)
    [closed] = s.client.receive_data(wire(F.ResumeOkFrame(last_received_client_position=999)))
    assert isinstance(closed.error, E.ConnectionError)
    assert "cannot resume" in str(closed.error)
    [err] = error_frames(sent(s.client))
    assert err.error_code == E.ErrorCode.CONNECTION_ERROR


def test_client_refuses_stream_frames_before_resume_ok():
    s = resuming()
    events = s.client.receive_data(wire(F.PayloadFrame(stream_id=1, data=b"x", next=True)))
    assert isinstance(events[-1], ConnectionClosed)
    [err] = error_frames(sent(s.client))
    assert err.error_code == E.ErrorCode.CONNECTION_ERROR


def test_rejected_resume_from_the_server_ends_the_client():
    s = resuming()
    [closed] = s.client.receive_data(wire(F.ErrorFrame(
        stream_id=0, error_code=E.ErrorCode.REJECTED_RESUME, data=b"gone")))
    assert isinstance(closed.error, E.RejectedResumeError) and closed.error.message == "gone"
    assert not s.client.has_stream(1)


def test_resume_after_setup_is_a_connection_error():
    s = Session()
    [closed] = s.server.receive_data(wire(F.ResumeFrame(
        token=TOKEN, last_received_server_position=0, first_available_client_position=0)))
    assert closed.error.error_code == E.ErrorCode.CONNECTION_ERROR


# ------------------------------------------------------------------------- hostile input

_FRAME_TYPES = st.sampled_from([0x01, 0x03, 0x04, 0x06, 0x07, 0x08, 0x09, 0x0A, 0x0B, 0x0D,
                                0x0E, 0x3F])


@st.composite
def _frames(draw):
    """Length-prefixed frames with plausible headers and random bodies (positions included)."""
    out = b""
    for _ in range(draw(st.integers(1, 6))):
        sid = draw(st.sampled_from([0, 1, 2, 3, 0x7FFFFFFF]))
        ft = draw(_FRAME_TYPES)
        flags = draw(st.integers(0, 0x3FF))
        body = draw(st.binary(max_size=40))
        frame = sid.to_bytes(4, "big") + ((ft << 10) | flags).to_bytes(2, "big") + body
        out += len(frame).to_bytes(3, "big") + frame
    return out


def _well_formed(conn) -> None:
    for frame in decode_all(conn.data_to_send()):  # everything we send decodes
        assert isinstance(frame, F.Frame)


@settings(max_examples=150, deadline=None)
@given(_frames())
def test_hostile_frames_never_raise_from_a_resumable_session(data):
    s = Session()
    open_stream(s)
    s.server.receive_data(data)
    s.client.receive_data(data)
    _well_formed(s.server)
    _well_formed(s.client)


@settings(max_examples=150, deadline=None)
@given(_frames())
def test_hostile_frames_never_raise_while_resuming(data):
    s = resuming()
    s.client.receive_data(data)
    _well_formed(s.client)
    fresh = make_server(0, resume=True)
    events = fresh.receive_data(data)
    for event in events:
        if isinstance(event, ResumeReceived):
            s.server.resume_session(event.frame, 0)
            _well_formed(s.server)
    _well_formed(fresh)
