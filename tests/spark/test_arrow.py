"""Arrow IPC payloads end to end: the reader's ``format arrow`` (log mode and generic mode),
the schema check, the writer's ``format arrow`` (at-least-once and exactly-once), and a
streaming read of an Arrow topic."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pytest
from spark_support import arrow_records, flight, publish

from rsocket_tx.apps.streamlog import StreamLog
from rsocket_tx.extensions.arrow import decode_record_batches

SCHEMA = "id bigint, carrier string, dep_delay double"
#: Seconds a streaming query may take in these tests (a bound, not a sleep).
QUERY_TIMEOUT = 300


def reader(spark, endpoint, **options):
    r = spark.read.format("rsocket").option("endpoints", endpoint).option("format", "arrow")
    for k, v in options.items():
        r = r.option(k, v)
    return r


def expected_row(i: int) -> tuple:
    return (i, ("UA", "AA", "B6", "DL", "EV")[i % 5], (i % 40) - 5.5)


def test_log_mode_reads_the_payloads_batches(spark, log_server):
    """7 payloads (Arrow IPC streams) of up to 300 rows, in 2 shards; the source columns
    come from the payload holding the row."""
    db, ep = log_server.dbs[0], log_server.endpoints[0]
    publish(db, "arrow-log", arrow_records(0, 1200, 300), shard=0, shards=2)
    publish(db, "arrow-log", arrow_records(1200, 700, 300), shard=1, shards=2)
    df = reader(spark, ep, topic="arrow-log").schema(
        SCHEMA + ", _shard int, _offset bigint, _endpoint string").load()
    rows = df.collect()
    assert sorted((r.id, r.carrier, r.dep_delay) for r in rows) == \
        [expected_row(i) for i in range(1900)]
    where = {r.id: (r._shard, r._offset, r._endpoint) for r in rows}
    assert where[0] == (0, 0, ep) and where[299] == (0, 0, ep) and where[300] == (0, 1, ep)
    assert where[1200] == (1, 0, ep) and where[1899] == (1, 2, ep)
    # a declared subset of the columns, in another order, and a split into partitions
    df = reader(spark, ep, topic="arrow-log", shards="0", maxRowsPerPartition="2") \
        .schema("dep_delay double, id bigint").load()
    assert df.rdd.getNumPartitions() == 2
    assert sorted(r.id for r in df.collect()) == list(range(1200))


def test_a_payload_of_another_schema_names_both_schemas(spark, log_server):
    db, ep = log_server.dbs[0], log_server.endpoints[0]
    publish(db, "arrow-mismatch", arrow_records(0, 10, 10))
    with pytest.raises(Exception) as info:
        reader(spark, ep, topic="arrow-mismatch").schema("id int, carrier string").load() \
            .collect()
    message = str(info.value)
    assert "SchemaMismatchError" in message
    assert "id: int64, carrier: string, dep_delay: double" in message  # the payload's
    assert "id: int32, carrier: string" in message  # the declared one
    assert "column 'id' is int64, declared int32" in message
    with pytest.raises(Exception, match="no column 'origin'"):
        reader(spark, ep, topic="arrow-mismatch").schema("id bigint, origin string").load() \
            .collect()


def test_a_json_topic_read_as_arrow_is_a_clear_error(spark, log_server):
    publish(log_server.dbs[0], "arrow-not", [flight(i) for i in range(3)])
    with pytest.raises(Exception, match="is not an Arrow IPC stream"):
        reader(spark, log_server.endpoint, topic="arrow-not").schema(SCHEMA).load().collect()


def test_generic_mode_reads_an_arrow_responder(spark, log_server):
    """A plain responder route streaming Arrow payloads (rsocket_tx.extensions.arrow)."""
    df = reader(spark, log_server.gap_endpoint, route="arrow.numbers",
                data=json.dumps({"n": 2500, "per": 1000})).schema("name string, id bigint") \
        .load()
    rows = df.collect()
    assert sorted((r.id, r.name) for r in rows) == [(i, f"n{i}") for i in range(2500)]
    with pytest.raises(Exception, match="column 'id' is int32, declared int64"):
        reader(spark, log_server.gap_endpoint, route="arrow.numbers",
               data=json.dumps({"n": 5, "per": 5, "as": "int32"})).schema("id bigint") \
            .load().collect()


def stored_batches(log_server, topic: str) -> list:
    log = StreamLog(log_server.dbs[0])
    try:
        return [b for _, data in log.read(topic, 0) for b in decode_record_batches(data)]
    finally:
        log.close()


@pytest.mark.parametrize("mode", ["at-least-once", "exactly-once"])
def test_write_arrow_and_read_it_back(spark, log_server, mode):
    """The sink sends Spark's Arrow batches as Arrow IPC records (no JSON anywhere), and the
    reader reads them back in Arrow."""
    topic = "arrow-sink-" + uuid.uuid4().hex[:8]
    df = spark.range(0, 25_000, 1, 3).selectExpr(
        "id", "element_at(array('UA','AA','B6','DL','EV'), CAST(id % 5 AS INT) + 1) AS carrier",
        "CAST(id % 40 AS DOUBLE) - 5.5 AS dep_delay")
    df.write.format("rsocket").mode("append").options(
        endpoints=log_server.endpoint, topic=topic, format="arrow", guarantee=mode).save()
    batches = stored_batches(log_server, topic)
    table = pa.Table.from_batches(batches)
    assert table.schema.names == ["id", "carrier", "dep_delay"]
    assert sorted(table.column("id").to_pylist()) == list(range(25_000))
    if mode == "exactly-once":  # published partition by partition, in order
        assert table.column("id").to_pylist() == list(range(25_000))
    back = reader(spark, log_server.endpoint, topic=topic).schema(SCHEMA).load()
    assert sorted(tuple(r) for r in back.collect()) == [expected_row(i) for i in range(25_000)]


def test_streaming_read_of_an_arrow_topic(spark, log_server):
    """maxRowsPerBatch counts records, here Arrow payloads of 100 rows each."""
    db, ep = log_server.dbs[1], log_server.endpoints[1]
    publish(db, "arrow-stream", arrow_records(0, 1000, 100))
    df = (spark.readStream.format("rsocket").option("endpoints", ep)
          .option("topic", "arrow-stream").option("format", "arrow")
          .option("maxRowsPerBatch", "4").schema(SCHEMA + ", _offset bigint").load())
    q = df.writeStream.format("memory").queryName("arrowstream") \
        .trigger(availableNow=True).start()
    assert q.awaitTermination(QUERY_TIMEOUT), "the query did not finish"
    assert q.exception() is None
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes == [400, 400, 200]
    rows = spark.sql("select id, _offset from arrowstream").collect()
    assert sorted((r.id, r._offset) for r in rows) == [(i, i // 100) for i in range(1000)]
