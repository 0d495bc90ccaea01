"""Errors of the Reactive Streams network protocol (seed ``003``, see ``docs/rsnet.rst``).

After h11's split: :class:`ProtocolError` is raised when the *peer* broke the protocol (the
codec raises it; the connection answers it with *goodbye* and closes, it never lets it out),
:class:`LocalProtocolError` when our own caller used the API in a way the protocol forbids
(nothing is sent; the connection is unharmed). :class:`SubscriptionError` and
:class:`ConnectionClosedError` are for the layers above, to report an *onError* or the
connection's end to an application.
"""

from __future__ import annotations

__all__ = [
    "RSNetError",
    "ProtocolError",
    "LocalProtocolError",
    "SubscriptionError",
    "ConnectionClosedError",
]


class RSNetError(Exception):
    """Base of every error of the Reactive Streams network protocol."""


class ProtocolError(RSNetError):
    """The peer broke the protocol: bytes that are no message of the table (an unknown type,
    an overlong or oversized varint, a length over a limit, invalid UTF-8) or a message the
    connection's state forbids (onNext beyond demand, a message before the hello, ...).

    The connection sends *goodbye* with ``str(error)`` as the reason and closes.
    """


class LocalProtocolError(RSNetError):
    """Our caller asked for something the protocol forbids in the current state (onNext beyond
    demand, a signal after a terminal one, an unknown subscriber id, request(n) with n < 1,
    anything after goodbye, ...). Nothing was sent; the connection is unharmed."""


class SubscriptionError(RSNetError):
    """A subscription ended with *onError* (sent by the peer's publisher, or implied by the
    connection's end: Reactive Streams network draft §Closing the connection).

    :param error: the error text.
    :param by_peer: the peer's publisher sent it (False: the connection's end or a goodbye).
    """

    def __init__(self, error: str, by_peer: bool = True) -> None:
        super().__init__(error or "subscription failed")
        self.error = error
        self.by_peer = by_peer


class ConnectionClosedError(RSNetError):
    """The connection ended (goodbye from either side, a protocol violation, the transport
    lost).

    :param reason: human-readable reason.
    :param by_peer: the peer ended it.
    """

    def __init__(self, reason: str = "", by_peer: bool = True) -> None:
        super().__init__(reason or "connection closed")
        self.reason = reason
        self.by_peer = by_peer
