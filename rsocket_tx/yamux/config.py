"""Settings of a yamux session: one validated object, a unit on every field (one settings
object travels: the face builds it, the protocol and the connection read it)."""

from __future__ import annotations

from dataclasses import dataclass

from .codec import INITIAL_WINDOW, MAX_U32

__all__ = [
    "YamuxConfig",
    "DEFAULT_ACCEPT_BACKLOG",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "DEFAULT_MAX_SEND_BUFFER_SIZE",
    "DEFAULT_MAX_STREAMS",
    "DEFAULT_PING_TIMEOUT",
    "DEFAULT_SEND_FRAME_SIZE",
    "DEFAULT_STREAM_CLOSE_TIMEOUT",
]

DEFAULT_MAX_STREAMS = 1024  # streams
DEFAULT_ACCEPT_BACKLOG = 256  # streams (hashicorp/yamux's AcceptBacklog)
DEFAULT_SEND_FRAME_SIZE = 64 * 1024  # bytes
DEFAULT_KEEPALIVE_INTERVAL = 30.0  # seconds (hashicorp/yamux's KeepAliveInterval)
DEFAULT_PING_TIMEOUT = 10.0  # seconds (hashicorp/yamux's ConnectionWriteTimeout)
DEFAULT_STREAM_CLOSE_TIMEOUT = 300.0  # seconds (hashicorp/yamux's StreamCloseTimeout)
DEFAULT_MAX_SEND_BUFFER_SIZE = 16 * 1024 * 1024  # bytes


@dataclass(slots=True, kw_only=True)
class YamuxConfig:
    """Settings of one :class:`~rsocket_tx.yamux.connection.YamuxConnection` and of the
    Twisted protocol above it. Every size, count and time the peer controls has a limit here.
    Past ``max_frame_length``, a stream's receive window or ``max_window`` the peer has broken
    the protocol: Go Away (protocol error) and close. A stream opened past ``max_streams`` or
    ``accept_backlog`` is refused with RST (spec.md "Opening a stream": "reply ... with the RST
    flag to reject the stream"; hashicorp/yamux does the same past its backlog): the peer
    cannot know our limits, so that is no violation.

    :param receive_window: the window we grant each stream, bytes (spec.md "Flow Control"):
        the peer may send that much more than we have consumed. At least
        :data:`~rsocket_tx.yamux.codec.INITIAL_WINDOW` (256 KiB, which both sides assume;
        more is announced with a Window Update on the stream's first frame), at most 2^32-1.
    :param max_frame_length: the longest Data body accepted, bytes; None (the default): the
        ``receive_window`` (a longer Data would exceed the window anyway). At least 1.
    :param max_window: the largest send window the peer's Window Updates may build on one
        stream, bytes; [``INITIAL_WINDOW``, 2^32-1], default 2^32-1.
    :param max_streams: the most streams the peer may have open at once; [0, 2^31], default
        1,024.
    :param accept_backlog: the most streams the peer opened that the application has not
        accepted yet; [1, 2^31], default 256.
    :param send_frame_size: the longest Data body we send, bytes (a longer write goes out in
        several frames); [1, 2^24], default 64 KiB.
    :param keepalive_interval: seconds between the Pings we send to check the peer is alive
        (hashicorp/yamux's keepalive); None: none. Default 30.
    :param ping_timeout: seconds a Ping (ours, or the keepalive's) waits for its answer; a
        keepalive Ping unanswered ends the session. Default 10.
    :param stream_close_timeout: seconds after our FIN within which the peer's FIN must come,
        else we reset the stream (hashicorp/yamux's StreamCloseTimeout); None: wait for ever.
        Default 300.
    :param max_send_buffer_size: bytes that may wait in the transport for a peer that does not
        read; past it the connection is aborted (:class:`~rsocket_tx.bridge.MuxProtocol`).
        Default 16 MiB.
    :raises ValueError: a field out of its range, with the range.
    """

    receive_window: int = INITIAL_WINDOW
    max_frame_length: int | None = None
    max_window: int = MAX_U32
    max_streams: int = DEFAULT_MAX_STREAMS
    accept_backlog: int = DEFAULT_ACCEPT_BACKLOG
    send_frame_size: int = DEFAULT_SEND_FRAME_SIZE
    keepalive_interval: float | None = DEFAULT_KEEPALIVE_INTERVAL
    ping_timeout: float = DEFAULT_PING_TIMEOUT
    stream_close_timeout: float | None = DEFAULT_STREAM_CLOSE_TIMEOUT
    max_send_buffer_size: int = DEFAULT_MAX_SEND_BUFFER_SIZE

    def __post_init__(self) -> None:
        ints = (("receive_window", INITIAL_WINDOW, MAX_U32),
                ("max_window", INITIAL_WINDOW, MAX_U32),
                ("max_streams", 0, 2**31),
                ("accept_backlog", 1, 2**31),
                ("send_frame_size", 1, 2**24),
                ("max_send_buffer_size", 1, 2**40))
        for name, low, high in ints:
            _check_int(name, getattr(self, name), low, high)
        if self.max_frame_length is not None:
            _check_int("max_frame_length", self.max_frame_length, 1, MAX_U32)
        for name in ("keepalive_interval", "ping_timeout", "stream_close_timeout"):
            value = getattr(self, name)
            if value is None and name != "ping_timeout":
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                    not 0 < value <= 86_400 * 365:
                raise ValueError(f"{name} must be a number of seconds above 0 (at most a "
                                 f"year){'' if name == 'ping_timeout' else ', or None'}, "
                                 f"got {value!r}")

    @property
    def frame_length_limit(self) -> int:
        """The longest Data body accepted, bytes: ``max_frame_length``, or the
        ``receive_window`` when it is None."""
        limit = self.max_frame_length
        return self.receive_window if limit is None else limit


def _check_int(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"{name} must be an int in [{low}, {high}], got {value!r}")
