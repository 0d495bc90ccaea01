"""A durable append-only log per topic and shard, and the responder that serves it.

:class:`StreamLog` keeps records (bytes) in SQLite (write-ahead log, WAL): each topic has
shards ``0..n-1``; the records of one shard have contiguous offsets from 0. It survives a
restart of the process (a new :class:`StreamLog` on the same file sees everything appended and
committed before), appends a batch in one transaction, reads in chunks, and stages rows for
exactly-once sinks (stage per ``(query, batch, partition)``, then commit the batch once:
a repeated commit changes nothing).

:class:`StreamLogResponder` serves a StreamLog over RSocket: routed requests (composite
metadata routing, ``Extensions/Routing.md``), JSON request data (CBOR works the same way),
the *offsets protocol* a replaying reader (e.g. the Spark data source ``pyspark_rsocket``) needs:

====================  ================  ========================================================
route                 interaction       request -> response
====================  ================  ========================================================
``log.offsets``       request-response  ``{"topic": t}`` -> ``{"topic": t, "shards": {"0": end0,
                                        ...}}``: the next offset of each shard (``{}`` if the
                                        topic is unknown)
``log.read``          request-stream    ``{"topic": t, "shard": n, "from": a, "to": b}`` (``to``
                                        optional: the end at request time) -> the records with
                                        offsets ``a .. b-1`` in order, then complete; each
                                        PAYLOAD's metadata is composite metadata with one entry
                                        :data:`OFFSET_MIME` holding the offset (8 bytes, big
                                        endian). ``a > end``, ``b > end`` or ``a > b``:
                                        ERROR[INVALID]
``log.append``        request-channel   first payload ``{"topic": t, "shard": n}``, then one
                                        record per payload -> ``{"acked": total}`` after each
                                        transaction (every ``ack_every`` records and at the end
                                        of input); completes after the last (at-least-once sink)
``log.stage``         request-channel   first payload ``{"topic", "shard", "query", "batch",
                                        "partition"}``, then records -> ``{"staged": total}``
                                        likewise; replaces rows staged earlier for the same
                                        ``(query, batch, partition)`` (a retried task)
``log.commit``        request-response  ``{"query": q, "batch": b, "partitions": [p, ...]}`` ->
                                        ``{"committed": rows, "duplicate": bool}``: publishes
                                        the staged rows in one transaction, once per ``(q, b)``;
                                        a partition not staged: ERROR[INVALID]
``log.abort``         request-response  ``{"query": q, "batch": b}`` -> ``{"dropped": rows}``
``log.read.batch``    request-stream    as ``log.read`` (and optional ``"max_bytes": m``) -> the
                                        same records, many per PAYLOAD: each PAYLOAD's data is
                                        one *record batch* (below), no metadata; batches in
                                        offset order, each starting where the last ended
``log.append.batch``  request-channel   as ``log.append``, but every payload after the first is
                                        one record batch (its first offset field 0) -> the same
                                        ``{"acked": total}`` acknowledgements (records, not
                                        payloads)
``log.stage.batch``   request-channel   as ``log.stage``, with record batches ->
                                        ``{"staged": total}``
``log.topics``        request-response  ``{}`` -> ``{"topics": {"t": shards, ...}}``
``log.create``        request-response  ``{"topic": t, "shards": n}`` -> ``{"topic": t,
                                        "shards": n}`` (creates, or adds shards)
====================  ================  ========================================================

Record batches (the ``*.batch`` routes) carry several records per PAYLOAD, so that the
per-frame cost of RSocket is paid once per batch, not once per record. A record batch is::

    first offset   8 bytes, unsigned, big endian (log.read.batch: the offset of record 0;
                   a sink batch: 0)
    count n        4 bytes, unsigned, big endian, >= 1
    lengths        n x 4 bytes, unsigned, big endian: the byte length of each record
    records        n x (record bytes, then one LF byte 0x0A)

and nothing after: its size is exactly ``12 + 5 n + sum(lengths)``. The record i has offset
``first + i``. The lengths make it exact for any bytes (a record may contain LF); the LF after
each record makes a batch of JSON records one newline-delimited JSON text a decoder reads in
one call (:func:`encode_batch`, :func:`decode_batch`). ``log.read.batch`` fills a batch while
it stays within ``min(max_bytes, batch_bytes)`` bytes (responder setting ``batch_bytes``,
default :data:`DEFAULT_BATCH_BYTES`; a record bigger than that goes alone in its batch); the
requester's REQUEST_N counts batches. A malformed batch on a sink channel ends it with
ERROR[INVALID] "route: malformed record batch: reason", and nothing of that transaction is
written. The one-record-per-payload routes stay as they are.

Serve it in an application with ``serve("tcp:7878", functools.partial(StreamLogResponder,
log=log))``, or with twistd::

    twistd -n rsocket --listen tcp:7878 --responder rsocket_tx.apps.streamlog:StreamLogResponder \\
        --responder-arg path=/var/lib/rsocket/log.db

Applications publish in-process with :meth:`StreamLog.append` (one :class:`StreamLog` per file
and process: :meth:`StreamLog.shared`).

Exactly-once sinks stage their rows apart from the published records (table
``stage_records``, keyed by stage and row number); ``log.commit`` does not copy them: it writes
one *segment* per partition, saying that the shard's next offsets are that stage's rows, and
readers follow it. A commit costs the same for any number of rows.

Records are bytes: a topic holds whatever its writers put in it. JSON or CBOR records hold one
row each; an Arrow topic's records are Arrow IPC streams
(:mod:`rsocket_tx.extensions.arrow`, ``application/vnd.apache.arrow.stream``) of one or more
record batches each, stored and served as they came (no conversion): there an offset numbers
a record of many rows, and ``log.read`` sends each as one PAYLOAD (fragmented by RSocket when
it is larger than a frame).

Durability: WAL with ``synchronous=NORMAL`` (default) keeps every committed transaction across
a crash of the process; ``synchronous="full"`` also across a power loss (slower appends).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import struct
import threading
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from itertools import accumulate, count, repeat
from operator import add

from ..codecs import BYTES, TEXT, codec_for
from ..core.errors import InvalidError
from ..core.payload import Payload
from ..extensions.composite import encode_composite
from ..responder import Responder
from ..routing import Payloads, Request, route

__all__ = [
    "StreamLog",
    "StreamLogResponder",
    "StreamLogError",
    "UnknownTopicError",
    "OffsetRangeError",
    "StageError",
    "OFFSET_MIME",
    "OFFSET_METADATA_PREFIX",
    "ROUTE_OFFSETS",
    "ROUTE_READ",
    "ROUTE_APPEND",
    "ROUTE_STAGE",
    "ROUTE_COMMIT",
    "ROUTE_ABORT",
    "ROUTE_TOPICS",
    "ROUTE_CREATE",
    "ROUTES",
    "offset_of",
    "MAX_TOPIC_LENGTH",
    "MAX_SHARDS",
    "MAX_OFFSET",
    "MAX_QUERY_LENGTH",
    "MAX_PARTITIONS",
    "MAX_STAGE_ROWS",
    "DEFAULT_ACK_EVERY",
    "MAX_ACK_EVERY",
    "DEFAULT_READ_CHUNK",
    "ROUTE_READ_BATCH",
    "ROUTE_APPEND_BATCH",
    "ROUTE_STAGE_BATCH",
    "DEFAULT_BATCH_BYTES",
    "MAX_BATCH_BYTES",
    "BATCH_HEADER_SIZE",
    "RecordBatchError",
    "encode_batch",
    "decode_batch",
    "batch_layout",
]

#: The MIME type of the composite metadata entry that carries a record's offset.
OFFSET_MIME = "application/x.rsocket-tx.offset"
#: The metadata of every ``log.read`` PAYLOAD but its last 8 bytes (the offset, big endian):
#: a reader checks ``md[:-8] == OFFSET_METADATA_PREFIX`` and takes
#: ``int.from_bytes(md[-8:], "big")``.
OFFSET_METADATA_PREFIX: bytes = encode_composite([(OFFSET_MIME, bytes(8))])[:-8]
_PACK_METADATA = struct.Struct(f">{len(OFFSET_METADATA_PREFIX)}sQ").pack

#: Route names (see the module docstring for their requests and responses).
ROUTE_OFFSETS = "log.offsets"
ROUTE_READ = "log.read"
ROUTE_APPEND = "log.append"
ROUTE_STAGE = "log.stage"
ROUTE_COMMIT = "log.commit"
ROUTE_ABORT = "log.abort"
ROUTE_TOPICS = "log.topics"
ROUTE_CREATE = "log.create"
ROUTE_READ_BATCH = "log.read.batch"
ROUTE_APPEND_BATCH = "log.append.batch"
ROUTE_STAGE_BATCH = "log.stage.batch"
#: Every route, with its interaction.
ROUTES = {
    ROUTE_OFFSETS: "request_response",
    ROUTE_READ: "request_stream",
    ROUTE_APPEND: "request_channel",
    ROUTE_STAGE: "request_channel",
    ROUTE_COMMIT: "request_response",
    ROUTE_ABORT: "request_response",
    ROUTE_TOPICS: "request_response",
    ROUTE_CREATE: "request_response",
    ROUTE_READ_BATCH: "request_stream",
    ROUTE_APPEND_BATCH: "request_channel",
    ROUTE_STAGE_BATCH: "request_channel",
}

#: Longest topic name, in UTF-8 bytes.
MAX_TOPIC_LENGTH = 255
#: Most shards of one topic.
MAX_SHARDS = 4096
#: Largest offset of a shard (records per shard: 2^40, about 10^12).
MAX_OFFSET = 2**40 - 1
#: Longest query id of the staging API, in UTF-8 bytes.
MAX_QUERY_LENGTH = 255
#: Most partitions one commit may name.
MAX_PARTITIONS = 1_000_000
#: Most rows staged for one ``(query, batch, partition)``.
MAX_STAGE_ROWS = 2**32 - 1
#: Records per transaction (and acknowledgement) of the channel sinks, by default.
DEFAULT_ACK_EVERY = 1024
#: Largest ``ack_every``: what a sink buffers in memory before it writes.
MAX_ACK_EVERY = 1_000_000
#: Rows read from SQLite per query when streaming a range.
DEFAULT_READ_CHUNK = 4096
#: Most bytes of one record batch ``log.read.batch`` sends, by default (responder setting
#: ``batch_bytes``; a single bigger record is sent alone in its batch).
DEFAULT_BATCH_BYTES = 256 * 1024
#: Largest ``batch_bytes`` setting: below the 16 MiB frame length limit of RSocket's TCP
#: framing (spec §Framing), header and all.
MAX_BATCH_BYTES = 8 * 1024 * 1024
#: Bytes of a record batch before its lengths: first offset (8) and count (4).
BATCH_HEADER_SIZE = 12
_BATCH_HEADER = struct.Struct(">QI")

_MAX_INT64 = 2**63 - 1
_OFFSET_BITS = 40
_MAX_SHARD_KEYS = 2**23 - 1  # record keys are (shard key << 40) | offset, below 2^63
_MAX_STAGE_ID = 2**31 - 1  # stage record keys are (stage id << 32) | row number
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SYNCHRONOUS = ("off", "normal", "full", "extra")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS streamlog_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS topics(name TEXT PRIMARY KEY, shards INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS shards(
    id INTEGER PRIMARY KEY,
    topic TEXT NOT NULL,
    shard INTEGER NOT NULL,
    next_offset INTEGER NOT NULL DEFAULT 0,
    UNIQUE(topic, shard));
CREATE TABLE IF NOT EXISTS records(key INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS stages(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    query TEXT NOT NULL,
    batch INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    topic TEXT NOT NULL,
    shard INTEGER NOT NULL,
    rows INTEGER NOT NULL DEFAULT 0,
    UNIQUE(query, batch, partition));
CREATE TABLE IF NOT EXISTS stage_records(key INTEGER PRIMARY KEY, data BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS segments(
    shard INTEGER NOT NULL,
    first INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    stage INTEGER NOT NULL,
    PRIMARY KEY(shard, first)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS commits(
    query TEXT NOT NULL,
    batch INTEGER NOT NULL,
    rows INTEGER NOT NULL,
    PRIMARY KEY(query, batch));
"""
_FORMAT = "2"
#: Format 1 kept staged rows in ``staged_rows(stage, data)`` and copied them into ``records``
#: on commit; format 2 keys them by stage and commits by pointing at them (``segments``).
_OLD_FORMATS = ("1",)
_STAGE_BITS = 32  # stage record keys are (stage id << 32) | row number, below 2^63


class StreamLogError(ValueError):
    """A request the log cannot serve (bad topic, shard, range, stage); the message says why."""


class UnknownTopicError(StreamLogError):
    """The topic does not exist (create it with :meth:`StreamLog.create_topic`)."""


class OffsetRangeError(StreamLogError):
    """A read range outside the shard's records."""


class StageError(StreamLogError):
    """A staging request that cannot be served (a partition not staged, an attempt that a
    newer one replaced)."""


# -- argument checks (shared by the log and the responder) ------------------------------------


@contextmanager
def _invalid(route_name: str | None):
    """Answer a :class:`StreamLogError` raised inside with ERROR[INVALID] "route: reason"."""
    try:
        yield
    except StreamLogError as exc:
        raise InvalidError(f"{route_name}: {exc}") from None


def _check_name(name: str, value, limit: int) -> str:
    if not isinstance(value, str):
        raise StreamLogError(f"{name} must be a string, got {type(value).__name__}")
    size = len(value.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= limit:
        raise StreamLogError(f"{name} must be 1..{limit} bytes of UTF-8, got {size} bytes")
    return value


def _check_topic(topic) -> str:
    _check_name("topic", topic, MAX_TOPIC_LENGTH)
    if _CONTROL.search(topic):
        raise StreamLogError(f"topic must not contain control characters: {topic!r}")
    return topic


def _check_int(name: str, value, minimum: int, maximum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise StreamLogError(f"{name} must be an integer, got {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise StreamLogError(f"{name} must be in {minimum}..{maximum}, got {value}")
    return value


def _check_query(query) -> str:
    return _check_name("query", query, MAX_QUERY_LENGTH)


def _check_key(key) -> tuple[str, int, int]:
    if not isinstance(key, tuple) or len(key) != 3:
        raise StreamLogError(f"a stage key is a tuple (query, batch, partition), got {key!r}")
    query, batch, partition = key
    return (_check_query(query), _check_int("batch", batch, 0, _MAX_INT64),
            _check_int("partition", partition, 0, _MAX_INT64))


def _as_record(record) -> bytes:
    if record.__class__ is bytes:
        return record
    if isinstance(record, (bytearray, memoryview)):
        return bytes(record)
    raise TypeError(f"records must be bytes, got {type(record).__name__}")


class StreamLog:
    """A durable append-only log of byte records per ``(topic, shard)``, in one SQLite file.

    :param path: the database file (created if missing; its directory must exist); kept as an
        absolute path.
    :param synchronous: SQLite's ``synchronous`` setting with WAL: ``"normal"`` (default:
        committed transactions survive a crash of the process), ``"full"`` (and a power loss),
        ``"off"``.
    :param timeout: seconds to wait for another process's write lock on the file.
    :raises StreamLogError: a bad setting, or the file cannot be opened as a StreamLog.

    Thread-safe (one connection behind a lock; every call holds it for one statement batch or
    one transaction) and fork-safe (a child process opens its own connection). Several processes
    may use one file: SQLite serialises their writes, offsets are taken inside the write
    transaction.
    """

    _shared: dict[str, StreamLog] = {}
    _shared_lock = threading.Lock()

    def __init__(self, path: str | os.PathLike, *, synchronous: str = "normal",
                 timeout: float = 5.0) -> None:
        if not isinstance(path, (str, os.PathLike)):
            raise StreamLogError(f"path must be a str or os.PathLike, got {type(path).__name__}")
        path = os.fspath(path)
        if not path:
            raise StreamLogError("path must not be empty")
        if not isinstance(synchronous, str) or synchronous.lower() not in _SYNCHRONOUS:
            raise StreamLogError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}, got "
                                 f"{synchronous!r}")
        self.path = os.path.abspath(path)  # the same file after a chdir (twistd, daemons)
        self.synchronous = synchronous.lower()
        self.timeout = float(timeout)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None
        self._keys: dict[tuple[str, int], int] = {}
        self._connect()

    @classmethod
    def shared(cls, path: str | os.PathLike, **settings) -> StreamLog:
        """The one :class:`StreamLog` of this process for ``path`` (the file's real path),
        opened on first use with ``settings`` (later calls ignore them)."""
        key = os.path.realpath(os.fspath(path))
        with cls._shared_lock:
            log = cls._shared.get(key)
            if log is None or log.closed:
                log = cls._shared[key] = cls(path, **settings)
            return log

    # -- connection -----------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None,
                                   check_same_thread=False)
        except sqlite3.Error as exc:
            raise StreamLogError(f"cannot open the stream log {self.path!r}: {exc}") from None
        try:
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StreamLogError(f"{self.path!r}: SQLite cannot use WAL here "
                                     f"(journal mode {mode})")
            conn.execute(f"PRAGMA synchronous={self.synchronous.upper()}")
            conn.executescript(_SCHEMA)
            row = conn.execute("SELECT value FROM streamlog_meta WHERE key='format'").fetchone()
            if row is None:
                conn.execute("INSERT OR IGNORE INTO streamlog_meta VALUES ('format', ?)",
                             (_FORMAT,))
            elif row[0] in _OLD_FORMATS:
                _upgrade(conn)
            elif row[0] != _FORMAT:
                raise StreamLogError(f"{self.path!r} has stream log format {row[0]}, this "
                                     f"version reads format {_FORMAT}")
        except sqlite3.Error as exc:
            conn.close()
            raise StreamLogError(f"cannot open the stream log {self.path!r}: {exc}") from None
        except StreamLogError:
            conn.close()
            raise
        self._conn = conn
        self._pid = os.getpid()
        self._keys = {}
        return conn

    def _db(self) -> sqlite3.Connection:
        conn = self._conn
        if conn is None:
            raise StreamLogError(f"the stream log {self.path!r} is closed")
        if self._pid != os.getpid():  # forked: never share a connection across processes
            conn = self._connect()
        return conn

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has been called."""
        return self._conn is None

    def close(self) -> None:
        """Close the database connection; later calls raise :class:`StreamLogError`."""
        with self._lock:
            conn, self._conn = self._conn, None
            if conn is not None and self._pid == os.getpid():
                conn.close()
        with self._shared_lock:
            for key, log in list(self._shared.items()):
                if log is self:
                    del self._shared[key]

    def __enter__(self) -> StreamLog:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def _write(self):
        return _Transaction(self._lock, self._db, self._forget_keys, self.path)

    def _forget_keys(self) -> None:
        self._keys.clear()

    # -- topics ---------------------------------------------------------------------------

    def create_topic(self, topic: str, shards: int = 1) -> int:
        """Create ``topic`` with ``shards`` shards, or add shards to an existing topic.

        :param topic: 1..255 bytes of UTF-8, no control characters.
        :param shards: 1 .. :data:`MAX_SHARDS`.
        :returns: the topic's number of shards.
        :raises StreamLogError: a bad name or count, or fewer shards than the topic has.
        """
        _check_topic(topic)
        _check_int("shards", shards, 1, MAX_SHARDS)
        with self._write() as db:
            return self._create(db, topic, shards)

    def _create(self, db, topic: str, shards: int) -> int:
        row = db.execute("SELECT shards FROM topics WHERE name=?", (topic,)).fetchone()
        have = 0 if row is None else row[0]
        if shards < have:
            raise StreamLogError(f"topic {topic!r} has {have} shards; shards cannot be removed "
                                 f"(asked for {shards})")
        if shards == have:
            return have
        count = db.execute("SELECT count(*) FROM shards").fetchone()[0]
        if count + shards - have > _MAX_SHARD_KEYS:
            raise StreamLogError(f"the stream log holds its maximum of {_MAX_SHARD_KEYS} shards")
        if row is None:
            db.execute("INSERT INTO topics(name, shards) VALUES (?, ?)", (topic, shards))
        else:
            db.execute("UPDATE topics SET shards=? WHERE name=?", (shards, topic))
        db.executemany("INSERT INTO shards(topic, shard) VALUES (?, ?)",
                       [(topic, n) for n in range(have, shards)])
        return shards

    def topics(self) -> dict[str, int]:
        """Every topic with its number of shards."""
        with self._lock:
            return dict(self._db().execute("SELECT name, shards FROM topics ORDER BY name"))

    def shards(self, topic: str) -> int | None:
        """The number of shards of ``topic``, or None if it does not exist."""
        _check_topic(topic)
        with self._lock:
            row = self._db().execute("SELECT shards FROM topics WHERE name=?",
                                     (topic,)).fetchone()
        return None if row is None else row[0]

    def end_offsets(self, topic: str) -> dict[int, int]:
        """The next offset to be written (= the number of records) of each shard of ``topic``;
        ``{}`` if the topic does not exist.

        :raises StreamLogError: a malformed topic name.
        """
        _check_topic(topic)
        with self._lock:
            rows = self._db().execute(
                "SELECT shard, next_offset FROM shards WHERE topic=? ORDER BY shard", (topic,))
            return dict(rows)

    def end_offset(self, topic: str, shard: int) -> int:
        """The next offset to be written of one shard.

        :raises UnknownTopicError: no such topic or shard.
        """
        _check_topic(topic)
        _check_int("shard", shard, 0, MAX_SHARDS - 1)
        with self._lock:
            row = self._db().execute("SELECT next_offset FROM shards WHERE topic=? AND shard=?",
                                     (topic, shard)).fetchone()
        if row is None:
            raise self._unknown(topic, shard)
        return row[0]

    def _unknown(self, topic: str, shard: int) -> UnknownTopicError:
        shards = self.shards(topic)
        if shards is None:
            return UnknownTopicError(f"no topic {topic!r}")
        return UnknownTopicError(f"topic {topic!r} has shards 0..{shards - 1}, not {shard}")

    def _shard_key(self, db, topic: str, shard: int) -> int:
        key = self._keys.get((topic, shard))
        if key is None:
            row = db.execute("SELECT id FROM shards WHERE topic=? AND shard=?",
                             (topic, shard)).fetchone()
            if row is None:
                raise self._unknown(topic, shard)
            key = self._keys[(topic, shard)] = row[0]
        return key

    # -- append and read ------------------------------------------------------------------

    def append(self, topic: str, shard: int, records: Iterable[bytes]) -> tuple[int, int]:
        """Append ``records`` to one shard, in one transaction.

        :param records: bytes-like records (an iterable; consumed inside the transaction).
        :returns: ``(first_offset, end_offset)``: the offset of the first record appended and
            the shard's new end (``first == end`` when ``records`` is empty).
        :raises UnknownTopicError: no such topic or shard.
        :raises TypeError: a record is not bytes-like.
        """
        _check_topic(topic)
        _check_int("shard", shard, 0, MAX_SHARDS - 1)
        with self._write() as db:
            return self._append(db, topic, shard, records)

    def _append(self, db, topic: str, shard: int, records: Iterable[bytes]) -> tuple[int, int]:
        key = self._shard_key(db, topic, shard)
        first = db.execute("SELECT next_offset FROM shards WHERE id=?", (key,)).fetchone()[0]
        base = key << _OFFSET_BITS
        if records.__class__ is list and set(map(type, records)) <= {bytes}:
            # a list of bytes (the sink routes): keys and rows zipped in C, no Python step
            count = len(records)
            end = first + count
            if end > MAX_OFFSET + 1:
                raise StreamLogError(f"shard {shard} of {topic!r} is full ({MAX_OFFSET + 1} "
                                     f"records)")
            db.executemany("INSERT INTO records(key, data) VALUES (?, ?)",
                           zip(range(base + first, base + end), records))
            if count:
                db.execute("UPDATE shards SET next_offset=? WHERE id=?", (end, key))
            return first, end
        count = 0

        def rows():
            nonlocal count
            position = base + first
            for record in records:
                yield position, _as_record(record)
                position += 1
                count += 1

        db.executemany("INSERT INTO records(key, data) VALUES (?, ?)", rows())
        end = first + count
        if end > MAX_OFFSET + 1:
            raise StreamLogError(f"shard {shard} of {topic!r} is full ({MAX_OFFSET + 1} records)")
        if count:
            db.execute("UPDATE shards SET next_offset=? WHERE id=?", (end, key))
        return first, end

    def read(self, topic: str, shard: int, start: int = 0, stop: int | None = None, *,
             chunk: int = DEFAULT_READ_CHUNK) -> Iterator[tuple[int, bytes]]:
        """The records with offsets ``start .. stop-1`` of one shard, as ``(offset, bytes)``.

        The range is checked at once (not when iteration begins); rows are read ``chunk`` at a
        time, each chunk in its own query (no transaction stays open between chunks).

        :param stop: None: the end of the shard now.
        :raises UnknownTopicError: no such topic or shard.
        :raises OffsetRangeError: ``start`` or ``stop`` beyond the end, or ``start > stop``.
        """
        start, stop = self._range(topic, shard, start, stop)
        chunks = self._chunks(topic, shard, start, stop, chunk)

        def records():
            offset = start
            for rows in chunks:
                for (data,) in rows:
                    yield offset, data
                    offset += 1
        return records()

    def read_chunks(self, topic: str, shard: int, start: int = 0, stop: int | None = None, *,
                    chunk: int = DEFAULT_READ_CHUNK) -> Iterator[list[tuple[bytes]]]:
        """As :meth:`read`, as lists of up to ``chunk`` 1-tuples ``(data,)`` in offset order
        (the first row of the first list has offset ``start``): the fast path for streaming.

        :raises UnknownTopicError: no such topic or shard.
        :raises OffsetRangeError: as :meth:`read`.
        """
        start, stop = self._range(topic, shard, start, stop)
        return self._chunks(topic, shard, start, stop, chunk)

    def _range(self, topic, shard, start, stop) -> tuple[int, int]:
        _check_int("from", start, 0, _MAX_INT64)
        if stop is not None:
            _check_int("to", stop, 0, _MAX_INT64)
        end = self.end_offset(topic, shard)
        if start > end:
            raise OffsetRangeError(f"from={start} is beyond the end of shard {shard} of "
                                   f"{topic!r} ({end})")
        if stop is None:
            stop = end
        elif stop > end:
            raise OffsetRangeError(f"to={stop} is beyond the end of shard {shard} of "
                                   f"{topic!r} ({end})")
        if start > stop:
            raise OffsetRangeError(f"from={start} is after to={stop}")
        return start, stop

    def _chunks(self, topic, shard, start, stop, chunk) -> Iterator[list[tuple[bytes]]]:
        _check_int("chunk", chunk, 1, MAX_ACK_EVERY)
        with self._lock:
            base = self._shard_key(self._db(), topic, shard) << _OFFSET_BITS
        lock = self._lock

        shard_key = base >> _OFFSET_BITS

        def chunks():
            position = start
            while position < stop:
                n = min(chunk, stop - position)
                with lock:
                    rows = _read_rows(self._db(), shard_key, position, position + n)
                if len(rows) != n:  # cannot happen unless the file was edited
                    raise StreamLogError(f"shard {shard} of {topic!r}: {n - len(rows)} records "
                                         f"missing after offset {position}")
                yield rows
                position += n
        return chunks()

    # -- staging (exactly-once sinks) -----------------------------------------------------

    def open_stage(self, key: tuple[str, int, int], topic: str, shard: int) -> int:
        """Start staging for ``key = (query, batch, partition)`` into ``topic``/``shard``:
        rows staged earlier for the same key (a failed or retried attempt) are dropped.

        :returns: the stage id, for :meth:`stage`; an older attempt's id stops working.
        :raises UnknownTopicError: no such topic or shard.
        :raises StreamLogError: a malformed key.
        """
        query, batch, partition = _check_key(key)
        _check_topic(topic)
        _check_int("shard", shard, 0, MAX_SHARDS - 1)
        with self._write() as db:
            self._shard_key(db, topic, shard)  # the target exists
            self._drop_stage(db, "query=? AND batch=? AND partition=?", (query, batch, partition))
            cursor = db.execute("INSERT INTO stages(query, batch, partition, topic, shard) "
                                "VALUES (?, ?, ?, ?, ?)", (query, batch, partition, topic, shard))
            stage_id = cursor.lastrowid
            if stage_id > _MAX_STAGE_ID:
                raise StreamLogError(f"the stream log has used all its {_MAX_STAGE_ID} stage ids")
            return stage_id

    def stage(self, key: tuple[str, int, int], topic: str, shard: int,
              records: Iterable[bytes], *, stage_id: int | None = None) -> int:
        """Stage ``records`` for ``key = (query, batch, partition)`` (one transaction).

        :param stage_id: from :meth:`open_stage`: add to that attempt's rows. None: replace
            whatever was staged for ``key`` by ``records``.
        :returns: the number of rows staged for ``key`` now.
        :raises StageError: ``stage_id`` was replaced by a newer attempt (or committed,
            aborted), or belongs to another key.
        :raises UnknownTopicError: no such topic or shard.
        :raises TypeError: a record is not bytes-like.
        """
        if stage_id is None:
            stage_id = self.open_stage(key, topic, shard)
        query, batch, partition = _check_key(key)
        with self._write() as db:
            row = db.execute("SELECT query, batch, partition, rows FROM stages WHERE id=?",
                             (stage_id,)).fetchone()
            if row is None:
                raise StageError(f"the stage of {key!r} was replaced by a newer attempt, "
                                 f"committed or aborted")
            if tuple(row[:3]) != (query, batch, partition):
                raise StageError(f"stage {stage_id} belongs to {tuple(row[:3])!r}, not {key!r}")
            before = db.total_changes
            base = (stage_id << _STAGE_BITS) + row[3]
            if records.__class__ is list and set(map(type, records)) <= {bytes}:
                rows = zip(count(base), records)  # (the sink routes: no Python step)
            else:
                rows = zip(count(base), map(_as_record, records))
            db.executemany("INSERT INTO stage_records(key, data) VALUES (?, ?)", rows)
            total = row[3] + db.total_changes - before
            if total > MAX_STAGE_ROWS:
                raise StreamLogError(f"at most {MAX_STAGE_ROWS} rows per stage (query, batch, "
                                     f"partition), got {total}")
            db.execute("UPDATE stages SET rows=? WHERE id=?", (total, stage_id))
            return total

    def staged(self, query: str, batch: int) -> dict[int, int]:
        """The partitions staged for ``(query, batch)``, with their row counts."""
        _check_query(query)
        _check_int("batch", batch, 0, _MAX_INT64)
        with self._lock:
            return dict(self._db().execute(
                "SELECT partition, rows FROM stages WHERE query=? AND batch=? ORDER BY partition",
                (query, batch)))

    def committed(self, query: str, batch: int) -> int | None:
        """The rows published by the commit of ``(query, batch)``, or None if not committed."""
        _check_query(query)
        _check_int("batch", batch, 0, _MAX_INT64)
        with self._lock:
            row = self._db().execute("SELECT rows FROM commits WHERE query=? AND batch=?",
                                     (query, batch)).fetchone()
        return None if row is None else row[0]

    def commit(self, query: str, batch: int, partitions: Iterable[int]) -> tuple[int, bool]:
        """Publish the rows staged for ``partitions`` of ``(query, batch)``, once.

        In one transaction: each partition's rows (partitions in ascending order, rows in the
        order staged) are appended to its topic/shard, all staging of ``(query, batch)`` is
        dropped (also partitions not listed: attempts that did not succeed) and the batch is
        recorded as committed. The rows are not copied: a commit writes one *segment* per
        partition (the shard's next offsets now name the staged rows where they are), so it
        costs the same for 10 rows as for 10 million. A later commit of the same
        ``(query, batch)`` changes nothing (and drops what was staged again for it).

        :returns: ``(rows, duplicate)``: the rows published (by the first commit, when
            ``duplicate``).
        :raises StageError: a listed partition has nothing staged (not even an empty stage).
        :raises StreamLogError: malformed arguments (more than :data:`MAX_PARTITIONS`, a
            partition listed twice).
        """
        _check_query(query)
        _check_int("batch", batch, 0, _MAX_INT64)
        wanted = self._partitions(partitions)
        with self._write() as db:
            row = db.execute("SELECT rows FROM commits WHERE query=? AND batch=?",
                             (query, batch)).fetchone()
            if row is not None:
                self._drop_stage(db, "query=? AND batch=?", (query, batch))
                return row[0], True
            stages = {p: (sid, topic, shard) for sid, p, topic, shard in db.execute(
                "SELECT id, partition, topic, shard FROM stages WHERE query=? AND batch=?",
                (query, batch))}
            missing = [p for p in wanted if p not in stages]
            if missing:
                shown = ", ".join(map(str, missing[:10])) + (", ..." if len(missing) > 10 else "")
                raise StageError(f"commit of query {query!r} batch {batch}: partition(s) {shown}"
                                 f" not staged")
            total = 0
            published = set()
            for partition in wanted:
                sid, topic, shard = stages[partition]
                total += self._move(db, sid, topic, shard)
                published.add(sid)
            self._drop_stage(db, "query=? AND batch=?", (query, batch), keep=published)
            db.execute("INSERT INTO commits(query, batch, rows) VALUES (?, ?, ?)",
                       (query, batch, total))
            return total, False

    @staticmethod
    def _partitions(partitions) -> list[int]:
        if isinstance(partitions, (str, bytes)) or not isinstance(partitions, Iterable):
            raise StreamLogError(f"partitions must be a list of integers, got "
                                 f"{type(partitions).__name__}")
        wanted = []
        for p in partitions:
            wanted.append(_check_int("partition", p, 0, _MAX_INT64))
            if len(wanted) > MAX_PARTITIONS:
                raise StreamLogError(f"at most {MAX_PARTITIONS} partitions per commit")
        if len(set(wanted)) != len(wanted):
            raise StreamLogError("a partition is listed twice")
        return sorted(wanted)

    def _move(self, db, sid: int, topic: str, shard: int) -> int:
        """Publish stage ``sid``'s rows at the end of ``topic``/``shard``: one segment row
        pointing at them (no row is copied). :returns: the number of rows."""
        key = self._shard_key(db, topic, shard)
        first = db.execute("SELECT next_offset FROM shards WHERE id=?", (key,)).fetchone()[0]
        rows = db.execute("SELECT rows FROM stages WHERE id=?", (sid,)).fetchone()[0]
        if first + rows > MAX_OFFSET + 1:
            raise StreamLogError(f"shard {shard} of {topic!r} is full ({MAX_OFFSET + 1} records)")
        if rows:
            db.execute("INSERT INTO segments(shard, first, rows, stage) VALUES (?, ?, ?, ?)",
                       (key, first, rows, sid))
            db.execute("UPDATE shards SET next_offset=? WHERE id=?", (first + rows, key))
        return rows

    @staticmethod
    def _drop_stage(db, where: str, args: tuple, keep: set[int] | frozenset[int] = frozenset()
                    ) -> int:
        """Forget the stages matching ``where``; delete their rows unless the stage id is in
        ``keep`` (published: a segment points at them). :returns: rows deleted."""
        ids = [sid for (sid,) in db.execute(f"SELECT id FROM stages WHERE {where}", args)]
        dropped = 0
        for sid in ids:
            if sid not in keep:
                dropped += db.execute("DELETE FROM stage_records WHERE key >= ? AND key < ?",
                                      (sid << _STAGE_BITS, (sid + 1) << _STAGE_BITS)).rowcount
            db.execute("DELETE FROM stages WHERE id=?", (sid,))
        return dropped

    def abort(self, query: str, batch: int) -> int:
        """Drop everything staged for ``(query, batch)``.

        :returns: the number of rows dropped.
        """
        _check_query(query)
        _check_int("batch", batch, 0, _MAX_INT64)
        with self._write() as db:
            return self._drop_stage(db, "query=? AND batch=?", (query, batch))

    def __repr__(self) -> str:
        return f"StreamLog({self.path!r})"


def _read_rows(db: sqlite3.Connection, shard_key: int, start: int, stop: int
               ) -> list[tuple[bytes]]:
    """The rows ``(data,)`` of offsets [start, stop) of one shard: appended records (table
    ``records``) and committed stages (``segments`` pointing into ``stage_records``), in
    offset order; fewer if some are missing."""
    segments = db.execute(
        "SELECT first, rows, stage FROM segments WHERE shard=? AND first <= ? "
        "ORDER BY first DESC LIMIT 1", (shard_key, start)).fetchall()
    if segments and segments[0][0] + segments[0][1] <= start:
        segments = []
    segments += db.execute(
        "SELECT first, rows, stage FROM segments WHERE shard=? AND first > ? AND first < ? "
        "ORDER BY first", (shard_key, start, stop)).fetchall()
    base = shard_key << _OFFSET_BITS
    if not segments:
        return db.execute("SELECT data FROM records WHERE key >= ? AND key < ? ORDER BY key",
                          (base + start, base + stop)).fetchall()
    rows: list[tuple[bytes]] = []
    position = start
    for first, size, stage in segments:
        if position < first:  # appended records before this segment
            rows += db.execute("SELECT data FROM records WHERE key >= ? AND key < ? ORDER BY key",
                               (base + position, base + first)).fetchall()
            position = first
        end = min(stop, first + size)
        stage_base = (stage << _STAGE_BITS) - first
        rows += db.execute("SELECT data FROM stage_records WHERE key >= ? AND key < ? "
                           "ORDER BY key", (stage_base + position, stage_base + end)).fetchall()
        position = end
    if position < stop:
        rows += db.execute("SELECT data FROM records WHERE key >= ? AND key < ? ORDER BY key",
                           (base + position, base + stop)).fetchall()
    return rows


def _upgrade(conn: sqlite3.Connection) -> None:
    """Upgrade a format 1 file in place (one transaction): its staged rows move from
    ``staged_rows`` to ``stage_records`` (keyed by stage and row number)."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        old = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND "
                           "name='staged_rows'").fetchone()
        if old is not None:
            conn.execute(f"INSERT INTO stage_records(key, data) SELECT (stage << {_STAGE_BITS})"
                         " + row_number() OVER (PARTITION BY stage ORDER BY rowid) - 1, data "
                         "FROM staged_rows ORDER BY stage, rowid")
            conn.execute("DROP TABLE staged_rows")
        conn.execute("UPDATE streamlog_meta SET value=? WHERE key='format'", (_FORMAT,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


class _Transaction:
    """``with log._write() as db``: BEGIN IMMEDIATE under the log's lock; COMMIT, or
    ROLLBACK on an exception (then ``forget_keys()``: shards created in it are gone)."""

    __slots__ = ("lock", "connect", "forget_keys", "path", "db")

    def __init__(self, lock, connect, forget_keys, path: str) -> None:
        self.lock = lock
        self.connect = connect
        self.forget_keys = forget_keys
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        self.lock.acquire()
        try:
            self.db = self.connect()
            self.db.execute("BEGIN IMMEDIATE")
        except BaseException as exc:
            self.lock.release()
            if isinstance(exc, sqlite3.Error):
                raise StreamLogError(f"{self.path!r}: {exc}") from None
            raise
        return self.db

    def __exit__(self, kind, exc, tb) -> None:
        try:
            if kind is None:
                try:
                    self.db.execute("COMMIT")
                except sqlite3.Error as error:
                    self.db.execute("ROLLBACK")
                    raise StreamLogError(f"{self.path!r}: commit failed: {error}") from None
            else:
                self.db.execute("ROLLBACK")
                self.forget_keys()  # a shard created in this transaction is gone again
                if isinstance(exc, sqlite3.Error):
                    raise StreamLogError(f"{self.path!r}: {exc}") from exc
        finally:
            self.lock.release()


def offset_of(metadata: bytes | None) -> int | None:
    """The offset a ``log.read`` PAYLOAD's metadata carries, or None if it carries none in
    the expected form (see :data:`OFFSET_METADATA_PREFIX`)."""
    if metadata is None or len(metadata) != len(OFFSET_METADATA_PREFIX) + 8 or \
            not metadata.startswith(OFFSET_METADATA_PREFIX):
        return None
    return int.from_bytes(metadata[-8:], "big")


# -- record batches (the *.batch routes) -------------------------------------------------------


class RecordBatchError(StreamLogError):
    """Bytes that are not a record batch (see the module docstring); the message says why."""


def encode_batch(first: int, records: list[bytes]) -> bytes:
    """One record batch: ``first`` (the offset of ``records[0]``; 0 for a sink) and the records.

    :param first: 0 .. 2^64-1.
    :param records: one or more ``bytes`` (each at most 2^32-1 bytes).
    :returns: the batch, ``12 + 5 * len(records) + sum of their lengths`` bytes.
    :raises RecordBatchError: no records, or a record too long for its 4-byte length.
    """
    n = len(records)
    if not n:
        raise RecordBatchError("a record batch holds at least one record")
    try:
        header = struct.pack(f">QI{n}I", first, n, *map(len, records))
    except struct.error as exc:
        raise RecordBatchError(f"cannot encode a record batch: {exc}") from None
    return b"".join((header, b"\n".join(records), b"\n"))


def batch_layout(data) -> tuple[int, tuple[int, ...], int]:
    """Check a record batch's header and size, without splitting it.

    :param data: the batch (bytes-like).
    :returns: ``(first, lengths, body)``: the first offset, the record lengths (a tuple of
        ``count`` ints) and the index in ``data`` where the records (each followed by LF)
        start. The LF bytes are not checked here (:func:`decode_batch` does).
    :raises RecordBatchError: too short, a count of 0, or a size other than
        ``12 + 5 * count + sum(lengths)``.
    """
    size = len(data)
    if size < BATCH_HEADER_SIZE:
        raise RecordBatchError(f"{size} bytes, shorter than the {BATCH_HEADER_SIZE}-byte "
                               f"header")
    first, n = _BATCH_HEADER.unpack_from(data)
    if n == 0:
        raise RecordBatchError("count is 0 (a record batch holds at least one record)")
    body = BATCH_HEADER_SIZE + 4 * n
    if body + n > size:
        raise RecordBatchError(f"count {n} needs at least {body + n} bytes, the batch has "
                               f"{size}")
    lengths = struct.unpack_from(f">{n}I", data, BATCH_HEADER_SIZE)
    if body + n + sum(lengths) != size:
        raise RecordBatchError(f"the lengths of {n} records need {body + n + sum(lengths)} "
                               f"bytes, the batch has {size}")
    return first, lengths, body


def decode_batch(data) -> tuple[int, list[bytes]]:
    """Split a record batch into its first offset and its records.

    :param data: the batch (bytes-like).
    :returns: ``(first, records)``; record i has offset ``first + i``.
    :raises RecordBatchError: as :func:`batch_layout`, or a record not followed by LF.
    """
    first, lengths, body = batch_layout(data)
    rest = bytes(data[body:])
    n = len(lengths)
    if rest.count(b"\n") == n:  # no LF inside a record: one C-level split
        records = rest.split(b"\n")
        if records.pop() == b"" and list(map(len, records)) == list(lengths):
            return first, records
    records = []
    pos = 0
    for i, length in enumerate(lengths):
        end = pos + length
        if rest[end] != 0x0A:
            raise RecordBatchError(f"record {i} (of {n}) is not followed by LF")
        records.append(rest[pos:end])
        pos = end + 1
    return first, records


# -- the responder -----------------------------------------------------------------------------


def _setting_int(name: str, value, minimum: int, maximum: int) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip().replace("_", ""), 10)
        except ValueError:
            raise ValueError(f"{name}: expected an integer, got {value!r}") from None
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= maximum:
        raise ValueError(f"{name}: expected an integer in {minimum}..{maximum}, got {value!r}")
    return value


def _setting_bool(name: str, value) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"{name}: expected true or false, got {value!r}")


def _records_of(chunks, start: int):
    """PAYLOADs of ``log.read``: the record as data, the offset in composite metadata."""
    prefix = OFFSET_METADATA_PREFIX
    pack = _PACK_METADATA  # the metadata in one allocation: prefix, then the offset
    offset = start
    for rows in chunks:
        for (data,) in rows:
            yield Payload(data, pack(prefix, offset))
            offset += 1


def _batches_of(chunks, start: int, max_bytes: int):
    """PAYLOADs of ``log.read.batch``: record batches of at most ``max_bytes`` (a bigger
    record alone), no metadata. Cut points come from cumulative sizes (C-level ``map`` and
    ``accumulate``, ``bisect``), not from a Python step per record."""
    pack = struct.pack
    room = max_bytes - BATCH_HEADER_SIZE
    first = start
    datas: list[bytes] = []
    for rows in chunks:
        datas += [data for (data,) in rows]
        lengths = list(map(len, datas))
        # sizes[i]: bytes of records 0..i-1 with their length field and LF (5 bytes each)
        sizes = list(accumulate(map(add, lengths, repeat(5)), initial=0))
        n = len(datas)
        a = 0
        while True:
            b = bisect_right(sizes, sizes[a] + room, a + 1) - 1
            if b == n:  # the rest fits: wait for more rows (or the end) before sending it
                break
            b = max(b, a + 1)  # a record bigger than the room goes alone
            yield Payload(b"".join((pack(f">QI{b - a}I", first, b - a, *lengths[a:b]),
                                    b"\n".join(datas[a:b]), b"\n")))
            first += b - a
            a = b
        datas = datas[a:]
    if datas:
        n = len(datas)
        yield Payload(b"".join((pack(f">QI{n}I", first, n, *map(len, datas)),
                                b"\n".join(datas), b"\n")))


class StreamLogResponder(Responder):
    """Serves a :class:`StreamLog` over RSocket: the routes of the module docstring.

    One instance serves one connection; every connection of one process and path shares one
    :class:`StreamLog`. All settings may be strings (as ``--responder-arg KEY=VALUE`` passes
    them).

    :param log: the :class:`StreamLog` to serve (e.g. the one the application appends to).
    :param path: instead of ``log``: the database file, opened with :meth:`StreamLog.shared`.
    :param ack_every: records per transaction and acknowledgement of ``log.append`` and
        ``log.stage`` (1 .. :data:`MAX_ACK_EVERY`; default :data:`DEFAULT_ACK_EVERY`).
    :param read_chunk: rows per SQLite query of ``log.read`` (default
        :data:`DEFAULT_READ_CHUNK`).
    :param auto_create: ``log.append``/``log.stage`` to an unknown topic creates it (with
        ``max(default_shards, shard + 1)`` shards); default true. False: ERROR[INVALID].
    :param default_shards: shards of a topic created by an append (default 1).
    :param batch_bytes: most bytes of one record batch of ``log.read.batch`` (64 ..
        :data:`MAX_BATCH_BYTES`; default :data:`DEFAULT_BATCH_BYTES`); a request's
        ``max_bytes`` may lower it.
    :param synchronous: with ``path``: SQLite's ``synchronous`` (``normal``, ``full``, ``off``).
    :raises ValueError: neither or both of ``log`` and ``path``, or a bad setting.
    :raises StreamLogError: ``path`` cannot be opened as a stream log.

    Errors of a request (malformed data, unknown topic or shard, a bad range, a partition not
    staged) are answered with ERROR[INVALID] and a message saying what was wrong.

    :ivar stream_log: the :class:`StreamLog` served (``log`` is the responder's logger, as on
        every :class:`~rsocket_tx.responder.Responder`).
    """

    def __init__(self, log: StreamLog | None = None, *, path: str | None = None,
                 ack_every=DEFAULT_ACK_EVERY, read_chunk=DEFAULT_READ_CHUNK, auto_create=True,
                 default_shards=1, synchronous: str = "normal",
                 batch_bytes=DEFAULT_BATCH_BYTES) -> None:
        if (log is None) == (path is None):
            raise ValueError("StreamLogResponder needs either log= (a StreamLog) or path= (its "
                             "database file), not " + ("both" if log is not None else "neither"))
        if log is not None and not isinstance(log, StreamLog):
            raise ValueError(f"log must be a StreamLog, got {type(log).__name__}")
        self.ack_every = _setting_int("ack_every", ack_every, 1, MAX_ACK_EVERY)
        self.read_chunk = _setting_int("read_chunk", read_chunk, 1, MAX_ACK_EVERY)
        self.auto_create = _setting_bool("auto_create", auto_create)
        self.default_shards = _setting_int("default_shards", default_shards, 1, MAX_SHARDS)
        self.batch_bytes = _setting_int("batch_bytes", batch_bytes, 64, MAX_BATCH_BYTES)
        # (exactly one of log and path, checked above)
        self.stream_log = log if log is not None else \
            StreamLog.shared(str(path), synchronous=synchronous)

    # -- request helpers ------------------------------------------------------------------

    @staticmethod
    def _request(request: Request, *fields: str, optional: tuple[str, ...] = ()) -> dict:
        data = request.data if request.payload.data else {}
        if isinstance(data, (bytes, str)):  # a client without a JSON data MIME type
            try:
                data = json.loads(data) if data else {}
            except ValueError as exc:
                raise InvalidError(f"{request.route}: the request data is not JSON: "
                                   f"{exc}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise InvalidError(f"{request.route}: the request data must be a JSON object, got "
                               f"{type(data).__name__}")
        missing = [f for f in fields if f not in data]
        if missing:
            raise InvalidError(f"{request.route}: the request needs "
                               f"{', '.join(repr(f) for f in missing)}")
        unknown = sorted(set(data) - set(fields) - set(optional))
        if unknown:
            raise InvalidError(f"{request.route}: unknown field(s) "
                               f"{', '.join(repr(f) for f in unknown)}")
        return data

    @staticmethod
    def _reply(request: Request, value) -> Payload:
        codec = codec_for(request.response_mime_type)
        if codec is BYTES or codec is TEXT:  # no object codec: JSON anyway
            return Payload(json.dumps(value, separators=(",", ":")).encode())
        return request.encode(value) or Payload(b"")  # (value is never None here)

    def _target(self, request: Request, topic, shard, create: bool) -> tuple[str, int]:
        with _invalid(request.route):
            _check_topic(topic)
            _check_int("shard", shard, 0, MAX_SHARDS - 1)
            log = self.stream_log
            shards = log.shards(topic)
            if shards is None and create and self.auto_create:
                shards = log.create_topic(topic, max(self.default_shards, shard + 1))
            if shards is None:
                raise UnknownTopicError(f"no topic {topic!r}")
            if shard >= shards:
                raise UnknownTopicError(f"topic {topic!r} has shards 0..{shards - 1}, not "
                                        f"{shard}")
        return topic, shard

    async def _sink(self, request: Request, write, field: str, batched: bool = False):
        # one transaction per ack_every records, and one for the rest at the end of input
        # (an empty one if there were no records, so that every channel is acknowledged)
        batch: list[bytes] = []
        ack_every = self.ack_every
        acked = False
        assert request.inbound is not None  # a channel: the Request has an inbound stream
        async for payload in request.inbound:
            if batched:
                try:
                    first, records = decode_batch(payload.data)
                    if first:
                        raise RecordBatchError(f"the first offset of a sink's batch must be "
                                               f"0, got {first}")
                    batch.extend(records)
                except RecordBatchError as exc:
                    raise InvalidError(f"{request.route}: malformed record batch: "
                                       f"{exc}") from None
            else:
                batch.append(payload.data)
            if len(batch) >= ack_every:
                total = write(batch)
                batch = []
                acked = True
                yield self._reply(request, {field: total})
        if batch or not acked:
            yield self._reply(request, {field: write(batch)})

    # -- routes ---------------------------------------------------------------------------

    @route(ROUTE_OFFSETS)
    def offsets(self, request: Request):
        data = self._request(request, "topic")
        with _invalid(request.route):
            ends = self.stream_log.end_offsets(data["topic"])
        return self._reply(request, {"topic": data["topic"],
                                     "shards": {str(s): end for s, end in ends.items()}})

    @route(ROUTE_READ, interaction="request_stream")
    def read(self, request: Request):
        data = self._request(request, "topic", "shard", "from", optional=("to",))
        topic, shard = self._target(request, data["topic"], data["shard"], create=False)
        start = data["from"]
        with _invalid(request.route):
            chunks = self.stream_log.read_chunks(topic, shard, start, data.get("to"),
                                                 chunk=self.read_chunk)
        return Payloads(_records_of(chunks, start))  # (Payloads already: no encoding step)

    @route(ROUTE_READ_BATCH, interaction="request_stream")
    def read_batch(self, request: Request):
        data = self._request(request, "topic", "shard", "from", optional=("to", "max_bytes"))
        topic, shard = self._target(request, data["topic"], data["shard"], create=False)
        start = data["from"]
        with _invalid(request.route):
            max_bytes = _check_int("max_bytes", data.get("max_bytes", self.batch_bytes), 1,
                                   MAX_BATCH_BYTES)
            chunks = self.stream_log.read_chunks(topic, shard, start, data.get("to"),
                                                 chunk=self.read_chunk)
        return Payloads(_batches_of(chunks, start, min(max_bytes, self.batch_bytes)))

    @route(ROUTE_APPEND, interaction="request_channel")
    def append(self, request: Request):
        return self._append(request, False)

    @route(ROUTE_APPEND_BATCH, interaction="request_channel")
    def append_batch(self, request: Request):
        return self._append(request, True)

    @route(ROUTE_STAGE, interaction="request_channel")
    def stage(self, request: Request):
        return self._stage(request, False)

    @route(ROUTE_STAGE_BATCH, interaction="request_channel")
    def stage_batch(self, request: Request):
        return self._stage(request, True)

    def _append(self, request: Request, batched: bool):
        data = self._request(request, "topic", "shard")
        topic, shard = self._target(request, data["topic"], data["shard"], create=True)
        log = self.stream_log
        appended = 0

        def write(records):
            nonlocal appended
            with _invalid(request.route):
                first, end = log.append(topic, shard, records)
            appended += end - first
            return appended
        return self._sink(request, write, "acked", batched)

    def _stage(self, request: Request, batched: bool):
        data = self._request(request, "topic", "shard", "query", "batch", "partition")
        topic, shard = self._target(request, data["topic"], data["shard"], create=True)
        log = self.stream_log
        with _invalid(request.route):
            key = _check_key((data["query"], data["batch"], data["partition"]))
            stage_id = log.open_stage(key, topic, shard)

        def write(records):
            with _invalid(request.route):
                return log.stage(key, topic, shard, records, stage_id=stage_id)
        return self._sink(request, write, "staged", batched)

    @route(ROUTE_COMMIT)
    def commit(self, request: Request):
        data = self._request(request, "query", "batch", "partitions")
        if not isinstance(data["partitions"], list):
            raise InvalidError(f"{request.route}: partitions must be a list of integers")
        with _invalid(request.route):
            rows, duplicate = self.stream_log.commit(data["query"], data["batch"],
                                                     data["partitions"])
        return self._reply(request, {"committed": rows, "duplicate": duplicate})

    @route(ROUTE_ABORT)
    def abort(self, request: Request):
        data = self._request(request, "query", "batch")
        with _invalid(request.route):
            dropped = self.stream_log.abort(data["query"], data["batch"])
        return self._reply(request, {"dropped": dropped})

    @route(ROUTE_TOPICS)
    def topics(self, request: Request):
        self._request(request)
        return self._reply(request, {"topics": self.stream_log.topics()})

    @route(ROUTE_CREATE)
    def create(self, request: Request):
        data = self._request(request, "topic", "shards")
        with _invalid(request.route):
            shards = self.stream_log.create_topic(data["topic"], data["shards"])
        return self._reply(request, {"topic": data["topic"], "shards": shards})
