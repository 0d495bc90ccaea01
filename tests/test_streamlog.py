"""rsocket_tx.apps.streamlog.StreamLog: the durable log itself (no network)."""

from __future__ import annotations

import os
import sqlite3
import threading

import pytest

from rsocket_tx.apps.streamlog import (
    MAX_SHARDS,
    OFFSET_METADATA_PREFIX,
    OFFSET_MIME,
    ROUTES,
    OffsetRangeError,
    StageError,
    StreamLog,
    StreamLogError,
    StreamLogResponder,
    UnknownTopicError,
    offset_of,
)


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "log.db")


@pytest.fixture
def log(path):
    log = StreamLog(path)
    yield log
    log.close()


def test_offset_metadata_is_one_composite_entry_of_the_offset_mime():
    # composite metadata, custom MIME type: length-1 (no high bit), the name, 24-bit length
    assert OFFSET_MIME == "application/x.rsocket-tx.offset"
    assert OFFSET_METADATA_PREFIX == bytes([len(OFFSET_MIME) - 1]) + OFFSET_MIME.encode() + \
        b"\x00\x00\x08"
    assert offset_of(OFFSET_METADATA_PREFIX + (2**40).to_bytes(8, "big")) == 2**40
    assert offset_of(OFFSET_METADATA_PREFIX + b"\x00" * 7) is None
    assert offset_of(b"x" + OFFSET_METADATA_PREFIX[1:] + bytes(8)) is None
    assert offset_of(None) is None
    assert set(ROUTES) == {"log.offsets", "log.read", "log.append", "log.stage", "log.commit",
                           "log.abort", "log.topics", "log.create", "log.read.batch",
                           "log.append.batch", "log.stage.batch"}


def test_append_read_and_end_offsets(log):
    assert log.topics() == {} and log.end_offsets("t") == {}
    assert log.create_topic("t", 2) == 2
    assert log.end_offsets("t") == {0: 0, 1: 0}
    assert log.append("t", 0, [b"a", b"b", bytearray(b"c")]) == (0, 3)
    assert log.append("t", 0, iter([b"d"])) == (3, 4)
    assert log.append("t", 1, []) == (0, 0)
    assert log.append("t", 1, [memoryview(b"x")]) == (0, 1)
    assert log.end_offsets("t") == {0: 4, 1: 1}
    assert log.end_offset("t", 0) == 4
    assert list(log.read("t", 0)) == [(0, b"a"), (1, b"b"), (2, b"c"), (3, b"d")]
    assert list(log.read("t", 0, 1, 3)) == [(1, b"b"), (2, b"c")]
    assert list(log.read("t", 0, 4)) == []
    assert list(log.read("t", 1)) == [(0, b"x")]
    # chunks of 3: the same records, each chunk one query
    assert [len(c) for c in log.read_chunks("t", 0, 0, 4, chunk=3)] == [3, 1]
    assert [d for _, d in log.read("t", 0, chunk=1)] == [b"a", b"b", b"c", b"d"]
    assert log.topics() == {"t": 2}
    assert log.shards("t") == 2 and log.shards("u") is None


def test_read_of_a_large_shard_in_chunks(log):
    log.create_topic("big")
    log.append("big", 0, (b"%d" % i for i in range(20_000)))
    got = list(log.read("big", 0, 5, 19_990, chunk=4096))
    assert len(got) == 19_985
    assert all(off == 5 + i and data == b"%d" % off for i, (off, data) in enumerate(got))


def test_shards_of_topics_do_not_mix(log):
    log.create_topic("a", 2)
    log.create_topic("b", 1)
    for n in range(3):
        log.append("a", 0, [b"a0-%d" % n])
        log.append("b", 0, [b"b0-%d" % n])
        log.append("a", 1, [b"a1-%d" % n])
    assert [d for _, d in log.read("a", 1)] == [b"a1-0", b"a1-1", b"a1-2"]
    assert [d for _, d in log.read("b", 0)] == [b"b0-0", b"b0-1", b"b0-2"]


@pytest.mark.parametrize(("start", "stop", "message"), [
    (4, None, "from=4 is beyond the end of shard 0 of 't' \\(3\\)"),
    (0, 4, "to=4 is beyond the end"),
    (2, 1, "from=2 is after to=1"),
])
def test_bad_ranges_are_refused_at_once(log, start, stop, message):
    log.create_topic("t")
    log.append("t", 0, [b"1", b"2", b"3"])
    with pytest.raises(OffsetRangeError, match=message):
        log.read("t", 0, start, stop)  # not only when iterated


def test_unknown_topics_and_shards(log):
    with pytest.raises(UnknownTopicError, match="no topic 'x'"):
        log.append("x", 0, [b"r"])
    log.create_topic("x", 2)
    with pytest.raises(UnknownTopicError, match="topic 'x' has shards 0..1, not 2"):
        log.append("x", 2, [b"r"])
    with pytest.raises(UnknownTopicError):
        log.read("x", 5)
    with pytest.raises(UnknownTopicError):
        log.end_offset("y", 0)


@pytest.mark.parametrize(("topic", "message"), [
    ("", "1..255 bytes"), ("é" * 128, "1..255 bytes"), ("a\nb", "control characters"),
    (7, "topic must be a string"),
])
def test_bad_topic_names(log, topic, message):
    with pytest.raises(StreamLogError, match=message):
        log.create_topic(topic)


def test_topic_growth_and_limits(log):
    assert log.create_topic("t", 1) == 1
    log.append("t", 0, [b"kept"])
    assert log.create_topic("t", 3) == 3  # grows; existing records stay
    assert log.end_offsets("t") == {0: 1, 1: 0, 2: 0}
    assert log.create_topic("t", 3) == 3
    with pytest.raises(StreamLogError, match="shards cannot be removed"):
        log.create_topic("t", 2)
    with pytest.raises(StreamLogError, match=f"shards must be in 1..{MAX_SHARDS}"):
        log.create_topic("u", MAX_SHARDS + 1)
    with pytest.raises(StreamLogError, match="shards must be an integer"):
        log.create_topic("u", True)


def test_a_failed_append_writes_nothing(log):
    log.create_topic("t")
    log.append("t", 0, [b"a"])
    with pytest.raises(TypeError, match="records must be bytes, got str"):
        log.append("t", 0, [b"b", "not bytes", b"c"])
    assert log.end_offsets("t") == {0: 1}
    assert log.append("t", 0, [b"b"]) == (1, 2)
    assert [d for _, d in log.read("t", 0)] == [b"a", b"b"]


def test_the_log_survives_a_restart(path):
    log = StreamLog(path)
    log.create_topic("t", 2)
    log.append("t", 1, [b"x", b"y"])
    log.stage(("q", 0, 0), "t", 0, [b"staged"])
    log.close()
    with pytest.raises(StreamLogError, match="closed"):
        log.topics()
    again = StreamLog(path)
    try:
        assert again.topics() == {"t": 2}
        assert again.end_offsets("t") == {0: 0, 1: 2}
        assert list(again.read("t", 1)) == [(0, b"x"), (1, b"y")]
        assert again.staged("q", 0) == {0: 1}
        assert again.commit("q", 0, [0]) == (1, False)
        assert again.append("t", 1, [b"z"]) == (2, 3)
    finally:
        again.close()
    third = StreamLog(path)
    try:
        assert third.commit("q", 0, [0]) == (1, True)
        assert [d for _, d in third.read("t", 0)] == [b"staged"]
        assert third.end_offsets("t") == {0: 1, 1: 3}
    finally:
        third.close()
    # WAL mode is a property of the file
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_two_logs_on_one_file_interleave_with_contiguous_offsets(path):
    # what two processes sharing the file see: offsets are taken inside the transaction
    one, two = StreamLog(path), StreamLog(path)
    try:
        one.create_topic("t")
        assert one.append("t", 0, [b"1a", b"1b"]) == (0, 2)
        assert two.append("t", 0, [b"2a"]) == (2, 3)
        assert one.append("t", 0, [b"1c"]) == (3, 4)
        assert [d for _, d in two.read("t", 0)] == [b"1a", b"1b", b"2a", b"1c"]
    finally:
        one.close()
        two.close()


def test_appends_from_threads(log):
    log.create_topic("t")
    errors = []

    def writer(n):
        try:
            for i in range(50):
                log.append("t", 0, [b"%d-%d" % (n, i)] * 3)
        except Exception as e:  # pragma: no cover - shown by the assert below
            errors.append(e)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    records = [d for _, d in log.read("t", 0)]
    assert len(records) == 600
    # each append's 3 records are adjacent (one transaction)
    assert all(records[i] == records[i + 1] == records[i + 2] for i in range(0, 600, 3))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_opens_its_own_connection(log):
    log.create_topic("t")
    log.append("t", 0, [b"parent"])
    pid = os.fork()
    if pid == 0:  # the child: must not use the parent's connection
        code = 1
        try:
            log.append("t", 0, [b"child"])
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert [d for _, d in log.read("t", 0)] == [b"parent", b"child"]


def test_shared_is_one_log_per_file(path, tmp_path):
    shared = StreamLog.shared(path)
    try:
        assert StreamLog.shared(os.path.join(os.path.dirname(path), ".", "log.db")) is shared
        other = StreamLog.shared(str(tmp_path / "other.db"))
        assert other is not shared
        other.close()
    finally:
        shared.close()
    reopened = StreamLog.shared(path)  # a closed one is reopened
    assert reopened is not shared
    reopened.close()


def test_context_manager_and_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with StreamLog("rel.db") as log:
        assert log.path == str(tmp_path / "rel.db")
        log.create_topic("t")
    with pytest.raises(StreamLogError, match="closed"):
        log.append("t", 0, [b"x"])


def test_open_errors(tmp_path):
    with pytest.raises(StreamLogError, match="cannot open the stream log"):
        StreamLog(str(tmp_path / "no-dir" / "x.db"))
    not_a_db = tmp_path / "junk.db"
    not_a_db.write_bytes(b"this is not SQLite" * 100)
    with pytest.raises(StreamLogError, match="cannot open the stream log"):
        StreamLog(str(not_a_db))
    with pytest.raises(StreamLogError, match="synchronous must be one of"):
        StreamLog(str(tmp_path / "x.db"), synchronous="sometimes")
    with pytest.raises(StreamLogError, match="path must not be empty"):
        StreamLog("")


# -- staging ------------------------------------------------------------------------------------


def test_stage_then_commit_publishes_once_in_partition_order(log):
    log.create_topic("out", 2)
    assert log.stage(("q", 5, 2), "out", 0, [b"p2-a", b"p2-b"]) == 2
    assert log.stage(("q", 5, 0), "out", 0, [b"p0-a"]) == 1
    assert log.stage(("q", 5, 1), "out", 1, [b"p1-a"]) == 1
    assert log.staged("q", 5) == {0: 1, 1: 1, 2: 2}
    assert log.end_offsets("out") == {0: 0, 1: 0}
    assert log.committed("q", 5) is None
    assert log.commit("q", 5, [2, 0, 1]) == (4, False)
    assert [d for _, d in log.read("out", 0)] == [b"p0-a", b"p2-a", b"p2-b"]
    assert [d for _, d in log.read("out", 1)] == [b"p1-a"]
    assert log.committed("q", 5) == 4
    assert log.staged("q", 5) == {}
    # idempotent: a second commit (even after the batch was staged again) publishes nothing
    log.stage(("q", 5, 0), "out", 0, [b"again"])
    assert log.commit("q", 5, [0]) == (4, True)
    assert log.staged("q", 5) == {}
    assert log.end_offsets("out") == {0: 3, 1: 1}
    # another query with the same batch number is a different batch
    log.stage(("other", 5, 0), "out", 0, [b"o"])
    assert log.commit("other", 5, [0]) == (1, False)


def test_restaging_replaces_and_old_attempts_stop(log):
    log.create_topic("out")
    old = log.open_stage(("q", 0, 0), "out", 0)
    assert log.stage(("q", 0, 0), "out", 0, [b"1", b"2"], stage_id=old) == 2
    assert log.stage(("q", 0, 0), "out", 0, [b"3"], stage_id=old) == 3
    new = log.open_stage(("q", 0, 0), "out", 0)
    assert log.staged("q", 0) == {0: 0}
    with pytest.raises(StageError, match="replaced by a newer attempt"):
        log.stage(("q", 0, 0), "out", 0, [b"late"], stage_id=old)
    with pytest.raises(StageError, match="belongs to"):
        log.stage(("q", 0, 1), "out", 0, [b"x"], stage_id=new)
    assert log.stage(("q", 0, 0), "out", 0, [b"new"], stage_id=new) == 1
    # without stage_id: replace
    assert log.stage(("q", 0, 0), "out", 0, [b"newer"]) == 1
    assert log.commit("q", 0, [0]) == (1, False)
    assert [d for _, d in log.read("out", 0)] == [b"newer"]


def test_commit_drops_unlisted_partitions_and_refuses_missing_ones(log):
    log.create_topic("out")
    log.stage(("q", 1, 0), "out", 0, [b"ok"])
    log.stage(("q", 1, 9), "out", 0, [b"orphan of a failed task"])
    with pytest.raises(StageError, match=r"partition\(s\) 1, 2 not staged"):
        log.commit("q", 1, [0, 1, 2])
    assert log.staged("q", 1) == {0: 1, 9: 1}  # nothing changed
    assert log.commit("q", 1, [0]) == (1, False)
    assert log.staged("q", 1) == {}
    assert [d for _, d in log.read("out", 0)] == [b"ok"]


def test_a_commit_that_fails_midway_publishes_nothing(log, monkeypatch):
    log.create_topic("out")
    log.stage(("q", 0, 0), "out", 0, [b"a"])
    log.stage(("q", 0, 1), "out", 0, [b"b"])
    real = StreamLog._move
    calls = []

    def failing(self, db, sid, topic, shard):
        calls.append(sid)
        if len(calls) == 2:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, db, sid, topic, shard)

    monkeypatch.setattr(StreamLog, "_move", failing)
    with pytest.raises(StreamLogError, match="disk I/O error"):
        log.commit("q", 0, [0, 1])
    monkeypatch.setattr(StreamLog, "_move", real)
    assert log.end_offsets("out") == {0: 0}
    assert log.staged("q", 0) == {0: 1, 1: 1}
    assert log.committed("q", 0) is None
    assert log.commit("q", 0, [0, 1]) == (2, False)


def table_rows(path: str, table: str) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
    finally:
        db.close()


def test_a_commit_points_at_the_staged_rows_without_copying_them(log, path):
    """The commit writes one segment per partition; the rows stay where they were staged and
    every read (any range, any chunk size) finds them between the appended records."""
    log.create_topic("out")
    log.append("out", 0, [b"a0", b"a1"])
    log.stage(("q", 0, 0), "out", 0, [b"s%d" % i for i in range(5)])
    log.stage(("q", 0, 1), "out", 0, [b"t%d" % i for i in range(3)])
    assert table_rows(path, "stage_records") == 8
    assert log.commit("q", 0, [0, 1]) == (8, False)
    assert table_rows(path, "records") == 2  # nothing copied into the appended records
    assert table_rows(path, "stage_records") == 8
    assert table_rows(path, "segments") == 2
    log.append("out", 0, [b"a2"])
    everything = [b"a0", b"a1", *(b"s%d" % i for i in range(5)), *(b"t%d" % i for i in range(3)),
                  b"a2"]
    assert [(o, d) for o, d in log.read("out", 0)] == list(enumerate(everything))
    for start in range(len(everything)):
        for stop in range(start, len(everything) + 1):
            for chunk in (1, 2, 3, 100):
                got = [d for rows in log.read_chunks("out", 0, start, stop, chunk=chunk)
                       for (d,) in rows]
                assert got == everything[start:stop], (start, stop, chunk)
    # a duplicate commit and an abort never touch published rows
    log.stage(("q", 0, 0), "out", 0, [b"again"])
    assert log.commit("q", 0, [0]) == (8, True)
    assert log.abort("q", 0) == 0
    assert table_rows(path, "stage_records") == 8
    assert [d for _, d in log.read("out", 0)] == everything


def test_published_rows_survive_a_restart(path):
    with StreamLog(path) as log:
        log.create_topic("out")
        log.stage(("q", 0, 0), "out", 0, [b"x", b"y"])
        log.commit("q", 0, [0])
    with StreamLog(path) as log:
        assert [d for _, d in log.read("out", 0)] == [b"x", b"y"]
        assert log.commit("q", 0, [0]) == (2, True)


def test_a_format_1_file_is_upgraded_with_its_staged_rows(path):
    """Format 1 kept staged rows in staged_rows(stage, data): they move to stage_records and
    a commit after the upgrade publishes them in the order staged."""
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE streamlog_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO streamlog_meta VALUES ('format', '1');
        CREATE TABLE topics(name TEXT PRIMARY KEY, shards INTEGER NOT NULL);
        INSERT INTO topics VALUES ('out', 1);
        CREATE TABLE shards(id INTEGER PRIMARY KEY, topic TEXT NOT NULL, shard INTEGER NOT NULL,
            next_offset INTEGER NOT NULL DEFAULT 0, UNIQUE(topic, shard));
        INSERT INTO shards VALUES (1, 'out', 0, 1);
        CREATE TABLE records(key INTEGER PRIMARY KEY, data BLOB NOT NULL);
        INSERT INTO records VALUES (1 << 40, X'6130');
        CREATE TABLE stages(id INTEGER PRIMARY KEY AUTOINCREMENT, query TEXT NOT NULL,
            batch INTEGER NOT NULL, partition INTEGER NOT NULL, topic TEXT NOT NULL,
            shard INTEGER NOT NULL, rows INTEGER NOT NULL DEFAULT 0,
            UNIQUE(query, batch, partition));
        INSERT INTO stages VALUES (1, 'q', 0, 0, 'out', 0, 2), (2, 'q', 0, 1, 'out', 0, 1);
        CREATE TABLE staged_rows(stage INTEGER NOT NULL, data BLOB NOT NULL);
        INSERT INTO staged_rows VALUES (1, X'70'), (2, X'72'), (1, X'71');
        CREATE TABLE commits(query TEXT NOT NULL, batch INTEGER NOT NULL, rows INTEGER NOT NULL,
            PRIMARY KEY(query, batch));
    """)
    db.close()
    with StreamLog(path) as log:
        assert log.commit("q", 0, [0, 1]) == (3, False)
        assert [d for _, d in log.read("out", 0)] == [b"a0", b"p", b"q", b"r"]
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT value FROM streamlog_meta").fetchone() == ("2",)
        assert db.execute("SELECT name FROM sqlite_master WHERE name='staged_rows'") \
            .fetchone() is None
    finally:
        db.close()


def test_abort(log):
    log.create_topic("out")
    log.stage(("q", 2, 0), "out", 0, [b"a", b"b"])
    log.stage(("q", 2, 1), "out", 0, [b"c"])
    log.stage(("q", 3, 0), "out", 0, [b"other batch"])
    assert log.abort("q", 2) == 3
    assert log.abort("q", 2) == 0
    assert log.staged("q", 2) == {} and log.staged("q", 3) == {0: 1}
    with pytest.raises(StageError):
        log.commit("q", 2, [0])
    assert log.end_offsets("out") == {0: 0}


@pytest.mark.parametrize(("key", "message"), [
    (("q", 0), "a stage key is a tuple"),
    (("", 0, 0), "query must be 1..255 bytes"),
    (("q", -1, 0), "batch must be in 0.."),
    (("q", 0, "0"), "partition must be an integer"),
])
def test_bad_stage_keys(log, key, message):
    log.create_topic("out")
    with pytest.raises(StreamLogError, match=message):
        log.stage(key, "out", 0, [b"x"])


def test_bad_commit_arguments(log):
    with pytest.raises(StreamLogError, match="partitions must be a list"):
        log.commit("q", 0, "01")
    with pytest.raises(StreamLogError, match="listed twice"):
        log.commit("q", 0, [1, 1])
    with pytest.raises(StreamLogError, match="partition must be an integer"):
        log.commit("q", 0, [1.5])


def test_responder_settings_are_checked(log, path):
    with pytest.raises(ValueError, match="either log= .* or path="):
        StreamLogResponder()
    with pytest.raises(ValueError, match="not both"):
        StreamLogResponder(log, path=path)
    with pytest.raises(ValueError, match="ack_every: expected an integer in 1..1000000"):
        StreamLogResponder(log, ack_every="0")
    with pytest.raises(ValueError, match="auto_create: expected true or false"):
        StreamLogResponder(log, auto_create="maybe")
    with pytest.raises(ValueError, match="log must be a StreamLog"):
        StreamLogResponder(path)
    responder = StreamLogResponder(log, ack_every="1_000", auto_create="no", default_shards="4")
    assert (responder.ack_every, responder.auto_create, responder.default_shards) == \
        (1000, False, 4)
