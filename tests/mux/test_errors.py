"""Tests for rsocket_tx.mux.errors: every error is a MuxError and says what and the limit."""

from __future__ import annotations

import pytest

from rsocket_tx.mux.errors import (
    CreditExceeded,
    CreditOverflow,
    IdsExhausted,
    MuxError,
    ReassemblyLimitExceeded,
    StreamIdInUse,
    StreamIdOutOfRange,
    StreamLimitExceeded,
)


@pytest.mark.parametrize(
    ("error", "words", "attrs"),
    [
        (StreamLimitExceeded(128, 128), ["128 open", "limit is 128"],
         {"open_streams": 128, "limit": 128}),
        (StreamIdInUse(5), ["stream id 5", "in use"], {"stream_id": 5}),
        (StreamIdOutOfRange(128, 127), ["128", "[0, 127]"], {"stream_id": 128, "maximum": 127}),
        (IdsExhausted(2**31 - 1, reusable=False), ["2147483647", "never reused"],
         {"maximum": 2**31 - 1, "reusable": False}),
        (IdsExhausted(127, reusable=True), ["127", "in use"], {"reusable": True}),
        (CreditExceeded(1025, 1024, "bytes"), ["1025 bytes", "credit of 1024 bytes"],
         {"requested": 1025, "available": 1024, "unit": "bytes"}),
        (CreditOverflow(10, 2**31 - 5, 2**31 - 1, "bytes"),
         ["grant of 10 bytes", "maximum of 2147483647 bytes"],
         {"granted": 10, "maximum": 2**31 - 1}),
        (ReassemblyLimitExceeded(70_000, 65_536), ["70000 bytes", "limit of 65536 bytes"],
         {"size": 70_000, "limit": 65_536}),
    ],
)
def test_error_says_what_and_the_limit(error: MuxError, words: list[str],
                                       attrs: dict[str, object]) -> None:
    assert isinstance(error, MuxError)
    assert error.message == str(error)
    for word in words:
        assert word in str(error)
    for name, value in attrs.items():
        assert getattr(error, name) == value


def test_base_is_an_exception() -> None:
    assert issubclass(MuxError, Exception)
    assert MuxError("x").message == "x"
