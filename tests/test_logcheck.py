"""The check behind the autouse ``no_logged_failures`` fixture (tests/conftest.py) and the
interop ``no_logged_errors`` fixture: :mod:`logcheck`."""

from __future__ import annotations

import pytest
from logcheck import LogCapture, at_least_warn, check
from twisted.internet.defer import Deferred
from twisted.logger import Logger

_log = Logger()


@pytest.mark.logs_failure("checks what LogCapture sees",
                          match="ValueError: boom|KeyError: 'nobody handles me'")
def test_a_logged_failure_and_an_unhandled_error_in_a_collected_deferred_are_seen():
    capture = LogCapture().start()
    try:
        raise ValueError("boom")
    except ValueError:
        _log.failure("handling went wrong")
    d = Deferred()
    d.errback(KeyError("nobody handles me"))
    del d  # collected by LogCapture.stop's gc.collect(): logged then
    _log.info("just information")
    _log.warn("a warning")
    seen = capture.stop()
    text = "\n".join(seen)
    assert "handling went wrong" in text and "ValueError: boom" in text
    assert "KeyError: 'nobody handles me'" in text and len(seen) == 2
    assert "just information" not in text and "a warning" not in text


def test_the_strict_capture_also_sees_warnings():
    capture = LogCapture(at_least_warn).start()
    _log.info("just information")
    _log.warn("a warning")
    seen = capture.stop()
    assert seen == ["a warning"]


def test_check_without_a_marker_refuses_anything_logged():
    check([])
    with pytest.raises(AssertionError, match="logged during the test:\nthe failure"):
        check(["the failure"])


def test_check_with_a_marker_wants_at_least_one_failure_and_only_matching_ones():
    expected = ("on purpose", "policy .* failed")
    check(["the policy X failed\ntraceback"], expected)
    with pytest.raises(AssertionError, match="logged no failure"):
        check([], expected)
    with pytest.raises(AssertionError, match="not matching"):
        check(["the policy X failed", "something else"], expected)


@pytest.mark.logs_failure("checks the marker itself", match="KeyError: 'declared'")
def test_a_marked_test_may_log_what_it_declares():
    d = Deferred()
    d.errback(KeyError("declared"))
    del d
