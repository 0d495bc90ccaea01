"""``connect()``: a client connection of the 2015 ReactiveSocket draft over any Twisted stream
endpoint (TCP, TLS, WebSocket), Deferred-based like :func:`rsocket_tx.connect`."""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.defer import Deferred

from ..client import make_setup as make_rsocket_setup
from ..core.config import DEFAULT_MAX_LIFETIME, ConnectionConfig
from ..core.frames import SetupFrame
from ..core.lease import LeasePolicy
from ..core.payload import Payload
from ..lease import policy_for
from ..protocol import CLIENT_SETTINGS, build_config
from ..responder import Responder
from ..transports import endpoints
from .frames import MAX_FRAME_LENGTH, encode
from .frames import SetupFrame as DraftSetupFrame
from .protocol import WEBSOCKET_SUBPROTOCOL, ReactiveSocketClientFactory

__all__ = ["CONNECT_SETTINGS", "URI_PREFIX", "client_endpoint", "connect", "make_setup",
           "server_endpoint", "transport_spec"]

#: A URI scheme ``rs2015+X`` names transport ``X`` carrying the 2015 draft:
#: ``rs2015+tcp://``, ``rs2015+tls://``, ``rs2015+ws://``, ``rs2015+wss://``.
URI_PREFIX = "rs2015+"


def transport_spec(spec):
    """``spec`` with an ``rs2015+`` URI scheme replaced by its transport's
    (``rs2015+tcp://h:p`` -> ``tcp://h:p``); anything else (an endpoint string, a plain URI,
    an endpoint object) unchanged.

    :raises ValueError: ``rs2015+`` with no transport after it.
    """
    if not isinstance(spec, str):
        return spec
    text = spec.strip()
    scheme, sep, rest = text.partition("://")
    if sep and scheme.lower().startswith(URI_PREFIX):
        name = scheme[len(URI_PREFIX):]
        if not name:
            raise ValueError(f"missing transport in {spec!r} (write rs2015+tcp://HOST:PORT, "
                             "rs2015+tls://..., rs2015+ws://...)")
        return f"{name}{sep}{rest}"
    return text


def client_endpoint(reactor, spec):
    """:func:`rsocket_tx.transports.endpoints.client_endpoint` that also takes the
    ``rs2015+X://`` URIs. Over ``rs2015+ws://`` and ``rs2015+wss://`` the WebSocket client
    offers the subprotocol :data:`~rsocket_tx.reactivesocket.protocol.WEBSOCKET_SUBPROTOCOL`
    (a server serving several protocols on one port chooses by it); over plain ``ws://`` it
    offers none.

    :raises ValueError: a bad endpoint string or URI.
    """
    endpoint = endpoints.client_endpoint(reactor, transport_spec(spec))
    if isinstance(spec, str) and spec.strip().lower().startswith(("rs2015+ws://",
                                                                  "rs2015+wss://")):
        from ..transports.websocket import WebSocketClientEndpoint

        if isinstance(endpoint, WebSocketClientEndpoint):
            endpoint.subprotocols = (WEBSOCKET_SUBPROTOCOL,)
    return endpoint


def server_endpoint(reactor, spec):
    """:func:`rsocket_tx.transports.endpoints.server_endpoint` that also takes the
    ``rs2015+X://`` URIs."""
    return endpoints.server_endpoint(reactor, transport_spec(spec))

#: The :class:`~rsocket_tx.core.config.ConnectionConfig` fields :func:`connect` takes as
#: keywords. ``max_lifetime`` (ms) is how long a client that asked for leases waits for the
#: server's first LEASE.
CONNECT_SETTINGS = ("max_lifetime", *(name for name in CLIENT_SETTINGS if not any(
    word in name for word in ("resume", "reconnect"))))


def make_setup(*, data_mime_type: str = "application/octet-stream",
               metadata_mime_type: str = "application/octet-stream",
               setup_payload: Payload | None = None, lease: bool = False,
               max_lifetime: int | None = None) -> SetupFrame:
    """The SETUP a 2015-draft client sends (draft §Setup Frame), in the RSocket 1.0 form the
    Twisted layer carries (version 0.0): its MIME types, payload and L flag are what goes on
    the wire.

    :param data_mime_type: ASCII, at most 255 bytes.
    :param metadata_mime_type: ASCII, at most 255 bytes.
    :param setup_payload: the setup data and metadata.
    :param lease: set L: this client honours LEASE (waits for the server's first one).
    :param max_lifetime: milliseconds the client waits for that first LEASE (None: the
        default of :class:`~rsocket_tx.core.config.ConnectionConfig`).
    :raises ValueError: a MIME type not ASCII or over 255 bytes, or the SETUP over the 31-bit
        frame length.
    """
    setup = make_rsocket_setup(data_mime_type=data_mime_type,
                               metadata_mime_type=metadata_mime_type,
                               setup_payload=setup_payload, lease=lease,
                               max_lifetime=(DEFAULT_MAX_LIFETIME if max_lifetime is None
                                             else max_lifetime))
    setup.major_version, setup.minor_version = 0, 0
    size = len(encode(DraftSetupFrame(
        metadata_mime_type=setup.metadata_mime_type, data_mime_type=setup.data_mime_type,
        lease=setup.lease, data=setup.data, metadata=setup.metadata)))
    if size + 4 > MAX_FRAME_LENGTH:
        raise ValueError(f"the SETUP frame would be {size} bytes: too large")
    return setup


def connect(endpoint, *, reactor=None, responder: Responder | None = None,
            setup_payload: Payload | None = None,
            data_mime_type: str = "application/octet-stream",
            metadata_mime_type: str = "application/octet-stream",
            config: ConnectionConfig | None = None, frame_logger: Callable | None = None,
            lease: bool | LeasePolicy = False, **settings) -> Deferred:
    """Connect to a 2015-draft server and send SETUP (draft §Connection Establishment).

    :param endpoint: a Twisted client endpoint string or URI (``"tcp://localhost:7878"``,
        ``"tls://host:7879?trustRoots=ca.pem"``, ``"ws://localhost:8080/path"``, ...; the
        same with an ``rs2015+`` prefix: ``"rs2015+tcp://localhost:7878"``) or an
        ``IStreamClientEndpoint`` (see the transports page).
    :param reactor: the reactor; None: the global one.
    :param responder: a :class:`~rsocket_tx.responder.Responder` serving the server's
        requests; None rejects them.
    :param setup_payload: SETUP data and metadata.
    :param data_mime_type: SETUP data MIME type (ASCII).
    :param metadata_mime_type: SETUP metadata MIME type (ASCII).
    :param config: the settings (None: the defaults); ``resume`` is not available.
    :param frame_logger: ``callable(direction, frame)`` with this draft's frames.
    :param lease: True (or the :class:`~rsocket_tx.lease.LeasePolicy` this client grants the
        server with): SETUP carries L, and the Deferred fires once the server's first LEASE
        has arrived (failing with :class:`~rsocket_tx.core.errors.LeaseError` when none does
        within ``max_lifetime`` ms).
    :param settings: fields of ``config`` (:data:`CONNECT_SETTINGS`).
    :returns: Deferred firing with a :class:`~rsocket_tx.reactivesocket.protocol.ReactiveSocket`
        (the requester handle), or failing with the endpoint's connection error. A server
        that answers in another protocol (an RSocket 1.0 server's ERROR[INVALID_SETUP], an
        HTTP status, a TLS alert, ...: :mod:`rsocket_tx.transports.peers`) or not at all
        fails the requests (and, with ``lease``, this Deferred) with a
        :class:`~rsocket_tx.core.errors.ConnectionLostError` that names it and the client to
        use.
    :raises ValueError: a bad endpoint string or setting.
    :raises TypeError: an unknown setting, or ``lease`` neither a bool nor a LeasePolicy.
    """
    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor
    config = build_config(config, settings, CONNECT_SETTINGS, "connect")
    lease_policy = policy_for(lease)
    setup = make_setup(data_mime_type=data_mime_type, metadata_mime_type=metadata_mime_type,
                       setup_payload=setup_payload, lease=lease is not False,
                       max_lifetime=config.max_lifetime)
    ep = client_endpoint(reactor, endpoint)
    factory = ReactiveSocketClientFactory(setup, responder, reactor=reactor, config=config,
                                          lease_policy=lease_policy, frame_logger=frame_logger)
    d = ep.connect(factory)
    d.addCallback(lambda proto: proto.when_secured())
    d.addCallback(lambda proto: proto.ready())
    d.addCallback(lambda proto: proto.rsocket)
    return d
