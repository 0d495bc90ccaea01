"""RSocketConnection: KEEPALIVE and max lifetime (spec §KEEPALIVE Frame, §SETUP Frame "Time
Between KEEPALIVE Frames" / "Max Lifetime", §Handling the Unexpected item 1).

Time only moves through ``tick(now)`` (seconds); the SETUP of these tests asks for a KEEPALIVE
every 1,000 ms and a max lifetime of 5,000 ms.
"""

from __future__ import annotations

import pytest

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import ConnectionLostError, ErrorCode
from rsocket_tx.core.events import ConnectionClosed
from rsocket_tx.core.payload import Payload

from .conn_helpers import (
    KEEPALIVE_MS,
    LIFETIME_MS,
    Pair,
    make_client,
    sent,
    setup_frame,
    wire,
)


def _keepalives(frames: list[F.Frame]) -> list[F.KeepaliveFrame]:
    return [f for f in frames if isinstance(f, F.KeepaliveFrame)]


def test_client_sends_keepalive_with_respond_every_interval() -> None:
    # "KEEPALIVE frames MUST be initiated by the client and sent periodically with the
    # (R)espond flag set."
    client = make_client(setup_frame(keepalive_interval=1_000, max_lifetime=60_000), now=10.0)
    client.data_to_send()  # SETUP
    assert client.tick(10.5) == []
    assert client.data_to_send() == b""
    sent_at = []
    for step in range(1, 41):  # 10.25 .. 20.0 s, in quarter seconds
        now = 10.0 + step * 0.25
        assert client.tick(now) == []
        for frame in sent(client):
            assert isinstance(frame, F.KeepaliveFrame)
            assert frame.respond and frame.stream_id == 0
            sent_at.append(now)
    assert sent_at == [11.0 + i for i in range(10)]


def test_client_late_tick_sends_one_keepalive_not_a_burst() -> None:
    # "Time Between KEEPALIVE Frames": a tick that comes late sends the overdue KEEPALIVE
    # once; ticking again at the same instant must not send a second one 0 ms later.
    client = make_client(setup_frame(keepalive_interval=1_000, max_lifetime=60_000), now=0.0)
    client.data_to_send()
    client.tick(3.5)
    assert len(_keepalives(sent(client))) == 1
    deadline = client.next_deadline()
    assert deadline is not None and deadline > 3.5
    client.tick(3.5)
    assert sent(client) == []


def test_server_does_not_initiate_keepalive() -> None:
    # "KEEPALIVE frames MUST be initiated by the client"; the server "MAY" only "upon
    # application request".
    pair = Pair(setup=setup_frame(keepalive_interval=1_000, max_lifetime=60_000))
    for t in range(1, 21):
        assert pair.server.tick(float(t)) == []
        assert pair.server.data_to_send() == b""


@pytest.mark.parametrize("side", ["client", "server"])
def test_keepalive_with_respond_is_echoed_without_respond(side: str) -> None:
    # "Reception of a KEEPALIVE frame with the (R)espond flag set MUST cause a client or server
    # to send back a KEEPALIVE with the (R)espond flag NOT set. The data in the received
    # KEEPALIVE MUST be echoed back in the generated KEEPALIVE."
    pair = Pair()
    conn = getattr(pair, side)
    ping = F.KeepaliveFrame(respond=True, last_received_position=0, data=b"ping \x00\xff data")
    assert conn.receive_data(wire(ping)) == []
    assert sent(conn) == [F.KeepaliveFrame(respond=False, data=b"ping \x00\xff data")]


@pytest.mark.parametrize("side", ["client", "server"])
def test_keepalive_without_respond_is_not_answered(side: str) -> None:
    pair = Pair()
    conn = getattr(pair, side)
    assert conn.receive_data(wire(F.KeepaliveFrame(respond=False, data=b"pong"))) == []
    assert conn.data_to_send() == b""


def test_keepalive_round_trip_keeps_the_connection_alive() -> None:
    pair = Pair()
    for step in range(1, 61):  # one minute, far beyond the 5 s max lifetime
        now = step * 0.5
        assert pair.client.tick(now) == []
        pair.to_server()
        assert pair.server.tick(now) == []
        pair.to_client()
    assert pair.client.is_open and pair.server.is_open


@pytest.mark.parametrize("side", ["client", "server"])
def test_silence_for_max_lifetime_closes(side: str) -> None:
    # Max Lifetime: "Time (in milliseconds) that a client will allow a server to not respond
    # to a KEEPALIVE before it is assumed to be dead"; a server uses the same value for the
    # client ("Reception of a KEEPALIVE by a server indicates to the server that the client is
    # alive").
    pair = Pair()
    conn = getattr(pair, side)
    assert conn.tick(0.0) == []  # the server heard the SETUP at 0
    for step in range(1, 10):
        assert conn.tick(step * 0.5) == []  # 0.5 .. 4.5 s: silent, but not for long enough
    conn.data_to_send()
    assert conn.tick(4.999) == []
    assert conn.is_open
    events = conn.tick(5.0)
    assert len(events) == 1
    (closed,) = events
    assert isinstance(closed, ConnectionClosed) and closed.by_peer
    assert isinstance(closed.error, ConnectionLostError)
    assert not conn.is_open
    frames = sent(conn)
    assert len(frames) == 1 and isinstance(frames[0], F.ErrorFrame)
    assert frames[0].stream_id == 0 and frames[0].error_code == ErrorCode.CONNECTION_ERROR
    assert frames[0].data
    assert conn.tick(6.0) == []


@pytest.mark.parametrize("side", ["client", "server"])
def test_silence_detected_when_ticking_at_next_deadline(side: str) -> None:
    # A driver that ticks only when next_deadline() says so must still close a connection whose
    # peer went silent for max lifetime (5 s) -- allowing one keepalive interval of tick
    # granularity, not a second max lifetime.
    pair = Pair()
    conn = getattr(pair, side)
    peer = pair.other(conn)
    conn.tick(0.0)
    peer.metadata_push(b"last words")  # heard at 0.1 s (between two ticks), then silence
    pair.deliver(peer)
    last_heard = 0.1
    closed_at = None
    for _ in range(100):
        deadline = conn.next_deadline()
        if deadline is None:
            break
        assert deadline > 0.0
        if conn.tick(deadline):
            closed_at = deadline
            break
        conn.data_to_send()
    assert closed_at is not None
    assert closed_at <= last_heard + LIFETIME_MS / 1000 + KEEPALIVE_MS / 1000


@pytest.mark.parametrize("side", ["client", "server"])
def test_received_frame_resets_the_silence_clock(side: str) -> None:
    # A frame received is a sign of life; the clock restarts from there (a received frame
    # counts at the tick that follows it).
    pair = Pair()
    conn = getattr(pair, side)
    peer = pair.other(conn)
    assert conn.tick(3.0) == []
    peer.metadata_push(b"still here")
    pair.deliver(peer)
    assert conn.tick(3.0) == []
    assert conn.tick(5.0) == []  # 5 s after the start, but only 2 s after the frame
    assert conn.tick(7.999) == []
    assert conn.is_open
    events = conn.tick(8.0)
    assert [type(e) for e in events] == [ConnectionClosed]
    assert isinstance(events[0].error, ConnectionLostError)


def test_frames_other_than_keepalive_also_count_as_alive() -> None:
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 100)
    pair.to_server()
    for step in range(1, 41):  # 20 s of a chatty stream and no KEEPALIVE answer at all
        now = step * 0.5
        pair.server.send_payload(sid, Payload(b"tick"))
        pair.to_client()
        assert pair.client.tick(now) == []
        pair.client.data_to_send()  # KEEPALIVEs are dropped: the server never sees them
    assert pair.client.is_open
