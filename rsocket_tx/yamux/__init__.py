"""yamux, HashiCorp's stream multiplexer (``spec.md`` of hashicorp/yamux), written on the
framework's public API: the sans-IO wire format (:mod:`.codec`) and session
(:mod:`.connection`) on the mux layer, with events, settings and errors.

This package's ``__init__`` exports only the sans-IO names; the Twisted modules (protocol,
endpoints, faces) are imported from their own modules. ``docs/framework.rst`` walks through
how it is built.
"""

from __future__ import annotations

from .codec import (
    HEADER_SIZE,
    INITIAL_WINDOW,
    VERSION,
    WEBSOCKET_SUBPROTOCOL,
    Flags,
    Frame,
    FrameDecoder,
    FrameType,
    GoAwayCode,
    encode,
    sniff,
)
from .config import YamuxConfig
from .connection import Role, YamuxConnection, YamuxStream
from .errors import (
    ConnectionClosedError,
    LocalProtocolError,
    ProtocolError,
    StreamResetError,
    YamuxError,
)
from .events import (
    ConnectionClosed,
    DataReceived,
    Event,
    GoAwayReceived,
    PingTimedOut,
    PongReceived,
    StreamAccepted,
    StreamEnded,
    StreamOpened,
    StreamReset,
    WindowUpdated,
)

__all__ = [
    "HEADER_SIZE",
    "INITIAL_WINDOW",
    "VERSION",
    "WEBSOCKET_SUBPROTOCOL",
    "ConnectionClosed",
    "ConnectionClosedError",
    "DataReceived",
    "Event",
    "Flags",
    "Frame",
    "FrameDecoder",
    "FrameType",
    "GoAwayCode",
    "GoAwayReceived",
    "LocalProtocolError",
    "PingTimedOut",
    "PongReceived",
    "ProtocolError",
    "Role",
    "StreamAccepted",
    "StreamEnded",
    "StreamOpened",
    "StreamReset",
    "StreamResetError",
    "WindowUpdated",
    "YamuxConfig",
    "YamuxConnection",
    "YamuxError",
    "YamuxStream",
    "encode",
    "sniff",
]
