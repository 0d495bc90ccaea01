"""The requester handle: :class:`RSocket`, one per connection, on either side."""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred

from .core.payload import Payload
from .streams import DEFAULT_PREFETCH, RequestStream

if TYPE_CHECKING:  # pragma: no cover
    from .protocol import RSocketProtocol
    from .responder import SetupInfo

__all__ = ["RSocket"]


def _check_payload(payload: object) -> None:
    if not isinstance(payload, Payload):
        raise TypeError(f"expected a Payload, got {type(payload).__name__}")


def _check_prefetch(prefetch: int) -> None:
    if not isinstance(prefetch, int) or not 1 <= prefetch <= 0x7FFFFFFF:
        raise ValueError(f"prefetch must be an integer in [1, 2147483647], got {prefetch!r}")


class RSocket:
    """Make requests to the peer of one connection (client to server, or server to client).

    Obtained from :func:`rsocket_tx.connect`, or as ``self.rsocket`` inside a
    :class:`~rsocket_tx.responder.Responder`. Every method raises
    :class:`~rsocket_tx.core.errors.LocalProtocolError` if the connection is closed.
    """

    __slots__ = ("_protocol",)

    def __init__(self, protocol: RSocketProtocol) -> None:
        self._protocol = protocol

    @property
    def setup(self) -> SetupInfo | None:
        """This connection's :class:`~rsocket_tx.responder.SetupInfo`: what the client sent
        (None on a server before SETUP has arrived)."""
        return self._protocol.setup_info

    @property
    def closed(self) -> Deferred:
        """A new Deferred that fires with None when the connection has closed and its
        transport is gone."""
        return self._protocol.when_closed()

    @property
    def close_reason(self):
        """Why the connection closed: an RSocketError, or None (still open or closed locally)."""
        return self._protocol.close_reason

    @property
    def is_open(self) -> bool:
        """True while the connection is open."""
        conn = self._protocol._conn
        return conn is not None and conn.is_open

    def request_response(self, payload: Payload) -> Deferred:
        """Request-response (spec §Request Response).

        :param payload: the request.
        :returns: Deferred firing with the response :class:`Payload` (None if the responder
            completed with no payload), or failing with the typed
            :class:`~rsocket_tx.core.errors.RSocketError` the responder sent, or
            :class:`~rsocket_tx.core.errors.ConnectionLostError`. ``cancel()`` on it sends
            CANCEL.
        :raises TypeError: ``payload`` is not a Payload.
        """
        _check_payload(payload)
        return self._protocol.request_response(payload)

    def fire_and_forget(self, payload: Payload) -> Deferred:
        """Fire-and-forget (spec §Request Fire-n-Forget).

        :returns: Deferred firing with None once the frame is handed to the transport (at the
            end of the current reactor turn: requests made in one turn share one write), or
            failing with ConnectionLostError if the connection is lost before that.
        """
        _check_payload(payload)
        return self._protocol.fire_and_forget(payload)

    def metadata_push(self, metadata: bytes) -> Deferred:
        """METADATA_PUSH on stream 0 (spec §METADATA_PUSH Frame).

        :param metadata: bytes; must fit one frame (it cannot be fragmented).
        :returns: Deferred firing with None once the frame is handed to the transport (at the
            end of the current reactor turn: requests made in one turn share one write), or
            failing with ConnectionLostError if the connection is lost before that.
        :raises TypeError: ``metadata`` is not bytes. :raises ValueError: too large.
        """
        if not isinstance(metadata, bytes):
            raise TypeError(f"metadata must be bytes, got {type(metadata).__name__}")
        return self._protocol.metadata_push(metadata)

    def request_stream(self, payload: Payload, *, prefetch: int = DEFAULT_PREFETCH
                       ) -> RequestStream:
        """Request-stream (spec §Request Stream).

        :param prefetch: items requested up front (REQUEST_STREAM's initial request-n); more
            are requested each time half of the window has been consumed.
        :returns: a :class:`~rsocket_tx.streams.RequestStream`: ``async for``, ``collect()``,
            ``cancel()``.
        """
        _check_payload(payload)
        _check_prefetch(prefetch)
        return self._protocol.request_stream(payload, prefetch)

    def request_channel(self, payload: Payload, outbound=None, *,
                        prefetch: int = DEFAULT_PREFETCH, complete: bool = False
                        ) -> RequestStream:
        """Request-channel (spec §Request Channel).

        :param payload: the first payload (sent in the REQUEST_CHANNEL frame).
        :param outbound: further payloads: an iterable or async iterable of :class:`Payload`,
            pulled only as the responder grants credit (REQUEST_N); its end sends COMPLETE,
            an exception it raises sends ERROR[APPLICATION_ERROR]. None: our side completes
            with the first payload (C flag).
        :param prefetch: as :meth:`request_stream`, for the responder's payloads.
        :param complete: set the C flag on the REQUEST_CHANNEL frame (no further payloads).
        :returns: the responder's payloads as a :class:`~rsocket_tx.streams.RequestStream`.
        """
        _check_payload(payload)
        _check_prefetch(prefetch)
        return self._protocol.request_channel(payload, outbound, prefetch, complete)

    def close(self) -> Deferred:
        """Close the connection; outstanding requests fail.

        :returns: Deferred firing with None when closed.
        """
        return self._protocol.close()
