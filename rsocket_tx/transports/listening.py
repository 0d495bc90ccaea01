"""Listening with a protocol's server factory, and getting that factory back from the port
(every protocol's ``serve()``: :func:`rsocket_tx.server.serve`,
:func:`rsocket_tx.jini.server.serve`, :func:`rsocket_tx.rsnet.server.serve`).

A TLS (or WebSocket) endpoint listens with a wrapping factory, so the ``IListeningPort`` it
gives has that wrapper as its ``factory``; :func:`listen` gives a :class:`ServerPort` instead,
whose ``factory`` is the protocol's, so that ``port.factory.close_connections()`` works on
every transport.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort
from zope.interface import implementer

__all__ = ["ServerPort", "listen"]


@implementer(IListeningPort)
class ServerPort:
    """The listening port a ``serve()`` returns when the endpoint's own port has another
    ``factory`` (a TLS endpoint's is the TLS wrapper): ``factory`` is the protocol's server
    factory; everything else is the port's.

    :param port: the endpoint's ``IListeningPort``.
    :param factory: the protocol's server factory.
    """

    def __init__(self, port: Any, factory: Any) -> None:
        self.port = port
        self.factory = factory

    def startListening(self) -> Any:  # noqa: N802 - IListeningPort
        return self.port.startListening()

    def stopListening(self) -> Any:  # noqa: N802
        return self.port.stopListening()

    def getHost(self) -> Any:  # noqa: N802
        return self.port.getHost()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.port, name)

    def __repr__(self) -> str:
        return f"<ServerPort {self.port!r}>"


def listen(endpoint: Any, factory: Any) -> Deferred[Any]:
    """Listen on ``endpoint`` (an ``IStreamServerEndpoint``) with ``factory``.

    :returns: a Deferred firing with the ``IListeningPort``, whose ``factory`` is ``factory``
        (the port itself, or a :class:`ServerPort` around it); failing as
        ``endpoint.listen`` does (e.g. ``CannotListenError``).
    """
    def with_factory(port: Any) -> Any:
        if getattr(port, "factory", None) is factory:
            return port
        return ServerPort(port, factory)

    d: Deferred[Any] = endpoint.listen(factory)
    return d.addCallback(with_factory)
