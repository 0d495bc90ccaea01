"""Connecting to a Reactive Streams network peer over Twisted.

::

    from rsocket_tx.rsnet.client import connect

    connection = await connect(reactor, "rsnet+tcp://localhost:7880",
                               publishers={"lines": lambda request: iter([b"a", b"b"])})
    async for element in connection.subscribe("count/10", window=16):
        print(element)
    await connection.goodbye()

:func:`connect` returns a Deferred firing with the
:class:`~rsocket_tx.rsnet.protocol.RSNetProtocol` once the server's hello has arrived; the
connection is symmetric, so the client may publish too (the server subscribes to it).
"""

from __future__ import annotations

import weakref
from typing import Any, Protocol, cast

from twisted.internet.defer import Deferred
from twisted.internet.protocol import Factory
from twisted.python.failure import Failure

from .config import RSNetConfig
from .connection import Role
from .endpoints import client_endpoint
from .protocol import RSNetProtocol
from .publishers import Publisher, as_publisher


class _Abortable(Protocol):
    """A stream transport that can be dropped at once: TCP's, TLS's, a WebSocket byte
    stream's (``ITransport`` itself has only ``loseConnection``)."""

    def abortConnection(self) -> None: ...  # noqa: N802 - Twisted's name

__all__ = ["RSNetClientFactory", "connect"]


class RSNetClientFactory(Factory):
    """Builds the client end (:attr:`~rsocket_tx.rsnet.connection.Role.CLIENT`: it sends
    clientHello) of a connection.

    :param reactor: the reactor.
    :param publishers: what the client publishes (see
        :func:`~rsocket_tx.rsnet.publishers.as_publisher`).
    :param config: the settings (:class:`~rsocket_tx.rsnet.config.RSNetConfig`).
    The factory refers to the protocol it built only weakly: Twisted's connector keeps the
    factory after the connection ends, and the protocol must be freed then (by reference
    counting alone).
    """

    def __init__(self, reactor: Any, publishers: Publisher | Any = None,
                 config: RSNetConfig | None = None) -> None:
        self.reactor = reactor
        self.publishers = as_publisher(publishers)
        self.config = config if config is not None else RSNetConfig()
        self._built: weakref.ref[RSNetProtocol] | None = None
        self.noisy = False

    @property
    def protocol_built(self) -> RSNetProtocol | None:
        """The protocol built last, while it is alive; or None."""
        return self._built() if self._built is not None else None

    def buildProtocol(self, addr: Any) -> RSNetProtocol:  # noqa: N802 - Twisted's name
        protocol = RSNetProtocol(self.reactor, Role.CLIENT, self.config, self.publishers)
        protocol.factory = self
        self._built = weakref.ref(protocol)
        return protocol


def connect(reactor: Any, endpoint: Any, publishers: Publisher | Any = None,
            config: RSNetConfig | None = None) -> Deferred[RSNetProtocol]:
    """Connect to an RS-network peer and exchange hellos (draft §Protocol negotiation).

    :param reactor: the reactor (None: the global one).
    :param endpoint: a URI (``"rsnet+tcp://localhost:7880"``,
        ``"rsnet+tls://host:7881?trustRoots=ca.pem"``, ``"rsnet+ws://host:8080/rsnet"``,
        ``tcp://`` ... alike), a Twisted client endpoint string
        (``"tcp:host=localhost:port=7880"``) or an ``IStreamClientEndpoint``
        (:mod:`rsocket_tx.rsnet.endpoints`).
    :param publishers: what this side publishes to the server: a
        :class:`~rsocket_tx.rsnet.publishers.Publisher`, a mapping ``{name: factory}``, or None.
    :param config: the settings (:class:`~rsocket_tx.rsnet.config.RSNetConfig`).
    :returns: a Deferred firing with the :class:`~rsocket_tx.rsnet.protocol.RSNetProtocol`
        once the server's hello has arrived. It fails with the endpoint's error (e.g.
        ``ConnectionRefusedError``), a :class:`~rsocket_tx.transports.tls.TLSError`, a
        :class:`~rsocket_tx.transports.websocket.WebSocketHandshakeError`, or
        :class:`~rsocket_tx.rsnet.errors.ConnectionClosedError` (a version mismatch, no hello
        within ``config.hello_timeout``: it fails once the transport is closed, after the
        *goodbye* this side sent, so that nothing is left unsent if the program then exits).
        Cancelling it drops the connection.
    :raises ValueError: a bad endpoint string.
    """
    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    factory = RSNetClientFactory(reactor, publishers, config)
    target = client_endpoint(reactor, endpoint)
    connecting = target.connect(factory)
    hello: list[Deferred[RSNetProtocol]] = []

    def cancel(d: Deferred[RSNetProtocol]) -> None:
        connecting.cancel()
        protocol = factory.protocol_built
        if protocol is not None and protocol.transport is not None:
            cast(_Abortable, protocol.transport).abortConnection()
        for waiting in hello:
            waiting.cancel()

    result: Deferred[RSNetProtocol] = Deferred(cancel)

    def succeeded(protocol: RSNetProtocol) -> None:
        if not result.called:
            result.callback(protocol)

    def failed(failure: Failure) -> None:
        if not result.called:
            result.errback(failure)

    def connected(protocol: RSNetProtocol) -> None:
        def refused(failure: Failure) -> Deferred[None]:
            # (a version mismatch, no hello in time ...: the connection said goodbye; fail
            # once the transport is gone, the goodbye written, so that a program that exits
            # on the failure does not drop it unsent)
            closed = protocol.when_closed()
            closed.addBoth(lambda _: failed(failure))
            return closed

        ready = protocol.when_ready()
        hello.append(ready)
        ready.addCallbacks(succeeded, refused)

    connecting.addCallbacks(connected, failed)
    return result
