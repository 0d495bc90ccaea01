"""Helpers for the sans-IO :class:`RSNetConnection` tests (no I/O, no clock).

Two connections are driven against each other by moving ``data_to_send()`` of one into
``receive_data()`` of the other; hand-built messages are made with the codec (or byte by byte
where the point is a malformed one). Time only moves through ``now`` arguments (seconds).
"""

from __future__ import annotations

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.config import RSNetConfig
from rsocket_tx.rsnet.connection import ConnectionState, Role, RSNetConnection
from rsocket_tx.rsnet.events import ConnectionClosed, Event

__all__ = ["CLIENT_HELLO", "SERVER_HELLO", "Pair", "make", "sent", "assert_violation"]

#: version 0, no extensions
CLIENT_HELLO = bytes.fromhex("f1 52534e 00 00")
SERVER_HELLO = bytes.fromhex("f2 52534e 00 00")


def make(role: Role, handshake: bool = True, **config: object) -> RSNetConnection:
    """A connection; with ``handshake``, the peer's plain version-0 hello has been received and
    our own hello taken from the outbox."""
    conn = RSNetConnection(role, RSNetConfig(**config))  # type: ignore[arg-type]
    conn.initiate_connection(0.0)
    if handshake:
        conn.data_to_send()
        conn.receive_data(SERVER_HELLO if role is Role.CLIENT else CLIENT_HELLO)
    return conn


def sent(conn: RSNetConnection, element_size: object = None) -> list[C.Message]:
    """The messages the connection has queued (and taken)."""
    sizes = element_size if callable(element_size) else (lambda sid: 0)
    messages, rest = C.decode(conn.data_to_send(), element_size=sizes)
    assert rest == b""
    return messages


def assert_violation(events: list[Event], conn: RSNetConnection, match: str) -> str:
    """The connection answered a violation: goodbye queued (its reason containing ``match``),
    closed, and the last event a ConnectionClosed with ``goodbye_sent``."""
    assert events and isinstance(events[-1], ConnectionClosed), events
    closed = events[-1]
    assert closed.goodbye_sent and not closed.by_peer
    assert match in closed.reason, closed.reason
    assert conn.state is ConnectionState.CLOSED and not conn.is_open
    last = sent(conn)[-1]
    # the goodbye carries the reason, cut to max_string_length bytes
    assert isinstance(last, C.Goodbye) and last.reason and closed.reason.startswith(last.reason)
    return closed.reason


class Pair:
    """A client and a server connected back to back.

    :ivar client_events: / server_events: every event each side produced, in order.
    """

    def __init__(self, client: dict[str, object] | None = None,
                 server: dict[str, object] | None = None, handshake: bool = True) -> None:
        self.client = RSNetConnection(Role.CLIENT,
                                      RSNetConfig(**(client or {})))  # type: ignore[arg-type]
        self.server = RSNetConnection(Role.SERVER,
                                      RSNetConfig(**(server or {})))  # type: ignore[arg-type]
        self.client_events: list[Event] = []
        self.server_events: list[Event] = []
        if handshake:
            self.pump()

    def to_server(self) -> list[Event]:
        """Move what the client queued to the server: the server's events."""
        events = self.server.receive_data(self.client.data_to_send())
        self.server_events += events
        return events

    def to_client(self) -> list[Event]:
        """Move what the server queued to the client: the client's events."""
        events = self.client.receive_data(self.server.data_to_send())
        self.client_events += events
        return events

    def pump(self) -> tuple[list[Event], list[Event]]:
        """Move bytes both ways until neither side has anything queued: (client events,
        server events) of this pump."""
        cev: list[Event] = []
        sev: list[Event] = []
        while self.client.bytes_to_send or self.server.bytes_to_send:
            sev += self.to_server()
            cev += self.to_client()
        return cev, sev
