"""Connection settings and their limits (every limit a peer controls is bounded here)."""

from __future__ import annotations

from dataclasses import dataclass

from .framing import MAX_FRAME_LENGTH

__all__ = [
    "ConnectionConfig",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_MAX_LIFETIME",
    "DEFAULT_MAX_REASSEMBLED_SIZE",
    "DEFAULT_SETUP_TIMEOUT",
    "MIN_FRAGMENT_SIZE",
    "SUPPORTED_VERSIONS",
]

DEFAULT_KEEPALIVE_INTERVAL = 20_000  # ms
DEFAULT_MAX_LIFETIME = 90_000  # ms
DEFAULT_MAX_REASSEMBLED_SIZE = 64 * 1024 * 1024  # bytes
DEFAULT_SETUP_TIMEOUT = 30_000  # ms
MIN_FRAGMENT_SIZE = 64  # bytes
#: (major, minor) versions a server accepts in SETUP: 1.0, and 0.2 of the drafts, which is
#: wire-compatible with 1.0.
SUPPORTED_VERSIONS = frozenset({(1, 0), (0, 2)})


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
        §Fragmentation And Reassembly). ``None``: fragment only what would not fit a frame at
        all (16,777,215 bytes). At least 64.
    :param max_frame_size: the largest inbound frame accepted, in bytes (excluding the length
        prefix); a larger one is a CONNECTION_ERROR. At most and by default 16,777,215.
    :param max_reassembled_size: the largest payload (data + metadata bytes) reassembled from
        inbound fragments; past it, only that stream ends (ERROR[INVALID] or CANCEL to the
        peer, :class:`~rsocket_tx.core.errors.PayloadTooLargeError` locally). Default 64 MiB.
    :param setup_timeout: server: milliseconds a new connection may take to send SETUP.
    :param length_prefixed: True for byte-stream transports (TCP): frames carry the 24-bit
        length prefix. False for message transports (WebSocket).
    :raises ValueError: a setting is out of range (see :meth:`validate`).
    """

    keepalive_interval: int = DEFAULT_KEEPALIVE_INTERVAL
    max_lifetime: int = DEFAULT_MAX_LIFETIME
    fragment_size: int | None = None
    max_frame_size: int = MAX_FRAME_LENGTH
    max_reassembled_size: int = DEFAULT_MAX_REASSEMBLED_SIZE
    setup_timeout: int = DEFAULT_SETUP_TIMEOUT
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
        _check_range("setup_timeout", self.setup_timeout, 1, 2**31 - 1, "ms")

    @property
    def outbound_frame_limit(self) -> int:
        """The largest frame we send, in bytes (fragment size, or the 24-bit maximum)."""
        return self.fragment_size or MAX_FRAME_LENGTH


def _check_range(name: str, value: object, low: int, high: int, unit: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{name} must be an integer in [{low}, {high}] {unit}, got {value!r}")
