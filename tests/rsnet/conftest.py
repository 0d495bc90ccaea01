"""Fixtures of the Reactive Streams network tests over Twisted."""

from __future__ import annotations

import pytest
import pytest_twisted
from tlscerts import make_tls_files

from .twisted_helpers import Loopback


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    """TLS files (a CA, server and client keys and certificates) for the module's tests."""
    return make_tls_files(tmp_path_factory.mktemp("tls"))


@pytest_twisted.async_yield_fixture
async def loop():
    """A :class:`~twisted_helpers.Loopback` whose servers and clients are closed afterwards."""
    loopback = Loopback()
    yield loopback
    await loopback.cleanup()
