"""yamux: the sans-IO session as the client (:mod:`fuzz.drivers.yamux`)."""

from ..drivers import yamux

PROTOCOL = "yamux"
KIND = "conversation"  # a whole conversation with a sans-IO connection, API calls interleaved
INSTRUMENT = ("rsocket_tx.yamux", "rsocket_tx.mux")


def one_input(data: bytes) -> None:
    yamux.run(data, yamux.CLIENT)
