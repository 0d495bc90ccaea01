"""The ``rsocket`` sink (pyspark_rsocket.writer): batch and streaming writes into a streamlog
responder, at-least-once and exactly-once, and the guarantees when a task fails mid-batch
(Spark retries it: local[2,4]) or the driver crashes between the log's commit and Spark's.

Fixtures (tests/spark/conftest.py): ``spark`` (session-wide local SparkSession) and
``log_server`` (a StreamLogResponder in a subprocess: ``.endpoint``, ``.dbs[0]``). What the sink
wrote is read back from the log's SQLite file with :class:`rsocket_tx.apps.streamlog.StreamLog`.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import sys
import threading
import time
import uuid
from collections import Counter

import cbor2
import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark import TaskContext  # noqa: E402
from pyspark.errors import StreamingQueryException  # noqa: E402
from pyspark.sql.datasource import DataSource  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from pyspark_rsocket.writer import (  # noqa: E402
    RSocketStreamWriter,
    RSocketWriter,
    SinkOptions,
)
from rsocket_tx.apps.streamlog import StreamLog  # noqa: E402

MODES = ("at-least-once", "exactly-once")
#: Upper bound of one wait inside a task for an acknowledgement (a bug fails, never hangs).
ACK_WAIT = 60


# -- a sink that fails on purpose (the real writers, with a failure injected) -------------------


class _Faults:
    """Mixin: on task attempts < ``failAttempts`` of partitions ``failPartitions``, send
    ``failAfterRows`` rows, wait until the responder acknowledged at least ``failAfterAcked``
    of them (so they are in the log, or staged), then raise: a task failing mid-batch."""

    def _fault_options(self, options):
        opts = {k.lower(): v for k, v in dict(options).items()}
        self.fail_partitions = {int(p) for p in opts.get("failpartitions", "").split(",") if p}
        self.fail_attempts = int(opts.get("failattempts", "1"))
        self.fail_after_rows = int(opts.get("failafterrows", "0"))
        self.fail_after_acked = int(opts.get("failafteracked", "0"))
        self.crash_marker = opts.get("crashmarker")
        self.crash_batch = int(opts.get("crashbatch", "-1"))

    def _on_ack(self, acked: int) -> None:
        self._acked = acked
        if acked >= self.fail_after_acked:
            self._acked_enough.set()

    def _faulty(self, iterator):
        self._acked = 0
        self._acked_enough = threading.Event()  # (the writer is pickled: no Event before)
        return self._fail_mid_batch(iterator)

    def _fail_mid_batch(self, iterator):
        ctx = TaskContext.get()
        if ctx.partitionId() not in self.fail_partitions or \
                ctx.attemptNumber() >= self.fail_attempts:
            yield from iterator
            return
        sent = 0
        for batch in iterator:
            take = min(batch.num_rows, self.fail_after_rows - sent)
            yield batch.slice(0, take)
            sent += take
            if sent >= self.fail_after_rows:
                break
        if not self._acked_enough.wait(ACK_WAIT):
            raise AssertionError(f"the responder acknowledged only {self._acked} rows")
        raise RuntimeError(f"injected failure after {sent} rows (partition "
                           f"{ctx.partitionId()}, attempt {ctx.attemptNumber()})")


#: the fault options (not the sink's: it refuses unknown options)
FAULT_OPTIONS = {"failpartitions", "failattempts", "failafterrows", "failafteracked",
                 "crashmarker", "crashbatch"}


def sink_only(options) -> dict:
    return {k: v for k, v in dict(options).items() if k.lower() not in FAULT_OPTIONS}


class FaultyWriter(_Faults, RSocketWriter):
    def __init__(self, options, schema, overwrite):
        super().__init__(sink_only(options), schema, overwrite)
        self._fault_options(options)

    def write(self, iterator):
        return super().write(self._faulty(iterator))


class FaultyStreamWriter(_Faults, RSocketStreamWriter):
    def __init__(self, options, schema):
        super().__init__(sink_only(options), schema)
        self._fault_options(options)

    def write(self, iterator):
        return super().write(self._faulty(iterator))

    def commit(self, messages, batchId):  # noqa: N803
        super().commit(messages, batchId)  # log.commit done: the batch is published
        if batchId == self.crash_batch and not os.path.exists(self.crash_marker):
            open(self.crash_marker, "w").close()
            # Spark never records the batch as committed: a restart runs it again
            raise RuntimeError(f"injected driver crash after log.commit of batch {batchId}")


class FaultySink(DataSource):
    @classmethod
    def name(cls):
        return "rsocket_faulty_sink"

    def writer(self, schema, overwrite):
        return FaultyWriter(self.options, schema, overwrite)

    def streamWriter(self, schema, overwrite):  # noqa: N802
        return FaultyStreamWriter(self.options, schema)


@pytest.fixture(scope="module")
def faulty(spark):
    """Registers FaultySink (pickled by value: Spark's workers cannot import test modules)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    spark.dataSource.register(FaultySink)
    yield FaultySink.name()
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


# -- helpers ------------------------------------------------------------------------------------


def records(log_server, topic: str, shard: int = 0) -> list[bytes]:
    """Every record of ``topic``/``shard`` in the log, in offset order."""
    log = StreamLog(log_server.dbs[0])
    try:
        if shard not in log.end_offsets(topic):
            return []
        return [data for _, data in log.read(topic, shard)]
    finally:
        log.close()


def ids(log_server, topic: str) -> Counter:
    return Counter(json.loads(r)["id"] for r in records(log_server, topic))


def topic_name() -> str:
    return "sink-" + uuid.uuid4().hex[:12]


def sink_options(log_server, topic, mode, **more) -> dict:
    return {"endpoints": log_server.endpoint, "topic": topic, "guarantee": mode, **more}


def numbers(spark, n: int, partitions: int):
    return spark.range(0, n, 1, partitions).selectExpr("id", "concat('row-', id) AS name")


# -- options ------------------------------------------------------------------------------------

SCHEMA = StructType([StructField("id", LongType()), StructField("name", StringType())])


@pytest.mark.parametrize("options, message", [
    ({"topic": "t"}, "needs option 'endpoints'"),
    ({"endpoints": "tcp:host=a:port=1,tcp:host=b:port=2", "topic": "t"}, "one endpoint"),
    ({"endpoints": "tcp:host=a:port=1"}, "needs option 'topic'"),
    ({"endpoints": "e", "topic": "t", "shard": "-1"}, "'shard' must be an integer >= 0"),
    ({"endpoints": "e", "topic": "t", "shard": "x"}, "'shard' must be an integer >= 0"),
    ({"endpoints": "e", "topic": "t", "format": "xml"}, "'format' must be one of json, cbor"),
    ({"endpoints": "e", "topic": "t", "guarantee": "at-most-once"}, "'guarantee' must be"),
    ({"endpoints": "e", "topic": "t", "sinkId": ""}, "'sinkId' must not be empty"),
    ({"endpoints": "e", "topic": "t", "timeout": "0"}, "'timeout' must be a positive"),
    ({"endpoints": "e", "topic": "t", "format": "binary"}, "needs a column 'data'"),
    ({"endpoints": "e", "topic": "t", "batchBytes": "63"}, "'batchBytes' must be 0"),
    ({"endpoints": "e", "topic": "t", "batchBytes": "many"}, "'batchBytes' must be 0"),
    ({"endpoints": "e", "topic": "t", "batchBytes": str(2**23 + 1)}, "'batchBytes' must be 0"),
])
def test_bad_options(options, message):
    with pytest.raises(ValueError, match=message):
        SinkOptions.parse(options, SCHEMA)


def test_options_defaults_and_case():
    opts = SinkOptions.parse({"ENDPOINTS": "tcp:host=h:port=1", "Topic": "t",
                              "GUARANTEE": "Exactly_Once", "SINKID": "s", "Timeout": "1500"},
                             SCHEMA)
    assert opts == SinkOptions("tcp:host=h:port=1", "t", 0, "json", "exactly-once", "s", 1.5)


def test_the_singular_endpoint_is_refused_naming_endpoints():
    """The reader and the writer name the responder with one option, ``endpoints``."""
    with pytest.raises(ValueError, match="option 'endpoint' is called 'endpoints'"):
        SinkOptions.parse({"endpoint": "tcp:host=h:port=1", "topic": "t"}, SCHEMA)


def test_a_misspelt_option_names_the_closest_known_one():
    with pytest.raises(ValueError, match="unknown rsocket write option 'gaurantee': did you "
                                         "mean 'guarantee'"):
        SinkOptions.parse({"endpoints": "tcp:host=h:port=1", "topic": "t",
                           "gaurantee": "exactly-once"}, SCHEMA)
    with pytest.raises(ValueError, match="did you mean 'sinkId'"):
        SinkOptions.parse({"endpoints": "tcp:host=h:port=1", "topic": "t", "sinkid_": "s"},
                          SCHEMA)


def test_the_options_spark_sets_are_accepted():
    """writeStream passes checkpointLocation and queryName, save(path) passes path (the
    endpoint)."""
    opts = SinkOptions.parse({"path": "tcp:host=h:port=1", "topic": "t",
                              "checkpointLocation": "/tmp/ck", "queryName": "q",
                              "__partition_columns": "[]"}, SCHEMA)
    assert opts.endpoint == "tcp:host=h:port=1"


def test_streaming_exactly_once_needs_sink_id():
    with pytest.raises(ValueError, match="needs option 'sinkId'"):
        RSocketStreamWriter({"endpoints": "e", "topic": "t", "guarantee": "exactly-once"}, SCHEMA)


def test_overwrite_is_refused(spark, log_server):
    with pytest.raises(Exception, match="cannot overwrite"):
        numbers(spark, 10, 1).write.format("rsocket").mode("overwrite") \
            .options(**sink_options(log_server, topic_name(), "at-least-once")).save()


def test_bad_option_fails_on_the_driver(spark, log_server):
    with pytest.raises(Exception, match="'guarantee' must be one of"):
        numbers(spark, 10, 1).write.format("rsocket").mode("append") \
            .options(**sink_options(log_server, topic_name(), "maybe")).save()


# -- batch writes -------------------------------------------------------------------------------


@pytest.mark.parametrize("mode, batch_bytes", [(m, "262144") for m in MODES]
                         + [(m, "0") for m in MODES] + [("exactly-once", "100")])
def test_batch_write(spark, log_server, mode, batch_bytes):
    """Record batches (the default), one row per payload (batchBytes=0: log.append/log.stage),
    and batches of 2 or 3 rows (100 bytes): the same rows arrive, once each."""
    topic = topic_name()
    numbers(spark, 30_000, 4).write.format("rsocket").mode("append") \
        .options(**sink_options(log_server, topic, mode, shard="1",
                                batchBytes=batch_bytes)).save()
    assert records(log_server, topic, 0) == []
    got = [json.loads(r) for r in records(log_server, topic, 1)]
    assert len(got) == 30_000
    assert sorted(got, key=lambda r: r["id"]) == [{"id": i, "name": f"row-{i}"}
                                                 for i in range(30_000)]
    if mode == "exactly-once":  # published partition by partition, in order
        assert [r["id"] for r in got] == list(range(30_000))


def test_batch_write_exactly_once_sink_id_commits_once(spark, log_server):
    """The same sinkId written twice: the second write is a duplicate commit of batch 0."""
    topic, sink_id = topic_name(), uuid.uuid4().hex
    for _ in range(2):
        numbers(spark, 1000, 2).write.format("rsocket").mode("append") \
            .options(**sink_options(log_server, topic, "exactly-once", sinkId=sink_id)).save()
    assert ids(log_server, topic) == Counter(range(1000))


ROW_TYPES_SQL = """
SELECT id, CAST(id * 1.5 AS DOUBLE) AS score, id % 2 = 0 AS even,
       IF(id = 1, NULL, concat('n', id)) AS name,
       TIMESTAMP'2013-01-01 05:15:00 UTC' + make_interval(0, 0, 0, 0, 0, 0, id) AS ts,
       DATE'2013-01-01' + CAST(id AS INT) AS day,
       array(id, id + 1) AS pair, map('k', id) AS attrs,
       named_struct('a', id, 'b', concat('b', id)) AS inner,
       CAST(id AS DECIMAL(10, 2)) AS price, IF(id = 1, CAST('NaN' AS DOUBLE), 0.25) AS odd
FROM range(3)
"""


@pytest.mark.parametrize("fmt", ["json", "cbor"])
def test_encodings(spark, log_server, fmt):
    topic = topic_name()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    spark.sql(ROW_TYPES_SQL).coalesce(1).write.format("rsocket").mode("append") \
        .options(**sink_options(log_server, topic, "at-least-once", format=fmt)).save()
    raw = records(log_server, topic)
    got = [json.loads(r) if fmt == "json" else cbor2.loads(r) for r in raw]
    assert [r["id"] for r in got] == [0, 1, 2]
    row = got[1]
    assert row["score"] == 1.5 and row["even"] is False and row["name"] is None
    assert row["pair"] == [1, 2] and row["attrs"] == {"k": 1}
    assert row["inner"] == {"a": 1, "b": "b1"}
    ts = datetime.datetime(2013, 1, 1, 5, 15, 1, tzinfo=datetime.UTC)
    assert got[0]["odd"] == 0.25
    if fmt == "json":  # JSON has no NaN: null
        assert datetime.datetime.fromisoformat(row["ts"]) == ts
        assert row["day"] == "2013-01-02" and row["price"] == 1.0 and row["odd"] is None
    else:
        assert row["ts"] == ts
        assert row["day"] in (datetime.date(2013, 1, 2), "2013-01-02")
        assert float(row["price"]) == 1.0 and math.isnan(row["odd"])


def test_binary_format(spark, log_server):
    topic = topic_name()
    schema = StructType([StructField("data", BinaryType()), StructField("key", StringType())])
    rows = [(bytes([i, 0, 255 - i]) * (i + 1), f"k{i}") for i in range(200)]
    spark.createDataFrame(rows, schema).coalesce(1).write.format("rsocket").mode("append") \
        .options(**sink_options(log_server, topic, "exactly-once", format="binary")).save()
    assert records(log_server, topic) == [data for data, _ in rows]


# -- guarantees when a task fails mid-batch ----------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_task_fails_mid_batch(spark, log_server, faulty, mode):
    """Partitions 0 and 2 fail on their first attempt after 3000 of their 5000 rows were sent
    and at least 2048 acknowledged; Spark retries them. At-least-once: no row lost, the
    acknowledged rows of the failed attempts twice; exactly-once: every row once."""
    topic = topic_name()
    numbers(spark, 20_000, 4).write.format(faulty).mode("append").options(
        **sink_options(log_server, topic, mode), failPartitions="0,2", failAfterRows="3000",
        failAfterAcked="2048").save()
    counts = ids(log_server, topic)
    assert set(counts) == set(range(20_000))  # nothing lost
    repeated = {i for i, c in counts.items() if c > 1}
    if mode == "exactly-once":
        assert not repeated
        assert sum(counts.values()) == 20_000
    else:
        assert max(counts.values()) == 2
        # the failed attempts' acknowledged rows (>= 2048 of the first 3000 of partitions 0
        # and 2) came again with the retry; nothing else repeats
        for start in (0, 10_000):
            dup = {i for i in repeated if start <= i < start + 5000}
            assert len(dup) >= 2048 and dup <= set(range(start, start + 3000))
        assert repeated <= set(range(0, 3000)) | set(range(10_000, 13_000))


def test_exactly_once_failed_job_publishes_nothing(spark, log_server, faulty):
    """Partition 1 fails on every attempt: the job fails, the driver's abort drops what the
    other tasks staged, and not a row is published (at-least-once would have kept them)."""
    topic, sink_id = topic_name(), uuid.uuid4().hex
    with pytest.raises(Exception, match="injected failure"):
        numbers(spark, 8000, 4).write.format(faulty).mode("append").options(
            **sink_options(log_server, topic, "exactly-once", sinkId=sink_id),
            failPartitions="1", failAttempts="99", failAfterRows="1500",
            failAfterAcked="1024").save()
    assert records(log_server, topic) == []
    log = StreamLog(log_server.dbs[0])
    try:
        assert log.staged(sink_id, 0) == {}
        assert log.committed(sink_id, 0) is None
    finally:
        log.close()


# -- streaming ----------------------------------------------------------------------------------


def write_json_files(directory, files: int, per_file: int) -> None:
    """``files`` JSON-lines files ``part-000.json``...: file ``f`` holds the rows of ids
    ``f * per_file`` to ``(f + 1) * per_file - 1``.

    Spark's file stream source takes its input files in modification-time order (with
    ``maxFilesPerTrigger`` 1, one file per micro-batch); files written within the same
    millisecond tie and come in any order.  So file ``f`` gets the modification time
    ``base + f`` seconds (``base`` a minute ago): batch ``f`` reads file ``f``, always.
    """
    directory.mkdir(parents=True, exist_ok=True)
    base = int(time.time()) - 60
    for f in range(files):
        path = directory / f"part-{f:03d}.json"
        with open(path, "w") as out:
            for i in range(f * per_file, (f + 1) * per_file):
                out.write(json.dumps({"id": i, "name": f"row-{i}"}) + "\n")
        os.utime(path, (base + f, base + f))


def stream_of_files(spark, directory):
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(directory))


def run_available_now(df, fmt, options, checkpoint):
    query = df.writeStream.format(fmt).options(**options) \
        .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    try:
        query.awaitTermination(120)
    except StreamingQueryException:
        pass  # the test looks at query.exception()
    finally:
        query.stop()
    return query


@pytest.mark.parametrize("mode", MODES)
def test_streaming_write(spark, log_server, tmp_path, mode):
    topic = topic_name()
    write_json_files(tmp_path / "in", files=3, per_file=1000)
    query = run_available_now(
        stream_of_files(spark, tmp_path / "in"), "rsocket",
        sink_options(log_server, topic, mode, sinkId="stream-" + topic), tmp_path / "ck")
    assert query.exception() is None
    assert query.lastProgress["batchId"] == 2  # three micro-batches
    assert ids(log_server, topic) == Counter(range(3000))


def test_streaming_task_fails_mid_batch_exactly_once(spark, log_server, faulty, tmp_path):
    topic = topic_name()
    write_json_files(tmp_path / "in", files=2, per_file=4000)
    df = stream_of_files(spark, tmp_path / "in").repartition(2)
    query = run_available_now(df, faulty, sink_options(
        log_server, topic, "exactly-once", sinkId="s-" + topic, failPartitions="0",
        failAfterRows="1500", failAfterAcked="1024"), tmp_path / "ck")
    assert query.exception() is None
    assert ids(log_server, topic) == Counter(range(8000))


@pytest.mark.parametrize("mode", MODES)
def test_streaming_restart_after_crash_before_spark_commit(spark, log_server, faulty,
                                                         tmp_path, mode):
    """Batch 1 is published (log.commit) and the driver crashes before Spark records it; the
    query restarted from its checkpoint runs batch 1 again. Exactly-once: the re-run's
    commit is a duplicate and nothing repeats; at-least-once: batch 1 arrives twice."""
    topic = topic_name()
    write_json_files(tmp_path / "in", files=3, per_file=500)
    options = sink_options(log_server, topic, mode, sinkId="restart-" + topic,
                           crashMarker=str(tmp_path / "crashed"), crashBatch="1")
    first = run_available_now(stream_of_files(spark, tmp_path / "in"), faulty, options,
                              tmp_path / "ck")
    assert "injected driver crash" in str(first.exception())
    assert ids(log_server, topic) == Counter(range(1000))  # batches 0 and 1 published
    second = run_available_now(stream_of_files(spark, tmp_path / "in"), faulty, options,
                               tmp_path / "ck")
    assert second.exception() is None
    counts = ids(log_server, topic)
    assert set(counts) == set(range(1500))
    if mode == "exactly-once":
        assert counts == Counter(range(1500))
    else:
        assert counts == Counter(range(1500)) + Counter(range(500, 1000))


# -- the task-thread -> reactor bridge (no Spark) -----------------------------------------------


class _Inline:
    """A stand-in reactor whose callFromThread runs at once (single-threaded tests)."""

    def callFromThread(self, fn, *args):  # noqa: N802 - Twisted's name
        fn(*args)


def _result(d):
    """What an already fired Deferred holds (a Failure for an error)."""
    box = []
    d.addBoth(box.append)
    return box[0]


def test_channel_feed_hands_over_chunks_and_bounds_them():
    from pyspark_rsocket._runtime import ChannelFeed

    feed = ChannelFeed(_Inline(), max_chunks=2)
    feed.put([1, 2, 3], timeout=1)
    feed.put([4], timeout=1)
    with pytest.raises(TimeoutError, match="no credit"):
        feed.put([5], timeout=0.01)  # two chunks not taken yet: the task thread waits
    assert feed.ready(2) == [1, 2]
    assert _result(feed.__anext__()) == 3  # the first chunk is taken: room for one more
    feed.put([5, 6], timeout=1)
    assert feed.ready(10) == [4, 5, 6]
    got = []
    feed.__anext__().addBoth(got.append)
    assert got == []  # nothing buffered: the pump waits
    feed.put([7], timeout=1)
    assert got == [7]
    feed.finish()
    assert _result(feed.__anext__()).check(StopAsyncIteration)


def test_channel_feed_failure_both_ways():
    from pyspark_rsocket._runtime import ChannelFeed

    feed = ChannelFeed(_Inline())
    got = []
    feed.__anext__().addBoth(got.append)
    feed.fail(ValueError("upstream failed"))  # the task's input raised: ERROR on the channel
    assert got[0].check(ValueError)
    feed = ChannelFeed(_Inline())
    feed.close(ConnectionError("responder gone"))  # the channel ended: the task stops
    with pytest.raises(ConnectionError, match="responder gone"):
        feed.put([1], timeout=1)


def test_rows_are_packed_into_bounded_record_batches():
    from pyspark_rsocket._runtime import _batch_payloads
    from rsocket_tx.apps.streamlog import decode_batch

    rows = [b"r%03d" % i for i in range(100)] + [b"x" * 500] + [b"", b"a\nb"]
    payloads = _batch_payloads(rows, 100)
    # 100 bytes hold 12 + 9 x (4 + 5) = 93: 9 rows of 4 bytes per batch; 500 bytes alone
    assert [len(decode_batch(p.data)[1]) for p in payloads[:11]] == [9] * 11
    assert all(len(p.data) <= 100 for p in payloads if b"x" * 500 not in p.data)
    assert sum(b"x" * 500 in p.data for p in payloads) == 1
    assert all(decode_batch(p.data)[0] == 0 for p in payloads)  # a sink batch's first offset
    assert [r for p in payloads for r in decode_batch(p.data)[1]] == rows
    assert _batch_payloads([], 100) == []


def test_json_rows_are_encoded_column_by_column_as_before():
    """The Arrow-compute JSON encoder gives the row-by-row encoder's bytes (golden rows written
    by hand): escaping, NaN/inf as null, float32 as its double, floats with exponents, ISO 8601
    times, nested values and maps."""
    import pyarrow as pa

    from pyspark_rsocket.writer import _encoder

    batch = pa.RecordBatch.from_pydict({
        "i": pa.array([1, None, -7], pa.int64()),
        "d": pa.array([2.0, float("nan"), 0.1], pa.float64()),
        "f": pa.array([0.5, float("inf"), None], pa.float32()),
        "b": pa.array([True, False, None]),
        "s": pa.array(['plain', None, 'é "q"\n\\']),
        "ts": pa.array([datetime.datetime(2013, 1, 1, 5, 15, 1), None,
                        datetime.datetime(1999, 12, 31, 23, 59, 59, 250_000)],
                       pa.timestamp("us", tz="UTC")),
        "day": pa.array([datetime.date(2013, 1, 2), None, datetime.date(2000, 2, 29)]),
        "m": pa.array([[("k", 1)], None, []], pa.map_(pa.string(), pa.int64())),
        "l": pa.array([[1.5, None], [], None], pa.list_(pa.float64())),
    })
    got = _encoder("json")(batch)
    assert got == [
        b'{"i":1,"d":2.0,"f":0.5,"b":true,"s":"plain","ts":"2013-01-01T05:15:01+00:00",'
        b'"day":"2013-01-02","m":{"k":1},"l":[1.5,null]}',
        b'{"i":null,"d":null,"f":null,"b":false,"s":null,"ts":null,"day":null,"m":null,'
        b'"l":[]}',
        '{"i":-7,"d":0.1,"f":null,"b":null,"s":"é \\"q\\"\\n\\\\","ts":'
        '"1999-12-31T23:59:59.250000+00:00","day":"2000-02-29","m":{},"l":null}'.encode(),
    ]
    assert _encoder("json", by_column=False)(batch) == got
    # numbers Arrow prints in another layout: Python's repr, as the row-by-row encoder
    wide = pa.RecordBatch.from_pydict({"x": pa.array([1e300, 1.5e-7, -0.0, 1e16, 123456.0,
                                                      1e15, 1e-5])})
    want = [b'{"x":1e+300}', b'{"x":1.5e-07}', b'{"x":-0.0}', b'{"x":1e+16}',
            b'{"x":123456.0}', b'{"x":1000000000000000.0}', b'{"x":1e-05}']
    assert _encoder("json")(wide) == _encoder("json", by_column=False)(wide) == want


def test_cbor_map_keys_keep_their_type():
    """CBOR map keys may be of any type: dates, binary and floats as they are, struct keys as
    CBOR maps and array keys as CBOR arrays (a dict or list key failed the task before)."""
    import pyarrow as pa

    from pyspark_rsocket.writer import _encoder

    batch = pa.RecordBatch.from_pydict({
        "day": pa.array([[(datetime.date(2013, 1, 2), 1)]], pa.map_(pa.date32(), pa.int32())),
        "bin": pa.array([[(b"\x00\xff", 1)]], pa.map_(pa.binary(), pa.int32())),
        "nan": pa.array([[(float("inf"), 1)]], pa.map_(pa.float64(), pa.int32())),
        "pair": pa.array([[({"a": 1, "b": "x"}, 1)]],
                         pa.map_(pa.struct([("a", pa.int32()), ("b", pa.string())]),
                                 pa.int32())),
        "arr": pa.array([[([1, 2], 1)]], pa.map_(pa.list_(pa.int32()), pa.int32())),
    })
    for by_column in (True, False):
        [record] = _encoder("cbor", by_column=by_column)(batch)
        assert cbor2.loads(record) == {
            "day": {datetime.date(2013, 1, 2): 1}, "bin": {b"\x00\xff": 1},
            "nan": {float("inf"): 1}, "pair": {cbor2.frozendict({"a": 1, "b": "x"}): 1},
            "arr": {(1, 2): 1}}
