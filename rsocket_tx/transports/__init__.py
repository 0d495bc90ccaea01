"""The transports of the Twisted layer (DESIGN §2): how the bytes of a multiplexed protocol
get to the peer, and how a user names an address.

* :mod:`rsocket_tx.transports.endpoints`: endpoint strings and URIs -> Twisted endpoints (TCP,
  TLS, WebSocket, UNIX), for every face that takes an address;
* :mod:`rsocket_tx.transports.endpoint_parsers`: the ``mtls:``, ``ws:`` and ``wss:`` endpoint
  string parsers plugged into Twisted (``twisted/plugins/rsocket_tx_endpoints.py``);
* :mod:`rsocket_tx.transports.tls`: TLS server and client endpoints, TLS errors;
* :mod:`rsocket_tx.transports.websocket`: one frame per binary WebSocket message (autobahn).

The modules import nothing of the faces (:mod:`rsocket_tx.faces`) or the apps
(:mod:`rsocket_tx.apps`) (``tests/test_layout.py``). The protocol bridge every multiplexed
protocol subclasses, :mod:`rsocket_tx.bridge`, is the protocol side of the same Twisted layer.
This package imports none of its modules, so importing one does not load the others.
"""
