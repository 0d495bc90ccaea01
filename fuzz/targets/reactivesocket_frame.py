"""2015 ReactiveSocket draft frame codec (:mod:`rsocket_tx.reactivesocket.frames`), one frame
without its length word (the fast codec target; ``reactivesocket_frames`` reads the same
frames from a cut TCP stream).

Expected: :class:`~rsocket_tx.core.errors.FrameDecodeError` (and its subclass
``UnknownFrameTypeError``). A frame that decodes re-encodes, and decodes again to an equal
frame (unknown flag bits are ignored, so the bytes may differ).
"""

from rsocket_tx.core.errors import FrameDecodeError
from rsocket_tx.reactivesocket import frames as F

from ..harness import check

PROTOCOL = "reactivesocket"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.reactivesocket.frames",)


def one_input(data: bytes) -> None:
    try:
        frame = F.decode(data)
    except FrameDecodeError:
        return
    again = F.decode(F.encode(frame))
    check(again == frame, "round trip: %r -> %r", frame, again)
