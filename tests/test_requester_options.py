"""Requester options of issue 16: per-request ``timeout=`` (CANCEL on the wire when it fires),
encoding both ways on a channel (outbound values encoded like the first, a routed handler's
inbound decoded), and a payload over the local send limit refused before anything is sent.

A client and a server connected in memory (iosim) on one Clock, each logging the frames it
sends; bytes move only when the test pumps them.
"""

from __future__ import annotations

import math

import pytest
import pytest_twisted
from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.task import Clock
from twisted.logger import LogLevel, formatEvent, globalLogPublisher
from twisted.test.iosim import connectedServerAndClient
from twisted_support import EchoResponder, LoggedPair, wait

from rsocket_tx import (
    ApplicationError,
    CanceledError,
    Payload,
    RequestTimeout,
    Responder,
    RSocketClientFactory,
    RSocketServerFactory,
    route,
)
from rsocket_tx.client import make_setup
from rsocket_tx.core.errors import ErrorCode, InvalidError
from rsocket_tx.core.frames import FrameType
from rsocket_tx.extensions import COMPOSITE_METADATA

JSON = "application/json"


class Pair(LoggedPair):
    """A client and a server connected in memory on one Clock, logging the frames each
    sends (``sent["client"]``, ``sent["server"]``)."""

    def __init__(self, responder=EchoResponder, *, data_mime_type="application/octet-stream",
                 metadata_mime_type="application/octet-stream", **client_settings) -> None:
        super().__init__(responder, make_setup(data_mime_type=data_mime_type,
                                               metadata_mime_type=metadata_mime_type),
                         **client_settings)
        self.deliver()

    def deliver(self) -> None:
        """Run the pending callLater(0) writes and move every byte both ways."""
        for _ in range(5):
            self.clock.advance(0)
            self.pump.flush()

    def frames(self, side: str, frame_type: FrameType, stream_id: int | None = None) -> list:
        return [f for f in self.sent[side] if f.frame_type == frame_type
                and (stream_id is None or f.stream_id == stream_id)]

    def cancels(self, stream_id: int = 1) -> list:
        return self.frames("client", FrameType.CANCEL, stream_id)


class Held(Responder):
    """Answers nothing until the test says so; records the handlers the requester canceled."""

    def __init__(self) -> None:
        self.held: list[Deferred] = []
        self.canceled: list[Deferred] = []

    def request_response(self, payload):
        d = Deferred(self.canceled.append)
        self.held.append(d)
        return d

    async def request_stream(self, payload):
        for i in range(int(payload.data)):
            yield Payload(b"%d" % i)
        await Deferred()  # never completes

    async def request_channel(self, payload, inbound):
        yield payload
        async for item in inbound:
            yield item
        await Deferred()


def consume(stream) -> Deferred:
    """Iterate ``stream`` into a list; fires with ``(items, error or None)``."""
    items: list = []

    async def run():
        try:
            async for item in stream:
                items.append(item)
        except Exception as exc:  # noqa: BLE001 - what the test inspects
            return items, exc
        return items, None

    return ensureDeferred(run())


# ------------------------------------------------------------------------ timeout=


def test_request_response_timeout_cancels_on_the_wire_and_fails_the_deferred():
    responder = Held()
    pair = Pair(lambda: responder)
    d = pair.rsocket.request_response(Payload(b"q"), timeout=1.5)
    pair.deliver()
    assert len(responder.held) == 1 and not d.called
    pair.clock.advance(1.499)
    pair.deliver()
    assert not d.called and pair.cancels() == []
    pair.clock.advance(0.001)
    assert pair.cancels() != []  # written at once: the CANCEL frame for stream 1
    pair.deliver()
    assert len(pair.cancels()) == 1
    failure = d.result
    d.addErrback(lambda _: None)
    assert failure.check(RequestTimeout)
    error = failure.value
    assert isinstance(error, TimeoutError) and isinstance(error, CanceledError)
    assert error.timeout == 1.5
    assert str(error) == "CANCELED: request-response timed out after 1.5 seconds: canceled"
    assert responder.canceled == responder.held  # the responder saw the CANCEL
    # the connection goes on
    ok = pair.rsocket.request_response(Payload(b"again"))
    pair.deliver()
    responder.held[1].callback(Payload(b"answer"))
    pair.deliver()
    assert ok.result == Payload(b"answer")


def test_request_response_answered_in_time_leaves_no_timer():
    pair = Pair()
    d = pair.rsocket.request_response(Payload(b"q"), timeout=2)
    pair.deliver()
    assert d.result == Payload(b"q")
    pair.clock.advance(3)
    pair.deliver()
    assert pair.cancels() == []
    assert d.result == Payload(b"q")


def test_request_response_timeout_with_decode():
    responder = Held()
    pair = Pair(lambda: responder, data_mime_type=JSON)
    d = pair.rsocket.request_response({"a": 1}, timeout=0.25, decode=True)
    pair.deliver()
    pair.clock.advance(0.25)
    pair.deliver()
    with pytest.raises(RequestTimeout, match="after 0.25 seconds"):
        d.result.raiseException()
    d.addErrback(lambda _: None)
    assert len(pair.cancels()) == 1


def test_a_cancel_by_the_application_is_not_a_timeout():
    responder = Held()
    pair = Pair(lambda: responder)
    d = pair.rsocket.request_response(Payload(b"q"), timeout=5)
    pair.deliver()
    d.cancel()
    assert d.result.check(CancelledError) and not d.result.check(RequestTimeout)
    d.addErrback(lambda _: None)
    pair.clock.advance(10)
    pair.deliver()
    assert len(pair.cancels()) == 1


def test_no_timeout_schedules_no_timer():
    pair = Pair()
    delays: list[float] = []
    original = pair.clock.callLater

    def call_later(delay, *args, **kw):
        delays.append(delay)
        return original(delay, *args, **kw)

    pair.clock.callLater = call_later
    pair.rsocket.request_response(Payload(b"q"))
    pair.rsocket.request_stream(Payload(b"3"))
    pair.rsocket.request_channel(Payload(b"c"), [Payload(b"d")])
    assert all(delay == 0 for delay in delays)  # only the end-of-turn write
    pair.rsocket.request_response(Payload(b"q"), timeout=7)
    assert 7 in delays


def test_stream_timeout_is_for_the_whole_stream():
    pair = Pair(Held)
    stream = pair.rsocket.request_stream(Payload(b"3"), timeout=2)
    result = consume(stream)
    pair.deliver()
    pair.clock.advance(1.9)  # items arrived; the stream is still open
    pair.deliver()
    assert not result.called
    pair.clock.advance(0.1)
    pair.deliver()
    items, error = result.result
    assert [p.data for p in items] == [b"0", b"1", b"2"]
    assert isinstance(error, RequestTimeout)
    assert str(error) == "CANCELED: request-stream timed out after 2 seconds: canceled"
    assert len(pair.cancels()) == 1


def test_stream_timeout_delivers_the_items_that_came_first_and_fails_collect():
    pair = Pair(Held)
    stream = pair.rsocket.request_stream(Payload(b"2"), timeout=1)
    pair.deliver()  # both items are queued, unconsumed
    pair.clock.advance(1)
    pair.deliver()
    items, error = consume(stream).result
    assert [p.data for p in items] == [b"0", b"1"]
    assert isinstance(error, RequestTimeout)
    late = pair.rsocket.request_stream(Payload(b"1"), timeout=1)
    collected = late.collect()
    pair.deliver()
    pair.clock.advance(1)
    pair.deliver()
    with pytest.raises(RequestTimeout):
        collected.result.raiseException()
    collected.addErrback(lambda _: None)
    assert len(pair.cancels(3)) == 1


def test_stream_ended_in_time_cancels_its_timer():
    pair = Pair()
    stream = pair.rsocket.request_stream(Payload(b"2"), timeout=1, decode=True)
    result = consume(stream)
    pair.deliver()
    assert result.result == ([b"0", b"1"], None)
    pair.clock.advance(5)
    pair.deliver()
    assert pair.cancels() == []
    assert pair.clock.getDelayedCalls() == [] or all(
        c.func.__name__ != "_expired" for c in pair.clock.getDelayedCalls())


def test_channel_timeout_cancels_both_directions():
    pulled: list[int] = []

    def outbound():
        for i in range(1000):
            pulled.append(i)
            yield Payload(b"o%d" % i)

    pair = Pair(Held)
    channel = pair.rsocket.request_channel(Payload(b"first"), outbound(), timeout=0.5)
    result = consume(channel)
    pair.deliver()
    pair.clock.advance(0.5)
    pair.deliver()
    items, error = result.result
    assert isinstance(error, RequestTimeout) and "request-channel timed out" in str(error)
    assert len(pair.cancels()) == 1
    sent_before = len(pulled)
    pair.clock.advance(1)
    pair.deliver()
    assert len(pulled) == sent_before  # the outbound side stopped with the channel


@pytest.mark.parametrize("bad", [0, -1, -0.5, math.nan, math.inf])
def test_timeout_must_be_positive_and_finite(bad):
    pair = Pair()
    before = list(pair.sent["client"])
    for call in (lambda: pair.rsocket.request_response(Payload(b"x"), timeout=bad),
                 lambda: pair.rsocket.request_stream(Payload(b"x"), timeout=bad),
                 lambda: pair.rsocket.request_channel(Payload(b"x"), timeout=bad)):
        with pytest.raises(ValueError, match="timeout must be a positive, finite number"):
            call()
    pair.deliver()
    assert pair.sent["client"] == before


@pytest.mark.parametrize("bad", ["1", True, b"1", [1]])
def test_timeout_must_be_a_number(bad):
    pair = Pair()
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        pair.rsocket.request_response(Payload(b"x"), timeout=bad)
    with pytest.raises(TypeError, match="timeout must be a number of seconds"):
        pair.rsocket.request_stream(Payload(b"x"), timeout=bad)


def test_fire_and_forget_and_metadata_push_take_no_timeout():
    pair = Pair()
    with pytest.raises(TypeError):
        pair.rsocket.fire_and_forget(Payload(b"x"), timeout=1)
    with pytest.raises(TypeError):
        pair.rsocket.metadata_push(b"m", timeout=1)


# ------------------------------------------------------------------ encoding both ways


class Shop(Responder):
    """A routed channel handler that decodes its inbound, and one that does not."""

    seen: list

    @route("decoded", interaction="request_channel", decode=True)
    async def decoded(self, request):
        self.seen.append(request.data)
        yield {"first": request.data}
        async for value in request.inbound:
            self.seen.append(value)
            yield {"got": value}

    @route("echo", interaction="request_channel", decode=True)
    async def echo(self, request):
        self.seen.append(request.data)
        async for value in request.inbound:
            self.seen.append(value)
            yield value

    @route("raw", interaction="request_channel")
    async def raw(self, request):
        async for payload in request.inbound:
            self.seen.append(payload)
            yield payload


def shop_pair(seen: list, data_mime_type: str = JSON) -> Pair:
    class S(Shop):
        pass

    S.seen = seen
    return Pair(S, data_mime_type=data_mime_type, metadata_mime_type=COMPOSITE_METADATA)


def test_channel_outbound_values_are_encoded_like_the_first_and_decoded_by_the_route():
    seen: list = []
    pair = shop_pair(seen)
    channel = pair.rsocket.request_channel({"n": 0}, [{"n": 1}, "two", Payload(b"3")],
                                           route="decoded", decode=True)
    result = consume(channel)
    pair.deliver()
    items, error = result.result
    assert error is None
    assert seen == [{"n": 0}, {"n": 1}, "two", 3]
    assert items == [{"first": {"n": 0}}, {"got": {"n": 1}}, {"got": "two"}, {"got": 3}]
    # on the wire: JSON text
    data = [f.data for f in pair.frames("client", FrameType.PAYLOAD, 1)]
    assert data[:3] == [b'{"n":1}', b'"two"', b"3"]


def test_per_stream_data_mime_type_encodes_the_outbound_values_too():
    seen: list = []
    pair = shop_pair(seen, data_mime_type="application/octet-stream")
    channel = pair.rsocket.request_channel("a", ["b", "c"], route="echo",
                                           data_mime_type="text/plain", decode=True)
    result = consume(channel)
    pair.deliver()
    assert result.result == (["b", "c"], None)
    assert seen == ["a", "b", "c"]
    assert [f.data for f in pair.frames("client", FrameType.PAYLOAD, 1)][:2] == [b"b", b"c"]


def test_a_route_without_decode_still_gets_payloads():
    seen: list = []
    pair = shop_pair(seen)
    result = consume(pair.rsocket.request_channel(None, [[1, 2]], route="raw"))
    pair.deliver()
    assert result.result[1] is None
    assert seen == [Payload(b"[1,2]")]


def test_malformed_inbound_data_is_invalid_where_the_handler_consumes_it():
    seen: list = []
    pair = shop_pair(seen)
    result = consume(pair.rsocket.request_channel({"n": 0}, [Payload(b"{nope")],
                                                  route="decoded"))
    pair.deliver()
    items, error = result.result
    assert isinstance(error, InvalidError)
    assert "cannot decode the request data as application/json" in str(error)


def test_a_value_the_codec_refuses_is_a_local_type_error():
    seen: list = []
    pair = shop_pair(seen)
    channel = pair.rsocket.request_channel({"n": 0}, [{"n": 1}, b"raw bytes"],
                                           route="decoded")
    result = consume(channel)
    pair.deliver()
    items, error = result.result
    assert type(error) is TypeError  # raised here, not an APPLICATION_ERROR from the server
    assert "cannot encode bytes as application/json" in str(error)
    assert seen[0] == {"n": 0} and b"raw bytes" not in seen
    # the responder was told with an ERROR frame on the stream
    (frame,) = pair.frames("client", FrameType.ERROR, 1)
    assert frame.error_code == ErrorCode.APPLICATION_ERROR
    assert b"cannot encode bytes" in frame.data
    assert pair.rsocket.is_open


def test_a_value_without_a_codec_is_a_type_error_at_the_call_site():
    pair = Pair()  # application/octet-stream: bytes only
    before = list(pair.sent["client"])
    with pytest.raises(TypeError, match="data without a codec for its MIME type"):
        pair.rsocket.request_response({"a": 1})
    with pytest.raises(TypeError, match="data without a codec"):
        pair.rsocket.request_channel({"a": 1}, [])
    json_pair = Pair(data_mime_type=JSON)
    with pytest.raises(TypeError, match="cannot encode bytes as application/json"):
        json_pair.rsocket.request_stream(b"raw")
    pair.deliver()
    assert pair.sent["client"] == before
    # later channel values of the wrong type fail the channel locally
    channel = pair.rsocket.request_channel(Payload(b"first"), [{"a": 1}])
    result = consume(channel)
    pair.deliver()
    assert type(result.result[1]) is TypeError


def test_decode_is_for_channel_routes():
    with pytest.raises(ValueError, match="interaction='request_channel'"):
        route("x", decode=True)
    with pytest.raises(ValueError, match="interaction='request_channel'"):
        route("x", interaction="request_stream", decode=True)


# ------------------------------------------------------------ the local send limit


LIMIT = 100_000


def test_a_payload_over_the_send_limit_is_refused_before_anything_is_sent():
    responder = Held()
    pair = Pair(lambda: responder, max_send_buffer_size=LIMIT)
    transport = pair.client.transport
    big = Payload(b"x" * LIMIT)
    calls = [
        lambda: pair.rsocket.request_response(big),
        lambda: pair.rsocket.fire_and_forget(big),
        lambda: pair.rsocket.request_stream(big),
        lambda: pair.rsocket.request_channel(big, [Payload(b"more")]),
        lambda: pair.rsocket.metadata_push(b"m" * LIMIT),
        lambda: pair.rsocket.request_response(Payload(b"d" * (LIMIT // 2),
                                                      b"m" * (LIMIT // 2))),
    ]
    for call in calls:
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        assert "over the local send limit" in message
        assert f"max_send_buffer_size of {LIMIT:,} bytes" in message
        assert "ConnectionConfig(max_send_buffer_size=...)" in message
        assert transport.stream == []  # nothing written, nothing queued
        pair.deliver()
        assert transport.stream == []
    assert pair.client.connection.is_open
    # the connection stays usable, and a payload that fits goes out whole
    fits = Payload(b"y" * (LIMIT - 100))
    d = pair.rsocket.request_response(fits)
    pair.deliver()
    assert responder.held and not responder.canceled
    responder.held[0].callback(Payload(b"ok"))
    pair.deliver()
    assert d.result == Payload(b"ok")


def test_the_limit_counts_the_framing_of_fragments():
    pair = Pair(max_send_buffer_size=10_000, fragment_size=1000)
    # 9,850 bytes of data in fragments of at most 1,000 bytes: 11 frames of at most 16 bytes
    # of framing each (length prefix, header, request-n, metadata length) pass 10,000
    with pytest.raises(ValueError, match=r"payload of 9,850 bytes \(10,026 bytes framed\)"):
        pair.rsocket.request_response(Payload(b"z" * 9_850))
    d = pair.rsocket.request_response(Payload(b"z" * 9_000))
    pair.deliver()
    assert d.result == Payload(b"z" * 9_000)


def test_a_channel_item_over_the_limit_fails_the_channel_locally():
    pair = Pair(Held, max_send_buffer_size=LIMIT)
    channel = pair.rsocket.request_channel(Payload(b"first"),
                                           [Payload(b"ok"), Payload(b"x" * LIMIT)])
    result = consume(channel)
    pair.deliver()
    items, error = result.result
    assert type(error) is ValueError and "max_send_buffer_size" in str(error)
    assert [f.data for f in pair.frames("client", FrameType.PAYLOAD, 1)] == [b"ok"]
    assert pair.rsocket.is_open


def limited_server(responder):
    """A client connected in memory to a server whose ``max_send_buffer_size`` is 65,536
    bytes: ``(client, server, pump, clock)``."""
    clock = Clock()
    server_factory = RSocketServerFactory(responder, reactor=clock, max_send_buffer_size=65_536)
    client_factory = RSocketClientFactory(make_setup(), reactor=clock)
    client, server, pump = connectedServerAndClient(
        lambda: server_factory.buildProtocol(None),
        lambda: client_factory.buildProtocol(None), clock=clock)
    return client, server, pump, clock


def test_a_response_item_over_the_servers_limit_is_an_error_not_an_abort():
    class Big(Responder):
        def request_stream(self, payload):
            return [Payload(b"small"), Payload(b"x" * 70_000)]

    client, server, pump, clock = limited_server(Big)
    result = consume(client.rsocket.request_stream(Payload(b"")))
    for _ in range(5):
        clock.advance(0)
        pump.flush()
    items, error = result.result
    assert [p.data for p in items] == [b"small"]
    assert isinstance(error, ApplicationError)
    assert "max_send_buffer_size of 65,536 bytes" in error.message
    assert client.rsocket.is_open and server.rsocket.is_open


# ------------------------------------------------------------------ the command line


@pytest.fixture
def harness():
    from twisted_support import Harness

    h = Harness()
    yield h
    pytest_twisted.blockon(ensureDeferred(h.cleanup()))


@pytest.mark.parametrize("command", [["request", "-d", "q"], ["stream", "-d", "2"]])
@pytest_twisted.ensureDeferred
async def test_cli_timeout_cancels_the_request_on_the_wire(harness, command):
    from twisted_support import run_command

    from rsocket_tx.faces.cli import EXIT_TIMEOUT

    received: list = []
    cancel_arrived: Deferred = Deferred()

    def server_log(direction, frame):
        if direction == "recv":
            received.append(frame)
            if frame.frame_type == FrameType.CANCEL and not cancel_arrived.called:
                cancel_arrived.callback(frame)

    port = await harness.serve(Held, frame_logger=server_log)
    result = await run_command([command[0], f"tcp://127.0.0.1:{port}", *command[1:],
                                "--timeout", "0.3", "--debug"])
    assert result.status == EXIT_TIMEOUT
    assert "timed out after 0.3 seconds" in result.err
    assert "send CANCEL stream=1" in result.err.splitlines()
    frame = await wait(cancel_arrived)
    assert frame.stream_id == 1


def test_a_response_over_the_servers_limit_is_an_error_not_an_abort():
    logged: list[str] = []

    def observe(event):
        if event.get("log_level") == LogLevel.error:
            logged.append(formatEvent(event))

    class Big(Responder):
        def request_response(self, payload):
            return Payload(b"x" * 70_000)

    client, server, pump, clock = limited_server(Big)
    d = client.rsocket.request_response(Payload(b""))
    globalLogPublisher.addObserver(observe)
    try:
        for _ in range(5):
            clock.advance(0)
            pump.flush()
    finally:
        globalLogPublisher.removeObserver(observe)
    assert any("the response on stream 1 is not sent: payload of 70,000 bytes" in line
               for line in logged)
    with pytest.raises(ApplicationError, match="max_send_buffer_size of 65,536 bytes"):
        d.result.raiseException()
    d.addErrback(lambda _: None)
    assert client.rsocket.is_open and server.rsocket.is_open
