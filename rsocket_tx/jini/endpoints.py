"""Endpoint strings and URIs for the Jini ERI mux.

Everywhere rsocket_tx takes a Jini ERI mux address (:class:`~rsocket_tx.jini.client.JiniMuxClient`,
:func:`~rsocket_tx.jini.server.serve`, ``twistd jini-mux``, ``rsocket-tx jini``) it accepts the
byte-stream forms of :mod:`rsocket_tx.transports.endpoints` -- a Twisted endpoint string
(``"tcp:host=localhost:port=9000"``, ``"tcp:9000:interface=127.0.0.1"``,
``"ssl:9443:privateKey=key.pem:certKey=cert.pem"``, ``"unix:/run/jini.sock"``), a URI
(``tcp://``, ``tls://``) or an endpoint object -- and URIs whose scheme names the protocol over
its transport: :data:`URI_PREFIX` ``+ transport``:

.. code-block:: text

    jini+tcp://localhost:9000                        (server: jini+tcp://:9000, every interface)
    jini+tls://example.com:9443?trustRoots=ca.pem    (server: ?privateKey=..&certKey=..)

The mux needs a byte stream: WebSocket (``ws``, ``wss``) addresses are refused.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.interfaces import IStreamClientEndpoint, IStreamServerEndpoint

from ..transports import endpoints

__all__ = ["URI_PREFIX", "transport_spec", "client_endpoint", "server_endpoint"]

#: A URI scheme ``jini+X`` names transport ``X`` carrying the Jini ERI mux: ``jini+tcp://``,
#: ``jini+tls://``.
URI_PREFIX = "jini+"
#: Transports that carry messages rather than a byte stream: the mux needs a byte stream.
_MESSAGE_TRANSPORTS = ("ws", "wss")


def transport_spec(spec: Any) -> Any:
    """``spec`` with a ``jini+`` URI scheme replaced by its transport's (``jini+tcp://h:p`` ->
    ``tcp://h:p``); anything else (an endpoint string, a plain URI, an endpoint object)
    unchanged.

    :raises ValueError: a WebSocket endpoint (the mux needs a byte stream), or ``jini+`` with
        no transport after it.
    """
    if not isinstance(spec, str):
        return spec
    text = spec.strip()
    if endpoints.is_uri(text):
        scheme, sep, rest = text.partition("://")
        name = scheme.lower()
        if name.startswith(URI_PREFIX):
            name = name[len(URI_PREFIX):]
            if not name:
                raise ValueError(f"missing transport in {spec!r} (write jini+tcp://HOST:PORT "
                                 "or jini+tls://HOST:PORT)")
            text = f"{name}{sep}{rest}"
    else:
        name = text.partition(":")[0].lower()
    if name in _MESSAGE_TRANSPORTS:
        raise ValueError(f"{spec!r}: the Jini ERI mux runs over a byte stream (tcp, tls, ssl, "
                         "mtls, unix), not over WebSocket")
    return text


def server_endpoint(reactor: Any, spec: Any) -> IStreamServerEndpoint:
    """Turn ``spec`` into an endpoint to serve the Jini ERI mux on.

    :param reactor: the reactor (``None``: the global reactor).
    :param spec: a Twisted server endpoint string (``"tcp:9000:interface=127.0.0.1"``,
        ``"ssl:9443:privateKey=key.pem:certKey=cert.pem"``,
        ``"mtls:9443:privateKey=key.pem:caCerts=ca.pem"``, ``"unix:/run/jini.sock"``), a URI
        (``"jini+tcp://127.0.0.1:9000"``, ``"jini+tcp://:9000"`` = every IPv4 interface,
        ``"jini+tls://:9443?privateKey=key.pem&certKey=cert.pem"``; ``tcp://`` and ``tls://``
        alike) or an :class:`~twisted.internet.interfaces.IStreamServerEndpoint` (returned
        unchanged). The forms are those of :func:`rsocket_tx.transports.endpoints.server_endpoint`.
    :returns: an :class:`~twisted.internet.interfaces.IStreamServerEndpoint`.
    :raises ValueError: the string cannot be parsed, or names a WebSocket endpoint.
    :raises TypeError: ``spec`` is neither a string nor a server endpoint.
    """
    return endpoints.server_endpoint(reactor, transport_spec(spec))


def client_endpoint(reactor: Any, spec: Any) -> IStreamClientEndpoint:
    """Turn ``spec`` into an endpoint to connect to a Jini ERI mux server.

    :param reactor: the reactor (``None``: the global reactor).
    :param spec: a Twisted client endpoint string (``"tcp:host=localhost:port=9000"``,
        ``"tls:host=example.com:port=9443:trustRoots=CADIR"``), a URI
        (``"jini+tcp://localhost:9000"``, ``"jini+tls://example.com:9443?trustRoots=ca.pem"``;
        ``tcp://`` and ``tls://`` alike) or an
        :class:`~twisted.internet.interfaces.IStreamClientEndpoint` (returned unchanged).
    :returns: an :class:`~twisted.internet.interfaces.IStreamClientEndpoint`.
    :raises ValueError: the string cannot be parsed, or names a WebSocket endpoint.
    :raises TypeError: ``spec`` is neither a string nor a client endpoint.
    """
    return endpoints.client_endpoint(reactor, transport_spec(spec))
