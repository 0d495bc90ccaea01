"""The demo :class:`~rsocket_tx.jini.echo.EchoDispatcher` (the default of ``twistd jini-mux``)
against a client that writes its whole request before it reads the response and grants no
ration for the response until then, as Apache River's ``TcpEndpoint`` client does.

The client is a sans-IO :class:`~rsocket_tx.jini.connection.JiniMuxConnection` with River's
ration and fragment size; the server is the Twisted server protocol on a ``StringTransport``
and a ``Clock``. Bytes move by hand between the two, so a deadlock shows as a round in which
nothing moves: no timeout, no sleep."""

from __future__ import annotations

import pytest

from rsocket_tx.jini import EchoDispatcher
from rsocket_tx.jini.config import RIVER_INITIAL_RATION
from rsocket_tx.jini.connection import JiniMuxConnection, Role
from rsocket_tx.jini.echo import ECHO_MAX_BUFFERED
from rsocket_tx.jini.events import (
    ConnectionEstablished,
    DataReceived,
    RationIncreased,
    SessionAborted,
    SessionClosed,
    SessionReleased,
)

from .clock_helpers import server_on_clock
from .conn_helpers import river_config
from .twisted_helpers import pattern

MIB = 1024 * 1024


class WriteThenRead:
    """One request of a River-like client: it writes all of ``body`` (within the ration the
    server grants) and only then reads the response, granting ration for it as it reads."""

    def __init__(self, dispatcher=EchoDispatcher, **server_settings) -> None:
        self.server, self.transport, self.clock = server_on_clock(dispatcher, **server_settings)
        self.client = JiniMuxConnection(Role.CLIENT, river_config())
        self.client.initiate_connection(0.0)
        self.response = bytearray()
        self.eof = False
        self.aborted: SessionAborted | None = None
        self.reading = False
        self.exchange()

    def exchange(self) -> int:
        """Move bytes both ways until neither side has more; return the bytes moved."""
        moved = 0
        while True:
            self.clock.advance(0)  # (the server's writes at the end of this reactor turn)
            to_server = b"".join(self.client.chunks_to_send())
            if to_server:
                self.server.dataReceived(to_server)
                self.clock.advance(0)
            to_client = self.transport.value()
            self.transport.clear()
            if not to_server and not to_client:
                return moved
            moved += len(to_server) + len(to_client)
            if to_client:
                for event in self.client.receive_data(to_client, 0.0):
                    self.on_event(event)

    def on_event(self, event) -> None:
        if isinstance(event, DataReceived):
            self.response += event.data
            self.eof = self.eof or event.eof
            if self.reading:
                self.client.acknowledge_received_data(event.session_id, len(event.data))
        elif isinstance(event, SessionAborted):
            self.aborted = event
        else:
            assert isinstance(event, (ConnectionEstablished, RationIncreased, SessionClosed,
                                      SessionReleased)), event

    def run(self, body: bytes) -> bytes:
        """Write ``body`` whole (failing if the exchange stalls first), then read."""
        self.response, self.eof, self.aborted, self.reading = bytearray(), False, None, False
        sid = self.client.open_session()
        sent = 0
        while True:
            sent += self.client.send_data(sid, body[sent:], eof=True)
            moved = self.exchange()
            if sent == len(body) or self.aborted is not None:
                break
            assert moved, (f"deadlock: the client wrote {sent} of {len(body)} bytes and "
                           f"neither side can move")
        # River reads only now: what it received so far is taken, then the rest as it comes
        self.reading = True
        self.client.acknowledge_received_data(sid, len(self.response))
        while self.exchange():
            pass
        return bytes(self.response)


@pytest.mark.parametrize("server_ration", [None, RIVER_INITIAL_RATION],
                         ids=["our-ration", "river-ration"])
def test_a_write_then_read_client_gets_its_1_mib_echo(server_ration):
    """River's client writes 1 MiB before it reads, with its 32 KiB ration for the response:
    the echo must keep reading (and so keep granting the client ration) while the response
    waits."""
    settings = {} if server_ration is None else {"initial_ration": server_ration}
    peer = WriteThenRead(**settings)
    body = pattern(MIB)
    assert peer.run(body) == body
    assert peer.eof and peer.aborted is None


def test_past_the_bound_the_echo_aborts_with_a_reason():
    limit = 100_000
    peer = WriteThenRead(lambda: EchoDispatcher(max_buffered=limit))
    peer.run(pattern(300_000))
    aborted = peer.aborted
    assert aborted is not None and aborted.by_peer and aborted.partial
    assert "max_buffered" in aborted.detail and f"({limit}," in aborted.detail
    # the memory is freed, and the connection lives on: a body within the bound is echoed
    assert peer.server.dispatcher.buffered == 0
    body = pattern(limit)
    assert peer.run(body) == body
    assert peer.eof and peer.aborted is None


def test_the_bound_is_per_connection_and_checked():
    assert EchoDispatcher().max_buffered == ECHO_MAX_BUFFERED == 16 * MIB
    for bad in (0, -1, 1.5, True, "1"):
        with pytest.raises(ValueError, match="max_buffered"):
            EchoDispatcher(max_buffered=bad)
