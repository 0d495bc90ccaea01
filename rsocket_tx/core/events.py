"""Events returned by :class:`~rsocket_tx.core.connection.RSocketConnection`.

Each event is a small slotted object; the Twisted layer dispatches on ``type(event)``.
"""

from __future__ import annotations

from typing import ClassVar

from .errors import RSocketError
from .frames import FrameType, LeaseFrame, ResumeFrame, SetupFrame
from .payload import Payload

__all__ = [
    "Event",
    "SetupReceived",
    "RequestReceived",
    "PayloadReceived",
    "PayloadsReceived",
    "RequestsReceived",
    "ResponsesReceived",
    "RequestNReceived",
    "CancelReceived",
    "StreamErrored",
    "MetadataPushReceived",
    "LeaseReceived",
    "ConnectionClosing",
    "ConnectionClosed",
    "ConnectionDetached",
    "ConnectionResumed",
    "ResumeReceived",
]


class Event:
    __slots__: tuple[str, ...] = ()
    #: the fields, for repr and ==: the ``__slots__`` again (the compiled build keeps no
    #: ``__slots__`` attribute)
    _fields: ClassVar[tuple[str, ...]] = ()

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields)
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self._fields)


class SetupReceived(Event):
    """Server: the client's SETUP arrived and passed the protocol checks (spec §SETUP).

    The application may still reject it with ``reject_setup()``; until then the connection
    behaves as accepted (spec §Connection Establishment: the client may send requests at once).
    """

    __slots__ = ("setup",)
    _fields = ("setup",)

    def __init__(self, setup: SetupFrame) -> None:
        self.setup = setup


class RequestReceived(Event):
    """A complete (reassembled) request opened stream ``stream_id`` toward our responder.

    :ivar frame_type: REQUEST_RESPONSE, REQUEST_FNF, REQUEST_STREAM or REQUEST_CHANNEL.
    :ivar initial_request_n: the credit granted with REQUEST_STREAM/REQUEST_CHANNEL, else 0.
    :ivar complete: REQUEST_CHANNEL only: the requester's side is already complete (C flag).
    """

    __slots__ = ("stream_id", "frame_type", "payload", "initial_request_n", "complete")
    _fields = ("stream_id", "frame_type", "payload", "initial_request_n", "complete")

    def __init__(self, stream_id: int, frame_type: FrameType, payload: Payload,
                 initial_request_n: int = 0, complete: bool = False) -> None:
        self.stream_id = stream_id
        self.frame_type = frame_type
        self.payload = payload
        self.initial_request_n = initial_request_n
        self.complete = complete


class PayloadReceived(Event):
    """onNext and/or onComplete on a stream: ``payload`` is None for a bare COMPLETE."""

    __slots__ = ("stream_id", "payload", "complete")
    _fields = ("stream_id", "payload", "complete")

    def __init__(self, stream_id: int, payload: Payload | None, complete: bool) -> None:
        self.stream_id = stream_id
        self.payload = payload
        self.complete = complete


class PayloadsReceived(Event):
    """onNext of several whole items on one stream, in the order they arrived: consecutive
    PAYLOAD frames (N, not C, not F) of one read, handed over as one batch. Only returned
    when the caller asked for batches
    (:attr:`~rsocket_tx.core.connection.RSocketConnection.batch_payloads`); otherwise each is
    a :class:`PayloadReceived`. ``payloads`` is a list of :class:`Payload` (at least one)."""

    __slots__ = ("stream_id", "payloads")
    _fields = ("stream_id", "payloads")

    def __init__(self, stream_id: int, payloads: list[Payload]) -> None:
        self.stream_id = stream_id
        self.payloads = payloads


class RequestsReceived(Event):
    """Several whole requests of one kind, REQUEST_FNF or REQUEST_RESPONSE (no fragments),
    that arrived one after another in one read, handed over as one batch: what a
    :class:`RequestReceived` each would say (``initial_request_n`` 0, ``complete`` False).
    Only returned when the caller asked for batches
    (:attr:`~rsocket_tx.core.connection.RSocketConnection.batch_requests`).

    :ivar frame_type: REQUEST_FNF or REQUEST_RESPONSE.
    :ivar stream_ids: the requests' stream ids (a list of int, at least one).
    :ivar payloads: their :class:`Payload` objects, in the same order.
    """

    __slots__ = ("frame_type", "stream_ids", "payloads")
    _fields = ("frame_type", "stream_ids", "payloads")

    def __init__(self, frame_type: FrameType, stream_ids: list[int],
                 payloads: list[Payload]) -> None:
        self.frame_type = frame_type
        self.stream_ids = stream_ids
        self.payloads = payloads


class ResponsesReceived(Event):
    """The answers (PAYLOAD N|C, whole) to several of our request-responses, arrived one
    after another in one read, handed over as one batch: what a :class:`PayloadReceived`
    each (``complete`` True) would say. Only returned when the caller asked for batches
    (:attr:`~rsocket_tx.core.connection.RSocketConnection.batch_requests`).

    :ivar stream_ids: the requests' stream ids (a list of int, at least one).
    :ivar payloads: the answers, :class:`Payload` objects in the same order.
    """

    __slots__ = ("stream_ids", "payloads")
    _fields = ("stream_ids", "payloads")

    def __init__(self, stream_ids: list[int], payloads: list[Payload]) -> None:
        self.stream_ids = stream_ids
        self.payloads = payloads


class RequestNReceived(Event):
    """The peer granted ``n`` more items on ``stream_id`` (already added to our credit)."""

    __slots__ = ("stream_id", "n")
    _fields = ("stream_id", "n")

    def __init__(self, stream_id: int, n: int) -> None:
        self.stream_id = stream_id
        self.n = n


class CancelReceived(Event):
    """The peer canceled ``stream_id``: stop sending on it.

    ``responding`` True: the requester canceled a stream this side responds on, which ends
    the whole stream (inbound too, for a channel); False: the responder of a channel this
    side requested canceled our outbound half only (RSocket 1.0 Protocol §Request Channel).
    The connection knows which side opened the stream; parity alone does not tell it where a
    protocol lets a requester pick any id (the 2015 draft).
    """

    __slots__ = ("stream_id", "responding")
    _fields = ("stream_id", "responding")

    def __init__(self, stream_id: int, responding: bool = True) -> None:
        self.stream_id = stream_id
        self.responding = responding


class StreamErrored(Event):
    """Stream ``stream_id`` ended with ``error``.

    Either the peer sent ERROR on it, or the core ended it locally (a reassembled payload over
    its limit: the core already told the peer with ERROR[INVALID] or CANCEL).
    """

    __slots__ = ("stream_id", "error")
    _fields = ("stream_id", "error")

    def __init__(self, stream_id: int, error: RSocketError) -> None:
        self.stream_id = stream_id
        self.error = error


class MetadataPushReceived(Event):
    """METADATA_PUSH from the peer (spec §METADATA_PUSH Frame)."""

    __slots__ = ("metadata",)
    _fields = ("metadata",)

    def __init__(self, metadata: bytes) -> None:
        self.metadata = metadata


class LeaseReceived(Event):
    """LEASE from the peer (spec §LEASE Frame)."""

    __slots__ = ("lease",)
    _fields = ("lease",)

    def __init__(self, lease: LeaseFrame) -> None:
        self.lease = lease


class ConnectionClosing(Event):
    """A graceful close began (spec §Error Codes, CONNECTION_CLOSE): no new requests either
    way; the streams still open may finish. A :class:`ConnectionClosed` follows once they have,
    or once the drain timeout passes (call ``tick()`` by ``next_deadline()``).

    :ivar error: the peer's ERROR[CONNECTION_CLOSE] as a
        :class:`~rsocket_tx.core.errors.ConnectionCloseError`, or None for a local close.
    :ivar by_peer: True when the peer asked for the close.
    :ivar open_streams: streams still open when the close began.
    """

    __slots__ = ("error", "by_peer", "open_streams")
    _fields = ("error", "by_peer", "open_streams")

    def __init__(self, error: RSocketError | None, by_peer: bool, open_streams: int) -> None:
        self.error = error
        self.by_peer = by_peer
        self.open_streams = open_streams


class ConnectionClosed(Event):
    """The connection is over: send what is queued, then close the transport.

    :ivar error: why (an :class:`RSocketError`; ``ConnectionCloseError`` for a graceful close
        by the peer), or None for a local close. Every open stream is dead.
    :ivar by_peer: True when the peer's frame or silence caused it.
    """

    __slots__ = ("error", "by_peer")
    _fields = ("error", "by_peer")

    def __init__(self, error: RSocketError | None, by_peer: bool) -> None:
        self.error = error
        self.by_peer = by_peer


class ConnectionDetached(Event):
    """A resumable connection lost its transport (it closed, or the peer was silent past max
    lifetime): the session and its streams are kept, and nothing is written until it resumes
    (spec §Resuming Operation). Drop the transport if it is still there; a client reconnects
    and calls ``start_resume()``; a server waits for the client's RESUME. A
    :class:`ConnectionClosed` follows if that does not happen within the resume session
    timeout.

    :ivar error: why, a :class:`~rsocket_tx.core.errors.ConnectionLostError`.
    """

    __slots__ = ("error",)
    _fields = ("error",)

    def __init__(self, error: RSocketError) -> None:
        self.error = error


class ConnectionResumed(Event):
    """The session resumed on a new transport (RESUME_OK sent or received); the frames the peer
    had missed are queued again, the streams go on.

    :ivar position: the peer's last received position: where our retransmission starts.
    :ivar resent: how many frames were queued again.
    """

    __slots__ = ("position", "resent")
    _fields = ("position", "resent")

    def __init__(self, position: int, resent: int) -> None:
        self.position = position
        self.resent = resent


class ResumeReceived(Event):
    """Server: a new connection began with RESUME (a supported version). Find the session of
    ``frame.token`` and hand the frame to its connection's ``resume_session()``, or answer with
    ``reject_resume()``. This connection ignores its input meanwhile.

    :ivar frame: the :class:`~rsocket_tx.core.frames.ResumeFrame`.
    """

    __slots__ = ("frame",)
    _fields = ("frame",)

    def __init__(self, frame: ResumeFrame) -> None:
        self.frame = frame
