"""Payload chunks to Arrow record batches in the Spark schema.

A chunk (``list[Payload]``) becomes one :class:`pyarrow.RecordBatch` whose schema is exactly
``to_arrow_schema(spark_schema)`` (Spark checks it). Columns are either *record* columns,
decoded from the payload data, or *source* columns filled by the reader:

* ``binary`` format: ``data`` (binary: the payload data), ``metadata`` (binary: the payload
  metadata), ``shard`` (int), ``offset`` (long), ``endpoint`` (string) — any subset, any order.
* ``json`` / ``cbor``: every field of the user's schema is read from the record (a JSON object
  / CBOR map per payload), except the source columns ``_shard`` (int), ``_offset`` (long),
  ``_endpoint`` (string) and ``_metadata`` (binary), which every format also accepts.
* ``arrow``: each payload is an Arrow IPC stream (:mod:`rsocket_tx.extensions.arrow`) of one
  or more record batches; every field of the user's schema but the source columns is taken
  from its columns by name (no per-row step: the columns are the payload's buffers), the
  types must be the declared ones (:class:`SchemaMismatchError` otherwise). ``_offset`` is
  the offset of the payload holding the row.

JSON is decoded in bulk: the chunk's records are joined with newlines and parsed by
:func:`pyarrow.json.read_json` with an explicit schema (fields absent from the schema are
ignored, missing ones are null). CBOR is decoded per record with :mod:`cbor2`.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence

import pyarrow as pa

__all__ = ["SOURCE_COLUMNS", "ChunkConverter", "DecodeError", "SchemaMismatchError",
           "check_schema", "default_schema"]

#: Source columns by name -> (Spark type name, Arrow type): filled by the reader, not decoded.
SOURCE_COLUMNS = {
    "_shard": ("int", pa.int32()),
    "_offset": ("bigint", pa.int64()),
    "_endpoint": ("string", pa.string()),
    "_metadata": ("binary", pa.binary()),
}
_BINARY_COLUMNS = {
    "data": ("binary", pa.binary()),
    "metadata": ("binary", pa.binary()),
    "shard": ("int", pa.int32()),
    "offset": ("bigint", pa.int64()),
    "endpoint": ("string", pa.string()),
}
_SOURCE_KIND = {"_shard": "shard", "_offset": "offset", "_endpoint": "endpoint",
                "_metadata": "metadata", "data": "data", "metadata": "metadata",
                "shard": "shard", "offset": "offset", "endpoint": "endpoint"}


def _offset_metadata(offsets: pa.Array | None, n: int) -> pa.Array:
    """Per record: ``OFFSET_METADATA_PREFIX`` + the offset (8 bytes, big endian), built with
    numpy (no Python step per record); null without offsets."""
    if offsets is None:
        return pa.nulls(n, pa.binary())
    import numpy as np

    from rsocket_tx.apps.streamlog import OFFSET_METADATA_PREFIX
    plen = len(OFFSET_METADATA_PREFIX)
    rows = np.empty((n, plen + 8), dtype=np.uint8)
    rows[:, :plen] = np.frombuffer(OFFSET_METADATA_PREFIX, dtype=np.uint8)
    rows[:, plen:] = offsets.to_numpy().astype(">u8").view(np.uint8).reshape(n, 8)
    fixed = pa.FixedSizeBinaryArray.from_buffers(pa.binary(plen + 8), n,
                                                 [None, pa.py_buffer(rows.tobytes())])
    return fixed.cast(pa.binary())


def _show(schema: pa.Schema) -> str:
    return schema.to_string(show_field_metadata=False, show_schema_metadata=False)\
        .replace("\n", ", ")


def _same_type(actual: pa.DataType, declared: pa.DataType) -> bool:
    """Equal types; timestamps of the same unit in any time zone count as equal (the same
    instants: only how they display differs)."""
    if actual.equals(declared):
        return True
    return (pa.types.is_timestamp(actual) and pa.types.is_timestamp(declared)
            and actual.unit == declared.unit)


class _Metadata:
    """``_record_batch``'s ``metadata()`` of an Arrow payload's rows: the offset metadata
    ``log.read`` gives (log mode), else the payload's metadata repeated."""

    def __init__(self, metadata: bytes | None, offsets: pa.Array | None, n: int) -> None:
        self.metadata, self.offsets, self.n = metadata, offsets, n

    def __call__(self) -> pa.Array:
        if self.offsets is not None:
            return _offset_metadata(self.offsets, self.n)
        return pa.repeat(pa.scalar(self.metadata, pa.binary()), self.n)


class DecodeError(ValueError):
    """A payload's data could not be decoded in the requested format."""


class SchemaMismatchError(DecodeError):
    """An Arrow payload whose schema does not have the declared columns and types; the
    message names both schemas."""


def default_schema(fmt: str, log_mode: bool) -> str:
    """The schema used when the user gives none (DDL string).

    :raises ValueError: ``fmt`` is json or cbor (those need the user's schema)."""
    if fmt == "binary":
        return ("data binary, metadata binary, shard int, offset bigint" if log_mode
                else "data binary, metadata binary")
    raise ValueError(f"rsocket format {fmt!r} needs a schema: "
                     f"spark.read.format('rsocket').schema('a string, b double, ...')")


def check_schema(schema, fmt: str, log_mode: bool) -> None:
    """Check that ``schema`` (a Spark StructType) can be produced for ``fmt``.

    :raises ValueError: a binary-format column is not one of data/metadata/shard/offset/
        endpoint, a source column has the wrong type, or shard/offset are asked for outside
        log mode."""
    allowed = dict(SOURCE_COLUMNS)
    if fmt == "binary":
        allowed.update(_BINARY_COLUMNS)
    for field in schema.fields:
        name = field.name
        if name in allowed:
            want = allowed[name][0]
            if field.dataType.simpleString() != want:
                raise ValueError(f"rsocket column {name!r} must be of type {want}, got "
                                 f"{field.dataType.simpleString()}")
            if _SOURCE_KIND[name] in ("shard", "offset") and not log_mode:
                raise ValueError(f"rsocket column {name!r} exists only in log mode (option "
                                 f"'topic')")
        elif fmt == "binary":
            raise ValueError(f"rsocket format 'binary' has columns data, metadata, shard, "
                             f"offset, endpoint (and _shard, _offset, _endpoint, _metadata); "
                             f"got {name!r}: use format json or cbor to decode records")


class ChunkConverter:
    """Turns chunks of payloads into record batches of one Spark schema.

    :param schema: the Spark StructType of the output.
    :param fmt: ``binary``, ``json`` or ``cbor``.
    :param endpoint: value of the endpoint column(s).
    :param shard: value of the shard column(s) (None outside log mode).
    """

    def __init__(self, schema, fmt: str, endpoint: str = "", shard: int | None = None) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.fmt = fmt
        self.endpoint = endpoint
        self.shard = shard
        names = [f.name for f in self.arrow_schema]
        if fmt == "binary":
            self.source = names
            self.record_fields: list[pa.Field] = []
        else:
            self.source = [n for n in names if n in SOURCE_COLUMNS]
            self.record_fields = [f for f in self.arrow_schema if f.name not in SOURCE_COLUMNS]
        self.record_schema = pa.schema(self.record_fields)
        self._json_parse = None
        self._arrow_names = [f.name for f in self.record_fields]
        if fmt == "json" and self.record_fields:
            import pyarrow.json as pj
            self._pj = pj
            self._json_parse = pj.ParseOptions(explicit_schema=self.record_schema,
                                               unexpected_field_behavior="ignore")
            self._json_parse_nl = pj.ParseOptions(explicit_schema=self.record_schema,
                                                  unexpected_field_behavior="ignore",
                                                  newlines_in_values=True)

    def convert(self, chunk: Sequence, offsets: pa.Array | None = None) -> pa.RecordBatch:
        """One record batch for ``chunk`` (``list[Payload]``).

        :param offsets: the chunk's offsets (int64), for the offset columns.
        :raises DecodeError: a record is not valid JSON/CBOR or does not fit the schema.
        """
        n = len(chunk)
        columns: dict[str, pa.Array] = {}
        if self.record_fields:
            datas = [p.data for p in chunk]
            columns.update(self._decode(datas))
        return self._record_batch(
            columns, n, offsets,
            lambda: pa.array([p.data for p in chunk], pa.binary()),
            lambda: pa.array([p.metadata for p in chunk], pa.binary()))

    def convert_arrow(self, chunk: Sequence, offsets: pa.Array | None = None
                      ) -> Iterator[pa.RecordBatch]:
        """The record batches of a chunk of Arrow IPC payloads, in the output schema: the
        declared columns taken by name from each payload's batches (zero-copy), the source
        columns added.

        :param offsets: the chunk's offsets (int64, one per payload): each row gets the
            offset of its payload.
        :raises SchemaMismatchError: a payload lacks a declared column, or has it with
            another type (the message shows both schemas).
        :raises DecodeError: a payload is not an Arrow IPC stream.
        """
        from rsocket_tx.extensions.arrow import ArrowDecodeError, decode_record_batches
        for i, payload in enumerate(chunk):
            try:
                batches = decode_record_batches(payload.data)
            except ArrowDecodeError as exc:
                raise DecodeError(f"payload {i} of the chunk: {exc}") from None
            for batch in batches:
                n = batch.num_rows
                columns = self._arrow_columns(batch)
                offset = None if offsets is None else \
                    pa.repeat(pa.scalar(offsets[i].as_py(), pa.int64()), n)
                yield self._record_batch(columns, n, offset, None,
                                         _Metadata(payload.metadata, offset, n))

    def _arrow_columns(self, batch: pa.RecordBatch) -> dict[str, pa.Array]:
        schema = batch.schema
        columns = {}
        for field in self.record_fields:
            index = schema.get_field_index(field.name)
            if index < 0 or not _same_type(schema.field(index).type, field.type):
                raise SchemaMismatchError(
                    f"the Arrow payload's schema <{_show(schema)}> does not match the declared "
                    f"schema <{_show(self.record_schema)}>: "
                    + (f"no column {field.name!r}" if index < 0 else
                       f"column {field.name!r} is {schema.field(index).type}, declared "
                       f"{field.type}"))
            columns[field.name] = batch.column(index)
        return columns

    def convert_lines(self, body, n: int, records, offsets: pa.Array | None = None
                      ) -> pa.RecordBatch:
        """One record batch for ``n`` records given as ``body``: each record followed by one
        LF byte (the records of stream log record batches, possibly several joined).

        :param body: ``bytes``, the records with their LF bytes.
        :param n: the number of records.
        :param records: ``records()`` returns the records as a ``list[bytes]`` (called only
            when a column needs them one by one: binary ``data``, CBOR).
        :param offsets: the records' offsets (int64); a ``metadata`` column gets the offset
            metadata ``log.read`` gives each record
            (:data:`rsocket_tx.apps.streamlog.OFFSET_METADATA_PREFIX` + 8 bytes big endian).
        :raises DecodeError: a record is not valid JSON/CBOR or does not fit the schema.
        """
        columns: dict[str, pa.Array] = {}
        datas = None
        if self.record_fields:
            if self.fmt == "json":
                columns.update(self._decode_json_lines(body, n))
            else:
                datas = records()
                columns.update(self._decode_cbor(datas))
        return self._record_batch(
            columns, n, offsets,
            lambda: pa.array(records() if datas is None else datas, pa.binary()),
            # what log.read's PAYLOAD would carry: the offset
            lambda: _offset_metadata(offsets, n))

    def _record_batch(self, columns: dict[str, pa.Array], n: int,
                      offsets: pa.Array | None, data, metadata) -> pa.RecordBatch:
        """The record batch of ``n`` rows from the decoded record ``columns`` and the source
        columns: ``data()`` and ``metadata()`` build those two when the schema has them."""
        for name in self.source:
            kind = _SOURCE_KIND[name]
            if kind == "data":
                columns[name] = data()
            elif kind == "metadata":
                columns[name] = metadata()
            elif kind == "shard":
                columns[name] = pa.nulls(n, pa.int32()) if self.shard is None else \
                    pa.repeat(pa.scalar(self.shard, pa.int32()), n)
            elif kind == "offset":
                columns[name] = pa.nulls(n, pa.int64()) if offsets is None else offsets
            elif kind == "endpoint":
                columns[name] = pa.repeat(pa.scalar(self.endpoint, pa.string()), n)
        arrays = []
        for field in self.arrow_schema:
            arr = columns[field.name]
            if not arr.type.equals(field.type):
                arr = arr.cast(field.type)
            arrays.append(arr)
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _decode_json_lines(self, body, n: int) -> dict[str, pa.Array]:
        pj = self._pj
        buf = pa.py_buffer(body)
        # one record per line unless a record has raw newlines (pretty-printed JSON)
        opts = self._json_parse if body.count(b"\n") == n else self._json_parse_nl
        try:
            table = pj.read_json(pa.BufferReader(buf),
                                 read_options=pj.ReadOptions(use_threads=False,
                                                             block_size=max(1 << 20,
                                                                            buf.size + 1)),
                                 parse_options=opts)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise DecodeError(f"cannot decode JSON records into "
                              f"{self.record_schema.to_string(show_schema_metadata=False)!r}"
                              f": {exc}") from None
        if table.num_rows != n:
            raise DecodeError(f"{n} records decoded into {table.num_rows} JSON "
                              f"records: each record must be exactly one JSON object")
        return {name: table.column(name).combine_chunks() for name in table.column_names}

    def _decode(self, datas: list[bytes]) -> dict[str, pa.Array]:
        if self.fmt == "json":
            return self._decode_json(datas)
        return self._decode_cbor(datas)

    def _decode_json(self, datas: list[bytes]) -> dict[str, pa.Array]:
        pj = self._pj
        if b"" in datas:
            raise DecodeError("an empty payload is not a JSON record")
        joined = b"\n".join(datas)
        # one record per line unless a record has raw newlines (pretty-printed JSON)
        opts = self._json_parse if joined.count(b"\n") == len(datas) - 1 \
            else self._json_parse_nl
        try:
            table = pj.read_json(io.BytesIO(joined),
                                 read_options=pj.ReadOptions(use_threads=False,
                                                             block_size=max(1 << 20,
                                                                            len(joined) + 1)),
                                 parse_options=opts)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise DecodeError(f"cannot decode JSON records into "
                              f"{self.record_schema.to_string(show_schema_metadata=False)!r}"
                              f": {exc}") from None
        if table.num_rows != len(datas):
            raise DecodeError(f"{len(datas)} payloads decoded into {table.num_rows} JSON "
                              f"records: each payload must be exactly one JSON object")
        return {name: table.column(name).combine_chunks() for name in table.column_names}

    def _decode_cbor(self, datas: list[bytes]) -> dict[str, pa.Array]:
        import cbor2
        rows = []
        for i, d in enumerate(datas):
            try:
                value = cbor2.loads(d)
            except Exception as exc:  # noqa: BLE001 - cbor2 raises several types
                raise DecodeError(f"record {i} of the chunk is not CBOR: {exc}") from None
            if not isinstance(value, dict):
                raise DecodeError(f"record {i} of the chunk is a CBOR "
                                  f"{type(value).__name__}, not a map")
            rows.append(value)
        try:
            batch = pa.RecordBatch.from_pylist(rows, schema=self.record_schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as exc:
            raise DecodeError(f"cannot convert CBOR records into "
                              f"{self.record_schema.to_string(show_schema_metadata=False)!r}"
                              f": {exc}") from None
        return {name: batch.column(name) for name in batch.schema.names}
