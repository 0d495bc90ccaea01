"""yamux frame codec (:mod:`rsocket_tx.yamux.codec`): the feed records are the reads of one
direction of a session; the variant byte picks ``max_frame_length``.

Expected: :class:`~rsocket_tx.yamux.errors.ProtocolError` (raised, or the decoder's ``error``
after the frames before it). The frames are the same whatever the cuts (the whole stream fed
at once gives the same frames and the same error), they encode back to exactly the bytes
consumed, and :func:`~rsocket_tx.yamux.codec.sniff` never raises on the stream's beginning.
"""

from rsocket_tx.mux import Sniff
from rsocket_tx.yamux import codec as C
from rsocket_tx.yamux.errors import ProtocolError

from ..harness import Records, check

PROTOCOL = "yamux"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.yamux.codec",)


def _decode(chunks: list[bytes], limit: int) -> tuple[list, bool]:
    decoder = C.FrameDecoder(limit)
    got: list = []
    try:
        for chunk in chunks:
            got += decoder.feed(chunk)
            if decoder.error is not None:
                return got, True
    except ProtocolError:
        return got, True
    return got, False


def one_input(data: bytes) -> None:
    records = Records(data)
    limit = 1 + records.variant * 4
    chunks = list(records.feeds())
    stream = b"".join(chunks)
    got, failed = _decode(chunks, limit)
    whole, whole_failed = _decode([stream], limit)
    check(failed == whole_failed, "error: cut stream %s, whole stream %s", failed, whole_failed)
    check(got == whole, "cut stream gives %r, whole stream %r", got, whole)
    consumed = b"".join(C.encode(f) for f in got)
    check(stream.startswith(consumed), "the frames do not encode to the bytes consumed")
    for n in range(min(len(stream), C.SNIFF_SIZE) + 1):
        check(isinstance(C.sniff(stream[:n]), Sniff), "sniff gave no verdict")
