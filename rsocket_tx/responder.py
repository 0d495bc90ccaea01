"""The responder side: subclass :class:`Responder` and override the interactions you serve."""

from __future__ import annotations

from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred
from twisted.logger import Logger

from .core.errors import RejectedError
from .core.frames import SetupFrame
from .core.payload import Payload
from .extensions import RequestMetadata, parse_metadata
from .extensions.redaction import describe_any_metadata, shown_bytes
from .routing import Router

if TYPE_CHECKING:  # pragma: no cover
    from .authentication import Authenticator
    from .requester import RSocket
    from .streams import RequestStream

__all__ = ["Responder", "SetupInfo"]


class SetupInfo:
    """The parameters a client sent in its SETUP frame (spec §SETUP Frame).

    :ivar version: ``(major, minor)``.
    :ivar keepalive_interval: milliseconds between the client's KEEPALIVEs.
    :ivar max_lifetime: milliseconds of silence after which the connection is dead.
    :ivar metadata_mime_type: str (US-ASCII).
    :ivar data_mime_type: str (US-ASCII).
    :ivar payload: the setup :class:`Payload` (data and metadata).
    :ivar lease: whether the client asked for leases (L flag).
    :ivar resume_token: the resume token (R flag), or None.
    """

    __slots__ = ("version", "keepalive_interval", "max_lifetime", "metadata_mime_type",
                 "data_mime_type", "payload", "lease", "resume_token", "_metadata")

    def __init__(self, *, version: tuple[int, int], keepalive_interval: int, max_lifetime: int,
                 metadata_mime_type: str, data_mime_type: str, payload: Payload,
                 lease: bool = False, resume_token: bytes | None = None) -> None:
        self.version = version
        self.keepalive_interval = keepalive_interval
        self.max_lifetime = max_lifetime
        self.metadata_mime_type = metadata_mime_type
        self.data_mime_type = data_mime_type
        self.payload = payload
        self.lease = lease
        self.resume_token = resume_token
        self._metadata: RequestMetadata | None = None

    @property
    def metadata(self) -> RequestMetadata:
        """The SETUP metadata decoded by :attr:`metadata_mime_type` (composite, routing or
        authentication metadata; see :func:`rsocket_tx.extensions.parse_metadata`)."""
        if self._metadata is None:
            self._metadata = parse_metadata(self.payload.metadata, self.metadata_mime_type)
        return self._metadata

    @property
    def auth(self):
        """The credentials sent in the SETUP metadata (Authentication extension), or None."""
        return self.metadata.auth

    @classmethod
    def from_frame(cls, frame: SetupFrame) -> SetupInfo:
        """Build from a decoded SETUP frame."""
        return cls(version=(frame.major_version, frame.minor_version),
                   keepalive_interval=frame.keepalive_interval, max_lifetime=frame.max_lifetime,
                   metadata_mime_type=frame.metadata_mime_type.decode("ascii", "replace"),
                   data_mime_type=frame.data_mime_type.decode("ascii", "replace"),
                   payload=Payload(frame.data, frame.metadata), lease=frame.lease,
                   resume_token=frame.resume_token)

    def __repr__(self) -> str:
        return (f"SetupInfo(version={self.version}, keepalive_interval={self.keepalive_interval},"
                f" max_lifetime={self.max_lifetime}, metadata_mime_type="
                f"{self.metadata_mime_type!r}, data_mime_type={self.data_mime_type!r})")


class Responder:
    """Base class of application responders; one instance serves one connection.

    Override the interactions you serve. Each handler may return its result directly, a
    Deferred, or be a coroutine (``async def``); a stream handler returns an iterable or an async
    iterable of :class:`Payload` (or a Deferred/coroutine of one), which is pulled only as fast
    as the requester grants credit (plus one item ahead once the credit is used up, so that its
    end completes the stream without more credit). Raising
    :class:`~rsocket_tx.core.errors.RejectedError`,
    :class:`~rsocket_tx.core.errors.CanceledError` or :class:`~rsocket_tx.core.errors.InvalidError`
    sends that code; any other exception is a bug: it is logged with its traceback (level
    error, :doc:`/logging`) and sends ERROR[APPLICATION_ERROR] with its type and message
    (``"KeyError: 'missing-key'"``). A handler returning the wrong type is logged too.
    An interaction that is not overridden answers ERROR[REJECTED] naming it.

    Routed responders decorate methods with :class:`~rsocket_tx.routing.route` instead of
    overriding these methods: an interaction that has routes (or a route fallback) is then
    dispatched by the request's route (see :mod:`rsocket_tx.routing`).

    :ivar rsocket: the :class:`~rsocket_tx.requester.RSocket` of this connection, to make
        requests back to the peer. Set before :meth:`accept_setup` is called.
    :ivar setup: the connection's :class:`SetupInfo` (on a client: what it sent).
    :cvar authenticator: an :class:`~rsocket_tx.authentication.Authenticator` checking the
        SETUP's and routed requests' credentials, or None (no authentication).
    :ivar principal: the connection's principal, as the authenticator decided from the SETUP
        credentials (None without them).
    :ivar log: a ``twisted.logger.Logger`` (namespace: the class's ``module.Name``); on a
        connection, one of that connection
        (:class:`~rsocket_tx.bridge.ConnectionLogger`): its lines carry the connection id and
        the peer.
    """

    log = Logger()
    rsocket: RSocket
    setup: SetupInfo
    authenticator: Authenticator | None = None
    principal = None
    _router: Router | None = None

    def __init_subclass__(cls, **kwargs) -> None:
        super().__init_subclass__(**kwargs)
        cls._router = Router.for_class(cls)

    def accept_setup(self, setup: SetupInfo) -> None | Deferred:
        """Server: inspect the client's SETUP before any request is served.

        Raise :class:`~rsocket_tx.core.errors.RejectedSetupError` (or return a Deferred that
        fails with it) to answer ERROR[REJECTED_SETUP] with its message and close.

        The default runs :attr:`authenticator` (if any) on the SETUP credentials and sets
        :attr:`principal`; an override that keeps authentication calls
        ``super().accept_setup(setup)`` and returns its result.
        """
        authenticator = self.authenticator
        if authenticator is None:
            return None
        principal = authenticator.authenticate_setup(setup.auth)
        if isinstance(principal, Deferred):
            return principal.addCallback(self._set_principal)
        self.principal = principal
        return None

    def _set_principal(self, principal) -> None:
        self.principal = principal

    def _routed(self, interaction: str, payload: Payload, inbound=None):
        """Dispatch by route; an interaction with no route (nor fallback) is rejected."""
        router = self._router
        if router is None or not router.serves(interaction):
            raise RejectedError(f"{interaction.replace('_', '-')} is not implemented by "
                                f"{type(self).__name__}")
        return router.dispatch(self, interaction, payload, inbound)

    def request_response(self, payload: Payload):
        """Answer one request with one :class:`Payload` (spec §Request Response)."""
        return self._routed("request_response", payload)

    def fire_and_forget(self, payload: Payload):
        """Receive a one-way message (spec §Request Fire-n-Forget). Default: log (level info)
        and drop; credentials in the metadata are masked
        (:func:`~rsocket_tx.extensions.redaction.describe_metadata`)."""
        router = self._router
        if router is not None and router.serves("fire_and_forget"):
            return router.dispatch(self, "fire_and_forget", payload)
        self.log.info("fire-and-forget not handled by {responder}: data={data}, "
                      "metadata={metadata}", responder=type(self).__name__,
                      data=shown_bytes(payload.data),
                      metadata=describe_any_metadata(payload.metadata))

    def metadata_push(self, metadata: bytes):
        """Receive connection-level metadata (spec §METADATA_PUSH). Default: log (level info,
        credentials masked) and drop."""
        self.log.info("metadata-push not handled by {responder}: metadata={metadata}",
                      responder=type(self).__name__, metadata=describe_any_metadata(metadata))

    def request_stream(self, payload: Payload):
        """Return an iterable or async iterable of :class:`Payload` (spec §Request Stream)."""
        return self._routed("request_stream", payload)

    def request_channel(self, payload: Payload, inbound: RequestStream):
        """Return an iterable or async iterable of :class:`Payload` answering a channel.

        :param payload: the first payload, from the REQUEST_CHANNEL frame.
        :param inbound: the requester's further payloads, as an async iterator.
        """
        return self._routed("request_channel", payload, inbound)
