"""twistd plugin for the Reactive Streams network protocol of rsocket_tx:
``twistd -n rsnet --listen tcp:7880 --publishers mod:name``.

Lazy, as ``rsocket_tx_plugin.py`` explains: the options and service module
(:mod:`rsocket_tx.rsnet.tap`) are named as a string.
"""

from twisted.application.service import ServiceMaker

rsnet = ServiceMaker(
    "RS-network",
    "rsocket_tx.rsnet.tap",
    "Serve Reactive Streams network publishers (the 2015 reactive-streams-io draft) over TCP,"
    " TLS and WebSocket (the demo publishes count, count/N, ints/N, echo/NAME, error)",
    "rsnet",
)
