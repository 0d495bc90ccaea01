"""CPU per item of a requester receiving a request-stream, without a reactor or a socket.

A client :class:`~rsocket_tx.protocol.RSocketProtocol` on a StringTransport is fed N PAYLOAD
frames shaped like the stream log's ``log.read`` items (a 185-byte JSON flight record, an
8-byte offset in composite metadata) in 64 KiB reads, and drains them with
``RequestStream.take_ready()`` as the Spark reader does. Prints CPU seconds per item::

    .venv/bin/python -m benchmarks.stream_receive_cpu [N] [--batch]

``--batch``: the same N records as ``log.read.batch`` sends them, record batches of
:data:`~rsocket_tx.apps.streamlog.DEFAULT_BATCH_BYTES` (many records per PAYLOAD, no metadata),
each checked with :func:`~rsocket_tx.apps.streamlog.batch_layout` and cut to its records' bytes as
the reader does; still CPU per record.

Nothing asserts; the number is what the Spark reader's Python worker spends in rsocket_tx per
row (the rest is Arrow decoding and Spark).
"""

from __future__ import annotations

import sys
import time

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rsocket_tx.apps.streamlog import (
    DEFAULT_BATCH_BYTES,
    OFFSET_METADATA_PREFIX,
    batch_layout,
    encode_batch,
)
from rsocket_tx.client import make_setup
from rsocket_tx.core.fragmentation import encode_payload_bearing
from rsocket_tx.core.frames import FrameType
from rsocket_tx.core.payload import Payload
from rsocket_tx.extensions.mimetypes import COMPOSITE_METADATA
from rsocket_tx.protocol import RSocketClientFactory

RECORD = (b'{"year":2013,"month":1,"day":1,"dep_time":517,"sched_dep_time":515,"dep_delay":2.0,'
          b'"arr_time":830,"carrier":"UA","flight":1545,"tailnum":"N14228","origin":"EWR",'
          b'"dest":"IAH"}')
_NEXT = 0x20  # PAYLOAD flag N


def main(n: int = 300_000, batch: bool = False) -> None:
    setup = make_setup(metadata_mime_type=COMPOSITE_METADATA, data_mime_type="application/json")
    proto = RSocketClientFactory(setup, reactor=Clock()).buildProtocol(None)
    proto.makeConnection(StringTransport())
    stream = proto.rsocket.request_stream(Payload(b"{}"), prefetch=n + 1)
    if batch:
        per = (DEFAULT_BATCH_BYTES - 12) // (len(RECORD) + 5)
        frames = [encode_payload_bearing(FrameType.PAYLOAD, stream.stream_id, _NEXT, b"",
                                          encode_batch(i, [RECORD] * min(per, n - i)), None)
                  for i in range(0, n, per)]
    else:
        frames = [encode_payload_bearing(FrameType.PAYLOAD, stream.stream_id, _NEXT, b"",
                                         RECORD, OFFSET_METADATA_PREFIX + i.to_bytes(8, "big"))
                  for i in range(n)]
    wire = b"".join(len(f).to_bytes(3, "big") + f for f in frames)
    reads = [wire[i:i + 65536] for i in range(0, len(wire), 65536)]
    got = 0
    start = time.process_time()
    for data in reads:
        proto.dataReceived(data)
        if batch:
            for p in stream.take_ready():
                first, lengths, body = batch_layout(p.data)
                p.data[body:]  # noqa: B018 - the reader's cut to the records' bytes
                got += len(lengths)
        else:
            got += len(stream.take_ready())
    cpu = time.process_time() - start
    assert got == n, (got, n)
    print(f"{'batches' if batch else 'one per payload'}: {n:,} items: {cpu:.3f} s CPU, "
          f"{cpu / n * 1e6:.2f} us per item, {n / cpu:,.0f} items per CPU-second")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--batch"]
    main(int(args[0]) if args else 300_000, "--batch" in sys.argv[1:])
