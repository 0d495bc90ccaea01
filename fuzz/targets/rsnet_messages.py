"""Reactive Streams network protocol codec (:mod:`rsocket_tx.rsnet.codec`), whole bytes at
once (the fast codec target; ``rsnet_stream`` cuts the same bytes into reads): the first byte
picks the limits and the fixed element size of subscriber 1, the rest is decoded with
:func:`~rsocket_tx.rsnet.codec.decode`.

Expected: :class:`~rsocket_tx.rsnet.errors.ProtocolError`. The messages decoded encode back to
exactly the bytes they came from (varints in their shortest form only: the encoding is
canonical), and what :func:`decode` leaves is exactly the rest.
"""

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.errors import ProtocolError

from ..harness import check

PROTOCOL = "rsnet"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.rsnet.codec",)

CONFIGS = [RSNetConfig(), RSNetConfig(max_string_length=16, max_element_size=8,
                                      max_packed_size=32, max_extensions=2)]


def one_input(data: bytes) -> None:
    if not data:
        return
    variant, body = data[0], data[1:]
    fixed = (variant >> 1) & 7  # the elementSize of subscriber 1 (0: length-prefixed)

    def size(sid: int) -> int:
        return fixed if sid == 1 else 0

    try:
        messages, rest = C.decode(body, CONFIGS[variant & 1], size)
    except ProtocolError:
        return
    consumed = b"".join(C.encode(m, size(getattr(m, "subscriber", 0))) for m in messages)
    check(consumed + rest == body, "%r and rest %s do not encode to %s", messages, rest.hex(),
          body.hex())
