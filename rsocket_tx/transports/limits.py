"""A server-wide cap on open connections, shared by every factory of one server.

A :class:`ConnectionLimit` counts the connections (transports) a server has open, from the
moment its factory builds their protocol to the moment the transport is lost. Past
``max_connections`` a factory answers a new connection with :meth:`ConnectionLimit.refuse`:
a tiny protocol that aborts its transport as soon as it is connected, before any protocol
state (RSocket connection, Jini sessions, buffers) is allocated. The log says so once at the
first refusal and then at most once per ``log_interval`` seconds while refusals go on, with
their count, so a flood of connections does not flood the log.

It knows nothing of any protocol: the RSocket server factory
(:class:`~rsocket_tx.protocol.RSocketServerFactory`), the Jini ERI mux factory
(:class:`~rsocket_tx.jini.server.JiniMuxServerFactory`) and a one-port server serving both
may share one instance, so the cap holds for the server as a whole. Use::

    limit = ConnectionLimit(4096, server_name="RSocket server")

    def buildProtocol(self, addr):
        if not limit.acquire():
            return limit.refuse()
        protocol = MyProtocol(...)
        protocol.connection_limit = limit  # MuxProtocol.connectionLost releases it
        return protocol

A protocol that is not a :class:`~rsocket_tx.bridge.MuxProtocol` calls
:meth:`ConnectionLimit.release` from its ``connectionLost`` (once). Each release also tells
the process's :class:`~rsocket_tx.transports.memory.MemoryTrimmer`, which gives the memory
freed by closed connections back to the system (:mod:`rsocket_tx.transports.memory`).

A connection is counted once, by the protocol the transport delivers to (the outermost one,
whose ``connectionLost`` runs exactly once however the connection ends). A layer in front of
the protocol factories counts it from the moment it is accepted, and builds the protocol behind
it with :func:`build_uncounted`, so the factory's own limit neither counts nor refuses it
again: the one-port server (:class:`~rsocket_tx.transports.oneport.OnePortFactory`: while the
connection is sniffed, in its TLS or WebSocket handshake, and once handed to a protocol) and
the WebSocket server (:class:`~rsocket_tx.transports.websocket.WebSocketServerEndpoint`,
through :class:`CountingFactory`: from the TCP accept, HTTP and WebSocket handshake included).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from twisted.internet.protocol import Protocol
from twisted.logger import Logger
from twisted.protocols.policies import ProtocolWrapper, WrappingFactory

from .memory import MemoryTrimmer, process_trimmer

__all__ = ["ConnectionLimit", "CountingFactory", "RefusedConnection", "DEFAULT_BACKLOG",
           "DEFAULT_LOG_INTERVAL", "DEFAULT_MAX_CONNECTIONS", "build_uncounted",
           "counted_transport", "with_backlog"]

_log = Logger()

#: The listen queue length of a server's listening sockets unless the endpoint says otherwise
#: (``backlog=N``): a burst of 1,000 connects waits in the kernel's accept queue instead of
#: being dropped and retried a second later (Twisted's default is 50). The kernel caps it at
#: ``net.core.somaxconn`` (4,096 on Linux since 5.4).
DEFAULT_BACKLOG = 1024

#: Connections a server keeps open at once unless told otherwise (the RSocket server's
#: ``max_connections`` default, :data:`rsocket_tx.core.config.DEFAULT_MAX_CONNECTIONS`, is
#: the same). With the defaults of each protocol it bounds the memory of connections that
#: never complete their handshake, and of their connection, stream and session state
#: (docs: Limits, "Memory budget").
DEFAULT_MAX_CONNECTIONS = 4096

#: Seconds between two log lines about refused connections while refusals go on.
DEFAULT_LOG_INTERVAL = 60.0


#: Twisted's endpoint types whose description takes ``backlog=`` (default 50 there)
_TWISTED_LISTENERS = frozenset({"tcp", "tcp6", "ssl", "unix"})


def with_backlog(description: str, backlog: int = DEFAULT_BACKLOG) -> str:
    """A Twisted server endpoint description with ``backlog=`` added, when its type is one of
    Twisted's listeners (``tcp``, ``tcp6``, ``ssl``, ``unix``) and it names no backlog.

    :param description: e.g. ``"tcp:7878:interface=127.0.0.1"``.
    :param backlog: the listen queue length to add.
    :returns: e.g. ``"tcp:7878:interface=127.0.0.1:backlog=1024"``; other descriptions
        unchanged.
    """
    kind = description.split(":", 1)[0].strip().lower()
    if kind not in _TWISTED_LISTENERS or ":" not in description:
        return description
    if any(part.strip().lower().startswith("backlog=")
           for part in re.split(r"(?<!\\):", description)[1:]):
        return description
    return f"{description}:backlog={backlog}"


class RefusedConnection(Protocol):
    """The protocol of a connection past the cap: it aborts its transport at once (nothing
    is read or written)."""

    __slots__ = ()

    def makeConnection(self, transport: Any) -> None:  # noqa: N802 - Twisted's name
        transport.abortConnection()

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        pass  # (bytes that arrived with the accept: dropped)

    def frameReceived(self, frame: bytes) -> None:  # noqa: N802 - IFrameTransport's name
        pass  # (a message transport's frames: dropped too)

    def framesReceived(self, frames: list[bytes]) -> None:  # noqa: N802
        pass

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802 - Twisted's name
        pass


class ConnectionLimit:
    """Connections a server keeps open at once.

    :param max_connections: the cap, connections (at least 1).
    :param server_name: what the log line calls the server (``"RSocket server"``).
    :param reactor: ``IReactorTime`` provider for the log's rate limit; None: the global
        reactor (imported when first needed).
    :param log_interval: seconds between two log lines while refusals go on (> 0).
    :param trimmer: the :class:`~rsocket_tx.transports.memory.MemoryTrimmer` told of every
        :meth:`release` (it gives the memory of closed connections back to the system);
        None: the one of the process (:func:`~rsocket_tx.transports.memory.process_trimmer`).
    :raises ValueError: ``max_connections`` < 1 or ``log_interval`` <= 0.

    :ivar max_connections: the cap.
    :ivar open: connections counted now.
    :ivar refused: connections refused so far (all time).
    :ivar trimmer: the :class:`~rsocket_tx.transports.memory.MemoryTrimmer`.
    """

    def __init__(self, max_connections: int = DEFAULT_MAX_CONNECTIONS, *,
                 server_name: str = "server", reactor: Any = None,
                 log_interval: float = DEFAULT_LOG_INTERVAL,
                 trimmer: MemoryTrimmer | None = None) -> None:
        if not isinstance(max_connections, int) or isinstance(max_connections, bool) or \
                max_connections < 1:
            raise ValueError(f"max_connections must be an integer >= 1, got {max_connections!r}")
        if not log_interval > 0:
            raise ValueError(f"log_interval must be > 0 seconds, got {log_interval!r}")
        self.max_connections = max_connections
        self.server_name = server_name
        self.log_interval = log_interval
        self.open = 0
        self.refused = 0
        self.trimmer = process_trimmer() if trimmer is None else trimmer
        self._reactor = reactor
        self._unreported = 0  # refusals not yet in a log line
        self._next_report: float | None = None  # no line before this time (None: at once)
        self._counted_outside = False  # (build_uncounted: the next acquire() is counted)

    @contextmanager
    def counted_outside(self) -> Iterator[None]:
        """While the block runs, :meth:`acquire` counts nothing and refuses nothing: the
        connection being built is counted by the layer in front (:func:`build_uncounted`)."""
        self._counted_outside = True
        try:
            yield
        finally:
            self._counted_outside = False

    def acquire(self) -> bool:
        """Count one more connection if the cap allows it.

        :returns: True when counted (call :meth:`release` once when its transport is lost);
            False past the cap (the refusal is counted and logged as described above: answer
            the connection with :meth:`refuse`). Inside :func:`build_uncounted`: True, and
            nothing counted (the layer in front counts the connection).
        """
        if self._counted_outside:
            self._counted_outside = False
            return True
        if self.open < self.max_connections:
            self.open += 1
            return True
        self.refused += 1
        self._unreported += 1
        now = self._now()
        if self._next_report is None or now >= self._next_report:
            _log.warn(
                "{server}: {open} connections open, at the limit of {max_connections} "
                "(max_connections); new connections are closed at once ({refused} refused "
                "since the last report)",
                server=self.server_name, open=self.open, refused=self._unreported,
                max_connections=self.max_connections)
            self._unreported = 0
            self._next_report = now + self.log_interval
        return False

    def release(self) -> None:
        """A counted connection's transport is gone: uncount it, and tell the
        :attr:`trimmer` (which gives the memory of closed connections back to the system a
        moment later, at most once per its interval).

        :raises ValueError: nothing is counted.
        """
        if self.open <= 0:
            raise ValueError("ConnectionLimit.release() without a connection counted")
        self.open -= 1
        self.trimmer.connection_closed()

    @staticmethod
    def refuse() -> RefusedConnection:
        """The protocol to return from ``buildProtocol`` for a connection past the cap (it
        aborts its transport at once; it works under TLS and WebSocket wrappers too, where
        ``None`` would not)."""
        return RefusedConnection()

    def _now(self) -> float:
        reactor = self._reactor
        if reactor is None:
            from twisted.internet import reactor as global_reactor
            reactor = self._reactor = global_reactor
        return float(reactor.seconds())

    def __repr__(self) -> str:
        return (f"<ConnectionLimit {self.open}/{self.max_connections} open, "
                f"{self.refused} refused>")


def build_uncounted(factory: Any, addr: Any) -> Any:
    """``factory.buildProtocol(addr)`` for a connection the layer in front of ``factory``
    counts already (see the module docstring): the factory's own limit (its
    ``connection_limit``, a :class:`ConnectionLimit`) neither counts it nor refuses it, and the
    protocol built does not release it.

    :param factory: an ``IProtocolFactory``, with or without a ``connection_limit``.
    :param addr: the peer's address.
    :returns: what ``factory.buildProtocol`` returns (a protocol, or None).
    """
    limit = getattr(factory, "connection_limit", None)
    if not isinstance(limit, ConnectionLimit):
        return factory.buildProtocol(addr)
    with limit.counted_outside():
        protocol = factory.buildProtocol(addr)
    if getattr(protocol, "connection_limit", None) is limit:
        protocol.connection_limit = None  # (counted, and released, in front)
    return protocol


class _CountedConnection(ProtocolWrapper):
    """A connection of a :class:`CountingFactory`: its count is released once, when its
    transport is lost."""

    connection_limit: ConnectionLimit | None = None

    def connectionLost(self, reason: Any = None) -> None:  # noqa: N802 - Twisted's name
        limit, self.connection_limit = self.connection_limit, None
        try:
            super().connectionLost(reason)  # type: ignore[no-untyped-call]  # (Twisted)
        finally:
            if limit is not None:
                limit.release()


def counted_transport(transport: Any) -> Any:
    """The transport under a :class:`CountingFactory`'s connection wrapper (``transport``
    itself when it is no such wrapper): a protocol that takes over the transport (autobahn's
    WebSocket, which reads the TLS details off a ``TLSMemoryBIOProtocol``) writes to it
    directly, while the wrapper stays the protocol the transport delivers to (reads and
    ``connectionLost``, which releases the count)."""
    if isinstance(transport, _CountedConnection):
        return transport.transport
    return transport


if TYPE_CHECKING:
    _CountingBase = WrappingFactory[_CountedConnection]
else:  # WrappingFactory is generic from Twisted 24 on; setup.cfg accepts Twisted 23.10
    _CountingBase = WrappingFactory


class CountingFactory(_CountingBase):
    """Counts the connections of ``wrapped`` (any server factory, e.g. a twisted.web ``Site``)
    in ``limit`` from the moment they are accepted to the moment their transport is lost,
    whatever the protocol does with its transport in between (a WebSocket upgrade hands it to
    another protocol: that one is then the protocol wrapped). Past the cap a connection gets
    :meth:`ConnectionLimit.refuse`.

    :param wrapped: the server factory.
    :param limit: the :class:`ConnectionLimit`.
    :ivar limit: the :class:`ConnectionLimit`.
    """

    protocol = _CountedConnection
    noisy = False

    def __init__(self, wrapped: Any, limit: ConnectionLimit) -> None:
        super().__init__(wrapped)  # type: ignore[no-untyped-call]  # (Twisted: unannotated)
        self.limit = limit

    def buildProtocol(self, addr: Any) -> Any:  # noqa: N802 - Twisted's name
        limit = self.limit
        if not limit.acquire():
            return limit.refuse()
        try:
            wrapped = self.wrappedFactory.buildProtocol(addr)
        except BaseException:
            limit.release()
            raise
        if wrapped is None:
            limit.release()
            return None
        connection = self.protocol(self, wrapped)
        connection.connection_limit = limit
        return connection
