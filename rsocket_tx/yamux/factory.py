"""Factories of yamux sessions, and :func:`connect` / :func:`listen` on any Twisted endpoint.

::

    from rsocket_tx.yamux.factory import YamuxServerFactory, connect

    # a server: every stream the client opens runs an Echo protocol
    endpoint.listen(YamuxServerFactory(Factory.forProtocol(Echo)))

    # a client: one session, then a protocol per stream
    session = await connect(reactor, "yamux+tcp://127.0.0.1:7890")
    session.open_stream(MyProtocol())
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.protocol import Factory

from ..transports.limits import ConnectionLimit, RefusedConnection
from .config import YamuxConfig
from .connection import Role
from .protocol import YamuxProtocol, check_stream_factory

__all__ = ["YamuxClientFactory", "YamuxServerFactory", "connect"]


class YamuxServerFactory(Factory):
    """Builds a :class:`~rsocket_tx.yamux.protocol.YamuxProtocol` (server role: even stream
    ids) per accepted connection; every stream its peer opens gets a protocol of
    ``stream_factory``.

    :param stream_factory: an ``IProtocolFactory`` for the peer's streams (None: refuse them).
    :param config: the settings (:class:`~rsocket_tx.yamux.config.YamuxConfig`).
    :param reactor: the reactor; None: the global one.
    :param connection_limit: the server-wide
        :class:`~rsocket_tx.transports.limits.ConnectionLimit` (shared with other factories of
        the same server); None: one of its own with the default cap. Past it a new connection
        is aborted at once, and the log says so.
    :raises TypeError: ``stream_factory`` is no ``IProtocolFactory`` (nor None).

    :ivar protocols: the sessions open now.
    """

    def __init__(self, stream_factory: Any = None, config: YamuxConfig | None = None,
                 reactor: Any = None, *, connection_limit: ConnectionLimit | None = None) -> None:
        check_stream_factory(stream_factory)
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = global_reactor
        self.stream_factory = stream_factory
        self.config = config if config is not None else YamuxConfig()
        self.reactor = reactor
        self.protocols: set[YamuxProtocol] = set()
        self.noisy = False
        if connection_limit is None:
            connection_limit = ConnectionLimit(server_name="yamux server", reactor=reactor)
        self.connection_limit = connection_limit

    def buildProtocol(self, addr: Any) -> YamuxProtocol | RefusedConnection:  # noqa: N802
        limit = self.connection_limit
        if not limit.acquire():
            return limit.refuse()
        protocol = YamuxProtocol(self.reactor, Role.SERVER, self.config, self.stream_factory)
        protocol.factory = self
        protocol.connection_limit = limit  # released when its transport is lost
        self.protocols.add(protocol)
        protocol.when_closed().addBoth(lambda _: self.protocols.discard(protocol))
        return protocol

    def close_connections(self, reason: str = "the server is shutting down") -> Deferred:
        """Close every session: Go Away (normal), then its transport; every stream's protocol
        gets ``connectionLost``.

        :returns: a Deferred firing once every transport is gone.
        """
        return gatherResults([p.close(reason) for p in list(self.protocols)],
                             consumeErrors=True).addCallback(lambda _: None)


class YamuxClientFactory(Factory):
    """Builds the client end (odd stream ids) of a session.

    :param reactor: the reactor.
    :param config: the settings.
    :param stream_factory: an ``IProtocolFactory`` for streams the server opens (None:
        refuse them).
    :raises TypeError: ``stream_factory`` is no ``IProtocolFactory`` (nor None).
    """

    def __init__(self, reactor: Any, config: YamuxConfig | None = None,
                 stream_factory: Any = None) -> None:
        check_stream_factory(stream_factory)
        self.reactor = reactor
        self.config = config if config is not None else YamuxConfig()
        self.stream_factory = stream_factory
        self.noisy = False

    def buildProtocol(self, addr: Any) -> YamuxProtocol:  # noqa: N802 - Twisted's name
        protocol = YamuxProtocol(self.reactor, Role.CLIENT, self.config, self.stream_factory)
        protocol.factory = self
        return protocol


def connect(reactor: Any, endpoint: Any, config: YamuxConfig | None = None,
            stream_factory: Any = None) -> Deferred[YamuxProtocol]:
    """Connect a yamux client session.

    :param reactor: the reactor (None: the global one).
    :param endpoint: a URI (``"yamux+tcp://host:7890"``, ``"yamux+tls://host:7891?trustRoots=
        ca.pem"``), a Twisted client endpoint string (``"tcp:host=h:port=7890"``) or an
        ``IStreamClientEndpoint`` (:mod:`rsocket_tx.yamux.endpoints`).
    :param config: the settings (:class:`~rsocket_tx.yamux.config.YamuxConfig`).
    :param stream_factory: for streams the server opens (None: refuse them).
    :returns: a Deferred firing with the :class:`~rsocket_tx.yamux.protocol.YamuxProtocol`
        once connected (yamux has no handshake); it fails with the endpoint's error.
    :raises ValueError: a bad endpoint string.
    """
    from .endpoints import client_endpoint

    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor
    target = client_endpoint(reactor, endpoint)
    return target.connect(YamuxClientFactory(reactor, config, stream_factory))
