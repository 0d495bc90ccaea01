"""RSocketConnection: fragmentation and reassembly (spec §Fragmentation And Reassembly,
§Max Frame Size, §Handling the Unexpected: "Reassembly of PAYLOADs and REQUEST_CHANNELs MUST
assume the possibility of an infinite stream").

``fragment_size`` counts a whole frame (header included) without the 3-byte length prefix.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rsocket_tx.core import frames as F
from rsocket_tx.core.errors import ErrorCode, InvalidError, PayloadTooLargeError
from rsocket_tx.core.events import (
    CancelReceived,
    PayloadReceived,
    RequestReceived,
    StreamErrored,
)
from rsocket_tx.core.frames import FrameType
from rsocket_tx.core.framing import MAX_FRAME_LENGTH
from rsocket_tx.core.payload import Payload

from .conn_helpers import (
    DIRECTIONS,
    Pair,
    decode_all,
    feed_bytewise,
    make_server,
    roles,
    setup_frame,
    split_frames,
    wire,
)

FRAG = 64
directions = pytest.mark.parametrize("direction", DIRECTIONS)
REQUEST_CLASSES = {
    FrameType.REQUEST_RESPONSE: F.RequestResponseFrame,
    FrameType.REQUEST_FNF: F.RequestFnfFrame,
    FrameType.REQUEST_STREAM: F.RequestStreamFrame,
    FrameType.REQUEST_CHANNEL: F.RequestChannelFrame,
}


def _fragmenting_pair(**server_config) -> Pair:
    return Pair(client_config={"fragment_size": FRAG},
                server_config={"fragment_size": FRAG, **server_config})


def _fragmenting_stream(direction: str, n: int, **config):
    """A request-stream with ``n`` credits, opened in ``direction`` on a pair that fragments at
    FRAG both ways (``config`` goes to both sides too); returns (pair, rq, rs, sid)."""
    pair = Pair(client_config={"fragment_size": FRAG, **config},
                server_config={"fragment_size": FRAG, **config})
    rq, rs = roles(pair, direction)
    sid = rq.request_stream(Payload(b"s"), n)
    pair.deliver(rq)
    return pair, rq, rs, sid


def _request(conn, kind: FrameType, payload: Payload, n: int = 3) -> int:
    if kind == FrameType.REQUEST_RESPONSE:
        return conn.request_response(payload)
    if kind == FrameType.REQUEST_FNF:
        return conn.fire_and_forget(payload)
    if kind == FrameType.REQUEST_STREAM:
        return conn.request_stream(payload, n)
    return conn.request_channel(payload, n)


def _blob(n: int, seed: int = 0) -> bytes:
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


def _check_metadata_before_data(frames: list[F.Frame]) -> None:
    seen_data = False
    for f in frames:
        if f.metadata:
            assert not seen_data, "metadata after data"
        if f.data:
            seen_data = True


# ---------------------------------------------------------------------------------------------
# sending
# ---------------------------------------------------------------------------------------------


def test_fragment_size_respected_for_every_frame_sent() -> None:
    pair = _fragmenting_pair()
    outputs = []
    c, s = pair.client, pair.server
    sids = [
        c.request_response(Payload(_blob(300), _blob(200, 1))),
        c.fire_and_forget(Payload(_blob(150), b"")),
        c.request_stream(Payload(_blob(10), _blob(130)), 5),
        c.request_channel(Payload(_blob(200)), 5),
    ]
    outputs.append(c.data_to_send())
    pair.server.receive_data(outputs[-1])
    rr, _, st_, ch = sids
    s.send_payload(rr, Payload(_blob(500), _blob(90)))
    s.send_payload(st_, Payload(_blob(61)))
    s.send_payload(st_, Payload(b"", _blob(61)))
    s.send_payload(st_, Payload(_blob(1000)), complete=True)
    s.send_request_n(ch, 3)
    s.send_payload(ch, Payload(_blob(120), _blob(120)))
    s.metadata_push(_blob(FRAG - 6))
    outputs.append(s.data_to_send())
    pair.client.receive_data(outputs[-1])
    c.metadata_push(_blob(FRAG - 6, 3))
    c.send_payload(ch, Payload(_blob(333), _blob(77)), complete=True)
    outputs.append(c.data_to_send())
    total = 0
    for out in outputs:
        for frame in split_frames(out):
            assert len(frame) <= FRAG
            total += 1
    assert total > 40
    with pytest.raises(ValueError):
        c.metadata_push(_blob(FRAG - 5))  # METADATA_PUSH cannot be fragmented


@pytest.mark.parametrize("kind", list(REQUEST_CLASSES), ids=lambda k: k.name)
def test_fragmented_request_is_request_with_f_then_payloads(kind: FrameType) -> None:
    # "the first frame is the REQUEST_* frame with the (F)ollows flag set, followed by a
    # sequence of PAYLOAD frames"; "the Metadata MUST be transmitted completely before the
    # Data"
    pair = _fragmenting_pair()
    data, metadata = _blob(250), _blob(150, 5)
    _request(pair.client, kind, Payload(data, metadata))
    frames = decode_all(pair.client.data_to_send())
    assert len(frames) >= 3
    first, rest = frames[0], frames[1:]
    assert isinstance(first, REQUEST_CLASSES[kind]) and first.follows
    assert all(isinstance(f, F.PayloadFrame) for f in rest)
    assert all(f.follows for f in frames[:-1])
    assert not frames[-1].follows
    _check_metadata_before_data(frames)
    assert b"".join(f.metadata or b"" for f in frames) == metadata
    assert b"".join(f.data for f in frames) == data
    if kind in (FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL):
        assert first.initial_request_n == 3


@directions
def test_fragmented_payload_metadata_before_data(direction: str) -> None:
    pair, rq, rs, sid = _fragmenting_stream(direction, 2)
    data, metadata = _blob(400), _blob(170, 9)
    rs.send_payload(sid, Payload(data, metadata), complete=True)
    frames = decode_all(rs.data_to_send())
    assert len(frames) > 3
    assert all(isinstance(f, F.PayloadFrame) for f in frames)
    assert all(f.follows for f in frames[:-1]) and not frames[-1].follows
    assert frames[-1].complete and not any(f.complete for f in frames[:-1])
    _check_metadata_before_data(frames)
    assert frames[0].metadata  # metadata starts in the first fragment
    assert b"".join(f.metadata or b"" for f in frames) == metadata
    assert b"".join(f.data for f in frames) == data


@directions
def test_fragmented_payload_uses_one_credit(direction: str) -> None:
    # "a fragmented PAYLOAD frame counts as a single request(n) credit"
    pair, rq, rs, sid = _fragmenting_stream(direction, 1)
    rs.send_payload(sid, Payload(_blob(1000)))
    assert rs.credit(sid) == 0
    assert len(split_frames(out := rs.data_to_send())) > 1
    assert pair.other(rs).receive_data(out) == [PayloadReceived(sid, Payload(_blob(1000)),
                                                                False)]


# ---------------------------------------------------------------------------------------------
# reassembly
# ---------------------------------------------------------------------------------------------


@directions
@pytest.mark.parametrize("kind", list(REQUEST_CLASSES), ids=lambda k: k.name)
@pytest.mark.parametrize("metadata", [None, b"", _blob(100, 2)], ids=["no-meta", "empty-meta",
                                                                      "meta"])
def test_request_reassembly(direction: str, kind: FrameType, metadata) -> None:
    pair = _fragmenting_pair()
    rq, rs = roles(pair, direction)
    payload = Payload(_blob(300), metadata)
    sid = _request(rq, kind, payload, n=7)
    out = rq.data_to_send()
    assert len(split_frames(out)) > 1
    events = feed_bytewise(rs, out)
    n = 7 if kind in (FrameType.REQUEST_STREAM, FrameType.REQUEST_CHANNEL) else 0
    assert events == [RequestReceived(sid, kind, payload, n, False)]
    assert events[0].payload.metadata == metadata  # None and b"" stay apart


@directions
@pytest.mark.parametrize("metadata", [None, b"", _blob(100, 2)], ids=["no-meta", "empty-meta",
                                                                      "meta"])
def test_payload_reassembly(direction: str, metadata) -> None:
    pair = _fragmenting_pair()
    rq, rs = roles(pair, direction)
    sid = rq.request_channel(Payload(b"c"), 2)
    rs.receive_data(rq.data_to_send())
    rs.send_request_n(sid, 2)
    rq.receive_data(rs.data_to_send())
    # responder -> requester
    payload = Payload(_blob(300, 1), metadata)
    rs.send_payload(sid, payload)
    out = rs.data_to_send()
    assert len(split_frames(out)) > 1
    assert feed_bytewise(rq, out) == [PayloadReceived(sid, payload, False)]
    # requester -> responder, with the C flag on the whole
    payload2 = Payload(_blob(200, 3), metadata)
    rq.send_payload(sid, payload2, complete=True)
    out = rq.data_to_send()
    assert len(split_frames(out)) > 1
    events = feed_bytewise(rs, out)
    assert events == [PayloadReceived(sid, payload2, True)]
    assert events[0].payload.metadata == metadata


def test_reassembly_of_hand_built_fragments() -> None:
    # The example of the spec in small: metadata first (spread over two frames), then data.
    pair = Pair()
    sid = pair.client.request_stream(Payload(b"s"), 5)
    pair.to_server()
    fragments = [
        F.PayloadFrame(stream_id=sid, metadata=b"meta-1", follows=True, next=True),
        F.PayloadFrame(stream_id=sid, metadata=b"meta-2", data=b"data-1", follows=True,
                       next=True),
        F.PayloadFrame(stream_id=sid, data=b"data-2", next=True),
    ]
    events = feed_bytewise(pair.client, b"".join(wire(f) for f in fragments))
    assert events == [PayloadReceived(sid, Payload(b"data-1data-2", b"meta-1meta-2"), False)]


def test_fragmented_request_channel_with_complete_flag() -> None:
    pair = _fragmenting_pair()
    sid = pair.client.request_channel(Payload(_blob(300)), 4, complete=True)
    events = pair.to_server()
    assert events == [RequestReceived(sid, FrameType.REQUEST_CHANNEL, Payload(_blob(300)), 4,
                                      True)]


@pytest.mark.parametrize("kind", list(REQUEST_CLASSES), ids=lambda k: k.name)
def test_cancel_during_inbound_request_fragments_drops_it(kind: FrameType) -> None:
    # "If the Requester wants to cancel sending a fragmented sequence, it MAY send a CANCEL
    # frame without finishing delivery of the fragments."
    pair = Pair()
    cls = REQUEST_CLASSES[kind]
    extra = {"initial_request_n": 2} if kind in (FrameType.REQUEST_STREAM,
                                                 FrameType.REQUEST_CHANNEL) else {}
    frames = [
        cls(stream_id=1, data=b"part-1", follows=True, **extra),
        F.PayloadFrame(stream_id=1, data=b"part-2", follows=True, next=True),
        F.CancelFrame(stream_id=1),
        F.PayloadFrame(stream_id=1, data=b"part-3", next=True),
    ]
    events = feed_bytewise(pair.server, b"".join(wire(f) for f in frames))
    assert events == []
    assert not pair.server.has_stream(1)
    assert pair.server.data_to_send() == b""
    # the stream's fragments are forgotten: a new request on another id works normally
    events = pair.server.receive_data(wire(F.RequestFnfFrame(stream_id=3, data=b"fresh")))
    assert events == [RequestReceived(3, FrameType.REQUEST_FNF, Payload(b"fresh"), 0, False)]


def _fragment_cancel_payload(conn, sid: int) -> list:
    """Feed ``conn``, byte by byte, a first PAYLOAD fragment (b"AAAA", FOLLOWS), a CANCEL and a
    whole PAYLOAD (b"BBBB") on ``sid``; return the events."""
    frames = [
        F.PayloadFrame(stream_id=sid, data=b"AAAA", follows=True, next=True),
        F.CancelFrame(stream_id=sid),
        F.PayloadFrame(stream_id=sid, data=b"BBBB", next=True),
    ]
    return feed_bytewise(conn, b"".join(wire(f) for f in frames))


@pytest.mark.parametrize("kind", ["stream", "channel"])
def test_cancel_during_inbound_payload_fragments_drops_them(kind: str) -> None:
    # "If the sender (Requester or Responder) wants to cancel sending a fragmented sequence,
    # it MAY send a CANCEL frame without finishing delivery of the fragments."  The fragments
    # before the CANCEL must never reach the application (neither alone nor glued to what
    # follows).
    pair = Pair()
    if kind == "stream":
        sid = pair.client.request_stream(Payload(b"s"), 5)
    else:
        sid = pair.client.request_channel(Payload(b"c"), 5)
    pair.to_server()
    events = _fragment_cancel_payload(pair.client, sid)
    delivered = [e.payload for e in events if isinstance(e, PayloadReceived) and e.payload]
    assert all(b"AAAA" not in p.data for p in delivered), events


def test_cancel_during_inbound_channel_payload_fragments_from_requester() -> None:
    pair = Pair()
    sid = pair.client.request_channel(Payload(b"c"), 5)
    pair.to_server()
    pair.server.send_request_n(sid, 5)
    pair.to_client()
    events = _fragment_cancel_payload(pair.server, sid)
    assert events == [CancelReceived(sid)]
    assert not pair.server.has_stream(sid)


# ---------------------------------------------------------------------------------------------
# limits
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(REQUEST_CLASSES), ids=lambda k: k.name)
def test_oversized_request_is_invalid_and_not_delivered(kind: FrameType) -> None:
    pair = _fragmenting_pair(max_reassembled_size=200)
    sid = _request(pair.client, kind, Payload(_blob(150), _blob(100)))
    events = pair.to_server()
    assert not any(isinstance(e, RequestReceived) for e in events)
    assert not pair.server.has_stream(sid)
    out = pair.server.data_to_send()
    frames = decode_all(out)
    assert len(frames) == 1
    assert isinstance(frames[0], F.ErrorFrame)
    assert frames[0].stream_id == sid and frames[0].error_code == ErrorCode.INVALID
    assert frames[0].data
    assert pair.server.is_open
    client_events = pair.client.receive_data(out)
    if kind == FrameType.REQUEST_FNF:
        assert client_events == []  # the requester forgot the stream when it sent it
    else:
        assert len(client_events) == 1 and isinstance(client_events[0], StreamErrored)
        assert isinstance(client_events[0].error, InvalidError)


def test_oversized_request_first_fragment_alone_over_limit() -> None:
    server = make_server(max_reassembled_size=10)
    server.receive_data(wire(setup_frame()))
    frame = F.RequestResponseFrame(stream_id=1, data=_blob(20), follows=True)
    assert server.receive_data(wire(frame)) == []
    (err,) = decode_all(server.data_to_send())
    assert isinstance(err, F.ErrorFrame) and err.stream_id == 1
    assert err.error_code == ErrorCode.INVALID
    tail = F.PayloadFrame(stream_id=1, data=b"x", next=True)
    assert server.receive_data(wire(tail)) == []
    assert server.data_to_send() == b""


@directions
def test_oversized_payload_cancels_and_errors_the_stream(direction: str) -> None:
    pair, rq, rs, sid = _fragmenting_stream(direction, 5, max_reassembled_size=200)
    rs.send_payload(sid, Payload(_blob(80)))
    rs.send_payload(sid, Payload(_blob(150), _blob(100)))
    rs.send_payload(sid, Payload(_blob(20)))
    events = pair.deliver(rs)
    assert events[0] == PayloadReceived(sid, Payload(_blob(80)), False)
    assert len(events) == 2
    assert isinstance(events[1], StreamErrored) and events[1].stream_id == sid
    assert isinstance(events[1].error, PayloadTooLargeError)
    assert not rq.has_stream(sid)
    frames = decode_all(out := rq.data_to_send())
    assert frames == [F.CancelFrame(stream_id=sid)]
    assert rq.is_open
    assert rs.receive_data(out) == [CancelReceived(sid)]
    assert not rs.has_stream(sid)


def test_endless_request_fragments_are_bounded() -> None:
    limit = 1_000
    server = make_server(max_reassembled_size=limit)
    server.receive_data(wire(setup_frame()))
    server.receive_data(wire(F.RequestStreamFrame(stream_id=1, initial_request_n=1,
                                                  data=_blob(50), follows=True)))
    fragment = wire(F.PayloadFrame(stream_id=1, data=_blob(50), follows=True, next=True))
    errors = []
    for _ in range(1_000):  # 50 KB offered against a 1 KB limit
        assert server.receive_data(fragment) == []
        errors.extend(decode_all(server.data_to_send()))
    assert len(errors) == 1
    assert isinstance(errors[0], F.ErrorFrame) and errors[0].error_code == ErrorCode.INVALID
    assert server.stream_count == 0
    assert server.is_open


def test_endless_payload_fragments_are_bounded() -> None:
    limit = 1_000
    pair = Pair(client_config={"max_reassembled_size": limit})
    sid = pair.client.request_stream(Payload(b"s"), 1)
    pair.to_server()
    fragment = wire(F.PayloadFrame(stream_id=sid, data=_blob(50), follows=True, next=True))
    events = []
    out = []
    for _ in range(1_000):
        events.extend(pair.client.receive_data(fragment))
        out.extend(decode_all(pair.client.data_to_send()))
    assert len(events) == 1 and isinstance(events[0], StreamErrored)
    assert isinstance(events[0].error, PayloadTooLargeError)
    assert out == [F.CancelFrame(stream_id=sid)]
    assert pair.client.stream_count == 0


def test_payload_over_max_frame_length_is_fragmented_without_fragment_size() -> None:
    # "RSocket Frames (Header + Payload) MUST be limited to 16,777,215 bytes"
    pair = Pair()
    data = b"\x5a" * 17_000_000
    sid = pair.client.request_response(Payload(data, b"m"))
    out = pair.client.data_to_send()
    frames = split_frames(out)
    assert len(frames) == 2
    # at most 16,777,212 bytes: rsocket-java's TCP decoder counts the length prefix in its
    # 16,777,215-byte limit (config.DEFAULT_OUTBOUND_FRAME_LIMIT)
    assert max(len(f) for f in frames) == MAX_FRAME_LENGTH - 3
    events = pair.server.receive_data(out)
    assert len(events) == 1
    ev = events[0]
    assert isinstance(ev, RequestReceived) and ev.stream_id == sid
    assert ev.payload.metadata == b"m"
    assert len(ev.payload.data) == len(data) and ev.payload.data == data


# ---------------------------------------------------------------------------------------------
# property: any payload, any fragment size
# ---------------------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(fragment_size=st.integers(64, 300),
       data=st.binary(max_size=1500),
       metadata=st.none() | st.binary(max_size=700))
def test_fragmentation_roundtrip_property(fragment_size: int, data: bytes,
                                         metadata: bytes | None) -> None:
    pair = Pair(client_config={"fragment_size": fragment_size},
                server_config={"fragment_size": fragment_size})
    payload = Payload(data, metadata)
    sid = pair.client.request_stream(payload, 1)
    out = pair.client.data_to_send()
    frames = split_frames(out)
    assert all(len(f) <= fragment_size for f in frames)
    _check_metadata_before_data([F.decode(f) for f in frames])
    assert pair.server.receive_data(out) == [
        RequestReceived(sid, FrameType.REQUEST_STREAM, payload, 1, False)]
    pair.server.send_payload(sid, payload, complete=True)
    out = pair.server.data_to_send()
    assert all(len(f) <= fragment_size for f in split_frames(out))
    assert pair.client.receive_data(out) == [PayloadReceived(sid, payload, True)]
