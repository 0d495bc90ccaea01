"""What the code under test logged through ``twisted.logger`` during a test: the one
implementation behind the autouse ``no_logged_failures`` fixture (``tests/conftest.py``, every
test) and the interop ``no_logged_errors`` fixture (``tests/interop/conftest.py``, which is
stricter: warnings too).

A *logged failure* is an event carrying ``log_failure``: ``log.failure(...)``, the legacy
``twisted.python.log.err(...)``, an "Unhandled error in Deferred" logged when the Deferred is
garbage collected (Twisted logs it as a ``critical`` line without a failure, then the failure:
only the latter counts), an "Unhandled Error" of the reactor.
"""

from __future__ import annotations

import gc
import re

from twisted.logger import LogLevel, formatEvent, globalLogPublisher


def is_logged_failure(event: dict) -> bool:
    """True for an event that reports an unhandled failure (see the module docstring)."""
    return "log_failure" in event


def describe(event: dict) -> str:
    """The event's message followed by its failure's traceback (if any), one string."""
    failure = event.get("log_failure")
    return formatEvent(event) + (f"\n{failure.getTraceback()}" if failure is not None else "")


class LogCapture:
    """Records the events published to the global log publisher between :meth:`start` and
    :meth:`stop` that ``predicate(event)`` selects, as :func:`describe` strings.

    :param predicate: ``event dict -> bool``; :func:`is_logged_failure` unless given.
    """

    def __init__(self, predicate=is_logged_failure) -> None:
        self.predicate = predicate
        self.seen: list[str] = []

    def _observe(self, event: dict) -> None:
        if self.predicate(event):
            self.seen.append(describe(event))

    def start(self) -> LogCapture:
        globalLogPublisher.addObserver(self._observe)
        return self

    def stop(self) -> list[str]:
        """Collect garbage first (an unhandled error in a Deferred is logged when the Deferred
        is collected), stop observing; returns what was seen."""
        gc.collect()
        globalLogPublisher.removeObserver(self._observe)
        return self.seen


def at_least_warn(event: dict) -> bool:
    """A logged failure or any event at level warn or above (``no_logged_errors``)."""
    level = event.get("log_level")
    return is_logged_failure(event) or (level is not None and level >= LogLevel.warn)


def check(seen: list[str], expected: tuple[str, str] | None = None) -> None:
    """Fail (AssertionError) unless ``seen`` is what the test may log.

    :param seen: :func:`describe` strings of what was logged.
    :param expected: None (nothing may be logged) or ``(reason, match)`` of a
        ``pytest.mark.logs_failure``: at least one entry must match the regular expression
        ``match`` (``re.search``) and every entry must.
    """
    if expected is None:
        assert not seen, "logged during the test:\n" + "\n".join(seen)
        return
    reason, match = expected
    pattern = re.compile(match)
    unexpected = [entry for entry in seen if not pattern.search(entry)]
    assert seen, (f"the test is marked logs_failure({reason!r}, match={match!r}) but logged "
                  "no failure")
    assert not unexpected, (f"logged during the test, not matching {match!r}:\n"
                            + "\n".join(unexpected))
