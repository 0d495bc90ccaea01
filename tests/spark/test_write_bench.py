"""Sink throughput (rows/s) of the ``rsocket`` data source, end to end: a Spark job writes
~300k small rows (2 partitions) into the StreamLog server subprocess, per guarantee and format.

Skipped unless ``RSOCKET_SPARK_BENCH=1`` (it measures, it does not test behaviour beyond the
row count)::

    RSOCKET_SPARK_BENCH=1 .venv/bin/python -m pytest -p no:cacheprovider -s \\
        tests/spark/test_write_bench.py

Set ``RSOCKET_SPARK_BENCH_ROWS`` for another row count.
"""

from __future__ import annotations

import os
import time
import uuid

import pytest

pytest.importorskip("pyspark")

from rsocket_tx.streamlog import StreamLog  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("RSOCKET_SPARK_BENCH") != "1",
                                reason="benchmark: set RSOCKET_SPARK_BENCH=1")

ROWS = int(os.environ.get("RSOCKET_SPARK_BENCH_ROWS", "300000"))


@pytest.mark.parametrize("guarantee, fmt", [
    ("at-least-once", "json"),
    ("exactly-once", "json"),
    ("at-least-once", "cbor"),
    ("at-least-once", "binary"),
])
def test_sink_throughput(spark, log_server, guarantee, fmt):
    df = spark.range(0, ROWS, 1, 2).selectExpr(
        "id", "concat('row-', id) AS name", "CAST(id % 97 AS DOUBLE) * 0.5 AS value")
    if fmt == "binary":
        df = df.selectExpr("CAST(concat('row-', id) AS BINARY) AS data")
    df = df.cache()
    df.count()  # materialize: the timing is the sink's, not the generator's
    best = None
    for _ in range(2):  # the first run also starts workers and connections
        topic = "bench-" + uuid.uuid4().hex[:8]
        started = time.perf_counter()
        df.write.format("rsocket").mode("append").options(
            endpoint=log_server.endpoint, topic=topic, guarantee=guarantee,
            format=fmt).save()
        elapsed = time.perf_counter() - started
        best = elapsed if best is None else min(best, elapsed)
        log = StreamLog(log_server.dbs[0])
        try:
            assert log.end_offsets(topic) == {0: ROWS}
        finally:
            log.close()
    df.unpersist()
    print(f"\nsink {guarantee:13} {fmt:6}: {ROWS} rows in {best:.2f} s = "
          f"{ROWS / best:,.0f} rows/s")
