"""The pure resume pieces (``rsocket_tx.core.resume``): positions, the resume buffer and its
byte bound, the server's RESUME decision, tokens, backoff, the session store."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.core import frames as F
from rsocket_tx.core.config import (
    DEFAULT_RECONNECT_INITIAL_DELAY,
    DEFAULT_RECONNECT_JITTER,
    DEFAULT_RECONNECT_MAX_DELAY,
)
from rsocket_tx.core.resume import (
    DEFAULT_TOKEN_SIZE,
    Backoff,
    BackoffAttempts,
    ResumeBuffer,
    ResumePositionError,
    SessionStore,
    check_resume,
    is_positioned,
    new_token,
    positioned_size,
    resume_version_supported,
)

# ------------------------------------------------------------------------------------- tokens


def test_tokens_are_16_random_bytes_by_default():
    tokens = {new_token() for _ in range(200)}
    assert len(tokens) == 200  # 128 random bits: no repeats
    assert all(len(t) == DEFAULT_TOKEN_SIZE == 16 for t in tokens)


@pytest.mark.parametrize("size", [1, 32, 65535])
def test_token_size(size):
    assert len(new_token(size)) == size


@pytest.mark.parametrize("size", [0, -1, 65536, True, 1.5])
def test_token_size_out_of_range(size):
    with pytest.raises(ValueError, match="1..65535"):
        new_token(size)


# ---------------------------------------------------------------------------------- positions

def _payload(sid: int, data: bytes = b"x") -> bytes:
    return F.encode(F.PayloadFrame(stream_id=sid, data=data, next=True))


POSITIONED = [
    F.encode(F.RequestResponseFrame(stream_id=1, data=b"req")),
    F.encode(F.RequestFnfFrame(stream_id=3, data=b"fnf")),
    F.encode(F.RequestStreamFrame(stream_id=5, initial_request_n=3, data=b"s")),
    F.encode(F.RequestChannelFrame(stream_id=7, initial_request_n=3, data=b"c")),
    F.encode(F.RequestNFrame(stream_id=2, request_n=10)),
    F.encode(F.CancelFrame(stream_id=4)),
    F.encode(F.ErrorFrame(stream_id=9, error_code=0x201, data=b"boom")),
    _payload(0x7FFFFFFF),
]
NOT_POSITIONED = [
    F.encode(F.SetupFrame(keepalive_interval=1, max_lifetime=1, metadata_mime_type=b"a",
                          data_mime_type=b"b", resume_token=b"t")),
    F.encode(F.LeaseFrame(ttl=1, number_of_requests=1)),
    F.encode(F.KeepaliveFrame(respond=True, last_received_position=5)),
    F.encode(F.MetadataPushFrame(metadata=b"m")),
    F.encode(F.ErrorFrame(stream_id=0, error_code=0x101, data=b"bye")),
    F.encode(F.ResumeFrame(token=b"t", last_received_server_position=1,
                           first_available_client_position=0)),
    F.encode(F.ResumeOkFrame(last_received_client_position=1)),
]


@pytest.mark.parametrize("frame", POSITIONED)
def test_stream_frames_have_positions(frame):
    assert is_positioned(frame)


@pytest.mark.parametrize("frame", NOT_POSITIONED)
def test_connection_frames_have_no_position(frame):
    assert not is_positioned(frame)


def test_positioned_size_counts_frame_bytes_without_length_prefix():
    frames = POSITIONED + NOT_POSITIONED
    random.Random(7).shuffle(frames)
    assert positioned_size(frames) == sum(len(f) for f in POSITIONED)
    # a PAYLOAD of 5 data bytes: 6 header bytes + 5, no 3-byte prefix
    assert positioned_size([_payload(1, b"12345")]) == 11
    assert positioned_size([]) == 0


@pytest.mark.parametrize("version,ok", [((1, 0), True), ((0, 2), True), ((0, 1), True),
                                        ((2, 0), False), ((1, 1), False), ((0, 0), False)])
def test_resume_versions_include_the_swapped_one_of_rsocket_js(version, ok):
    assert resume_version_supported(*version) is ok


# ------------------------------------------------------------------------------ resume buffer

def _frames(sizes):
    """Frames of the given sizes on streams 1, 2, 3... (only the stream id matters here)."""
    return [(i + 1).to_bytes(4, "big") + bytes(n - 4) for i, n in enumerate(sizes)]


def test_buffer_positions_advance_by_frame_length():
    b = ResumeBuffer(1000)
    assert (b.position, b.first_position, b.size, len(b)) == (0, 0, 0, 0)
    for f in _frames([10, 20, 30]):
        b.append(f)
    assert (b.position, b.first_position, b.size, len(b)) == (60, 0, 60, 3)


def test_acknowledge_drops_whole_frames_only():
    b = ResumeBuffer(1000)
    for f in _frames([10, 20, 30]):
        b.append(f)
    b.acknowledge(15)  # inside the second frame: it stays
    assert (b.first_position, b.size, len(b)) == (10, 50, 2)
    b.acknowledge(30)
    assert (b.first_position, b.size, len(b)) == (30, 30, 1)
    b.acknowledge(5)  # stale acknowledgement: nothing changes
    assert (b.first_position, b.size) == (30, 30)
    b.acknowledge(60)
    assert (b.first_position, b.size, len(b), b.position) == (60, 0, 0, 60)


def test_acknowledging_unsent_bytes_is_an_error():
    b = ResumeBuffer(1000)
    b.append(_frames([10])[0])
    with pytest.raises(ResumePositionError, match="acknowledged position 11, but only 10"):
        b.acknowledge(11)


def test_bound_drops_oldest_frames_and_resume_before_them_fails():
    b = ResumeBuffer(50)
    for f in _frames([20, 20, 20]):  # 60 bytes > 50: the first frame goes
        b.append(f)
    assert (b.position, b.first_position, b.size, b.dropped) == (60, 20, 40, 20)
    with pytest.raises(ResumePositionError,
                       match=r"from position 0 are no longer kept.*starts at position 20.*"
                             r"20 bytes were dropped past the resume buffer limit of 50 bytes"):
        b.replay_from(0)
    assert [len(f) for f in b.replay_from(20)] == [20, 20]


def test_a_frame_larger_than_the_bound_is_not_kept():
    b = ResumeBuffer(10)
    b.append(_frames([30])[0])
    assert (b.position, b.first_position, b.size, len(b), b.dropped) == (30, 30, 0, 0, 30)
    assert b.replay_from(30) == []
    with pytest.raises(ResumePositionError):
        b.replay_from(0)


def test_replay_from_a_boundary_returns_the_rest_and_trims():
    b = ResumeBuffer(1000)
    frames = _frames([10, 20, 30])
    for f in frames:
        b.append(f)
    assert b.replay_from(10) == frames[1:]
    assert (b.first_position, b.size) == (10, 50)
    assert b.replay_from(60) == []
    assert (b.first_position, b.size, len(b)) == (60, 0, 0)


def test_replay_from_inside_a_frame_fails_and_keeps_the_buffer():
    b = ResumeBuffer(1000)
    frames = _frames([10, 20])
    for f in frames:
        b.append(f)
    with pytest.raises(ResumePositionError, match="position 15 is inside a frame"):
        b.replay_from(15)
    assert (b.first_position, b.size) == (0, 30)
    assert b.replay_from(0) == frames


def test_replay_past_what_was_sent_fails():
    b = ResumeBuffer(1000)
    b.append(_frames([10])[0])
    with pytest.raises(ResumePositionError, match="past the 10 bytes"):
        b.replay_from(11)


@pytest.mark.parametrize("bad", [0, -5, True, 2.0])
def test_buffer_size_must_be_positive(bad):
    with pytest.raises(ValueError, match="positive number of bytes"):
        ResumeBuffer(bad)


@given(st.lists(st.one_of(st.integers(6, 40).map(lambda n: ("send", n)),
                          st.integers(0, 400).map(lambda p: ("ack", p))), max_size=60),
       st.integers(6, 200))
def test_buffer_invariants(ops, bound):
    """Whatever is sent and acknowledged: size is what is kept, within the bound, and replaying
    from any kept boundary gives exactly the bytes sent after it."""
    b = ResumeBuffer(bound)
    sent = b""
    boundaries = [0]
    for op, n in ops:
        if op == "send":
            f = (len(boundaries)).to_bytes(4, "big") + bytes(n - 4)
            b.append(f)
            sent += f
            boundaries.append(len(sent))
        elif n <= b.position:
            b.acknowledge(n)
        else:
            with pytest.raises(ResumePositionError):
                b.acknowledge(n)
        assert b.position == len(sent)
        assert b.size == b.position - b.first_position <= bound
        assert b.first_position in boundaries
    kept = [p for p in boundaries if p >= b.first_position]
    for p in kept:
        copy = ResumeBuffer(bound)
        copy._frames = type(b._frames)(b._frames)
        copy.position, copy.first_position, copy.size = b.position, b.first_position, b.size
        assert b"".join(copy.replay_from(p)) == sent[p:]


# ------------------------------------------------------------------------------ RESUME decision

def _server_buffer():
    b = ResumeBuffer(1000)
    for f in _frames([10, 20, 30]):
        b.append(f)
    b.acknowledge(10)
    return b


def test_resume_accepted_resends_from_the_clients_position():
    b = _server_buffer()
    again = check_resume(b, received=100, last_received_server_position=30,
                         first_available_client_position=80)
    assert [len(f) for f in again] == [30]


def test_resume_refused_when_the_client_dropped_frames_the_server_lacks():
    b = _server_buffer()
    with pytest.raises(ResumePositionError, match="keeps frames only from position 101.*"
                                                  "received up to position 100"):
        check_resume(b, received=100, last_received_server_position=30,
                     first_available_client_position=101)


@pytest.mark.parametrize("position,why", [(0, "no longer kept"), (15, "inside a frame"),
                                          (61, "past the 60 bytes")])
def test_resume_refused_when_the_server_cannot_resend(position, why):
    b = _server_buffer()
    with pytest.raises(ResumePositionError, match=why):
        check_resume(b, received=0, last_received_server_position=position,
                     first_available_client_position=0)


# ---------------------------------------------------------------------------------- backoff

def test_backoff_doubles_up_to_the_cap_and_resets():
    b = BackoffAttempts(Backoff(100, 1000, jitter=0))
    assert [b.next_delay() for _ in range(6)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]
    assert b.attempts == 6
    b.reset()
    assert b.next_delay() == 0.1 and b.attempts == 1


def test_backoff_from_zero_retries_at_once_then_grows():
    b = BackoffAttempts(Backoff(0, 8, jitter=0))
    assert [b.next_delay() for _ in range(6)] == [0.0, 0.001, 0.002, 0.004, 0.008, 0.008]
    assert [Backoff(0, 100, jitter=0, multiplier=3).delay(n) for n in range(5)] == \
        [0, 1, 3, 9, 27]


def test_backoff_multiplier_and_a_huge_attempt_stay_within_the_cap():
    assert [Backoff(10, 1000, jitter=0, multiplier=10).delay(n) for n in range(4)] == \
        [10, 100, 1000, 1000]
    assert Backoff(10, 1000, jitter=0, multiplier=1e300).delay(10**6) == 1000
    assert Backoff(10, 1000, jitter=0).delay(10**6) == 1000


def test_backoff_jitter_is_seeded_and_bounded():
    a = BackoffAttempts(Backoff(100, 200, jitter=0.5), rng=random.Random(3))
    b = BackoffAttempts(Backoff(100, 200, jitter=0.5), rng=random.Random(3))
    delays = [a.next_delay() for _ in range(50)]
    assert delays == [b.next_delay() for _ in range(50)]
    assert all(0.1 <= d <= 0.2 for d in delays)  # within [initial, max]
    assert len(set(delays)) > 1


def test_backoff_defaults_are_the_config_defaults():
    b = Backoff()
    assert (b.initial_delay, b.max_delay, b.jitter, b.max_attempts) == (
        DEFAULT_RECONNECT_INITIAL_DELAY, DEFAULT_RECONNECT_MAX_DELAY,
        DEFAULT_RECONNECT_JITTER, None)


@pytest.mark.parametrize("kwargs", [dict(initial_delay=-1, max_delay=5),
                                    dict(initial_delay=10, max_delay=5),
                                    dict(initial_delay=1, max_delay=5, multiplier=0.5),
                                    dict(initial_delay=1, max_delay=5, jitter=1.5),
                                    dict(initial_delay=1.5, max_delay=5),
                                    dict(max_attempts=0)])
def test_backoff_validation(kwargs):
    with pytest.raises(ValueError):
        Backoff(**kwargs)


# ---------------------------------------------------------------------------- session store

def test_session_store_refuses_a_token_in_use_and_past_its_limit():
    store: SessionStore[object] = SessionStore(2)
    a, b, c = object(), object(), object()
    assert store.add(b"a", a) is None
    assert store.add(b"a", c) == "the resume token is already in use"
    assert store.add(b"b", b) is None
    assert store.add(b"c", c) == "too many resumable sessions (the limit is 2)"
    assert len(store) == 2 and b"a" in store and store.get(b"c") is None
    store.remove(b"a", c)  # not a's session: kept
    assert store.get(b"a") is a
    store.remove(b"a", a)
    assert b"a" not in store
    store.remove(b"b")
    assert len(store) == 0 and store.values() == []
    assert store.add(b"c", c) is None


def test_session_store_limit_must_be_positive():
    with pytest.raises(ValueError):
        SessionStore(0)
