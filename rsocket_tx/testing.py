"""Test helpers for applications: an RSocket client and server connected in memory.

:func:`connected_pair` joins a client and a server :class:`~rsocket_tx.protocol.RSocketProtocol`
with :mod:`twisted.test.iosim`: no sockets, no reactor, no threads. Bytes move only when the
pair is pumped (:meth:`ConnectedPair.flush`), and time moves only when its
:class:`~twisted.internet.task.Clock` is advanced (:meth:`ConnectedPair.advance`), so a test of a
responder is deterministic and fast::

    from rsocket_tx import Payload, Responder
    from rsocket_tx.testing import connected_pair

    class Greeter(Responder):
        def request_response(self, payload):
            return Payload(b"hello " + payload.data)

    def test_greeter():
        pair = connected_pair(Greeter)
        d = pair.client.request_response(Payload(b"you"))
        assert pair.result(d) == Payload(b"hello you")

Everything the responder does goes through the real protocol stack (frames encoded and decoded,
flow control, fragmentation, metadata extensions), exactly as over TCP. A responder that waits
on something outside the pair (a database, another server) needs the real reactor: see the
pytest-twisted recipe in the guides (``docs/guides.rst``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from twisted.internet.defer import Deferred
from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.test.iosim import IOPump, connectedServerAndClient

from .bridge import ABORT_DELAY
from .client import make_setup
from .core.config import ConnectionConfig
from .core.payload import Payload
from .extensions import Credentials
from .protocol import RSocketClientFactory, RSocketProtocol, RSocketServerFactory
from .responder import Responder

if TYPE_CHECKING:  # pragma: no cover
    from .requester import RSocket

__all__ = ["ConnectedPair", "NotFiredError", "connected_pair"]

_T = TypeVar("_T")


class NotFiredError(AssertionError):
    """:meth:`ConnectedPair.result`: the Deferred has not fired after pumping every byte and
    every timer that was due (the responder is waiting for something the pair does not
    drive: advance the clock, or feed what it waits for)."""


class ConnectedPair:
    """A client and a server connection joined in memory, on one clock.

    :ivar client: the client's :class:`~rsocket_tx.requester.RSocket`: requests to the
        server's responder.
    :ivar server: the server's :class:`~rsocket_tx.requester.RSocket` of this connection:
        requests to the client's responder (``client_responder``).
    :ivar client_protocol: the client :class:`~rsocket_tx.protocol.RSocketProtocol`.
    :ivar server_protocol: the server :class:`~rsocket_tx.protocol.RSocketProtocol`.
    :ivar responder: the server's :class:`~rsocket_tx.responder.Responder`, the one instance
        ``responder_factory`` made for this connection (to assert on its state); None if the
        connection ended before SETUP was accepted.
    :ivar clock: the :class:`~twisted.internet.task.Clock` both sides schedule on (keepalive,
        timeouts, leases, drain): time stands still until :meth:`advance`.
    :ivar pump: the :class:`twisted.test.iosim.IOPump` moving bytes between the two.
    """

    __slots__ = ("client", "server", "client_protocol", "server_protocol", "responder",
                 "clock", "pump")

    def __init__(self, client_protocol: RSocketProtocol, server_protocol: RSocketProtocol,
                 clock: Clock, pump: IOPump, responder: Responder | None = None) -> None:
        self.client_protocol = client_protocol
        self.server_protocol = server_protocol
        self.client: RSocket = client_protocol.rsocket
        self.server: RSocket = server_protocol.rsocket
        self.responder = responder
        self.clock = clock
        self.pump = pump

    def flush(self) -> None:
        """Deliver every byte both sides have written, and what they write in reply, until
        neither has anything left to send (timers due now run too; the clock does not
        move)."""
        self.pump.flush()  # type: ignore[no-untyped-call]  # (twisted.test.iosim: unannotated)

    def advance(self, seconds: float) -> None:
        """Move the clock ``seconds`` forward (keepalive, timeouts, lease expiry, drain), then
        :meth:`flush`.

        :param seconds: seconds, not milliseconds (Twisted's clock unit), >= 0.
        """
        self.clock.advance(seconds)
        self.flush()

    def result(self, d: Deferred[_T]) -> _T:
        """:meth:`flush`, then the result of ``d``.

        :returns: what ``d`` fired with.
        :raises: the exception ``d`` failed with (e.g. the
            :class:`~rsocket_tx.core.errors.ApplicationError` the responder's exception
            became, with its message).
        :raises NotFiredError: ``d`` has not fired.
        """
        self.flush()
        outcome: list[_T | Failure] = []

        def record(value: _T | Failure) -> _T | Failure:
            outcome.append(value)
            return value  # d keeps its result (result() may be asked again)

        d.addBoth(record)
        if not outcome:
            raise NotFiredError(f"{d!r} has not fired: the responder is still working")
        value = outcome[-1]
        if isinstance(value, Failure):
            d.addErrback(lambda _: None)  # raised here: not an "unhandled error" later
            value.raiseException()
        return value

    def close(self) -> None:
        """Close the connection from the client at once (open streams fail with
        :class:`~rsocket_tx.core.errors.ConnectionCloseError`), deliver the close, and run
        the clock past the transport's abort delay so nothing stays scheduled."""
        if self.client.is_open:
            self.client.close(drain_timeout=0)
        self.flush()
        self.advance(ABORT_DELAY)


def connected_pair(responder_factory: Callable[[], Responder], *,
                   client_responder: Responder | None = None, clock: Clock | None = None,
                   data_mime_type: str = "application/octet-stream",
                   metadata_mime_type: str = "application/octet-stream",
                   setup_payload: Payload | None = None, auth: Credentials | None = None,
                   client_config: ConnectionConfig | None = None,
                   server_config: ConnectionConfig | None = None) -> ConnectedPair:
    """A client connected to a server serving ``responder_factory``, in memory; SETUP has
    been sent and accepted (unless the responder rejects it: then ``pair.client`` is closed
    and its ``close_reason`` says why).

    :param responder_factory: zero-argument callable making the server's
        :class:`~rsocket_tx.responder.Responder` (a Responder subclass works), as for
        :func:`rsocket_tx.serve`.
    :param client_responder: the :class:`~rsocket_tx.responder.Responder` serving the
        server's requests (``pair.server.request_response(...)``); None rejects them.
    :param clock: the :class:`~twisted.internet.task.Clock` both sides run on; None: a new one
        at time 0.
    :param data_mime_type: SETUP data MIME type (ASCII), e.g. ``"application/json"`` for
        requests made with values instead of :class:`~rsocket_tx.core.payload.Payload`.
    :param metadata_mime_type: SETUP metadata MIME type, e.g.
        ``"message/x.rsocket.composite-metadata.v0"`` for routed requests (``route=``).
    :param setup_payload: data and metadata sent in SETUP
        (:meth:`~rsocket_tx.responder.Responder.accept_setup` sees them).
    :param auth: connection credentials sent in the SETUP metadata, as for
        :func:`rsocket_tx.connect`.
    :param client_config: the client's :class:`~rsocket_tx.core.config.ConnectionConfig`
        (its keepalive interval and max lifetime go into SETUP); None: the defaults.
    :param server_config: the server's settings; None: the defaults.
    :returns: the :class:`ConnectedPair`.
    :raises ValueError: a setting or MIME type is invalid (as :func:`rsocket_tx.connect`).
    """
    clock = Clock() if clock is None else clock
    client_config = ConnectionConfig() if client_config is None else client_config
    setup = make_setup(data_mime_type=data_mime_type, metadata_mime_type=metadata_mime_type,
                       setup_payload=setup_payload, auth=auth,
                       keepalive_interval=client_config.keepalive_interval,
                       max_lifetime=client_config.max_lifetime)
    made: list[Responder] = []

    def make_responder() -> Responder:
        responder = responder_factory()
        made.append(responder)
        return responder

    server_factory = RSocketServerFactory(make_responder, reactor=clock, config=server_config)
    client_factory = RSocketClientFactory(setup, client_responder, reactor=clock,
                                          config=client_config)
    client, server, pump = connectedServerAndClient(
        lambda: server_factory.buildProtocol(None), lambda: client_factory.buildProtocol(None),
        clock=clock)
    assert isinstance(server, RSocketProtocol)  # a new factory refuses no connection
    pair = ConnectedPair(client, server, clock, pump)
    pair.flush()  # SETUP: the server makes its responder
    pair.responder = made[0] if made else None
    return pair
