"""2015 ReactiveSocket draft frame codec (:mod:`rsocket_tx.reactivesocket.frames`): the feed
records are the reads of a TCP stream, cut into frames by :class:`FrameReader` (32-bit length
words); each frame is decoded.

Expected: :class:`~rsocket_tx.core.errors.FrameDecodeError` (and its subclass
``UnknownFrameTypeError``) and :class:`~rsocket_tx.core.errors.FrameTooLargeError`. A frame
that decodes re-encodes, and decodes again to an equal frame (unknown flag bits are ignored,
so the bytes may differ).
"""

from rsocket_tx.core.errors import FrameDecodeError, FrameTooLargeError
from rsocket_tx.reactivesocket import frames as F

from ..harness import Records, check

PROTOCOL = "reactivesocket"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.reactivesocket.frames",)


def one_input(data: bytes) -> None:
    records = Records(data)
    reader = F.FrameReader(F.HEADER_SIZE + records.variant * 4)
    for chunk in records.feeds():
        try:
            frames = reader.feed(chunk)
        except (FrameDecodeError, FrameTooLargeError):
            return
        for buf in frames:
            try:
                frame = F.decode(buf)
            except FrameDecodeError:
                continue
            again = F.decode(F.encode(frame))
            check(again == frame, "round trip: %r -> %r", frame, again)
