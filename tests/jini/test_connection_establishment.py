"""Jini ERI Multiplexing Protocol §Connection Establishment, §ClientConnectionHeader Message,
§ServerConnectionHeader Message: the sans-IO connection."""

from __future__ import annotations

import pytest

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.config import JiniMuxConfig
from rsocket_tx.jini.connection import ConnectionState, JiniMuxConnection, Role
from rsocket_tx.jini.errors import LocalProtocolError
from rsocket_tx.jini.events import ConnectionEstablished, ConnectionTerminated

from .conn_helpers import (
    CLIENT_HEADER,
    SERVER_HEADER,
    Pair,
    assert_violation,
    make_client,
    make_server,
    river_config,
    sent_bytes,
)


def test_client_sends_its_header_first() -> None:
    """"the client must first send a ClientConnectionHeader message"."""
    client = JiniMuxConnection(Role.CLIENT)
    # our default ration, 131,072 bytes: initialRation 0x0200
    assert sent_bytes(client) == bytes.fromhex("4a6d7578 01 0200 00")
    assert client.state is ConnectionState.HANDSHAKE
    river = JiniMuxConnection(Role.CLIENT, river_config())
    assert sent_bytes(river) == bytes.fromhex("4a6d7578 01 0080 00")  # River's own header


def test_server_waits_for_the_client_header_then_sends_its_own() -> None:
    """"the server must wait to receive one. After receiving the ClientConnectionHeader, the
    server must then first send a ServerConnectionHeader message in response"."""
    server = JiniMuxConnection(Role.SERVER, JiniMuxConfig(initial_ration=512))
    assert sent_bytes(server) == b""
    assert server.receive_data(CLIENT_HEADER[:5], 0) == []
    assert sent_bytes(server) == b""
    events = server.receive_data(CLIENT_HEADER[5:], 0)
    assert events == [ConnectionEstablished(32768)]
    assert sent_bytes(server) == bytes.fromhex("4a6d7578 01 0002 00")
    assert server.peer_ration == 32768


def test_client_may_not_open_a_session_before_the_server_header() -> None:
    """"After receiving a ServerConnectionHeader message, the client can send other
    messages"."""
    client = make_client(handshake=False)
    with pytest.raises(LocalProtocolError, match="handshake"):
        client.open_session()
    assert client.receive_data(SERVER_HEADER, 0) == [ConnectionEstablished(32768)]
    assert client.open_session() == 0


def test_headers_set_initial_rations_both_ways() -> None:
    """§Flow Control: the client's inbound / server's outbound initial ration is the
    client's header value, and the other way round."""
    pair = Pair(client={"initial_ration": 1024}, server={"initial_ration": 768})
    sid = pair.client.open_session()
    assert pair.client.outbound_ration(sid) == 768
    assert pair.client.send_data(sid, b"x" * 5000) == 768
    pair.pump()
    assert pair.server.outbound_ration(sid) == 1024
    assert pair.server.session(sid).inbound.available == 0


def test_zero_ration_is_unlimited() -> None:
    """"(initialRation * 256) if initialRation is non-zero, or infinity if initialRation is
    zero"."""
    pair = Pair(client={"initial_ration": None}, server={"initial_ration": 0,
                                                        "max_session_buffer": 1 << 30,
                                                        "max_connection_buffer": 1 << 30})
    assert pair.log[0][1] == C.ClientConnectionHeader(0)
    assert pair.log[1][1] == C.ServerConnectionHeader(0)
    sid = pair.client.open_session()
    assert pair.client.outbound_ration(sid) is None
    body = bytes(200_000)
    assert pair.client.send_data(sid, body, eof=True) == len(body)
    _, events = pair.pump()
    assert sum(len(e.data) for e in events if hasattr(e, "data")) == len(body)
    assert not any(isinstance(m, C.IncrementRation) for m in pair.messages())


@pytest.mark.parametrize("header, why", [
    (bytes.fromhex("4a6d7578 02 0080 00"), "version"),
    (bytes.fromhex("4a6d7578 00 0080 00"), "version"),
    (bytes.fromhex("4a6d7578 01 0080 07"), "reserved"),
    (b"GET / HT", "magic"),
])
def test_invalid_client_header_gets_server_header_then_error(header: bytes, why: str) -> None:
    """"If the server receives an invalid ClientConnectionHeader message, the server should
    respond with an Error message following the ServerConnectionHeader message"."""
    server = make_server(handshake=False)
    events = server.receive_data(header, 0)
    out = sent_bytes(server)
    assert out[:8] == SERVER_HEADER
    error = C.decode(out[8:])
    assert isinstance(error, C.Error) and why in error.detail.decode()
    assert isinstance(events[-1], ConnectionTerminated) and events[-1].error_sent
    assert not server.is_open


def test_invalid_server_header_gets_error() -> None:
    client = make_client(handshake=False)
    assert sent_bytes(client) == CLIENT_HEADER
    events = client.receive_data(bytes.fromhex("4a6d7578 09 0080 00"), 0)
    assert_violation(client, events, "version")


def test_handshake_timeout() -> None:
    client = make_client(now=100.0, handshake=False, handshake_timeout=2_000)
    assert client.next_deadline() == pytest.approx(102.0)
    assert client.tick(101.9) == []
    events = client.tick(102.0)
    assert events == [ConnectionTerminated(
        "no connection header from the server within 2000 ms", by_peer=False)]
    assert not client.is_open and client.next_deadline() is None
    server = make_server(now=0.0, handshake=False, handshake_timeout=1)
    assert isinstance(server.tick(0.001)[-1], ConnectionTerminated)


def test_handshake_deadline_cancelled_by_header() -> None:
    client = make_client(now=0.0, handshake=True, handshake_timeout=1_000)
    assert client.next_deadline() is None
    assert client.tick(5.0) == []
    assert client.is_open


def test_header_cut_anywhere() -> None:
    pair = Pair()
    assert pair.client.handshake_complete and pair.server.handshake_complete
    server = make_server(handshake=False)
    for i in range(8):
        events = server.receive_data(CLIENT_HEADER[i:i + 1], 0)
    assert events == [ConnectionEstablished(32768)]


def test_messages_right_after_the_header_in_one_read() -> None:
    server = make_server(handshake=False)
    events = server.receive_data(CLIENT_HEADER + C.Data(0, b"hi", open=True, eof=True).encode(),
                                 0)
    assert [type(e).__name__ for e in events] == [
        "ConnectionEstablished", "SessionOpened", "DataReceived"]
    assert sent_bytes(server)[:8] == SERVER_HEADER


def test_connection_lost_during_handshake() -> None:
    client = make_client(handshake=False)
    assert client.connection_lost("gone") == [ConnectionTerminated("gone", by_peer=True)]
    assert client.connection_lost("again") == []
