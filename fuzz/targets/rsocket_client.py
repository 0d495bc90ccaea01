"""RSocket 1.0: the sans-IO connection as the client (SETUP sent; resume, lease, message
transport and small limits by variant: :mod:`fuzz.drivers.rsocket`)."""

from ..drivers import rsocket

PROTOCOL = "rsocket"
KIND = "conversation"  # a whole conversation with a sans-IO connection, API calls interleaved
INSTRUMENT = ("rsocket_tx.core", "rsocket_tx.mux")


def one_input(data: bytes) -> None:
    rsocket.run(data, rsocket.CLIENT)
