"""The requester handle: :class:`RSocket`, one per connection, on either side."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import CancelledError, Deferred

from .bridge import failure_for
from .codecs import codec_for
from .core.errors import RequestTimeout
from .core.payload import Payload
from .extensions import (
    COMPOSITE_METADATA,
    OCTET_STREAM,
    Credentials,
    ZipkinTrace,
    build_metadata,
    parse_metadata,
)
from .streams import (
    FRAME_OVERHEAD,
    DecodedStream,
    RequestStream,
    check_send_limit,
    check_timeout,
)

if TYPE_CHECKING:  # pragma: no cover
    from .interfaces import IRequesterHost
    from .responder import SetupInfo

__all__ = ["RSocket"]


_OPTIONS_DOC = """
        Request options (all keyword-only; each composes an entry of the request's metadata,
        so the connection's metadata MIME type must be composite metadata,
        ``message/x.rsocket.composite-metadata.v0``, or for ``route`` alone routing metadata):

        :param route: the route (a routing tag, ``Extensions/Routing.md``), or a sequence of tags.
        :param auth: per-request credentials (:class:`~rsocket_tx.extensions.SimpleAuth`,
            :class:`~rsocket_tx.extensions.BearerAuth`, :class:`~rsocket_tx.extensions.CustomAuth`).
        :param data_mime_type: the per-stream data MIME type; a ``payload`` that is not a
            :class:`Payload` is encoded with it (else with the connection's data MIME type).
        :param accept_mime_types: the MIME types acceptable for the response data.
        :param tracing: a :class:`~rsocket_tx.extensions.ZipkinTrace`.
        :raises TypeError: ``payload`` cannot be encoded by the data MIME type's codec.
        :raises ValueError: an option is malformed, or the metadata MIME type cannot carry it;
            or the payload is over the local send limit (framed, it needs more than the
            connection's ``max_send_buffer_size``): nothing is sent, the connection stays up.
"""


def _expire(d: Deferred, timeout: float, reactor, what: str) -> None:
    """Cancel ``d`` (its canceller sends CANCEL) if it has not fired after ``timeout``
    seconds, failing it with RequestTimeout instead of CancelledError."""
    expired = []

    def expire() -> None:
        expired.append(True)
        d.cancel()

    call = reactor.callLater(timeout, expire)

    def done(result):
        if call.active():
            call.cancel()
        elif expired and getattr(result, "check", None) is not None \
                and result.check(CancelledError):
            seconds = f"{timeout:g} second{'' if timeout == 1 else 's'}"
            return failure_for(RequestTimeout(f"{what} timed out after {seconds}: canceled",
                                              timeout))
        return result

    d.addBoth(done)


def _check_prefetch(prefetch: int | None) -> None:
    if prefetch is None:
        return  # the default window (see request_stream)
    if not isinstance(prefetch, int) or not 1 <= prefetch <= 0x7FFFFFFF:
        raise ValueError(f"prefetch must be an integer in [1, 2147483647], got {prefetch!r}")


class RSocket:
    """Make requests to the peer of one connection (client to server, or server to client).

    Obtained from :func:`rsocket_tx.connect`, or as ``self.rsocket`` inside a
    :class:`~rsocket_tx.responder.Responder`. Every method raises
    :class:`~rsocket_tx.core.errors.LocalProtocolError` if the connection is closed.

    :param host: the connection, an :class:`~rsocket_tx.interfaces.IRequesterHost` (the
        :class:`~rsocket_tx.protocol.RSocketProtocol`).
    """

    __slots__ = ("_protocol", "__weakref__")

    def __init__(self, host: IRequesterHost) -> None:
        self._protocol = host

    @property
    def setup(self) -> SetupInfo | None:
        """This connection's :class:`~rsocket_tx.responder.SetupInfo`: what the client sent
        (None on a server before SETUP has arrived)."""
        return self._protocol.setup_info

    @property
    def closed(self) -> Deferred[None]:
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
        return self._protocol.is_open

    def _payload(self, payload, route, auth, data_mime_type, accept_mime_types,
                 tracing) -> Payload:
        """The request Payload: ``payload`` encoded if it is not one, metadata composed."""
        setup = self._protocol.setup_info
        plain = route is None and auth is None and data_mime_type is None \
            and accept_mime_types is None and tracing is None
        if isinstance(payload, Payload):
            if plain:
                return payload
            data, own = payload.data, payload.metadata
        else:
            mime = data_mime_type or (setup.data_mime_type if setup is not None else None)
            data, own = codec_for(mime).encode(payload), None
            if plain:
                return Payload(data)
        metadata_mime = setup.metadata_mime_type if setup is not None else OCTET_STREAM
        metadata = build_metadata(metadata_mime, route=route, auth=auth,
                                  data_mime_type=data_mime_type,
                                  accept_mime_types=accept_mime_types, tracing=tracing)
        if own:
            if metadata_mime != COMPOSITE_METADATA:
                raise ValueError("the payload has metadata of its own, and the request options "
                                 "compose metadata too: combining them needs the connection's "
                                 f"metadata MIME type to be {COMPOSITE_METADATA}")
            metadata += own  # composite metadata entries concatenate
        return Payload(data, metadata)

    def _decoder(self, data_mime_type: str | None):
        """Decode a response Payload's data by its per-stream MIME type (composite metadata),
        else ``data_mime_type``, else the connection's."""
        setup = self._protocol.setup_info
        default = data_mime_type or (setup.data_mime_type if setup is not None else None)
        composite = setup is not None and setup.metadata_mime_type == COMPOSITE_METADATA

        def decode(payload: Payload | None):
            if payload is None:
                return None
            mime = default
            if composite and payload.metadata:
                mime = parse_metadata(payload.metadata, COMPOSITE_METADATA).data_mime_type \
                    or default
            return codec_for(mime).decode(payload.data)
        return decode

    def request_response(self, payload, *, route: str | None = None,
                         auth: Credentials | None = None, data_mime_type: str | None = None,
                         accept_mime_types=None, tracing: ZipkinTrace | None = None,
                         decode: bool = False, timeout: float | None = None) -> Deferred[Any]:
        """Request-response (spec §Request Response).

        :param payload: the request: a :class:`Payload`, or a value encoded by the data MIME
            type's codec (:mod:`rsocket_tx.codecs`).
        :param decode: deliver response data decoded (by the response's per-stream MIME type if
            it has one, else ``data_mime_type``, else the connection's) instead of Payloads.
        :param timeout: seconds (a positive, finite number) to wait for the response; past
            it the request is canceled (CANCEL sent on its stream) and the Deferred fails with
            :class:`~rsocket_tx.core.errors.RequestTimeout`. None (default): no time limit.
        :returns: Deferred firing with the response :class:`Payload` (None if the responder
            completed with no payload; the decoded value with ``decode=True``), or failing
            with the typed :class:`~rsocket_tx.core.errors.RSocketError` the responder sent,
            or :class:`~rsocket_tx.core.errors.ConnectionLostError`. ``cancel()`` on it sends
            CANCEL.
        :raises ValueError: ``timeout`` is not positive and finite (:class:`TypeError`: not a
            number).
        """
        if timeout is not None:
            check_timeout(timeout)
        host = self._protocol
        if payload.__class__ is Payload and payload.metadata is None and \
                route is None and auth is None and data_mime_type is None and \
                accept_mime_types is None and tracing is None and \
                len(payload.data) * 4 // 3 + FRAME_OVERHEAD <= host.max_send_buffer_size:
            # the hot path: a plain Payload that surely fits the send limit (check_send_limit's
            # test) is sent as it is (_payload would return it unchanged)
            request = payload
        else:
            request = self._request_payload(payload, route, auth, data_mime_type,
                                            accept_mime_types, tracing)
        d = host.request_response(request)
        if timeout is not None:
            _expire(d, timeout, self._protocol.reactor, "request-response")
        if decode:
            d.addCallback(self._decoder(data_mime_type))
        return d

    request_response.__doc__ = (request_response.__doc__ or "") + _OPTIONS_DOC

    def fire_and_forget(self, payload, *, route: str | None = None,
                        auth: Credentials | None = None, data_mime_type: str | None = None,
                        accept_mime_types=None, tracing: ZipkinTrace | None = None
                        ) -> Deferred[None]:
        """Fire-and-forget (spec §Request Fire-n-Forget).

        :param payload: a :class:`Payload`, or a value encoded by the data MIME type's codec.
        :returns: Deferred firing with None once the frame is handed to the transport (at the
            end of the current reactor turn: requests made in one turn share one write), or
            failing with ConnectionLostError if the connection is lost before that.

        It takes no ``timeout``: nothing comes back to wait for, and a frame once queued
        cannot be called back (spec: fire-and-forget has no CANCEL).
        """
        host = self._protocol
        if payload.__class__ is Payload and payload.metadata is None and \
                route is None and auth is None and data_mime_type is None and \
                accept_mime_types is None and tracing is None and \
                len(payload.data) * 4 // 3 + FRAME_OVERHEAD <= host.max_send_buffer_size:
            return host.fire_and_forget(payload)  # (the hot path, as in request_response)
        return host.fire_and_forget(self._request_payload(
            payload, route, auth, data_mime_type, accept_mime_types, tracing))

    fire_and_forget.__doc__ = (fire_and_forget.__doc__ or "") + _OPTIONS_DOC

    def fire_and_forget_many(self, payloads: Iterable[Any], *, route: str | None = None,
                             auth: Credentials | None = None,
                             data_mime_type: str | None = None, accept_mime_types=None,
                             tracing: ZipkinTrace | None = None) -> Deferred[None]:
        """Fire-and-forget each of ``payloads``, in order (spec §Request Fire-n-Forget): the
        bulk form of :meth:`fire_and_forget`, with one Deferred for the whole batch.

        The frames on the wire are the same as with one :meth:`fire_and_forget` per payload
        (one REQUEST_FNF each; the options apply to every payload), and so is what the
        responder and interceptors see; the per-message cost is lower (no Deferred per
        message). For sending many messages at once: a batch of events, log records,
        metrics.

        :param payloads: an iterable of :class:`Payload` objects, or of values encoded by the
            data MIME type's codec (each checked against ``max_send_buffer_size`` as in
            :meth:`fire_and_forget`).
        :returns: Deferred firing with None once every frame of the batch is handed to the
            transport (at the end of the current reactor turn), or failing with
            ConnectionLostError if the connection is lost before that.
        :raises LocalProtocolError: the connection is closed.
        :raises ValueError: a payload is too large (as :meth:`fire_and_forget`), or cannot be
            encoded: nothing is sent.
        :raises LeaseError: the connection uses leases and the peer's lease runs out within
            the batch: the payloads before it are sent.
        """
        host = self._protocol
        if route is None and auth is None and data_mime_type is None and \
                accept_mime_types is None and tracing is None:
            limit = host.max_send_buffer_size - FRAME_OVERHEAD
            requests = [payload if payload.__class__ is Payload and payload.metadata is None
                        and len(payload.data) * 4 // 3 <= limit
                        else self._request_payload(payload, None, None, None, None, None)
                        for payload in payloads]
        else:
            requests = [self._request_payload(payload, route, auth, data_mime_type,
                                              accept_mime_types, tracing)
                        for payload in payloads]
        return host.fire_and_forget_many(requests)

    fire_and_forget_many.__doc__ = (fire_and_forget_many.__doc__ or "") + _OPTIONS_DOC

    def _request_payload(self, payload, route, auth, data_mime_type, accept_mime_types,
                         tracing) -> Payload:
        """The request Payload (:meth:`_payload`), checked against the send limit (raises
        ValueError past it): the path of requests that are not a small plain Payload."""
        request = self._payload(payload, route, auth, data_mime_type, accept_mime_types,
                                tracing)
        check_send_limit(self._protocol, request)
        return request

    def metadata_push(self, metadata: bytes) -> Deferred[None]:
        """METADATA_PUSH on stream 0 (spec §METADATA_PUSH Frame).

        :param metadata: bytes; must fit one frame (it cannot be fragmented).
        :returns: Deferred firing with None once the frame is handed to the transport (at the
            end of the current reactor turn: requests made in one turn share one write), or
            failing with ConnectionLostError if the connection is lost before that.
        :raises TypeError: ``metadata`` is not bytes. :raises ValueError: too large (for one
            frame, or for the connection's ``max_send_buffer_size``).

        It takes no ``timeout``, as :meth:`fire_and_forget`.
        """
        if not isinstance(metadata, bytes):
            raise TypeError(f"metadata must be bytes, got {type(metadata).__name__}")
        check_send_limit(self._protocol, Payload(b"", metadata))
        return self._protocol.metadata_push(metadata)

    def request_stream(self, payload, *, prefetch: int | None = None,
                       route: str | None = None, auth: Credentials | None = None,
                       data_mime_type: str | None = None, accept_mime_types=None,
                       tracing: ZipkinTrace | None = None, decode: bool = False,
                       timeout: float | None = None) -> RequestStream | DecodedStream:
        """Request-stream (spec §Request Stream).

        :param payload: a :class:`Payload`, or a value encoded by the data MIME type's codec.
        :param prefetch: the request-n window (RSocket 1.0 Protocol §Flow Control): items
            requested up front (REQUEST_STREAM's initial request-n); more are requested each
            time half of the window has been consumed, so at most a window of items is
            buffered. None (the default): 256 items up front
            (:data:`~rsocket_tx.streams.DEFAULT_PREFETCH`), and while the items are small
            the window grows to the connection's ``stream_window_bytes`` worth of them (256
            KiB, at most ``max_stream_window`` items, see
            :class:`~rsocket_tx.core.config.ConnectionConfig`), which keeps the responder
            sending instead of waiting a round trip per window. A number: a fixed window of
            that many items.
        :param decode: deliver response data decoded (by the response's per-stream MIME type if
            it has one, else ``data_mime_type``, else the connection's) instead of Payloads.
        :param timeout: seconds (a positive, finite number) the whole stream may take, from
            the request to its end (not the time between items); past it the stream is
            canceled (CANCEL sent) and iteration or ``collect()`` fails with
            :class:`~rsocket_tx.core.errors.RequestTimeout` (items that arrived before come
            first). None (default): no time limit.
        :returns: a :class:`~rsocket_tx.streams.RequestStream`: ``async for``, ``collect()``,
            ``cancel()`` (a :class:`~rsocket_tx.streams.DecodedStream` with ``decode=True``).
        :raises ValueError: ``prefetch`` is not in [1, 2^31-1]; ``timeout`` is not positive
            and finite (:class:`TypeError`: not a number).
        """
        _check_prefetch(prefetch)
        if timeout is not None:
            check_timeout(timeout)
        request = self._payload(payload, route, auth, data_mime_type, accept_mime_types,
                                tracing)
        check_send_limit(self._protocol, request)
        stream = self._protocol.request_stream(request, prefetch)
        if timeout is not None:
            stream.expire_after(timeout, "request-stream")
        return DecodedStream(stream, self._decoder(data_mime_type)) if decode else stream

    request_stream.__doc__ = (request_stream.__doc__ or "") + _OPTIONS_DOC

    def request_channel(self, payload, outbound=None, *, prefetch: int | None = None,
                        complete: bool = False, route: str | None = None,
                        auth: Credentials | None = None, data_mime_type: str | None = None,
                        accept_mime_types=None, tracing: ZipkinTrace | None = None,
                        decode: bool = False, timeout: float | None = None
                        ) -> RequestStream | DecodedStream:
        """Request-channel (spec §Request Channel).

        :param payload: the first payload (sent in the REQUEST_CHANNEL frame): a
            :class:`Payload`, or a value encoded by the data MIME type's codec; the options
            below apply to it.
        :param outbound: further payloads: an iterable or async iterable of :class:`Payload`
            or of values, each value encoded by the same codec as ``payload`` (the data MIME
            type's), pulled only as the responder grants credit (REQUEST_N), plus one item
            ahead once the credit is used up; its end sends COMPLETE and an exception it raises
            sends ERROR[APPLICATION_ERROR], both without waiting for credit. A value the codec
            cannot encode, or an item over the send limit, ends the channel (the responder
            gets ERROR[APPLICATION_ERROR]) and iterating the returned stream raises that
            TypeError or ValueError here. None: our side completes with the first payload
            (C flag).
        :param prefetch: as :meth:`request_stream`, for the responder's payloads.
        :param complete: set the C flag on the REQUEST_CHANNEL frame (no further payloads).
        :param decode: deliver response data decoded (by the response's per-stream MIME type if
            it has one, else ``data_mime_type``, else the connection's) instead of Payloads.
        :param timeout: as :meth:`request_stream`: the whole channel, canceled (CANCEL, both
            directions end) when it passes.
        :returns: the responder's payloads as a :class:`~rsocket_tx.streams.RequestStream`
            (a :class:`~rsocket_tx.streams.DecodedStream` with ``decode=True``).
        :raises ValueError: ``prefetch`` is not in [1, 2^31-1]; ``timeout`` is not positive
            and finite (:class:`TypeError`: not a number).
        """
        _check_prefetch(prefetch)
        if timeout is not None:
            check_timeout(timeout)
        request = self._payload(payload, route, auth, data_mime_type, accept_mime_types,
                                tracing)
        check_send_limit(self._protocol, request)
        encode = None
        if outbound is not None and not complete:
            setup = self._protocol.setup_info
            encode = codec_for(data_mime_type or (setup.data_mime_type if setup is not None
                                                  else None)).encode
        stream = self._protocol.request_channel(request, outbound, prefetch, complete, encode)
        if timeout is not None:
            stream.expire_after(timeout, "request-channel")
        return DecodedStream(stream, self._decoder(data_mime_type)) if decode else stream

    request_channel.__doc__ = (request_channel.__doc__ or "") + _OPTIONS_DOC

    @property
    def lease(self):
        """The connection's :class:`~rsocket_tx.lease.LeaseHandle` (spec §Lease Semantics):
        whether leases are in use, the lease received from the peer (what we may send), the
        one we granted, ``when_available()`` to wait for a usable lease."""
        return self._protocol.lease

    @property
    def is_resumable(self) -> bool:
        """True if the connection was set up resumable (SETUP with R; spec §Resuming
        Operation): a lost transport is then reconnected and the session resumed."""
        return self._protocol.is_resumable

    @property
    def resumes(self) -> int:
        """How many times this session has been resumed on a new transport."""
        return self._protocol.resumes

    @property
    def resumed(self) -> Deferred[None]:
        """A new Deferred firing with None at the session's next successful resumption, or
        failing with the error that ends the session first (e.g.
        :class:`~rsocket_tx.core.errors.RejectedResumeError`)."""
        return self._protocol.when_resumed()

    @property
    def is_closing(self) -> bool:
        """True while a graceful close is draining the open streams (new requests refused)."""
        return self._protocol.is_closing

    def close(self, drain_timeout: int | None = None) -> Deferred[None]:
        """Close the connection gracefully (spec §Error Codes, CONNECTION_CLOSE).

        New requests are refused at once (they raise
        :class:`~rsocket_tx.core.errors.LocalProtocolError`; the peer's get ERROR[REJECTED]).
        Open streams and requests may finish; then ERROR[CONNECTION_CLOSE] is sent and the
        transport closed. Those still open after ``drain_timeout`` fail with
        :class:`~rsocket_tx.core.errors.ConnectionCloseError`.

        :param drain_timeout: milliseconds the open streams get; None: the connection's
            ``drain_timeout`` setting (default 10,000); 0: close at once, failing them.
        :returns: Deferred firing with None when the transport is gone.
        :raises ValueError: ``drain_timeout`` is out of range (0 .. 2^31-1).
        """
        return self._protocol.close_gracefully(drain_timeout)
