"""Reactive Streams network draft §Closing the connection: goodbye ends every subscription (both
directions, "equivalently to receiving cancel or onError"), is answered with goodbyeAck, and
the connection is over; the transport's loss does the same."""

from __future__ import annotations

import pytest

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.connection import ConnectionState, Role
from rsocket_tx.rsnet.errors import LocalProtocolError
from rsocket_tx.rsnet.events import (
    CancelReceived,
    ConnectionClosed,
    OnErrorReceived,
    OnSubscribeReceived,
    SubscribeReceived,
)

from .conn_helpers import Pair, assert_violation, make, sent


def busy_pair() -> tuple[Pair, int, int]:
    """The client subscribed to the server (id a) and the server to the client (id b)."""
    pair = Pair()
    a = pair.client.subscribe("a", 1)
    b = pair.server.subscribe("b", 1)
    cev, sev = pair.pump()
    assert cev == [SubscribeReceived(b, "b", 1)] and sev == [SubscribeReceived(a, "a", 1)]
    pair.server.on_subscribe(a)
    pair.client.on_subscribe(b)
    cev, sev = pair.pump()
    assert cev == [OnSubscribeReceived(a, 0)] and sev == [OnSubscribeReceived(b, 0)]
    return pair, a, b


def test_goodbye_ends_every_subscription_both_directions_and_is_acknowledged() -> None:
    pair, a, b = busy_pair()
    events = pair.client.goodbye("maintenance", now=0.0)
    assert events == [CancelReceived(b, "goodbye: maintenance", by_peer=False),
                      OnErrorReceived(a, "goodbye: maintenance", by_peer=False)]
    assert pair.client.state is ConnectionState.CLOSING
    with pytest.raises(LocalProtocolError):
        pair.client.subscribe("more")
    sev = pair.to_server()
    reason = "the client said goodbye: maintenance"
    assert sev == [CancelReceived(a, reason, by_peer=True),
                   OnErrorReceived(b, reason, by_peer=False),
                   ConnectionClosed(reason, by_peer=True)]
    assert sent(pair.server) == [C.GoodbyeAck()]
    assert not pair.server.is_open
    cev = pair.client.receive_data(C.encode(C.GoodbyeAck()))
    assert cev == [ConnectionClosed("goodbye acknowledged", by_peer=True)]
    assert not pair.client.is_open


def test_after_goodbye_crossing_messages_are_ignored() -> None:
    pair, a, b = busy_pair()
    pair.server.on_next(a, b"crossing")
    pair.server.request(b, 3)
    pair.client.goodbye()
    cev = pair.to_client()
    assert cev == [] and pair.client.state is ConnectionState.CLOSING


def test_crossing_goodbyes_close_both_sides() -> None:
    pair, a, b = busy_pair()
    pair.client.goodbye("c")
    pair.server.goodbye("s")
    pair.pump()
    assert isinstance(pair.client_events[-1], ConnectionClosed)
    assert isinstance(pair.server_events[-1], ConnectionClosed)
    assert not pair.client.is_open and not pair.server.is_open


def test_goodbye_timeout() -> None:
    pair, a, b = busy_pair()
    pair.client.goodbye(now=5.0)
    assert pair.client.next_deadline() == 15.0  # 10,000 ms
    assert pair.client.tick(14.0) == []
    assert pair.client.tick(15.0) == [
        ConnectionClosed("no answer to our goodbye within 10000 ms", by_peer=False)]


def test_goodbye_twice_is_a_no_op() -> None:
    client = make(Role.CLIENT)
    client.goodbye()
    assert client.goodbye() == []
    assert sent(client) == [C.Goodbye("")]


def test_an_unsolicited_goodbyeack_is_a_violation() -> None:
    client = make(Role.CLIENT)
    assert_violation(client.receive_data(C.encode(C.GoodbyeAck())), client,
                     "goodbyeAck without a goodbye")


def test_connection_lost_ends_everything() -> None:
    pair, a, b = busy_pair()
    events = pair.client.connection_lost("reset by peer")
    assert events == [CancelReceived(b, "reset by peer", by_peer=True),
                      OnErrorReceived(a, "reset by peer", by_peer=False),
                      ConnectionClosed("reset by peer", by_peer=True)]
    assert pair.client.connection_lost() == []
    assert pair.client.receive_data(b"\x09\x00") == []


def test_a_long_reason_is_cut_to_the_string_limit() -> None:
    client = make(Role.CLIENT, max_string_length=8)
    client.goodbye("\u00e9" * 10)  # 20 bytes of UTF-8
    [goodbye] = sent(client)
    assert goodbye == C.Goodbye("\u00e9" * 4)
