"""What the stream-log responder tests share (tests/test_streamlog_responder.py and
tests/test_streamlog_batch.py): the ``log`` fixture, a client over loopback, JSON records, a
log that counts its SQLite chunks, and a wait of some reactor turns."""

from __future__ import annotations

import functools
import json

import pytest
from twisted.internet import reactor
from twisted.internet.defer import Deferred

from rsocket_tx.apps.streamlog import StreamLog, StreamLogResponder
from rsocket_tx.extensions import COMPOSITE_METADATA

JSON = "application/json"


@pytest.fixture(name="log")
def log_fixture(tmp_path):
    """A fresh stream log in ``tmp_path`` (import this name to have the ``log`` fixture)."""
    log = StreamLog(tmp_path / "log.db")
    yield log
    log.close()


async def client(harness, log, **settings):
    """A connection (composite metadata, JSON data) to a stream-log responder serving
    ``log`` with ``settings``."""
    port = await harness.serve(functools.partial(StreamLogResponder, log=log, **settings))
    return await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                                 data_mime_type=JSON)


def records(n, start=0):
    """``n`` JSON records ``{"n": i}`` from ``start``, as bytes."""
    return [json.dumps({"n": i}).encode() for i in range(start, start + n)]


class CountingLog(StreamLog):
    """Counts the chunks reads have taken from SQLite."""

    chunks_read = 0

    def read_chunks(self, *args, **kwargs):
        def counted(chunks):
            for rows in chunks:
                self.chunks_read += 1
                yield rows
        return counted(super().read_chunks(*args, **kwargs))


async def turns(n=20):
    """Let ``n`` reactor turns pass."""
    for _ in range(n):
        d = Deferred()
        reactor.callLater(0, d.callback, None)
        await d
