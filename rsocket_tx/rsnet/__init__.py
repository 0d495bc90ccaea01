"""The Reactive Streams network protocol (seed ``003``, the Reactive Streams network draft),
sans-IO: wire format (:mod:`.codec`), connection (:mod:`.connection`), events, settings and
errors. The wire format rsocket_tx completes the draft with is in ``docs/rsnet.rst``.

This package's ``__init__`` exports only the sans-IO names; the Twisted modules of the package
(protocol, client, server, ...) are imported from their own modules.
"""

from __future__ import annotations

from .codec import (
    CLIENT_HELLO_PREFIX,
    VERSION,
    WEBSOCKET_SUBPROTOCOL,
    MessageDecoder,
    MessageType,
    decode,
    encode,
    sniff,
)
from .config import MAX_ID, MAX_LONG, RSNetConfig
from .connection import ConnectionState, Role, RSNetConnection, SubscriptionState
from .errors import (
    ConnectionClosedError,
    LocalProtocolError,
    ProtocolError,
    RSNetError,
    SubscriptionError,
)
from .events import (
    CancelReceived,
    ConnectionClosed,
    Event,
    HelloReceived,
    OnCompleteReceived,
    OnErrorReceived,
    OnNextReceived,
    OnSubscribeReceived,
    RequestReceived,
    SubscribeReceived,
)

__all__ = [
    "CLIENT_HELLO_PREFIX",
    "MAX_ID",
    "MAX_LONG",
    "VERSION",
    "WEBSOCKET_SUBPROTOCOL",
    "CancelReceived",
    "ConnectionClosed",
    "ConnectionClosedError",
    "ConnectionState",
    "Event",
    "HelloReceived",
    "LocalProtocolError",
    "MessageDecoder",
    "MessageType",
    "OnCompleteReceived",
    "OnErrorReceived",
    "OnNextReceived",
    "OnSubscribeReceived",
    "ProtocolError",
    "RSNetConfig",
    "RSNetConnection",
    "RSNetError",
    "RequestReceived",
    "Role",
    "SubscribeReceived",
    "SubscriptionError",
    "SubscriptionState",
    "decode",
    "encode",
    "sniff",
]
