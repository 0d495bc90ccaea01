"""twistd plugin for yamux (HashiCorp's stream multiplexer) on rsocket_tx:
``twistd -n yamux --listen tcp:7890 --stream-factory mod:factory``.

Lazy, as ``rsocket_tx_plugin.py`` explains: the options and service module
(:mod:`rsocket_tx.yamux.tap`) are named as a string.
"""

from twisted.application.service import ServiceMaker

yamux = ServiceMaker(
    "yamux",
    "rsocket_tx.yamux.tap",
    "Serve yamux (HashiCorp's stream multiplexer) over TCP and TLS: each stream runs a"
    " Twisted protocol (default: echo)",
    "yamux",
)
