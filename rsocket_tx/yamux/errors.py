"""Errors of yamux (HashiCorp's ``spec.md``).

After h11's split: :class:`ProtocolError` is raised when the *peer* broke the protocol (the
codec and the connection raise it; the connection answers it with Go Away "protocol error" and
closes, it never lets it out), :class:`LocalProtocolError` when our own caller used the API in
a way the protocol forbids (nothing is sent; the connection is unharmed).
:class:`StreamResetError` and :class:`ConnectionClosedError` are for the layers above, to
report a stream's reset or the session's end to an application.
"""

from __future__ import annotations

__all__ = [
    "YamuxError",
    "ProtocolError",
    "LocalProtocolError",
    "StreamResetError",
    "ConnectionClosedError",
]


class YamuxError(Exception):
    """Base of every yamux error."""


class ProtocolError(YamuxError):
    """The peer broke the protocol: a frame outside the table of spec.md "Framing", data
    beyond a stream's window, a window past ``max_window``, a stream id of the wrong side or
    used twice, data after FIN, a frame on a stream never opened. The connection sends Go
    Away with code 1 (protocol error) and closes."""


class LocalProtocolError(YamuxError):
    """Our caller asked for something the protocol forbids now: data after our FIN, a new
    stream after the peer's Go Away or ours, any call on an unknown stream or a closed
    session. Nothing was sent."""


class StreamResetError(YamuxError):
    """A stream was reset (RST, spec.md "Closing a stream").

    :param stream_id: the stream.
    :param by_peer: the peer reset it (False: we did, or the session ended).
    """

    def __init__(self, stream_id: int, reason: str, by_peer: bool = True) -> None:
        super().__init__(reason)
        self.stream_id = stream_id
        self.by_peer = by_peer


class ConnectionClosedError(YamuxError):
    """The session ended: a Go Away with an error code (either side), a protocol violation,
    our close, or the transport lost.

    :param reason: human-readable reason.
    :param by_peer: the peer ended it.
    :param code: the Go Away code sent or received (:class:`~rsocket_tx.yamux.codec.GoAwayCode`
        value), or None when no Go Away was exchanged (the transport was lost).
    """

    def __init__(self, reason: str = "", by_peer: bool = True, code: int | None = None) -> None:
        super().__init__(reason or "connection closed")
        self.reason = reason
        self.by_peer = by_peer
        self.code = code
