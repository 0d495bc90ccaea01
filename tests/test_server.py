"""rsocket_tx.server.serve(): the responder factory is required and checked at the call site.

The library has no default responder (DESIGN §2: library code never depends on sample apps);
the demo responder is the default of the faces (``twistd rsocket``, ``rsocket-tx serve``).
A call without a usable factory raises :class:`TypeError` saying what to pass, before
anything listens. The endpoints are a :class:`~twisted.internet.testing.MemoryReactor`'s:
nothing binds a port.
"""

from __future__ import annotations

import pytest
from twisted.internet.testing import MemoryReactor

from rsocket_tx import Responder, serve
from rsocket_tx.protocol import RSocketServerFactory


class Echo(Responder):
    def request_response(self, payload):
        return payload


def test_serve_without_a_responder_factory_is_a_type_error() -> None:
    reactor = MemoryReactor()
    with pytest.raises(TypeError, match="responder_factory"):
        serve("tcp:7878", reactor=reactor)  # type: ignore[call-arg]
    assert reactor.tcpServers == []


def test_serve_with_none_says_what_to_pass() -> None:
    reactor = MemoryReactor()
    with pytest.raises(TypeError) as raised:
        serve("tcp:7878", None, reactor=reactor)  # type: ignore[arg-type]
    message = str(raised.value)
    assert message.startswith("serve() needs responder_factory, a zero-argument callable")
    assert "serve('tcp:7878', MyResponder)" in message
    assert "got None (serve() has no default responder" in message
    assert "rsocket_tx.apps.demo.DemoResponder" in message
    assert reactor.tcpServers == []


def test_serve_with_a_responder_instance_asks_for_the_class() -> None:
    reactor = MemoryReactor()
    with pytest.raises(TypeError, match=r"got an instance of Echo: pass the class, Echo, "
                                        r"not an instance"):
        serve("tcp:7878", Echo(), reactor=reactor)  # type: ignore[arg-type]
    assert reactor.tcpServers == []


def test_serve_with_something_not_callable() -> None:
    reactor = MemoryReactor()
    with pytest.raises(TypeError, match=r"got 'Echo', which is not callable"):
        serve("tcp:7878", "Echo", reactor=reactor)  # type: ignore[arg-type]
    assert reactor.tcpServers == []


@pytest.mark.parametrize("factory", [Echo, lambda: Echo(), Responder])
def test_serve_with_a_factory_listens_with_it(factory) -> None:
    reactor = MemoryReactor()
    listening = serve("tcp:7878:interface=127.0.0.1", factory, reactor=reactor)
    assert listening.called
    ((port, server_factory, _backlog, interface),) = reactor.tcpServers
    assert (port, interface) == (7878, "127.0.0.1")
    assert isinstance(server_factory, RSocketServerFactory)
    assert server_factory.responder_factory is factory
