"""Helpers for the yamux sans-IO tests: a client and a server session driven against each
other in memory, time passed in."""

from __future__ import annotations

from rsocket_tx.yamux.codec import Frame, encode
from rsocket_tx.yamux.config import YamuxConfig
from rsocket_tx.yamux.connection import Role, YamuxConnection

QUIET = YamuxConfig(keepalive_interval=None)


def pair(client_config: YamuxConfig = QUIET, server_config: YamuxConfig = QUIET):
    return (YamuxConnection(Role.CLIENT, client_config, 0.0),
            YamuxConnection(Role.SERVER, server_config, 0.0))


def move(src: YamuxConnection, dst: YamuxConnection, now: float = 0.0) -> list:
    """Deliver what ``src`` queued to ``dst``; the events."""
    return dst.receive_data(b"".join(src.chunks_to_send()), now)


def names(events) -> list[str]:
    return [type(e).__name__ for e in events]


def raw(conn: YamuxConnection, frame: Frame, now: float = 0.0) -> list:
    return conn.receive_data(encode(frame), now)
