"""The stream protocol ``twistd yamux`` serves by default: each stream echoes what it receives
and half-closes after the peer has (a demo, and a peer for ``rsocket-tx yamux``)."""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Factory, Protocol
from zope.interface import implementer

__all__ = ["Echo", "EchoFactory"]


@implementer(IHalfCloseableProtocol)
class Echo(Protocol):
    """Writes back every byte received; FIN after the peer's FIN."""

    transport: Any

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.transport.write(data)

    def readConnectionLost(self) -> None:  # noqa: N802 - Twisted's name
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:  # noqa: N802 - Twisted's name
        """(Our FIN went out: nothing to do.)"""


class EchoFactory(Factory):
    """An ``IProtocolFactory`` of :class:`Echo`, one per stream."""

    protocol = Echo
    noisy = False
