"""Tests for rsocket_tx.mux.credit: items (RSocket request-n) and bytes (Jini rations)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rsocket_tx.mux.credit import MAX_CREDIT, Credit, CreditUnit
from rsocket_tx.mux.errors import CreditExceeded, CreditOverflow


def test_defaults() -> None:
    c = Credit(CreditUnit.ITEMS)
    assert (c.available, c.maximum, c.unlimited) == (0, MAX_CREDIT, False)
    assert MAX_CREDIT == 2**31 - 1
    assert "items" in repr(c)


def test_initial_out_of_range() -> None:
    with pytest.raises(ValueError):
        Credit(CreditUnit.BYTES, -1)
    with pytest.raises(ValueError):
        Credit(CreditUnit.BYTES, 11, maximum=10)


def test_jini_ration_consume_past_it_is_a_violation() -> None:
    ration = Credit(CreditUnit.BYTES, 32_768)
    ration.consume(1024)
    assert ration.available == 31_744
    with pytest.raises(CreditExceeded) as info:
        ration.consume(31_745)
    assert (info.value.requested, info.value.available, info.value.unit) == (
        31_745, 31_744, "bytes")
    assert ration.available == 31_744  # unchanged
    ration.consume(31_744)
    assert ration.available == 0


def test_jini_ration_overflow_is_a_violation() -> None:
    ration = Credit(CreditUnit.BYTES, MAX_CREDIT - 10)
    ration.grant(10)
    assert ration.available == MAX_CREDIT
    with pytest.raises(CreditOverflow) as info:
        ration.grant(1)
    assert info.value.maximum == MAX_CREDIT
    assert ration.available == MAX_CREDIT


def test_jini_unlimited_ration() -> None:
    ration = Credit(CreditUnit.BYTES, unlimited=True)
    ration.consume(10**9)
    ration.grant(MAX_CREDIT)
    ration.grant(MAX_CREDIT)  # no overflow: unlimited stays unlimited
    assert ration.take(10**12) == 10**12
    assert "unlimited" in repr(ration)


def test_rsocket_request_n_saturates() -> None:
    credit = Credit(CreditUnit.ITEMS)
    credit.grant_saturating(5)
    credit.grant_saturating(MAX_CREDIT)
    assert credit.available == MAX_CREDIT
    credit.consume(1)
    assert credit.available == MAX_CREDIT - 1


def test_negative_grants_refused() -> None:
    c = Credit(CreditUnit.ITEMS, 3)
    with pytest.raises(ValueError):
        c.grant(-1)
    with pytest.raises(ValueError):
        c.grant_saturating(-1)
    assert c.available == 3


def test_take_gives_what_is_available() -> None:
    c = Credit(CreditUnit.BYTES, 1000)
    assert c.take(1024) == 1000
    assert c.available == 0
    assert c.take(5) == 0
    c.grant(16_384)
    assert c.take(1024) == 1024
    assert c.available == 15_360


@given(st.integers(0, 1000), st.lists(st.tuples(
    st.sampled_from(["grant", "sat", "consume", "take"]), st.integers(0, 3000))))
def test_credit_never_negative_nor_past_maximum(initial: int,
                                                ops: list[tuple[str, int]]) -> None:
    c = Credit(CreditUnit.BYTES, initial, maximum=5000)
    model = initial
    for op, n in ops:
        if op == "grant":
            if model + n > 5000:
                with pytest.raises(CreditOverflow):
                    c.grant(n)
            else:
                c.grant(n)
                model += n
        elif op == "sat":
            c.grant_saturating(n)
            model = min(model + n, 5000)
        elif op == "consume":
            if n > model:
                with pytest.raises(CreditExceeded):
                    c.consume(n)
            else:
                c.consume(n)
                model -= n
        else:
            got = c.take(n)
            assert got == min(n, model)
            model -= got
        assert c.available == model
        assert 0 <= c.available <= 5000
