"""Batch and streaming readers of the ``rsocket`` data source.

Two modes (see :mod:`pyspark_rsocket.options` for every option):

* **log mode** (option ``topic``): the offsets protocol of :mod:`rsocket_tx.apps.streamlog`. The
  driver asks each endpoint for the end offset of every shard (``log.offsets``); each input
  partition reads one range [from, to) of one shard of one endpoint with a ``log.read``
  request-stream. Every payload carries its offset in its metadata; the task checks the offsets
  are exactly from, from+1, ..., to-1 and fails with :class:`OffsetGapError` otherwise, so Spark
  retries the task (and the query fails if every attempt sees the gap).
* **generic mode** (option ``route``): one request-stream per endpoint with the given route and
  data; each input partition is one endpoint. Not replayable, so batch only.

Streaming (log mode): an offset is ``{"<endpoint>": {"<shard>": next_offset, ...}, ...}``;
``latestOffset`` asks ``log.offsets`` and caps each shard's advance at ``maxRowsPerBatch``;
partitions are the per-shard ranges between two offsets. Since the ranges are replayed exactly
from a durable log and Spark checkpoints the offsets before running a batch, a query restarted
from its checkpoint neither loses nor repeats rows (exactly-once with an idempotent or
transactional sink).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from rsocket_tx.apps.streamlog import (
    OFFSET_METADATA_PREFIX,
    ROUTE_OFFSETS,
    ROUTE_READ,
    ROUTE_READ_BATCH,
    RecordBatchError,
    batch_layout,
    decode_batch,
)

from .arrow import ChunkConverter, DecodeError
from .options import ReadOptions

__all__ = [
    "GenericPartition",
    "LogPartition",
    "OffsetGapError",
    "RSocketReader",
    "RSocketStreamReader",
    "log_end_offsets",
    "read_log_range",
]


#: Seconds a task waits for a partly filled chunk to reach ``batchSize`` rows.
LINGER = 0.05
#: ``log.read.batch``: most record batches (payloads) decoded into one Arrow record batch.
BATCHES_PER_CHUNK = 8
#: ``log.read.batch``: rows of ``prefetch`` per requested record batch: the request-n window
#: is ``max(2, prefetch // ROWS_PER_CREDIT)`` record batches.
ROWS_PER_CREDIT = 512
#: Format ``arrow``: rows of ``prefetch`` per requested payload (an Arrow IPC stream of many
#: rows): the request-n window is ``max(2, prefetch // ARROW_ROWS_PER_CREDIT)`` payloads.
ARROW_ROWS_PER_CREDIT = 1024
#: Format ``arrow``: most payloads handed to the task at a time.
ARROW_PAYLOADS_PER_CHUNK = 4


class OffsetGapError(RuntimeError):
    """A ``log.read`` stream did not deliver exactly the offsets asked for (a gap, a repeat,
    a reordering, missing offset metadata, or an early end). Raised inside a task, so Spark
    retries it."""


class LogPartition(InputPartition):
    """Offsets [start, stop) of one shard of a topic at one endpoint.

    :ivar endpoint: the endpoint string. :ivar topic: the topic. :ivar shard: the shard number.
    :ivar start: first offset. :ivar stop: offset after the last.
    """

    def __init__(self, endpoint: str, topic: str, shard: int, start: int, stop: int) -> None:
        super().__init__((endpoint, topic, shard, start, stop))
        self.endpoint, self.topic, self.shard, self.start, self.stop = \
            endpoint, topic, shard, start, stop

    def __repr__(self) -> str:
        return (f"LogPartition({self.endpoint!r}, {self.topic!r}, shard={self.shard}, "
                f"[{self.start}, {self.stop}))")


class GenericPartition(InputPartition):
    """One request-stream (route + data) at one endpoint."""

    def __init__(self, endpoint: str) -> None:
        super().__init__(endpoint)
        self.endpoint = endpoint


# -- the offsets protocol ---------------------------------------------------------------------

def log_end_offsets(endpoint: str, topic: str, timeout: float) -> dict[int, int]:
    """``log.offsets`` at ``endpoint``: ``{shard: end offset}`` (empty for an unknown topic).

    :raises ValueError: the answer is not the protocol's JSON.
    :raises rsocket_tx.RSocketError: the responder's error. Connection errors as
        :func:`pyspark_rsocket._runtime.get_connection`.
    """
    from . import _runtime as rt
    payload = rt.request_response(endpoint, {"topic": topic}, route=ROUTE_OFFSETS,
                                  timeout=timeout)
    try:
        answer = json.loads(payload.data if payload is not None else b"")
        return {int(k): int(v) for k, v in answer["shards"].items()}
    except (AttributeError, ValueError, KeyError, TypeError):
        raise ValueError(f"{endpoint}: {ROUTE_OFFSETS} answered {payload!r}, not "
                         f'{{"topic": ..., "shards": {{"0": end, ...}}}}') from None


def _check_offsets(chunk: list, expected: int, prefix: bytes, where: str):
    """The chunk's offsets as an int64 Arrow array, checked to be expected, expected+1, ...

    :raises OffsetGapError: otherwise (the message names the first wrong payload)."""
    import numpy as np
    import pyarrow as pa
    n = len(chunk)
    plen = len(prefix)
    width = plen + 8
    try:
        md = b"".join([p.metadata for p in chunk])
    except TypeError:
        md = b""
    if len(md) == n * width:
        rows = np.frombuffer(md, dtype=np.uint8).reshape(n, width)
        if (rows[:, :plen] == np.frombuffer(prefix, dtype=np.uint8)).all():
            offsets = rows[:, plen:].copy().view(">u8").reshape(n).astype(np.int64)
            if (offsets == np.arange(expected, expected + n, dtype=np.int64)).all():
                return pa.array(offsets, pa.int64())
    # slow path: find and name the first bad payload
    for i, p in enumerate(chunk):
        md = p.metadata
        if md is None or len(md) != width or md[:plen] != prefix:
            raise OffsetGapError(f"{where}: the payload expected at offset {expected + i} "
                                 f"carries no offset metadata ({md!r:.80})")
        got = int.from_bytes(md[plen:], "big")
        if got != expected + i:
            raise OffsetGapError(f"{where}: offset gap: expected offset {expected + i}, got "
                                 f"{got}; failing the task so that Spark retries it")
    raise AssertionError("unreachable")  # pragma: no cover


def _check_complete(expected: int, part: LogPartition, where: str) -> None:
    """Raise :class:`OffsetGapError` unless a completed read of ``part`` ended at its stop
    offset (``expected``: the offset after the last record received)."""
    if expected != part.stop:
        raise OffsetGapError(f"{where}: the stream completed at offset {expected}, "
                             f"before {part.stop}; failing the task so Spark retries it")


def read_log_range(options: ReadOptions, schema, part: LogPartition) -> Iterator:
    """Record batches of ``part``'s offsets, checked to be contiguous and complete.

    Uses ``log.read.batch`` (many records per payload) unless option ``batchBytes`` is 0;
    then ``log.read``.

    :raises OffsetGapError: a gap, repeat or early end. :raises DecodeError: a bad record.
    """
    if part.stop <= part.start:
        return
    where = f"{part.endpoint} topic {part.topic!r} shard {part.shard}"
    conv = ChunkConverter(schema, options.format, part.endpoint, part.shard)
    arrow = options.format == "arrow"
    if options.batch_bytes and not arrow:
        yield from _read_log_batches(options, conv, part, where)
        return
    from . import _runtime as rt
    prefix = OFFSET_METADATA_PREFIX
    request = {"topic": part.topic, "shard": part.shard, "from": part.start, "to": part.stop}
    if arrow:  # each record is an Arrow IPC stream of many rows: its own payload
        prefetch, chunk_size, linger = (max(2, options.prefetch // ARROW_ROWS_PER_CREDIT),
                                        ARROW_PAYLOADS_PER_CHUNK, 0.0)
    else:
        prefetch, chunk_size, linger = options.prefetch, options.batch_size, LINGER
    stream = rt.request_stream_chunks(
        part.endpoint, request, route=ROUTE_READ, prefetch=prefetch,
        chunk_size=chunk_size, max_chunks=4, timeout=options.timeout, linger=linger)
    expected = part.start
    try:
        for chunk in stream:
            if expected + len(chunk) > part.stop:
                raise OffsetGapError(f"{where}: more records than offsets [{part.start}, "
                                     f"{part.stop}) asked for")
            offsets = _check_offsets(chunk, expected, prefix, where)
            try:
                if arrow:
                    yield from conv.convert_arrow(chunk, offsets)
                else:
                    yield conv.convert(chunk, offsets)
            except DecodeError as exc:
                raise type(exc)(f"{where} offsets [{expected}, {expected + len(chunk)}): "
                                f"{exc}") from None
            expected += len(chunk)
        _check_complete(expected, part, where)
    finally:
        stream.close()


def _read_log_batches(options: ReadOptions, conv: ChunkConverter, part: LogPartition,
                      where: str) -> Iterator:
    """``read_log_range`` over ``log.read.batch``: each chunk of up to
    :data:`BATCHES_PER_CHUNK` record batches becomes one Arrow record batch."""
    import numpy as np
    import pyarrow as pa

    from . import _runtime as rt
    request = {"topic": part.topic, "shard": part.shard, "from": part.start, "to": part.stop,
               "max_bytes": options.batch_bytes}
    stream = rt.request_stream_chunks(
        part.endpoint, request, route=ROUTE_READ_BATCH,
        prefetch=max(2, options.prefetch // ROWS_PER_CREDIT), chunk_size=BATCHES_PER_CHUNK,
        max_chunks=4, timeout=options.timeout)
    expected = part.start
    try:
        for chunk in stream:
            start = expected
            bodies = []
            for payload in chunk:
                data = payload.data
                try:
                    first, lengths, records_at = batch_layout(data)
                except RecordBatchError as exc:
                    raise OffsetGapError(f"{where}: a malformed record batch at offset "
                                         f"{expected}: {exc}") from None
                if first != expected:
                    raise OffsetGapError(f"{where}: offset gap: expected offset {expected}, "
                                         f"got {first} (a record batch's first offset); "
                                         f"failing the task so that Spark retries it")
                expected += len(lengths)
                bodies.append(data[records_at:])
            if expected > part.stop:
                raise OffsetGapError(f"{where}: more records than offsets [{part.start}, "
                                     f"{part.stop}) asked for")
            n = expected - start
            body = bodies[0] if len(bodies) == 1 else b"".join(bodies)

            def records(chunk=chunk):
                try:
                    return [r for p in chunk for r in decode_batch(p.data)[1]]
                except RecordBatchError as exc:
                    raise OffsetGapError(f"{where}: a malformed record batch: {exc}") from None
            try:
                batch = conv.convert_lines(body, n, records,
                                           pa.array(np.arange(start, expected, dtype=np.int64)))
            except DecodeError as exc:
                raise DecodeError(f"{where} offsets [{start}, {expected}): {exc}") from None
            yield batch
        _check_complete(expected, part, where)
    finally:
        stream.close()


def read_generic(options: ReadOptions, schema, part: GenericPartition) -> Iterator:
    """Record batches of one generic request-stream (route + data) at ``part.endpoint``."""
    from rsocket_tx import Payload

    from . import _runtime as rt
    conv = ChunkConverter(schema, options.format, part.endpoint, None)
    arrow = options.format == "arrow"
    stream = rt.request_stream_chunks(
        part.endpoint, Payload(options.data), route=options.route,
        prefetch=max(2, options.prefetch // ARROW_ROWS_PER_CREDIT) if arrow else
        options.prefetch,
        chunk_size=ARROW_PAYLOADS_PER_CHUNK if arrow else options.batch_size, max_chunks=4,
        timeout=options.timeout, linger=0.0 if arrow else LINGER,
        data_mime_type=options.data_mime_type)
    try:
        for chunk in stream:
            try:
                if arrow:
                    yield from conv.convert_arrow(chunk)
                else:
                    yield conv.convert(chunk)
            except DecodeError as exc:
                raise type(exc)(f"{part.endpoint} route {options.route!r}: {exc}") from None
    finally:
        stream.close()


def _shard_ends(options: ReadOptions) -> dict[str, dict[int, int]]:
    """``{endpoint: {shard: end}}`` now, restricted to the ``shards`` option."""
    ends = {}
    for endpoint in options.endpoints:
        shards = log_end_offsets(endpoint, options.log_topic, options.timeout)
        if options.shards is not None:
            shards = {s: e for s, e in shards.items() if s in options.shards}
        ends[endpoint] = shards
    return ends


# -- batch ------------------------------------------------------------------------------------

class RSocketReader(DataSourceReader):
    """Batch reader: partitions planned on the driver, read in the Python workers.

    :param options: checked options. :param schema: the output StructType.
    """

    def __init__(self, options: ReadOptions, schema) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        """Log mode: one partition per endpoint x shard ([0, end) as of now, split by
        ``maxRowsPerPartition``); generic mode: one per endpoint.

        :raises ValueError: the topic exists at no endpoint (or none of the ``shards``)."""
        opts = self.options
        if not opts.log_mode:
            return [GenericPartition(ep) for ep in opts.endpoints]
        ends = _shard_ends(opts)
        if not any(ends.values()):
            which = f" shards {list(opts.shards)}" if opts.shards else ""
            raise ValueError(f"rsocket topic {opts.topic!r}{which} not found at "
                             f"{', '.join(opts.endpoints)}")
        parts: list[InputPartition] = []
        step = opts.max_rows_per_partition
        for endpoint, shards in ends.items():
            for shard, end in sorted(shards.items()):
                if step is None or end <= step:
                    parts.append(LogPartition(endpoint, opts.log_topic, shard, 0, end))
                    continue
                for a in range(0, end, step):
                    parts.append(LogPartition(endpoint, opts.log_topic, shard, a,
                                              min(end, a + step)))
        return parts

    def read(self, partition: InputPartition) -> Iterator:
        """Arrow record batches of one partition (see :func:`read_log_range`)."""
        if isinstance(partition, LogPartition):
            return read_log_range(self.options, self.schema, partition)
        if isinstance(partition, GenericPartition):
            return read_generic(self.options, self.schema, partition)
        return iter(())  # Spark's placeholder partition when there is none


# -- streaming --------------------------------------------------------------------------------

def _fair_caps(available: dict, total: int) -> dict:
    """Split ``total`` rows among keys with ``available`` rows each, as evenly as possible."""
    caps = dict.fromkeys(available, 0)
    left = {k: v for k, v in available.items() if v > 0}
    while total > 0 and left:
        share = max(1, total // len(left))
        for k in sorted(left):
            if total <= 0:
                break
            take = min(share, left[k], total)
            caps[k] += take
            left[k] -= take
            total -= take
        left = {k: v for k, v in left.items() if v > 0}
    return caps


class RSocketStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Streaming reader of a StreamLog topic (log mode only).

    :param options: checked options. :param schema: the output StructType.
    """

    def __init__(self, options: ReadOptions, schema) -> None:
        self.options = options
        self.schema = schema
        self._target: dict | None = None  # Trigger.AvailableNow's end
        self._latest: dict | None = None

    def _now(self) -> dict:
        """The current end offsets as an offset dict."""
        return {ep: {str(s): e for s, e in sorted(shards.items())}
                for ep, shards in _shard_ends(self.options).items()}

    def initialOffset(self) -> dict:
        """``startingOffsets``: earliest (every shard at 0), latest (the ends now), or given."""
        start = self.options.starting_offsets
        if isinstance(start, dict):
            return {ep: dict(start.get(ep, {})) for ep in self.options.endpoints}
        if start == "latest":
            return self._now()
        return {ep: dict.fromkeys(shards, 0) for ep, shards in self._now().items()}

    def getDefaultReadLimit(self):
        """``ReadMaxRows(maxRowsPerBatch x shards)`` when ``maxRowsPerBatch`` is set."""
        per = self.options.max_rows_per_batch
        if per is None:
            return ReadAllAvailable()
        count = sum(len(s) for s in self._now().values())
        return ReadMaxRows(per * max(1, count))

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to the ends as of now, then stop."""
        self._target = self._now()

    def latestOffset(self, start: dict, limit=None) -> dict:
        """The end offset of the next micro-batch: each shard's current end, capped at
        ``start + maxRowsPerBatch`` (unless the engine says read all), at the
        ``ReadMaxRows`` total (split evenly among shards), and at the AvailableNow target.

        :raises RuntimeError: a shard's end went below the start (the log was replaced)."""
        now = self._target if self._target is not None else self._now()
        self._latest = now
        start = start or {}
        per = self.options.max_rows_per_batch
        if isinstance(limit, ReadAllAvailable):
            per = None
        available: dict = {}
        for ep, shards in now.items():
            for shard, end in shards.items():
                s = start.get(ep, {}).get(shard, 0)
                if end < s:
                    raise RuntimeError(f"rsocket topic {self.options.topic!r} at {ep} shard "
                                       f"{shard}: end offset {end} is below the query's offset "
                                       f"{s}; was the log replaced?")
                n = end - s
                if per is not None:
                    n = min(n, per)
                available[(ep, shard)] = n
        if isinstance(limit, ReadMaxRows):
            available = _fair_caps(available, limit.max_rows)
        elif isinstance(limit, ReadMinRows) and sum(available.values()) < limit.min_rows:
            available = dict.fromkeys(available, 0)
        result: dict = {ep: dict(shards) for ep, shards in start.items()}
        for (ep, shard), n in available.items():
            result.setdefault(ep, {})[shard] = start.get(ep, {}).get(shard, 0) + n
        return result

    def reportLatestOffset(self) -> dict | None:
        """The end offsets seen by the last :meth:`latestOffset`."""
        return self._latest

    def partitions(self, start: dict, end: dict) -> list[InputPartition]:
        """One :class:`LogPartition` per shard that advanced between ``start`` and ``end``."""
        parts: list[InputPartition] = []
        for ep in sorted(end):
            for shard, stop in sorted(end[ep].items(), key=lambda kv: int(kv[0])):
                s = (start or {}).get(ep, {}).get(shard, 0)
                if stop > s:
                    parts.append(LogPartition(ep, self.options.log_topic, int(shard), s, stop))
        return parts

    def read(self, partition: InputPartition) -> Iterator:
        """Arrow record batches of one range (see :func:`read_log_range`)."""
        if not isinstance(partition, LogPartition):
            return iter(())  # (the planner makes only LogPartitions)
        return read_log_range(self.options, self.schema, partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: the log keeps every record (the query's checkpoint holds the offsets)."""
