"""Jini ERI mux incremental decoder (:class:`rsocket_tx.jini.codec.MessageDecoder`): the feed
records are the reads of one direction of a connection; the variant byte picks the connection
header expected first (client's, server's, or none).

Expected: :class:`~rsocket_tx.jini.errors.MessageDecodeError` (raised again on every later
call). The messages are the same whatever the cuts (fed at once, the whole stream gives the
same messages and the same error), and they encode back to the bytes consumed.
"""

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.errors import MessageDecodeError

from ..harness import Records, check

PROTOCOL = "jini"
KIND = "codec"  # one codec: bytes in, frames or messages out
INSTRUMENT = ("rsocket_tx.jini.codec",)

HEADERS = [C.ClientConnectionHeader, C.ServerConnectionHeader, None]


def _drain(decoder: C.MessageDecoder, out: list) -> bool:
    """Append every complete message to ``out``; True when the decoder failed."""
    while True:
        try:
            message = decoder.next_message()
        except MessageDecodeError:
            try:
                decoder.next_message()
            except MessageDecodeError:
                return True
            check(False, "a failed decoder decoded again")
        if message is None:
            return False
        out.append(message)


def one_input(data: bytes) -> None:
    records = Records(data)
    header = HEADERS[records.variant % 3]
    decoder = C.MessageDecoder(header)
    got: list = []
    chunks = []
    failed = False
    for chunk in records.feeds():
        chunks.append(chunk)
        decoder.receive_data(chunk)
        if _drain(decoder, got):
            failed = True
            break
    stream = b"".join(chunks)
    whole = C.MessageDecoder(header)
    whole.receive_data(stream)
    expected: list = []
    whole_failed = _drain(whole, expected)
    check(got == expected, "cut stream gives %r, whole stream %r", got, expected)
    check(failed == whole_failed, "error: cut stream %s, whole stream %s", failed,
          whole_failed)
    consumed = b"".join(C.encode(m) for m in got)
    check(stream.startswith(consumed), "the messages do not encode to the bytes consumed")
    if not failed:
        check(decoder.buffered == len(stream) - len(consumed),
              "buffered %d of %d bytes left", decoder.buffered, len(stream) - len(consumed))
