"""Errors of the Jini ERI multiplexing protocol (Jini ERI Multiplexing Protocol).

After h11's split: :class:`JiniProtocolError` is raised when the *peer* broke the protocol (the
connection answers it with an *Error* message and ends), :class:`LocalProtocolError` when our
own caller used the API in a way the protocol forbids (nothing is sent; the connection is
unharmed). The rest report what happened to a session or a connection to the application.
"""

from __future__ import annotations

__all__ = [
    "JiniMuxError",
    "JiniProtocolError",
    "MessageDecodeError",
    "LocalProtocolError",
    "SessionAbortedError",
    "ConnectionTerminatedError",
    "ConnectionShutdownError",
    "NoFreeSessionError",
]


class JiniMuxError(Exception):
    """Base of every error of the Jini ERI mux."""


class JiniProtocolError(JiniMuxError):
    """The peer violated the protocol (Jini ERI Multiplexing Protocol: "protocol violation").

    The connection queues an *Error* message whose detail is ``str(error)`` and terminates.
    """


class MessageDecodeError(JiniProtocolError):
    """The bytes received are not a message of the table: an unknown first byte, a reserved bit
    or byte that is not 0, a bad connection header (magic, version), or a *Data* with
    ``close``/``ackRequired`` but no ``eof`` (Jini ERI Multiplexing Protocol §Message
    Structure)."""


class LocalProtocolError(JiniMuxError):
    """Our caller asked for something the protocol forbids in the current state (a message for a
    session that is not established, Data past eof, a server-only call on a client, ...).

    Nothing was sent; the connection is unharmed.
    """


class SessionAbortedError(JiniMuxError):
    """A session was terminated abnormally: the peer sent *Abort*, the connection ended before
    the session did, or the server shut the connection down.

    :ivar partial: the request may have been partially processed with side effects (the
        *Abort* message's ``partial`` flag, or an *Error* / lost connection). ``False`` means
        that it is safe to retry the request (at most once semantics hold).
    :ivar detail: the peer's detail text, or a local reason.
    """

    def __init__(self, detail: str = "", partial: bool = True) -> None:
        super().__init__(detail or "session aborted")
        self.detail = detail
        self.partial = partial

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.detail!r}, partial={self.partial!r})"


class ConnectionTerminatedError(JiniMuxError):
    """The connection ended: a protocol violation (by either side), an *Error* message, or the
    transport was lost.

    :ivar reason: human-readable reason.
    :ivar by_peer: ``True`` when the peer ended it (its *Error*, or a lost transport).
    """

    def __init__(self, reason: str = "", by_peer: bool = True) -> None:
        super().__init__(reason or "connection terminated")
        self.reason = reason
        self.by_peer = by_peer


class ConnectionShutdownError(ConnectionTerminatedError):
    """The server shut the connection down gracefully (*Shutdown* message): the sessions that
    were not finished were not processed and may be retried on another connection."""


class NoFreeSessionError(LocalProtocolError):
    """All 128 session identifiers of the connection are in use."""
