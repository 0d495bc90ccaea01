"""Helpers for the sans-IO :class:`JiniMuxConnection` tests (no I/O, no clock).

A client and a server connection are driven against each other by moving the bytes of
``chunks_to_send()`` of one into ``receive_data()`` of the other. Hand-built messages are made
with the codec (or byte by byte where the point is a malformed one). Time only moves through
the ``now`` arguments (seconds).

The connections are built with River's ration and fragment size (:func:`river_config`: the
tests were written against River's bytes); a test passes its own settings over them.
"""

from __future__ import annotations

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.config import RIVER_FRAGMENT_SIZE, RIVER_INITIAL_RATION, JiniMuxConfig
from rsocket_tx.jini.connection import JiniMuxConnection, Role
from rsocket_tx.jini.events import ConnectionTerminated, Event

__all__ = [
    "CLIENT_HEADER",
    "SERVER_HEADER",
    "Pair",
    "make_client",
    "make_server",
    "sent",
    "sent_bytes",
    "assert_violation",
    "river_config",
]

#: River's connection headers (32,768-byte ration)
CLIENT_HEADER = bytes.fromhex("4a6d7578 01 0080 00")
SERVER_HEADER = bytes.fromhex("4a6d7578 01 0080 00")


def river_config(**config: object) -> JiniMuxConfig:
    """A config with River's ration (32,768 bytes) and fragment size (1,024), then ``config``."""
    settings: dict[str, object] = {"initial_ration": RIVER_INITIAL_RATION,
                                   "fragment_size": RIVER_FRAGMENT_SIZE, **config}
    return JiniMuxConfig(**settings)  # type: ignore[arg-type]


def make_client(now: float = 0.0, handshake: bool = True, **config: object) -> JiniMuxConnection:
    """A client connection; with ``handshake``, River's server header has been received and the
    client's own header taken from its outbox."""
    conn = JiniMuxConnection(Role.CLIENT, river_config(**config))
    conn.initiate_connection(now)
    if handshake:
        conn.chunks_to_send()
        conn.receive_data(SERVER_HEADER, now)
    return conn


def make_server(now: float = 0.0, handshake: bool = True, **config: object) -> JiniMuxConnection:
    """A server connection; with ``handshake``, River's client header has been received and the
    server's header taken from its outbox."""
    conn = JiniMuxConnection(Role.SERVER, river_config(**config))
    conn.initiate_connection(now)
    if handshake:
        conn.receive_data(CLIENT_HEADER, now)
        conn.chunks_to_send()
    return conn


def sent_bytes(conn: JiniMuxConnection) -> bytes:
    """Everything the connection has queued, joined (and taken)."""
    return b"".join(conn.chunks_to_send())


def sent(conn: JiniMuxConnection) -> list[C.Message]:
    """The messages the connection has queued (and taken); no connection header expected."""
    decoder = C.MessageDecoder(None)
    out = decoder.feed(sent_bytes(conn))
    assert decoder.buffered == 0
    return out  # type: ignore[return-value]


def assert_violation(conn: JiniMuxConnection, events: list[Event], match: str) -> str:
    """The connection detected a violation: it queued exactly one Error (its last message)
    whose detail contains ``match``, and reported ConnectionTerminated. Returns the detail."""
    assert events, "no events"
    last = events[-1]
    assert isinstance(last, ConnectionTerminated), events
    assert last.error_sent and not last.by_peer
    assert match in last.reason, last.reason
    assert not conn.is_open
    messages = sent(conn)
    assert messages and isinstance(messages[-1], C.Error), messages
    assert [m for m in messages if isinstance(m, C.Error)] == [messages[-1]]
    detail = messages[-1].detail.decode()
    assert match in detail
    # and nothing more is processed
    assert conn.receive_data(C.Ping(1).encode(), 0.0) == []
    assert conn.chunks_to_send() == []
    return detail


class Pair:
    """A client and a server connection, handshake done, with the events each has seen."""

    def __init__(self, client: dict[str, object] | None = None,
                 server: dict[str, object] | None = None) -> None:
        self.client = JiniMuxConnection(Role.CLIENT, river_config(**(client or {})))
        self.server = JiniMuxConnection(Role.SERVER, river_config(**(server or {})))
        self.client_events: list[Event] = []
        self.server_events: list[Event] = []
        #: every message that travelled, in order: ("C", message) or ("S", message)
        self.log: list[tuple[str, object]] = []
        self._c_dec = C.MessageDecoder(C.ClientConnectionHeader)
        self._s_dec = C.MessageDecoder(C.ServerConnectionHeader)
        self.pump()

    def pump(self, now: float = 0.0) -> tuple[list[Event], list[Event]]:
        """Move bytes both ways until neither side has anything to send; return the new
        (client, server) events."""
        new_c: list[Event] = []
        new_s: list[Event] = []
        while True:
            c_out = b"".join(self.client.chunks_to_send())
            s_out = b"".join(self.server.chunks_to_send())
            if not c_out and not s_out:
                break
            if c_out:
                self.log += [("C", m) for m in self._c_dec.feed(c_out)]
                new_s += self.server.receive_data(c_out, now)
            if s_out:
                self.log += [("S", m) for m in self._s_dec.feed(s_out)]
                new_c += self.client.receive_data(s_out, now)
        self.client_events += new_c
        self.server_events += new_s
        return new_c, new_s

    def messages(self, side: str | None = None) -> list[object]:
        """The messages logged so far (from one side, "C" or "S", or both), headers
        excluded."""
        return [m for s, m in self.log
                if (side is None or s == side) and not isinstance(m, C.ConnectionHeader)]

    def clear_log(self) -> None:
        self.log.clear()
