"""The Reactive Streams rules that apply across the network (reactive-streams-jvm specification,
rules §1.x Publisher, §2.x Subscriber, §3.x Subscription) and the draft's §The Reactive Streams
core protocol, with two connections driven against each other and no I/O."""

from __future__ import annotations

import pytest

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.config import MAX_LONG
from rsocket_tx.rsnet.connection import Role
from rsocket_tx.rsnet.errors import LocalProtocolError
from rsocket_tx.rsnet.events import (
    CancelReceived,
    OnCompleteReceived,
    OnErrorReceived,
    OnNextReceived,
    OnSubscribeReceived,
    RequestReceived,
    SubscribeReceived,
)

from .conn_helpers import Pair, assert_violation, make, sent


def subscribed(pair: Pair, name: str = "ticks", demand: int = 0, size: int = 0) -> int:
    """The client subscribes to the server's ``name``; the server accepts."""
    sid = pair.client.subscribe(name, demand)
    _, sev = pair.pump()
    assert sev == [SubscribeReceived(sid, name, demand)]
    pair.server.on_subscribe(sid, size)
    cev, _ = pair.pump()
    assert cev == [OnSubscribeReceived(sid, size)]
    return sid


def nexts(events: list[object]) -> list[bytes]:
    return [e.element for e in events if isinstance(e, OnNextReceived)]


# --- §1 Publisher ---------------------------------------------------------------------------


def test_rs_1_1_the_publisher_cannot_send_beyond_demand() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=2)
    pair.server.on_next(sid, b"a")
    pair.server.on_next(sid, b"b")
    with pytest.raises(LocalProtocolError, match="§1.1"):
        pair.server.on_next(sid, b"c")
    assert pair.server.demand(sid) == 0
    cev, _ = pair.pump()
    assert nexts(cev) == [b"a", b"b"]


def test_rs_1_1_an_onnext_beyond_demand_is_a_violation() -> None:
    client = make(Role.CLIENT)
    sid = client.subscribe("ticks", 1)
    client.data_to_send()
    events = client.receive_data(C.encode(C.OnSubscribe(sid)) + C.encode(C.OnNext(sid, b"1"))
                                 + C.encode(C.OnNext(sid, b"2")))
    assert nexts(events) == [b"1"]
    assert_violation(events, client, "beyond its demand of 0 (Reactive Streams §1.1)")


def test_rs_1_1_packed_elements_each_use_demand() -> None:
    client = make(Role.CLIENT)
    sid = client.subscribe("ints", 2)
    client.data_to_send()
    events = client.receive_data(C.encode(C.OnSubscribe(sid, 1))
                                 + C.encode(C.OnNextPacked(sid, 3, b"xyz"), 1))
    assert_violation(events, client, "onNextPacked of 3 elements")


def test_rs_1_3_1_7_a_terminal_signal_once_and_nothing_after() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=5)
    pair.server.on_next(sid, b"a")
    pair.server.on_complete(sid)
    with pytest.raises(LocalProtocolError):
        pair.server.on_next(sid, b"b")
    with pytest.raises(LocalProtocolError):
        pair.server.on_complete(sid)
    with pytest.raises(LocalProtocolError):
        pair.server.on_error(sid, "late")
    cev, _ = pair.pump()
    assert cev == [OnNextReceived(sid, b"a"), OnCompleteReceived(sid)]
    assert pair.client.subscriptions == [] and pair.server.publications == []


def test_rs_1_7_a_signal_after_the_terminal_one_is_a_violation() -> None:
    client = make(Role.CLIENT)
    sid = client.subscribe("ticks", 5)
    client.data_to_send()
    events = client.receive_data(C.encode(C.OnSubscribe(sid)) + C.encode(C.OnComplete(sid))
                                 + C.encode(C.OnNext(sid, b"late")))
    assert OnCompleteReceived(sid) in events
    assert_violation(events, client, f"onNext for subscriber {sid}, which has no subscription")


def test_rs_1_9_onsubscribe_comes_first() -> None:
    pair = Pair()
    sid = pair.client.subscribe("ticks", 1)
    pair.pump()
    with pytest.raises(LocalProtocolError, match="§1.9"):
        pair.server.on_next(sid, b"a")
    client = make(Role.CLIENT)
    sid = client.subscribe("ticks", 1)
    events = client.receive_data(C.encode(C.OnNext(sid, b"a")))
    assert_violation(events, client, "before its onSubscribe (Reactive Streams §1.9)")


def test_rs_1_9_a_refusal_is_onsubscribe_then_onerror() -> None:
    pair = Pair()
    sid = pair.client.subscribe("nope")
    pair.pump()
    pair.server.on_error(sid, "no publisher named 'nope'")
    cev, _ = pair.pump()
    assert cev == [OnSubscribeReceived(sid, 0), OnErrorReceived(sid, "no publisher named 'nope'")]


# --- §2 Subscriber --------------------------------------------------------------------------


def test_rs_2_1_nothing_arrives_without_demand() -> None:
    pair = Pair()
    sid = subscribed(pair)
    assert pair.server.demand(sid) == 0
    with pytest.raises(LocalProtocolError):
        pair.server.on_next(sid, b"a")
    pair.client.request(sid, 1)
    _, sev = pair.pump()
    assert sev == [RequestReceived(sid, 1, 1)]
    pair.server.on_next(sid, b"a")
    assert nexts(pair.pump()[0]) == [b"a"]


def test_rs_2_4_after_a_terminal_signal_the_subscription_is_over() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=1)
    pair.server.on_error(sid, "boom")
    cev, _ = pair.pump()
    assert cev == [OnErrorReceived(sid, "boom")]
    pair.client.cancel(sid)  # a no-op: nothing is sent
    assert pair.client.data_to_send() == b""
    with pytest.raises(LocalProtocolError):
        pair.client.request(sid, 1)
    # the id is free again: the next subscription reuses it
    assert pair.client.subscribe("again") == sid


# --- §3 Subscription ------------------------------------------------------------------------


def test_rs_3_5_3_7_cancel_is_idempotent() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=1)
    pair.client.cancel(sid)
    pair.client.cancel(sid)
    assert sent(pair.client) == [C.Cancel(sid)]


def test_rs_3_6_3_12_cancel_stops_delivery() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=10)
    pair.server.on_next(sid, b"in flight")  # sent before the publisher sees the cancel
    pair.client.cancel(sid)
    cev, sev = pair.pump()
    assert cev == []  # the element in flight is dropped
    assert sev == [CancelReceived(sid)]
    assert not pair.server.is_publishing(sid)
    with pytest.raises(LocalProtocolError):
        pair.server.on_next(sid, b"after")


def test_rs_3_9_request_zero_is_answered_with_onerror() -> None:
    client = make(Role.CLIENT)
    with pytest.raises(LocalProtocolError, match="§3.9"):
        client.request(client.subscribe("x"), 0)
    pair = Pair()
    sid = subscribed(pair)
    events = pair.server.receive_data(C.encode(C.Request(sid, 0)))
    assert len(events) == 1 and isinstance(events[0], CancelReceived)
    assert events[0].by_peer and "§3.9" in events[0].reason
    cev, _ = pair.pump()
    assert len(cev) == 1 and isinstance(cev[0], OnErrorReceived) and "§3.9" in cev[0].error
    assert pair.server.is_open and pair.client.is_open
    assert pair.client.subscriptions == []


def test_rs_3_9_request_zero_before_onsubscribe_sends_onsubscribe_first() -> None:
    server = make(Role.SERVER)
    server.receive_data(C.encode(C.Subscribe("x", 4, 0)) + C.encode(C.Request(4, 0)))
    messages = sent(server)
    assert messages[0] == C.OnSubscribe(4, 0) and isinstance(messages[1], C.OnError)


def test_rs_3_17_demand_is_cumulative_up_to_long_max() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=3)
    pair.client.request(sid, 4)
    _, sev = pair.pump()
    assert sev == [RequestReceived(sid, 4, 7)]
    pair.client.request(sid, 2**62)
    pair.client.request(sid, 2**62)  # 2^63 + 7 > Long.MAX: saturates
    _, sev = pair.pump()
    assert sev == [RequestReceived(sid, 2**62, 2**62 + 7), RequestReceived(sid, 2**62, MAX_LONG)]
    assert pair.server.demand(sid) == MAX_LONG
    for i in range(5):
        pair.server.on_next(sid, b"%d" % i)
    assert pair.server.demand(sid) == MAX_LONG  # unbounded from now on
    assert len(nexts(pair.pump()[0])) == 5


def test_rs_3_17_more_than_long_max_is_clamped_on_the_wire() -> None:
    client = make(Role.CLIENT)
    sid = client.subscribe("x", 2**70)
    client.request(sid, 2**64)
    assert sent(client) == [C.Subscribe("x", sid, MAX_LONG), C.Request(sid, MAX_LONG)]


# --- the draft: symmetric, ids, packed, split --------------------------------------------------


def test_both_sides_subscribe_and_the_id_spaces_are_separate() -> None:
    pair = Pair()
    to_server = subscribed(pair, "a", demand=1)
    to_client = pair.server.subscribe("b", 1)
    assert to_server == to_client == 0  # the same number, one subscription in each space
    cev, _ = pair.pump()
    assert cev == [SubscribeReceived(0, "b", 1)]
    pair.client.on_subscribe(0)
    pair.client.on_next(0, b"from client")
    pair.server.on_next(0, b"from server")
    cev, sev = pair.pump()
    assert sev == [OnSubscribeReceived(0, 0), OnNextReceived(0, b"from client")]
    assert cev == [OnNextReceived(0, b"from server")]


def test_ids_are_the_lowest_free() -> None:
    client = make(Role.CLIENT)
    assert [client.subscribe("x") for _ in range(3)] == [0, 1, 2]
    client.cancel(1)
    assert client.subscribe("y") == 1
    assert client.subscribe("z") == 3


def test_reuse_after_cancel_drops_the_old_subscription_messages() -> None:
    # the publisher's messages for the old subscription, sent before it saw our cancel, come
    # before the onSubscribe of the new one; they are dropped, including an old onSubscribe
    client = make(Role.CLIENT)
    sid = client.subscribe("old", 5)
    client.cancel(sid)
    assert client.subscribe("new", 1) == sid
    client.data_to_send()
    events = client.receive_data(
        C.encode(C.OnSubscribe(sid, 0)) + C.encode(C.OnNext(sid, b"old"))
        + C.encode(C.OnComplete(sid))
        + C.encode(C.OnSubscribe(sid, 2)) + C.encode(C.OnNext(sid, b"nw"), 2))
    assert events == [OnSubscribeReceived(sid, 2), OnNextReceived(sid, b"nw")]
    assert client.is_open


def test_reuse_with_fixed_size_old_elements_decodes_them_at_their_size() -> None:
    client = make(Role.CLIENT)
    sid = client.subscribe("old", 5)
    client.receive_data(C.encode(C.OnSubscribe(sid, 3)))
    client.cancel(sid)
    assert client.subscribe("new", 1) == sid
    events = client.receive_data(
        C.encode(C.OnNext(sid, b"abc"), 3) + C.encode(C.OnSubscribe(sid, 0))
        + C.encode(C.OnNext(sid, b"variable")))
    assert events == [OnSubscribeReceived(sid, 0), OnNextReceived(sid, b"variable")]


def test_the_publisher_takes_a_reused_id_as_a_new_subscription() -> None:
    pair = Pair()
    sid = subscribed(pair, "first", demand=1)
    pair.client.cancel(sid)
    assert pair.client.subscribe("second", 2) == sid
    _, sev = pair.pump()
    assert sev == [CancelReceived(sid), SubscribeReceived(sid, "second", 2)]
    pair.server.on_subscribe(sid)
    pair.server.on_next(sid, b"x")
    cev, _ = pair.pump()
    assert cev == [OnSubscribeReceived(sid, 0), OnNextReceived(sid, b"x")]


def test_a_subscribe_for_an_open_id_is_a_violation() -> None:
    server = make(Role.SERVER)
    events = server.receive_data(C.encode(C.Subscribe("a", 3, 0))
                                 + C.encode(C.Subscribe("b", 3, 0)))
    assert_violation(events, server, "subscribe for subscriber 3, which is still open")


def test_request_and_cancel_crossing_our_terminal_are_ignored() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=1)
    pair.server.on_complete(sid)
    pair.server.data_to_send()  # not delivered yet: the client's messages cross it
    events = pair.server.receive_data(C.encode(C.Request(sid, 5)) + C.encode(C.Cancel(sid)))
    assert events == [] and pair.server.is_open and sent(pair.server) == []


def test_packed_elements_sender_and_receiver() -> None:
    pair = Pair(server={"max_part_size": 8})
    sid = subscribed(pair, "ints", demand=5, size=4)
    elements = [i.to_bytes(4, "big") for i in range(5)]
    pair.server.on_next_packed(sid, elements)
    wire = pair.server.data_to_send()
    # 8 bytes per message: 2 + 2 + 1 elements
    messages, _ = C.decode(wire, element_size=lambda s: 4)
    assert [m.count for m in messages] == [2, 2, 1]
    assert nexts(pair.client.receive_data(wire)) == elements


def test_fixed_size_onnext_has_no_length() -> None:
    pair = Pair()
    sid = subscribed(pair, "ints", demand=3, size=4)
    pair.server.on_next(sid, b"\x00\x00\x00\x2a")
    assert pair.server.data_to_send() == bytes.fromhex("05") + bytes([sid]) + b"\x00\x00\x00\x2a"
    with pytest.raises(LocalProtocolError, match="elementSize is 4"):
        pair.server.on_next(sid, b"abc")
    with pytest.raises(LocalProtocolError, match="elementSize is 4"):
        pair.server.on_next_packed(sid, [b"abcd", b"ab"])


def test_packed_needs_a_fixed_size() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=2)
    with pytest.raises(LocalProtocolError, match="fixed elementSize"):
        pair.server.on_next_packed(sid, [b"a"])


def test_a_large_element_is_split_and_joined() -> None:
    pair = Pair(server={"max_part_size": 4})
    sid = subscribed(pair, demand=2)
    pair.server.on_next(sid, b"0123456789")
    pair.server.on_next(sid, b"abcd")  # fits: one onNext
    wire = pair.server.data_to_send()
    assert C.decode(wire)[0] == [C.OnNextPart(sid, 0, b"0123"), C.OnNextPart(sid, 0, b"4567"),
                                 C.OnNextLastPart(sid, 0, b"89"), C.OnNext(sid, b"abcd")]
    assert nexts(pair.client.receive_data(wire)) == [b"0123456789", b"abcd"]


def test_a_split_element_uses_demand_at_its_first_part() -> None:
    client = make(Role.CLIENT)
    sid = client.subscribe("x", 1)
    client.receive_data(C.encode(C.OnSubscribe(sid)) + C.encode(C.OnNextPart(sid, 0, b"ab")))
    events = client.receive_data(C.encode(C.OnNextPart(sid, 1, b"cd")))
    assert_violation(events, client, "while element 0 is not finished")
    client = make(Role.CLIENT)
    sid = client.subscribe("x", 1)
    events = client.receive_data(C.encode(C.OnSubscribe(sid)) + C.encode(C.OnNext(sid, b"a"))
                                 + C.encode(C.OnNextPart(sid, 0, b"ab")))
    assert_violation(events, client, "a split element on subscriber 0 beyond its demand")


def test_reassembly_limits() -> None:
    client = make(Role.CLIENT, max_reassembled_size=5)
    sid = client.subscribe("x", 1)
    events = client.receive_data(C.encode(C.OnSubscribe(sid))
                                 + C.encode(C.OnNextPart(sid, 0, b"abc"))
                                 + C.encode(C.OnNextLastPart(sid, 0, b"def")))
    assert_violation(events, client, "max_reassembled_size")
    client = make(Role.CLIENT, reassembly_budget=5)
    a = client.subscribe("a", 1)
    b = client.subscribe("b", 1)
    events = client.receive_data(
        C.encode(C.OnSubscribe(a)) + C.encode(C.OnSubscribe(b))
        + C.encode(C.OnNextPart(a, 0, b"abc")) + C.encode(C.OnNextPart(b, 0, b"def")))
    assert_violation(events, client, "reassembly_budget")


def test_a_cancelled_split_element_gives_its_budget_back() -> None:
    client = make(Role.CLIENT, reassembly_budget=5)
    a = client.subscribe("a", 1)
    client.receive_data(C.encode(C.OnSubscribe(a)) + C.encode(C.OnNextPart(a, 0, b"abcd")))
    client.cancel(a)
    b = client.subscribe("b", 1)
    events = client.receive_data(C.encode(C.OnSubscribe(b)) + C.encode(C.OnNextPart(b, 0, b"abcd"))
                                 + C.encode(C.OnNextLastPart(b, 0, b"e")))
    # (the id was reused: the old subscription's onSubscribe was received, so "b" starts clean)
    assert nexts(events) == [b"abcde"]


def test_too_many_peer_subscriptions_are_refused_not_fatal() -> None:
    pair = Pair(server={"max_peer_subscriptions": 1})
    first = subscribed(pair, "a")
    second = pair.client.subscribe("b")
    cev, sev = pair.pump()
    assert sev == []
    assert cev[0] == OnSubscribeReceived(second, 0)
    assert isinstance(cev[1], OnErrorReceived) and "max_peer_subscriptions" in cev[1].error
    assert pair.server.publications == [first] and pair.server.is_open


def test_subscribe_and_cancel_at_once_then_reuse_the_id() -> None:
    # the publisher's caller had no time to answer: the connection still answers the subscribe
    # with one onSubscribe, which the subscriber counts as owed to the cancelled subscription
    pair = Pair()
    sid = pair.client.subscribe("count", 1)
    pair.client.cancel(sid)
    _, sev = pair.pump()
    assert sev == [SubscribeReceived(sid, "count", 1), CancelReceived(sid)]
    assert pair.client.subscribe("count", 1) == sid
    _, sev = pair.pump()
    assert sev == [SubscribeReceived(sid, "count", 1)]
    pair.server.on_subscribe(sid)
    pair.server.on_next(sid, b"1")
    cev, _ = pair.pump()
    assert cev == [OnSubscribeReceived(sid, 0), OnNextReceived(sid, b"1")]


def test_rs_2_9_2_10_terminal_signals_need_no_demand() -> None:
    # §2.9: onComplete without a preceding request; §2.10: onError without one
    pair = Pair()
    done = subscribed(pair, "done")
    failed = subscribed(pair, "failed")
    pair.server.on_complete(done)
    pair.server.on_error(failed, "broken")
    cev, _ = pair.pump()
    assert cev == [OnCompleteReceived(done), OnErrorReceived(failed, "broken")]


def test_rs_1_6_after_a_terminal_signal_the_publisher_forgets_the_subscription() -> None:
    pair = Pair()
    sid = subscribed(pair, demand=1)
    pair.server.on_complete(sid)
    assert not pair.server.is_publishing(sid) and pair.server.demand(sid) == 0
    pair.pump()
    # the subscriber may reuse the id at once: a new subscription for the publisher
    assert pair.client.subscribe("again", 2) == sid
    _, sev = pair.pump()
    assert sev == [SubscribeReceived(sid, "again", 2)]
