"""Reactive Streams network protocol: the sans-IO connection as the client
(:mod:`fuzz.drivers.rsnet`)."""

from ..drivers import rsnet

PROTOCOL = "rsnet"
KIND = "conversation"  # a whole conversation with a sans-IO connection, API calls interleaved
INSTRUMENT = ("rsocket_tx.rsnet", "rsocket_tx.mux")


def one_input(data: bytes) -> None:
    rsnet.run(data, rsnet.CLIENT)
