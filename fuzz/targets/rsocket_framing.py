"""RSocket 1.0 length-prefixed framing (:mod:`rsocket_tx.core.framing`): the feed records are
the reads of a TCP stream; the variant byte sets ``max_frame_size``.

Expected: :class:`~rsocket_tx.core.errors.FrameTooLargeError`. The frames returned are the
ones a plain reading of the whole stream finds, in order, whatever the cuts; without an error,
``buffered`` is the bytes after the last complete frame.
"""

from rsocket_tx.core.errors import FrameTooLargeError
from rsocket_tx.core.framing import MAX_FRAME_LENGTH, FrameReader

from ..harness import Records, check

PROTOCOL = "rsocket"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.core.framing",)


def _reference(stream: bytes, limit: int) -> tuple[list[bytes], bool, int]:
    """(complete frames, whether an oversize prefix was reached, bytes left over)."""
    frames = []
    pos = 0
    while len(stream) - pos >= 3:
        n = int.from_bytes(stream[pos:pos + 3], "big")
        if n > limit:
            return frames, True, 0
        if pos + 3 + n > len(stream):
            break
        frames.append(stream[pos + 3:pos + 3 + n])
        pos += 3 + n
    return frames, False, len(stream) - pos


def one_input(data: bytes) -> None:
    records = Records(data)
    variant = records.variant
    limit = MAX_FRAME_LENGTH if variant == 0xFF else 6 + variant * 4
    reader = FrameReader(limit)
    got: list[bytes] = []
    chunks = []
    failed = False
    for chunk in records.feeds():
        chunks.append(chunk)
        try:
            got += reader.feed(chunk)
        except FrameTooLargeError:
            failed = True
            break
    frames, oversize, left = _reference(b"".join(chunks), limit)
    if failed:
        check(oversize, "FrameTooLargeError without an oversize length prefix")
        check(got == frames[:len(got)], "the frames before the error differ from the stream's")
    else:
        check(not oversize, "an oversize length prefix was not reported")
        check(got == frames, "frames %r, the stream has %r", got, frames)
        check(reader.buffered == left, "buffered %d, %d bytes are left", reader.buffered, left)
