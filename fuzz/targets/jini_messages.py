"""Jini ERI mux codec (:mod:`rsocket_tx.jini.codec`), one message or connection header: the
first byte picks what to decode, the rest is the bytes.

Expected: :class:`~rsocket_tx.jini.errors.MessageDecodeError`. A message or header that
decodes encodes to exactly the bytes it came from (every bit of the wire is a field, a
reserved 0 or a checked pattern).
"""

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.errors import MessageDecodeError

from ..harness import check

PROTOCOL = "jini"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.jini.codec",)

HEADERS = [C.ClientConnectionHeader, C.ServerConnectionHeader]


def one_input(data: bytes) -> None:
    if not data:
        return
    choice, body = data[0], data[1:]
    try:
        if choice < 0xF0:
            decoded = C.decode(body)
        else:
            decoded = C.decode_connection_header(body, HEADERS[choice & 1])
    except MessageDecodeError:
        return
    check(C.encode(decoded) == body, "%r encodes to other bytes than %s", decoded, body.hex())
