"""``serve()``: listen for RSocket clients on any Twisted stream server endpoint."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.interfaces import IListeningPort, IStreamServerEndpoint

from .core.config import ConnectionConfig
from .core.lease import LeasePolicy
from .interceptors import Interceptor
from .protocol import SERVER_SETTINGS, RSocketServerFactory, build_config
from .responder import Responder
from .transports.endpoints import server_endpoint
from .transports.listening import ServerPort, listen

__all__ = ["serve", "ServerPort"]


def serve(endpoint: str | IStreamServerEndpoint, responder_factory: Callable[[], Responder], *,
          reactor: Any = None,
          config: ConnectionConfig | None = None, lease_policy: LeasePolicy | None = None,
          frame_logger: Callable[[str, Any], None] | None = None,
          interceptors: Iterable[Interceptor] = (), **settings: Any) -> Deferred[IListeningPort]:
    """Serve RSocket on ``endpoint``.

    :param endpoint: a Twisted server endpoint string (``"tcp:7878"``,
        ``"tcp:port=7878:interface=127.0.0.1"``, ``"ssl:7879:privateKey=key.pem:certKey=cert.pem"``,
        ``"mtls:7879:privateKey=key.pem:caCerts=ca.pem"``, ``"ws:8080:path=/rsocket"``,
        ``"wss:8443:privateKey=key.pem:path=/rsocket"``), a URI (``"tcp://0.0.0.0:7878"``,
        ``"tls://:7879?privateKey=key.pem&certKey=cert.pem"``, ``"ws://:8080/rsocket"``,
        ``"wss://:8443/rsocket?privateKey=key.pem"``), or an ``IStreamServerEndpoint``; see
        the transports page of the docs.
    :param responder_factory: required: a zero-argument callable making a
        :class:`~rsocket_tx.responder.Responder` per connection, usually the Responder
        subclass itself (``serve("tcp:7878", MyResponder)``; with arguments,
        ``functools.partial(MyResponder, ...)``). The library has no default responder: the
        demo one (:class:`rsocket_tx.apps.demo.DemoResponder`, echo and count) is the default
        of ``twistd rsocket`` and ``rsocket-tx serve`` only, and is passed here like any other.
    :param reactor: the reactor; None: the global one.
    :param config: the connection settings, one
        :class:`~rsocket_tx.core.config.ConnectionConfig` (None: the defaults); the keyword
        settings below are its fields, applied to it.
    :param fragment_size: bytes per outbound frame (>= 64); None: only what cannot fit a frame.
    :param max_frame_size: largest inbound frame, bytes (<= 16,777,215).
    :param max_reassembled_size: largest inbound reassembled payload, bytes.
    :param setup_timeout: milliseconds a client may take to send SETUP before it is dropped.
    :param max_setup_frame_size: largest first frame (SETUP or RESUME), bytes (default
        131,072); a larger length prefix gets ERROR[INVALID_SETUP] before the frame is read.
    :param max_reassembly_buffer_size: bytes one connection may hold in unfinished
        fragmented payloads over all its streams (default 64 MiB); the stream past it is
        refused, the connection stays up.
    :param max_lifetime_limit: largest max lifetime a client may declare in SETUP,
        milliseconds (default 600,000; 0: no limit); above it ERROR[UNSUPPORTED_SETUP].
    :param max_connections: connections open at once (default 4,096); past it new ones are
        closed at once and the log says so. The endpoint's listen queue is 1,024 unless its
        string says ``backlog=N``.
    :param max_concurrent_streams: streams one client may have open towards the server at
        once; a request past it gets ERROR[REJECTED] (default 256).
    :param max_send_buffer_size: bytes queued for a client that does not read before its
        connection is aborted (default 64 MiB).
    :param drain_timeout: milliseconds a graceful close waits for open streams (default
        10,000; 0: close at once). ``port.factory.close_connections()`` closes every
        connection gracefully; stop listening first (``port.stopListening()``).
    :param resume: accept resumable sessions (spec §Resuming Operation): a client whose
        transport fails reconnects and sends RESUME, and its streams go on. False (default):
        SETUP with R is refused with ERROR[REJECTED_SETUP].
    :param resume_session_timeout: milliseconds a session whose transport was lost waits for
        RESUME (default 120,000); then its streams fail and RESUME gets ERROR[REJECTED_RESUME].
    :param max_resume_buffer_size: bytes of sent frames each session keeps for resending
        (default 16 MiB); a resume that needs frames dropped past it gets
        ERROR[REJECTED_RESUME].
    :param max_resume_sessions: resumable sessions kept at once (default 10,000); a SETUP
        with R past it gets ERROR[REJECTED_SETUP].
    :param lease_policy: what the server grants each client that asks for leases (SETUP L
        flag; spec §Lease Semantics): a :class:`~rsocket_tx.lease.LeasePolicy`, e.g.
        :class:`~rsocket_tx.lease.FixedRateLeasePolicy` ``(ttl=1000, requests=100)``; one
        object serves every connection. None: unlimited grants. The server sends the first
        LEASE as soon as it accepts the SETUP, then one every ``policy.interval`` ms, answers
        requests past its grants with ERROR[REJECTED], and its own requests to the client
        honour the client's leases (:class:`~rsocket_tx.core.errors.LeaseError`). Clients
        without the L flag are not affected.
    :param lease_grace: milliseconds a grant stays valid past its time-to-live, for the
        requests in flight (default 1,000).
    :param frame_logger: ``callable(direction, frame)`` debug hook.
    :param interceptors: :class:`~rsocket_tx.interceptors.Interceptor` instances told of
        every connection and request (:doc:`/observability`), e.g.
        :class:`rsocket_tx.metrics.PrometheusInterceptor`.
    :returns: Deferred firing with the ``IListeningPort``; its ``factory`` is the
        :class:`~rsocket_tx.protocol.RSocketServerFactory` (for endpoints whose port has
        another factory, e.g. TLS, a :class:`ServerPort` wrapping the port).
    :raises TypeError: ``responder_factory`` is None or not callable (e.g. a Responder
        instance rather than its class).
    :raises ValueError: a bad endpoint string or setting.
    """
    _check_responder_factory(responder_factory)
    if reactor is None:
        from twisted.internet import reactor as global_reactor
        reactor = global_reactor
    config = build_config(config, settings, SERVER_SETTINGS, "serve")
    factory = RSocketServerFactory(responder_factory, reactor=reactor, config=config,
                                   lease_policy=lease_policy, frame_logger=frame_logger,
                                   interceptors=interceptors)
    return listen(server_endpoint(reactor, endpoint), factory)


def _check_responder_factory(responder_factory: object) -> None:
    """Raise :class:`TypeError`, saying what to pass, unless ``responder_factory`` is callable.

    :raises TypeError: None (there is no default responder) or a non-callable, such as a
        :class:`~rsocket_tx.responder.Responder` instance where its class belongs.
    """
    if callable(responder_factory):
        return
    usage = ("serve() needs responder_factory, a zero-argument callable returning a Responder "
             "for each connection: usually your Responder subclass itself, as in "
             "serve('tcp:7878', MyResponder)")
    if responder_factory is None:
        raise TypeError(f"{usage}; got None (serve() has no default responder; the demo one "
                        "is rsocket_tx.apps.demo.DemoResponder)")
    if isinstance(responder_factory, Responder):
        name = type(responder_factory).__name__
        raise TypeError(f"{usage}; got an instance of {name}: pass the class, {name}, "
                        "not an instance (one responder is made per connection)")
    raise TypeError(f"{usage}; got {responder_factory!r}, which is not callable")
