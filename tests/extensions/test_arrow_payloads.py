"""Arrow IPC payloads (rsocket_tx.extensions.arrow): encoding, decoding, the schema check, the
codec, and a payload bigger than a frame through the real protocol stack (fragmented and
reassembled by RSocket)."""

from __future__ import annotations

import pytest

pa = pytest.importorskip("pyarrow")

from rsocket_tx import Payload, Responder, route  # noqa: E402
from rsocket_tx.codecs import codec_for  # noqa: E402
from rsocket_tx.core.config import ConnectionConfig  # noqa: E402
from rsocket_tx.extensions.arrow import (  # noqa: E402
    ARROW_STREAM,
    ArrowCodec,
    ArrowDecodeError,
    ArrowSchemaError,
    arrow_payload,
    decode_record_batches,
    decode_table,
    encode_record_batches,
)
from rsocket_tx.extensions.mimetypes import COMPOSITE_METADATA  # noqa: E402
from rsocket_tx.testing import connected_pair  # noqa: E402


def batch(start: int, n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"id": pa.array(range(start, start + n), pa.int64()),
                                       "name": [f"row-{i}" for i in range(start, start + n)]})


def test_batches_round_trip_with_their_schema():
    data = encode_record_batches([batch(0, 3), batch(3, 2)])
    got = decode_record_batches(data)
    assert [b.num_rows for b in got] == [3, 2]
    assert pa.Table.from_batches(got).column("id").to_pylist() == [0, 1, 2, 3, 4]
    assert decode_table(Payload(data)).column("name").to_pylist()[-1] == "row-4"


def test_a_table_and_an_empty_stream():
    table = pa.Table.from_batches([batch(0, 4)])
    assert decode_table(encode_record_batches(table)).equals(table)
    empty = encode_record_batches([], schema=table.schema)
    assert decode_record_batches(empty) == []
    assert decode_table(empty).schema.equals(table.schema)
    with pytest.raises(ValueError, match="needs schema="):
        encode_record_batches([])


def test_a_schema_mismatch_names_both_schemas():
    expected = pa.schema([("id", pa.int32()), ("name", pa.string())])
    with pytest.raises(ArrowSchemaError) as info:
        decode_record_batches(encode_record_batches(batch(0, 1)), schema=expected)
    message = str(info.value)
    assert "id: int64, name: string" in message and "id: int32, name: string" in message
    assert info.value.expected.equals(expected)
    # nullability does not count
    same = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])
    assert len(decode_record_batches(encode_record_batches(batch(0, 2)), schema=same)) == 1


@pytest.mark.parametrize("data", [b"", b"{\"id\": 1}", b"\xff" * 40])
def test_data_that_is_not_an_ipc_stream(data):
    with pytest.raises(ArrowDecodeError, match="not an Arrow IPC stream"):
        decode_record_batches(data)


def test_a_truncated_stream():
    data = encode_record_batches(batch(0, 100))
    with pytest.raises(ArrowDecodeError):
        decode_record_batches(data[:len(data) // 2])


def test_the_codec_is_registered_for_the_mime_type():
    codec = codec_for(ARROW_STREAM)
    assert isinstance(codec, ArrowCodec)
    assert codec.decode(codec.encode(batch(0, 2))).num_rows == 2
    for wrong in (42, {"a": 1}, ["x"]):
        with pytest.raises(TypeError, match="pyarrow Table"):
            codec.encode(wrong)


class Ingest(Responder):
    """Sums the ids of an Arrow payload and streams Arrow payloads back."""

    @route("sum")
    def sum(self, request):
        table = request.data  # decoded by the Arrow codec: the per-stream data MIME type
        # the answer has the request's data MIME type: the codec encodes a Table
        return pa.table({"rows": [table.num_rows], "sum": [sum(table.column("id").to_pylist())]})

    @route("batches", interaction="request_stream")
    def batches(self, request):
        return [arrow_payload(batch(i * 50_000, 50_000)) for i in range(3)]


def test_payloads_bigger_than_a_frame_cross_the_protocol():
    pair = connected_pair(Ingest, data_mime_type="application/json",
                          metadata_mime_type=COMPOSITE_METADATA,
                          client_config=ConnectionConfig(fragment_size=4096))
    big = arrow_payload(batch(0, 200_000))
    assert len(big.data) > 16 * 4096  # many fragments of 4 KiB
    answer = pair.result(pair.client.request_response(big, route="sum",
                                                      data_mime_type=ARROW_STREAM))
    assert decode_table(answer).to_pylist() == [{"rows": 200_000, "sum": sum(range(200_000))}]
    stream = pair.client.request_stream(Payload(b""), route="batches")
    got = pair.result(stream.collect())
    rows = [r for p in got for b in decode_record_batches(p.data)
            for r in b.column("id").to_pylist()]
    assert rows == list(range(150_000))
