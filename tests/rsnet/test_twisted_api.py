"""The Twisted API of the Reactive Streams network protocol (rsocket_tx.rsnet.publishers,
protocol, client, server) on real loopback TCP: named publishers, subscriptions as async
iterators whose demand follows consumption, cancel, errors as exceptions, the symmetric
connection (the server subscribes to the client), goodbye. Where the point is what goes on the
wire, one side is a raw peer speaking messages built with the codec."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import defer, reactor

from rsocket_tx.rsnet import codec as C
from rsocket_tx.rsnet.client import connect
from rsocket_tx.rsnet.errors import ConnectionClosedError, SubscriptionError
from rsocket_tx.rsnet.protocol import RSNetProtocol
from rsocket_tx.rsnet.publishers import (
    NoSuchPublisher,
    Publication,
    Publisher,
    PublisherMap,
    SubscribeRequest,
    Subscription,
    as_publisher,
    error_string,
)

from .twisted_helpers import counting, wait, wire_client, wire_server

aio = pytest_twisted.ensureDeferred


def count_to(n: int):
    return lambda request: (b"%d" % i for i in range(1, n + 1))


async def hello(peer) -> None:
    """The raw client's hello, and the server's."""
    peer.send(C.ClientHello())
    await peer.until(lambda ms: any(isinstance(m, C.ServerHello) for m in ms))


# -- publishing and subscribing ------------------------------------------------------------------


@aio
async def test_subscribe_by_name_gets_every_element_then_the_end(loop):
    port = await loop.serve({"count/10": count_to(10)})
    client = await loop.connect(port)
    assert isinstance(client, RSNetProtocol) and client.hello.version == 0
    subscription = client.subscribe("count/10", window=3)
    assert [element async for element in subscription] == [b"%d" % i for i in range(1, 11)]
    assert subscription.ended and subscription.error is None
    assert await wait(subscription.when_subscribed()) == 0
    # a subscription's id is free again: the next one may reuse it
    again = client.subscribe("count/10")
    assert await wait(again.collect()) == [b"%d" % i for i in range(1, 11)]


class Greetings(Publisher):
    """A Publisher subclass: ``hello/NAME`` (an async generator) and ``later`` (a Deferred
    of a list)."""

    def subscribe(self, request: SubscribeRequest):
        if request.publisher.startswith("hello/"):
            return self.greet(request.publisher[len("hello/"):])
        if request.publisher == "later":
            d: defer.Deferred = defer.Deferred()
            reactor.callLater(0, d.callback, [b"x", bytearray(b"y"), memoryview(b"z")])
            return d
        return super().subscribe(request)

    async def greet(self, name: str):
        for word in ("hello", name):
            await defer.succeed(None)
            yield word.encode()


@aio
async def test_a_publisher_subclass_async_generators_and_deferred_sources(loop):
    port = await loop.serve(Greetings)
    client = await loop.connect(port)
    assert await wait(client.subscribe("hello/bob").collect()) == [b"hello", b"bob"]
    assert await wait(client.subscribe("later").collect()) == [b"x", b"y", b"z"]
    with pytest.raises(SubscriptionError) as info:
        await wait(client.subscribe("bye").collect())
    assert info.value.error == "no such publisher: bye" and info.value.by_peer


@aio
async def test_unknown_publisher_is_an_error_naming_it(loop):
    port = await loop.serve({})
    client = await loop.connect(port)
    subscription = client.subscribe("nope")
    with pytest.raises(SubscriptionError) as info:
        async for _ in subscription:
            pytest.fail("no element expected")
    assert str(info.value) == info.value.error == "no such publisher: nope"


def failing_after(n: int):
    def elements(request):
        for i in range(n):
            yield b"%d" % i
        raise KeyError("gone")
    return elements


@pytest.mark.logs_failure(
    "the publishers raise or return the wrong type on purpose: the server logs each",
    match=r"builtins\.(KeyError: 'gone'|PermissionError: not for you|RuntimeError: async "
          r"trouble|TypeError: (elements must be bytes|a publisher must return))")
@aio
async def test_a_publisher_that_raises_is_an_error_with_type_and_message(loop):
    def refuses(request):
        raise PermissionError("not for you")

    async def async_fails(request):
        yield b"a"
        raise RuntimeError("async trouble")

    port = await loop.serve({"fails": failing_after(3), "refuses": refuses,
                             "async": async_fails, "not-bytes": lambda r: [b"ok", 42],
                             "not-iterable": lambda r: 42})
    client = await loop.connect(port)
    received = []
    with pytest.raises(SubscriptionError) as info:
        async for element in client.subscribe("fails", window=2):
            received.append(element)
    assert received == [b"0", b"1", b"2"]  # what came before the error is delivered first
    assert info.value.error == "KeyError: 'gone'"
    for name, error in [("refuses", "PermissionError: not for you"),
                        ("async", "RuntimeError: async trouble"),
                        ("not-bytes", "TypeError: elements must be bytes, not int"),
                        ("not-iterable", "TypeError: a publisher must return an iterable or"
                                         " async iterable of bytes, not int")]:
        with pytest.raises(SubscriptionError) as info:
            await wait(client.subscribe(name).collect())
        assert info.value.error == error


# -- demand --------------------------------------------------------------------------------------


@aio
async def test_demand_follows_consumption_half_a_window_at_a_time():
    port, connected = await wire_server()
    client = None
    try:
        attempt = connect(reactor, f"rsnet+tcp://127.0.0.1:{port.getHost().port}")
        peer = await wait(connected)
        peer.send(C.ServerHello())
        client = await wait(attempt)
        subscription = client.subscribe("numbers", window=4)
        marker = client.subscribe("marker-0")
        await peer.until(lambda ms: len(peer.received(C.Subscribe)) == 2)
        sub, other = peer.received(C.Subscribe)
        assert (sub.publisher, sub.initial_demand) == ("numbers", 4)
        sid = sub.subscriber
        peer.send(C.OnSubscribe(sid, 0), *(C.OnNext(sid, b"%d" % i) for i in range(4)),
                  C.OnSubscribe(other.subscriber, 0), C.OnComplete(other.subscriber))
        await wait(marker.collect())  # sent after the elements: they have all arrived
        assert subscription.queued == 4  # the whole window waits, unconsumed
        assert peer.received(C.Request) == []
        assert await wait(subscription.__anext__()) == b"0"
        # one consumed of a window of 4: no request yet. (A later subscribe is written after
        # any request, so once it is seen, no request means none was sent.)
        client.subscribe("marker-1")
        await peer.until(lambda ms: len(peer.received(C.Subscribe)) == 3)
        assert peer.received(C.Request) == []
        assert await wait(subscription.__anext__()) == b"1"  # half the window consumed
        await peer.until(lambda ms: peer.received(C.Request))
        assert peer.received(C.Request) == [C.Request(sid, 2)]
        # nothing more is consumed: nothing more is requested
        client.subscribe("marker-2")
        await peer.until(lambda ms: len(peer.received(C.Subscribe)) == 4)
        assert peer.received(C.Request) == [C.Request(sid, 2)]
        assert [await wait(subscription.__anext__()) for _ in range(2)] == [b"2", b"3"]
        await peer.until(lambda ms: len(peer.received(C.Request)) == 2)
        assert subscription.requested == 8
        subscription.cancel()
        await peer.until(lambda ms: C.Cancel(sid) in ms)
        assert peer.received(C.Request) == [C.Request(sid, 2), C.Request(sid, 2)]
    finally:
        if client is not None:
            await wait(client.close())
        await port.stopListening()


@aio
async def test_a_publisher_sends_no_more_than_the_demand_and_pulls_one_ahead(loop):
    source = counting()
    port = await loop.serve({"count": lambda r: source})
    peer = await wire_client(port)
    await hello(peer)
    peer.send(C.Subscribe("count", 7, initial_demand=3))
    await peer.until(lambda ms: len(peer.received(C.OnNext)) == 3)
    # a later subscribe's answer comes after anything more the publisher would have sent
    peer.send(C.Subscribe("none", 8))
    await peer.until(lambda ms: peer.received(C.OnError))
    assert [m.element for m in peer.received(C.OnNext)] == [b"1", b"2", b"3"]
    assert source.pulled == 4  # one ahead: to see whether the source is over
    peer.send(C.Request(7, 2))
    await peer.until(lambda ms: len(peer.received(C.OnNext)) == 5)
    assert [m.element for m in peer.received(C.OnNext)][3:] == [b"4", b"5"]
    assert source.pulled == 6
    # demand is cumulative (Reactive Streams §3.8, §3.17)
    peer.send(C.Request(7, 1), C.Request(7, 2))
    await peer.until(lambda ms: len(peer.received(C.OnNext)) == 8)
    peer.send(C.Cancel(7))
    peer.transport.loseConnection()
    await wait(peer.lost)


@aio
async def test_on_complete_needs_no_demand(loop):
    port = await loop.serve({"three": lambda r: counting(3)})
    peer = await wire_client(port)
    await hello(peer)
    peer.send(C.Subscribe("three", 1, initial_demand=3))
    messages = await peer.until(lambda ms: C.OnComplete(1) in ms)
    assert [m for m in messages if not isinstance(m, C.ServerHello)] == [
        C.OnSubscribe(1, 0), C.OnNext(1, b"1"), C.OnNext(1, b"2"), C.OnNext(1, b"3"),
        C.OnComplete(1)]
    peer.transport.loseConnection()
    await wait(peer.lost)


@aio
async def test_an_async_source_is_pulled_only_with_demand(loop):
    pulled = []

    async def slow(request):
        for i in range(100):
            d: defer.Deferred = defer.Deferred()
            reactor.callLater(0, d.callback, None)
            await d
            pulled.append(i)
            yield b"%d" % i

    port = await loop.serve({"slow": slow})
    client = await loop.connect(port)
    subscription = client.subscribe("slow", window=2)
    assert [await wait(subscription.__anext__()) for _ in range(2)] == [b"0", b"1"]
    taken = await wait(subscription.collect(take=5))
    assert taken == [b"2", b"3", b"4", b"5", b"6"]
    assert len(pulled) <= 7 + 2 + 1  # consumed, one window unconsumed, one ahead


# -- cancel --------------------------------------------------------------------------------------


@aio
async def test_cancel_stops_delivery_and_closes_the_source(loop):
    source = counting()
    closed: defer.Deferred = defer.Deferred()

    def endless(request):
        def elements():
            try:
                yield from source
            finally:
                closed.callback(source.pulled)
        return elements()

    port = await loop.serve({"endless": endless})
    client = await loop.connect(port)
    subscription = client.subscribe("endless", window=8)
    received = [await wait(subscription.__anext__()) for _ in range(3)]
    assert received == [b"1", b"2", b"3"]
    subscription.cancel()
    pulled = await wait(closed)  # the publisher stopped and closed its source
    assert pulled <= 8 + 4 + 1
    with pytest.raises(StopAsyncIteration):
        await subscription.__anext__()
    assert subscription.ended and subscription.error is None
    # aclose() is cancel() too, and the connection carries on
    other = client.subscribe("endless")
    await other.aclose()
    assert other.ended and client.is_open


@aio
async def test_collect_with_take_cancels_the_rest(loop):
    sources = []

    def count(request):
        sources.append(counting())
        return sources[-1]

    port = await loop.serve({"count": count})
    client = await loop.connect(port)
    assert await wait(client.subscribe("count", window=4).collect(take=6)) == \
        [b"%d" % i for i in range(1, 7)]
    # cancelled at once (subscribe and cancel in one write): the id is reused next, and the
    # next subscription gets its own elements, not the cancelled one's
    assert await wait(client.subscribe("count").collect(take=0)) == []
    assert await wait(client.subscribe("count", window=2).collect(take=3)) == \
        [b"1", b"2", b"3"]


@aio
async def test_a_window_must_be_positive(loop):
    port = await loop.serve({})
    client = await loop.connect(port)
    for window in (0, -1, 2**63, 1.5, True):
        with pytest.raises(ValueError, match="window must be an int"):
            client.subscribe("x", window=window)


# -- fixed element size, split elements ----------------------------------------------------------


@pytest.mark.logs_failure("an element of the wrong size is the publisher's bug: logged",
                          match=r"ValueError: an element of 2 bytes")
@aio
async def test_fixed_size_elements_travel_packed(loop):
    ints = lambda r: Publication((i.to_bytes(4, "big") for i in range(10)), element_size=4)  # noqa: E731
    port = await loop.serve({"ints": ints, "bad": lambda r: Publication([b"abcd", b"ab"], 4)})
    peer = await wire_client(port)
    await hello(peer)
    peer.send(C.Subscribe("ints", 1, initial_demand=10))
    await peer.until(lambda ms: C.OnComplete(1) in ms)
    assert C.OnSubscribe(1, 4) in peer.messages
    packed = peer.received(C.OnNextPacked)
    assert packed and sum(m.count for m in packed) + len(peer.received(C.OnNext)) == 10
    assert b"".join(m.data for m in packed) == b"".join(i.to_bytes(4, "big") for i in range(10))
    peer.transport.loseConnection()
    await wait(peer.lost)
    client = await loop.connect(port)
    subscription = client.subscribe("ints", window=3)
    assert await wait(subscription.collect()) == [i.to_bytes(4, "big") for i in range(10)]
    assert subscription.element_size == 4
    with pytest.raises(SubscriptionError, match="an element of 2 bytes; the publication's "
                       "element size is 4 bytes"):
        await wait(client.subscribe("bad").collect())


@aio
async def test_large_elements_are_split_and_joined(loop):
    big = bytes(range(256)) * 800  # 204,800 bytes: past the 64 KiB part size
    port = await loop.serve({"big": lambda r: [big, b"small", big]})
    peer = await wire_client(port)
    await hello(peer)
    peer.send(C.Subscribe("big", 1, initial_demand=3))
    await peer.until(lambda ms: C.OnComplete(1) in ms)
    assert len(peer.received(C.OnNextPart)) >= 4 and len(peer.received(C.OnNextLastPart)) == 2
    peer.transport.loseConnection()
    await wait(peer.lost)
    client = await loop.connect(port)
    assert await wait(client.subscribe("big", window=1).collect()) == [big, b"small", big]


# -- the symmetric connection --------------------------------------------------------------------


@aio
async def test_the_server_subscribes_to_the_client_on_the_same_connection(loop):
    got: defer.Deferred = defer.Deferred()

    def on_connection(protocol):
        async def pull():
            await protocol.when_ready()
            return await protocol.subscribe("lines", window=2).collect()
        defer.ensureDeferred(pull()).chainDeferred(got)

    port = await loop.serve({"count/3": count_to(3)}, on_connection=on_connection)
    client = await loop.connect(port, {"lines": lambda r: [b"from", b"the", b"client"]})
    # both directions at once, one connection
    assert await wait(client.subscribe("count/3").collect()) == [b"1", b"2", b"3"]
    assert await wait(got) == [b"from", b"the", b"client"]
    (server_side,) = port.factory.protocols
    assert server_side.subscriptions == {} and client.pumps == {}


@aio
async def test_a_publisher_may_subscribe_back_to_the_peer(loop):
    async def relay(request):
        async for element in request.connection.subscribe("source", window=2):
            yield element.upper()

    port = await loop.serve({"upper": relay})
    client = await loop.connect(port, {"source": lambda r: [b"a", b"b", b"c"]})
    assert await wait(client.subscribe("upper").collect()) == [b"A", b"B", b"C"]
    with pytest.raises(SubscriptionError, match="no such publisher: source"):
        other = await loop.connect(port)
        await wait(other.subscribe("upper").collect())


# -- the end of the connection -------------------------------------------------------------------


@aio
async def test_goodbye_ends_every_stream_both_ways(loop):
    closed: defer.Deferred = defer.Deferred()

    def endless(request):
        def elements():
            try:
                yield from counting()
            finally:
                closed.callback(None)
        return elements()

    port = await loop.serve({"endless": endless})
    client = await loop.connect(port)
    subscription = client.subscribe("endless", window=2)
    assert await wait(subscription.__anext__()) == b"1"
    gone = client.goodbye("done for today")
    with pytest.raises(ConnectionClosedError) as info:
        async for _ in subscription:
            pass
    assert not info.value.by_peer
    await wait(gone)
    await wait(closed)
    assert client.transport_gone and not client.is_open
    with pytest.raises(ConnectionClosedError):
        client.subscribe("endless")


@aio
async def test_the_server_closing_fails_the_subscriptions(loop):
    port = await loop.serve({"endless": lambda r: counting()})
    client = await loop.connect(port)
    subscription = client.subscribe("endless", window=2)
    assert await wait(subscription.__anext__()) == b"1"
    (server_side,) = port.factory.protocols
    await wait(server_side.close())
    with pytest.raises(ConnectionClosedError):
        async for _ in subscription:
            pass
    await wait(client.when_closed())
    assert isinstance(client.closed_error, ConnectionClosedError)


@aio
async def test_a_graceful_server_close_waits_for_publications_then_says_goodbye(loop):
    release: defer.Deferred = defer.Deferred()

    async def waits(request):
        yield b"first"
        await release
        yield b"last"

    port = await loop.serve({"waits": waits})
    client = await loop.connect(port)
    subscription = client.subscribe("waits")
    assert await wait(subscription.__anext__()) == b"first"
    closing = port.factory.close_connections("maintenance")
    refused = client.subscribe("waits")  # draining: new subscriptions are refused
    with pytest.raises(SubscriptionError, match="the server is shutting down"):
        await wait(refused.collect())
    release.callback(None)
    assert await wait(subscription.collect()) == [b"last"]
    await wait(closing)
    await wait(client.when_closed())
    assert client.closed_error.by_peer and "maintenance" in str(client.closed_error)


@aio
async def test_a_version_mismatch_fails_connect():
    port, connected = await wire_server()
    try:
        attempt = connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
        peer = await wait(connected)
        peer.send(C.ServerHello(version=7))
        with pytest.raises(ConnectionClosedError, match="unsupported protocol version 7"):
            await wait(attempt)
        # connect fails only once the transport is closed, the goodbye written (draft
        # §Protocol negotiation: send goodbye, then close): a program that exits on the
        # failure does not lose it
        assert peer.lost.called
        assert isinstance(peer.messages[-1], C.Goodbye)
        assert "unsupported protocol version 7" in peer.messages[-1].reason
    finally:
        await port.stopListening()


@aio
async def test_cancelling_connect_drops_the_connection():
    port, connected = await wire_server()
    try:
        attempt = connect(reactor, f"tcp:host=127.0.0.1:port={port.getHost().port}")
        peer = await wait(connected)  # no serverHello: connect waits
        attempt.cancel()
        with pytest.raises(defer.CancelledError):
            await attempt
        await wait(peer.lost)
    finally:
        await port.stopListening()


# -- the API's small parts -----------------------------------------------------------------------


def test_as_publisher_forms():
    assert isinstance(as_publisher(None), Publisher)
    assert isinstance(as_publisher({"a": lambda r: []}), PublisherMap)
    assert isinstance(as_publisher(Greetings), Greetings)
    instance = Greetings()
    assert as_publisher(instance) is instance
    with pytest.raises(TypeError, match="must be a rsocket_tx.rsnet.publishers.Publisher"):
        as_publisher(42)
    with pytest.raises(TypeError, match="must be a callable"):
        PublisherMap({"a": [b"x"]})
    assert PublisherMap({"b": list, "a": list}).names() == ["a", "b"]


def test_error_strings():
    assert error_string(ValueError("bad")) == "ValueError: bad"
    assert error_string(ValueError()) == "ValueError"
    assert error_string(NoSuchPublisher("x")) == "no such publisher: x"
    with pytest.raises(ValueError):
        Publication([], element_size=-1)


def test_subscription_window_bookkeeping():
    class Host:
        reactor = None
        paused = False

        def __init__(self):
            self.requests = []

        def request_more(self, token, n):
            self.requests.append(n)

        def wake_later(self, token):
            return False

        def cancel_subscription(self, token):
            self.requests.append("cancel")

    host = Host()
    subscription = Subscription(host, 1, "x", window=1)
    for i in range(3):
        subscription.on_next(b"%d" % i)
    # a window of 1 asks for one more per element consumed
    d = subscription.collect(take=2)
    assert d.result == [b"0", b"1"]
    assert host.requests == [1, 1, "cancel"]


# -- backpressure (a transport in memory) -------------------------------------------------------


def test_a_full_transport_pauses_the_publishers_and_resuming_goes_on():
    from twisted.internet.task import Clock
    from twisted.internet.testing import StringTransport

    from rsocket_tx.rsnet.connection import Role

    source = counting()
    clock = Clock()
    protocol = RSNetProtocol(clock, Role.SERVER, publishers={"count": lambda r: source})
    transport = StringTransport()
    protocol.makeConnection(transport)
    assert transport.producer is protocol  # the protocol is the transport's producer
    protocol.pauseProducing()  # the transport's buffer is full
    transport.clear()
    protocol.dataReceived(C.encode(C.ClientHello()) + C.encode(C.Subscribe("count", 3, 100)))
    clock.advance(0)
    messages, _ = C.decode(transport.value())
    assert messages == [C.OnSubscribe(3, 0)] and source.pulled == 0
    transport.clear()
    protocol.resumeProducing()  # drained: the pump goes on, as far as the demand allows
    clock.advance(0)
    messages, _ = C.decode(transport.value())
    assert [m.element for m in messages] == [b"%d" % i for i in range(1, 101)]
    assert source.pulled == 101  # and one ahead
    protocol.connectionLost(None)
    assert source.closed
