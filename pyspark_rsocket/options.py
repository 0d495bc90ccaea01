"""Reader options of the ``rsocket`` data source: parsing and checking.

Every option error raises :class:`ValueError` naming the option and what is accepted, on the
driver, before any task starts.

=====================  =========================================================================
option                 meaning
=====================  =========================================================================
``endpoints``          required. Comma-separated client endpoints: Twisted strings
                       (``tcp:host=h:port=7878``) or URIs (``tcp://h:7878``, ``ws://h:p/path``,
                       ``tls://h:p``). Several endpoints are read in parallel.
``topic``              log mode: the StreamLog topic (offsets protocol: ``log.offsets``, then
                       ``log.read`` per shard); one partition per endpoint x shard.
``shards``             log mode: comma-separated shard numbers to read (default: all).
``route``              generic mode (no ``topic``): route of the request-stream, one per endpoint.
``data``               generic mode: request data (UTF-8 text sent as is; default empty).
``format``             ``binary`` (default), ``json``, ``cbor`` or ``arrow``: how payload data is
                       decoded. ``arrow``: each payload is an Arrow IPC stream
                       (``application/vnd.apache.arrow.stream``) whose batches go to Spark as
                       they are; in log mode an offset numbers a payload, not a row.
``prefetch``           request-n window per stream (default 8192 rows).
``batchSize``          most rows per Arrow record batch handed to Spark (default 8192).
``batchBytes``         log mode: most bytes per record batch of ``log.read.batch`` (many records
                       per payload; default 262144, :data:`DEFAULT_BATCH_BYTES`); ``0``: one
                       record per payload with ``log.read`` (servers without the batch routes).
``maxRowsPerBatch``    streaming: most rows per shard per micro-batch (default: unlimited).
``maxRowsPerPartition`` batch log mode: split a shard into partitions of at most this many
                       rows (default: one partition per endpoint x shard).
``startingOffsets``    streaming: ``earliest`` (default), ``latest``, or JSON
                       ``{"endpoint": {"shard": offset}}``.
``timeout``            milliseconds to wait for a connection, a response or the next rows
                       (default 60000).
``dataMimeType``       generic mode: SETUP data MIME type (default ``application/json``;
                       ``application/vnd.apache.arrow.stream`` with format ``arrow``).
=====================  =========================================================================

The writer (:mod:`pyspark_rsocket.writer`) names its responder with the same option,
``endpoints`` (one endpoint). The singular ``endpoint`` is refused on both sides with a message
naming ``endpoints``; any other unknown option is refused with the closest known name
(:func:`check_option_names`).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import overload

__all__ = ["DEFAULT_BATCH_BYTES", "FORMATS", "READ_OPTIONS", "ReadOptions",
           "check_option_names", "parse_read_options", "parse_positive_int"]

#: Default of option ``batchBytes``: bytes per record batch asked of ``log.read.batch``.
DEFAULT_BATCH_BYTES = 256 * 1024
#: Largest ``batchBytes`` (the stream log's ``MAX_BATCH_BYTES``).
MAX_BATCH_BYTES = 8 * 1024 * 1024

#: Payload data formats the reader decodes.
FORMATS = ("binary", "json", "cbor", "arrow")
#: The data MIME type of format ``arrow`` (the Arrow IPC streaming format).
ARROW_MIME = "application/vnd.apache.arrow.stream"

#: Every reader option, as documented (Spark's option names are case-insensitive).
READ_OPTIONS = (
    "endpoints", "topic", "shards", "route", "data", "format", "prefetch", "batchSize",
    "batchBytes", "maxRowsPerBatch", "maxRowsPerPartition", "startingOffsets", "timeout",
    "dataMimeType",
)
#: Old or mistaken spellings refused with the name to use instead.
RENAMED = {"endpoint": "endpoints"}
#: Options Spark itself sets (``writeStream``'s ``checkpointLocation`` and ``queryName``,
#: ``load``/``save``'s ``path``, and its internal ``__``-prefixed ones): accepted on both
#: sides, never suggested.
SPARK_OPTIONS = ("checkpointLocation", "queryName", "path", "paths")


def check_option_names(options: Iterable[str], known: Iterable[str], side: str) -> None:
    """Refuse option names not in ``known`` (case-insensitively), naming the closest known
    one (:func:`difflib.get_close_matches`) or, for a renamed option, its new name.

    :param side: ``read`` or ``write``, for the message.
    :raises ValueError: an unknown option; the message names it and what to use.
    """
    by_lower = {name.lower(): name for name in known}
    spark = {name.lower() for name in SPARK_OPTIONS}
    for name in sorted(options):
        lowered = name.lower()
        if lowered in by_lower or lowered in spark or lowered.startswith("__"):
            continue
        if lowered in RENAMED:
            raise ValueError(f"rsocket {side} option {name!r} is called "
                             f"{RENAMED[lowered]!r} (reader and writer use one name)")
        close = difflib.get_close_matches(lowered, list(by_lower), n=1, cutoff=0.6)
        hint = f"did you mean {by_lower[close[0]]!r}? " if close else ""
        raise ValueError(f"unknown rsocket {side} option {name!r}: {hint}known: "
                         f"{', '.join(known)}")


@dataclass(frozen=True)
class ReadOptions:
    """Checked reader options (see the module docstring for their meaning).

    :ivar endpoints: endpoint strings, in the order given, without duplicates.
    :ivar timeout: seconds.
    :ivar starting_offsets: ``"earliest"``, ``"latest"``, or ``{endpoint: {shard: offset}}``.
    """

    endpoints: tuple[str, ...]
    topic: str | None = None
    shards: tuple[int, ...] | None = None
    route: str | None = None
    data: bytes = b""
    format: str = "binary"
    prefetch: int = 8192
    batch_size: int = 8192
    max_rows_per_batch: int | None = None
    max_rows_per_partition: int | None = None
    starting_offsets: str | dict[str, dict[str, int]] = "earliest"
    timeout: float = 60.0
    data_mime_type: str = "application/json"
    batch_bytes: int = DEFAULT_BATCH_BYTES

    @property
    def log_topic(self) -> str:
        """The topic, in log mode.

        :raises ValueError: not in log mode (no option ``topic``)."""
        if self.topic is None:
            raise ValueError("rsocket option 'topic' is needed here (the offsets protocol)")
        return self.topic

    @property
    def log_mode(self) -> bool:
        """True when reading a StreamLog topic (offsets protocol)."""
        return self.topic is not None


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Option ``name`` (case-insensitive) or None."""
    value = options.get(name)
    if value is None:
        lowered = name.lower()
        for key, v in options.items():
            if key.lower() == lowered:
                return v
    return value


@overload
def parse_positive_int(options: Mapping[str, str], name: str, default: int,
                       maximum: int = ...) -> int: ...


@overload
def parse_positive_int(options: Mapping[str, str], name: str, default: None,
                       maximum: int = ...) -> int | None: ...


def parse_positive_int(options: Mapping[str, str], name: str, default: int | None,
                       maximum: int = 0x7FFFFFFF) -> int | None:
    """Option ``name`` as an int in [1, maximum], or ``default`` when absent.

    :raises ValueError: not an integer, or out of range (the message names the option)."""
    raw = _get(options, name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(str(raw).strip().replace("_", ""))
    except ValueError:
        raise ValueError(f"rsocket option {name!r} must be an integer, got {raw!r}") from None
    if not 1 <= value <= maximum:
        raise ValueError(f"rsocket option {name!r} must be in [1, {maximum}], got {value}")
    return value


def split_endpoints(raw: str | None, name: str = "endpoints") -> tuple[str, ...]:
    """Comma-separated endpoints, stripped, deduplicated in order.

    :raises ValueError: missing or empty (naming ``name``)."""
    if raw is None or not str(raw).strip():
        raise ValueError(f"rsocket option {name!r} is required: comma-separated endpoints, "
                         f"e.g. 'tcp://127.0.0.1:7878' or 'tcp:host=127.0.0.1:port=7878'")
    seen: list[str] = []
    for part in str(raw).split(","):
        part = part.strip()
        if part and part not in seen:
            seen.append(part)
    if not seen:
        raise ValueError(f"rsocket option {name!r} names no endpoint: {raw!r}")
    return tuple(seen)


def _check_endpoint(endpoint: str) -> None:
    """Parse ``endpoint`` like :func:`rsocket_tx.connect` would (no connection is made).

    :raises ValueError: it cannot be parsed (naming the option)."""
    from twisted.internet import reactor as global_reactor  # never run here: only parsed

    from rsocket_tx.transports.endpoints import client_endpoint
    try:
        client_endpoint(global_reactor, endpoint)
    except Exception as exc:  # noqa: BLE001 - any parse error is the user's option
        raise ValueError(f"rsocket option 'endpoints': cannot parse endpoint {endpoint!r}: "
                         f"{exc}") from None


def _parse_offsets(raw: str) -> str | dict[str, dict[str, int]]:
    text = raw.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    ok = isinstance(value, dict) and all(
        isinstance(ep, str) and isinstance(shards, dict) and all(
            isinstance(k, str) and k.lstrip("-").isdigit() and isinstance(v, int)
            and not isinstance(v, bool) and v >= 0 for k, v in shards.items())
        for ep, shards in value.items())
    if not ok:
        raise ValueError("rsocket option 'startingOffsets' must be 'earliest', 'latest' or JSON "
                         '{"<endpoint>": {"<shard>": <offset>, ...}, ...} with offsets >= 0, '
                         f"got {raw!r}")
    return {ep: {str(int(k)): v for k, v in shards.items()} for ep, shards in value.items()}


def parse_read_options(options: Mapping[str, str], *, streaming: bool = False) -> ReadOptions:
    """Check the reader options given to ``spark.read`` / ``spark.readStream``.

    :param options: Spark's (case-insensitive) options.
    :param streaming: a streaming read (``topic`` is then required).
    :raises ValueError: an option is missing, unknown, malformed or out of range; the message
        names it.
    """
    check_option_names(options, READ_OPTIONS, "read")
    endpoints = split_endpoints(_get(options, "endpoints") or _get(options, "path"))
    for endpoint in endpoints:
        _check_endpoint(endpoint)
    topic = _get(options, "topic")
    route = _get(options, "route")
    data = _get(options, "data")
    if topic is not None and not topic.strip():
        raise ValueError("rsocket option 'topic' is empty")
    if topic is not None and route is not None:
        raise ValueError("rsocket options 'topic' (log mode) and 'route' (generic "
                         "request-stream mode) exclude each other: give one")
    if topic is None and route is None:
        raise ValueError("rsocket read needs option 'topic' (a StreamLog topic) or option "
                         "'route' (a request-stream route, with 'data')")
    if streaming and topic is None:
        raise ValueError("a streaming rsocket read needs option 'topic': streaming reads are "
                         "replayable only through the offsets protocol (log.offsets/log.read)")
    if topic is not None and data is not None:
        raise ValueError("rsocket option 'data' is for generic mode ('route'); with 'topic' "
                         "the reader builds the log.read requests itself")
    shards = None
    raw = _get(options, "shards")
    if raw is not None:
        if topic is None:
            raise ValueError("rsocket option 'shards' needs option 'topic'")
        try:
            shards = tuple(sorted({int(s) for s in raw.split(",") if s.strip()}))
        except ValueError:
            raise ValueError(f"rsocket option 'shards' must be comma-separated shard numbers, "
                             f"got {raw!r}") from None
        if not shards or min(shards) < 0:
            raise ValueError(f"rsocket option 'shards' must list shard numbers >= 0, "
                             f"got {raw!r}")
    fmt = (_get(options, "format") or "binary").strip().lower()
    if fmt not in FORMATS:
        raise ValueError(f"rsocket option 'format' must be one of {', '.join(FORMATS)}, "
                         f"got {fmt!r}")
    max_rows_per_batch = parse_positive_int(options, "maxRowsPerBatch", None)
    max_rows_per_partition = parse_positive_int(options, "maxRowsPerPartition", None)
    if max_rows_per_partition is not None and topic is None:
        raise ValueError("rsocket option 'maxRowsPerPartition' needs option 'topic'")
    raw = _get(options, "startingOffsets")
    starting = "earliest" if raw is None else _parse_offsets(raw)
    timeout_ms = parse_positive_int(options, "timeout", 60000)
    mime = _get(options, "dataMimeType") or (ARROW_MIME if fmt == "arrow" else
                                             "application/json")
    raw = _get(options, "batchBytes")
    batch_bytes = DEFAULT_BATCH_BYTES
    if raw is not None and str(raw).strip():
        try:
            batch_bytes = int(str(raw).strip().replace("_", ""))
        except ValueError:
            batch_bytes = -1
        if batch_bytes != 0 and not 64 <= batch_bytes <= MAX_BATCH_BYTES:
            raise ValueError(f"rsocket option 'batchBytes' must be 0 or an integer in [64, "
                             f"{MAX_BATCH_BYTES}], got {raw!r}")
    return ReadOptions(
        endpoints=endpoints, topic=topic, shards=shards, route=route,
        data=(data or "").encode("utf-8"), format=fmt,
        prefetch=parse_positive_int(options, "prefetch", 8192),
        batch_size=parse_positive_int(options, "batchSize", 8192),
        max_rows_per_batch=max_rows_per_batch, max_rows_per_partition=max_rows_per_partition,
        starting_offsets=starting, timeout=timeout_ms / 1000.0, data_mime_type=mime,
        batch_bytes=batch_bytes)
