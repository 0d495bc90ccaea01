"""Serving Reactive Streams network publishers over Twisted.

::

    from rsocket_tx.rsnet.server import serve

    port = await serve(reactor, "rsnet+tcp://:7880",
                       {"count/10": lambda request: (b"%d" % i for i in range(1, 11))})

:class:`RSNetServerFactory` is a plain ``IProtocolFactory`` (one
:class:`~rsocket_tx.rsnet.protocol.RSNetProtocol` per accepted connection, role
:attr:`~rsocket_tx.rsnet.connection.Role.SERVER`), so any endpoint -- TCP, TLS, WebSocket
(:class:`~rsocket_tx.transports.websocket.WebSocketServerEndpoint`, subprotocol
:data:`~rsocket_tx.rsnet.protocol.WEBSOCKET_SUBPROTOCOL`), or a server that tells protocols
apart on one port -- can serve it. The connection is symmetric: ``on_connection`` may subscribe
to the client's publishers (``protocol.subscribe(name)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.protocol import Factory
from zope.interface import implementer

from ..interfaces import IConnectionObserver
from ..transports.limits import ConnectionLimit, RefusedConnection
from ..transports.listening import ServerPort, listen
from .config import RSNetConfig
from .connection import Role
from .endpoints import server_endpoint
from .protocol import RSNetProtocol
from .publishers import Publisher, as_publisher

__all__ = ["RSNetServerFactory", "RSNetServerPort", "serve"]


@implementer(IConnectionObserver)
class RSNetServerFactory(Factory):
    """Builds an :class:`~rsocket_tx.rsnet.protocol.RSNetProtocol` (server role) per accepted
    connection, all serving the same publishers.

    :param publishers: what the server publishes: a
        :class:`~rsocket_tx.rsnet.publishers.Publisher` (shared by every connection), a mapping
        ``{name: factory(request)}``, or None.
    :param config: the settings (:class:`~rsocket_tx.rsnet.config.RSNetConfig`).
    :param reactor: the reactor; None: the global one.
    :param on_connection: ``callable(protocol)`` called when a connection is made (its hello
        is on the way; ``protocol.when_ready()`` waits for the client's), or None.
    :param connection_limit: the server-wide
        :class:`~rsocket_tx.transports.limits.ConnectionLimit` to count connections in (shared
        with other factories of the same server); None: one of its own with the default cap
        (:data:`~rsocket_tx.transports.limits.DEFAULT_MAX_CONNECTIONS`, 4,096). Past it a
        new connection is aborted at once, before any RS-network state exists, and the log
        says so.

    :ivar protocols: the connections open now.
    :ivar connection_limit: the :class:`~rsocket_tx.transports.limits.ConnectionLimit`.
    """

    #: IConnectionObserver: no resumable sessions in this protocol
    sessions = None

    def __init__(self, publishers: Publisher | Any = None, config: RSNetConfig | None = None,
                 reactor: Any = None,
                 on_connection: Callable[[RSNetProtocol], Any] | None = None, *,
                 connection_limit: ConnectionLimit | None = None) -> None:
        if reactor is None:
            from twisted.internet import reactor as global_reactor

            reactor = global_reactor
        self.publishers = as_publisher(publishers)
        self.config = config if config is not None else RSNetConfig()
        self.reactor = reactor
        self.on_connection = on_connection
        self.protocols: set[RSNetProtocol] = set()
        self.noisy = False
        if connection_limit is None:
            connection_limit = ConnectionLimit(server_name="RS-network server", reactor=reactor)
        self.connection_limit = connection_limit

    def buildProtocol(  # noqa: N802 - Twisted's name
            self, addr: Any) -> RSNetProtocol | RefusedConnection:
        limit = self.connection_limit
        if not limit.acquire():
            return limit.refuse()  # past the cap: aborted at once, logged
        protocol = RSNetProtocol(self.reactor, Role.SERVER, self.config, self.publishers)
        protocol.factory = self
        protocol.connection_limit = limit  # released when its transport is lost
        return protocol

    def connection_made(self, protocol: Any) -> None:
        """IConnectionObserver: ``protocol`` is connected."""
        self.protocols.add(protocol)
        if self.on_connection is not None:
            self.on_connection(protocol)

    def connection_lost(self, protocol: Any) -> None:
        """IConnectionObserver: ``protocol``'s transport is gone."""
        self.protocols.discard(protocol)

    def transport_lost(self, protocol: Any) -> None:
        """IConnectionObserver: (no resumable sessions: :meth:`connection_lost` says it)."""

    def session_resumed(self, protocol: Any) -> None:
        """IConnectionObserver: (no resumable sessions)."""

    def session_ended(self, protocol: Any) -> None:
        """IConnectionObserver: (no resumable sessions)."""

    def close_connections(self, reason: str = "the server is shutting down") -> Deferred[Any]:
        """Close every connection gracefully
        (:meth:`~rsocket_tx.rsnet.protocol.RSNetProtocol.shutdown_gracefully`: publications in
        progress get ``config.drain_timeout`` ms to end, then *goodbye*); stop listening first.

        :returns: a Deferred firing once every transport is gone.
        """
        return DeferredList([p.shutdown_gracefully(reason) for p in list(self.protocols)],
                            consumeErrors=True)


#: What :func:`serve` returns around a wrapped port (the shared
#: :class:`~rsocket_tx.transports.listening.ServerPort`).
RSNetServerPort = ServerPort


def serve(reactor: Any, endpoint: Any, publishers: Publisher | Any = None,
          config: RSNetConfig | None = None,
          on_connection: Callable[[RSNetProtocol], Any] | None = None) -> Deferred[Any]:
    """Serve ``publishers`` on ``endpoint``.

    :param reactor: the reactor (None: the global one).
    :param endpoint: a URI (``"rsnet+tcp://:7880"``, ``"rsnet+tls://:7881?privateKey=key.pem&
        certKey=cert.pem"``, ``"rsnet+ws://127.0.0.1:8080/rsnet"``; ``tcp://`` ... alike), a
        Twisted server endpoint string (``"tcp:7880:interface=127.0.0.1"``) or an
        ``IStreamServerEndpoint``.
    :param publishers: see :class:`RSNetServerFactory`.
    :param config: the settings (:class:`~rsocket_tx.rsnet.config.RSNetConfig`).
    :param on_connection: see :class:`RSNetServerFactory`.
    :returns: a Deferred firing with the ``IListeningPort``; its ``factory`` is the
        :class:`RSNetServerFactory` (``port.factory.close_connections()`` closes the
        connections gracefully).
    :raises ValueError: a bad endpoint string.
    """
    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    factory = RSNetServerFactory(publishers, config, reactor, on_connection)
    return listen(server_endpoint(reactor, endpoint), factory)
