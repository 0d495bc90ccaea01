"""Fixtures for the Twisted-layer tests; helpers live in twisted_support.py (a module name
that does not collide with tests/interop/conftest.py).

Every test fails when the code under test logs an unhandled failure (``no_logged_failures``,
autouse; :mod:`logcheck` says what counts).  A test that logs one on purpose says so with
``@pytest.mark.logs_failure("why", match=r"regex")``: it then fails unless it logs at least one
failure and every failure it logs matches ``regex``.  The tests marked so are the explicit list
(``grep -rn logs_failure tests``).
"""

from __future__ import annotations

import gc

import hypothesis
import pytest
import pytest_twisted
from logcheck import LogCapture, check
from twisted_support import Harness

# Property tests check what the code does, never how fast: no per-example deadline (the
# default 200 ms fails an example that a loaded machine, or a gc pass, delayed), and no
# health check failing because generating the examples was slow.
hypothesis.settings.register_profile(
    "rsocket_tx", deadline=None,
    suppress_health_check=[hypothesis.HealthCheck.too_slow])
hypothesis.settings.load_profile("rsocket_tx")


@pytest.fixture(scope="module", autouse=True)
def _gc_baseline():
    """Collect garbage once per module, then freeze what survives (``gc.freeze()``): the
    ``gc.collect()`` after each test (:meth:`logcheck.LogCapture.stop`) then looks only at
    what the module allocated, not at the whole heap (about 30 ms per test otherwise).  What an
    earlier module froze is thawed first, so nothing stays frozen past the next module."""
    gc.unfreeze()
    gc.collect()
    gc.freeze()


@pytest.fixture(autouse=True)
def no_logged_failures(request):
    """Fail the test (a teardown error) when an unhandled failure was logged during it, unless
    it is marked ``logs_failure(reason, match=regex)`` and logged only (and at least one)
    failures matching ``regex``."""
    marker = request.node.get_closest_marker("logs_failure")
    expected = None
    if marker is not None:
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason")
        match = marker.kwargs.get("match")
        if not reason or not match:
            pytest.fail("logs_failure needs a reason and match=regex", pytrace=False)
        expected = (reason, match)
    capture = LogCapture().start()
    yield
    check(capture.stop(), expected)


@pytest_twisted.async_yield_fixture
async def harness():
    h = Harness()
    yield h
    await h.cleanup()
