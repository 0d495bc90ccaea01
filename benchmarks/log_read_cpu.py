"""CPU per item of the stream log serving ``log.read``, without a reactor or a socket.

A :class:`~rsocket_tx.apps.streamlog.StreamLogResponder` behind a server
:class:`~rsocket_tx.protocol.RSocketServerFactory` protocol on a StringTransport (time from a
Clock) gets SETUP and one ``log.read`` REQUEST_STREAM with unbounded credit for N records of a
185-byte JSON flight, and sends them all. Prints CPU seconds per item (record)::

    .venv/bin/python -m benchmarks.log_read_cpu [N] [--batch]

``--batch`` asks ``log.read.batch`` instead: the same records, many per PAYLOAD (record batches
of the responder's default ``batch_bytes``).

Nothing asserts; it is the log server's share of a Spark read of the log (the Python worker's
is ``benchmarks.stream_receive_cpu``).
"""

from __future__ import annotations

import functools
import json
import sys
import tempfile
import time
from pathlib import Path

from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from benchmarks.stream_receive_cpu import RECORD
from rsocket_tx.apps.streamlog import ROUTE_READ, ROUTE_READ_BATCH, StreamLog, StreamLogResponder
from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import RequestStreamFrame, encode
from rsocket_tx.core.framing import frame_with_length
from rsocket_tx.extensions.metadata import build_metadata
from rsocket_tx.extensions.mimetypes import COMPOSITE_METADATA
from rsocket_tx.protocol import RSocketServerFactory


def main(n: int = 300_000, batch: bool = False) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        log = StreamLog(Path(tmp) / "log.db")
        log.create_topic("t", 1)
        log.append("t", 0, [RECORD] * n)
        clock = Clock()
        factory = RSocketServerFactory(functools.partial(StreamLogResponder, log=log),
                                       reactor=clock)
        proto = factory.buildProtocol(None)
        transport = StringTransport()
        proto.makeConnection(transport)
        setup = make_setup(metadata_mime_type=COMPOSITE_METADATA,
                           data_mime_type="application/json")
        proto.dataReceived(frame_with_length(encode(setup)))
        request = RequestStreamFrame(
            stream_id=1, initial_request_n=2**31 - 1,
            data=json.dumps({"topic": "t", "shard": 0, "from": 0}).encode(),
            metadata=build_metadata(COMPOSITE_METADATA,
                                    route=ROUTE_READ_BATCH if batch else ROUTE_READ))
        sent = 0
        start = time.process_time()
        proto.dataReceived(frame_with_length(encode(request)))
        while True:  # the pump sends a batch per reactor turn
            size = len(transport.value())
            transport.clear()
            sent += size
            if size == 0 and sent:
                break
            clock.advance(0)
        cpu = time.process_time() - start
        log.close()
    print(f"{ROUTE_READ_BATCH if batch else ROUTE_READ}: {n:,} items ({sent:,} bytes): "
          f"{cpu:.3f} s CPU, {cpu / n * 1e6:.2f} us per item, {n / cpu:,.0f} items per "
          f"CPU-second")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--batch"]
    main(int(args[0]) if args else 300_000, "--batch" in sys.argv[1:])
