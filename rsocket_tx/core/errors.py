"""The rsocket_tx error tree (spec §ERROR Frame, §Error Codes).

Every error that maps to the wire carries ``error_code``. Stream-level errors end one stream;
connection-level errors end the connection. Errors caused by the *peer* (``ProtocolError``:
a malformed or unexpected frame) are distinct from errors caused by the *local caller*
(``LocalProtocolError``: our API used wrongly), after h11's Local/Remote split.
"""

from __future__ import annotations

import enum

__all__ = [
    "ErrorCode",
    "RSocketError",
    "StreamError",
    "ApplicationError",
    "RejectedError",
    "CanceledError",
    "RequestTimeout",
    "InvalidError",
    "ConnectionError",
    "ConnectionCloseError",
    "ConnectionLostError",
    "ExcessiveBufferingError",
    "SetupError",
    "InvalidSetupError",
    "UnsupportedSetupError",
    "RejectedSetupError",
    "RejectedResumeError",
    "ProtocolError",
    "FrameDecodeError",
    "UnknownFrameTypeError",
    "FrameTooLargeError",
    "ReassemblyBudgetError",
    "PayloadTooLargeError",
    "LocalProtocolError",
    "StreamIdsExhaustedError",
    "LeaseError",
    "error_from_code",
]


class ErrorCode(enum.IntEnum):
    """Error codes of the ERROR frame (spec §Error Codes)."""

    RESERVED = 0x00000000
    INVALID_SETUP = 0x00000001
    UNSUPPORTED_SETUP = 0x00000002
    REJECTED_SETUP = 0x00000003
    REJECTED_RESUME = 0x00000004
    CONNECTION_ERROR = 0x00000101
    CONNECTION_CLOSE = 0x00000102
    APPLICATION_ERROR = 0x00000201
    REJECTED = 0x00000202
    CANCELED = 0x00000203
    INVALID = 0x00000204
    RESERVED_EXTENSION = 0xFFFFFFFF


def error_code_name(code: int) -> str:
    """Return the spec name of ``code`` (e.g. ``"APPLICATION_ERROR"``), or ``"0x00000301"``."""
    try:
        return ErrorCode(code).name
    except ValueError:
        return f"0x{code:08X}"


class RSocketError(Exception):
    """Base of every RSocket error.

    :param message: the human-readable reason (ERROR frame data, UTF-8 on the wire).
    :param error_code: the wire error code; defaults to the class's ``default_code``.
    """

    default_code: int = ErrorCode.APPLICATION_ERROR

    def __init__(self, message: str = "", error_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.error_code = self.default_code if error_code is None else error_code

    def __str__(self) -> str:
        return f"{error_code_name(self.error_code)}: {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, error_code=0x{self.error_code:X})"


class StreamError(RSocketError):
    """An error that ends one stream (stream id > 0)."""


class ApplicationError(StreamError):
    """ERROR[APPLICATION_ERROR] (0x201): application logic raised (Reactive Streams onError).

    Also used for application-defined codes (0x301..0xFFFFFFFE).
    """

    default_code = ErrorCode.APPLICATION_ERROR


class RejectedError(StreamError):
    """ERROR[REJECTED] (0x202): the responder rejected the request without processing it."""

    default_code = ErrorCode.REJECTED


class CanceledError(StreamError):
    """ERROR[CANCELED] (0x203): the responder canceled the request, maybe after starting it.

    Also raised locally on a request the local application canceled.
    """

    default_code = ErrorCode.CANCELED


class RequestTimeout(CanceledError, TimeoutError):
    """A request we made did not finish within its ``timeout=`` (seconds): it was canceled
    (CANCEL sent on its stream, RSocket 1.0 Protocol §Request Response, §Request Stream) and
    its Deferred or stream fails with this.

    Raised locally, never received: it is a :class:`CanceledError` (``error_code`` CANCELED,
    0x203; the local application canceled the request) and a :class:`TimeoutError`, so either
    ``except`` catches it.

    :param message: what timed out, and after how long.
    :param timeout: the timeout, in seconds.
    :ivar timeout: as the parameter.
    """

    def __init__(self, message: str = "", timeout: float | None = None) -> None:
        super().__init__(message)
        self.timeout = timeout


class InvalidError(StreamError):
    """ERROR[INVALID] (0x204): the request is invalid."""

    default_code = ErrorCode.INVALID


class ConnectionError(RSocketError):  # noqa: A001 - the spec's name, scoped to this package
    """ERROR[CONNECTION_ERROR] (0x101): the connection is being terminated."""

    default_code = ErrorCode.CONNECTION_ERROR


class ConnectionCloseError(RSocketError):
    """ERROR[CONNECTION_CLOSE] (0x102): the connection is closing gracefully."""

    default_code = ErrorCode.CONNECTION_CLOSE


class ConnectionLostError(ConnectionError):
    """The transport closed, or the peer went silent past max lifetime, with work outstanding."""


class ExcessiveBufferingError(ConnectionLostError):
    """We aborted the connection: the peer did not read what we sent, and more than the
    configured max send buffer size (bytes) was queued for it."""


class SetupError(RSocketError):
    """Base of the errors that answer a SETUP or RESUME (stream id 0)."""


class InvalidSetupError(SetupError):
    """ERROR[INVALID_SETUP] (0x1): the SETUP frame is invalid for the server."""

    default_code = ErrorCode.INVALID_SETUP


class UnsupportedSetupError(SetupError):
    """ERROR[UNSUPPORTED_SETUP] (0x2): a SETUP parameter is unsupported by the server."""

    default_code = ErrorCode.UNSUPPORTED_SETUP


class RejectedSetupError(SetupError):
    """ERROR[REJECTED_SETUP] (0x3): the server rejected the SETUP; raise it in an acceptor."""

    default_code = ErrorCode.REJECTED_SETUP


class RejectedResumeError(SetupError):
    """ERROR[REJECTED_RESUME] (0x4): the server rejected the RESUME."""

    default_code = ErrorCode.REJECTED_RESUME


class ProtocolError(ConnectionError):
    """The peer violated the protocol (malformed or impossible frame).

    The connection answers with ERROR[CONNECTION_ERROR] carrying this message and closes.
    """


class FrameDecodeError(ProtocolError):
    """A frame could not be decoded (spec §Frame Header Format, §Metadata Optional Header)."""


class UnknownFrameTypeError(FrameDecodeError):
    """A frame of a type this implementation does not know (spec §Handling Ignore Flag).

    :param frame_type: the 6-bit frame type found.
    :param ignore: whether the frame's (I)gnore flag was set.
    """

    def __init__(self, frame_type: int, ignore: bool) -> None:
        super().__init__(f"unknown frame type 0x{frame_type:02X}")
        self.frame_type = frame_type
        self.ignore = ignore


class FrameTooLargeError(ProtocolError):
    """A frame's length prefix exceeds the configured max inbound frame size (bytes).

    :param message: the reason.
    :param frames: the complete frames (without length prefixes) that came before the
        oversize prefix in the bytes fed to
        :meth:`~rsocket_tx.core.framing.FrameReader.feed`, to be handled as if they had
        arrived alone.
    """

    def __init__(self, message: str = "", frames: list[bytes] | None = None) -> None:
        super().__init__(message)
        self.frames: list[bytes] = [] if frames is None else frames


class PayloadTooLargeError(RSocketError):
    """A reassembled payload exceeded the configured max reassembled size (bytes).

    Ends only the stream it arrived on (ERROR[INVALID] or CANCEL toward the peer).
    """

    default_code = ErrorCode.INVALID


class ReassemblyBudgetError(PayloadTooLargeError):
    """The fragments of a stream would pass the bytes one connection may hold in reassembly
    across all its streams (``max_reassembly_buffer_size``). Ends only that stream."""

    default_code = ErrorCode.REJECTED


class LocalProtocolError(Exception):
    """The local application used the API in a way the protocol forbids.

    Examples: sending on a finished stream, sending PAYLOAD beyond granted credit, a request on a
    closed connection. Nothing is sent when this is raised.
    """


class StreamIdsExhaustedError(LocalProtocolError):
    """All 2^31-1 stream ids of this side have been used; open a new connection (spec §Lifetime)."""


class LeaseError(RejectedError, LocalProtocolError):
    """A request was **not sent**: the peer's lease does not allow it now (spec §Lease
    Semantics: "The Requester MUST NOT send more than Number of Requests specified in the
    LEASE frame within the Time-To-Live value").

    Raised synchronously by the request methods of a connection that uses leases (the client's
    SETUP had the L flag); nothing was written and no stream id was used. It is a
    :class:`RejectedError` (``error_code`` REJECTED, 0x202), so one ``except RejectedError``
    also covers a responder that rejected a request for lack of a lease, and a
    :class:`LocalProtocolError` (the request never left).

    :param reason: ``"no lease"``, ``"expired"`` or ``"used up"``
        (:data:`~rsocket_tx.core.lease.NO_LEASE`, :data:`~rsocket_tx.core.lease.LEASE_EXPIRED`,
        :data:`~rsocket_tx.core.lease.LEASE_USED_UP`).
    :param message: what happened and what to do.
    :ivar reason: as the parameter.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


_BY_CODE: dict[int, type[RSocketError]] = {
    ErrorCode.INVALID_SETUP: InvalidSetupError,
    ErrorCode.UNSUPPORTED_SETUP: UnsupportedSetupError,
    ErrorCode.REJECTED_SETUP: RejectedSetupError,
    ErrorCode.REJECTED_RESUME: RejectedResumeError,
    ErrorCode.CONNECTION_ERROR: ConnectionError,
    ErrorCode.CONNECTION_CLOSE: ConnectionCloseError,
    ErrorCode.APPLICATION_ERROR: ApplicationError,
    ErrorCode.REJECTED: RejectedError,
    ErrorCode.CANCELED: CanceledError,
    ErrorCode.INVALID: InvalidError,
}


def error_from_code(code: int, message: str) -> RSocketError:
    """Build the typed exception for an ERROR frame received from the peer.

    :param code: the 32-bit error code from the frame.
    :param message: the decoded error data.
    :returns: an instance of the matching class; application-defined codes (and unknown ones)
        give :class:`ApplicationError` carrying the original code.
    """
    cls = _BY_CODE.get(code, ApplicationError)
    return cls(message, code)
