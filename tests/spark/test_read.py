"""Batch reads of the ``rsocket`` data source against a real StreamLog server subprocess."""

from __future__ import annotations

import json

import cbor2
import pytest
from spark_support import flight, publish

import pyspark_rsocket
from rsocket_tx.apps.streamlog import offset_of

JSON_SCHEMA = ("id bigint, carrier string, dep_delay double, tags array<string>, "
               "nested struct<k: bigint>, missing string, _shard int, _offset bigint, "
               "_endpoint string")


def reader(spark, endpoints, **options):
    r = spark.read.format("rsocket").option("endpoints", ",".join(endpoints))
    for k, v in options.items():
        r = r.option(k, v)
    return r


def test_format_found_without_register(spark, log_server):
    """The session never called register(): PySpark found pyspark_rsocket.DefaultSource."""
    publish(log_server.dbs[0], "plain", [b"a", b"b", b"c"])
    df = reader(spark, log_server.endpoints[:1], topic="plain").load()
    assert pyspark_rsocket.DefaultSource.name() == "rsocket"
    assert df.columns == ["data", "metadata", "shard", "offset"]
    rows = df.orderBy("offset").collect()
    assert [(bytes(r.data), r.shard, r.offset) for r in rows] == \
        [(b"a", 0, 0), (b"b", 0, 1), (b"c", 0, 2)]
    # the metadata column is the payload's metadata: the offset entry of the protocol
    assert [offset_of(bytes(r.metadata)) for r in rows] == [0, 1, 2]


def test_register_explicitly(spark, log_server):
    pyspark_rsocket.register(spark)
    publish(log_server.dbs[0], "registered", [b"x"])
    assert reader(spark, log_server.endpoints[:1], topic="registered").load().count() == 1


def test_json_with_schema(spark, log_server):
    records = [flight(i) for i in range(50)]
    records[7] = {"id": 7, "carrier": "UA", "extra": "ignored"}  # missing fields -> null
    publish(log_server.dbs[0], "json1", records)
    df = reader(spark, log_server.endpoints[:1], topic="json1", format="json",
                batchSize=16).schema(JSON_SCHEMA).load()
    rows = {r.id: r for r in df.collect()}
    assert sorted(rows) == list(range(50))
    r = rows[12]
    assert (r.carrier, r.dep_delay, r.tags, r.nested.k, r.missing) == \
        ("B6", 6.5, ["t0"], 24, None)
    assert (r._shard, r._offset, r._endpoint) == (0, 12, log_server.endpoints[0])
    assert rows[7].dep_delay is None and rows[7].carrier == "UA"


def test_json_pretty_printed_records(spark, log_server):
    """Records with raw newlines still decode one payload = one row."""
    records = [json.dumps({"id": i, "carrier": "AA"}, indent=2).encode() for i in range(5)]
    publish(log_server.dbs[0], "json-pretty", records)
    df = reader(spark, log_server.endpoints[:1], topic="json-pretty", format="json") \
        .schema("id bigint, carrier string").load()
    assert sorted(r.id for r in df.collect()) == list(range(5))


def test_bad_json_fails_with_offsets(spark, log_server):
    publish(log_server.dbs[0], "json-bad", [b'{"id": 1}', b'{"id": '])
    df = reader(spark, log_server.endpoints[:1], topic="json-bad", format="json") \
        .schema("id bigint").load()
    with pytest.raises(Exception, match=r"json-bad.*offsets \[0, 2\)"):
        df.collect()


def test_cbor_with_schema(spark, log_server):
    records = [cbor2.dumps({"id": i, "carrier": "DL", "dep_delay": i / 2, "tags": ["a", "b"],
                            "nested": {"k": -i}}) for i in range(30)]
    publish(log_server.dbs[0], "cbor1", records)
    df = reader(spark, log_server.endpoints[:1], topic="cbor1", format="cbor") \
        .schema("id bigint, carrier string, dep_delay double, tags array<string>, "
                "nested struct<k: bigint>, _offset bigint").load()
    rows = sorted(df.collect(), key=lambda r: r.id)
    assert len(rows) == 30
    assert (rows[9].dep_delay, rows[9].tags, rows[9].nested.k, rows[9]._offset) == \
        (4.5, ["a", "b"], -9, 9)


def test_endpoints_and_shards_make_partitions(spark, log_server):
    """2 endpoints x 3 shards = 6 partitions; every row read once, from its own shard."""
    for e, db in enumerate(log_server.dbs):
        for shard in range(3):
            records = [flight(1000 * e + 100 * shard + i, shard) for i in range(10 + shard)]
            publish(db, "multi", records, shard=shard, shards=3)
    df = reader(spark, log_server.endpoints, topic="multi", format="json") \
        .schema("id bigint, shard bigint, _shard int, _offset bigint, _endpoint string").load()
    assert df.rdd.getNumPartitions() == 6
    rows = df.collect()
    assert len(rows) == 2 * (10 + 11 + 12)
    assert len({r.id for r in rows}) == len(rows)
    assert all(r.shard == r._shard for r in rows)
    assert {r._endpoint for r in rows} == set(log_server.endpoints)
    # the shards option restricts; maxRowsPerPartition splits a shard
    df = reader(spark, log_server.endpoints, topic="multi", shards="1,2",
                maxRowsPerPartition=5).load()
    assert df.rdd.getNumPartitions() == 2 * (3 + 3)
    assert df.count() == 2 * (11 + 12)
    assert df.select("shard", "offset").distinct().count() == 11 + 12


def test_generic_route_mode(spark, log_server):
    """route + data: one request-stream per endpoint (here the log's own log.read route)."""
    for db in log_server.dbs:
        publish(db, "generic", [b"r%d" % i for i in range(7)])
    request = json.dumps({"topic": "generic", "shard": 0, "from": 2})
    df = reader(spark, log_server.endpoints, route="log.read", data=request).load()
    assert df.columns == ["data", "metadata"]
    assert df.rdd.getNumPartitions() == 2
    assert sorted(bytes(r.data) for r in df.collect()) == \
        sorted([b"r%d" % i for i in range(2, 7)] * 2)


# batchBytes=0: log.read, one record per payload; default: log.read.batch
GAP_BATCH_BYTES = {"single": "0", "batches": "262144"}


def gap_reader(spark, log_server, topic, kind):
    return reader(spark, [log_server.gap_endpoint], topic=topic,
                  batchBytes=GAP_BATCH_BYTES[kind]).load()


@pytest.mark.parametrize("kind", GAP_BATCH_BYTES)
def test_gap_fails_the_task_and_retry_succeeds(spark, log_server, kind):
    """The first read of the shard leaves out offset 1: the task fails (OffsetGapError) and
    Spark's retry reads every row exactly once."""
    topic = f"gaponce-batch-{kind}"
    publish(log_server.gap_db, topic, [b"%d" % i for i in range(20)])
    rows = gap_reader(spark, log_server, topic, kind).collect()
    assert sorted(r.offset for r in rows) == list(range(20))
    assert [bytes(r.data) for r in sorted(rows, key=lambda r: r.offset)] == \
        [b"%d" % i for i in range(20)]
    assert f"{topic} 0 0" in log_server.gaps()


@pytest.mark.parametrize("kind", GAP_BATCH_BYTES)
def test_permanent_gap_fails_the_query(spark, log_server, kind):
    topic = f"gapalways-batch-{kind}"
    publish(log_server.gap_db, topic, [b"%d" % i for i in range(20)])
    df = gap_reader(spark, log_server, topic, kind)
    with pytest.raises(Exception, match="offset gap: expected offset 1, got 2"):
        df.collect()
    assert log_server.gaps().count(f"{topic} 0 0") == 4  # local[2,4]: 4 attempts


def test_record_batches_and_single_records_read_the_same_rows(spark, log_server):
    """log.read.batch (default, and batches of a few records) and log.read (batchBytes=0)
    give the same rows and offsets, binary records with LF bytes inside included."""
    binary = [b"line %d\n" % i * (i % 3) for i in range(300)] + [b"\n\n", b"z" * 5000]
    publish(log_server.dbs[0], "batched-bin", binary)
    flights = [flight(i) for i in range(700)]
    publish(log_server.dbs[0], "batched-json", flights)
    schema = "id bigint, carrier string, _offset bigint"
    for batch_bytes in ("262144", "100", "0"):
        df = reader(spark, log_server.endpoints[:1], topic="batched-bin",
                    batchBytes=batch_bytes).load()
        rows = df.orderBy("offset").collect()
        assert [(bytes(r.data), r.offset) for r in rows] == \
            [(d, i) for i, d in enumerate(binary)], batch_bytes
        # the metadata column is log.read's offset metadata either way
        assert [offset_of(bytes(r.metadata)) for r in rows] == list(range(302)), batch_bytes
        df = reader(spark, log_server.endpoints[:1], topic="batched-json", format="json",
                    batchBytes=batch_bytes, maxRowsPerPartition=300).schema(schema).load()
        assert [(r.id, r._offset) for r in df.orderBy("_offset").collect()] == \
            [(i, i) for i in range(700)], batch_bytes


@pytest.mark.parametrize(("options", "message"), [
    ({"topic": "t"}, "'endpoints' is required"),
    ({"endpoints": "tcp:host=h:port=notaport", "topic": "t"}, "cannot parse endpoint"),
    ({"endpoints": "E"}, "needs option 'topic'"),
    ({"endpoints": "E", "topic": "t", "route": "r"}, "exclude each other"),
    ({"endpoints": "E", "topic": "t", "format": "xml"}, "'format' must be one of"),
    ({"endpoints": "E", "topic": "t", "prefetch": "0"}, "'prefetch' must be in"),
    ({"endpoints": "E", "topic": "t", "maxRowsPerBatch": "x"}, "'maxRowsPerBatch' must be an"),
    ({"endpoints": "E", "topic": "t", "shards": "a"}, "'shards' must be"),
    ({"endpoints": "E", "topic": "t", "startingOffsets": "{"}, "'startingOffsets' must be"),
    ({"endpoints": "E", "topic": "t", "bogus": "1"}, "unknown rsocket read option"),
    ({"endpoint": "E", "topic": "t"}, "option 'endpoint' is called 'endpoints'"),
    ({"endpoints": "E", "topic": "t", "maxRowsPerBatc": "5"}, "did you mean 'maxRowsPerBatch'"),
    ({"endpoints": "E", "topic": "t", "startingoffset": "earliest"},
     "did you mean 'startingOffsets'"),
    ({"endpoints": "E", "topic": "t", "format": "json"}, "needs a schema"),
    ({"endpoints": "E", "topic": "t", "batchBytes": "63"}, "'batchBytes' must be 0 or"),
    ({"endpoints": "E", "topic": "t", "batchBytes": "lots"}, "'batchBytes' must be 0 or"),
])
def test_bad_options_name_the_option(spark, log_server, options, message):
    options = {k: (log_server.endpoint if v == "E" else v) for k, v in options.items()}
    r = spark.read.format("rsocket")
    for k, v in options.items():
        r = r.option(k, v)
    with pytest.raises(Exception, match=message):
        r.load().collect()


def test_schema_not_producible(spark, log_server):
    with pytest.raises(Exception, match="format 'binary' has columns"):
        reader(spark, log_server.endpoints[:1], topic="plain").schema("x string").load().collect()
    with pytest.raises(Exception, match="'_offset' must be of type bigint"):
        reader(spark, log_server.endpoints[:1], topic="plain", format="json") \
            .schema("a string, _offset int").load().collect()


def test_unknown_topic(spark, log_server):
    with pytest.raises(Exception, match="topic 'nosuchtopic' not found"):
        reader(spark, log_server.endpoints, topic="nosuchtopic").load().collect()
