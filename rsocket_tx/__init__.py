"""rsocket_tx: RSocket 1.0 for Twisted.

A sans-IO protocol core (:mod:`rsocket_tx.core`) under a Twisted layer: :func:`connect` and
:func:`serve` over any stream endpoint, Deferred-based requesters (:class:`RSocket`), and
:class:`Responder` for applications to subclass.
"""

from .client import connect
from .core.errors import (
    ApplicationError,
    CanceledError,
    ConnectionCloseError,
    ConnectionError,
    ConnectionLostError,
    ErrorCode,
    InvalidError,
    InvalidSetupError,
    LocalProtocolError,
    PayloadTooLargeError,
    ProtocolError,
    RejectedError,
    RejectedResumeError,
    RejectedSetupError,
    RSocketError,
    UnsupportedSetupError,
)
from .core.payload import Payload
from .protocol import RSocketClientFactory, RSocketProtocol, RSocketServerFactory
from .requester import RSocket
from .responder import Responder, SetupInfo
from .server import serve
from .streams import RequestStream

__version__ = "0.1.0"

__all__ = [
    "ApplicationError",
    "CanceledError",
    "ConnectionCloseError",
    "ConnectionError",
    "ConnectionLostError",
    "ErrorCode",
    "InvalidError",
    "InvalidSetupError",
    "LocalProtocolError",
    "Payload",
    "PayloadTooLargeError",
    "ProtocolError",
    "RSocket",
    "RSocketClientFactory",
    "RSocketError",
    "RSocketProtocol",
    "RSocketServerFactory",
    "RejectedError",
    "RejectedResumeError",
    "RejectedSetupError",
    "RequestStream",
    "Responder",
    "SetupInfo",
    "UnsupportedSetupError",
    "connect",
    "serve",
]
