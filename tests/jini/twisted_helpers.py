"""Helpers for the Twisted-layer tests of the Jini ERI mux: a server and clients on real
loopback TCP, cleaned up after each test. Everything waits through Deferreds (with timeouts
that only guard against hangs); nothing sleeps."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, reactor

from rsocket_tx.jini import JiniMuxClient, JiniMuxConfig, serve

__all__ = ["WAIT", "wait", "Loopback", "pattern"]

#: seconds any single wait may take (a 10 MiB body on a loaded machine)
WAIT = 120


def wait(d: Any, timeout: float = WAIT) -> defer.Deferred:
    """``d`` (a Deferred or coroutine) failing with TimeoutError if it does not fire in
    time."""
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


def pattern(size: int, offset: int = 0) -> bytes:
    """``size`` bytes, byte i = (offset + i) mod 256."""
    block = bytes((offset + i) % 256 for i in range(256))
    return (block * (size // 256 + 1))[:size]


class Loopback:
    """Servers and clients of one test, on 127.0.0.1."""

    def __init__(self) -> None:
        self.ports: list[Any] = []
        self.clients: list[JiniMuxClient] = []

    async def serve(self, dispatcher_factory: Any, *, endpoint: str = "tcp:0:interface=127.0.0.1",
                    **config: Any) -> Any:
        """Listen with a fresh server factory; returns the listening port (``.factory``,
        ``.getHost().port``)."""
        port = await wait(serve(reactor, endpoint, dispatcher_factory, JiniMuxConfig(**config)))
        self.ports.append(port)
        return port

    def client(self, port: Any, *, endpoint: str | None = None, **config: Any) -> JiniMuxClient:
        if endpoint is None:
            number = port if isinstance(port, int) else port.getHost().port
            endpoint = f"tcp:host=127.0.0.1:port={number}"
        client = JiniMuxClient(reactor, endpoint, JiniMuxConfig(**config))
        self.clients.append(client)
        return client

    async def cleanup(self) -> None:
        for client in self.clients:
            await wait(client.close())
        for port in self.ports:
            await wait(defer.maybeDeferred(port.stopListening))
            for protocol in list(port.factory.protocols):
                await wait(protocol.close())
