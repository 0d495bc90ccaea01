"""Helpers for the Jini mux protocol tests that run on a Twisted ``Clock`` and a
``StringTransport`` (tests/jini/test_bounds.py, tests/jini/test_hot_path.py)."""

from __future__ import annotations

from typing import Any

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rsocket_tx.jini import EchoDispatcher, JiniMuxConfig
from rsocket_tx.jini import codec as C
from rsocket_tx.jini.server import JiniMuxServerFactory

#: the first byte of a Shutdown message (Jini ERI mux §Shutdown Message)
SHUTDOWN = C.Shutdown(b"").encode()[:1]


def server_on_clock(dispatcher: Any = EchoDispatcher,
                    **settings: Any) -> tuple[Any, StringTransport, Clock]:
    """A server protocol of a :class:`JiniMuxServerFactory` of ``dispatcher`` with the
    :class:`JiniMuxConfig` ``settings``, on a Clock and a StringTransport."""
    clock = Clock()
    factory = JiniMuxServerFactory(dispatcher, JiniMuxConfig(**settings), clock)
    server = factory.buildProtocol(None)
    transport = StringTransport()
    server.makeConnection(transport)
    return server, transport, clock


def assert_shut_down_after(transport: StringTransport, clock: Clock, seconds: float) -> None:
    """Assert that the server sends Shutdown and closes exactly ``seconds`` from now (the idle
    timeout), not a millisecond earlier."""
    transport.clear()
    clock.advance(seconds - 0.001)
    assert not transport.disconnecting
    clock.advance(0.001)
    assert transport.value()[:1] == SHUTDOWN and transport.disconnecting
