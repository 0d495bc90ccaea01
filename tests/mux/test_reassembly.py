"""Tests for rsocket_tx.mux.reassembly: a cap per message and a budget per connection."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.mux.errors import ReassemblyLimitExceeded
from rsocket_tx.mux.reassembly import Reassembler, ReassemblyBudget


def test_joins_pieces_in_order() -> None:
    r = Reassembler(100)
    for piece in (b"ab", b"", b"cd", b"e"):
        r.append(piece)
    assert r.size == 5
    assert r.finish() == b"abcde"
    assert r.size == 0
    assert r.finish() == b""  # empty again


def test_single_piece_is_not_copied() -> None:
    r = Reassembler(100)
    piece = b"x" * 50
    r.append(piece)
    assert r.finish() is piece


def test_max_size_exactly_allowed_one_more_refused() -> None:
    r = Reassembler(10)
    r.append(b"x" * 6)
    r.append(b"x" * 4)
    with pytest.raises(ReassemblyLimitExceeded) as info:
        r.append(b"x")
    assert (info.value.size, info.value.limit) == (11, 10)
    assert r.size == 10  # the refused piece was not added


def test_budget_is_shared_across_streams() -> None:
    budget = ReassemblyBudget(100)
    a, b = Reassembler(80, budget), Reassembler(80, budget)
    a.append(b"x" * 60)
    b.append(b"y" * 40)
    assert budget.held == 100 and budget.available == 0
    with pytest.raises(ReassemblyLimitExceeded) as info:
        b.append(b"y")
    assert (info.value.size, info.value.limit) == (101, 100)
    assert b.size == 40
    a.discard()
    assert budget.held == 40
    b.append(b"y" * 10)
    assert b.finish() == b"y" * 50
    assert budget.held == 0


def test_budget_reserve_release() -> None:
    budget = ReassemblyBudget(10)
    budget.reserve(10)
    with pytest.raises(ReassemblyLimitExceeded):
        budget.reserve(1)
    with pytest.raises(ValueError):
        budget.release(11)
    budget.release(10)
    assert budget.held == 0
    with pytest.raises(ValueError):
        ReassemblyBudget(-1)


@given(st.lists(st.tuples(st.integers(0, 2), st.binary(max_size=40)), max_size=40))
def test_budget_held_equals_sum_of_sizes(pieces: list[tuple[int, bytes]]) -> None:
    budget = ReassemblyBudget(150)
    rs = [Reassembler(60, budget) for _ in range(3)]
    model = [b"", b"", b""]
    for i, piece in pieces:
        if not piece:
            assert rs[i].finish() == model[i]
            model[i] = b""
            continue
        try:
            rs[i].append(piece)
        except ReassemblyLimitExceeded:
            assert (len(model[i]) + len(piece) > 60
                    or sum(map(len, model)) + len(piece) > 150)
        else:
            model[i] += piece
        assert budget.held == sum(r.size for r in rs) == sum(map(len, model))
        assert budget.held <= 150
