"""Tests for rsocket_tx.mux.deadlines: timers as data, time passed in."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.mux.deadlines import Deadlines


def test_empty() -> None:
    d: Deadlines[str] = Deadlines()
    assert d.next() is None
    assert d.pop_expired(1e9) == []
    assert len(d) == 0


def test_set_next_pop() -> None:
    d: Deadlines[str] = Deadlines()
    d.set("keepalive", 20.0)
    d.set("setup", 10.0)
    assert d.next() == 10.0
    assert d.get("keepalive") == 20.0 and "setup" in d
    assert d.pop_expired(9.999) == []
    assert d.pop_expired(10.0) == ["setup"]  # a deadline at now has expired
    assert d.next() == 20.0
    assert d.pop_expired(100.0) == ["keepalive"]
    assert d.next() is None and len(d) == 0


def test_move_and_cancel() -> None:
    d: Deadlines[str] = Deadlines()
    d.set("a", 5.0)
    d.set("a", 50.0)  # moved later
    assert d.next() == 50.0
    assert d.pop_expired(10.0) == []
    d.set("b", 1.0)
    d.cancel("b")
    d.cancel("missing")
    assert d.get("b") is None
    assert d.pop_expired(60.0) == ["a"]


def test_ties_in_set_order_and_unorderable_keys() -> None:
    d: Deadlines[object] = Deadlines()
    keys = [object(), object(), object()]
    for k in keys:
        d.set(k, 3.0)
    assert d.pop_expired(3.0) == keys


@given(st.lists(st.tuples(st.sampled_from("abcde"), st.one_of(
    st.none(), st.floats(0, 100, allow_nan=False))), max_size=30),
    st.floats(0, 100, allow_nan=False))
def test_matches_a_dict_model(ops: list[tuple[str, float | None]], now: float) -> None:
    d: Deadlines[str] = Deadlines()
    model: dict[str, float] = {}
    for key, when in ops:
        if when is None:
            d.cancel(key)
            model.pop(key, None)
        else:
            d.set(key, when)
            model[key] = when
    assert d.next() == (min(model.values()) if model else None)
    expired = d.pop_expired(now)
    assert sorted(expired) == sorted(k for k, t in model.items() if t <= now)
    assert [model[k] for k in expired] == sorted(model[k] for k in expired)
    assert len(d) == sum(1 for t in model.values() if t > now)


def test_keys_must_be_hashable() -> None:
    d: Deadlines[object] = Deadlines()
    with pytest.raises(TypeError):
        d.set([], 1.0)
