"""Helpers of the Twisted-layer tests of the Reactive Streams network protocol: servers and
clients on real loopback ports, cleaned up after each test, and a raw peer that speaks
messages built with the codec (to see exactly what rsocket_tx sends). Everything waits through
Deferreds (with timeouts that only guard against hangs); nothing sleeps."""

from __future__ import annotations

from typing import Any

from twisted.internet import defer, reactor
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.client import connect
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.server import serve

__all__ = ["WAIT", "wait", "Loopback", "WirePeer", "counting"]

#: seconds any single wait may take
WAIT = 60


def wait(d: Any, timeout: float = WAIT) -> defer.Deferred:
    """``d`` (a Deferred or coroutine) failing with TimeoutError if it does not fire in time."""
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


class counting:  # noqa: N801 - used like a function
    """An iterable source of ``b"1"``, ``b"2"`` ... (``n`` of them; None: without end) that
    counts how many elements were pulled from it and whether it was closed."""

    def __init__(self, n: int | None = None) -> None:
        self.n = n
        self.pulled = 0
        self.closed = False

    def __iter__(self) -> counting:
        return self

    def __next__(self) -> bytes:
        if self.n is not None and self.pulled >= self.n:
            raise StopIteration
        self.pulled += 1
        return b"%d" % self.pulled

    def close(self) -> None:
        self.closed = True


class Loopback:
    """Servers and connections of one test, on 127.0.0.1."""

    def __init__(self) -> None:
        self.ports: list[Any] = []
        self.connections: list[Any] = []

    async def serve(self, publishers: Any = None, *, endpoint: str = "tcp:0:interface=127.0.0.1",
                    on_connection: Any = None, **config: Any) -> Any:
        """Listen with a fresh server factory; returns the port (``.factory``,
        ``.getHost().port``)."""
        port = await wait(serve(reactor, endpoint, publishers, RSNetConfig(**config),
                                on_connection=on_connection))
        self.ports.append(port)
        return port

    async def connect(self, port: Any, publishers: Any = None, *, endpoint: str | None = None,
                      **config: Any) -> Any:
        """Connect to ``port`` (default: plain TCP); returns the client's RSNetProtocol."""
        if endpoint is None:
            endpoint = f"rsnet+tcp://127.0.0.1:{port.getHost().port}"
        protocol = await wait(connect(reactor, endpoint, publishers, RSNetConfig(**config)))
        self.connections.append(protocol)
        return protocol

    async def cleanup(self) -> None:
        for protocol in self.connections:
            await wait(protocol.close())
        for port in self.ports:
            await wait(defer.maybeDeferred(port.stopListening))
            for protocol in list(port.factory.protocols):
                await wait(protocol.close())


class WirePeer(Protocol):
    """A raw peer: writes encoded messages, decodes what it receives (``messages``).

    :ivar messages: every message received, in order.
    :ivar sizes: ``{subscriber id: element size}`` of the subscriptions this peer made.
    """

    def __init__(self) -> None:
        self.decoder = C.MessageDecoder()
        self.messages: list[C.Message] = []
        self.sizes: dict[int, int] = {}
        self.waiters: list[tuple[Any, defer.Deferred]] = []
        self.lost: defer.Deferred = defer.Deferred()

    def send(self, *messages: C.Message) -> None:
        self.transport.write(b"".join(C.encode(m) for m in messages))

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.decoder.receive_data(data)
        while True:
            message = self.decoder.next_message(lambda sid: self.sizes.get(sid, 0))
            if message is None:
                break
            if isinstance(message, C.OnSubscribe):
                self.sizes[message.subscriber] = message.element_size
            self.messages.append(message)
            self.check()

    def check(self) -> None:
        for entry in list(self.waiters):
            predicate, d = entry
            if predicate(self.messages):
                self.waiters.remove(entry)
                d.callback(self.messages)

    def until(self, predicate: Any) -> defer.Deferred:
        """A Deferred firing (with ``messages``) once ``predicate(messages)`` is true."""
        d: defer.Deferred = defer.Deferred()
        self.waiters.append((predicate, d))
        self.check()
        return wait(d)

    def received(self, kind: type) -> list[Any]:
        return [m for m in self.messages if isinstance(m, kind)]

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802
        self.lost.callback(None)


async def wire_client(port: Any) -> WirePeer:
    """A :class:`WirePeer` connected to ``port`` (it has sent nothing yet)."""
    peer = WirePeer()
    await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port.getHost().port),
                               peer))
    return peer


async def wire_server() -> tuple[Any, defer.Deferred]:
    """A listening port whose first connection is a :class:`WirePeer`; returns ``(port,
    Deferred firing with the peer once connected)``."""
    connected: defer.Deferred = defer.Deferred()

    class OnePeer(Factory):
        def buildProtocol(self, addr: Any) -> WirePeer:  # noqa: N802
            peer = WirePeer()
            if not connected.called:
                reactor.callLater(0, connected.callback, peer)
            return peer

    port = await wait(TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(OnePeer()))
    return port, connected
