"""rsocket_tx.apps.demo.DemoResponder, its methods called directly (no connection)."""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.logger import LogLevel, capturedLogs, formatEvent

from rsocket_tx.apps.demo import DEFAULT_STREAM_COUNT, DemoResponder, parse_count
from rsocket_tx.core.errors import InvalidError
from rsocket_tx.core.payload import Payload
from rsocket_tx.responder import Responder, SetupInfo


@pytest.fixture
def demo():
    return DemoResponder()


def test_is_a_responder():
    assert issubclass(DemoResponder, Responder)


@pytest.mark.parametrize(
    "payload",
    [
        Payload(b"hello", b"meta"),
        Payload(b"hello"),  # no metadata stays no metadata
        Payload(b"", b""),  # empty metadata stays empty metadata (M flag)
        Payload(bytes(range(256)), b"\x00\xff"),
    ],
)
def test_request_response_echoes(demo, payload):
    response = demo.request_response(payload)
    assert response == payload
    assert response.metadata == payload.metadata  # None and b"" are distinct
    assert (response.metadata is None) == (payload.metadata is None)


def _stream(demo, data: bytes) -> list[bytes]:
    return [p.data for p in demo.request_stream(Payload(data))]


def test_request_stream_counts(demo):
    assert _stream(demo, b"5") == [b"0", b"1", b"2", b"3", b"4"]


def test_request_stream_empty_is_ten(demo):
    assert DEFAULT_STREAM_COUNT == 10
    assert _stream(demo, b"") == [str(i).encode() for i in range(10)]


def test_request_stream_whitespace(demo):
    assert _stream(demo, b" 3\n") == [b"0", b"1", b"2"]
    assert _stream(demo, b"  ") == [str(i).encode() for i in range(10)]


def test_request_stream_zero_is_empty(demo):
    assert _stream(demo, b"0") == []


def test_request_stream_payloads_have_no_metadata(demo):
    payloads = list(demo.request_stream(Payload(b"2", b"ignored")))
    assert payloads == [Payload(b"0"), Payload(b"1")]


def test_request_stream_is_lazy(demo):
    stream = iter(demo.request_stream(Payload(b"1000000000000")))
    assert [next(stream).data for _ in range(3)] == [b"0", b"1", b"2"]


@pytest.mark.parametrize("data", [b"abc", b"-1", b"1.5", b"5x", b"\xff", b"+3", "٣".encode()])
def test_request_stream_invalid(demo, data):
    with pytest.raises(InvalidError) as info:
        list(demo.request_stream(Payload(data)))
    assert "decimal count" in info.value.message


@pytest.mark.parametrize(
    ("data", "count"), [(b"", 10), (b"7", 7), (b"007", 7), (b"\t12 ", 12), (b"0", 0)]
)
def test_parse_count(data, count):
    assert parse_count(data) == count


class _Inbound:
    """A stand-in for the RequestStream of a channel's inbound side."""

    def __init__(self, payloads):
        self._payloads = list(payloads)
        self.pulled = 0

    def __aiter__(self):
        return self

    async def __anext__(self):
        if not self._payloads:
            raise StopAsyncIteration
        self.pulled += 1
        return self._payloads.pop(0)


@pytest_twisted.ensureDeferred
async def test_request_channel_echoes_first_then_inbound(demo):
    inbound = _Inbound([Payload(b"b", b"m2"), Payload(b"c")])
    out = demo.request_channel(Payload(b"a", b"m1"), inbound)
    received = [p async for p in out]
    assert received == [Payload(b"a", b"m1"), Payload(b"b", b"m2"), Payload(b"c")]


@pytest_twisted.ensureDeferred
async def test_request_channel_only_first_when_inbound_complete(demo):
    out = demo.request_channel(Payload(b"only"), _Inbound([]))
    assert [p async for p in out] == [Payload(b"only")]


@pytest_twisted.ensureDeferred
async def test_request_channel_pulls_inbound_only_as_consumed(demo):
    inbound = _Inbound([Payload(b"b"), Payload(b"c")])
    out = demo.request_channel(Payload(b"a"), inbound).__aiter__()
    assert await out.__anext__() == Payload(b"a")
    assert inbound.pulled == 0
    assert await out.__anext__() == Payload(b"b")
    assert inbound.pulled == 1


def test_fire_and_forget_is_logged(demo):
    with capturedLogs() as events:
        assert demo.fire_and_forget(Payload(b"log me", b"mm")) is None
    [event] = [e for e in events if "fire-and-forget" in formatEvent(e)]
    assert event["log_level"] == LogLevel.info
    assert "log me" in formatEvent(event)
    assert "mm" in formatEvent(event)


def test_metadata_push_is_logged(demo):
    with capturedLogs() as events:
        assert demo.metadata_push(b"tenant=blue") is None
    [event] = [e for e in events if "metadata-push" in formatEvent(e)]
    assert event["log_level"] == LogLevel.info
    assert "tenant=blue" in formatEvent(event)


def test_accept_setup_accepts_and_logs(demo):
    setup = SetupInfo(
        version=(1, 0),
        keepalive_interval=20_000,
        max_lifetime=90_000,
        metadata_mime_type="text/plain",
        data_mime_type="application/json",
        payload=Payload(),
    )
    with capturedLogs() as events:
        assert demo.accept_setup(setup) is None
    text = " ".join(formatEvent(e) for e in events)
    assert "application/json" in text and "20000 ms" in text and "1.0" in text
