"""Helpers for the :class:`RSocketConnection` protocol-rule tests (no I/O, no clock).

A client connection and a server connection are driven against each other by moving the bytes
of ``data_to_send()`` of one into ``receive_data()`` of the other; hand-built frames are made
with the frame codec (``encode`` + ``frame_with_length``) or written byte by byte where the
point is a malformed frame. Time only moves through ``tick(now)`` (seconds).
"""

from __future__ import annotations

from struct import Struct

from rsocket_tx.core import frames as F
from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.connection import Role, RSocketConnection
from rsocket_tx.core.events import Event, SetupReceived
from rsocket_tx.core.framing import FrameReader, frame_with_length

__all__ = [
    "DATA_MIME",
    "DIRECTIONS",
    "KEEPALIVE_MS",
    "LIFETIME_MS",
    "MAX_U31",
    "METADATA_MIME",
    "Pair",
    "decode_all",
    "error_frames",
    "feed_bytewise",
    "hand_frame",
    "make_client",
    "make_server",
    "roles",
    "sent",
    "setup_frame",
    "split_frames",
    "wire",
    "with_stream_id",
]

KEEPALIVE_MS = 1_000
LIFETIME_MS = 5_000
METADATA_MIME = b"application/x.test-meta"
DATA_MIME = b"text/plain"
MAX_U31 = 2**31 - 1
#: the two ways a request can travel: the client requests (odd ids) or the server does (even)
DIRECTIONS = ("client-requests", "server-requests")

_HEADER = Struct(">IH")


def setup_frame(**overrides: object) -> F.SetupFrame:
    """A SETUP frame with test defaults (1 s keepalive, 5 s lifetime, data and metadata)."""
    fields: dict[str, object] = {
        "keepalive_interval": KEEPALIVE_MS,
        "max_lifetime": LIFETIME_MS,
        "metadata_mime_type": METADATA_MIME,
        "data_mime_type": DATA_MIME,
        "data": b"setup-data",
        "metadata": b"setup-meta",
    }
    fields.update(overrides)
    return F.SetupFrame(**fields)


def make_client(setup: F.SetupFrame | None = None, now: float = 0.0,
                **config: object) -> RSocketConnection:
    """A client connection; ``config`` keywords go to :class:`ConnectionConfig`."""
    return RSocketConnection(Role.CLIENT, ConnectionConfig(**config),
                             setup=setup or setup_frame(), now=now)


def make_server(now: float = 0.0, **config: object) -> RSocketConnection:
    """A server connection waiting for SETUP."""
    return RSocketConnection(Role.SERVER, ConnectionConfig(**config), now=now)


def wire(frame: F.Frame) -> bytes:
    """A frame object as it travels on TCP: 3-byte length prefix + encoded frame."""
    return frame_with_length(F.encode(frame))


def hand_frame(stream_id: int, frame_type: int, flags: int = 0, body: bytes = b"") -> bytes:
    """A length-prefixed frame built by hand (header fields not checked at all)."""
    return frame_with_length(_HEADER.pack(stream_id, (frame_type << 10) | flags) + body)


def with_stream_id(prefixed_frame: bytes, stream_id: int) -> bytes:
    """Rewrite the stream id of one length-prefixed frame (for frames the codec pins to 0)."""
    return prefixed_frame[:3] + stream_id.to_bytes(4, "big") + prefixed_frame[7:]


def split_frames(data: bytes) -> list[bytes]:
    """Split length-prefixed output into frames (no prefixes); asserts nothing is left over."""
    reader = FrameReader()
    frames = reader.feed(data)
    assert reader.buffered == 0, "output ends in the middle of a frame"
    return [bytes(f) for f in frames]


def decode_all(data: bytes) -> list[F.Frame]:
    """Decode every frame of length-prefixed output."""
    return [F.decode(f) for f in split_frames(data)]


def sent(conn: RSocketConnection) -> list[F.Frame]:
    """Drain ``conn``'s output and decode it."""
    return decode_all(conn.data_to_send())


def error_frames(frames: list[F.Frame]) -> list[F.ErrorFrame]:
    return [f for f in frames if isinstance(f, F.ErrorFrame)]


def feed_bytewise(conn: RSocketConnection, data: bytes) -> list[Event]:
    """Feed ``data`` one byte at a time; return every event, in order."""
    events: list[Event] = []
    for i in range(len(data)):
        events.extend(conn.receive_data(data[i:i + 1]))
    return events


class Pair:
    """A client and a server connection wired together without I/O.

    :param establish: deliver the client's SETUP to the server at once (and check that the
        server accepted it).
    """

    def __init__(self, *, setup: F.SetupFrame | None = None,
                 client_config: dict | None = None, server_config: dict | None = None,
                 establish: bool = True) -> None:
        self.client = make_client(setup, **(client_config or {}))
        self.server = make_server(**(server_config or {}))
        if establish:
            events = self.to_server()
            assert [type(e) for e in events] == [SetupReceived]

    def other(self, conn: RSocketConnection) -> RSocketConnection:
        return self.server if conn is self.client else self.client

    def deliver(self, src: RSocketConnection) -> list[Event]:
        """Move everything ``src`` wants sent into its peer; return the peer's events."""
        return self.other(src).receive_data(src.data_to_send())

    def to_server(self) -> list[Event]:
        return self.deliver(self.client)

    def to_client(self) -> list[Event]:
        return self.deliver(self.server)


def roles(pair: Pair, direction: str) -> tuple[RSocketConnection, RSocketConnection]:
    """(requester, responder) of ``pair`` for one of :data:`DIRECTIONS`."""
    if direction == "client-requests":
        return pair.client, pair.server
    return pair.server, pair.client
