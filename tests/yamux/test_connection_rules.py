"""The yamux session's rules (spec.md "Message Flow"), sans-IO: two sessions in memory, time
passed in; each rule a peer can break ends the session with Go Away 1 (protocol error)."""

from __future__ import annotations

import pytest

from rsocket_tx.yamux.codec import (
    INITIAL_WINDOW,
    Flags,
    Frame,
    FrameDecoder,
    FrameType,
    GoAwayCode,
)
from rsocket_tx.yamux.config import YamuxConfig
from rsocket_tx.yamux.connection import Role, YamuxConnection
from rsocket_tx.yamux.errors import LocalProtocolError
from rsocket_tx.yamux.events import (
    ConnectionClosed,
    DataReceived,
    GoAwayReceived,
    PingTimedOut,
    PongReceived,
    StreamAccepted,
    StreamEnded,
    StreamOpened,
    StreamReset,
    WindowUpdated,
)

from .conn_helpers import QUIET, move, names, pair, raw


def frames_of(conn: YamuxConnection) -> list[Frame]:
    return FrameDecoder(1 << 30).feed(b"".join(conn.chunks_to_send()))


def test_open_send_accept_fin_both_ways() -> None:
    client, server = pair()
    sid = client.open_stream()
    assert sid == 1 and client.open_stream() == 3
    client.send_data(sid, b"hello", 0.0, end_stream=True)
    events = move(client, server)
    assert events == [StreamOpened(1), StreamOpened(3), DataReceived(1, b"hello"),
                      StreamEnded(1, False)]
    server.accept_stream(1)
    server.send_data(1, b"world", 0.0, end_stream=True)
    assert move(server, client) == [StreamAccepted(1), DataReceived(1, b"world"),
                                    StreamEnded(1, True)]
    assert 1 not in client.streams and 1 not in server.streams
    assert server.open_stream() == 2  # the server's ids are even


def test_syn_goes_out_at_once_with_the_larger_window_as_its_delta() -> None:
    client, server = pair(YamuxConfig(keepalive_interval=None, receive_window=1 << 20))
    sid = client.open_stream()
    assert frames_of(client) == [Frame(FrameType.WINDOW_UPDATE, Flags.SYN, sid,
                                       (1 << 20) - INITIAL_WINDOW)]


def test_sending_stops_at_the_peers_window_and_goes_on_after_its_update() -> None:
    client, server = pair()
    sid = client.open_stream()
    data = bytes(INITIAL_WINDOW + 1000)
    assert client.send_data(sid, data, 0.0) == INITIAL_WINDOW
    assert client.send_window(sid) == 0
    events = move(client, server)
    received = sum(len(e.data) for e in events if isinstance(e, DataReceived))
    assert received == INITIAL_WINDOW
    server.accept_stream(sid)
    server.consume(sid, INITIAL_WINDOW // 2 - 1)
    assert [f.length for f in frames_of(server)] == [0]  # the ACK; not half the window yet
    server.consume(sid, 1)
    assert move(server, client) == [WindowUpdated(sid, INITIAL_WINDOW // 2)]
    assert client.send_data(sid, data[INITIAL_WINDOW:], 0.0) == 1000


def test_data_frames_are_cut_at_send_frame_size_and_never_past_the_window() -> None:
    client, _ = pair(YamuxConfig(keepalive_interval=None, send_frame_size=100_000))
    sid = client.open_stream()
    client.chunks_to_send()
    assert client.send_data(sid, bytes(300_000), 0.0) == INITIAL_WINDOW
    assert [f.length for f in frames_of(client)] == [100_000, 100_000, INITIAL_WINDOW - 200_000]


def test_reset_both_ways() -> None:
    client, server = pair()
    sid = client.open_stream()
    move(client, server)
    server.accept_stream(sid)
    server.reset_stream(sid)
    assert sid not in server.streams
    assert move(server, client) == [StreamAccepted(sid), StreamReset(sid, True,
                                                                     "the peer reset the stream")]
    # late frames of a stream that ended are dropped, not errors
    assert raw(server, Frame(FrameType.DATA, 0, sid, 3, b"abc")) == []
    assert raw(client, Frame(FrameType.WINDOW_UPDATE, 0, sid, 10)) == []


def test_ping_is_answered_and_ours_times_out() -> None:
    client, server = pair()
    opaque = client.ping(0.0)
    move(client, server)
    assert move(server, client) == [PongReceived(opaque, False)]
    assert server.pings_answered == 1
    lost = client.ping(1.0)
    assert client.next_deadline() == 1.0 + QUIET.ping_timeout
    assert client.tick(1.0 + QUIET.ping_timeout) == [PingTimedOut(lost)]
    assert client.is_open


def test_keepalive_pings_and_ends_the_session_when_unanswered() -> None:
    config = YamuxConfig(keepalive_interval=30.0, ping_timeout=10.0)
    client, server = pair(config, config)
    assert client.next_deadline() == 30.0
    assert client.tick(30.0) == []
    move(client, server, 30.0)
    assert names(move(server, client, 31.0)) == ["PongReceived"]
    assert client.tick(60.0) == []
    events = client.tick(70.0)
    assert names(events) == ["ConnectionClosed"] and "keepalive timeout" in str(events[0].error)


def test_go_away_normal_stops_new_streams_only() -> None:
    client, server = pair()
    sid = client.open_stream()
    move(client, server)
    server.accept_stream(sid)
    server.go_away()
    assert move(server, client) == [StreamAccepted(sid), GoAwayReceived(0)]
    with pytest.raises(LocalProtocolError, match="Go Away"):
        client.open_stream()
    client.send_data(sid, b"still", 0.0)
    assert move(client, server) == [DataReceived(sid, b"still")]


def test_a_syn_after_our_go_away_is_refused_with_rst() -> None:
    client, server = pair()
    server.go_away()
    move(server, client)
    raw(server, Frame(FrameType.WINDOW_UPDATE, Flags.SYN, 1, 0))
    assert frames_of(server) == [Frame(FrameType.WINDOW_UPDATE, Flags.RST, 1, 0)]


@pytest.mark.parametrize("code", [GoAwayCode.PROTOCOL_ERROR, GoAwayCode.INTERNAL_ERROR])
def test_go_away_with_an_error_ends_the_session(code) -> None:
    client, _ = pair()
    events = raw(client, Frame(FrameType.GO_AWAY, 0, 0, code))
    assert names(events) == ["ConnectionClosed"]
    assert events[0].error.code == code and events[0].error.by_peer
    assert not client.is_open and client.chunks_to_send() == []


def test_stream_close_timeout_resets_a_stream_whose_peer_never_sends_fin() -> None:
    config = YamuxConfig(keepalive_interval=None, stream_close_timeout=5.0)
    client, server = pair(config)
    sid = client.open_stream()
    client.close_stream(sid, 10.0)
    assert client.next_deadline() == 15.0
    events = client.tick(15.0)
    assert names(events) == ["StreamReset"] and not events[0].by_peer
    assert [f.flags for f in frames_of(client)][-1] == Flags.RST


# -- limits a peer cannot exceed --------------------------------------------------------------

def test_streams_past_max_streams_and_the_backlog_are_refused_with_rst() -> None:
    server = YamuxConnection(Role.SERVER, YamuxConfig(keepalive_interval=None, max_streams=3,
                                                       accept_backlog=2))
    events = []
    for sid in (1, 3, 5):
        events += raw(server, Frame(FrameType.WINDOW_UPDATE, Flags.SYN, sid, 0))
    assert events == [StreamOpened(1), StreamOpened(3)]  # 5: past the backlog
    server.accept_stream(1)
    server.accept_stream(3)
    for sid in (7, 9):
        events += raw(server, Frame(FrameType.WINDOW_UPDATE, Flags.SYN, sid, 0))
    assert events[-1] == StreamOpened(7)  # 9: past max_streams (1, 3, 7 open)
    rsts = [f.stream_id for f in frames_of(server) if f.flags & Flags.RST]
    assert rsts == [5, 9] and server.is_open


PROTOCOL_ERRORS = [
    ("data past the window",
     [Frame(FrameType.DATA, Flags.SYN, 1, 200_000, bytes(200_000)),
      Frame(FrameType.DATA, 0, 1, 100_000, bytes(100_000))],
     "exceeds its receive window"),
    ("a window past max_window",
     [Frame(FrameType.WINDOW_UPDATE, Flags.SYN, 1, 0xFFFFFFFF)], "max_window"),
    ("a SYN of our parity", [Frame(FrameType.WINDOW_UPDATE, Flags.SYN, 2, 0)], "our side"),
    ("a SYN twice", [Frame(FrameType.WINDOW_UPDATE, Flags.SYN, 1, 0)] * 2, "open already"),
    ("SYN and ACK", [Frame(FrameType.WINDOW_UPDATE, Flags.SYN | Flags.ACK, 1, 0)], "both"),
    ("a frame past max_frame_length",
     [Frame(FrameType.DATA, Flags.SYN, 1, INITIAL_WINDOW + 1, bytes(INITIAL_WINDOW + 1))],
     "max_frame_length"),
    ("a frame on a stream never opened", [Frame(FrameType.DATA, 0, 5, 1, b"x")],
     "never opened"),
    ("a frame on our stream never opened", [Frame(FrameType.WINDOW_UPDATE, 0, 4, 1)],
     "never opened"),
    ("data after FIN", [Frame(FrameType.DATA, Flags.SYN | Flags.FIN, 1, 0),
                        Frame(FrameType.DATA, 0, 1, 1, b"x")], "after its FIN"),
    ("a second FIN", [Frame(FrameType.WINDOW_UPDATE, Flags.SYN | Flags.FIN, 1, 0),
                      Frame(FrameType.WINDOW_UPDATE, Flags.FIN, 1, 0)], "second FIN"),
    ("ACK on the peer's own stream", [Frame(FrameType.WINDOW_UPDATE, Flags.SYN, 1, 0),
                                      Frame(FrameType.WINDOW_UPDATE, Flags.ACK, 1, 0)],
     "which the peer opened"),
    ("an unknown Go Away code", [Frame(FrameType.GO_AWAY, 0, 0, 7)], "unknown code 7"),
]


@pytest.mark.parametrize(("frames", "words"), [p[1:] for p in PROTOCOL_ERRORS],
                         ids=[p[0] for p in PROTOCOL_ERRORS])
def test_a_protocol_error_is_answered_with_go_away_1_and_ends_the_session(frames, words) -> None:
    server = YamuxConnection(Role.SERVER, YamuxConfig(keepalive_interval=None,
                                                      max_window=1 << 20))
    events = []
    for frame in frames:
        events += raw(server, frame)
    assert isinstance(events[-1], ConnectionClosed)
    assert words in str(events[-1].error)
    assert events[-1].error.code == GoAwayCode.PROTOCOL_ERROR and not events[-1].error.by_peer
    assert frames_of(server)[-1] == Frame(FrameType.GO_AWAY, 0, 0, GoAwayCode.PROTOCOL_ERROR)
    assert not server.is_open and server.receive_data(b"\x00" * 12, 0.0) == []


def test_the_api_refuses_what_the_protocol_forbids() -> None:
    client, _ = pair()
    with pytest.raises(LocalProtocolError, match="no open stream 9"):
        client.send_data(9, b"x", 0.0)
    sid = client.open_stream()
    client.close_stream(sid, 0.0)
    with pytest.raises(LocalProtocolError, match="closed for sending"):
        client.send_data(sid, b"x", 0.0)
    with pytest.raises(LocalProtocolError, match="does not wait"):
        client.accept_stream(sid)
    client.close()
    with pytest.raises(LocalProtocolError, match="closed"):
        client.open_stream()


@pytest.mark.parametrize(("field", "value"), [
    ("receive_window", 1000), ("max_window", 2**32), ("accept_backlog", 0),
    ("send_frame_size", 0), ("keepalive_interval", 0), ("ping_timeout", None),
    ("max_frame_length", 0), ("max_streams", True)])
def test_config_refuses_values_out_of_range(field, value) -> None:
    with pytest.raises(ValueError, match=field):
        YamuxConfig(**{field: value})


def test_frames_before_garbage_in_one_read_are_handled_before_the_go_away() -> None:
    client, server = pair()
    client.open_stream()
    wire = b"".join(client.chunks_to_send()) + b"\x09" * 12
    events = server.receive_data(wire, 0.0)
    assert names(events) == ["StreamOpened", "ConnectionClosed"]
    assert "unsupported version 9" in str(events[-1].error)
