"""Endpoint strings and URIs for yamux.

Everywhere rsocket_tx takes a yamux address (:func:`~rsocket_tx.yamux.factory.connect`,
``twistd yamux``, ``rsocket-tx yamux``) it accepts the forms of
:mod:`rsocket_tx.transports.endpoints` -- a Twisted endpoint string
(``"tcp:host=localhost:port=7890"``, ``"tcp:7890:interface=127.0.0.1"``,
``"ssl:7891:privateKey=key.pem:certKey=cert.pem"``), a URI (``tcp://``, ``tls://``) or an
endpoint object -- and URIs whose scheme names yamux over its transport, :data:`URI_PREFIX`
``+ transport``:

.. code-block:: text

    yamux+tcp://localhost:7890
    yamux+tls://example.com:7891?trustRoots=ca.pem          (server: ?privateKey=..&certKey=..)

yamux is a byte-stream protocol over TCP or TLS (spec.md: "Yamux uses a streaming connection
underneath"); no implementation defines it over WebSocket, so ``ws://`` forms are refused with
that reason. On a shared port (``twistd mux``) a WebSocket byte stream with the subprotocol
``yamux`` is served all the same (:mod:`rsocket_tx.transports.oneport`).
"""

from __future__ import annotations

from typing import Any

from ..transports.endpoints import client_endpoint as transport_client_endpoint
from ..transports.endpoints import is_uri
from ..transports.endpoints import server_endpoint as transport_server_endpoint

__all__ = ["DEFAULT_PORT", "URI_PREFIX", "client_endpoint", "server_endpoint", "transport_spec"]

#: A URI scheme ``yamux+X`` names transport ``X`` carrying yamux.
URI_PREFIX = "yamux+"
#: The port of the examples and of ``twistd yamux``'s default endpoint (``tcp:7890``).
DEFAULT_PORT = 7890

_REFUSED = ("ws", "wss")


def transport_spec(spec: Any) -> Any:
    """``spec`` with a ``yamux+`` URI scheme replaced by its transport's
    (``yamux+tcp://h:p`` -> ``tcp://h:p``); anything else unchanged.

    :raises ValueError: ``yamux+`` with no transport after it, or a WebSocket form.
    """
    if not isinstance(spec, str):
        return spec
    text = spec.strip()
    if is_uri(text):
        scheme, sep, rest = text.partition("://")
        lowered = scheme.lower()
        if lowered.startswith(URI_PREFIX):
            lowered = scheme = scheme[len(URI_PREFIX):]
            if not scheme:
                raise ValueError(f"missing transport in {spec!r} (write yamux+tcp://HOST:PORT "
                                 "or yamux+tls://HOST:PORT)")
        text = f"{scheme}{sep}{rest}"
    else:
        lowered = text.partition(":")[0].lower()
    if lowered in _REFUSED:
        raise ValueError(f"{spec!r}: yamux runs over a byte stream, TCP or TLS (write "
                         f"yamux+tcp://HOST:PORT or yamux+tls://HOST:PORT)")
    return text


def client_endpoint(reactor: Any, spec: Any) -> Any:
    """Turn ``spec`` into an endpoint to connect to a yamux server.

    :param reactor: the reactor (``None``: the global reactor).
    :param spec: a Twisted client endpoint string, a URI (``yamux+tcp://HOST:PORT``,
        ``yamux+tls://HOST:PORT?trustRoots=ca.pem``; ``tcp://`` ... alike) or an
        ``IStreamClientEndpoint`` (returned unchanged).
    :returns: an ``IStreamClientEndpoint``.
    :raises ValueError: the string cannot be parsed, or names WebSocket.
    :raises TypeError: ``spec`` is neither a string nor a client endpoint.
    """
    return transport_client_endpoint(reactor, transport_spec(spec))


def server_endpoint(reactor: Any, spec: Any) -> Any:
    """Turn ``spec`` into an endpoint to serve yamux on.

    :param reactor: the reactor (``None``: the global reactor).
    :param spec: a Twisted server endpoint string (``"tcp:7890:interface=127.0.0.1"``), a URI
        (``yamux+tcp://:7890`` = every IPv4 interface, ``yamux+tls://:7891?privateKey=key.pem&
        certKey=cert.pem``; ``tcp://`` ... alike) or an ``IStreamServerEndpoint`` (returned
        unchanged).
    :returns: an ``IStreamServerEndpoint``.
    :raises ValueError: the string cannot be parsed, or names WebSocket.
    :raises TypeError: ``spec`` is neither a string nor a server endpoint.
    """
    return transport_server_endpoint(reactor, transport_spec(spec))
