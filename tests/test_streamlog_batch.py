"""The record-batch routes of the stream log (``log.read.batch``, ``log.append.batch``,
``log.stage.batch``): the batch format from its documented layout, its bounds, malformed
batches, and exactly-once staging with batches."""

from __future__ import annotations

import pytest
import pytest_twisted
from streamlog_support import (  # log_fixture: the log fixture
    CountingLog,
    client,
    log_fixture,  # noqa: F401
    records,
    turns,
)
from twisted_support import wait

from rsocket_tx import InvalidError, Payload
from rsocket_tx.apps.streamlog import (
    BATCH_HEADER_SIZE,
    ROUTE_APPEND,
    ROUTE_APPEND_BATCH,
    ROUTE_COMMIT,
    ROUTE_READ,
    ROUTE_READ_BATCH,
    ROUTE_STAGE_BATCH,
    RecordBatchError,
    StreamLogResponder,
    batch_layout,
    decode_batch,
    encode_batch,
)

aio = pytest_twisted.ensureDeferred
JSON = "application/json"

# The module docstring's layout, written out by hand: first offset 5 (8 bytes BE), count 3
# (4 bytes BE), lengths 2, 0, 3 (4 bytes BE each), then each record followed by LF.
GOLDEN = (bytes.fromhex("0000000000000005" "00000003" "00000002" "00000000" "00000003")
          + b"ab\n" + b"\n" + b"x\ny\n")
GOLDEN_RECORDS = [b"ab", b"", b"x\ny"]


def test_encode_matches_the_documented_layout():
    assert encode_batch(5, GOLDEN_RECORDS) == GOLDEN
    assert BATCH_HEADER_SIZE == 12
    assert len(GOLDEN) == 12 + 5 * 3 + 5


def test_decode_the_documented_layout():
    assert decode_batch(GOLDEN) == (5, GOLDEN_RECORDS)
    assert decode_batch(memoryview(GOLDEN)) == (5, GOLDEN_RECORDS)
    assert batch_layout(GOLDEN) == (5, (2, 0, 3), 12 + 12)
    # JSON records with no LF inside: the body is newline-delimited JSON as it is
    one = (bytes.fromhex("ffffffffffffffff" "00000001" "00000007") + b'{"a":1}\n')
    assert decode_batch(one) == (2**64 - 1, [b'{"a":1}'])


@pytest.mark.parametrize("data, message", [
    (b"", "shorter than the 12-byte header"),
    (bytes(11), "shorter than the 12-byte header"),
    (bytes(12), "count is 0"),
    (bytes.fromhex("0000000000000000" "00000002" "00000001"), "count 2 needs at least"),
    (bytes.fromhex("0000000000000000" "00000001" "00000002") + b"ab", "need 19 bytes"),
    (bytes.fromhex("0000000000000000" "00000001" "00000002") + b"ab\n\n", "need 19 bytes"),
    (bytes.fromhex("0000000000000000" "00000001" "00000002") + b"abc", "record 0 .* LF"),
    (bytes.fromhex("0000000000000000" "00000002" "00000001" "00000001") + b"a\nbc",
     "record 1 .* LF"),
    # as many LF as records, but not where the lengths put them
    (bytes.fromhex("0000000000000000" "00000002" "00000002" "00000000") + b"a\nb\n",
     "record 0 .* LF"),
])
def test_malformed_batches_are_refused_with_the_reason(data, message):
    with pytest.raises(RecordBatchError, match=message):
        decode_batch(data)


def test_an_empty_batch_cannot_be_encoded():
    with pytest.raises(RecordBatchError, match="at least one record"):
        encode_batch(0, [])


# -- over loopback ----------------------------------------------------------------------------


async def read_batches(rs, topic, shard, start, stop=None, prefetch=4, **extra):
    data = {"topic": topic, "shard": shard, "from": start, **extra}
    if stop is not None:
        data["to"] = stop
    return await wait(rs.request_stream(data, route=ROUTE_READ_BATCH,
                                        prefetch=prefetch).collect())


@aio
async def test_read_batch_carries_the_records_and_offsets_of_log_read(harness, log):
    recs = records(1000) + [b"line\nbreak", b""]
    log.create_topic("t", 1)
    log.append("t", 0, recs)
    rs = await client(harness, log)
    got = await read_batches(rs, "t", 0, 3, 1002)
    assert all(p.metadata in (None, b"") for p in got)
    offset = 3
    for p in got:
        first, batch = decode_batch(p.data)
        assert first == offset
        assert batch == recs[offset:offset + len(batch)]
        offset += len(batch)
    assert offset == 1002
    # the same records as the one-per-payload route, which is unchanged
    single = await wait(rs.request_stream({"topic": "t", "shard": 0, "from": 3},
                                          route=ROUTE_READ, prefetch=64).collect())
    assert [p.data for p in single] == recs[3:]
    assert await read_batches(rs, "t", 0, 1002) == []  # an empty range: no batch


@aio
async def test_read_batches_stay_within_max_bytes(harness, log):
    recs = [b"%04d" % i for i in range(200)] + [b"z" * 300] + [b"y"] * 10
    log.create_topic("t", 1)
    log.append("t", 0, recs)
    rs = await client(harness, log, batch_bytes="100", read_chunk="7")
    got = await read_batches(rs, "t", 0, 0, prefetch=2)
    sizes = [len(p.data) for p in got]
    # 100 bytes hold 12 + 9 x (4 + 5) = 93 bytes: 9 records of 4 bytes per batch
    assert [len(decode_batch(p.data)[1]) for p in got[:3]] == [9, 9, 9]
    big = [p for p in got if b"z" * 300 in p.data]
    assert len(big) == 1 and decode_batch(big[0].data)[1] == [b"z" * 300]  # alone
    assert all(size <= 100 for p, size in zip(got, sizes) if p is not big[0])
    assert [r for p in got for r in decode_batch(p.data)[1]] == recs
    # a request's max_bytes lowers the setting (never raises it)
    small = await read_batches(rs, "t", 0, 0, 20, max_bytes=30)
    assert [len(decode_batch(p.data)[1]) for p in small] == [2] * 10
    large = await read_batches(rs, "t", 0, 0, 20, max_bytes=10_000)
    assert max(len(p.data) for p in large) <= 100


@pytest.mark.parametrize("extra, message", [
    ({"max_bytes": 0}, "max_bytes must be in 1.."),
    ({"max_bytes": "big"}, "max_bytes must be an integer"),
    ({"limit": 1}, "unknown field"),
])
@aio
async def test_bad_read_batch_requests_are_invalid(harness, log, extra, message):
    log.create_topic("t", 1)
    log.append("t", 0, records(3))
    rs = await client(harness, log)
    with pytest.raises(InvalidError, match=message):
        await read_batches(rs, "t", 0, 0, **extra)


def test_batch_bytes_setting_is_bounded(log):
    with pytest.raises(ValueError, match="batch_bytes"):
        StreamLogResponder(log=log, batch_bytes="10")
    with pytest.raises(ValueError, match="batch_bytes"):
        StreamLogResponder(log=log, batch_bytes=2**30)


@aio
async def test_append_batch_acks_records_per_transaction(harness, log):
    rs = await client(harness, log, ack_every="4")
    recs = records(10)
    outbound = [Payload(encode_batch(0, recs[:3])), Payload(encode_batch(0, recs[3:9])),
                Payload(encode_batch(0, recs[9:]))]
    acks = await wait(rs.request_channel({"topic": "b", "shard": 0}, outbound,
                                         route=ROUTE_APPEND_BATCH, decode=True).collect())
    # 3 (< 4: no write), 9 (write 9), then 1 at the end of input
    assert acks == [{"acked": 9}, {"acked": 10}]
    assert [d for _, d in log.read("b", 0)] == recs
    # the one-record route still appends one record per payload
    acks = await wait(rs.request_channel({"topic": "b", "shard": 0}, [Payload(b"x")],
                                         route=ROUTE_APPEND, decode=True).collect())
    assert acks == [{"acked": 1}]
    assert log.end_offsets("b") == {0: 11}


@pytest.mark.parametrize("bad, message", [
    (b"\x00" * 5, "malformed record batch: 5 bytes, shorter than the 12-byte header"),
    (encode_batch(0, [b"ab"])[:-1] + b"!", "malformed record batch: record 0 .* LF"),
    (encode_batch(7, [b"ab"]), "malformed record batch: the first offset .* must be 0"),
])
@aio
async def test_a_malformed_sink_batch_ends_the_channel_and_writes_nothing_of_it(
        harness, log, bad, message):
    rs = await client(harness, log, ack_every="100")
    outbound = [Payload(encode_batch(0, records(3))), Payload(bad)]
    with pytest.raises(InvalidError, match=f"log.append.batch: {message}"):
        await wait(rs.request_channel({"topic": "m", "shard": 0}, outbound,
                                      route=ROUTE_APPEND_BATCH, decode=True).collect())
    assert log.end_offsets("m") == {0: 0}  # the 3 good records were not acknowledged
    # the connection goes on
    acks = await wait(rs.request_channel({"topic": "m", "shard": 0},
                                         [Payload(encode_batch(0, [b"ok"]))],
                                         route=ROUTE_APPEND_BATCH, decode=True).collect())
    assert acks == [{"acked": 1}]


@aio
async def test_stage_batch_with_a_retried_partition_commits_exactly_once(harness, log):
    rs = await client(harness, log, ack_every="5")
    recs = records(12)

    async def stage(partition, rows, attempt_rows=None):
        header = {"topic": "e", "shard": 0, "query": "q", "batch": 3, "partition": partition}
        batches = [Payload(encode_batch(0, rows[i:i + 4])) for i in range(0, len(rows), 4)]
        return await wait(rs.request_channel(header, batches, route=ROUTE_STAGE_BATCH,
                                             decode=True).collect())

    assert (await stage(0, recs[:6]))[-1] == {"staged": 6}
    assert (await stage(1, recs[6:]))[-1] == {"staged": 6}
    assert (await stage(1, recs[6:]))[-1] == {"staged": 6}  # a retried task replaces its rows
    assert log.end_offsets("e") == {0: 0}  # staged, not published
    commit = {"query": "q", "batch": 3, "partitions": [0, 1]}
    assert await wait(rs.request_response(commit, route=ROUTE_COMMIT, decode=True)) == \
        {"committed": 12, "duplicate": False}
    assert await wait(rs.request_response(commit, route=ROUTE_COMMIT, decode=True)) == \
        {"committed": 12, "duplicate": True}
    assert [d for _, d in log.read("e", 0)] == recs


@aio
async def test_read_batch_is_pulled_by_request_n_not_read_ahead(harness, tmp_path):
    log = CountingLog(tmp_path / "count.db")
    try:
        log.create_topic("t")
        log.append("t", 0, (b"%04d" % i for i in range(50_000)))
        # batches of 100 bytes: 9 records; SQLite chunks of 100 records
        rs = await client(harness, log, read_chunk="100", batch_bytes="100")
        stream = rs.request_stream({"topic": "t", "shard": 0, "from": 0},
                                   route=ROUTE_READ_BATCH, prefetch=4)
        first = await wait(stream.__anext__())
        assert decode_batch(first.data) == (0, [b"%04d" % i for i in range(9)])
        await turns()
        # 4 batches granted (and a few more as they are consumed): 36 records, one chunk
        assert log.chunks_read == 1
        rest = await wait(stream.collect(take=60))  # 61 batches in all: 549 records
        assert decode_batch(rest[-1].data)[0] == 60 * 9
        await turns()
        assert log.chunks_read <= 8  # not the 500 chunks of the whole shard
    finally:
        log.close()
