"""The requester API (RSocket, RequestStream) against Responders, over loopback TCP."""

from __future__ import annotations

import inspect

import pytest
import pytest_twisted
from twisted.internet import defer, reactor
from twisted.internet.defer import CancelledError, Deferred
from twisted_support import EchoResponder, wait

from rsocket_tx import (
    ApplicationError,
    CanceledError,
    ConnectionCloseError,
    ConnectionLostError,
    InvalidError,
    LocalProtocolError,
    Payload,
    RejectedError,
    RejectedSetupError,
    Responder,
)
from rsocket_tx.core.frames import FrameType, encode
from rsocket_tx.streams import DEFAULT_PREFETCH

aio = pytest_twisted.ensureDeferred


def later(value) -> Deferred:
    """A Deferred fired with ``value`` on a later reactor turn."""
    d = Deferred()
    reactor.callLater(0, d.callback, value)
    return d


async def drain(stream) -> list[bytes]:
    return [p.data async for p in stream]


# --------------------------------------------------------------------- request-response


@pytest.mark.parametrize("metadata", [None, b"", b"meta\x00data"])
@aio
async def test_request_response_returns_payload(harness, metadata):
    seen = []

    class R(Responder):
        def request_response(self, payload):
            seen.append(payload)
            return Payload(payload.data[::-1], payload.metadata)

    rs = await harness.connect(await harness.serve(R))
    reply = await wait(rs.request_response(Payload(b"hello", metadata)))
    assert isinstance(reply, Payload)
    assert reply.data == b"olleh"
    assert seen[0].metadata == metadata and type(seen[0].metadata) is type(metadata)
    if metadata is None:
        assert reply.metadata is None
    else:
        assert reply.metadata == metadata


@aio
async def test_request_response_handler_returning_none_fires_none(harness):
    class R(Responder):
        def request_response(self, payload):
            return None

    rs = await harness.connect(await harness.serve(R))
    assert await wait(rs.request_response(Payload(b"x"))) is None


@aio
async def test_cancel_request_response_cancels_responder_handler(harness):
    canceled = Deferred()
    called = Deferred()

    class R(Responder):
        def request_response(self, payload):
            if payload.data != b"slow":
                return payload
            called.callback(None)
            return Deferred(lambda d: canceled.callback("canceled"))

    rs = await harness.connect(await harness.serve(R))
    d = rs.request_response(Payload(b"slow"))
    await wait(called)
    d.cancel()
    with pytest.raises(CancelledError):
        await d
    assert await wait(canceled) == "canceled"
    # the connection is still fine afterwards
    assert await wait(rs.request_response(Payload(b"x"))) == Payload(b"x")


@aio
async def test_fire_and_forget_and_metadata_push_reach_responder(harness):
    fnf = Deferred()
    push = Deferred()

    class R(Responder):
        def fire_and_forget(self, payload):
            fnf.callback(payload)

        def metadata_push(self, metadata):
            push.callback(metadata)

    rs = await harness.connect(await harness.serve(R))
    assert await wait(rs.fire_and_forget(Payload(b"fire", b"m"))) is None
    assert await wait(rs.metadata_push(b"pushed")) is None
    assert await wait(fnf) == Payload(b"fire", b"m")
    assert await wait(push) == b"pushed"


# --------------------------------------------------------------------- request-stream


@aio
async def test_request_stream_async_for(harness):
    rs = await harness.connect(await harness.serve(EchoResponder))
    got = []
    stream = rs.request_stream(Payload(b"20", b"md"), prefetch=3)
    async for item in stream:
        got.append(item)
    assert [p.data for p in got] == [b"%d" % i for i in range(20)]
    assert all(p.metadata == b"md" for p in got)


@aio
async def test_request_stream_collect_and_take(harness):
    rs = await harness.connect(await harness.serve(EchoResponder))
    items = await wait(rs.request_stream(Payload(b"50")).collect())
    assert [p.data for p in items] == [b"%d" % i for i in range(50)]
    assert [p.metadata for p in items] == [None] * 50
    first = await wait(rs.request_stream(Payload(b"50"), prefetch=5).collect(take=7))
    assert [p.data for p in first] == [b"%d" % i for i in range(7)]


def counting_source(pulled: list, closed: Deferred, n: int = 1_000_000):
    def gen():
        try:
            for i in range(n):
                pulled.append(i)
                yield Payload(b"%d" % i)
        finally:
            closed.callback(len(pulled))

    return gen()


async def counting_stream(harness, prefetch: int):
    """Request a stream from a responder serving :func:`counting_source`.

    Returns ``(rs, stream, pulled, closed)``: the requester, the stream, the list of items the
    source has produced so far and the Deferred fired (with that count) when the source closes.
    """
    pulled: list = []
    closed = Deferred()

    class R(EchoResponder):
        def request_stream(self, payload):
            return counting_source(pulled, closed)

    rs = await harness.connect(await harness.serve(R))
    return rs, rs.request_stream(Payload(b""), prefetch=prefetch), pulled, closed


@aio
async def test_prefetch_respected(harness):
    rs, stream, pulled, closed = await counting_stream(harness, prefetch=4)
    k = 10
    got = []
    async for item in stream:
        got.append(item.data)
        if len(got) == k:
            break  # the consumer pauses
    # a round trip on the same connection: every REQUEST_N sent before it has been handled
    await wait(rs.request_response(Payload(b"barrier")))
    assert got == [b"%d" % i for i in range(k)]
    # (+ 1: with its credit used up the pump pulls one item ahead, to see the end early)
    assert k <= len(pulled) <= k + 4 + 1
    # consuming more pulls more, still bounded by the credit
    for _ in range(5):
        got.append((await stream.__anext__()).data)
    await wait(rs.request_response(Payload(b"barrier")))
    assert got == [b"%d" % i for i in range(k + 5)]
    assert len(pulled) <= k + 5 + 4 + 1
    stream.cancel()
    assert await wait(closed) <= k + 5 + 4


@aio
async def test_stream_cancel_closes_sync_source(harness):
    rs, stream, _pulled, closed = await counting_stream(harness, prefetch=8)
    got = 0
    async for _ in stream:
        got += 1
        if got == 10:
            stream.cancel()
    assert got == 10  # iteration stopped after cancel()
    assert await wait(closed) <= 10 + 8
    assert rs.is_open


@aio
async def test_stream_cancel_closes_async_source_waiting_for_data(harness):
    """An async generator source suspended in an ``await`` is closed by the peer's CANCEL."""
    closed = Deferred()
    waiting = Deferred()

    class R(EchoResponder):
        async def request_stream(self, payload):
            yield Payload(b"first")
            try:
                never = Deferred()
                waiting.callback(None)
                await never
                yield Payload(b"never")
            finally:
                closed.callback("closed")

    rs = await harness.connect(await harness.serve(R))
    stream = rs.request_stream(Payload(b""))
    assert (await wait(stream.__anext__())).data == b"first"
    await wait(waiting)
    stream.cancel()
    await wait(rs.request_response(Payload(b"barrier")))  # the CANCEL has been handled
    assert closed.called, "the source generator was not closed after CANCEL"
    assert await wait(closed) == "closed"


# --------------------------------------------------------------------- request-channel


def _channel_flow_responder(consumed, got10, gate):
    class R(EchoResponder):
        async def request_channel(self, payload, inbound):
            async for item in inbound:
                consumed.append(item.data)
                if len(consumed) == 10:
                    got10.callback(None)
                    await gate
            yield Payload(b"count=%d" % len(consumed))

    return R


@pytest.mark.parametrize("kind", ["iterable", "async iterable", "awaiting async iterable"])
@aio
async def test_channel_outbound_pulled_only_as_credit_allows(harness, kind):
    n = 1000
    pulled: list = []
    consumed: list = []
    violations: list = []
    got10, gate = Deferred(), Deferred()

    def check():
        pulled.append(None)
        # (+ 1: with its credit used up the pump pulls one item ahead, to see the end early)
        if len(pulled) > len(consumed) + DEFAULT_PREFETCH + 1:
            violations.append((len(pulled), len(consumed)))

    def sync_out():
        for i in range(n):
            check()
            yield Payload(b"%d" % i)

    async def async_out():
        for i in range(n):
            if kind == "awaiting async iterable":
                await later(None)
            check()
            yield Payload(b"%d" % i)

    port = await harness.serve(_channel_flow_responder(consumed, got10, gate))
    rs = await harness.connect(port)
    outbound = sync_out() if kind == "iterable" else async_out()
    ch = rs.request_channel(Payload(b"start"), outbound)
    result = ch.collect()
    await wait(got10)
    await wait(rs.request_response(Payload(b"barrier")))
    assert 10 <= len(pulled) <= 10 + DEFAULT_PREFETCH + 1 < n
    if kind == "awaiting async iterable":  # let the pump catch up with the credit it has
        await wait(rs.request_response(Payload(b"barrier")))
    gate.callback(None)
    items = await wait(result)
    assert [p.data for p in items] == [b"count=%d" % n]
    assert consumed == [b"%d" % i for i in range(n)]
    assert violations == []


@aio
async def test_channel_requester_completes_first(harness):
    class R(Responder):
        async def request_channel(self, payload, inbound):
            seen = [payload.data]
            async for item in inbound:
                seen.append(item.data)
            # our outbound half keeps going after the requester's half completed
            for word in (b"after", b"inbound", b"completed:" + b",".join(seen)):
                yield Payload(word)

    rs = await harness.connect(await harness.serve(R))
    ch = rs.request_channel(Payload(b"0"), [Payload(b"1"), Payload(b"2")])
    assert await wait(drain(ch)) == [b"after", b"inbound", b"completed:0,1,2"]


@aio
async def test_channel_responder_completes_first(harness):
    inbound_done = Deferred()
    responder_completed = Deferred()

    class R(Responder):
        def request_channel(self, payload, inbound):
            async def consume():
                return [p.data async for p in inbound]

            defer.ensureDeferred(consume()).chainDeferred(inbound_done)
            return []  # our half completes at once

    async def outbound():
        await responder_completed  # send only after the responder's half has completed
        for word in (b"x", b"y", b"z"):
            yield Payload(word)

    rs = await harness.connect(await harness.serve(R))
    ch = rs.request_channel(Payload(b"first"), outbound())
    assert await wait(ch.collect()) == []
    responder_completed.callback(None)
    assert await wait(inbound_done) == [b"x", b"y", b"z"]


@aio
async def test_channel_with_complete_flag_and_no_outbound(harness):
    rs = await harness.connect(await harness.serve(EchoResponder))
    assert await wait(drain(rs.request_channel(Payload(b"only")))) == [b"only"]


@aio
async def test_channel_outbound_error_reaches_responder(harness):
    inbound_result = Deferred()

    class R(Responder):
        def request_channel(self, payload, inbound):
            async def consume():
                seen = []
                try:
                    async for item in inbound:
                        seen.append(item.data)
                except Exception as exc:  # noqa: BLE001
                    return seen, exc
                return seen, None

            defer.ensureDeferred(consume()).chainDeferred(inbound_result)

            async def out():
                await Deferred()  # never sends; the stream must end anyway
                yield Payload(b"unreachable")

            return out()

    def outbound():
        yield Payload(b"a")
        yield Payload(b"b")
        raise ValueError("outbound boom")

    rs = await harness.connect(await harness.serve(R))
    ch = rs.request_channel(Payload(b"first"), outbound())
    seen, exc = await wait(inbound_result)
    assert seen == [b"a", b"b"]
    assert isinstance(exc, ApplicationError)
    assert exc.message == "ValueError: outbound boom"
    # the requester's side of the channel ends too (ERROR ends both directions)
    with pytest.raises(ApplicationError):
        await wait(drain(ch))
    assert rs.is_open


def closing_source(closed: Deferred, pulled: list | None = None):
    def gen():
        try:
            i = 0
            while True:
                if pulled is not None:
                    pulled.append(i)
                yield Payload(b"%d" % i)
                i += 1
        finally:
            closed.callback("closed")

    return gen()


@aio
async def test_channel_responder_cancels_inbound_but_keeps_sending(harness):
    """The responder cancels only the requester's half; its own half goes on (spec §CANCEL,
    channel half-streams): the requester's source stops, its inbound still completes."""
    requester_source_closed = Deferred()

    class R(EchoResponder):
        async def request_channel(self, payload, inbound):
            seen = []
            async for item in inbound:
                seen.append(item.data)
                if len(seen) == 2:
                    inbound.cancel()
            for word in (b"seen:" + b",".join(seen), b"more", b"end"):
                yield Payload(word)

    rs = await harness.connect(await harness.serve(R))
    ch = rs.request_channel(Payload(b"first"), closing_source(requester_source_closed))
    assert await wait(drain(ch)) == [b"seen:0,1", b"more", b"end"]
    assert await wait(requester_source_closed) == "closed"


@aio
async def test_channel_cancel_by_requester_stops_both_sources(harness):
    responder_source_closed = Deferred()
    requester_source_closed = Deferred()
    inbound_ended = Deferred()

    class R(EchoResponder):
        def request_channel(self, payload, inbound):
            async def consume():
                try:
                    async for _ in inbound:
                        pass
                except Exception as exc:  # noqa: BLE001
                    return exc
                return None

            defer.ensureDeferred(consume()).chainDeferred(inbound_ended)
            return closing_source(responder_source_closed)

    rs = await harness.connect(await harness.serve(R))
    ch = rs.request_channel(Payload(b"first"), closing_source(requester_source_closed),
                            prefetch=4)
    got = []
    async for item in ch:
        got.append(item.data)
        if len(got) == 5:
            ch.cancel()
    assert got == [b"0", b"1", b"2", b"3", b"4"]
    assert await wait(requester_source_closed) == "closed"
    assert await wait(responder_source_closed) == "closed"
    await wait(inbound_ended)  # the responder's inbound ended (error or completion)
    assert rs.is_open


@aio
async def test_channel_responder_error_stops_requester_source(harness):
    class R(EchoResponder):
        async def request_channel(self, payload, inbound):
            async for item in inbound:
                yield Payload(b"got " + item.data)
                raise InvalidError("responder failed")

    rs = await harness.connect(await harness.serve(R))
    pulled: list = []
    source = closing_source(Deferred(), pulled)
    ch = rs.request_channel(Payload(b"first"), source)
    items, exc = [], None
    try:
        async for item in ch:
            items.append(item.data)
    except InvalidError as e:
        exc = e
    assert items == [b"got 0"] and exc.message == "responder failed"
    assert pulled, "the requester's source was never pulled"
    assert inspect.getgeneratorstate(source) == inspect.GEN_CLOSED


# --------------------------------------------------------------------- errors


ERRORS = [
    (ApplicationError, "app failed", 0x201),
    (RejectedError, "not now", 0x202),
    (InvalidError, "bad request", 0x204),
    (CanceledError, "gave up", 0x203),
]


def raising_responder(exc: Exception):
    class R(Responder):
        def request_response(self, payload):
            raise exc

        def request_stream(self, payload):
            if payload.data == b"mid":
                def gen():
                    yield Payload(b"one")
                    raise exc

                return gen()
            raise exc

        def request_channel(self, payload, inbound):
            raise exc

    return R


async def outcome(rs, interaction: str):
    """Run one interaction and return (items received, exception raised)."""
    items: list = []
    try:
        if interaction == "response":
            items.append(await rs.request_response(Payload(b"x")))
        elif interaction == "stream":
            async for p in rs.request_stream(Payload(b"x")):
                items.append(p)
        elif interaction == "stream-mid":
            async for p in rs.request_stream(Payload(b"mid")):
                items.append(p)
        else:
            async for p in rs.request_channel(Payload(b"x"), [Payload(b"y")]):
                items.append(p)
    except Exception as exc:  # noqa: BLE001
        return items, exc
    return items, None


@pytest.mark.parametrize("interaction", ["response", "stream", "stream-mid", "channel"])
@pytest.mark.parametrize("cls,message,code", ERRORS)
@aio
async def test_responder_error_reaches_requester_typed(harness, interaction, cls, message, code):
    rs = await harness.connect(await harness.serve(raising_responder(cls(message))))
    items, exc = await wait(outcome(rs, interaction))
    assert type(exc) is cls
    assert exc.error_code == code
    assert exc.message == message
    assert [p.data for p in items] == ([b"one"] if interaction == "stream-mid" else [])
    assert rs.is_open


@pytest.mark.parametrize("interaction", ["response", "stream", "stream-mid", "channel"])
@pytest.mark.logs_failure("a handler's KeyError is a bug: the server logs it",
                          match=r"failed on stream \d+ .*\n(.*\n)*builtins\.KeyError: 'lookup'")
@aio
async def test_plain_exception_becomes_application_error(harness, interaction):
    rs = await harness.connect(await harness.serve(raising_responder(KeyError("lookup"))))
    _, exc = await wait(outcome(rs, interaction))
    assert type(exc) is ApplicationError
    assert exc.error_code == 0x201
    assert exc.message == "KeyError: 'lookup'"  # (the type is kept)


@aio
async def test_application_defined_error_code_is_preserved(harness):
    rs = await harness.connect(
        await harness.serve(raising_responder(ApplicationError("custom", 0x301))))
    _, exc = await wait(outcome(rs, "response"))
    assert isinstance(exc, ApplicationError)
    assert (exc.error_code, exc.message) == (0x301, "custom")


@aio
async def test_connection_level_error_raised_by_handler_is_sent_as_stream_error(harness):
    """ERROR with CONNECTION_ERROR (or a setup code) MUST use stream 0 (spec §Error Codes):
    a handler re-raising e.g. the ConnectionLostError of an upstream call must not put a
    connection-level code on a stream; the requester gets a stream-level error."""
    from rsocket_tx import ConnectionError as RSocketConnectionError

    rs = await harness.connect(
        await harness.serve(raising_responder(ConnectionLostError("upstream gone"))))
    _, exc = await wait(outcome(rs, "response"))
    assert not isinstance(exc, RSocketConnectionError), repr(exc)
    assert exc.error_code == 0x201 or exc.error_code >= 0x301
    assert "upstream gone" in exc.message
    assert rs.is_open


@pytest.mark.parametrize("interaction,name", [
    ("response", "request-response"), ("stream", "request-stream"),
    ("channel", "request-channel")])
@aio
async def test_unimplemented_interaction_is_rejected(harness, interaction, name):
    rs = await harness.connect(await harness.serve(Responder))
    _, exc = await wait(outcome(rs, interaction))
    assert type(exc) is RejectedError
    assert name in exc.message


# --------------------------------------------------------------------- handler styles


@pytest.mark.parametrize("style", ["value", "deferred", "coroutine", "failing deferred",
                                   "failing coroutine"])
@aio
async def test_request_response_handler_styles(harness, style):
    class R(Responder):
        def request_response(self, payload):
            reply = Payload(b"re:" + payload.data, b"m")
            if style == "value":
                return reply
            if style == "deferred":
                return later(reply)
            if style == "failing deferred":
                d = Deferred()
                reactor.callLater(0, d.errback, InvalidError("later"))
                return d

            async def coro():
                await later(None)
                if style == "failing coroutine":
                    raise InvalidError("later")
                return reply

            return coro()

    rs = await harness.connect(await harness.serve(R))
    d = rs.request_response(Payload(b"q"))
    if style.startswith("failing"):
        with pytest.raises(InvalidError, match="later"):
            await wait(d)
    else:
        assert await wait(d) == Payload(b"re:q", b"m")


@pytest.mark.parametrize("style", ["list", "generator", "async generator", "deferred list",
                                   "coroutine list", "coroutine async generator"])
@aio
async def test_request_stream_handler_styles(harness, style):
    class R(Responder):
        def request_stream(self, payload):
            items = [Payload(b"%d" % i) for i in range(5)]
            if style == "list":
                return items
            if style == "generator":
                return iter(items)

            async def agen():
                for item in items:
                    await later(None)
                    yield item

            if style == "async generator":
                return agen()
            if style == "deferred list":
                return later(items)

            async def coro():
                await later(None)
                return items if style == "coroutine list" else agen()

            return coro()

    rs = await harness.connect(await harness.serve(R))
    got = await wait(rs.request_stream(Payload(b""), prefetch=2).collect())
    assert [p.data for p in got] == [b"0", b"1", b"2", b"3", b"4"]


@pytest.mark.parametrize("n", [10, 2000])
@aio
async def test_async_generator_source_without_awaits(harness, n):
    class R(Responder):
        async def request_stream(self, payload):
            for i in range(n):
                yield Payload(b"%d" % i)

    rs = await harness.connect(await harness.serve(R))
    got = await wait(rs.request_stream(Payload(b""), prefetch=n).collect())
    assert [p.data for p in got] == [b"%d" % i for i in range(n)]


@aio
async def test_slow_handler_does_not_block_other_streams(harness):
    slow = Deferred()

    class R(EchoResponder):
        def request_response(self, payload):
            if payload.data == b"slow":
                return slow
            return Payload(b"fast")

    rs = await harness.connect(await harness.serve(R))
    d_slow = rs.request_response(Payload(b"slow"))
    assert await wait(rs.request_response(Payload(b"fast"))) == Payload(b"fast")
    assert [p.data for p in await wait(rs.request_stream(Payload(b"4")).collect())] == [
        b"0", b"1", b"2", b"3"]
    assert await wait(drain(rs.request_channel(Payload(b"c"), [Payload(b"d")]))) == [
        b"c", b"d"]
    assert not d_slow.called
    slow.callback(Payload(b"finally"))
    assert await wait(d_slow) == Payload(b"finally")


# --------------------------------------------------------------------- server -> client


class ClientResponder(EchoResponder):
    def __init__(self):
        self.fnf = Deferred()
        self.push = Deferred()

    def fire_and_forget(self, payload):
        self.fnf.callback(payload)

    def metadata_push(self, metadata):
        self.push.callback(metadata)


class AskingServer(Responder):
    """Answers a request by making the interaction it names back to the client."""

    async def request_response(self, payload):
        rs = self.rsocket
        what = payload.data
        if what == b"response":
            reply = await rs.request_response(Payload(b"q", b"qm"))
            return Payload(reply.data + b"|" + reply.metadata)
        if what == b"fnf":
            await rs.fire_and_forget(Payload(b"f", b"fm"))
            return Payload(b"sent")
        if what == b"push":
            await rs.metadata_push(b"pm")
            return Payload(b"sent")
        if what == b"stream":
            stream = rs.request_stream(Payload(b"3"), prefetch=1)
            items = await stream.collect()
        else:
            stream = rs.request_channel(Payload(b"c0"), [Payload(b"c1"), Payload(b"c2")])
            items = [p async for p in stream]
        assert stream.stream_id % 2 == 0  # server-initiated streams use even ids
        return Payload(b",".join(p.data for p in items))


@pytest.mark.parametrize("what,expected", [
    (b"response", b"q|qm"), (b"fnf", b"sent"), (b"push", b"sent"),
    (b"stream", b"0,1,2"), (b"channel", b"c0,c1,c2")])
@aio
async def test_server_requests_the_client_responder(harness, what, expected):
    client_responder = ClientResponder()
    rs = await harness.connect(await harness.serve(AskingServer), responder=client_responder)
    assert (await wait(rs.request_response(Payload(what)))).data == expected
    if what == b"fnf":
        assert await wait(client_responder.fnf) == Payload(b"f", b"fm")
    if what == b"push":
        assert await wait(client_responder.push) == b"pm"


@aio
async def test_server_initiates_requests_right_after_setup(harness):
    """A server may request from the client without any client request to answer."""
    client_responder = ClientResponder()
    results = Deferred()

    class Pusher(Responder):
        def accept_setup(self, setup):
            rs = self.rsocket

            async def push():
                reply = await rs.request_response(Payload(b"hello client"))
                items = await rs.request_stream(Payload(b"2")).collect()
                return reply.data, [p.data for p in items]

            reactor.callLater(0, lambda: defer.ensureDeferred(push()).chainDeferred(results))

    await harness.connect(await harness.serve(Pusher), responder=client_responder)
    assert await wait(results) == (b"hello client", [b"0", b"1"])


@aio
async def test_server_request_to_client_without_responder_is_rejected(harness):
    class R(Responder):
        async def request_response(self, payload):
            try:
                await self.rsocket.request_response(Payload(b"q"))
            except RejectedError as exc:
                return Payload(exc.message.encode())
            return Payload(b"not rejected")

    rs = await harness.connect(await harness.serve(R))
    reply = await wait(rs.request_response(Payload(b"go")))
    assert b"request-response" in reply.data


# --------------------------------------------------------------------- sizes


def frame_sizes():
    sizes: dict = {"send": [], "follows": 0}

    def log(direction, frame):
        if direction == "send":
            sizes["send"].append((len(encode(frame)), frame.frame_type.name))
            sizes["follows"] += bool(getattr(frame, "follows", False))

    return sizes, log


@aio
async def test_fragmentation_end_to_end(harness):
    data = bytes(range(256)) * 400  # 102,400 bytes
    meta = b"M" * 10_000
    fnf = Deferred()

    class R(EchoResponder):
        def request_stream(self, payload):
            return [Payload(payload.data, payload.metadata)] * 3

        def fire_and_forget(self, payload):
            fnf.callback(payload)

    server_sizes, server_log = frame_sizes()
    client_sizes, client_log = frame_sizes()
    port = await harness.serve(R, fragment_size=64, frame_logger=server_log)
    rs = await harness.connect(port, fragment_size=64, frame_logger=client_log)
    big = Payload(data, meta)
    assert await wait(rs.request_response(big)) == big
    assert await wait(rs.request_response(Payload(data, b""))) == Payload(data, b"")
    assert await wait(rs.request_response(Payload(data))) == Payload(data)
    assert await wait(rs.request_stream(big).collect()) == [big] * 3
    assert await wait(drain(rs.request_channel(big, [Payload(data[:5000], meta)]))) == [
        data, data[:5000]]
    await rs.fire_and_forget(big)
    assert await wait(fnf) == big
    for sizes in (server_sizes, client_sizes):
        # SETUP carries no F flag (spec §Fragmentation And Reassembly): not fragmentable
        assert [s for s in sizes["send"] if s[0] > 64 and s[1] != "SETUP"] == []
        assert sizes["follows"] > 1000


@aio
async def test_one_mebibyte_payloads_without_fragment_size(harness):
    data = b"\xa5" * (1 << 20)
    meta = b"m" * 65_536
    rs = await harness.connect(await harness.serve(EchoResponder))
    big = Payload(data, meta)
    assert await wait(rs.request_response(big)) == big

    items = await wait(rs.request_stream(Payload(b"2", meta)).collect())
    assert [(len(p.data), p.metadata) for p in items] == [(1, meta), (1, meta)]
    big_stream = await wait(rs.request_channel(big, complete=True).collect())
    assert big_stream == [big]
    items = await wait(drain(rs.request_channel(big, [Payload(data), Payload(data[:10])])))
    assert items == [data, data, data[:10]]


# --------------------------------------------------------------------- lost connection


@aio
async def test_lost_connection_fails_everything_outstanding(harness):
    started: list = []
    all_started = Deferred()
    canceled: list = []

    def mark(what):
        started.append(what)
        if len(started) == 3:
            all_started.callback(None)

    class R(Responder):
        def request_response(self, payload):
            mark("response")
            return Deferred(lambda d: canceled.append("response"))

        async def request_stream(self, payload):
            mark("stream")
            yield Payload(b"one")
            await Deferred()

        async def request_channel(self, payload, inbound):
            mark("channel")
            await Deferred()
            yield Payload(b"never")

    rs = await harness.connect(await harness.serve(R))
    d = rs.request_response(Payload(b"x"))
    stream = rs.request_stream(Payload(b"x"))
    channel = rs.request_channel(Payload(b"x"), [Payload(b"y")])
    collected = channel.collect()
    assert (await wait(stream.__anext__())).data == b"one"
    await wait(all_started)
    closed = rs.closed

    harness.server_protocols[0].transport.abortConnection()

    with pytest.raises(ConnectionLostError):
        await wait(d)
    with pytest.raises(ConnectionLostError):
        await wait(stream.__anext__())
    with pytest.raises(ConnectionLostError):
        await wait(collected)
    assert await wait(closed) is None
    assert not rs.is_open
    assert canceled == ["response"]  # the server cancelled its pending handler
    assert_requests_raise_local_protocol_error(rs)


@aio
async def test_client_disconnect_stops_server_sources(harness):
    rs, stream, _pulled, closed = await counting_stream(harness, prefetch=2)
    assert (await wait(stream.__anext__())).data == b"0"
    rs._protocol.transport.abortConnection()
    assert await wait(closed) <= 2 + 2
    with pytest.raises(ConnectionLostError):
        await wait(drain(stream))


@aio
async def test_argument_validation(harness):
    rs = await harness.connect(await harness.serve(EchoResponder))
    # a value that is not a Payload is encoded by the data MIME type's codec: for
    # application/octet-stream only bytes-like values are data
    with pytest.raises(TypeError, match="str"):
        rs.request_response("not bytes")
    assert await wait(rs.request_response(b"bytes are data")) == Payload(b"bytes are data")
    with pytest.raises(TypeError):
        rs.metadata_push("text")
    with pytest.raises(ValueError):
        rs.request_stream(Payload(b"1"), prefetch=0)
    with pytest.raises(ValueError):
        rs.request_channel(Payload(b"1"), prefetch=2**31)
    assert await wait(rs.request_response(Payload(b"still ok"))) == Payload(b"still ok")


def assert_requests_raise_local_protocol_error(rs):
    with pytest.raises(LocalProtocolError):
        rs.request_response(Payload(b"x"))
    with pytest.raises(LocalProtocolError):
        rs.fire_and_forget(Payload(b"x"))
    with pytest.raises(LocalProtocolError):
        rs.metadata_push(b"x")
    with pytest.raises(LocalProtocolError):
        rs.request_stream(Payload(b"x"))
    with pytest.raises(LocalProtocolError):
        rs.request_channel(Payload(b"x"), [Payload(b"y")])


@aio
async def test_local_close_fails_outstanding_and_refuses_new_requests(harness):
    class R(Responder):
        def request_response(self, payload):
            return Deferred()

    rs = await harness.connect(await harness.serve(R))
    d = rs.request_response(Payload(b"x"))
    await wait(rs.close(drain_timeout=0))
    assert not rs.is_open
    with pytest.raises(ConnectionCloseError):
        await wait(d)
    assert_requests_raise_local_protocol_error(rs)
    await wait(harness.server_protocols[0].lost)  # the server saw the disconnect


# --------------------------------------------------------------------- SETUP acceptor


@aio
async def test_rejected_setup_fails_outstanding_request(harness):
    handled: list = []

    class R(EchoResponder):
        def accept_setup(self, setup):
            raise RejectedSetupError("no")

        def request_response(self, payload):
            handled.append(payload)
            return payload

    rs = await harness.connect(await harness.serve(R))
    d = rs.request_response(Payload(b"x"))
    with pytest.raises(RejectedSetupError) as info:
        await wait(d)
    assert info.value.message == "no"
    assert info.value.error_code == 0x3
    await wait(rs.closed)
    assert not rs.is_open
    assert handled == [], "a request on a rejected connection reached the responder"


@aio
async def test_async_acceptor_delays_requests_until_it_fires(harness):
    decision = Deferred()
    handled: list = []
    request_arrived = Deferred()

    def log(direction, frame):
        if direction == "recv" and frame.frame_type == FrameType.REQUEST_RESPONSE:
            request_arrived.callback(None)

    class R(Responder):
        def accept_setup(self, setup):
            return decision

        def request_response(self, payload):
            handled.append(payload.data)
            return Payload(b"served")

    rs = await harness.connect(await harness.serve(R, frame_logger=log))
    d = rs.request_response(Payload(b"early"))
    await wait(request_arrived)
    assert handled == [] and not d.called
    decision.callback(None)
    assert await wait(d) == Payload(b"served")
    assert handled == [b"early"]


@aio
async def test_async_acceptor_rejecting_later(harness):
    decision = Deferred()

    class R(EchoResponder):
        def accept_setup(self, setup):
            return decision

    rs = await harness.connect(await harness.serve(R))
    d = rs.request_response(Payload(b"x"))
    reactor.callLater(0, decision.errback, RejectedSetupError("later no"))
    with pytest.raises(RejectedSetupError, match="later no"):
        await wait(d)
    await wait(rs.closed)


@aio
async def test_setup_info_seen_by_acceptor(harness):
    infos: list = []
    responders: list = []

    class R(EchoResponder):
        def accept_setup(self, setup):
            infos.append(setup)
            responders.append(self)

    rs = await harness.connect(
        await harness.serve(R), setup_payload=Payload(b"hello", b"auth"),
        data_mime_type="application/json", metadata_mime_type="message/x.rsocket.routing.v0",
        keepalive_interval=1234, max_lifetime=56789)
    assert await wait(rs.request_response(Payload(b"x"))) == Payload(b"x")
    (info,) = infos
    assert info.version == (1, 0)
    assert info.data_mime_type == "application/json"
    assert info.metadata_mime_type == "message/x.rsocket.routing.v0"
    assert (info.keepalive_interval, info.max_lifetime) == (1234, 56789)
    assert info.payload == Payload(b"hello", b"auth")
    assert info.lease is False and info.resume_token is None
    assert responders[0].setup is info
    assert responders[0].rsocket.setup is info


@pytest.mark.parametrize("with_responder", [True, False])
@aio
async def test_client_rsocket_setup_describes_its_setup(harness, with_responder):
    responder = EchoResponder() if with_responder else None
    rs = await harness.connect(
        await harness.serve(EchoResponder), responder=responder,
        setup_payload=Payload(b"hello", b"auth"), data_mime_type="application/json",
        keepalive_interval=1234, max_lifetime=56789)
    assert rs.setup is not None, "RSocket.setup is None on a connected client"
    assert rs.setup.data_mime_type == "application/json"
    assert (rs.setup.keepalive_interval, rs.setup.max_lifetime) == (1234, 56789)
    assert rs.setup.payload == Payload(b"hello", b"auth")


def test_setup_payload_too_large_for_one_frame_is_refused_with_a_clear_error():
    from rsocket_tx.client import make_setup

    with pytest.raises(ValueError, match="SETUP cannot be fragmented"):
        make_setup(setup_payload=Payload(b"x" * 16_777_216))


# --------------------------------------------------------------------- batch consumption


@aio
async def test_take_ready_and_when_ready_drain_a_stream_in_batches(harness):
    rs, stream, pulled, closed = await counting_stream(harness, prefetch=8)
    got = []
    while len(got) < 30:
        await wait(stream.when_ready())
        batch = stream.take_ready(5)
        assert 1 <= len(batch) <= 5
        got += [p.data for p in batch]
    await wait(rs.request_response(Payload(b"barrier")))
    assert got[:30] == [b"%d" % i for i in range(len(got))][:30]
    # credit follows what was taken: the responder is never more than the window ahead
    # (+ 1: the item the pump pulls ahead once its credit is used up)
    assert len(pulled) <= len(got) + 8 + 1
    assert not stream.ended and stream.error is None
    stream.cancel()
    assert stream.ended
    assert await wait(closed) <= len(got) + 16
    assert await wait(stream.when_ready()) is None  # ended: fires at once
    assert stream.take_ready() == []


@aio
async def test_when_ready_reports_the_end_and_the_error(harness):
    class R(EchoResponder):
        def request_stream(self, payload):
            if payload.data == b"fail":
                raise ApplicationError("no stream")
            return [Payload(b"a"), Payload(b"b")]

    rs = await harness.connect(await harness.serve(R))
    stream = rs.request_stream(Payload(b"ok"))
    got = []
    while True:
        await wait(stream.when_ready())
        items = stream.take_ready()
        got += [p.data for p in items]
        if stream.ended and not items:
            break
    assert got == [b"a", b"b"] and stream.error is None
    failing = rs.request_stream(Payload(b"fail"))
    await wait(failing.when_ready())
    assert failing.ended and isinstance(failing.error, ApplicationError)
    assert failing.error.message == "no stream"
    with pytest.raises(ValueError, match="max_items"):
        failing.take_ready(-1)


class ReadySource:
    """An async source that also offers ``ready(n)``: items fed from outside, in batches."""

    def __init__(self) -> None:
        self.buffer: list = []
        self.ended = False
        self.anext_calls = 0
        self.ready_calls = 0
        self.waiter: Deferred | None = None

    def feed(self, items, end: bool = False) -> None:
        self.buffer += items
        self.ended = self.ended or end
        waiter, self.waiter = self.waiter, None
        if waiter is not None:
            waiter.callback(None)

    def ready(self, n: int) -> list:
        self.ready_calls += 1
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out

    def __aiter__(self):
        return self

    async def __anext__(self):
        self.anext_calls += 1
        while not self.buffer:
            if self.ended:
                raise StopAsyncIteration
            self.waiter = Deferred()
            await self.waiter
        return self.buffer.pop(0)


@aio
async def test_channel_source_with_ready_is_sent_in_batches_within_credit(harness):
    received: list = []

    class R(EchoResponder):
        async def request_channel(self, payload, inbound):
            async for p in inbound:
                received.append(p.data)
            return [Payload(b"%d" % len(received))]

    rs = await harness.connect(await harness.serve(R))
    source = ReadySource()
    source.feed([Payload(b"%d" % i) for i in range(1000)])
    channel = rs.request_channel(Payload(b"first"), source)
    reactor.callLater(0, source.feed, [Payload(b"%d" % i) for i in range(1000, 1500)], True)
    answer = await wait(channel.collect())
    assert received == [b"%d" % i for i in range(1500)]  # (the first payload is the request)
    assert [p.data for p in answer] == [b"1500"]
    # 1500 items went out through ready(); __anext__ only ran when nothing was ready, or to
    # look one item ahead when the credit was used up (at most once per REQUEST_N of 128)
    assert source.anext_calls <= 3 + 1 + 1500 // (DEFAULT_PREFETCH // 2)
    assert source.ready_calls >= 1500 // 512
