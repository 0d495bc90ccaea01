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
names), ``cbor`` (one CBOR map per row), ``binary`` (the ``data`` column's bytes as they are,
a string column as UTF-8, null as empty; other columns are ignored) or ``arrow`` (each Arrow
record batch Spark hands the task is one record: an Arrow IPC stream,
``application/vnd.apache.arrow.stream``, sent as it is on ``log.append``/``log.stage``; no
per-row step; ``batchBytes`` does not apply). JSON values: timestamps
and dates ISO 8601 text, floats as Python's ``repr`` (``1e+16``, ``1.5e-07``; Spark writes
Java's ``1.0E16``: the same doubles), decimals numbers (as float), binary base64 text, maps
objects, NaN and infinities null; map keys as Spark's JSON writer writes them (dates as days
and timestamps as microseconds since the epoch, floats as Java does, ``NaN``), binary keys
base64, struct and array keys their JSON (docs/spark.rst, "Records the sink writes"). CBOR:
timestamps tag 0/1, decimals tag 4, binary byte strings, NaN kept, map keys of their own type
(struct keys CBOR maps, array keys CBOR arrays).

Options (case-insensitive; checked on the driver, a wrong one raises ValueError naming it):
``endpoints`` (required; one endpoint: the reader's option name), ``topic`` (required),
``shard`` (default 0), ``format`` (``json``),
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
    _StreamWriterBase = DataSourceStreamWriter  # type: ignore[misc, assignment]

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

FORMATS = ("json", "cbor", "binary", "arrow")
#: Every writer option, as documented (Spark's option names are case-insensitive; ``path``,
#: what ``save(path)`` sets, is taken as the endpoint).
WRITE_OPTIONS = ("endpoints", "topic", "shard", "format", "guarantee", "sinkId", "timeout",
                 "batchBytes")
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

        Option names are case-insensitive (:data:`WRITE_OPTIONS`): ``endpoints`` (required:
        one endpoint, the same option name as the reader's), ``topic`` (required), ``shard``
        (int >= 0, default 0), ``format`` (``json`` default, ``cbor``, ``binary``, ``arrow``),
        ``guarantee`` (``at-least-once``
        default, ``exactly-once``), ``sinkId``, ``timeout`` (milliseconds, default 300000),
        ``batchBytes`` (0, or 64 .. 8388608 bytes per record batch; default 262144).

        :raises ValueError: an option is missing, unknown (the message names the closest known
            one; ``endpoint`` is refused naming ``endpoints``) or has a wrong value;
            ``format=binary`` and
            the schema has no ``data`` column of type binary or string.
        """
        from .options import check_option_names
        check_option_names(options, WRITE_OPTIONS, "write")
        opts = {str(k).lower(): v for k, v in dict(options).items()}
        raw = opts.get("endpoints") or opts.get("path") or ""
        many = [e.strip() for e in str(raw).split(",") if e.strip()]
        if len(many) > 1:
            raise ValueError(f"the rsocket sink writes to one endpoint, got endpoints={raw!r}: "
                             "give one (one write per responder)")
        if not many:
            raise ValueError("the rsocket sink needs option 'endpoints' (the streamlog "
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


#: UTC (``datetime.UTC`` is Python 3.11+; this package supports 3.10)
_UTC = datetime.timezone.utc  # noqa: UP017
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=_UTC)
_EPOCH_ORDINAL = datetime.date(1970, 1, 1).toordinal()
_MICROSECOND = datetime.timedelta(microseconds=1)


def _java_float_text(value: float, single: bool = False) -> str:
    """``value`` as Java's ``Double.toString`` (``Float.toString`` if ``single``) writes it,
    which is how Spark's JSON writer writes a float map key: ``1.0``, ``1.0E15``, ``1.5E-7``,
    ``0.001``, ``9.9E-4``, ``-0.0``, ``NaN``, ``Infinity``, ``-Infinity``.

    Plain notation for magnitudes in [10^-3, 10^7), else ``d.dddE<n>``; the digits are the
    shortest that read back as the same double (float32 if ``single``), at least two
    (JDK 19+ ``Double.toString``; Java 17 prints a few values with more digits, e.g.
    ``8.409999999999999E21`` for ``8.41E21``: the same double).

    :param value: a float (a float32 value given as its exact double if ``single``).
    :returns: the text, ASCII.
    """
    import numpy as np

    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0.0"
    number = np.float32(value) if single else np.float64(value)
    text = np.format_float_scientific(number, unique=True)  # shortest digits: d.ddde[+-]nn
    if len(text.split("e")[0].strip("-.")) == 1:
        # one digit: Java takes the closest two-digit decimal (5e-324 -> 4.9E-324)
        text = f"{float(number):.1e}"
    mantissa, exp_text = text.lstrip("-").split("e")
    digits = mantissa.replace(".", "").rstrip("0") or "0"
    exp = int(exp_text)
    if 1e-3 <= abs(value) < 1e7:
        if exp >= 0:
            digits = digits.ljust(exp + 1, "0")
            return f"{sign}{digits[:exp + 1]}.{digits[exp + 1:] or '0'}"
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exp}"


def _timestamp_micros(aware: bool) -> Callable[[Any], str]:
    """Key text of a timestamp: microseconds since 1970-01-01 UTC. A naive datetime is local
    time for a time-zone-aware column (PySpark's Rows), UTC wall time for timestamp_ntz."""
    def text(key) -> str:
        if key.tzinfo is None:
            key = key.astimezone(_UTC) if aware else key.replace(tzinfo=_UTC)
        return str((key - _EPOCH) // _MICROSECOND)
    return text


def _json_key_text(key_type, dumps: Callable[[Any], str]) -> Callable[[Any], str]:
    """How a map key of Arrow type ``key_type`` becomes a JSON object key: as Spark's JSON
    writer (``df.write.json``, ``to_json``) writes it, the text of the key's Spark internal
    value. Strings as they are; booleans ``true``/``false``; integers and decimals as
    numbers' text (decimals with their scale, Java ``BigDecimal.toString``); floats as Java
    (:func:`_java_float_text`: ``1.0E15``, ``NaN``); dates as days since 1970-01-01;
    timestamps (with or without time zone) as microseconds since 1970-01-01 UTC; day-time
    intervals as microseconds. Where Spark writes a JVM object's identity instead, our own
    text: binary keys base64 (as binary values), struct and array keys their compact JSON."""
    import pyarrow as pa

    t = key_type
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return str
    if pa.types.is_boolean(t):
        return lambda key: "true" if key else "false"
    if pa.types.is_integer(t) or pa.types.is_decimal(t):
        return str
    if pa.types.is_floating(t):
        single = pa.types.is_float32(t) or pa.types.is_float16(t)
        return lambda key: _java_float_text(key, single)
    if pa.types.is_date(t):
        return lambda key: str(key.toordinal() - _EPOCH_ORDINAL)
    if pa.types.is_timestamp(t):
        return _timestamp_micros(t.tz is not None)
    if pa.types.is_duration(t):
        return lambda key: str(key // _MICROSECOND)
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return lambda key: base64.b64encode(bytes(key)).decode("ascii")
    if pa.types.is_struct(t):  # a dict (Arrow) or a Row (PySpark Rows)
        return lambda key: dumps(key.asDict(recursive=True) if hasattr(key, "asDict") else key)
    return dumps


def _frozen(value):
    """A struct or array map key made hashable for CBOR: structs (dicts, Rows) become
    frozendicts (CBOR maps), arrays tuples (CBOR arrays)."""
    import cbor2

    if hasattr(value, "asDict"):  # a Row
        value = value.asDict(recursive=True)
    if isinstance(value, dict):
        return cbor2.frozendict({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_frozen(v) for v in value)
    return value


def _cbor_key(key_type) -> Callable[[Any], Any] | None:
    """How a map key of Arrow type ``key_type`` becomes a CBOR map key: as it is (CBOR keys
    may be of any type), a struct or array made hashable (:func:`_frozen`)."""
    import pyarrow as pa

    if pa.types.is_struct(key_type) or pa.types.is_list(key_type) \
            or pa.types.is_large_list(key_type):
        return _frozen
    return None


def _dict_converter(arrow_type, key_text=None) -> Callable[[Any], Any] | None:
    """A function that makes the Python values of ``arrow_type`` (Arrow's ``to_pylist`` or
    PySpark Rows' ``asDict(recursive=True)``) ready for JSON/CBOR: maps (Arrow: lists of
    (key, value) pairs; Rows: dicts) become dicts, their keys turned by the function
    ``key_text(key_type)`` returns (:func:`_json_key_text`, :func:`_cbor_key`), kept if it
    returns None or no ``key_text`` is given. None if the type holds no map (its values need
    nothing)."""
    import pyarrow as pa

    if pa.types.is_map(arrow_type):
        key = key_text(arrow_type.key_type) if key_text is not None else None
        item = _dict_converter(arrow_type.item_type, key_text)

        def convert_map(value):
            if value is None:
                return None
            pairs = value.items() if isinstance(value, dict) else value
            if key is None and item is None:
                return dict(pairs)
            return {(k if key is None else key(k)): (v if item is None else item(v))
                    for k, v in pairs}
        return convert_map
    if pa.types.is_struct(arrow_type):
        fields = [(f.name, _dict_converter(f.type, key_text)) for f in arrow_type]
        if all(convert is None for _, convert in fields):
            return None

        def convert_struct(value):
            if value is None:
                return None
            return {name: (value[name] if convert is None else convert(value[name]))
                    for name, convert in fields}
        return convert_struct
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        convert = _dict_converter(arrow_type.value_type, key_text)
        if convert is None:
            return None
        return lambda value: None if value is None else [convert(v) for v in value]
    return None


def _columns(batch, key_text=None) -> tuple[list[str], list[list]]:
    names = batch.schema.names
    cols = []
    for i, col in enumerate(batch.columns):
        values = col.to_pylist()
        convert = _dict_converter(batch.schema.field(i).type, key_text)
        if convert is not None:
            values = [convert(v) for v in values]
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


def _float_texts(col) -> Any:
    """The JSON text of a float column as the row-by-row encoder writes it (Python's
    ``repr``, which ``json.dumps`` uses), null for NaN, infinities and nulls.

    Arrow's cast gives the same shortest round-trip digits in another layout: ``2`` for
    ``2.0``, ``1e+15`` for ``1000000000000000.0``, ``1.5e-7`` for ``1.5e-07``, ``0.00001``
    for ``1e-05``. Integral texts get ``.0`` in a kernel; values where either side writes
    an exponent (magnitudes below 1e-4 or from 1e16, or an ``e`` in Arrow's text), rare in
    most data, are written by ``repr`` one by one. The masks are numpy arrays: few Arrow
    calls per column (their fixed cost counts at 2048 rows per batch)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    values = pc.cast(col, pa.float64())  # float32 as its exact double, like to_pylist
    if values.null_count:
        values = pc.fill_null(values, float("nan"))  # written as null, as NaN is
    texts = pc.cast(values, pa.string())
    v = values.to_numpy()
    finite = np.isfinite(v)
    magnitude = np.abs(v)
    with np.errstate(invalid="ignore"):
        python_e = ((magnitude >= 1e16) | (magnitude < 1e-4)) & (magnitude != 0.0)
    arrow_e = pc.match_substring(texts, "e").to_numpy(zero_copy_only=False)
    plain = finite & ~arrow_e & ~pc.match_substring(texts, ".").to_numpy(zero_copy_only=False)
    if plain.any():
        texts = pc.if_else(pa.array(plain), pc.binary_join_element_wise(texts, ".0", ""), texts)
    exponent = finite & (arrow_e | python_e)
    if exponent.any():
        texts = pc.replace_with_mask(texts, pa.array(exponent),
                                     pa.array([repr(x) for x in v[exponent].tolist()],
                                              pa.string()))
    if not finite.all():
        texts = pc.if_else(pa.array(finite), texts, pa.scalar(None, pa.string()))
    return texts


def _json_texts(col, dumps, key_text) -> Any:
    """The JSON text of every value of an Arrow column, as a string array without nulls
    (null -> ``null``). Numbers, booleans and strings are formatted by Arrow compute kernels
    (C, no Python step per value); dates and times are ISO 8601 text; other types go through
    ``dumps`` per value (map keys made text by ``key_text``), as the row-by-row encoder
    does."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        texts = pc.cast(col, pa.string())
    elif pa.types.is_floating(t):
        texts = _float_texts(col)
    elif (pa.types.is_string(t) or pa.types.is_large_string(t)) and not _needs_escape(col):
        texts = pc.binary_join_element_wise('"', pc.cast(col, pa.string()), '"', "")
    elif pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t):
        texts = pa.array([None if v is None else f'"{v.isoformat()}"' for v in col.to_pylist()],
                         pa.string())
    else:
        values = col.to_pylist()
        convert = _dict_converter(t, key_text)
        if convert is not None:
            values = [convert(v) for v in values]
        texts = pa.array([None if v is None else dumps(v) for v in values], pa.string())
    return pc.fill_null(texts, "null")


def _json_lines(batch, dumps, key_text) -> list[bytes]:
    """One JSON object per row of an Arrow RecordBatch, keys in column order, assembled
    column by column with Arrow compute (``binary_join_element_wise``): the same bytes as
    the row-by-row encoder."""
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
        parts.append(_json_texts(col, dumps, key_text))
    parts.append("}")
    rows = pc.binary_join_element_wise(*parts, "")
    return rows.cast(pa.binary()).to_pylist()


def _encoder(fmt: str, schema: StructType | None = None, by_column: bool = True
             ) -> Callable[[Any], list[bytes]]:
    """``encode(batch)``: the records of an Arrow RecordBatch, or of a list of Rows.

    :param fmt: ``json``, ``cbor`` or ``binary``.
    :param schema: the Spark schema of the Rows (to encode their map keys by type).
    :param by_column: JSON: encode a RecordBatch column by column with Arrow compute (the
        default) rather than row by row; both give the same bytes. A batch with duplicate
        column names is encoded row by row (the last column of a name wins).
    """
    if fmt == "binary":
        def encode_binary(batch) -> list[bytes]:
            if isinstance(batch, list):
                values = [row["data"] for row in batch]
            else:
                values = batch.column(batch.schema.get_field_index("data")).to_pylist()
            return [b"" if v is None else (v.encode("utf-8") if isinstance(v, str) else bytes(v))
                    for v in values]
        return encode_binary

    #: how a map key of an Arrow type becomes a key of the record (None: as it is)
    key_text: Callable[[Any], Callable[[Any], Any] | None]
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

        def json_key_text(key_type) -> Callable[[Any], str]:
            return _json_key_text(key_type, dump_value)
        key_text = json_key_text
    else:
        import cbor2

        def encode_one(obj) -> bytes:
            return cbor2.dumps(obj, timezone=_UTC)
        key_text = _cbor_key

    row_converters: list | None = None

    def encode_rows(rows: list) -> list[bytes]:
        nonlocal row_converters
        if row_converters is None:
            row_converters = []
            for field in schema.fields if schema is not None else ():
                from pyspark.sql.pandas.types import to_arrow_schema
                try:
                    arrow_field = to_arrow_schema(StructType([field]), timezone="UTC")[0]
                except (TypeError, ValueError, NotImplementedError):
                    continue  # a type Arrow cannot hold: no map the encoder could convert
                convert = _dict_converter(arrow_field.type, key_text)
                if convert is not None:
                    row_converters.append((field.name, convert))
        records = []
        for row in rows:
            obj = row.asDict(recursive=True)
            for name, convert in row_converters:
                obj[name] = convert(obj[name])
            records.append(encode_one(obj))
        return records

    def encode(batch) -> list[bytes]:
        if isinstance(batch, list):
            return encode_rows(batch)
        if fmt == "json" and by_column and len(set(batch.schema.names)) == batch.num_columns:
            return _json_lines(batch, dump_value, key_text)
        names, cols = _columns(batch, key_text)
        return [encode_one(dict(zip(names, values))) for values in zip(*cols)]
    return encode


def _arrow_chunks(items: Iterable, schema: StructType) -> Iterator[list[bytes]]:
    """Format ``arrow``: each Arrow RecordBatch Spark hands the task as one record, an Arrow
    IPC stream (:func:`rsocket_tx.extensions.arrow.encode_record_batches`); Rows (PySpark
    4.0's streaming writer) are gathered into record batches of :data:`CHUNK_ROWS` first."""
    import pyarrow as pa

    from rsocket_tx.extensions.arrow import encode_record_batches
    rows: list = []
    arrow_schema = None

    def from_rows(rows: list) -> list[bytes]:
        nonlocal arrow_schema
        if arrow_schema is None:
            from pyspark.sql.pandas.types import to_arrow_schema
            arrow_schema = to_arrow_schema(schema, timezone="UTC")
        batch = pa.RecordBatch.from_pylist([r.asDict(recursive=True) for r in rows],
                                           schema=arrow_schema)
        return [encode_record_batches(batch)]
    for item in items:
        if isinstance(item, pa.RecordBatch):
            if item.num_rows:
                yield [encode_record_batches(item)]
        else:
            rows.append(item)
            if len(rows) >= CHUNK_ROWS:
                yield from_rows(rows)
                rows = []
    if rows:
        yield from_rows(rows)


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


def call(endpoint: str, route: str, request: dict, timeout: float) -> Any:
    """Request-response with JSON ``request`` on ``route``, from a non-reactor thread.

    :returns: the decoded JSON response (a dict from the stream log; None for no data).
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
        # arrow: one Arrow IPC stream per record and payload, on the one-record routes
        batch_bytes = 0 if opts.format == "arrow" else opts.batch_bytes
        chunks = _arrow_chunks(iterator, self.schema) if opts.format == "arrow" else \
            _chunks(iterator, _encoder(opts.format, self.schema))
        if opts.guarantee == AT_LEAST_ONCE:
            header = {"topic": opts.topic, "shard": opts.shard}
            route, ack_key = ROUTE_APPEND_BATCH if batch_bytes else ROUTE_APPEND, "acked"
        else:
            first = next(chunks, None)
            if first is None:  # an empty partition stages nothing
                return RSocketCommitMessage(query, batch, partition, 0, False)
            chunks = _prepend(first, chunks)
            header = {"topic": opts.topic, "shard": opts.shard, "query": query,
                      "batch": batch, "partition": partition}
            route, ack_key = ROUTE_STAGE_BATCH if batch_bytes else ROUTE_STAGE, "staged"
        count = send_records(opts.endpoint, route, header, chunks, ack_key, opts.timeout,
                             self._on_ack, batch_bytes)
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
            query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
            query = f"{self.opts.sink_id}/{query_id}" if query_id else self.opts.sink_id
        return self._write(iterator, query, int(batch_text))

    def commit(self, messages, batchId: int) -> None:  # noqa: N803 - PySpark's name
        """(driver) Exactly-once: ``log.commit`` of micro-batch ``batchId`` (idempotent)."""
        self._commit(messages, None, batchId)

    def abort(self, messages, batchId: int) -> None:  # noqa: N803 - PySpark's name
        """(driver) Exactly-once: ``log.abort`` of micro-batch ``batchId``."""
        self._abort(messages, None, batchId)
