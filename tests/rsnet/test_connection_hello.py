"""Reactive Streams network draft §Protocol negotiation, at the sans-IO level: the loose hello,
the version check, the extension intersection, messages before the hello, the hello timeout."""

from __future__ import annotations

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.connection import ConnectionState, Role, RSNetConnection
from rsocket_tx.rsnet.events import (
    ConnectionClosed,
    HelloReceived,
    OnErrorReceived,
    SubscribeReceived,
)

from .conn_helpers import CLIENT_HELLO, SERVER_HELLO, Pair, assert_violation, make, sent


def test_each_side_sends_its_hello_at_once() -> None:
    # the server need not wait for the clientHello (a 'loose' handshake)
    assert RSNetConnection(Role.CLIENT).data_to_send() == CLIENT_HELLO
    assert RSNetConnection(Role.SERVER).data_to_send() == SERVER_HELLO


def test_hellos_cross_and_both_sides_open() -> None:
    pair = Pair(client={"extensions": (1, 2, 5)}, server={"extensions": (5, 2, 9)})
    [hello_c] = pair.client_events
    [hello_s] = pair.server_events
    assert hello_c == HelloReceived(0, (5, 2, 9), frozenset({2, 5}))
    assert hello_s == HelloReceived(0, (1, 2, 5), frozenset({2, 5}))
    assert pair.client.extensions == pair.server.extensions == frozenset({2, 5})
    assert pair.client.state is pair.server.state is ConnectionState.OPEN
    assert pair.client.peer_version == 0


def test_the_client_subscribes_before_the_server_hello_arrives() -> None:
    # §Protocol negotiation: "The client can optimistically send more messages after the
    # clientHello without waiting for the serverHello."
    pair = Pair(handshake=False)
    sid = pair.client.subscribe("ticks", 3)
    assert pair.client.state is ConnectionState.HELLO
    events = pair.to_server()
    assert [type(e) for e in events] == [HelloReceived, SubscribeReceived]
    assert events[1] == SubscribeReceived(sid, "ticks", 3)


def test_server_refuses_another_version_and_discards_what_followed() -> None:
    server = make(Role.SERVER, handshake=False)
    server.data_to_send()
    hello_v1 = C.encode(C.ClientHello(1))
    events = server.receive_data(hello_v1 + C.encode(C.Subscribe("ticks", 0, 1)))
    reason = assert_violation(events, server, "unsupported protocol version 1")
    assert "discarded" in reason
    assert not any(isinstance(e, SubscribeReceived) for e in events)


def test_client_seeing_another_version_counts_its_messages_discarded() -> None:
    client = make(Role.CLIENT, handshake=False)
    sid = client.subscribe("ticks", 1)
    client.data_to_send()
    events = client.receive_data(C.encode(C.ServerHello(3)))
    assert isinstance(events[0], OnErrorReceived) and events[0].subscriber_id == sid
    assert not events[0].by_peer and "version 3" in events[0].error
    assert_violation(events, client, "unsupported protocol version 3")


def test_a_message_before_the_hello_is_a_violation() -> None:
    server = make(Role.SERVER, handshake=False)
    server.data_to_send()
    events = server.receive_data(C.encode(C.Subscribe("ticks", 0, 1)))
    assert_violation(events, server, "before the client's hello")


def test_a_hello_of_the_wrong_side_is_a_violation() -> None:
    server = make(Role.SERVER, handshake=False)
    server.data_to_send()
    assert_violation(server.receive_data(SERVER_HELLO), server, "before the client's hello")
    client = make(Role.CLIENT, handshake=False)
    client.data_to_send()
    assert_violation(client.receive_data(CLIENT_HELLO), client, "before the server's hello")


def test_a_second_hello_is_a_violation() -> None:
    server = make(Role.SERVER)
    assert_violation(server.receive_data(CLIENT_HELLO), server, "a second hello")


def test_goodbye_before_the_hello_is_accepted() -> None:
    # a peer refusing us may say goodbye without a hello of its own
    client = make(Role.CLIENT, handshake=False)
    client.data_to_send()
    events = client.receive_data(C.encode(C.Goodbye("not today")))
    assert events == [ConnectionClosed("the server said goodbye: not today", by_peer=True)]
    assert sent(client) == [C.GoodbyeAck()]


def test_hello_timeout() -> None:
    server = RSNetConnection(Role.SERVER)
    server.data_to_send()
    server.initiate_connection(100.0)
    assert server.next_deadline() == 130.0  # 30,000 ms
    assert server.tick(129.9) == []
    assert_violation(server.tick(130.0), server, "no hello from the client within 30000 ms")
    assert server.next_deadline() is None


def test_the_hello_cancels_the_timeout() -> None:
    server = RSNetConnection(Role.SERVER)
    server.initiate_connection(0.0)
    server.receive_data(CLIENT_HELLO)
    assert server.next_deadline() is None
    assert server.tick(1000.0) == []
