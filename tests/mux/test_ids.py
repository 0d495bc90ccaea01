"""Tests for rsocket_tx.mux.ids: RSocket parity ids, Jini lowest-free ids, peer-chosen ids."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.mux.errors import IdsExhausted, MuxError, StreamIdInUse, StreamIdOutOfRange
from rsocket_tx.mux.ids import IdPolicy, LowestFreeIds, ParityIds, PeerChosenIds

MAX_U31 = 2**31 - 1


def test_every_policy_is_an_id_policy() -> None:
    for policy in (ParityIds(1, 9), LowestFreeIds(4), PeerChosenIds(4)):
        assert isinstance(policy, IdPolicy)


# RSocket 1.0 §Stream Identifiers: client odd, server even, never reused


def test_parity_client_odd_server_even() -> None:
    client, server = ParityIds(1, MAX_U31), ParityIds(2, MAX_U31)
    assert [client.allocate() for _ in range(3)] == [1, 3, 5]
    assert [server.allocate() for _ in range(3)] == [2, 4, 6]
    assert client.is_local(7) and not client.is_local(2)
    assert server.is_local(8) and not server.is_local(1)
    assert not server.is_local(0)  # stream 0 is the connection's


def test_parity_never_reuses_and_does_not_wrap() -> None:
    ids = ParityIds(MAX_U31 - 2, MAX_U31)
    assert ids.allocate() == MAX_U31 - 2
    ids.release(MAX_U31 - 2)  # no effect
    assert not ids.exhausted and ids.next_id == MAX_U31
    assert ids.allocate() == MAX_U31
    assert ids.exhausted
    for _ in range(2):  # exhausted for ever: no wrap-around to 1
        with pytest.raises(IdsExhausted) as info:
            ids.allocate()
        assert info.value.reusable is False and info.value.maximum == MAX_U31


def test_parity_even_side_exhausts_below_the_maximum() -> None:
    ids = ParityIds(MAX_U31 - 1, MAX_U31)  # the last even id is 2^31-2
    assert ids.allocate() == MAX_U31 - 1
    with pytest.raises(IdsExhausted):
        ids.allocate()


def test_parity_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        ParityIds(0, 10)
    with pytest.raises(ValueError):
        ParityIds(5, 3)


# Jini ERI mux: the lowest free session id of 0..127, reused


def test_lowest_free_takes_lowest_and_reuses() -> None:
    ids = LowestFreeIds(128)
    assert [ids.allocate() for _ in range(4)] == [0, 1, 2, 3]
    ids.release(1)
    ids.release(0)
    assert ids.allocate() == 0
    assert ids.allocate() == 1
    assert ids.allocate() == 4
    assert len(ids) == 5 and 4 in ids and 5 not in ids
    assert ids.is_local(127) and not ids.is_local(128)


def test_lowest_free_exhausts_at_size() -> None:
    ids = LowestFreeIds(128)
    assert [ids.allocate() for _ in range(128)] == list(range(128))
    with pytest.raises(IdsExhausted) as info:
        ids.allocate()
    assert info.value.reusable is True and info.value.maximum == 127
    ids.release(77)
    assert ids.allocate() == 77


def test_lowest_free_release_of_unused_id_fails() -> None:
    ids = LowestFreeIds(4)
    with pytest.raises(ValueError):
        ids.release(2)
    with pytest.raises(ValueError):
        LowestFreeIds(0)


def test_lowest_free_1000_sequential_sessions_reuse_id_0() -> None:
    ids = LowestFreeIds(128)
    for _ in range(1000):
        sid = ids.allocate()
        assert sid == 0
        ids.release(sid)


@given(st.lists(st.one_of(st.just(-1), st.integers(0, 15))))
def test_lowest_free_invariants(ops: list[int]) -> None:
    """-1 allocates; n >= 0 releases n if in use. The id allocated is always the smallest not
    in use, ids are unique, and all lie in 0..size-1."""
    ids = LowestFreeIds(16)
    used: set[int] = set()
    for op in ops:
        if op == -1:
            if len(used) == 16:
                with pytest.raises(IdsExhausted):
                    ids.allocate()
            else:
                sid = ids.allocate()
                assert sid == min(set(range(16)) - used)
                used.add(sid)
        elif op in used:
            ids.release(op)
            used.remove(op)
        assert len(ids) == len(used)
        assert all(i in ids for i in used)


# peer-chosen ids: Jini server, RS-network subscriptions of the peer


def test_peer_chosen_claim_release_reuse() -> None:
    ids = PeerChosenIds(127)
    ids.claim(5)
    assert 5 in ids and len(ids) == 1
    with pytest.raises(StreamIdInUse):
        ids.claim(5)
    ids.release(5)
    ids.claim(5)  # the subscriber may reuse an id once the subscription ended
    ids.release(99)  # not in use: ignored
    assert not ids.is_local(5)


@pytest.mark.parametrize("sid", [-1, 128, 255])
def test_peer_chosen_range(sid: int) -> None:
    ids = PeerChosenIds(127)
    with pytest.raises(StreamIdOutOfRange) as info:
        ids.claim(sid)
    assert info.value.maximum == 127
    assert len(ids) == 0


def test_peer_chosen_never_allocates() -> None:
    with pytest.raises(MuxError):
        PeerChosenIds(127).allocate()
    with pytest.raises(ValueError):
        PeerChosenIds(-1)


def test_parity_next_id_skips_forward_only() -> None:
    ids = ParityIds(2, 100)
    ids.next_id = 98
    assert ids.allocate() == 98
    assert ids.allocate() == 100
    assert ids.exhausted
    for bad in (97, 4):  # wrong parity; backwards (a reuse)
        with pytest.raises(ValueError):
            ids.next_id = bad
