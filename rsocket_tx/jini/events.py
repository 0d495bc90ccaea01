"""Events returned by :class:`~rsocket_tx.jini.connection.JiniMuxConnection`.

Each event is a slotted dataclass; the Twisted layer dispatches on ``type(event)``.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Event",
    "ConnectionEstablished",
    "SessionOpened",
    "DataReceived",
    "RationIncreased",
    "SessionAborted",
    "SessionClosed",
    "SessionReleased",
    "AcknowledgmentReceived",
    "PingAckReceived",
    "ShutdownReceived",
    "ConnectionTerminated",
]


class Event:
    """Base class of every event."""

    __slots__ = ()


@dataclass(slots=True)
class ConnectionEstablished(Event):
    """The peer's connection header arrived: the client may now open sessions
    (§Connection Establishment).

    :ivar peer_ration: the initial ration the peer announced, in bytes: our initial outbound
        ration on every new session; None means unlimited.
    """

    peer_ration: int | None


@dataclass(slots=True)
class SessionOpened(Event):
    """Server: the client established session ``session_id`` (a *Data* with ``open``); its
    request data follows as :class:`DataReceived` (the same message may carry some, and eof)."""

    session_id: int


@dataclass(slots=True)
class DataReceived(Event):
    """The next fragment of the session's request (server) or response (client) data.

    The application reports the bytes it has consumed with
    :meth:`~rsocket_tx.jini.connection.JiniMuxConnection.acknowledge_received_data`; the
    ration granted to the peer follows that reading.

    :ivar data: the bytes (may be empty when ``eof`` is set).
    :ivar eof: the peer finished sending for this session.
    :ivar ack_required: client: the server asks for an *Acknowledgment* once the response has
        been processed (:meth:`~rsocket_tx.jini.connection.JiniMuxConnection.acknowledge`).
    """

    session_id: int
    data: bytes
    eof: bool = False
    ack_required: bool = False


@dataclass(slots=True)
class RationIncreased(Event):
    """The peer's *IncrementRation* raised our outbound ration on the session.

    :ivar increment: bytes added.
    :ivar available: our outbound ration now, in bytes.
    """

    session_id: int
    increment: int
    available: int


@dataclass(slots=True)
class SessionAborted(Event):
    """The session ended abnormally: the peer's *Abort*, the connection ending before the
    session, a *Shutdown*, or (``by_peer`` False) our own limits (buffering).

    Client: the session id stays in use until the session is terminated with respect to
    both endpoints; :class:`SessionReleased` says when it may be reused.

    :ivar partial: client: the request may have been partially processed (an *Abort* with the
        partial flag, an *Error*, a lost connection); False: it is safe to retry it.
        Server: always False.
    :ivar detail: the peer's detail text, or a local reason.
    :ivar by_peer: the peer ended the session (an *Abort*), rather than the connection's end or
        a local limit.
    """

    session_id: int
    partial: bool
    detail: str = ""
    by_peer: bool = True


@dataclass(slots=True)
class SessionClosed(Event):
    """Client: the server closed the session normally (*Close*, or a *Data* with ``close``):
    the response received is complete.

    :ivar request_complete: we had sent eof. When False, the server is not interested in the
        rest of the request: we sent *Abort* for it (§Close Message), and the application
        should silently discard what it still had to send.
    """

    session_id: int
    request_complete: bool


@dataclass(slots=True)
class SessionReleased(Event):
    """Client: the session is terminated with respect to both endpoints: its id may be reused
    (§Session Termination)."""

    session_id: int


@dataclass(slots=True)
class AcknowledgmentReceived(Event):
    """Server: the outcome of a *Data* sent with ``ackRequired`` (§Data Message).

    :ivar positive: True for the client's *Acknowledgment*; False when one can no longer come
        (the client's *Abort*, the id opened again, the connection ended).
    """

    session_id: int
    positive: bool = True


@dataclass(slots=True)
class PingAckReceived(Event):
    """The peer answered our *Ping* with this ``cookie``."""

    cookie: int


@dataclass(slots=True)
class ShutdownReceived(Event):
    """Client: the server is shutting the connection down gracefully (§Shutdown Message).
    Sessions it had not finished are reported as :class:`SessionAborted` without ``partial``
    (safe to retry elsewhere); :class:`ConnectionTerminated` follows."""

    detail: str


@dataclass(slots=True)
class ConnectionTerminated(Event):
    """The connection is over; nothing more will be sent or delivered. Sessions still in
    progress were reported as :class:`SessionAborted` just before.

    :ivar reason: human-readable reason.
    :ivar by_peer: the peer ended it (its *Error* or *Shutdown*, or the transport was lost);
        False: we did (a violation we detected, a timeout, our *Shutdown*).
    :ivar error_sent: we queued an *Error* message (the peer violated the protocol); the
        caller writes what is queued, then closes the transport.
    """

    reason: str
    by_peer: bool
    error_sent: bool = False
