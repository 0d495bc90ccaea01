"""Helpers of the 2015-draft connection tests: two sans-IO connections driven against each
other (bytes of one into the other), hand-built frames, no clock (time through ``tick``)."""

from __future__ import annotations

from rsocket_tx.core.config import ConnectionConfig
from rsocket_tx.core.events import SetupReceived
from rsocket_tx.reactivesocket import frames as F
from rsocket_tx.reactivesocket.connection import ReactiveSocketConnection, Role

SETUP = F.SetupFrame(metadata_mime_type=b"application/x.meta", data_mime_type=b"text/plain",
                     data=b"setup-data", metadata=b"setup-meta")


def wire(frame: F.Frame) -> bytes:
    """A frame as TCP carries it: length word + frame."""
    return F.frame_with_length(F.encode(frame))


def sent(conn: ReactiveSocketConnection) -> list[F.Frame]:
    """The frames ``conn`` queued (drained)."""
    reader = F.FrameReader(1 << 24)
    return [F.decode(b) for b in reader.feed(conn.data_to_send())]


def make_client(setup: F.SetupFrame = SETUP, now: float = 0.0,
                **config) -> ReactiveSocketConnection:
    return ReactiveSocketConnection(Role.CLIENT, ConnectionConfig(**config), setup=setup,
                                    now=now)


def make_server(now: float = 0.0, **config) -> ReactiveSocketConnection:
    return ReactiveSocketConnection(Role.SERVER, ConnectionConfig(**config), now=now)


def open_server(setup: F.SetupFrame = SETUP, **config) -> ReactiveSocketConnection:
    """A server that has accepted ``setup`` (nothing queued)."""
    server = make_server(**config)
    events = server.receive_data(wire(setup), 0.0)
    assert len(events) == 1 and isinstance(events[0], SetupReceived)
    assert server.data_to_send() == b""
    return server


class Pair:
    """A client and a server connected through their byte queues."""

    def __init__(self, setup: F.SetupFrame = SETUP, client_config=None, server_config=None):
        self.client = make_client(setup, **(client_config or {}))
        self.server = make_server(**(server_config or {}))
        self.client_events: list = []
        self.server_events: list = []
        self.pump()
        _, [setup] = self.take()
        assert isinstance(setup, SetupReceived)

    def pump(self, now: float = 0.0) -> None:
        """Move bytes both ways until neither side has anything to send."""
        while True:
            to_server = self.client.data_to_send()
            to_client = self.server.data_to_send()
            if not to_server and not to_client:
                return
            if to_server:
                self.server_events += self.server.receive_data(to_server, now)
            if to_client:
                self.client_events += self.client.receive_data(to_client, now)

    def take(self) -> tuple[list, list]:
        """(client events, server events) since the last take."""
        c, s = self.client_events, self.server_events
        self.client_events, self.server_events = [], []
        return c, s
