"""``connect()``: open an RSocket client connection over any Twisted stream endpoint."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IProtocol, IStreamClientEndpoint
from twisted.python.failure import Failure

from .core.config import DEFAULT_KEEPALIVE_INTERVAL, DEFAULT_MAX_LIFETIME, ConnectionConfig
from .core.frames import SetupFrame, encode
from .core.framing import MAX_FRAME_LENGTH
from .core.lease import LeasePolicy
from .core.payload import Payload
from .core.resume import new_token
from .extensions import COMPOSITE_METADATA, Credentials, build_metadata
from .interceptors import Interceptor
from .lease import policy_for
from .protocol import (
    CLIENT_SETTINGS,
    RSocketClientFactory,
    RSocketProtocol,
    build_config,
    settings_signature,
)
from .responder import Responder
from .transports.endpoints import client_endpoint
from .transports.tls import tls_error

if TYPE_CHECKING:  # pragma: no cover
    from .requester import RSocket

__all__ = ["CONNECT_SETTINGS", "connect", "make_setup"]

#: The :class:`~rsocket_tx.core.config.ConnectionConfig` fields :func:`connect` takes as
#: keyword arguments: the client factory's (:data:`~rsocket_tx.protocol.CLIENT_SETTINGS`) and
#: the two that go into SETUP.
CONNECT_SETTINGS = ("keepalive_interval", "max_lifetime", *CLIENT_SETTINGS)


def make_setup(*, data_mime_type: str = "application/octet-stream",
               metadata_mime_type: str = "application/octet-stream",
               setup_payload: Payload | None = None,
               keepalive_interval: int = DEFAULT_KEEPALIVE_INTERVAL,
               max_lifetime: int = DEFAULT_MAX_LIFETIME,
               auth: Credentials | None = None,
               resume_token: bytes | None = None, lease: bool = False) -> SetupFrame:
    """Build the SETUP frame a client sends (version 1.0; spec §SETUP Frame).

    :param auth: connection credentials, written into the SETUP metadata (Authentication
        extension) as a composite metadata entry, or alone when ``metadata_mime_type`` is
        ``message/x.rsocket.authentication.v0``; entries of ``setup_payload.metadata`` follow.
    :param resume_token: sets the R flag with this resume identification token, 1..65535
        bytes (spec §SETUP Frame, §Identification Token Handling); None: not resumable.
    :param lease: set the L flag: the connection uses leases both ways (spec §Lease
        Semantics).
    :raises ValueError: a MIME type is not ASCII or longer than 255 bytes, a time is out of
        [1, 2^31-1] ms, ``auth`` cannot be carried by ``metadata_mime_type``, the token is
        empty, longer than 65535 bytes or not bytes, or the SETUP would not fit one frame
        (16,777,215 bytes).
    """
    ConnectionConfig(keepalive_interval=keepalive_interval, max_lifetime=max_lifetime)
    if resume_token is not None and (not isinstance(resume_token, bytes) or
                                     not 1 <= len(resume_token) <= 0xFFFF):
        raise ValueError(f"resume_token must be 1..65535 bytes, got {resume_token!r:.80}")
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
                       data=payload.data, metadata=payload.metadata, resume_token=resume_token,
                       lease=bool(lease))
    size = len(encode(setup))
    if size > MAX_FRAME_LENGTH:
        raise ValueError(f"the SETUP frame would be {size} bytes; a SETUP cannot be fragmented "
                         f"and must fit {MAX_FRAME_LENGTH} bytes: use a smaller setup payload")
    return setup


def connect(endpoint: str | IStreamClientEndpoint, *, reactor: Any = None,
            responder: Responder | None = None,
            setup_payload: Payload | None = None,
            data_mime_type: str = "application/octet-stream",
            metadata_mime_type: str = "application/octet-stream",
            config: ConnectionConfig | None = None,
            frame_logger: Callable[[str, Any], None] | None = None,
            auth: Credentials | None = None,
            resume: bool = False, resume_token: bytes | None = None,
            lease: bool | LeasePolicy = False, interceptors: Iterable[Interceptor] = (),
            **settings: Any) -> Deferred[RSocket]:
    """Connect to an RSocket server and send SETUP (spec §Connection Establishment).

    The connection's settings are one :class:`~rsocket_tx.core.config.ConnectionConfig`
    (``config``); the keyword settings below (:data:`CONNECT_SETTINGS`) are its fields,
    applied to it.

    :param endpoint: a Twisted client endpoint string (``"tcp:host=localhost:port=7878"``,
        ``"tls:host=localhost:port=7879:trustRoots=CADIR"``,
        ``"ws:host=localhost:port=8080:path=/rsocket"``,
        ``"wss:host=localhost:port=8443:path=/rsocket:trustRoots=ca.pem"``), a URI
        (``"tcp://localhost:7878"``, ``"tls://localhost:7879?trustRoots=ca.pem"``,
        ``"ws://localhost:8080/rsocket"``, ``"wss://localhost:8443/rsocket"``), or an
        ``IStreamClientEndpoint``; see the transports page of the docs. TLS clients verify
        the server's certificate (platform trust store unless ``trustRoots``) and host name.
    :param reactor: the reactor; None: the global one.
    :param responder: a :class:`~rsocket_tx.responder.Responder` serving requests the server
        makes to this client; None rejects them.
    :param setup_payload: data and metadata sent in SETUP.
    :param data_mime_type: SETUP data MIME type (ASCII).
    :param metadata_mime_type: SETUP metadata MIME type (ASCII).
    :param config: the connection settings (None: the defaults); its keepalive interval and
        max lifetime go into SETUP.
    :param keepalive_interval: milliseconds between our KEEPALIVE frames.
    :param max_lifetime: milliseconds of server silence before the connection is declared dead
        and every outstanding request fails with ConnectionLostError.
    :param fragment_size: bytes per outbound frame (>= 64, header included, length prefix
        excluded); None fragments only payloads that cannot fit one frame.
    :param max_frame_size: largest inbound frame accepted, bytes.
    :param max_reassembled_size: largest inbound payload reassembled from fragments, bytes.
    :param max_concurrent_streams: streams the server may have open towards this client's
        responder at once; a request past it gets ERROR[REJECTED] (default 256).
    :param max_send_buffer_size: bytes queued for a server that does not read before the
        connection is aborted and outstanding requests fail with
        :class:`~rsocket_tx.core.errors.ExcessiveBufferingError` (default 64 MiB).
    :param drain_timeout: milliseconds a graceful close (ours, or the server's
        ERROR[CONNECTION_CLOSE]) waits for open streams (default 10,000; 0: close at once).
    :param frame_logger: ``callable(direction, frame)`` for a frame-level debug log.
    :param auth: connection credentials sent in the SETUP metadata (see :func:`make_setup`):
        :class:`~rsocket_tx.extensions.SimpleAuth`, ``BearerAuth`` or ``CustomAuth``.
    :param resume: make the connection resumable (spec §Resuming Operation): SETUP carries
        the R flag and a token; when the transport is lost (it closes, or the server is silent
        past ``max_lifetime``) the client reconnects to the same ``endpoint`` by itself and
        sends RESUME; streams and channels go on with nothing lost or repeated. Requests made
        meanwhile are sent after the resume. The server must support it (else the SETUP is
        rejected with ERROR[REJECTED_SETUP]). If the server refuses the resume
        (ERROR[REJECTED_RESUME], e.g. it dropped frames past its resume buffer or forgot the
        session), outstanding requests fail with
        :class:`~rsocket_tx.core.errors.RejectedResumeError`.
    :param resume_token: the token (1..65535 bytes); None: 16 random bytes
        (:func:`~rsocket_tx.core.resume.new_token`). Implies ``resume``.
    :param resume_session_timeout: milliseconds the client keeps trying to resume after its
        transport was lost (default 120,000); then outstanding requests fail with
        :class:`~rsocket_tx.core.errors.ConnectionLostError`.
    :param max_resume_buffer_size: bytes of sent frames kept for resending after a resume
        (default 16 MiB); frames the server has acknowledged (KEEPALIVE) are dropped first.
    :param reconnect_initial_delay: milliseconds before the first reconnection attempt
        (default 100; 0: at once); each further attempt waits twice as long, up to
        ``reconnect_max_delay`` (default 10,000), until a resume succeeds.
    :param lease: use leases (spec §Lease Semantics): True, or the
        :class:`~rsocket_tx.lease.LeasePolicy` deciding what this client grants the server
        (True: unlimited grants). SETUP carries the L flag; a request is sent only within the
        server's last LEASE, else it raises :class:`~rsocket_tx.core.errors.LeaseError` (see
        ``rsocket.lease.when_available()`` to wait), and the server's requests past the
        client's grants are answered with ERROR[REJECTED]. The returned Deferred fires once
        the server's first LEASE has arrived; if none arrives within ``max_lifetime`` ms the
        connection is closed and it fails with ``LeaseError``.
    :param lease_grace: milliseconds a grant of this client stays valid past its time-to-live
        (default 1,000).
    :param interceptors: :class:`~rsocket_tx.interceptors.Interceptor` instances told of the
        connection and its requests, both those this client makes and those its
        ``responder`` serves (:doc:`/observability`), e.g.
        :class:`rsocket_tx.otel.TracingInterceptor`.
    :returns: Deferred firing with a connected :class:`~rsocket_tx.requester.RSocket`, or
        failing with the endpoint's connection error (or, with ``lease``, the error that
        closed the connection before the first LEASE). Over TLS it fires once the handshake
        is done, and fails with :class:`~rsocket_tx.transports.tls.TLSVerificationError` when the
        server's certificate is not trusted or does not name the host (the message says
        which), or :class:`~rsocket_tx.transports.tls.TLSError` for other TLS failures; a connection
        lost to TLS later (e.g. the server refusing our client certificate, which TLS 1.3
        reports after the handshake) fails outstanding requests with that error too. A TLS
        verification failure is not retried by ``resume``.
    :raises ValueError: a bad endpoint string or setting.
    :raises TypeError: ``lease`` is neither a bool nor a ``LeasePolicy``.
    """
    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor
    config = build_config(config, settings, CONNECT_SETTINGS, "connect")
    if resume_token is None and resume:
        resume_token = new_token()
    lease_policy = policy_for(lease)
    setup = make_setup(data_mime_type=data_mime_type, metadata_mime_type=metadata_mime_type,
                       setup_payload=setup_payload,
                       keepalive_interval=config.keepalive_interval,
                       max_lifetime=config.max_lifetime, auth=auth, resume_token=resume_token,
                       lease=lease is not False)
    ep = client_endpoint(reactor, endpoint)
    factory = RSocketClientFactory(setup, responder, reactor=reactor, config=config,
                                   lease_policy=lease_policy, frame_logger=frame_logger,
                                   interceptors=interceptors)
    # the factory's reconnect refers to it weakly: no cycle through the factory
    factory_ref = weakref.ref(factory)

    def reconnect() -> Deferred[IProtocol]:
        live = factory_ref()
        assert live is not None, "only the factory itself calls its reconnect"
        return ep.connect(live)

    factory.reconnect = reconnect
    # (the endpoint fires with the protocol the factory built: an RSocketProtocol)
    connected = cast("Deferred[RSocketProtocol]", ep.connect(factory))
    return (connected.addCallback(_secured)  # TLS: once the server is verified
            .addErrback(_tls_failure)  # e.g. wss: the TLS error under a failed WebSocket handshake
            .addCallback(_ready)  # with leases: after the first LEASE
            .addCallback(_rsocket))


def _secured(protocol: RSocketProtocol) -> Deferred[RSocketProtocol]:
    return protocol.when_secured()


def _ready(protocol: RSocketProtocol) -> Deferred[RSocketProtocol]:
    return protocol.ready()


def _rsocket(protocol: RSocketProtocol) -> RSocket:
    return protocol.rsocket


def _tls_failure(failure: Failure) -> Failure:
    error = tls_error(failure)
    if error is not None and error is not failure.value:
        raise error
    return failure


# connect() takes the client settings of ConnectionConfig as keywords: show them in its
# signature (help(), the API docs; inspect.signature reads the function's __signature__)
connect.__dict__["__signature__"] = settings_signature(connect, CONNECT_SETTINGS)
