"""CPU per item of a requester receiving a request-stream, without a reactor or a socket.

A client :class:`~rsocket_tx.protocol.RSocketProtocol` on a StringTransport is fed N PAYLOAD
frames shaped like the stream log's ``log.read`` items (a 185-byte JSON flight record, an
8-byte offset in composite metadata) in 64 KiB reads, and drains them with
``RequestStream.take_ready()`` as the Spark reader does. Prints CPU seconds per item::

    .venv/bin/python -m benchmarks.stream_receive_cpu [N]

Nothing asserts; the number is what the Spark reader's Python worker spends in rsocket_tx per
row (the rest is Arrow decoding and Spark).
"""

from __future__ import annotations

import sys
import time

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from rsocket_tx.client import make_setup
from rsocket_tx.core.fragmentation import encode_payload_bearing
from rsocket_tx.core.frames import FrameType
from rsocket_tx.core.payload import Payload
from rsocket_tx.extensions.mimetypes import COMPOSITE_METADATA
from rsocket_tx.protocol import RSocketClientFactory
from rsocket_tx.streamlog import OFFSET_METADATA_PREFIX

RECORD = (b'{"year":2013,"month":1,"day":1,"dep_time":517,"sched_dep_time":515,"dep_delay":2.0,'
          b'"arr_time":830,"carrier":"UA","flight":1545,"tailnum":"N14228","origin":"EWR",'
          b'"dest":"IAH"}')
_NEXT = 0x20  # PAYLOAD flag N


def main(n: int = 300_000) -> None:
    setup = make_setup(metadata_mime_type=COMPOSITE_METADATA, data_mime_type="application/json")
    proto = RSocketClientFactory(setup, reactor=Clock()).buildProtocol(None)
    proto.makeConnection(StringTransport())
    stream = proto.rsocket.request_stream(Payload(b"{}"), prefetch=n + 1)
    wire = b"".join(
        len(f).to_bytes(3, "big") + f
        for f in (encode_payload_bearing(FrameType.PAYLOAD, stream.stream_id, _NEXT, b"", RECORD,
                                         OFFSET_METADATA_PREFIX + i.to_bytes(8, "big"))
                  for i in range(n)))
    reads = [wire[i:i + 65536] for i in range(0, len(wire), 65536)]
    got = 0
    start = time.process_time()
    for data in reads:
        proto.dataReceived(data)
        got += len(stream.take_ready())
    cpu = time.process_time() - start
    assert got == n, (got, n)
    print(f"{n:,} items: {cpu:.3f} s CPU, {cpu / n * 1e6:.2f} us per item, "
          f"{n / cpu:,.0f} items per CPU-second")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 300_000)
