"""Protocol violations: one test per rule of the Jini ERI Multiplexing Protocol that a peer can
break. Each one must make the connection queue an *Error* (its last message) and terminate,
and it must process nothing after it (§Message Structure, §Sessions, §Flow Control and the
sections of each message)."""

from __future__ import annotations

import pytest

from rsocket_tx.jini import codec as C
from rsocket_tx.jini.events import DataReceived, PingAckReceived, SessionOpened

from .conn_helpers import assert_violation, make_client, make_server, sent


def client_with_session(eof: bool = False):
    """A client with session 0 established (a Data with open sent)."""
    client = make_client()
    sid = client.open_session()
    client.send_data(sid, b"req", eof=eof)
    sent(client)
    return client


def server_with_session(eof: bool = False):
    """A server with session 0 established by the client."""
    server = make_server()
    server.receive_data(C.Data(0, b"req", open=True, eof=eof).encode(), 0)
    return server


# -------------------------------------------------------------------------------------------
# §Message Structure: bit patterns


@pytest.mark.parametrize("first", [0x01, 0x03, 0x0A, 0x0F, 0x11, 0x1F, 0x21, 0x24, 0x31, 0x41,
                                   0x50, 0x7F, 0x81, 0xA0, 0xC0, 0xFF])
def test_first_byte_not_in_the_table(first: int) -> None:
    """"It is a protocol violation to send a message with a first byte that does not match one
    of the above bit patterns"."""
    server = make_server()
    assert_violation(server, server.receive_data(bytes([first, 0, 0, 0]), 0),
                     "matches no message type")


@pytest.mark.parametrize("message", [bytes.fromhex("80 80 0000"), bytes.fromhex("10 85 0001"),
                                     bytes.fromhex("20 ff 0000"), bytes.fromhex("30 80 0000")])
def test_reserved_top_bit_of_the_session_byte(message: bytes) -> None:
    """"a session identifier is stored in a single byte with the most significant bit set to
    zero (and reserved for future use)": JGDMS's 256-session extension is refused."""
    server = make_server()
    assert_violation(server, server.receive_data(message, 0), "reserved top bit")


@pytest.mark.parametrize("message", [bytes.fromhex("04 01 0000"), bytes.fromhex("00 ff 0000")])
def test_reserved_byte_of_connection_messages(message: bytes) -> None:
    client = make_client()
    assert_violation(client, client.receive_data(message, 0), "reserved byte 1")


@pytest.mark.parametrize("message", [bytes.fromhex("30 00 0001"), bytes.fromhex("40 00 8000")])
def test_reserved_bytes_of_close_and_acknowledgment(message: bytes) -> None:
    server = server_with_session()
    assert_violation(server, server.receive_data(message, 0), "reserved bytes 2-3")


def test_data_close_without_eof() -> None:
    """"The close and the ackRequired flags must only be set if the eof flag is also set"."""
    client = client_with_session()
    assert_violation(client, client.receive_data(bytes.fromhex("88 00 0000"), 0), "without eof")


def test_data_ack_required_without_eof() -> None:
    client = client_with_session()
    assert_violation(client, client.receive_data(bytes.fromhex("82 00 0000"), 0), "without eof")


# -------------------------------------------------------------------------------------------
# messages from the wrong side


def test_data_open_from_the_server() -> None:
    """"The open flag must only be set when the sender is the client"."""
    client = make_client()
    assert_violation(client, client.receive_data(C.Data(0, open=True).encode(), 0),
                     "open flag from the server")


def test_data_close_from_the_client() -> None:
    """"the close and ackRequired flags must only be set when the sender is the server"."""
    server = server_with_session()
    assert_violation(server, server.receive_data(C.Data(0, eof=True, close=True).encode(), 0),
                     "close or ackRequired flag from the client")


def test_data_ack_required_from_the_client() -> None:
    server = server_with_session()
    message = C.Data(0, eof=True, ack_required=True).encode()
    assert_violation(server, server.receive_data(message, 0),
                     "close or ackRequired flag from the client")


def test_abort_partial_from_the_client() -> None:
    """"The partial flag must only be set when the sender is the server"."""
    server = server_with_session()
    assert_violation(server, server.receive_data(C.Abort(0, partial=True).encode(), 0),
                     "partial flag from the client")


def test_close_from_the_client() -> None:
    """"A Close message must only be sent by the server"."""
    server = server_with_session(eof=True)
    server.send_data(0, b"x", eof=True)  # so that the session would even be closable
    server.receive_data(C.Data(1, b"", open=True, eof=True).encode(), 0)
    assert_violation(server, server.receive_data(C.Close(1).encode(), 0),
                     "Close from the client")


def test_acknowledgment_from_the_server() -> None:
    """"An Acknowledgment message must only be sent by the client"."""
    client = client_with_session(eof=True)
    assert_violation(client, client.receive_data(C.Acknowledgment(0).encode(), 0),
                     "Acknowledgment from the server")


def test_shutdown_from_the_client() -> None:
    """"A Shutdown message must only be sent by the server"."""
    server = make_server()
    assert_violation(server, server.receive_data(C.Shutdown().encode(), 0),
                     "Shutdown from the client")


# -------------------------------------------------------------------------------------------
# messages for a session in the wrong state


def test_data_for_a_session_never_opened() -> None:
    """"If the open flag is not set, then sessionID must identify a session established and
    not finished with respect to the sender" (River: "inactive sessionID")."""
    server = make_server()
    assert_violation(server, server.receive_data(C.Data(7, b"x").encode(), 0),
                     "not established")


def test_data_for_an_idle_client_session() -> None:
    client = make_client()
    client.open_session()  # taken, not yet on the wire
    assert_violation(client, client.receive_data(C.Data(0, b"x").encode(), 0),
                     "not established")


def test_data_after_eof() -> None:
    server = server_with_session(eof=True)
    assert_violation(server, server.receive_data(C.Data(0, b"more").encode(), 0),
                     "already finished")


def test_data_open_for_an_established_session() -> None:
    """"If the open flag is set, then sessionID must not identify an established session"."""
    server = server_with_session()
    assert_violation(server, server.receive_data(C.Data(0, open=True).encode(), 0),
                     "still established")


def test_data_open_after_eof_but_before_the_server_terminated() -> None:
    """Finished by the client is not enough: the server must have terminated it too."""
    server = server_with_session(eof=True)
    assert_violation(server, server.receive_data(C.Data(0, open=True).encode(), 0),
                     "still established")


def test_increment_ration_for_an_inactive_session() -> None:
    """"The sessionID must identify a session established with respect to the sender"."""
    client = make_client()
    assert_violation(client, client.receive_data(C.IncrementRation(9, 10).encode(), 0),
                     "IncrementRation for session 9")


def test_increment_ration_after_the_servers_close() -> None:
    client = client_with_session(eof=True)
    client.receive_data(C.Data(0, b"r", eof=True, close=True).encode(), 0)
    assert_violation(client, client.receive_data(C.IncrementRation(0, 10).encode(), 0),
                     "IncrementRation for session 0")


def test_abort_for_an_inactive_session() -> None:
    server = make_server()
    assert_violation(server, server.receive_data(C.Abort(3).encode(), 0), "Abort for session 3")


def test_abort_after_the_clients_abort() -> None:
    """"the sender must not send any further messages for the session"."""
    server = server_with_session()
    server.receive_data(C.Abort(0).encode(), 0)
    assert_violation(server, server.receive_data(C.Abort(0).encode(), 0), "Abort for session 0")


def test_close_for_a_session_not_finished_by_the_server() -> None:
    """"The sessionID must identify a session finished (but established) with respect to the
    server"."""
    client = client_with_session()
    assert_violation(client, client.receive_data(C.Close(0).encode(), 0), "not finished")


def test_close_for_an_inactive_session() -> None:
    client = make_client()
    assert_violation(client, client.receive_data(C.Close(0).encode(), 0), "not finished")


def test_acknowledgment_not_asked_for() -> None:
    """"An Acknowledgment must only be sent after the server has sent a Data message with
    the ackRequired flag set"."""
    server = server_with_session(eof=True)
    server.send_data(0, b"resp", eof=True)
    assert_violation(server, server.receive_data(C.Acknowledgment(0).encode(), 0),
                     "did not ask for one")


def test_second_acknowledgment() -> None:
    """"and it must only be sent once for the session"."""
    server = server_with_session(eof=True)
    server.send_data(0, b"resp", eof=True, ack_required=True)
    server.receive_data(C.Acknowledgment(0).encode(), 0)
    assert_violation(server, server.receive_data(C.Acknowledgment(0).encode(), 0),
                     "second Acknowledgment")


# -------------------------------------------------------------------------------------------
# §Flow Control


def test_data_past_the_inbound_ration() -> None:
    server = make_server(initial_ration=256)
    events = server.receive_data(C.Data(0, bytes(257), open=True).encode(), 0)
    assert_violation(server, events, "exceeds its inbound ration of 256 bytes")


def test_ration_overflow() -> None:
    server = server_with_session()
    server.receive_data(C.IncrementRation(0, 0xFFFF, 7).encode(), 0)
    events = server.receive_data(C.IncrementRation(0, 0xFFFF, 7).encode(), 0)
    assert_violation(server, events, "overflows")


# -------------------------------------------------------------------------------------------
# §PingAck


def test_ping_ack_answering_no_ping() -> None:
    """"must only be sent in response to exactly one previous Ping message"."""
    client = make_client()
    assert_violation(client, client.receive_data(C.PingAck(5).encode(), 0), "answers no Ping")


def test_second_ping_ack_for_one_ping() -> None:
    client = make_client()
    cookie = client.ping(0.0)
    sent(client)
    assert client.receive_data(C.PingAck(cookie).encode(), 0) == [PingAckReceived(cookie)]
    assert_violation(client, client.receive_data(C.PingAck(cookie).encode(), 0),
                     "answers no Ping")


# -------------------------------------------------------------------------------------------
# what comes before the violation is processed, what comes after is not


def test_messages_before_the_violation_are_delivered() -> None:
    server = make_server()
    events = server.receive_data(C.Data(0, b"ok", open=True).encode() + bytes([0x01, 0, 0, 0])
                                 + C.Data(1, b"never", open=True).encode(), 0)
    assert events[:2] == [SessionOpened(0), DataReceived(0, b"ok")]
    assert_violation(server, events, "matches no message type")
