"""Tests for rsocket_tx.mux.streams: per-direction state, limits, removal on full close."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.mux.errors import StreamIdInUse, StreamLimitExceeded
from rsocket_tx.mux.ids import ParityIds
from rsocket_tx.mux.streams import MuxStream, StreamTable


class KindStream(MuxStream):
    """A protocol's stream: MuxStream plus its own slots."""

    __slots__ = ("kind",)

    def __init__(self, stream_id: int, kind: str, send_open: bool = True,
                 recv_open: bool = True) -> None:
        super().__init__(stream_id, send_open, recv_open)
        self.kind = kind


def test_mux_stream_slots_and_subclass() -> None:
    s = KindStream(3, "channel")
    assert (s.stream_id, s.send_open, s.recv_open, s.kind) == (3, True, True, "channel")
    with pytest.raises(AttributeError):
        s.other = 1  # type: ignore[attr-defined]
    assert "3" in repr(s)


def test_add_get_contains_len_iter() -> None:
    t: StreamTable[KindStream] = StreamTable(10)
    a, b = KindStream(1, "a"), KindStream(3, "b")
    t.add(a)
    t.add(b)
    assert t.get(1) is a and t.get(3) is b and t.get(5) is None
    assert 1 in t and 5 not in t
    assert len(t) == 2 and bool(t)
    assert list(t) == [a, b] == t.values()
    assert t.ids() == [1, 3]


def test_add_refuses_id_in_use() -> None:
    t: StreamTable[MuxStream] = StreamTable(10)
    t.add(MuxStream(7))
    with pytest.raises(StreamIdInUse) as info:
        t.add(MuxStream(7))
    assert info.value.stream_id == 7
    assert len(t) == 1


def test_limit_counts_every_stream_by_default() -> None:
    t: StreamTable[MuxStream] = StreamTable(2)
    t.add(MuxStream(0))
    t.add(MuxStream(1))
    assert not t.would_accept()
    with pytest.raises(StreamLimitExceeded) as info:
        t.add(MuxStream(2))
    assert (info.value.open_streams, info.value.limit) == (2, 2)
    t.remove(0)
    t.add(MuxStream(2))
    assert t.remote == 2


def test_limit_counts_only_peer_streams_with_is_local() -> None:
    # an RSocket client: odd ids are ours, even ids the server's
    t: StreamTable[MuxStream] = StreamTable(1, is_local=ParityIds(1, 99).is_local)
    for sid in (1, 3, 5):
        t.add(MuxStream(sid))
    assert t.remote == 0
    t.add(MuxStream(2))
    assert t.remote == 1
    with pytest.raises(StreamLimitExceeded):
        t.add(MuxStream(4))
    assert t.remove(2) is not None
    assert t.remote == 0
    t.add(MuxStream(4))


def test_negative_limit_refuses_every_counted_stream() -> None:
    t: StreamTable[MuxStream] = StreamTable(5)
    t.limit = -1  # a graceful close
    with pytest.raises(StreamLimitExceeded):
        t.add(MuxStream(2))


def test_half_close_removes_only_when_both_directions_are_closed() -> None:
    t: StreamTable[MuxStream] = StreamTable(5)
    s = MuxStream(1)
    t.add(s)
    assert t.close_send(s) is False
    assert not s.send_open and s.recv_open and 1 in t
    assert t.close_recv(s) is True
    assert 1 not in t and len(t) == 0 and t.remote == 0

    s = MuxStream(2)
    t.add(s)
    assert t.close_recv(s) is False
    assert t.close_send(s) is True
    assert 2 not in t


def test_remove_and_clear() -> None:
    t: StreamTable[MuxStream] = StreamTable(5)
    a, b = MuxStream(1), MuxStream(2)
    t.add(a)
    t.add(b)
    assert t.remove(9) is None
    assert t.remove(1) is a
    assert t.remove(1) is None
    t.add(a)
    assert t.clear() == [b, a]
    assert len(t) == 0 and t.remote == 0 and t.get(2) is None
    t.add(MuxStream(2))  # the table works after clear (get still sees it)
    assert t.get(2) is not None


def test_iteration_is_a_snapshot() -> None:
    t: StreamTable[MuxStream] = StreamTable(5)
    for sid in range(4):
        t.add(MuxStream(sid))
    for s in t:
        t.remove(s.stream_id)
    assert len(t) == 0


@given(st.lists(st.tuples(st.sampled_from(["add", "send", "recv", "remove"]),
                          st.integers(0, 7))))
def test_remote_count_matches_the_entries(ops: list[tuple[str, int]]) -> None:
    is_local = ParityIds(2, 100).is_local
    t: StreamTable[MuxStream] = StreamTable(3, is_local=is_local)
    model: dict[int, MuxStream] = {}
    for op, sid in ops:
        s = model.get(sid)
        if op == "add":
            counted = sum(1 for k in model if not is_local(k))
            if s is not None:
                with pytest.raises(StreamIdInUse):
                    t.add(MuxStream(sid))
            elif not is_local(sid) and counted >= 3:
                with pytest.raises(StreamLimitExceeded):
                    t.add(MuxStream(sid))
            else:
                model[sid] = MuxStream(sid)
                t.add(model[sid])
        elif s is not None and op == "send":
            if t.close_send(s):
                del model[sid]
        elif s is not None and op == "recv":
            if t.close_recv(s):
                del model[sid]
        elif op == "remove":
            assert t.remove(sid) is model.pop(sid, None)
        assert sorted(t.ids()) == sorted(model)
        assert t.remote == sum(1 for k in model if not is_local(k))
        assert all(s.send_open or s.recv_open for s in t)


def test_add_says_whether_the_peer_opened_the_stream() -> None:
    # the caller knows: it overrides is_local (and needs none)
    t: StreamTable[MuxStream] = StreamTable(1)
    t.add(MuxStream(1), remote=False)
    t.add(MuxStream(3), remote=False)
    t.add(MuxStream(2), remote=True)
    assert t.remote == 1 and t.is_remote(2) and not t.is_remote(1)
    with pytest.raises(StreamLimitExceeded):
        t.add(MuxStream(4), remote=True)
    t.add(MuxStream(4), remote=False)  # ours: not limited
    s = t.get(2)
    assert s is not None
    t.close_send(s)
    t.close_recv(s)
    assert t.remote == 0 and not t.is_remote(2)
    assert t.would_accept()


def test_add_records_remote_on_the_stream() -> None:
    t: StreamTable[MuxStream] = StreamTable(4)
    mine, theirs = MuxStream(1), MuxStream(2)
    assert mine.remote is False  # until added
    t.add(mine, remote=False)
    t.add(theirs)
    assert (mine.remote, theirs.remote) == (False, True)
    assert t.remove(1) is mine and t.remote == 1
    assert t.remove(2) is theirs and t.remote == 0
