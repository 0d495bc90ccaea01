"""Sinks of the ``rsocket`` data source: batch (``df.write``) and streaming (``writeStream``).

Every Spark task sends its rows as the records of one request-channel (spec §Request Channel)
to a :mod:`rsocket_tx.apps.streamlog` responder, as fast as the responder's REQUEST_N credit
allows, and waits for the responder's acknowledgements. By default each payload is a record
batch of many rows (at most ``batchBytes`` bytes) on ``log.append.batch``/``log.stage.batch``;
``batchBytes=0`` sends one row per payload on ``log.append``/``log.stage`` (the same semantics):

* ``guarantee=at-least-once`` (default): route ``log.append`` (first payload
  ``{"topic", "shard"}``). The responder appends in transactions and acknowledges each with
  ``{"acked": n}``; the task succeeds only once the final acknowledgement covers every row it
  sent. A failed task is retried by Spark and sends its partition again, so rows appended by
  the failed attempt appear twice: no row is lost, rows may repeat.
* ``guarantee=exactly-once``: route ``log.stage`` (first payload ``{"topic", "shard",
  "query", "batch", "partition"}``); the responder keeps the rows staged per (query, batch,
  partition), a retried task replacing its partition's earlier rows. Each task returns a
  :class:`RSocketCommitMessage` (partition, staged count); the driver's ``commit`` sends
  ``log.commit`` for the batch (idempotent per (query, batch): a batch re-run after a
  restart publishes nothing twice), ``abort`` sends ``log.abort``. For a batch write the
  query id is ``sinkId`` or else a fresh UUID per write (batch id 0); a streaming
  exactly-once query needs ``sinkId`` (stable across restarts) and is keyed by
  ``sinkId/<Spark query id>`` and the micro-batch id.

Rows arrive as Arrow record batches (``DataSourceArrowWriter``/``DataSourceStreamArrowWriter``)
and are encoded per ``format``: ``json`` (default; one JSON object per row, keys = column
names), ``cbor`` (one CBOR map per row) or ``binary`` (the ``data`` column's bytes as they are,
a string column as UTF-8, null as empty; other columns are ignored). JSON values: timestamps
and dates ISO 8601 text, decimals numbers (as float), binary base64 text, maps objects, NaN
and infinities null. CBOR: timestamps tag 0/1, decimals tag 4, binary byte strings, NaN kept.

Options (case-insensitive; checked on the driver, a wrong one raises ValueError naming it):
``endpoint`` (required), ``topic`` (required), ``shard`` (default 0), ``format`` (``json``),
``guarantee`` (``at-least-once``), ``sinkId``, ``timeout`` (milliseconds a task or the driver
waits for connection, credit or acknowledgement; default 300000), ``batchBytes`` (bytes per
record batch, default 262144; 0: one row per payload). ``mode("overwrite")`` is
refused (a log is append-only).

Caveats: exactly-once needs the rows of a re-run batch or retried task to be the same (a
deterministic query over a replayable source); a batch write with a fixed ``sinkId`` publishes
only once, later writes with that ``sinkId`` are duplicate commits that publish nothing. When a
streaming micro-batch fails, ``abort`` drops what the tasks that succeeded staged; rows a failed
task staged stay staged until that batch is run again (the restarted query replaces them) or
the batch commits.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
import math
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import BinaryType, StringType, StructType

from . import _runtime
from ._runtime import send_records

try:  # PySpark >= 4.1
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
except ImportError:  # pragma: no cover - PySpark 4.0: rows instead of Arrow batches
    _StreamWriterBase = DataSourceStreamWriter

__all__ = [
    "ROUTE_ABORT",
    "ROUTE_APPEND",
    "ROUTE_APPEND_BATCH",
    "ROUTE_COMMIT",
    "ROUTE_STAGE",
    "ROUTE_STAGE_BATCH",
    "RSocketCommitMessage",
    "RSocketStreamWriter",
    "RSocketWriter",
    "SinkOptions",
]

#: Routes of the streamlog responder (see :mod:`rsocket_tx.apps.streamlog`).
ROUTE_APPEND = "log.append"
ROUTE_STAGE = "log.stage"
ROUTE_APPEND_BATCH = "log.append.batch"
ROUTE_STAGE_BATCH = "log.stage.batch"
ROUTE_COMMIT = "log.commit"
ROUTE_ABORT = "log.abort"

FORMATS = ("json", "cbor", "binary")
AT_LEAST_ONCE = "at-least-once"
EXACTLY_ONCE = "exactly-once"
GUARANTEES = (AT_LEAST_ONCE, EXACTLY_ONCE)

#: Spark's local property with the micro-batch id in a streaming task (MicroBatchExecution).
BATCH_ID_PROPERTY = "streaming.sql.batchId"
#: Spark's local property with the streaming query's id (stable across checkpoint restarts).
QUERY_ID_PROPERTY = "sql.streaming.queryId"

#: Payloads handed from the task thread to the reactor thread at a time.
CHUNK_ROWS = 2048
#: Default of option ``batchBytes``: most bytes per record batch sent on the batch routes.
DEFAULT_BATCH_BYTES = 256 * 1024
#: Largest ``batchBytes`` (the stream log's ``MAX_BATCH_BYTES``).
MAX_BATCH_BYTES = 8 * 1024 * 1024


# --------------------------------------------------------------------------------------
# options


@dataclass(frozen=True)
class SinkOptions:
    """The sink's options, validated.

    :ivar endpoint: endpoint string or URI of the streamlog responder (``tcp:host=H:port=P``,
        ``tcp://H:P``, ``tls://…``, ``ws://…``; see docs/transports.rst).
    :ivar topic: the log topic written to.
    :ivar shard: the topic's shard (int >= 0) every row goes to.
    :ivar format: ``json``, ``cbor`` or ``binary``.
    :ivar guarantee: ``at-least-once`` or ``exactly-once``.
    :ivar sink_id: the exactly-once query id (``sinkId``), or None.
    :ivar timeout: seconds a task or the driver waits for the responder (connect, credit,
        acknowledgements) before failing; option ``timeout`` is in milliseconds.
    :ivar batch_bytes: most bytes per record batch (many rows per payload, on
        ``log.append.batch``/``log.stage.batch``); 0: one row per payload on
        ``log.append``/``log.stage``.
    """

    endpoint: str
    topic: str
    shard: int = 0
    format: str = "json"
    guarantee: str = AT_LEAST_ONCE
    sink_id: str | None = None
    timeout: float = 300.0
    batch_bytes: int = DEFAULT_BATCH_BYTES

    @classmethod
    def parse(cls, options: Mapping[str, str], schema: StructType) -> SinkOptions:
        """Validate the data source options for a write of ``schema``.

        Option names are case-insensitive: ``endpoint`` (required; ``endpoints`` with a single
        entry is accepted too), ``topic`` (required), ``shard`` (int >= 0, default 0),
        ``format`` (``json`` default, ``cbor``, ``binary``), ``guarantee`` (``at-least-once``
        default, ``exactly-once``), ``sinkId``, ``timeout`` (milliseconds, default 300000),
        ``batchBytes`` (0, or 64 .. 8388608 bytes per record batch; default 262144).

        :raises ValueError: an option is missing or has a wrong value; ``format=binary`` and
            the schema has no ``data`` column of type binary or string.
        """
        opts = {str(k).lower(): v for k, v in dict(options).items()}
        endpoint = (opts.get("endpoint") or "").strip()
        if not endpoint:
            many = [e.strip() for e in (opts.get("endpoints") or "").split(",") if e.strip()]
            if len(many) > 1:
                raise ValueError(
                    "the rsocket sink writes to one endpoint, got endpoints="
                    f"{opts['endpoints']!r}; "
                    "use option 'endpoint'")
            if not many:
                raise ValueError("the rsocket sink needs option 'endpoint' (the streamlog "
                                 "responder, e.g. 'tcp:host=127.0.0.1:port=7878')")
            endpoint = many[0]
        topic = (opts.get("topic") or "").strip()
        if not topic:
            raise ValueError("the rsocket sink needs option 'topic' (the log topic to write to)")
        shard_text = str(opts.get("shard", "0")).strip()
        try:
            shard = int(shard_text)
        except ValueError:
            shard = -1
        if shard < 0:
            raise ValueError(f"option 'shard' must be an integer >= 0, got {shard_text!r}")
        fmt = str(opts.get("format", "json")).strip().lower()
        if fmt not in FORMATS:
            raise ValueError(f"option 'format' must be one of {', '.join(FORMATS)}, got {fmt!r}")
        guarantee = str(opts.get("guarantee", AT_LEAST_ONCE)).strip().lower().replace("_", "-")
        if guarantee not in GUARANTEES:
            raise ValueError(f"option 'guarantee' must be one of {', '.join(GUARANTEES)}, "
                             f"got {opts.get('guarantee')!r}")
        sink_id = opts.get("sinkid")
        sink_id = str(sink_id).strip() if sink_id is not None else None
        if sink_id == "":
            raise ValueError("option 'sinkId' must not be empty")
        timeout_text = str(opts.get("timeout", "300000")).strip()
        try:
            timeout_ms = int(timeout_text)
        except ValueError:
            timeout_ms = 0
        if timeout_ms <= 0:
            raise ValueError(f"option 'timeout' must be a positive integer of milliseconds, "
                             f"got {timeout_text!r}")
        batch_text = str(opts.get("batchbytes", DEFAULT_BATCH_BYTES)).strip()
        try:
            batch_bytes = int(batch_text.replace("_", ""))
        except ValueError:
            batch_bytes = -1
        if batch_bytes != 0 and not 64 <= batch_bytes <= MAX_BATCH_BYTES:
            raise ValueError(f"option 'batchBytes' must be 0 (one row per payload) or an "
                             f"integer in 64..{MAX_BATCH_BYTES}, got {batch_text!r}")
        if fmt == "binary":
            fields = {f.name: f for f in schema.fields}
            data = fields.get("data")
            if data is None or not isinstance(data.dataType, (BinaryType, StringType)):
                raise ValueError(
                    "format 'binary' writes the 'data' column: the DataFrame needs a column "
                    f"'data' of type binary or string, its schema is {schema.simpleString()}")
        return cls(endpoint, topic, shard, fmt, guarantee, sink_id, timeout_ms / 1000.0,
                   batch_bytes)


# --------------------------------------------------------------------------------------
# encoding rows into records


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    raise TypeError(f"cannot encode a {type(value).__name__} as JSON")


def _finite(value):
    """``value`` with NaN and infinite floats (anywhere inside) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _has_map(arrow_type) -> bool:
    import pyarrow as pa

    if pa.types.is_map(arrow_type):
        return True
    if pa.types.is_struct(arrow_type):
        return any(_has_map(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return _has_map(arrow_type.value_type)
    return False


def _maps_to_dicts(value, arrow_type):
    """Arrow gives maps as lists of (key, value) tuples: make them dicts (for JSON/CBOR)."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(arrow_type):
        return {k: _maps_to_dicts(v, arrow_type.item_type) for k, v in value}
    if pa.types.is_struct(arrow_type):
        return {f.name: _maps_to_dicts(value[f.name], f.type) for f in arrow_type}
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return [_maps_to_dicts(v, arrow_type.value_type) for v in value]
    return value


def _columns(batch) -> tuple[list[str], list[list]]:
    names = batch.schema.names
    cols = []
    for i, col in enumerate(batch.columns):
        values = col.to_pylist()
        typ = batch.schema.field(i).type
        if _has_map(typ):
            values = [_maps_to_dicts(v, typ) for v in values]
        cols.append(values)
    return names, cols


def _needs_escape(col) -> bool:
    """Whether a string column may hold a byte JSON escapes (``"``, ``\\``, below 0x20): a
    numpy scan of its whole data buffer (a slice's neighbours count too: conservative)."""
    import numpy as np

    data = col.buffers()[2]
    if data is None or data.size == 0:
        return False
    raw = np.frombuffer(data, dtype=np.uint8)
    return bool(((raw < 0x20) | (raw == 0x22) | (raw == 0x5C)).any())


def _json_texts(col, dumps) -> Any:
    """The JSON text of every value of an Arrow column, as a string array without nulls
    (null -> ``null``). Numbers, booleans and strings are formatted by Arrow compute kernels
    (C, no Python step per value); dates and times are ISO 8601 text; other types go through
    ``dumps`` per value, as the row-by-row encoder did."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        texts = pc.cast(col, pa.string())
    elif pa.types.is_floating(t):
        values = pc.cast(col, pa.float64())  # float32 as its exact double, like to_pylist
        texts = pc.cast(values, pa.string())  # shortest round-trip text
        finite = pc.is_finite(values)
        # Arrow prints 2.0 as "2": write "2.0" as Python's json does
        plain = pc.and_(pc.and_(pc.equal(pc.find_substring(texts, "."), -1),
                                pc.equal(pc.find_substring(texts, "e"), -1)), finite)
        if pc.any(plain).as_py():
            texts = pc.if_else(plain, pc.binary_join_element_wise(texts, ".0", ""), texts)
        texts = pc.if_else(finite, texts, pa.scalar(None, pa.string()))  # NaN, inf: null
    elif (pa.types.is_string(t) or pa.types.is_large_string(t)) and not _needs_escape(col):
        texts = pc.binary_join_element_wise('"', pc.cast(col, pa.string()), '"', "")
    elif pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        texts = pa.array([None if v is None else f'"{v.isoformat()}"' for v in col.to_pylist()],
                         pa.string())
    else:
        values = col.to_pylist()
        if _has_map(t):
            values = [_maps_to_dicts(v, t) for v in values]
        texts = pa.array([None if v is None else dumps(v) for v in values], pa.string())
    return pc.fill_null(texts, "null")


def _json_lines(batch, dumps) -> list[bytes]:
    """One JSON object per row of an Arrow RecordBatch, keys in column order, assembled
    column by column with Arrow compute (``binary_join_element_wise``)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if batch.num_rows == 0:
        return []
    names = batch.schema.names
    if not names:
        return [b"{}"] * batch.num_rows
    parts: list = []
    for i, (name, col) in enumerate(zip(names, batch.columns)):
        parts.append(("{" if i == 0 else ",") + json.dumps(name, ensure_ascii=False) + ":")
        parts.append(_json_texts(col, dumps))
    parts.append("}")
    rows = pc.binary_join_element_wise(*parts, "")
    return rows.cast(pa.binary()).to_pylist()


def _encoder(fmt: str) -> Callable[[Any], list[bytes]]:
    """``encode(batch)``: the records of an Arrow RecordBatch, or of a list of Rows."""
    if fmt == "binary":
        def encode(batch) -> list[bytes]:
            if isinstance(batch, list):
                values = [row["data"] for row in batch]
            else:
                values = batch.column(batch.schema.get_field_index("data")).to_pylist()
            return [b"" if v is None else (v.encode("utf-8") if isinstance(v, str) else bytes(v))
                    for v in values]
        return encode

    if fmt == "json":
        dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False,
                                 default=_json_default).encode

        def encode_one(obj) -> bytes:
            try:
                return dumps(obj).encode("utf-8")
            except ValueError:  # NaN or infinity: not JSON; written as null
                return dumps(_finite(obj)).encode("utf-8")

        def dump_value(value) -> str:
            try:
                return dumps(value)
            except ValueError:
                return dumps(_finite(value))
    else:
        import cbor2

        def encode_one(obj) -> bytes:
            return cbor2.dumps(obj, timezone=datetime.UTC)

    def encode(batch) -> list[bytes]:
        if isinstance(batch, list):
            return [encode_one(row.asDict(recursive=True)) for row in batch]
        if fmt == "json" and len(set(batch.schema.names)) == batch.num_columns:
            return _json_lines(batch, dump_value)
        names, cols = _columns(batch)
        return [encode_one(dict(zip(names, values))) for values in zip(*cols)]
    return encode


def _chunks(items: Iterable, encode) -> Iterator[list[bytes]]:
    """Records in chunks of at most CHUNK_ROWS from an iterator of Arrow batches or Rows."""
    rows: list = []
    for item in items:
        if hasattr(item, "num_rows"):  # an Arrow RecordBatch
            if rows:
                yield encode(rows)
                rows = []
            for start in range(0, item.num_rows, CHUNK_ROWS):
                part = item.slice(start, CHUNK_ROWS)
                if part.num_rows:
                    yield encode(part)
        else:  # a Row (PySpark 4.0 streaming writer)
            rows.append(item)
            if len(rows) >= CHUNK_ROWS:
                yield encode(rows)
                rows = []
    if rows:
        yield encode(rows)


# --------------------------------------------------------------------------------------
# requests from a task thread


def call(endpoint: str, route: str, request: dict, timeout: float) -> dict:
    """Request-response with JSON ``request`` on ``route``, from a non-reactor thread.

    :returns: the decoded JSON response.
    :raises rsocket_tx.RSocketError: the responder answered with an ERROR.
    :raises TimeoutError: no answer within ``timeout`` seconds.
    """
    response = _runtime.request_response(endpoint, request, route=route, timeout=timeout)
    return json.loads(bytes(response.data) or b"null") if response is not None else None


# --------------------------------------------------------------------------------------
# the writers


@dataclass
class RSocketCommitMessage(WriterCommitMessage):
    """What an exactly-once task staged (sent back to the driver's ``commit``).

    :ivar query: the staging query id.
    :ivar batch: the batch id (0 for a batch write, the micro-batch id when streaming).
    :ivar partition: the Spark partition id (the staging key's partition).
    :ivar count: rows sent (staged, or appended for at-least-once).
    :ivar staged: whether rows were staged (empty partitions stage nothing).
    """

    query: str | None
    batch: int
    partition: int
    count: int
    staged: bool


class _SinkBase:
    """What the batch and streaming writers share."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.opts = SinkOptions.parse(options, schema)
        self.schema = schema

    # overridable, for tests that fail a task after some rows were acknowledged
    def _on_ack(self, acked: int) -> None:
        """Called in the reactor thread with each acknowledged record total of a task."""

    def _write(self, iterator, query: str | None, batch: int) -> RSocketCommitMessage:
        from pyspark import TaskContext

        opts = self.opts
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        chunks = _chunks(iterator, _encoder(opts.format))
        if opts.guarantee == AT_LEAST_ONCE:
            header = {"topic": opts.topic, "shard": opts.shard}
            route, ack_key = ROUTE_APPEND_BATCH if opts.batch_bytes else ROUTE_APPEND, "acked"
        else:
            first = next(chunks, None)
            if first is None:  # an empty partition stages nothing
                return RSocketCommitMessage(query, batch, partition, 0, False)
            chunks = _prepend(first, chunks)
            header = {"topic": opts.topic, "shard": opts.shard, "query": query,
                      "batch": batch, "partition": partition}
            route, ack_key = ROUTE_STAGE_BATCH if opts.batch_bytes else ROUTE_STAGE, "staged"
        count = send_records(opts.endpoint, route, header, chunks, ack_key, opts.timeout,
                             self._on_ack, opts.batch_bytes)
        return RSocketCommitMessage(query, batch, partition, count,
                                    opts.guarantee == EXACTLY_ONCE)

    def _commit(self, messages, query: str | None, batch: int) -> None:
        if self.opts.guarantee != EXACTLY_ONCE:
            return
        staged = [m for m in messages if m is not None and m.staged]
        if not staged:
            return
        query = staged[0].query
        partitions = sorted({m.partition for m in staged})
        expected = sum(m.count for m in staged)
        answer = call(self.opts.endpoint, ROUTE_COMMIT,
                      {"query": query, "batch": batch, "partitions": partitions},
                      self.opts.timeout)
        if not answer.get("duplicate") and answer.get("committed") != expected:
            raise RuntimeError(f"log.commit of query {query!r} batch {batch} published "
                               f"{answer.get('committed')} rows, the tasks staged {expected}")

    def _abort(self, messages, query: str | None, batch: int) -> None:
        if self.opts.guarantee != EXACTLY_ONCE:
            return
        queries = {m.query for m in messages if m is not None}
        if query is not None:
            queries.add(query)
        for q in sorted(queries):
            call(self.opts.endpoint, ROUTE_ABORT, {"query": q, "batch": batch},
                 self.opts.timeout)


def _prepend(first, rest):
    yield first
    yield from rest


class RSocketWriter(_SinkBase, DataSourceArrowWriter):
    """Batch sink (``df.write.format("rsocket")``); see the module docstring.

    :param options: the data source options (see :meth:`SinkOptions.parse`).
    :param schema: the DataFrame's schema.
    :param overwrite: True for ``mode("overwrite")``, which an append-only log cannot do.
    :raises ValueError: bad options, or ``overwrite``.
    """

    def __init__(self, options: Mapping[str, str], schema: StructType,
                 overwrite: bool = False) -> None:
        super().__init__(options, schema)
        if overwrite:
            raise ValueError("the rsocket sink appends to a log and cannot overwrite it: "
                             "use mode('append')")
        #: the exactly-once staging query id: sinkId, else fresh per write
        self.query = self.opts.sink_id or str(uuid.uuid4())

    def write(self, iterator) -> RSocketCommitMessage:
        """(task) Send this partition's rows; see the module docstring.

        :returns: the task's :class:`RSocketCommitMessage`.
        :raises Exception: the responder failed or timed out (Spark retries the task).
        """
        return self._write(iterator, self.query, 0)

    def commit(self, messages) -> None:
        """(driver) Exactly-once: ``log.commit`` of the write; nothing at-least-once.

        :raises RuntimeError: the responder published another number of rows than staged.
        """
        self._commit(messages, self.query, 0)

    def abort(self, messages) -> None:
        """(driver) Exactly-once: ``log.abort`` drops what the write's tasks staged."""
        self._abort(messages, self.query, 0)


class RSocketStreamWriter(_SinkBase, _StreamWriterBase):
    """Streaming sink (``df.writeStream.format("rsocket")``); see the module docstring.

    :param options: the data source options (see :meth:`SinkOptions.parse`); exactly-once
        needs ``sinkId``.
    :param schema: the streaming DataFrame's schema.
    :raises ValueError: bad options, or exactly-once without ``sinkId``.
    """

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        super().__init__(options, schema)
        if self.opts.guarantee == EXACTLY_ONCE and self.opts.sink_id is None:
            raise ValueError(
                "guarantee 'exactly-once' on a streaming query needs option 'sinkId': an id "
                "that stays the same when the query restarts from its checkpoint")

    def write(self, iterator) -> RSocketCommitMessage:
        """(task) Send this partition's rows of the current micro-batch.

        :raises RuntimeError: no micro-batch id in the task (not a micro-batch query).
        """
        from pyspark import TaskContext

        ctx = TaskContext.get()
        batch_text = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        if batch_text is None:
            if self.opts.guarantee == EXACTLY_ONCE:
                raise RuntimeError("exactly-once needs a micro-batch id (continuous "
                                   "processing is not supported)")
            batch_text = "-1"
        query = None
        if self.opts.guarantee == EXACTLY_ONCE:
            query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY)
            query = f"{self.opts.sink_id}/{query_id}" if query_id else self.opts.sink_id
        return self._write(iterator, query, int(batch_text))

    def commit(self, messages, batchId: int) -> None:  # noqa: N803 - PySpark's name
        """(driver) Exactly-once: ``log.commit`` of micro-batch ``batchId`` (idempotent)."""
        self._commit(messages, None, batchId)

    def abort(self, messages, batchId: int) -> None:  # noqa: N803 - PySpark's name
        """(driver) Exactly-once: ``log.abort`` of micro-batch ``batchId``."""
        self._abort(messages, None, batchId)
