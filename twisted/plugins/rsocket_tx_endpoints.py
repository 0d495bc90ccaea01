"""Endpoint-string parsers of rsocket_tx: server ``mtls:``, ``ws:``, ``wss:`` and client ``ws:``,
``wss:`` (the classes are in :mod:`rsocket_tx.transports.endpoint_parsers`). ``tls:`` and
``ssl:`` are Twisted's own (rsocket_tx's ``client_endpoint`` parses ``tls:`` client strings
itself, with :class:`~rsocket_tx.transports.endpoint_parsers.TLSClientParser`). No
``__init__.py`` in ``twisted/plugins``: the directory joins Twisted's plugin package."""

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
