"""The 2015 ReactiveSocket draft on Twisted: the RSocket protocol machinery with the draft's
connection plugged in.

:class:`ReactiveSocketProtocol` is :class:`~rsocket_tx.protocol.RSocketProtocol` whose sans-IO
connection is :class:`~rsocket_tx.reactivesocket.connection.ReactiveSocketConnection`: the
same :class:`~rsocket_tx.responder.Responder` API serves it (``request_response``,
``fire_and_forget``, ``request_stream`` -- which also serves REQUEST_SUB --,
``metadata_push``, ``accept_setup``), the same requester, streams, leases and routing run on
it. What the draft lacks is refused on the requester side: ``request_channel`` raises
:class:`~rsocket_tx.core.errors.LocalProtocolError`; there is no keepalive and no resume.

:class:`ReactiveSocketServerFactory` is a plain ``IProtocolFactory`` (for ``listen()``, the
one-port server and WebSocket endpoints); :class:`ReactiveSocketClientFactory` builds the client
side. :data:`WEBSOCKET_SUBPROTOCOL` names the draft on WebSocket.
"""

from __future__ import annotations

import weakref

from ..core import errors as E
from ..core.payload import Payload
from ..protocol import RSocketClientFactory, RSocketProtocol, RSocketServerFactory
from ..requester import RSocket
from ..streams import DEFAULT_PREFETCH, DecodedStream, RequestStream
from .connection import MAX_REQUEST_N, ReactiveSocketConnection

__all__ = [
    "WEBSOCKET_SUBPROTOCOL",
    "ReactiveSocket",
    "ReactiveSocketClientFactory",
    "ReactiveSocketProtocol",
    "ReactiveSocketServerFactory",
]

#: The WebSocket subprotocol name of the 2015 draft (the draft names none; this is
#: rsocket_tx's).
WEBSOCKET_SUBPROTOCOL = "reactivesocket-2015"


class ReactiveSocket(RSocket):
    """The requester handle of a 2015-draft connection: :class:`~rsocket_tx.requester.RSocket`'s
    methods (``request_response``, ``fire_and_forget``, ``request_stream``,
    ``metadata_push``, ``close``, ...) plus :meth:`request_subscription`.
    ``request_channel`` raises :class:`~rsocket_tx.core.errors.LocalProtocolError`: the draft
    has no channel."""

    __slots__ = ("host",)

    def __init__(self, host: ReactiveSocketProtocol) -> None:
        super().__init__(host)
        self.host = host

    def request_subscription(self, payload, *, prefetch: int = DEFAULT_PREFETCH,
                             route: str | None = None, data_mime_type: str | None = None,
                             decode: bool = False) -> RequestStream | DecodedStream:
        """Request a subscription (REQUEST_SUB, draft §Request Subscription): an endless
        stream, ended only by the responder's ERROR or our ``cancel()``.

        :param payload: a :class:`~rsocket_tx.core.payload.Payload`, or a value encoded by
            the data MIME type's codec.
        :param prefetch: items requested up front (initial request n), 1..2^31-1; more are
            requested as they are consumed (REQUEST_N).
        :param route: a route (routing metadata), when the connection's metadata MIME type
            carries one.
        :param decode: deliver decoded data instead of Payloads.
        :returns: a :class:`~rsocket_tx.streams.RequestStream` (``async for``, ``cancel()``).
        :raises LocalProtocolError: the connection is closed.
        :raises ValueError: ``prefetch`` out of range.
        """
        if not isinstance(prefetch, int) or not 1 <= prefetch <= 0x7FFFFFFF:
            raise ValueError(f"prefetch must be an integer in [1, 2147483647], got {prefetch!r}")
        if isinstance(payload, Payload) and route is None and data_mime_type is None:
            request = payload
        else:
            request = self._payload(payload, route, None, data_mime_type, None, None)
        stream = self.host.request_subscription(request, prefetch)
        return DecodedStream(stream, self._decoder(data_mime_type)) if decode else stream


class ReactiveSocketProtocol(RSocketProtocol):
    """One connection of the 2015 draft over one Twisted transport (TCP, TLS, or WebSocket
    messages): :class:`~rsocket_tx.protocol.RSocketProtocol` with
    :class:`~rsocket_tx.reactivesocket.connection.ReactiveSocketConnection`. Parameters as
    RSocketProtocol's; ``setup`` (client) is an RSocket 1.0
    :class:`~rsocket_tx.core.frames.SetupFrame` whose MIME types, payload and L flag are sent
    (see :func:`~rsocket_tx.reactivesocket.client.make_setup`).

    :ivar rsocket: the requester handle, a :class:`ReactiveSocket`.
    """

    # (duck-typed: not a subclass of RSocketConnection, and driven as one)
    connection_class = ReactiveSocketConnection  # type: ignore[assignment]
    #: (log wording: ``"ReactiveSocket server connection opened"``; the draft has no
    #: CONNECTION_CLOSE: a peer ends a connection by closing its transport)
    wire_name = "ReactiveSocket"
    clean_close = "the peer closed the connection"
    peer_protocol = "rs2015"  # (its name among the one-port server's protocols)

    @property
    def rsocket(self) -> ReactiveSocket:
        """The connection's requester handle, a :class:`ReactiveSocket` (the same object for
        as long as anyone holds it; referred to weakly here)."""
        ref = getattr(self, "_draft_requester", None)
        handle = ref() if ref is not None else None
        if handle is None:
            handle = ReactiveSocket(self)
            self._draft_requester = weakref.ref(handle)
        return handle

    @rsocket.setter
    def rsocket(self, value) -> None:
        if isinstance(value, ReactiveSocket):
            self._draft_requester = weakref.ref(value)
        # (an RSocketProtocol that assigns its plain RSocket handle: ours replaces it)

    def request_subscription(self, payload: Payload, prefetch: int) -> RequestStream:
        """REQUEST_SUB with ``prefetch`` (1..2^63-1) as initial request n; the stream's items
        arrive as those of a request-stream.

        :raises LocalProtocolError: the connection is closed.
        """
        conn = self.connection
        if conn is None or not conn.is_open:
            raise E.LocalProtocolError("the ReactiveSocket connection is closed")
        if not 1 <= prefetch <= MAX_REQUEST_N:
            raise ValueError(f"prefetch must be in [1, {MAX_REQUEST_N}], got {prefetch}")
        with conn.subscription_next():
            return self.request_stream(payload, prefetch)


def _refuse_resume(config) -> None:
    if config.resume:
        raise ValueError("the 2015 ReactiveSocket draft has no RESUME: resume must be False")


class ReactiveSocketServerFactory(RSocketServerFactory):
    """Server factory of the 2015 draft: one :class:`ReactiveSocketProtocol` per connection.
    A plain ``IProtocolFactory``; parameters and settings as
    :class:`~rsocket_tx.protocol.RSocketServerFactory`'s (``resume`` must stay False).

    :raises ValueError: a setting out of range, or ``resume``.
    """

    protocol = ReactiveSocketProtocol
    #: the WebSocket subprotocol of what this factory serves
    websocket_subprotocol = WEBSOCKET_SUBPROTOCOL
    #: what the log calls the server (connections past ``max_connections``: the same cap as
    #: :class:`~rsocket_tx.protocol.RSocketServerFactory`'s)
    server_name = "ReactiveSocket 2015 server"

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        _refuse_resume(self.config)


class ReactiveSocketClientFactory(RSocketClientFactory):
    """Client factory of the 2015 draft: builds the :class:`ReactiveSocketProtocol` that sends
    ``setup`` (see :func:`~rsocket_tx.reactivesocket.client.make_setup`). Parameters as
    :class:`~rsocket_tx.protocol.RSocketClientFactory`'s, without ``reconnect`` (no resume).

    :raises ValueError: a setting out of range, or a SETUP with a resume token.
    """

    protocol = ReactiveSocketProtocol

    def __init__(self, setup, responder=None, **kwargs) -> None:
        if setup.resume_token is not None:
            raise ValueError("the 2015 ReactiveSocket draft has no RESUME: the SETUP must carry "
                             "no resume token")
        if kwargs.get("reconnect") is not None:
            raise ValueError("the 2015 ReactiveSocket draft has no RESUME: no reconnect")
        super().__init__(setup, responder, **kwargs)
        _refuse_resume(self.config)
