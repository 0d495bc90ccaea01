"""twistd plugin of rsocket_tx's one-port server: ``twistd -n mux --listen tcp:7878
--protocol rsocket --protocol 'jini-mux --dispatcher mod:Class'``.

Lazy, as ``rsocket_tx_plugin.py`` explains: the options and service module
(:mod:`rsocket_tx.faces.mux`) are named as a string.
"""

from twisted.application.service import ServiceMaker

mux = ServiceMaker(
    "mux",
    "rsocket_tx.faces.mux",
    "Serve several protocols on one port (RSocket, the Jini ERI mux, ...), each connection's"
    " told from its first bytes, over TCP, TLS and WebSocket",
    "mux",
)
