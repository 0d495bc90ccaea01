"""Fixtures of the Jini ERI mux tests."""

from __future__ import annotations

import pytest_twisted

from .twisted_helpers import Loopback


@pytest_twisted.async_yield_fixture
async def loop():
    """Servers and clients on loopback TCP, closed after the test."""
    loopback = Loopback()
    yield loopback
    await loopback.cleanup()
