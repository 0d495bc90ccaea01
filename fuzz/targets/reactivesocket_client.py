"""2015 ReactiveSocket draft: the sans-IO connection as the client
(:mod:`fuzz.drivers.reactivesocket`)."""

from ..drivers import reactivesocket, rsocket

PROTOCOL = "reactivesocket"
KIND = "conversation"  # a whole conversation with a sans-IO connection, API calls interleaved
INSTRUMENT = ("rsocket_tx.reactivesocket", "rsocket_tx.mux")


def one_input(data: bytes) -> None:
    reactivesocket.run(data, rsocket.CLIENT)
