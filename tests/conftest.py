"""Fixtures for the Twisted-layer tests; helpers live in twisted_support.py (a module name
that does not collide with tests/interop/conftest.py)."""

from __future__ import annotations

import pytest_twisted
from twisted_support import Harness


@pytest_twisted.async_yield_fixture
async def harness():
    h = Harness()
    yield h
    await h.cleanup()
