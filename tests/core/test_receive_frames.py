"""``RSocketConnection.receive_frames``: the whole frames of one read of a message transport
(WebSocket) go through the same path as the frames of ``receive_data``, with the same events
as ``receive_frame`` one at a time; a frame over the max frame size is answered as a length
prefix over it is on a byte stream (the frames before it first)."""

from __future__ import annotations

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import ErrorCode
from rsocket_tx.core.events import ConnectionClosed, PayloadReceived, RequestReceived

from .conn_helpers import error_frames, make_server, setup_frame


def message_server(**config: object):
    server = make_server(length_prefixed=False, **config)
    server.receive_frame(F.encode(setup_frame()), 0.0)
    server.frames_to_send()
    return server


def frames_of_one_read() -> list[bytes]:
    """Every kind of frame the fast path takes, and some it does not."""
    return [F.encode(frame) for frame in (
        F.RequestFnfFrame(stream_id=1, data=b"fnf"),
        F.RequestResponseFrame(stream_id=3, data=b"rr"),
        F.RequestResponseFrame(stream_id=5, data=b"rr", metadata=b"m"),
        F.RequestStreamFrame(stream_id=7, initial_request_n=4, data=b"rs"),
        F.RequestChannelFrame(stream_id=9, initial_request_n=2, data=b"rc"),
        F.PayloadFrame(stream_id=9, data=b"item", next=True),
        F.RequestNFrame(stream_id=7, request_n=10),
        F.CancelFrame(stream_id=3),
        F.KeepaliveFrame(respond=True, last_received_position=0, data=b"k"),
        F.MetadataPushFrame(metadata=b"push"),
        F.PayloadFrame(stream_id=9, complete=True),
    )]


def test_receive_frames_gives_the_events_of_receive_frame_one_at_a_time() -> None:
    frames = frames_of_one_read()
    batch = message_server()
    single = message_server()
    events = batch.receive_frames(frames, 1.0)
    expected = [e for frame in frames for e in single.receive_frame(frame, 1.0)]
    assert events == expected
    assert any(isinstance(e, RequestReceived) for e in events)
    assert any(isinstance(e, PayloadReceived) for e in events)
    assert batch.frames_to_send() == single.frames_to_send()  # (the KEEPALIVE answer)


def test_receive_frames_before_setup_takes_them_one_at_a_time() -> None:
    frames = [F.encode(setup_frame())] + frames_of_one_read()
    batch = make_server(length_prefixed=False)
    single = make_server(length_prefixed=False)
    events = batch.receive_frames(frames, 1.0)
    assert events == [e for frame in frames for e in single.receive_frame(frame, 1.0)]
    assert batch.is_established


def test_a_frame_over_the_max_frame_size_comes_after_the_frames_before_it() -> None:
    server = message_server(max_frame_size=1000)
    good = F.encode(F.RequestFnfFrame(stream_id=1, data=b"before"))
    big = F.encode(F.RequestFnfFrame(stream_id=3, data=b"x" * 1000))
    after = F.encode(F.RequestFnfFrame(stream_id=5, data=b"after"))
    events = server.receive_frames([good, big, after], 1.0)
    assert [e.payload.data for e in events] == [b"before"]  # (handled as if alone)
    assert server.read_failure is not None
    closing = server.pending_events()
    assert any(isinstance(e, ConnectionClosed) for e in closing)
    [error] = error_frames([F.decode(f) for f in server.frames_to_send()])
    assert error.error_code == ErrorCode.CONNECTION_ERROR
    assert b"frame length 1006 exceeds the max frame size of 1000 bytes" in error.data
    assert server.receive_frames([after], 2.0) == []  # (closed: moot)
