"""StreamLogResponder over loopback TCP with our client: every route of the offsets protocol
and of the sinks, the error cases, and durability across a server restart."""

from __future__ import annotations

import functools
import json

import pytest
import pytest_twisted
from streamlog_support import (  # log_fixture: the log fixture
    CountingLog,
    client,
    log_fixture,  # noqa: F401
    records,
    turns,
)
from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted_support import Harness, wait

from rsocket_tx import InvalidError, Payload
from rsocket_tx.apps.streamlog import (
    OFFSET_METADATA_PREFIX,
    OFFSET_MIME,
    ROUTE_ABORT,
    ROUTE_APPEND,
    ROUTE_COMMIT,
    ROUTE_CREATE,
    ROUTE_OFFSETS,
    ROUTE_READ,
    ROUTE_STAGE,
    ROUTE_TOPICS,
    StreamLog,
    StreamLogResponder,
    offset_of,
)
from rsocket_tx.extensions import COMPOSITE_METADATA, decode_composite

aio = pytest_twisted.ensureDeferred
JSON = "application/json"


async def read(rs, topic, shard, start, stop=None, prefetch=256):
    data = {"topic": topic, "shard": shard, "from": start}
    if stop is not None:
        data["to"] = stop
    return await wait(rs.request_stream(data, route=ROUTE_READ, prefetch=prefetch).collect())


@aio
async def test_offsets_and_read_tag_each_record_with_its_offset(harness, log):
    log.create_topic("t", 2)
    log.append("t", 0, records(5))
    log.append("t", 1, records(2))
    rs = await client(harness, log)
    assert await wait(rs.request_response({"topic": "t"}, route=ROUTE_OFFSETS, decode=True)) \
        == {"topic": "t", "shards": {"0": 5, "1": 2}}
    assert await wait(rs.request_response({"topic": "nope"}, route=ROUTE_OFFSETS,
                                          decode=True)) == {"topic": "nope", "shards": {}}
    got = await read(rs, "t", 0, 1, 4)
    assert [p.data for p in got] == records(3, start=1)
    assert [offset_of(p.metadata) for p in got] == [1, 2, 3]
    # the metadata is composite metadata with exactly one entry: the offset, 8 bytes BE
    entries = decode_composite(got[0].metadata)
    assert [(e.mime_type, e.content) for e in entries] == [(OFFSET_MIME, (1).to_bytes(8, "big"))]
    assert got[0].metadata[:-8] == OFFSET_METADATA_PREFIX
    # "to" left out: the end at request time; an empty range completes at once
    assert [offset_of(p.metadata) for p in await read(rs, "t", 1, 0)] == [0, 1]
    assert await read(rs, "t", 0, 5) == []
    assert await read(rs, "t", 0, 2, 2) == []


@aio
async def test_read_streams_many_chunks_in_order_with_small_credit(harness, log):
    log.create_topic("big", 1)
    log.append("big", 0, (b"%d" % i for i in range(10_000)))
    rs = await client(harness, log, read_chunk="333")
    got = await read(rs, "big", 0, 17, 9_999, prefetch=7)
    assert len(got) == 9_982
    assert all(offset_of(p.metadata) == 17 + i and p.data == b"%d" % (17 + i)
               for i, p in enumerate(got))


@pytest.mark.parametrize("request_data, message", [
    ({"topic": "t", "shard": 0, "from": 4}, "from=4 is beyond the end"),
    ({"topic": "t", "shard": 0, "from": 0, "to": 4}, "to=4 is beyond the end"),
    ({"topic": "t", "shard": 0, "from": 2, "to": 1}, "from=2 is after to=1"),
    ({"topic": "t", "shard": 0, "from": -1}, "from must be in 0.."),
    ({"topic": "t", "shard": 1, "from": 0}, "topic 't' has shards 0..0, not 1"),
    ({"topic": "u", "shard": 0, "from": 0}, "no topic 'u'"),
    ({"topic": "t", "shard": "0", "from": 0}, "shard must be an integer"),
    ({"topic": "t", "shard": 0}, "needs 'from'"),
    ({"topic": "t", "shard": 0, "from": 0, "limit": 3}, "unknown field"),
    ([1, 2], "must be a JSON object"),
    ({"topic": "", "shard": 0, "from": 0}, "topic must be 1..255 bytes"),
    ({"topic": "x" * 256, "shard": 0, "from": 0}, "topic must be 1..255 bytes"),
])
@aio
async def test_bad_read_requests_are_invalid(harness, log, request_data, message):
    log.create_topic("t", 1)
    log.append("t", 0, records(3))
    rs = await client(harness, log)
    with pytest.raises(InvalidError, match=message):
        await wait(rs.request_stream(request_data, route=ROUTE_READ).collect())
    # the connection goes on
    assert len(await read(rs, "t", 0, 0)) == 3


@aio
async def test_append_channel_acks_every_transaction(harness, log):
    rs = await client(harness, log, ack_every="4")
    outbound = [Payload(r) for r in records(10)]
    acks = await wait(rs.request_channel({"topic": "new", "shard": 0}, outbound,
                                         route=ROUTE_APPEND, decode=True).collect())
    assert acks == [{"acked": 4}, {"acked": 8}, {"acked": 10}]
    assert log.end_offsets("new") == {0: 10}  # created by the append (auto_create)
    assert [d for _, d in log.read("new", 0)] == records(10)
    # a second channel goes on from the end; a channel with no records acks 0
    acks = await wait(rs.request_channel({"topic": "new", "shard": 0}, [Payload(b"x")],
                                         route=ROUTE_APPEND, decode=True).collect())
    assert acks == [{"acked": 1}]
    assert await wait(rs.request_channel({"topic": "new", "shard": 0}, [], route=ROUTE_APPEND,
                                         decode=True).collect()) == [{"acked": 0}]
    assert log.end_offsets("new") == {0: 11}


@aio
async def test_append_to_unknown_topic_without_auto_create_is_invalid(harness, log):
    rs = await client(harness, log, auto_create="false")
    with pytest.raises(InvalidError, match="no topic 'x'"):
        await wait(rs.request_channel({"topic": "x", "shard": 0}, [Payload(b"r")],
                                      route=ROUTE_APPEND).collect())
    assert log.topics() == {}


@aio
async def test_topics_and_create(harness, log):
    rs = await client(harness, log)
    assert await wait(rs.request_response({}, route=ROUTE_TOPICS, decode=True)) == \
        {"topics": {}}
    assert await wait(rs.request_response({"topic": "a", "shards": 3}, route=ROUTE_CREATE,
                                          decode=True)) == {"topic": "a", "shards": 3}
    assert await wait(rs.request_response({"topic": "a", "shards": 4}, route=ROUTE_CREATE,
                                          decode=True)) == {"topic": "a", "shards": 4}
    with pytest.raises(InvalidError, match="shards cannot be removed"):
        await wait(rs.request_response({"topic": "a", "shards": 2}, route=ROUTE_CREATE))
    with pytest.raises(InvalidError, match="shards must be in 1..4096"):
        await wait(rs.request_response({"topic": "b", "shards": 10**6}, route=ROUTE_CREATE))
    # an empty request payload is {}
    assert await wait(rs.request_response(Payload(b""), route=ROUTE_TOPICS, decode=True)) == \
        {"topics": {"a": 4}}
    assert await wait(rs.request_response({"topic": "a"}, route=ROUTE_OFFSETS, decode=True)) \
        == {"topic": "a", "shards": {"0": 0, "1": 0, "2": 0, "3": 0}}


async def stage(rs, query, batch, partition, rows, topic="out", shard=0):
    header = {"topic": topic, "shard": shard, "query": query, "batch": batch,
              "partition": partition}
    return await wait(rs.request_channel(header, [Payload(r) for r in rows], route=ROUTE_STAGE,
                                         decode=True).collect())


async def commit(rs, query, batch, partitions):
    return await wait(rs.request_response({"query": query, "batch": batch,
                                           "partitions": partitions}, route=ROUTE_COMMIT,
                                          decode=True))


@aio
async def test_stage_commit_is_exactly_once(harness, log):
    rs = await client(harness, log, ack_every="2")
    assert await stage(rs, "q", 0, 1, [b"b1", b"b2", b"b3"]) == \
        [{"staged": 2}, {"staged": 3}]
    assert await stage(rs, "q", 0, 0, [b"a-first-attempt"]) == [{"staged": 1}]
    # a retried task replaces what its failed attempt staged
    assert await stage(rs, "q", 0, 0, [b"a1"]) == [{"staged": 1}]
    assert log.end_offsets("out") == {0: 0}  # nothing published before the commit
    assert await commit(rs, "q", 0, [1, 0]) == {"committed": 4, "duplicate": False}
    # partitions in order, rows in staging order
    assert [d for _, d in log.read("out", 0)] == [b"a1", b"b1", b"b2", b"b3"]
    # a replayed batch (the query restarted before it recorded its commit) changes nothing
    assert await stage(rs, "q", 0, 0, [b"a1"]) == [{"staged": 1}]
    assert await commit(rs, "q", 0, [0]) == {"committed": 4, "duplicate": True}
    assert log.end_offsets("out") == {0: 4}
    assert log.staged("q", 0) == {}
    # an empty partition is staged too, and commits 0 rows
    assert await stage(rs, "q", 1, 0, []) == [{"staged": 0}]
    assert await commit(rs, "q", 1, [0]) == {"committed": 0, "duplicate": False}


@aio
async def test_commit_of_a_partition_not_staged_is_invalid_and_changes_nothing(harness, log):
    rs = await client(harness, log)
    await stage(rs, "q", 7, 0, [b"x"])
    with pytest.raises(InvalidError, match=r"partition\(s\) 1 not staged"):
        await commit(rs, "q", 7, [0, 1])
    assert log.end_offsets("out") == {0: 0}
    assert log.staged("q", 7) == {0: 1}
    with pytest.raises(InvalidError, match="partitions must be a list"):
        await commit(rs, "q", 7, 0)
    with pytest.raises(InvalidError, match="listed twice"):
        await commit(rs, "q", 7, [0, 0])
    with pytest.raises(InvalidError, match="query must be 1..255 bytes"):
        await commit(rs, "", 7, [0])


@aio
async def test_abort_drops_staged_rows(harness, log):
    rs = await client(harness, log)
    await stage(rs, "q", 3, 0, [b"x", b"y"])
    await stage(rs, "q", 3, 1, [b"z"])
    assert await wait(rs.request_response({"query": "q", "batch": 3}, route=ROUTE_ABORT,
                                          decode=True)) == {"dropped": 3}
    assert log.staged("q", 3) == {}
    with pytest.raises(InvalidError, match="not staged"):
        await commit(rs, "q", 3, [0])
    assert await wait(rs.request_response({"query": "q", "batch": 3}, route=ROUTE_ABORT,
                                          decode=True)) == {"dropped": 0}


@aio
async def test_a_superseded_stage_attempt_fails(harness, log):
    rs = await client(harness, log, ack_every="1")
    gate = Deferred()

    async def slow():
        yield Payload(b"old-1")
        await gate
        yield Payload(b"old-2")

    header = {"topic": "out", "shard": 0, "query": "q", "batch": 0, "partition": 0}
    old = rs.request_channel(header, slow(), route=ROUTE_STAGE, decode=True)
    first = await wait(old.__anext__())
    assert first == {"staged": 1}
    assert await stage(rs, "q", 0, 0, [b"new"]) == [{"staged": 1}]
    reactor.callLater(0, gate.callback, None)
    with pytest.raises(InvalidError, match="replaced by a newer attempt"):
        await wait(old.collect())
    assert await commit(rs, "q", 0, [0]) == {"committed": 1, "duplicate": False}
    assert [d for _, d in log.read("out", 0)] == [b"new"]


@aio
async def test_the_log_survives_a_server_restart(harness, tmp_path):
    path = str(tmp_path / "durable.db")
    log = StreamLog(path)
    first = Harness()
    rs = await client(first, log)
    await wait(rs.request_channel({"topic": "d", "shard": 0}, [Payload(r) for r in records(5)],
                                  route=ROUTE_APPEND).collect())
    await stage(rs, "q", 0, 0, [b"staged"])
    await first.cleanup()
    log.close()
    # a new server on a new StreamLog of the same file
    log = StreamLog(path)
    try:
        rs = await client(harness, log)
        assert await wait(rs.request_response({"topic": "d"}, route=ROUTE_OFFSETS,
                                              decode=True)) == {"topic": "d", "shards": {"0": 5}}
        assert [p.data for p in await read(rs, "d", 0, 0)] == records(5)
        assert await commit(rs, "q", 0, [0]) == {"committed": 1, "duplicate": False}
        assert [p.data for p in await read(rs, "out", 0, 0)] == [b"staged"]
    finally:
        log.close()


@aio
async def test_path_setting_shares_one_log_per_file(harness, tmp_path):
    path = str(tmp_path / "shared.db")
    port = await harness.serve(functools.partial(StreamLogResponder, path=path))
    rs = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                               data_mime_type=JSON)
    await wait(rs.request_channel({"topic": "s", "shard": 0}, [Payload(b"r")],
                                  route=ROUTE_APPEND).collect())
    shared = StreamLog.shared(path)
    try:
        assert StreamLogResponder(path=path).stream_log is shared
        assert shared.end_offsets("s") == {0: 1}
    finally:
        shared.close()


@aio
async def test_read_is_pulled_by_credit_not_read_ahead(harness, tmp_path):
    log = CountingLog(tmp_path / "count.db")
    try:
        log.create_topic("t")
        log.append("t", 0, (b"%d" % i for i in range(50_000)))
        rs = await client(harness, log, read_chunk="100")
        stream = rs.request_stream({"topic": "t", "shard": 0, "from": 0}, route=ROUTE_READ,
                                   prefetch=8)
        first = [await wait(stream.__anext__()) for _ in range(3)]
        assert [offset_of(p.metadata) for p in first] == [0, 1, 2]
        await turns()
        # 8 granted (+4 after half the window was consumed): one chunk of 100 covers it all
        assert log.chunks_read == 1
        rest = await wait(stream.collect(take=400))
        assert offset_of(rest[-1].metadata) == 402
        await turns()
        assert log.chunks_read <= 6  # not the 500 chunks of the whole shard
    finally:
        log.close()


async def failing_channel(rs, route, header, first, then):
    """A channel whose requester sends ``first``, waits for the first ack, sends ``then`` and
    dies (ERROR to the responder): a Spark task failing mid-batch. Returns the acks seen."""
    acked = Deferred()

    async def outbound():
        for r in first:
            yield Payload(r)
        await acked
        for r in then:
            yield Payload(r)
        raise RuntimeError("the task died")

    acks = []
    stream = rs.request_channel(header, outbound(), route=route, decode=True)
    with pytest.raises(Exception, match="the task died|closed|cancel"):
        async for ack in stream:
            acks.append(ack)
            if not acked.called:
                acked.callback(None)
    await turns()
    return acks


@aio
async def test_a_failed_append_channel_keeps_only_acknowledged_transactions(harness, log):
    rs = await client(harness, log, ack_every="3")
    acks = await failing_channel(rs, ROUTE_APPEND, {"topic": "t", "shard": 0}, records(3),
                                 records(2, start=3))
    assert acks == [{"acked": 3}]
    # at-least-once: the acknowledged transaction is in the log; the rest (never acked) is not
    assert log.end_offsets("t") == {0: 3}
    assert [d for _, d in log.read("t", 0)] == records(3)


@aio
async def test_a_failed_stage_attempt_is_replaced_by_the_retry(harness, log):
    rs = await client(harness, log, ack_every="2")
    header = {"topic": "out", "shard": 0, "query": "q", "batch": 4, "partition": 0}
    acks = await failing_channel(rs, ROUTE_STAGE, header, [b"partial-1", b"partial-2"],
                                 [b"partial-3"])
    assert acks == [{"staged": 2}]
    assert log.staged("q", 4) == {0: 2}  # the first transaction of the failed attempt
    assert await stage(rs, "q", 4, 0, [b"retry-1", b"retry-2", b"retry-3"], topic="out") == \
        [{"staged": 2}, {"staged": 3}]
    assert await commit(rs, "q", 4, [0]) == {"committed": 3, "duplicate": False}
    assert [d for _, d in log.read("out", 0)] == [b"retry-1", b"retry-2", b"retry-3"]


class Guarded(StreamLogResponder):
    from rsocket_tx.authentication import BearerAuthenticator as _Bearer

    authenticator = _Bearer({"token": "reader"})


@aio
async def test_reads_honour_the_authenticator(harness, log):
    from rsocket_tx import RejectedError
    from rsocket_tx.extensions import BearerAuth

    log.create_topic("t")
    log.append("t", 0, records(3))
    port = await harness.serve(functools.partial(Guarded, log=log))
    rs = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                               data_mime_type=JSON)
    with pytest.raises(RejectedError, match="authentication required"):
        await read(rs, "t", 0, 0)
    got = await wait(rs.request_stream({"topic": "t", "shard": 0, "from": 1}, route=ROUTE_READ,
                                       auth=BearerAuth("token")).collect())
    assert [(offset_of(p.metadata), p.data) for p in got] == [(1, records(1, 1)[0]),
                                                              (2, records(1, 2)[0])]


@aio
async def test_json_as_bytes_and_cbor_connections(harness, log):
    import cbor2

    log.create_topic("t")
    log.append("t", 0, [b"r0"])
    port = await harness.serve(functools.partial(StreamLogResponder, log=log))
    # octet-stream data: the request is JSON bytes, the response JSON bytes
    raw = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA)
    reply = await wait(raw.request_response(b'{"topic": "t"}', route=ROUTE_OFFSETS))
    assert json.loads(reply.data) == {"topic": "t", "shards": {"0": 1}}
    with pytest.raises(InvalidError, match="not JSON"):
        await wait(raw.request_response(b"{nope", route=ROUTE_OFFSETS))
    got = await wait(raw.request_stream(b'{"topic":"t","shard":0,"from":0}',
                                        route=ROUTE_READ).collect())
    assert [p.data for p in got] == [b"r0"]
    # CBOR both ways
    cbor = await harness.connect(port, metadata_mime_type=COMPOSITE_METADATA,
                                 data_mime_type="application/cbor")
    reply = await wait(cbor.request_response({"topic": "t"}, route=ROUTE_OFFSETS))
    assert cbor2.loads(reply.data) == {"topic": "t", "shards": {"0": 1}}


@aio
async def test_a_read_range_is_fixed_at_request_time(harness, log):
    log.create_topic("t")
    log.append("t", 0, records(3))
    rs = await client(harness, log)
    stream = rs.request_stream({"topic": "t", "shard": 0, "from": 0}, route=ROUTE_READ,
                               prefetch=1)
    first = await wait(stream.__anext__())
    log.append("t", 0, records(2, start=3))  # appended while the stream is open
    rest = await wait(stream.collect())
    assert [p.data for p in [first, *rest]] == records(3)
    assert len(await read(rs, "t", 0, 0)) == 5


@aio
async def test_unknown_route_names_the_route(harness, log):
    from rsocket_tx import RejectedError

    rs = await client(harness, log)
    with pytest.raises(RejectedError, match="no route 'log.nope'"):
        await wait(rs.request_response({}, route="log.nope"))
    with pytest.raises(RejectedError, match="no route 'log.nope'"):
        await wait(rs.request_stream({}, route="log.nope").collect())
