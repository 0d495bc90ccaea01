"""Arrow record batches as payload data: the Arrow IPC streaming format, MIME type
``application/vnd.apache.arrow.stream`` (:data:`ARROW_STREAM`).

A payload's data is one Arrow IPC *stream* (Arrow Columnar Format, "IPC Streaming Format"): a
schema message, one or more record batch messages (dictionary batches as the format says), and
the end-of-stream marker. It carries its own schema, so any requester or responder (Python,
Java, Rust, ...) reads it without another agreement than the MIME type, and a columnar engine
(Spark, DuckDB, pandas) takes the batches with no per-row decoding. A payload of any size is
fragmented and reassembled by RSocket itself (spec §Fragmentation And Reassembly; the receiver's
``max_reassembled_size``, 64 MiB by default, bounds one payload).

Sending::

    from rsocket_tx.extensions.arrow import ARROW_STREAM, arrow_payload
    await rsocket.request_response(arrow_payload(table), route="ingest",
                                   data_mime_type=ARROW_STREAM)

Receiving: :func:`decode_record_batches` (``payload.data`` -> list of
:class:`pyarrow.RecordBatch`) or :func:`decode_table`, optionally checked against an expected
schema. Importing this module also registers :class:`ArrowCodec` for :data:`ARROW_STREAM`
(:func:`rsocket_tx.codecs.register_codec`), so ``request.data`` of a route whose data MIME type
is Arrow is a :class:`pyarrow.Table`, and a route may return a Table or RecordBatch.

pyarrow is an optional dependency (``pip install rsocket_tx[arrow]``): this module imports it
only when a function needs it, and raises :class:`ImportError` saying how to install it.
Nothing here does I/O or imports Twisted.
"""

from __future__ import annotations

from typing import Any

from ..codecs import Codec, DataDecodeError, register_codec
from ..core.payload import Payload

__all__ = [
    "ARROW_STREAM",
    "ArrowCodec",
    "ArrowDecodeError",
    "ArrowSchemaError",
    "arrow_payload",
    "decode_record_batches",
    "decode_table",
    "encode_record_batches",
    "schemas_match",
]

#: The MIME type of the Arrow IPC streaming format (IANA registration
#: ``application/vnd.apache.arrow.stream``).
ARROW_STREAM = "application/vnd.apache.arrow.stream"


class ArrowDecodeError(DataDecodeError):
    """Payload data that is not an Arrow IPC stream (truncated, corrupt, or another format)."""


class ArrowSchemaError(ArrowDecodeError):
    """An Arrow IPC stream whose schema is not the one expected; the message shows both.

    :ivar expected: the expected :class:`pyarrow.Schema`. :ivar actual: the payload's.
    """

    def __init__(self, message: str, expected: Any, actual: Any) -> None:
        super().__init__(message)
        self.expected = expected
        self.actual = actual


def _pyarrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.ipc  # noqa: F401 - the IPC submodule, loaded for pa.ipc
    except ImportError as exc:
        raise ImportError("Arrow payloads need pyarrow: pip install 'rsocket_tx[arrow]' "
                          f"({exc})") from None
    return pa


def _show(schema: Any) -> str:
    return str(schema.to_string(show_field_metadata=False, show_schema_metadata=False))\
        .replace("\n", ", ")


def schemas_match(expected: Any, actual: Any) -> bool:
    """Whether ``actual`` has the fields of ``expected``: the same names in the same order
    and the same types (nullability and schema metadata are not compared).

    :param expected: a :class:`pyarrow.Schema`. :param actual: a :class:`pyarrow.Schema`.
    """
    if len(expected) != len(actual):
        return False
    return all(e.name == a.name and e.type.equals(a.type) for e, a in zip(expected, actual))


def encode_record_batches(batches: Any, schema: Any = None) -> bytes:
    """One Arrow IPC stream holding ``batches``.

    :param batches: a :class:`pyarrow.RecordBatch`, a :class:`pyarrow.Table`, or an iterable
        of record batches (of one schema).
    :param schema: the stream's :class:`pyarrow.Schema`; default: the first batch's. Needed
        for an empty iterable (a stream with a schema and no batch).
    :returns: the IPC stream bytes (schema, batches, end-of-stream marker).
    :raises ValueError: no batch and no ``schema``; a batch of another schema.
    :raises ImportError: pyarrow is not installed.
    """
    pa = _pyarrow()
    if isinstance(batches, pa.Table):
        schema = schema or batches.schema
        batches = batches.to_batches()
    elif isinstance(batches, pa.RecordBatch):
        batches = [batches]
    batches = list(batches)
    if schema is None:
        if not batches:
            raise ValueError("encode_record_batches needs schema= when there is no batch")
        schema = batches[0].schema
    sink = pa.BufferOutputStream()
    try:
        with pa.ipc.new_stream(sink, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ValueError(f"cannot write the record batches as an Arrow IPC stream of schema "
                         f"{_show(schema)}: {exc}") from None
    data: bytes = sink.getvalue().to_pybytes()
    return data


def arrow_payload(batches: Any, schema: Any = None, metadata: bytes | None = None) -> Payload:
    """A :class:`~rsocket_tx.Payload` whose data is :func:`encode_record_batches`.

    Send it on a stream whose data MIME type is :data:`ARROW_STREAM` (SETUP's data MIME type,
    or a request's ``data_mime_type=ARROW_STREAM``, which puts the per-stream MIME type in
    composite metadata, ``Extensions/PerStreamDataMimeTypesDefinition.md``).

    :param metadata: the payload's metadata (bytes), or None.
    :raises ValueError: as :func:`encode_record_batches`.
    """
    return Payload(encode_record_batches(batches, schema), metadata)


def _reader(data: Any) -> tuple[Any, Any]:
    pa = _pyarrow()
    if isinstance(data, Payload):
        data = data.data
    try:
        return pa, pa.ipc.open_stream(pa.py_buffer(data))
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArrowDecodeError(f"payload data of {len(data)} bytes is not an Arrow IPC stream "
                               f"({ARROW_STREAM}): {exc}") from None


def _check(schema: Any, expected: Any) -> None:
    if expected is not None and not schemas_match(expected, schema):
        raise ArrowSchemaError(f"the Arrow payload's schema <{_show(schema)}> does not match "
                               f"the expected schema <{_show(expected)}>", expected, schema)


def decode_record_batches(data: Any, schema: Any = None) -> list[Any]:
    """The record batches of one Arrow IPC stream.

    :param data: the payload data (bytes-like), or a :class:`~rsocket_tx.Payload`.
    :param schema: the expected :class:`pyarrow.Schema` (checked by :func:`schemas_match`
        before any batch is read), or None to take the stream's.
    :returns: a list of :class:`pyarrow.RecordBatch` (zero-copy views of ``data``).
    :raises ArrowSchemaError: the stream's schema does not match ``schema`` (names both).
    :raises ArrowDecodeError: ``data`` is not a complete Arrow IPC stream.
    :raises ImportError: pyarrow is not installed.
    """
    pa, reader = _reader(data)
    _check(reader.schema, schema)
    try:
        return list(reader)
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArrowDecodeError(f"a malformed Arrow IPC stream: {exc}") from None


def decode_table(data: Any, schema: Any = None) -> Any:
    """As :func:`decode_record_batches`, as one :class:`pyarrow.Table` (of the stream's
    schema, also when it holds no batch)."""
    pa, reader = _reader(data)
    _check(reader.schema, schema)
    try:
        return reader.read_all()
    except (pa.ArrowInvalid, OSError) as exc:
        raise ArrowDecodeError(f"a malformed Arrow IPC stream: {exc}") from None


class ArrowCodec(Codec):
    """The codec of :data:`ARROW_STREAM`: encodes a :class:`pyarrow.Table`, a
    :class:`pyarrow.RecordBatch` or a list of record batches; decodes to a
    :class:`pyarrow.Table`. Registered when this module is imported."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(ARROW_STREAM)

    def encode(self, obj: object) -> bytes:
        """:func:`encode_record_batches` of ``obj``.

        :raises TypeError: ``obj`` is not a Table, a RecordBatch or an iterable of them."""
        pa = _pyarrow()
        if isinstance(obj, (bytes, bytearray, memoryview)):
            return bytes(obj)  # already an IPC stream
        if not (isinstance(obj, (pa.Table, pa.RecordBatch)) or (
                isinstance(obj, (list, tuple)) and
                all(isinstance(b, pa.RecordBatch) for b in obj))):
            raise TypeError(f"{ARROW_STREAM} data is a pyarrow Table, RecordBatch or list of "
                            f"RecordBatch, not {type(obj).__name__}")
        return encode_record_batches(obj)

    def decode(self, data: bytes) -> object:
        """:func:`decode_table` of ``data``.

        :raises ArrowDecodeError: not an Arrow IPC stream."""
        return decode_table(data)


register_codec(ArrowCodec())
