"""Endpoint-string parsers of rsocket_tx: server ``mtls:``, ``ws:``, ``wss:`` and client ``ws:``,
``wss:`` (the classes are in :mod:`rsocket_tx.transports.endpoint_parsers`). ``tls:`` (client
and server) and ``ssl:`` are Twisted's own. No ``__init__.py`` in ``twisted/plugins``: the
directory joins Twisted's plugin package."""

from rsocket_tx.transports.endpoint_parsers import (
    MutualTLSServerParser,
    SecureWebSocketClientParser,
    SecureWebSocketServerParser,
    WebSocketClientParser,
    WebSocketServerParser,
)

rsocketMutualTLSServer = MutualTLSServerParser()
rsocketWSServer = WebSocketServerParser()
rsocketWSSServer = SecureWebSocketServerParser()
rsocketWSClient = WebSocketClientParser()
rsocketWSSClient = SecureWebSocketClientParser()
