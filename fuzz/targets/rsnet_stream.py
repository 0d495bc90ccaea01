"""Reactive Streams network protocol codec (:mod:`rsocket_tx.rsnet.codec`): the feed records
are the reads of one direction of a connection; the variant byte picks the limits and the
fixed element size of subscriber 1.

Expected: :class:`~rsocket_tx.rsnet.errors.ProtocolError`. The messages are the same whatever
the cuts (:func:`~rsocket_tx.rsnet.codec.decode` of the whole stream gives the same messages
and the same error), and they encode back to exactly the bytes consumed (varints in their
shortest form only: the encoding is canonical).
"""

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.errors import ProtocolError

from ..harness import Records, check

PROTOCOL = "rsnet"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.rsnet.codec",)

CONFIGS = [RSNetConfig(), RSNetConfig(max_string_length=16, max_element_size=8,
                                      max_packed_size=32, max_extensions=2)]


def one_input(data: bytes) -> None:
    records = Records(data)
    variant = records.variant
    config = CONFIGS[variant & 1]
    fixed = (variant >> 1) & 7  # the elementSize of subscriber 1 (0: length-prefixed)

    def size(sid: int) -> int:
        return fixed if sid == 1 else 0

    decoder = C.MessageDecoder(config)
    got: list = []
    chunks = []
    failed = False
    for chunk in records.feeds():
        chunks.append(chunk)
        decoder.receive_data(chunk)
        try:
            while (m := decoder.next_message(size)) is not None:
                got.append(m)
        except ProtocolError:
            failed = True
            break
    stream = b"".join(chunks)
    try:
        expected, rest = C.decode(stream, config, size)
        whole_failed = False
    except ProtocolError:
        whole_failed = True
    if not whole_failed:
        check(got == expected, "cut stream gives %r, whole stream %r", got, expected)
    check(failed == whole_failed, "error: cut stream %s, whole stream %s", failed,
          whole_failed)
    consumed = b"".join(C.encode(m, size(getattr(m, "subscriber", 0))) for m in got)
    check(stream.startswith(consumed), "the messages do not encode to the bytes consumed")
    if not failed:
        check(rest == stream[len(consumed):], "decode() left %r, %d bytes after the messages",
              rest, len(stream) - len(consumed))
