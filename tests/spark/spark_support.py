"""Helpers of the Spark tests: a StreamLog server in a subprocess, publishing into its logs,
and the session settings.

The server is a subprocess (not a reactor thread in pytest's process, where pytest-twisted may
run the reactor in the main thread): ``python tests/spark/spark_support.py serve --db A --db B
--gap-db C`` listens on free loopback ports and prints one line ``PORTS <a> <b> <gap>``:

* one port per ``--db``: :class:`rsocket_tx.apps.streamlog.StreamLogResponder` on that file;
* the ``--gap-db`` port: :class:`GapResponder`, the offsets protocol over that file with
  injected faults, by topic name prefix: ``gaponce*`` skips one record of the first
  ``log.read`` of each shard (a retried task then succeeds), ``gapalways*`` skips one of every
  read. Each injected gap appends a line to ``<gap-db>.gaps``.

Tests publish by appending to the SQLite files directly with
:class:`rsocket_tx.apps.streamlog.StreamLog` (several processes may share a file).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

#: Seconds to wait for the server subprocess to print its ports.
SERVER_START_TIMEOUT = 60


def spark_builder():
    """A SparkSession builder for the tests: local[2,4] (2 cores, a task may be tried 4 times),
    2 shuffle partitions, no UI, workers running this interpreter."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    return (SparkSession.builder.master("local[2,4]").appName("rsocket-tx-tests")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.default.parallelism", "2")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.streaming.stopTimeout", "60s")
            .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
            .config("spark.python.worker.reuse", "true"))


class LogServer:
    """The server subprocess (see the module docstring).

    :ivar endpoints: one endpoint string per ``dbs`` entry (Twisted client syntax).
    :ivar gap_endpoint: the :class:`GapResponder`'s endpoint.
    :ivar dbs: the database files. :ivar gap_db: the gap responder's file.
    """

    def __init__(self, dbs: list[str], gap_db: str) -> None:
        self.dbs = list(dbs)
        self.gap_db = gap_db
        argv = [sys.executable, os.path.abspath(__file__), "serve"]
        for db in dbs:
            argv += ["--db", db]
        argv += ["--gap-db", gap_db]
        self.process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        line = _readline(self.process, SERVER_START_TIMEOUT)
        if not line.startswith("PORTS "):
            self.stop()
            raise RuntimeError(f"the log server did not start: {line!r} "
                               f"{self.process.stderr.read()!r}")
        ports = [int(p) for p in line.split()[1:]]
        self.ports = ports
        self.endpoints = [f"tcp:host=127.0.0.1:port={p}" for p in ports[:-1]]
        self.gap_endpoint = f"tcp:host=127.0.0.1:port={ports[-1]}"

    @property
    def endpoint(self) -> str:
        """The first StreamLog endpoint."""
        return self.endpoints[0]

    def gaps(self) -> list[str]:
        """The gaps the GapResponder injected so far: lines ``topic shard from``."""
        try:
            with open(self.gap_db + ".gaps") as f:
                return f.read().split("\n")[:-1]
        except FileNotFoundError:
            return []

    def stop(self) -> None:
        """Terminate the subprocess and wait for it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process.stdout.close()
        self.process.stderr.close()


def _readline(process: subprocess.Popen, timeout: float) -> str:
    box: list[str] = [""]

    def read():
        box[0] = process.stdout.readline()
    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(timeout)
    return box[0].strip()


def publish(db: str, topic: str, records, shard: int = 0, shards: int | None = None
            ) -> tuple[int, int]:
    """Append ``records`` (bytes, or dicts written as JSON) to ``topic``/``shard`` of ``db``
    (creating the topic with ``shards`` shards, default ``shard + 1``).

    :returns: (first offset, end offset)."""
    from rsocket_tx.apps.streamlog import StreamLog
    log = StreamLog(db)
    try:
        want = max(shards or 0, shard + 1)
        if (log.shards(topic) or 0) < want:
            log.create_topic(topic, want)
        data = [r if isinstance(r, bytes) else json.dumps(r, separators=(",", ":")).encode()
                for r in records]
        return log.append(topic, shard, data)
    finally:
        log.close()


def arrow_records(start: int, n: int, per: int) -> list[bytes]:
    """Arrow IPC streams (one record each) of flights-like rows ``start .. start+n-1``,
    ``per`` rows per record: columns ``id bigint, carrier string, dep_delay double``."""
    import pyarrow as pa

    from rsocket_tx.extensions.arrow import encode_record_batches
    out = []
    for a in range(start, start + n, per):
        ids = range(a, min(start + n, a + per))
        out.append(encode_record_batches(pa.RecordBatch.from_pydict({
            "id": pa.array(ids, pa.int64()),
            "carrier": [("UA", "AA", "B6", "DL", "EV")[i % 5] for i in ids],
            "dep_delay": pa.array([(i % 40) - 5.5 for i in ids], pa.float64())})))
    return out


def flight(i: int, shard: int = 0) -> dict:
    """A flights-like JSON record number ``i``."""
    carriers = ("UA", "AA", "B6", "DL", "EV")
    return {"id": i, "shard": shard, "carrier": carriers[i % 5], "origin": "JFK",
            "dep_delay": (i % 40) - 5.5, "tags": [f"t{i % 3}"], "nested": {"k": i * 2}}


# -- the server subprocess --------------------------------------------------------------------

def _gap_responder_class():
    from rsocket_tx import InvalidError, Payload, Responder, route
    from rsocket_tx.apps.streamlog import OFFSET_METADATA_PREFIX, StreamLog, encode_batch

    class GapResponder(Responder):
        """``log.offsets``, ``log.read`` and ``log.read.batch`` over a StreamLog file, with one
        record left out of a read of topics named ``gaponce*`` (first read of each shard only)
        and ``gapalways*`` (every read)."""

        db = ""
        reads: dict = {}

        @route("log.offsets")
        def offsets(self, request):
            log = StreamLog.shared(self.db)
            topic = request.data["topic"]
            return {"topic": topic,
                    "shards": {str(k): v for k, v in log.end_offsets(topic).items()}}

        @route("log.read", interaction="request_stream")
        def read(self, request):
            return [Payload(data, OFFSET_METADATA_PREFIX + off.to_bytes(8, "big"))
                    for off, data in self._records(request)]

        @route("log.read.batch", interaction="request_stream")
        def read_batch(self, request):
            # one record per batch, so that the left-out record shows as a gap between batches
            return [Payload(encode_batch(off, [data]))
                    for off, data in self._records(request)]

        @route("arrow.numbers", interaction="request_stream")
        def arrow_numbers(self, request):
            """A generic Arrow responder: request data ``{"n": rows, "per": rows per payload,
            "as": "int64" or another type for the id column}`` -> Arrow IPC payloads of
            ``id, name`` (rsocket_tx.extensions.arrow)."""
            import pyarrow as pa

            from rsocket_tx.extensions.arrow import arrow_payload
            d = json.loads(request.payload.data)
            n, per, kind = d["n"], d["per"], d.get("as", "int64")
            return [arrow_payload(pa.RecordBatch.from_pydict({
                "id": pa.array(range(a, min(n, a + per)), kind),
                "name": [f"n{i}" for i in range(a, min(n, a + per))]}))
                for a in range(0, n, per)]

        def _records(self, request):
            """The (offset, data) of the request's range, one left out if the topic says so."""
            d = request.data
            topic, shard, start = d["topic"], d["shard"], d["from"]
            log = StreamLog.shared(self.db)
            stop = d.get("to", log.end_offset(topic, shard))
            if not 0 <= start <= stop <= log.end_offset(topic, shard):
                raise InvalidError(f"bad range [{start}, {stop})")
            n = self.reads[(topic, shard)] = self.reads.get((topic, shard), 0) + 1
            skip = None
            if stop - start >= 2 and (topic.startswith("gapalways")
                                      or (topic.startswith("gaponce") and n == 1)):
                skip = start + 1
                with open(self.db + ".gaps", "a") as f:
                    f.write(f"{topic} {shard} {start}\n")
            return [(off, data) for off, data in log.read(topic, shard, start, stop)
                    if off != skip]

    return GapResponder


def _serve(argv: list[str]) -> None:
    import argparse
    import functools

    from twisted.internet import defer, reactor

    from rsocket_tx import serve
    from rsocket_tx.apps.streamlog import StreamLog, StreamLogResponder

    parser = argparse.ArgumentParser()
    parser.add_argument("--db", action="append", default=[])
    parser.add_argument("--gap-db", required=True)
    args = parser.parse_args(argv)
    gap = _gap_responder_class()
    gap.db = args.gap_db
    StreamLog.shared(args.gap_db)
    listens = [serve("tcp:0:interface=127.0.0.1",
                     functools.partial(StreamLogResponder, log=StreamLog.shared(db)))
               for db in args.db]
    listens.append(serve("tcp:0:interface=127.0.0.1", gap))

    def ready(ports):
        print("PORTS", *(p.getHost().port for p in ports), flush=True)

    def failed(failure):
        print("FAILED", failure.getErrorMessage(), flush=True)
        reactor.stop()
    defer.gatherResults(listens, consumeErrors=True).addCallbacks(ready, failed)
    reactor.run()


if __name__ == "__main__":
    if sys.argv[1:2] != ["serve"]:
        sys.exit("usage: spark_support.py serve --db PATH [--db PATH ...] --gap-db PATH")
    _serve(sys.argv[2:])
