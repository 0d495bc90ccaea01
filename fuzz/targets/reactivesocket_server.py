"""2015 ReactiveSocket draft: the sans-IO connection as the server
(:mod:`fuzz.drivers.reactivesocket`)."""

from ..drivers import reactivesocket

PROTOCOL = "reactivesocket"
KIND = "conversation"  # a whole conversation with a sans-IO connection, API calls interleaved
INSTRUMENT = ("rsocket_tx.reactivesocket", "rsocket_tx.mux")


def one_input(data: bytes) -> None:
    reactivesocket.run(data, 0)
