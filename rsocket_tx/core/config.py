"""Connection settings and their limits (every limit a peer controls is bounded here)."""

from __future__ import annotations

from dataclasses import dataclass

from .framing import MAX_FRAME_LENGTH
from .lease import DEFAULT_LEASE_GRACE

__all__ = [
    "ConnectionConfig",
    "DEFAULT_DRAIN_TIMEOUT",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_LEASE_GRACE",
    "DEFAULT_MAX_CONCURRENT_STREAMS",
    "DEFAULT_MAX_CONNECTIONS",
    "DEFAULT_MAX_LIFETIME",
    "DEFAULT_MAX_LIFETIME_LIMIT",
    "DEFAULT_MAX_REASSEMBLED_SIZE",
    "DEFAULT_MAX_RESUME_BUFFER_SIZE",
    "DEFAULT_MAX_REASSEMBLY_BUFFER_SIZE",
    "DEFAULT_MAX_RESUME_SESSIONS",
    "DEFAULT_MAX_SEND_BUFFER_SIZE",
    "DEFAULT_MAX_SETUP_FRAME_SIZE",
    "DEFAULT_MAX_STREAM_WINDOW",
    "DEFAULT_STREAM_WINDOW_BYTES",
    "DEFAULT_OUTBOUND_FRAME_LIMIT",
    "DEFAULT_RECONNECT_INITIAL_DELAY",
    "DEFAULT_RECONNECT_JITTER",
    "DEFAULT_RECONNECT_MAX_DELAY",
    "DEFAULT_RESUME_SESSION_TIMEOUT",
    "DEFAULT_SETUP_TIMEOUT",
    "MAX_MILLISECONDS",
    "MIN_FRAGMENT_SIZE",
    "SUPPORTED_VERSIONS",
    "check_milliseconds",
]

#: The longest time any setting or frame field may give: 2^31-1 milliseconds (about 24.8 days).
MAX_MILLISECONDS = 0x7FFFFFFF
DEFAULT_KEEPALIVE_INTERVAL = 20_000  # ms
DEFAULT_MAX_LIFETIME = 90_000  # ms
DEFAULT_MAX_REASSEMBLED_SIZE = 64 * 1024 * 1024  # bytes
DEFAULT_SETUP_TIMEOUT = 30_000  # ms
#: Streams the peer may have open towards us at once. Reactor's flatMap (what Java clients
#: usually pipeline requests with) keeps 256 in flight, and 256 bounds the stream state a peer
#: can pin on one connection to about 0.6 MiB (measured: an outstanding request answered by a
#: coroutine holds 2.3 KiB; docs: Limits, "Memory budget").
DEFAULT_MAX_CONCURRENT_STREAMS = 256
#: Bytes waiting in the transport for a peer to read before it counts as not reading. The
#: default max reassembled size: a payload as large as the largest we accept, sent in one
#: write, fits.
DEFAULT_MAX_SEND_BUFFER_SIZE = 64 * 1024 * 1024  # bytes
#: Bytes of small items a request-stream or channel may ask for ahead of the application
#: (docs: Flow control): four reads of 64 KiB, so that the responder keeps sending while
#: the requester consumes, instead of idling a round trip per ``prefetch`` window.
DEFAULT_STREAM_WINDOW_BYTES = 256 * 1024  # bytes
#: The most items that byte window may reach on one stream (a bound on the items buffered
#: when they are tiny).
DEFAULT_MAX_STREAM_WINDOW = 8192  # items
#: How long a graceful close waits for outstanding streams before it closes anyway.
DEFAULT_DRAIN_TIMEOUT = 10_000  # ms
#: Bytes of sent frames kept for resumption (spec §Resuming Operation).
DEFAULT_MAX_RESUME_BUFFER_SIZE = 16 * 1024 * 1024  # bytes
#: How long a resumable session outlives its transport: the server keeps it detached that long
#: waiting for RESUME, the client keeps reconnecting that long (rsocket-java's default).
DEFAULT_RESUME_SESSION_TIMEOUT = 120_000  # ms
#: Resumable sessions a server keeps at once, attached or detached.
DEFAULT_MAX_RESUME_SESSIONS = 10_000
#: Client reconnection backoff: the first retry waits this long, each next one twice as long,
#: up to the maximum.
DEFAULT_RECONNECT_INITIAL_DELAY = 100  # ms
DEFAULT_RECONNECT_MAX_DELAY = 10_000  # ms
#: Fraction (0..1) of each reconnection delay by which a random jitter may move it, up or
#: down, for the reconnecting and load-balancing clients (:mod:`rsocket_tx.reconnect`); a
#: resumable client's own reconnection uses none.
DEFAULT_RECONNECT_JITTER = 0.5
MIN_FRAGMENT_SIZE = 64  # bytes
#: The largest first frame (SETUP or RESUME) a server buffers before the connection is set up,
#: in bytes without the length prefix. 128 KiB holds any RESUME (its token is at most 65,535
#: bytes) and a SETUP with the longest token and MIME types plus some 60 KiB of setup data and
#: metadata (credentials, routing, tracing): bearer tokens and JWTs are a few KiB. It bounds
#: what a connection that never completes SETUP can make the server hold (docs: Limits).
DEFAULT_MAX_SETUP_FRAME_SIZE = 128 * 1024  # bytes
#: Bytes one connection may hold in unfinished reassemblies across all its streams: one
#: payload of the default ``max_reassembled_size`` (or many smaller ones) at a time.
DEFAULT_MAX_REASSEMBLY_BUFFER_SIZE = DEFAULT_MAX_REASSEMBLED_SIZE  # bytes
#: Connections a server keeps open at once (transports, counted from accept to close); the
#: protocol-neutral default of :mod:`rsocket_tx.transports.limits` too. With
#: :data:`DEFAULT_MAX_CONCURRENT_STREAMS` it keeps the connection and stream state of a server
#: on the defaults within about 2.4 GiB (docs: Limits, "Memory budget").
DEFAULT_MAX_CONNECTIONS = 4096
#: The largest max lifetime a client may declare in SETUP, in ms: 10 minutes, the longest
#: default of the common clients (rsocket-py; rsocket-java and rsocket_tx use 90 s). Past it
#: a silent (half-open) connection would hold its memory for up to 24.9 days.
DEFAULT_MAX_LIFETIME_LIMIT = 600_000  # ms
#: (major, minor) versions a server accepts in SETUP: 1.0, and 0.2 of the drafts, which is
#: wire-compatible with 1.0.
SUPPORTED_VERSIONS = frozenset({(1, 0), (0, 2)})


#: The largest frame we send when no fragment size is set, in bytes (without the length
#: prefix): the 24-bit maximum (RSocket 1.0 Protocol §Framing) less 3.  rsocket-java 1.1, the
#: reference implementation, reads TCP frames with Netty's length-field decoder, whose
#: 16,777,215-byte limit counts the 3-byte length prefix too: it silently drops a larger
#: frame.  Sending at most this keeps every peer reading what we send.
DEFAULT_OUTBOUND_FRAME_LIMIT = MAX_FRAME_LENGTH - 3


@dataclass(slots=True, kw_only=True)
class ConnectionConfig:
    """Settings of one :class:`~rsocket_tx.core.connection.RSocketConnection`.

    :param keepalive_interval: client: milliseconds between KEEPALIVE frames it sends (SETUP
        field). Must be in [1, 2^31-1].
    :param max_lifetime: client: milliseconds without any frame from the server before the
        connection is declared dead (SETUP field). A server uses the value from the client's
        SETUP. Must be in [1, 2^31-1].
    :param fragment_size: the largest frame we send, in bytes, counting the RSocket frame header
        and excluding the 3-byte length prefix of TCP; larger payloads are fragmented (spec
        §Fragmentation And Reassembly). ``None``: fragment only what would not fit a frame
        that every peer reads (:data:`DEFAULT_OUTBOUND_FRAME_LIMIT`, 16,777,212 bytes). At
        least 64.
    :param max_frame_size: the largest inbound frame accepted, in bytes (excluding the length
        prefix); a larger one is a CONNECTION_ERROR. At most and by default 16,777,215.
    :param max_reassembled_size: the largest payload (data + metadata bytes) reassembled from
        inbound fragments; past it, only that stream ends (ERROR[INVALID] or CANCEL to the
        peer, :class:`~rsocket_tx.core.errors.PayloadTooLargeError` locally). Default 64 MiB.
    :param max_setup_frame_size: server: the largest first frame (SETUP or RESUME) accepted
        before the connection is set up, in bytes (excluding the length prefix). A length
        prefix announcing more is answered with ERROR[INVALID_SETUP] and the connection
        closes at once, nothing of the frame buffered; after SETUP ``max_frame_size`` applies.
        Default 131,072 (128 KiB), in [64, ``max_frame_size``] (a larger value counts as
        ``max_frame_size``).
    :param max_reassembly_buffer_size: bytes one connection may hold in unfinished
        reassemblies (spec §Fragmentation And Reassembly) across all its streams. A fragment
        that would pass it ends its stream and releases what the stream held: a request
        still arriving gets ERROR[REJECTED] (it was not processed), the inbound half of a
        channel we respond to ERROR[CANCELED], a response we receive CANCEL (locally
        :class:`~rsocket_tx.core.errors.ReassemblyBudgetError`); the connection stays up.
        Never less than ``max_reassembled_size`` (one largest payload always fits). Default
        64 MiB, at least 1.
    :param setup_timeout: server: milliseconds a new connection may take to send SETUP.
    :param max_lifetime_limit: server: the largest max lifetime a client may declare in its
        SETUP, in milliseconds; a larger one is refused with ERROR[UNSUPPORTED_SETUP] (spec
        §Connection Establishment). 0: no limit. Default 600,000 (10 minutes).
    :param max_connections: server: connections (transports) open at once, counted by the
        server factory from accept to close; past it a new connection is closed at once,
        before any RSocket state is allocated, and the log says so (see
        :class:`~rsocket_tx.transports.limits.ConnectionLimit`). Default 4,096, at least 1.
    :param max_concurrent_streams: how many streams the *peer* may have open towards us at once
        (requests it made that have not ended, including requests still arriving in fragments;
        a fire-and-forget holds no stream). A request past it is answered with ERROR[REJECTED]
        naming the limit; the connection stays up. Default 256, at least 1.
    :param max_send_buffer_size: bytes that may wait in the transport for the peer to read:
        the write that filled the transport's buffer (it paused us) plus what we write until
        it has drained (it resumes us). Past it the peer is taken not to read: the connection
        is aborted and outstanding requests fail with
        :class:`~rsocket_tx.core.errors.ExcessiveBufferingError`. Enforced by the transport
        layer (:class:`~rsocket_tx.protocol.RSocketProtocol`). Default 64 MiB, at least 1.
    :param drain_timeout: graceful close (ours, or the peer's ERROR[CONNECTION_CLOSE]):
        milliseconds outstanding streams get to finish before the connection closes anyway.
        0 closes at once. Default 10,000.
    :param max_resume_buffer_size: resumable connections: bytes of sent frames kept so that a
        resumed connection can send again what the peer missed (spec §Resuming Operation;
        frames count without the length prefix). Frames acknowledged by the peer (KEEPALIVE,
        RESUME, RESUME_OK positions) are dropped; past the bound the oldest are dropped too, and
        a resume that would need them is refused with ERROR[REJECTED_RESUME]. Default 16 MiB,
        at least 1.
    :param resume: server: accept SETUP with the R flag and RESUME (spec §Resuming Operation).
        False (the default): SETUP with R is answered ERROR[REJECTED_SETUP], RESUME
        ERROR[REJECTED_RESUME]. A client resumes when its SETUP carries a resume token.
    :param resume_session_timeout: resumable connections: milliseconds a session outlives its
        transport. The server keeps a detached session that long waiting for RESUME (after it
        a RESUME gets ERROR[REJECTED_RESUME]); the client keeps reconnecting that long. Then
        outstanding requests fail with :class:`~rsocket_tx.core.errors.ConnectionLostError`.
        Default 120,000.
    :param max_resume_sessions: server: resumable sessions kept at once (attached or detached);
        a SETUP with R past it is refused with ERROR[REJECTED_SETUP]. Default 10,000.
    :param reconnect_initial_delay: resumable client: milliseconds before the first reconnection
        attempt after its transport is lost; each further attempt waits twice as long as the
        one before, up to ``reconnect_max_delay`` (:class:`~rsocket_tx.core.resume.Backoff`,
        without jitter). 0 retries at once, then after 1, 2, 4, ... ms. Default 100.
    :param reconnect_max_delay: resumable client: the longest wait between two attempts,
        milliseconds. Default 10,000.
    :param lease_grace: connections with leases (the client's SETUP has the L flag; spec
        §Lease Semantics): milliseconds a lease we granted stays valid past its time-to-live,
        because the peer counts the time-to-live from the LEASE's arrival and its request
        still travels back to us (at least a round trip). A request past the time-to-live plus
        this grace is answered with ERROR[REJECTED]. Default 1,000; 0 is strict.
    :param stream_window_bytes: the request-n window of the request-streams and channels we
        make without a ``prefetch`` of our own, sized by bytes as well as items (RSocket 1.0
        Protocol §Flow Control): 256 items are requested up front; while the items
        that arrive are small, the window grows to as many items of the largest size seen as
        fit this many bytes (counting data + metadata + 1 per item), at most
        ``max_stream_window`` items; REQUEST_N tops it up each time half of it has been
        consumed. A window never shrinks below 256 items. 0: the window stays 256 items.
        Default 262,144 (256 KiB). Byte-stream transports only: over a message transport
        (WebSocket) each item is a message and the window stays 256 items.
    :param max_stream_window: the most items that byte window may grow to (such a stream
        buffers at most ``max(256, max_stream_window)`` items). Default 8,192, at least 1.
    :param length_prefixed: True for byte-stream transports (TCP): frames carry the 24-bit
        length prefix. False for message transports (WebSocket).
    :raises ValueError: a setting is out of range (see :meth:`validate`).
    """

    keepalive_interval: int = DEFAULT_KEEPALIVE_INTERVAL
    max_lifetime: int = DEFAULT_MAX_LIFETIME
    fragment_size: int | None = None
    max_frame_size: int = MAX_FRAME_LENGTH
    max_reassembled_size: int = DEFAULT_MAX_REASSEMBLED_SIZE
    max_setup_frame_size: int = DEFAULT_MAX_SETUP_FRAME_SIZE
    max_reassembly_buffer_size: int = DEFAULT_MAX_REASSEMBLY_BUFFER_SIZE
    setup_timeout: int = DEFAULT_SETUP_TIMEOUT
    max_lifetime_limit: int = DEFAULT_MAX_LIFETIME_LIMIT
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS
    max_send_buffer_size: int = DEFAULT_MAX_SEND_BUFFER_SIZE
    drain_timeout: int = DEFAULT_DRAIN_TIMEOUT
    max_resume_buffer_size: int = DEFAULT_MAX_RESUME_BUFFER_SIZE
    resume: bool = False
    resume_session_timeout: int = DEFAULT_RESUME_SESSION_TIMEOUT
    max_resume_sessions: int = DEFAULT_MAX_RESUME_SESSIONS
    reconnect_initial_delay: int = DEFAULT_RECONNECT_INITIAL_DELAY
    reconnect_max_delay: int = DEFAULT_RECONNECT_MAX_DELAY
    lease_grace: int = DEFAULT_LEASE_GRACE
    stream_window_bytes: int = DEFAULT_STREAM_WINDOW_BYTES
    max_stream_window: int = DEFAULT_MAX_STREAM_WINDOW
    length_prefixed: bool = True

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Check every setting.

        :raises ValueError: with the name of the setting, its value and the allowed range.
        """
        _check_range("keepalive_interval", self.keepalive_interval, 1, 0x7FFFFFFF, "ms")
        _check_range("max_lifetime", self.max_lifetime, 1, 0x7FFFFFFF, "ms")
        if self.fragment_size is not None:
            _check_range("fragment_size", self.fragment_size, MIN_FRAGMENT_SIZE,
                         MAX_FRAME_LENGTH, "bytes")
        _check_range("max_frame_size", self.max_frame_size, 64, MAX_FRAME_LENGTH, "bytes")
        _check_range("max_reassembled_size", self.max_reassembled_size, 1, 2**62, "bytes")
        _check_range("max_setup_frame_size", self.max_setup_frame_size, 64, MAX_FRAME_LENGTH,
                     "bytes")
        _check_range("max_reassembly_buffer_size", self.max_reassembly_buffer_size, 1, 2**62,
                     "bytes")
        _check_range("setup_timeout", self.setup_timeout, 1, 2**31 - 1, "ms")
        _check_range("max_lifetime_limit", self.max_lifetime_limit, 0, 0x7FFFFFFF, "ms")
        _check_range("max_connections", self.max_connections, 1, 2**31 - 1, "connections")
        _check_range("max_concurrent_streams", self.max_concurrent_streams, 1, 2**31 - 1,
                     "streams")
        _check_range("max_send_buffer_size", self.max_send_buffer_size, 1, 2**62, "bytes")
        check_drain_timeout(self.drain_timeout)
        _check_range("max_resume_buffer_size", self.max_resume_buffer_size, 1, 2**62, "bytes")
        if not isinstance(self.resume, bool):
            raise ValueError(f"resume must be True or False, got {self.resume!r}")
        _check_range("resume_session_timeout", self.resume_session_timeout, 1, 2**31 - 1, "ms")
        _check_range("max_resume_sessions", self.max_resume_sessions, 1, 2**31 - 1,
                     "sessions")
        _check_range("reconnect_initial_delay", self.reconnect_initial_delay, 0, 2**31 - 1, "ms")
        _check_range("reconnect_max_delay", self.reconnect_max_delay,
                     self.reconnect_initial_delay, 2**31 - 1, "ms")
        _check_range("lease_grace", self.lease_grace, 0, 2**31 - 1, "ms")
        _check_range("stream_window_bytes", self.stream_window_bytes, 0, 2**62, "bytes")
        _check_range("max_stream_window", self.max_stream_window, 1, 2**31 - 1, "items")

    @property
    def setup_frame_limit(self) -> int:
        """The largest first frame a server accepts, in bytes: ``max_setup_frame_size``, at
        most ``max_frame_size``."""
        return min(self.max_setup_frame_size, self.max_frame_size)

    @property
    def reassembly_budget(self) -> int:
        """Bytes one connection may hold in reassembly: ``max_reassembly_buffer_size``, at
        least ``max_reassembled_size``."""
        return max(self.max_reassembly_buffer_size, self.max_reassembled_size)

    @property
    def outbound_frame_limit(self) -> int:
        """The largest frame we send, in bytes (fragment size, or
        :data:`DEFAULT_OUTBOUND_FRAME_LIMIT`)."""
        return self.fragment_size or DEFAULT_OUTBOUND_FRAME_LIMIT


def check_drain_timeout(value: object) -> None:
    """Check a drain timeout (milliseconds, 0 .. 2^31-1).

    :raises ValueError: naming ``drain_timeout``, its value and the allowed range.
    """
    _check_range("drain_timeout", value, 0, 2**31 - 1, "ms")


def check_milliseconds(name: str, value: object, minimum: int = 0) -> None:
    """Check a time setting: an int of milliseconds in [``minimum``, 2^31-1] (the spec's
    limit on times, about 24.8 days).

    :raises ValueError: naming ``name``, when it is not.
    """
    if isinstance(value, bool) or not isinstance(value, int) or \
            not minimum <= value <= MAX_MILLISECONDS:
        raise ValueError(f"{name} must be an integer number of milliseconds in "
                         f"[{minimum}, {MAX_MILLISECONDS}], got {value!r}")


def _check_range(name: str, value: object, low: int, high: int, unit: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}] {unit}, got {value!r}")
