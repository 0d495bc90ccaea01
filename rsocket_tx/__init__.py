"""rsocket_tx: RSocket 1.0 for Twisted.

A sans-IO protocol core (:mod:`rsocket_tx.core`) under a Twisted layer: :func:`connect` and
:func:`serve` over any stream endpoint, Deferred-based requesters (:class:`RSocket`), and
:class:`Responder` for applications to subclass, routed with :class:`route`. The metadata
extensions (composite metadata, routing, authentication, MIME types, tracing) are in
:mod:`rsocket_tx.extensions`, data codecs in :mod:`rsocket_tx.codecs`.
"""

from .build import compiled
from .client import connect
from .core.errors import (
    ApplicationError,
    CanceledError,
    ConnectionCloseError,
    ConnectionError,
    ConnectionLostError,
    ErrorCode,
    ExcessiveBufferingError,
    InvalidError,
    InvalidSetupError,
    LocalProtocolError,
    PayloadTooLargeError,
    ProtocolError,
    RejectedError,
    RejectedResumeError,
    RejectedSetupError,
    RequestTimeout,
    RSocketError,
    UnsupportedSetupError,
)
from .core.payload import Payload
from .lease import FixedRateLeasePolicy, Lease, LeaseError, LeasePolicy
from .protocol import RSocketClientFactory, RSocketProtocol, RSocketServerFactory
from .requester import RSocket
from .responder import Responder, SetupInfo
from .routing import Request, route
from .server import serve
from .streams import DecodedStream, RequestStream

#: The package version, its one source: setup.cfg reads it (``attr:``), and so do the docs and
#: ``rsocket-tx --version``; installed, ``importlib.metadata.version("rsocket_tx")`` agrees.
__version__ = "0.1.0"

# ``compiled`` (imported above from :mod:`rsocket_tx.build`): True when the sans-IO layers run
# compiled with mypyc, False for the pure-Python build; ``rsocket-tx --version`` prints it.

__all__ = [
    "ApplicationError",
    "CanceledError",
    "ConnectionCloseError",
    "ConnectionError",
    "ConnectionLostError",
    "DecodedStream",
    "ErrorCode",
    "ExcessiveBufferingError",
    "InvalidError",
    "FixedRateLeasePolicy",
    "InvalidSetupError",
    "Lease",
    "LeaseError",
    "LeasePolicy",
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
    "Request",
    "RequestStream",
    "RequestTimeout",
    "Responder",
    "SetupInfo",
    "UnsupportedSetupError",
    "__version__",
    "compiled",
    "connect",
    "route",
    "serve",
]
