"""Jini ERI mux: the sans-IO connection as the client (:mod:`fuzz.drivers.jini`)."""

from ..drivers import jini

PROTOCOL = "jini"
KIND = "conversation"  # a whole conversation with a sans-IO connection, API calls interleaved
INSTRUMENT = ("rsocket_tx.jini", "rsocket_tx.mux")


def one_input(data: bytes) -> None:
    jini.run(data, jini.CLIENT)
