"""RSocket 1.0 frame codec (:mod:`rsocket_tx.core.frames`): the whole input is one frame.

Expected: :class:`~rsocket_tx.core.errors.FrameDecodeError` (and its subclass
:class:`~rsocket_tx.core.errors.UnknownFrameTypeError`). A frame that decodes re-encodes, and
decodes again to an equal frame (unknown flag bits are ignored, so the bytes may differ; the
connection frames are written on stream 0, whatever stream they were read from); a memoryview
decodes as the bytes do.
"""

from dataclasses import replace

from rsocket_tx.core.errors import FrameDecodeError
from rsocket_tx.core.frames import FrameType, decode, encode

from ..harness import check

PROTOCOL = "rsocket"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.core.frames",)

#: frames the encoder always writes on stream 0
STREAM_ZERO = {FrameType.SETUP, FrameType.LEASE, FrameType.KEEPALIVE, FrameType.METADATA_PUSH,
               FrameType.RESUME, FrameType.RESUME_OK}


def one_input(data: bytes) -> None:
    try:
        frame = decode(data)
    except FrameDecodeError:
        return
    again = decode(encode(frame))
    if frame.frame_type in STREAM_ZERO:
        frame = replace(frame, stream_id=0)
    check(again == frame, "round trip: %r -> %r", frame, again)
    check(decode(memoryview(data)) == decode(data), "a memoryview decodes differently")
