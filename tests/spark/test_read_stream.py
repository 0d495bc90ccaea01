"""Streaming reads of the ``rsocket`` data source: admission control, new data, gaps, and the
exactly-once restart from a checkpoint."""

from __future__ import annotations

import json
import time

from spark_support import flight, publish

SCHEMA = "id bigint, carrier string, dep_delay double, _shard int, _offset bigint"
#: Seconds a streaming query may take in these tests (a bound, not a sleep).
QUERY_TIMEOUT = 300


def stream(spark, endpoint, topic, **options):
    r = (spark.readStream.format("rsocket").option("endpoints", endpoint)
         .option("topic", topic).option("format", "json"))
    for k, v in options.items():
        r = r.option(k, v)
    return r.schema(SCHEMA).load()


def run_available_now(df, name):
    q = df.writeStream.format("memory").queryName(name).trigger(availableNow=True).start()
    assert q.awaitTermination(QUERY_TIMEOUT), "the query did not finish"
    assert q.exception() is None
    return q


def test_max_rows_per_batch(spark, log_server):
    """2 shards x 25 rows, maxRowsPerBatch 10: 3 micro-batches of at most 10 rows per shard."""
    db, ep = log_server.dbs[0], log_server.endpoints[0]
    for shard in range(2):
        publish(db, "s-limit", [flight(100 * shard + i, shard) for i in range(25)], shard=shard,
                shards=2)
    q = run_available_now(stream(spark, ep, "s-limit", maxRowsPerBatch=10), "slimit")
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [20, 20, 10]
    ends = [p["sources"][0]["endOffset"] for p in q.recentProgress if p["numInputRows"]]
    assert json.loads(ends[0]) == {ep: {"0": 10, "1": 10}}
    assert json.loads(ends[-1]) == {ep: {"0": 25, "1": 25}}
    rows = spark.sql("select * from slimit").collect()
    assert len(rows) == 50
    assert {(r._shard, r._offset) for r in rows} == {(s, o) for s in range(2) for o in range(25)}


def test_new_data_is_picked_up(spark, log_server):
    db, ep = log_server.dbs[1], log_server.endpoints[1]
    publish(db, "s-grow", [flight(i) for i in range(5)])
    q = stream(spark, ep, "s-grow").writeStream.format("memory").queryName("sgrow").start()
    try:
        q.processAllAvailable()
        assert spark.sql("select count(*) from sgrow").first()[0] == 5
        publish(db, "s-grow", [flight(i) for i in range(5, 12)])
        q.processAllAvailable()
        ids = [r.id for r in spark.sql("select id from sgrow order by id").collect()]
        assert ids == list(range(12))
    finally:
        q.stop()


def test_starting_offsets(spark, log_server):
    db, ep = log_server.dbs[0], log_server.endpoints[0]
    publish(db, "s-start", [flight(i) for i in range(10)])
    run_available_now(stream(spark, ep, "s-start", startingOffsets=json.dumps({ep: {"0": 6}})),
                      "sstart_json")
    assert [r.id for r in spark.sql("select id from sstart_json order by id").collect()] == \
        [6, 7, 8, 9]
    run_available_now(stream(spark, ep, "s-start", startingOffsets="latest"), "sstart_latest")
    assert spark.sql("select count(*) from sstart_latest").first()[0] == 0


def test_gap_fails_the_task_and_spark_retries(spark, log_server):
    publish(log_server.gap_db, "gaponce-stream", [flight(i) for i in range(30)])
    run_available_now(stream(spark, log_server.gap_endpoint, "gaponce-stream",
                             maxRowsPerBatch=12), "sgap")
    offsets = [r._offset for r in spark.sql("select _offset from sgap order by 1").collect()]
    assert offsets == list(range(30))
    assert "gaponce-stream 0 0" in log_server.gaps()  # the first task did see a gap


def test_restart_from_checkpoint_exactly_once(spark, log_server, tmp_path):
    """A query writing parquet is stopped mid-way (while batches remain), more data is
    published, and the query restarted from its checkpoint: no row lost, none duplicated."""
    db, ep = log_server.dbs[1], log_server.endpoints[1]
    for shard in range(2):
        publish(db, "s-restart", [flight(10000 * shard + i, shard) for i in range(400)],
                shard=shard, shards=2)
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(**trigger):
        df = stream(spark, ep, "s-restart", maxRowsPerBatch=25)
        w = (df.writeStream.format("parquet").option("path", out)
             .option("checkpointLocation", checkpoint))
        return (w.trigger(**trigger) if trigger else w).start()

    q = start()
    deadline = time.monotonic() + QUERY_TIMEOUT
    # poll the running query (a real external process) until two batches are done
    while sum(1 for p in q.recentProgress if p["numInputRows"]) < 2:
        assert q.exception() is None and q.isActive
        assert time.monotonic() < deadline, "the query made no progress"
        q.awaitTermination(0.1)
    q.stop()
    written = spark.read.parquet(out).count()
    assert 0 < written < 800, "the query must be stopped while data remains"
    for shard in range(2):
        publish(db, "s-restart", [flight(10000 * shard + i, shard) for i in range(400, 500)],
                shard=shard)
    q = start(availableNow=True)
    assert q.awaitTermination(QUERY_TIMEOUT)
    assert q.exception() is None
    result = spark.read.parquet(out)
    assert result.count() == 1000
    assert result.select("_shard", "_offset").distinct().count() == 1000
    assert {r.id for r in result.select("id").collect()} == \
        {10000 * s + i for s in range(2) for i in range(500)}
