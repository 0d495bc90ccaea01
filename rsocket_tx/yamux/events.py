"""Events returned by :class:`~rsocket_tx.yamux.connection.YamuxConnection`.

Each event is a slotted dataclass; the Twisted layer dispatches on ``type(event)``
(:attr:`~rsocket_tx.bridge.MuxProtocol.event_handlers`).
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import ConnectionClosedError

__all__ = [
    "Event",
    "StreamOpened",
    "StreamAccepted",
    "DataReceived",
    "StreamEnded",
    "StreamReset",
    "WindowUpdated",
    "PongReceived",
    "PingTimedOut",
    "GoAwayReceived",
    "ConnectionClosed",
]


class Event:
    """Base class of every event."""

    __slots__ = ()


@dataclass(slots=True)
class StreamOpened(Event):
    """The peer opened ``stream_id`` (SYN). Answer with
    :meth:`~rsocket_tx.yamux.connection.YamuxConnection.accept_stream` (ACK) or
    :meth:`~rsocket_tx.yamux.connection.YamuxConnection.reset_stream` (RST). Its data may
    follow at once (spec.md "Opening a stream")."""

    stream_id: int


@dataclass(slots=True)
class StreamAccepted(Event):
    """The peer accepted ``stream_id``, one we opened (ACK)."""

    stream_id: int


@dataclass(slots=True)
class DataReceived(Event):
    """Data arrived on ``stream_id``. Once the application has consumed it, call
    :meth:`~rsocket_tx.yamux.connection.YamuxConnection.consume` so the window opens again."""

    stream_id: int
    data: bytes


@dataclass(slots=True)
class StreamEnded(Event):
    """The peer half-closed ``stream_id`` (FIN): it sends no more data. When ``closed``, our
    half was closed already and the stream is gone."""

    stream_id: int
    closed: bool


@dataclass(slots=True)
class StreamReset(Event):
    """``stream_id`` was reset and is gone: the peer's RST (``by_peer``; also how it refuses a
    stream), or ours after ``stream_close_timeout``.

    :ivar reason: words for what happened.
    """

    stream_id: int
    by_peer: bool
    reason: str


@dataclass(slots=True)
class WindowUpdated(Event):
    """The peer's Window Update opened our send window on ``stream_id`` to ``window`` bytes."""

    stream_id: int
    window: int


@dataclass(slots=True)
class PongReceived(Event):
    """The answer to our Ping ``opaque`` arrived (``keepalive``: the keepalive's own)."""

    opaque: int
    keepalive: bool


@dataclass(slots=True)
class PingTimedOut(Event):
    """Our Ping ``opaque`` (from :meth:`~rsocket_tx.yamux.connection.YamuxConnection.ping`)
    had no answer within ``ping_timeout`` seconds."""

    opaque: int


@dataclass(slots=True)
class GoAwayReceived(Event):
    """The peer sent Go Away "normal termination": it accepts no new stream; the open ones go
    on (spec.md "Session termination")."""

    code: int


@dataclass(slots=True)
class ConnectionClosed(Event):
    """The session ended; every stream is gone (their resets are not reported one by one).

    :ivar error: why (:class:`~rsocket_tx.yamux.errors.ConnectionClosedError`: its
        ``by_peer``, ``code`` and ``reason``).
    """

    error: ConnectionClosedError
