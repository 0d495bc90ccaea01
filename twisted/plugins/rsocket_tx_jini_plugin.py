"""twistd plugin for the Jini ERI mux of rsocket_tx:
``twistd -n jini-mux --listen tcp:9000 --dispatcher mod:Class``.

Lazy, as ``rsocket_tx_plugin.py`` explains: the options and service module
(:mod:`rsocket_tx.jini.tap`) are named as a string.
"""

from twisted.application.service import ServiceMaker

jini_mux = ServiceMaker(
    "Jini ERI mux",
    "rsocket_tx.jini.tap",
    "Serve a Jini ERI multiplexing protocol dispatcher, as Apache River's TcpServerEndpoint"
    " does (the demo dispatcher echoes each request)",
    "jini-mux",
)
