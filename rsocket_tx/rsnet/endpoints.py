"""Endpoint strings and URIs for the Reactive Streams network protocol.

Everywhere rsocket_tx takes an RS-network address (:func:`~rsocket_tx.rsnet.client.connect`,
:func:`~rsocket_tx.rsnet.server.serve`, ``twistd rsnet``, ``rsocket-tx rsnet``) it accepts the
forms of :mod:`rsocket_tx.transports.endpoints` -- a Twisted endpoint string
(``"tcp:host=localhost:port=7880"``, ``"tcp:7880:interface=127.0.0.1"``,
``"ssl:7881:privateKey=key.pem:certKey=cert.pem"``, ``"ws:8080:path=/rsnet"``), a URI
(``tcp://``, ``tls://``, ``ws://``, ``wss://``) or an endpoint object -- and URIs whose scheme
names the protocol over its transport: :data:`URI_PREFIX` ``+ transport``::

    rsnet+tcp://localhost:7880
    rsnet+tls://example.com:7881?trustRoots=ca.pem          (server: ?privateKey=..&certKey=..)
    rsnet+ws://localhost:8080/rsnet                         (WebSocket: binary messages)
    rsnet+wss://example.com:8443/rsnet?trustRoots=ca.pem

Over WebSocket the protocol's byte stream travels in binary messages (whose boundaries mean
nothing) under the subprotocol :data:`~rsocket_tx.rsnet.codec.WEBSOCKET_SUBPROTOCOL`: a client
offers it (:class:`~rsocket_tx.transports.oneport.ByteStreamWebSocketClientEndpoint`); a
server (:class:`RSNetWebSocketServerEndpoint`) is a one-port server
(:class:`~rsocket_tx.transports.oneport.OnePortFactory`) serving only this protocol: it accepts
the upgrade at any path, and plain RS-network connections on the same port too. ``ws://`` and
``wss://`` URIs mean the same as ``rsnet+ws://`` and ``rsnet+wss://``; Twisted's ``ws:`` and
``wss:`` endpoint strings (RSocket's WebSocket framing) are refused.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

from twisted.internet.interfaces import IStreamServerEndpoint
from zope.interface import implementer

from ..transports import endpoints

__all__ = ["URI_PREFIX", "DEFAULT_PORT", "client_endpoint", "server_endpoint", "transport_spec",
           "RSNetWebSocketServerEndpoint", "protocol_description"]

#: A URI scheme ``rsnet+X`` names transport ``X`` carrying the protocol.
URI_PREFIX = "rsnet+"
#: The port of the examples and of ``twistd rsnet``'s default endpoint (``tcp:7880``).
DEFAULT_PORT = 7880


def transport_spec(spec: Any) -> Any:
    """``spec`` with an ``rsnet+`` URI scheme replaced by its transport's
    (``rsnet+tcp://h:p`` -> ``tcp://h:p``); anything else unchanged.

    :raises ValueError: ``rsnet+`` with no transport after it.
    """
    if not isinstance(spec, str):
        return spec
    text = spec.strip()
    if endpoints.is_uri(text):
        scheme, sep, rest = text.partition("://")
        if scheme.lower().startswith(URI_PREFIX):
            name = scheme[len(URI_PREFIX):]
            if not name:
                raise ValueError(f"missing transport in {spec!r} (write rsnet+tcp://HOST:PORT,"
                                 " rsnet+tls://, rsnet+ws:// or rsnet+wss://)")
            text = f"{name}{sep}{rest}"
    return text


_WEBSOCKET = {"ws": "tcp", "wss": "tls"}


def _websocket(spec: Any) -> tuple[Any, str, str] | None:
    """``(parts, inner URI, url)`` of a ``ws://`` / ``wss://`` URI (after
    :func:`transport_spec`), None for anything else.

    :raises ValueError: a Twisted ``ws:`` / ``wss:`` endpoint string.
    """
    if not isinstance(spec, str):
        return None
    if not endpoints.is_uri(spec):
        kind = spec.partition(":")[0].lower()
        if kind in _WEBSOCKET:
            raise ValueError(f"{spec!r}: for RS-network over WebSocket write a URI "
                             f"(rsnet+{kind}://HOST:PORT/PATH)")
        return None
    parts = urlsplit(spec)
    inner = _WEBSOCKET.get(parts.scheme.lower())
    if inner is None:
        return None
    url = urlunsplit((parts.scheme.lower(), parts.netloc, parts.path or "/", "", ""))
    return parts, urlunsplit((inner, parts.netloc, "", parts.query, "")), url


def protocol_description() -> Any:
    """What the one-port server knows of this protocol
    (:class:`~rsocket_tx.transports.oneport.ProtocolDescription`): name ``"rsnet"``, the
    clientHello sniffer, the WebSocket subprotocol, byte-stream framing over WebSocket, and
    ``twistd rsnet``'s module (:mod:`rsocket_tx.rsnet.tap`)."""
    from ..transports.oneport import PROTOCOLS, ProtocolDescription, WebSocketFraming
    from .codec import WEBSOCKET_SUBPROTOCOL, sniff

    registered = PROTOCOLS.get("rsnet")
    if registered is not None:
        return registered
    return ProtocolDescription("rsnet", sniff, WEBSOCKET_SUBPROTOCOL, WebSocketFraming.BYTES,
                               tap="rsocket_tx.rsnet.tap")


@implementer(IStreamServerEndpoint)
class RSNetWebSocketServerEndpoint:
    """Serve RS-network over WebSocket (and plain) on ``endpoint``: each connection's first
    bytes tell a WebSocket upgrade (any path; the client must offer the subprotocol
    :data:`~rsocket_tx.rsnet.codec.WEBSOCKET_SUBPROTOCOL` or none) from a plain RS-network
    clientHello (:class:`~rsocket_tx.transports.oneport.OnePortFactory`).

    :param reactor: the reactor.
    :param endpoint: the ``IStreamServerEndpoint`` listened on (TCP; TLS for ``wss``).
    """

    def __init__(self, reactor: Any, endpoint: Any) -> None:
        self.reactor = reactor
        self.endpoint = endpoint

    def listen(self, factory: Any) -> Any:
        """Listen, serving ``factory`` (an
        :class:`~rsocket_tx.rsnet.server.RSNetServerFactory`).

        :returns: a Deferred firing with the listening port (its ``factory`` is the
            :class:`~rsocket_tx.transports.oneport.OnePortFactory`, which counts each
            connection, from its accept, in ``factory``'s ``connection_limit``: one cap for
            every endpoint of the server).
        """
        from ..transports.oneport import OnePortFactory, ServedProtocol

        config = getattr(factory, "config", None)
        size = getattr(config, "max_buffered_input", None)
        served = ServedProtocol(protocol_description(), factory, max_message_size=size)
        return self.endpoint.listen(OnePortFactory(
            [served], reactor=self.reactor,
            connection_limit=getattr(factory, "connection_limit", None)))

    def __repr__(self) -> str:
        return f"RSNetWebSocketServerEndpoint({self.endpoint!r})"


def client_endpoint(reactor: Any, spec: Any) -> Any:
    """Turn ``spec`` into an endpoint to connect to an RS-network peer.

    :param reactor: the reactor (``None``: the global reactor).
    :param spec: a Twisted client endpoint string, a URI (``rsnet+tcp://HOST:PORT``,
        ``rsnet+tls://HOST:PORT?trustRoots=ca.pem``, ``rsnet+ws://HOST:PORT/PATH``,
        ``rsnet+wss://...``; ``tcp://`` ... alike) or an ``IStreamClientEndpoint`` (returned
        unchanged).
    :returns: an ``IStreamClientEndpoint``.
    :raises ValueError: the string cannot be parsed.
    :raises TypeError: ``spec`` is neither a string nor a client endpoint.
    """
    spec = transport_spec(spec)
    websocket = _websocket(spec)
    if websocket is None:
        return endpoints.client_endpoint(reactor, spec)
    from ..transports.oneport import ByteStreamWebSocketClientEndpoint
    from .codec import WEBSOCKET_SUBPROTOCOL

    _, inner, url = websocket
    return ByteStreamWebSocketClientEndpoint(
        reactor, endpoints.client_endpoint(reactor, inner), url, WEBSOCKET_SUBPROTOCOL)


def server_endpoint(reactor: Any, spec: Any) -> Any:
    """Turn ``spec`` into an endpoint to serve the protocol on.

    :param reactor: the reactor (``None``: the global reactor).
    :param spec: a Twisted server endpoint string (``"tcp:7880:interface=127.0.0.1"``), a URI
        (``rsnet+tcp://:7880`` = every IPv4 interface, ``rsnet+tls://:7881?privateKey=key.pem&
        certKey=cert.pem``, ``rsnet+ws://127.0.0.1:8080/rsnet``; ``tcp://`` ... alike) or an
        ``IStreamServerEndpoint`` (returned unchanged).
    :returns: an ``IStreamServerEndpoint``.
    :raises ValueError: the string cannot be parsed.
    :raises TypeError: ``spec`` is neither a string nor a server endpoint.
    """
    spec = transport_spec(spec)
    websocket = _websocket(spec)
    if websocket is None:
        return endpoints.server_endpoint(reactor, spec)
    _, inner, _ = websocket
    return RSNetWebSocketServerEndpoint(reactor, endpoints.server_endpoint(reactor, inner))
