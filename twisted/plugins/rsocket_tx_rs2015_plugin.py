"""twistd plugin for the 2015 ReactiveSocket draft of rsocket_tx:
``twistd -n rs2015 --listen tcp:7070 --responder mod:Class``.

Lazy, as ``rsocket_tx_plugin.py`` explains: the options and service module
(:mod:`rsocket_tx.reactivesocket.tap`) are named as a string.
"""

from twisted.application.service import ServiceMaker

rs2015 = ServiceMaker(
    "ReactiveSocket 2015",
    "rsocket_tx.reactivesocket.tap",
    "Serve an RSocket Responder over the 2015 ReactiveSocket draft, over TCP, TLS and"
    " WebSocket (the demo responder echoes request-response, counts request-stream/-sub)",
    "rs2015",
)
