"""``connect()``: open an RSocket client connection over any Twisted stream endpoint."""

from __future__ import annotations

from collections.abc import Callable

from twisted.internet.defer import Deferred

from .core.config import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_KEEPALIVE_INTERVAL,
    DEFAULT_MAX_CONCURRENT_STREAMS,
    DEFAULT_MAX_LIFETIME,
    DEFAULT_MAX_REASSEMBLED_SIZE,
    DEFAULT_MAX_SEND_BUFFER_SIZE,
    ConnectionConfig,
)
from .core.frames import SetupFrame, encode
from .core.framing import MAX_FRAME_LENGTH
from .core.payload import Payload
from .endpoints import client_endpoint
from .extensions import COMPOSITE_METADATA, Credentials, build_metadata
from .protocol import RSocketClientFactory
from .responder import Responder

__all__ = ["connect", "make_setup"]


def make_setup(*, data_mime_type: str = "application/octet-stream",
               metadata_mime_type: str = "application/octet-stream",
               setup_payload: Payload | None = None,
               keepalive_interval: int = DEFAULT_KEEPALIVE_INTERVAL,
               max_lifetime: int = DEFAULT_MAX_LIFETIME,
               auth: Credentials | None = None) -> SetupFrame:
    """Build the SETUP frame a client sends (version 1.0; spec §SETUP Frame).

    :param auth: connection credentials, written into the SETUP metadata (Authentication
        extension) as a composite metadata entry, or alone when ``metadata_mime_type`` is
        ``message/x.rsocket.authentication.v0``; entries of ``setup_payload.metadata`` follow.
    :raises ValueError: a MIME type is not ASCII or longer than 255 bytes, a time is out of
        [1, 2^31-1] ms, ``auth`` cannot be carried by ``metadata_mime_type``, or the SETUP
        would not fit one frame (16,777,215 bytes).
    """
    ConnectionConfig(keepalive_interval=keepalive_interval, max_lifetime=max_lifetime)
    mimes = []
    for name, mime in (("data_mime_type", data_mime_type),
                       ("metadata_mime_type", metadata_mime_type)):
        try:
            raw = mime.encode("ascii")
        except (UnicodeEncodeError, AttributeError):
            raise ValueError(f"{name} must be an ASCII string, got {mime!r}") from None
        if len(raw) > 255:
            raise ValueError(f"{name} is {len(raw)} bytes; the limit is 255")
        mimes.append(raw)
    if setup_payload is not None and not isinstance(setup_payload, Payload):
        raise TypeError(f"setup_payload must be a Payload, got {type(setup_payload).__name__}")
    payload = setup_payload or Payload()
    if auth is not None:
        metadata = build_metadata(metadata_mime_type, auth=auth)
        if payload.metadata:
            if metadata_mime_type != COMPOSITE_METADATA:
                raise ValueError("auth and setup_payload metadata can only be combined with "
                                 f"metadata_mime_type={COMPOSITE_METADATA!r}")
            metadata += payload.metadata
        payload = Payload(payload.data, metadata)
    setup = SetupFrame(keepalive_interval=keepalive_interval, max_lifetime=max_lifetime,
                       data_mime_type=mimes[0], metadata_mime_type=mimes[1],
                       data=payload.data, metadata=payload.metadata)
    size = len(encode(setup))
    if size > MAX_FRAME_LENGTH:
        raise ValueError(f"the SETUP frame would be {size} bytes; a SETUP cannot be fragmented "
                         f"and must fit {MAX_FRAME_LENGTH} bytes: use a smaller setup payload")
    return setup


def connect(endpoint, *, reactor=None, responder: Responder | None = None,
            setup_payload: Payload | None = None,
            data_mime_type: str = "application/octet-stream",
            metadata_mime_type: str = "application/octet-stream",
            keepalive_interval: int = DEFAULT_KEEPALIVE_INTERVAL,
            max_lifetime: int = DEFAULT_MAX_LIFETIME, fragment_size: int | None = None,
            max_frame_size: int = MAX_FRAME_LENGTH,
            max_reassembled_size: int = DEFAULT_MAX_REASSEMBLED_SIZE,
            max_concurrent_streams: int = DEFAULT_MAX_CONCURRENT_STREAMS,
            max_send_buffer_size: int = DEFAULT_MAX_SEND_BUFFER_SIZE,
            drain_timeout: int = DEFAULT_DRAIN_TIMEOUT,
            frame_logger: Callable | None = None,
            auth: Credentials | None = None) -> Deferred:
    """Connect to an RSocket server and send SETUP (spec §Connection Establishment).

    :param endpoint: a Twisted client endpoint string (``"tcp:host=localhost:port=7878"``),
        a URI (``"tcp://localhost:7878"``), or an ``IStreamClientEndpoint``.
    :param reactor: the reactor; None: the global one.
    :param responder: a :class:`~rsocket_tx.responder.Responder` serving requests the server
        makes to this client; None rejects them.
    :param setup_payload: data and metadata sent in SETUP.
    :param data_mime_type: SETUP data MIME type (ASCII).
    :param metadata_mime_type: SETUP metadata MIME type (ASCII).
    :param keepalive_interval: milliseconds between our KEEPALIVE frames.
    :param max_lifetime: milliseconds of server silence before the connection is declared dead
        and every outstanding request fails with ConnectionLostError.
    :param fragment_size: bytes per outbound frame (>= 64, header included, length prefix
        excluded); None fragments only payloads that cannot fit one frame.
    :param max_frame_size: largest inbound frame accepted, bytes.
    :param max_reassembled_size: largest inbound payload reassembled from fragments, bytes.
    :param max_concurrent_streams: streams the server may have open towards this client's
        responder at once; a request past it gets ERROR[REJECTED] (default 1024).
    :param max_send_buffer_size: bytes queued for a server that does not read before the
        connection is aborted and outstanding requests fail with
        :class:`~rsocket_tx.core.errors.ExcessiveBufferingError` (default 64 MiB).
    :param drain_timeout: milliseconds a graceful close (ours, or the server's
        ERROR[CONNECTION_CLOSE]) waits for open streams (default 10,000; 0: close at once).
    :param frame_logger: ``callable(direction, frame)`` for a frame-level debug log.
    :param auth: connection credentials sent in the SETUP metadata (see :func:`make_setup`):
        :class:`~rsocket_tx.extensions.SimpleAuth`, ``BearerAuth`` or ``CustomAuth``.
    :returns: Deferred firing with a connected :class:`~rsocket_tx.requester.RSocket`, or
        failing with the endpoint's connection error.
    :raises ValueError: a bad endpoint string or setting.
    """
    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor
    setup = make_setup(data_mime_type=data_mime_type, metadata_mime_type=metadata_mime_type,
                       setup_payload=setup_payload, keepalive_interval=keepalive_interval,
                       max_lifetime=max_lifetime, auth=auth)
    factory = RSocketClientFactory(setup, responder, reactor=reactor,
                                   fragment_size=fragment_size, max_frame_size=max_frame_size,
                                   max_reassembled_size=max_reassembled_size,
                                   max_concurrent_streams=max_concurrent_streams,
                                   max_send_buffer_size=max_send_buffer_size,
                                   drain_timeout=drain_timeout, frame_logger=frame_logger)
    ep = client_endpoint(reactor, endpoint)
    d = ep.connect(factory)
    d.addCallback(lambda proto: proto.rsocket)
    return d
