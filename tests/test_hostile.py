"""Hostile input against a real server: a raw TCP client sends bad bytes; the server answers
with the right ERROR frame, drops only that connection, and keeps serving everyone else."""

from __future__ import annotations

import struct

import pytest
import pytest_twisted
from twisted.internet.defer import Deferred
from twisted_support import EchoResponder, wait, wire

from rsocket_tx import ApplicationError, Payload
from rsocket_tx.client import make_setup
from rsocket_tx.core.frames import (
    ErrorFrame,
    FrameType,
    PayloadFrame,
    RequestChannelFrame,
    RequestResponseFrame,
)

aio = pytest_twisted.ensureDeferred

CONNECTION_ERROR = 0x101
INVALID_SETUP = 0x001
INVALID = 0x204
MAX_FRAME = 1024
MAX_REASSEMBLED = 4096


def header(stream_id: int, frame_type: int, flags: int = 0) -> bytes:
    return struct.pack(">IH", stream_id, (frame_type << 10) | flags)


def prefixed(frame: bytes) -> bytes:
    return len(frame).to_bytes(3, "big") + frame


def fragment(stream_id: int, size: int = 100) -> PayloadFrame:
    return PayloadFrame(stream_id=stream_id, data=b"f" * size, follows=True, next=True)


async def setup(harness, responder=EchoResponder):
    """A server with tight limits, a well-behaved client on it, and a raw client."""
    port = await harness.serve(responder, max_frame_size=MAX_FRAME,
                               max_reassembled_size=MAX_REASSEMBLED)
    good = await harness.connect(port)
    assert await wait(good.request_response(Payload(b"hi"))) == Payload(b"hi")
    raw = await harness.raw(port)
    return port, good, raw


async def connection_error(raw, codes) -> ErrorFrame:
    """Wait for the server to drop ``raw``; return the one stream-0 ERROR it sent first."""
    await wait(raw.lost)
    errors = [f for f in raw.frames if isinstance(f, ErrorFrame)]
    assert len(errors) == 1, raw.frames
    (error,) = errors
    assert error.stream_id == 0
    assert error.error_code in codes
    assert error.data.decode("utf-8")  # a reason is given
    assert raw.frames[-1] is error  # nothing after the ERROR
    return error


async def still_serving(harness, port, good, pending) -> None:
    """The other client's in-flight and new requests succeed; new clients are accepted."""
    assert await wait(pending) == Payload(b"during")
    assert await wait(good.request_response(Payload(b"after"))) == Payload(b"after")
    other = await harness.connect(port)
    assert await wait(other.request_response(Payload(b"new"))) == Payload(b"new")


async def dropped_alone(harness, data: bytes, codes) -> ErrorFrame:
    """A raw client sends ``data``: the server drops it with one stream-0 ERROR whose code is
    in ``codes`` (returned), while another client's in-flight and new requests succeed."""
    port, good, raw = await setup(harness)
    raw.send(data)
    pending = good.request_response(Payload(b"during"))
    error = await connection_error(raw, codes)
    await still_serving(harness, port, good, pending)
    return error


@pytest.mark.parametrize("garbage", [
    b"\x00\x00\x04\xde\xad\xbe\xef",  # a frame shorter than the frame header
    b"\x00\x00\x06\xff\xff\xff\xff\x04\x00",  # the reserved bit of the stream id set
    b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",  # length prefix 0x474554 > max frame size
], ids=["short-frame", "reserved-bit", "http"])
@aio
async def test_garbage_before_setup(harness, garbage):
    # spec §Connection Establishment: a first frame that is not a valid SETUP (or RESUME)
    # gets ERROR[INVALID_SETUP]
    await dropped_alone(harness, garbage, {INVALID_SETUP})


@aio
async def test_garbage_after_setup_is_a_connection_error(harness):
    await dropped_alone(harness, wire(make_setup()) + b"\x00\x00\x04\xde\xad\xbe\xef",
                        {CONNECTION_ERROR})


@aio
async def test_request_before_setup_is_invalid_setup(harness):
    error = await dropped_alone(harness, wire(RequestResponseFrame(stream_id=1, data=b"hello")),
                                {INVALID_SETUP})
    assert b"SETUP" in error.data


@pytest.mark.parametrize("after_setup", [False, True])
@aio
async def test_length_prefix_over_max_frame_size(harness, after_setup):
    first = wire(make_setup()) if after_setup else b""
    # only the prefix and a little of the body: the server must not wait for the rest
    too_long = (MAX_FRAME + 1).to_bytes(3, "big") + header(1, FrameType.REQUEST_FNF)
    # before SETUP the first frame's limit (max_setup_frame_size, here max_frame_size) is a
    # refused SETUP; after it a connection error
    await dropped_alone(harness, first + too_long,
                        {CONNECTION_ERROR} if after_setup else {INVALID_SETUP})


@aio
async def test_frame_of_exactly_max_frame_size_is_accepted(harness):
    port, good, raw = await setup(harness)
    body = b"d" * (MAX_FRAME - 6)
    raw.send(wire(make_setup(), RequestResponseFrame(stream_id=1, data=body)))
    reply = await raw.frame(lambda f: f.stream_id == 1)
    assert isinstance(reply, PayloadFrame) and reply.data == body


@aio
async def test_endless_request_fragments_fail_only_that_stream(harness):
    port, good, raw = await setup(harness)
    flood = [fragment(1) for _ in range(100)]  # 10 kB of fragments > 4 kB limit
    raw.send(wire(make_setup(), RequestResponseFrame(stream_id=1, data=b"x" * 100,
                                                     follows=True), *flood))
    pending = good.request_response(Payload(b"during"))
    error = await raw.frame(lambda f: f.stream_id == 1)
    assert isinstance(error, ErrorFrame) and error.error_code == INVALID
    assert error.data
    # the raw connection is still usable; late fragments of the failed stream are ignored
    raw.send(wire(*flood[:5], RequestResponseFrame(stream_id=3, data=b"ok")))
    reply = await raw.frame(lambda f: f.stream_id == 3)
    assert reply == PayloadFrame(stream_id=3, data=b"ok", next=True, complete=True)
    assert [f for f in raw.frames if f.stream_id == 1] == [error]
    assert not raw.lost.called
    assert await wait(pending) == Payload(b"during")


@aio
async def test_endless_channel_payload_fragments_fail_only_that_stream(harness):
    inbound_errors: list = []

    class R(EchoResponder):
        async def request_channel(self, payload, inbound):
            try:
                async for _ in inbound:
                    pass
            except Exception as exc:  # noqa: BLE001
                inbound_errors.append(exc)
            return
            yield

    port, good, raw = await setup(harness, R)
    raw.send(wire(make_setup(), RequestChannelFrame(stream_id=1, initial_request_n=1,
                                                    data=b"c")))
    await raw.frame(lambda f: f.stream_id == 1)  # the responder's REQUEST_N
    raw.send(wire(*[fragment(1) for _ in range(100)]))
    error = await raw.frame(lambda f: isinstance(f, ErrorFrame) and f.stream_id == 1)
    assert error.error_code == INVALID
    raw.send(wire(RequestResponseFrame(stream_id=3, data=b"ok")))
    assert (await raw.frame(lambda f: f.stream_id == 3)).data == b"ok"
    assert len(inbound_errors) == 1
    assert not raw.lost.called
    assert await wait(good.request_response(Payload(b"x"))) == Payload(b"x")


@aio
async def test_unknown_frame_type_without_ignore_flag(harness):
    await dropped_alone(harness, wire(make_setup()) + prefixed(header(0, 0x30) + b"????"),
                        {CONNECTION_ERROR})


@aio
async def test_unknown_frame_type_with_ignore_flag_is_ignored(harness):
    port, good, raw = await setup(harness)
    raw.send(wire(make_setup()) + prefixed(header(0, 0x30, 0x200) + b"????")
             + wire(RequestResponseFrame(stream_id=1, data=b"still here")))
    reply = await raw.frame(lambda f: f.stream_id == 1)
    assert reply.data == b"still here"
    assert not [f for f in raw.frames if isinstance(f, ErrorFrame)]


@aio
async def test_hostile_peer_cannot_break_a_slow_handler_of_another_client(harness):
    """A connection error on one connection leaves other connections' streams untouched."""
    slow = Deferred()

    class R(EchoResponder):
        def request_response(self, payload):
            return slow if payload.data == b"slow" else payload

        def request_stream(self, payload):
            raise ApplicationError("unused")

    port = await harness.serve(R, max_frame_size=MAX_FRAME)
    good = await harness.connect(port)
    pending = good.request_response(Payload(b"slow"))
    raw = await harness.raw(port)
    raw.send(b"\x00\x00\x04\xde\xad\xbe\xef")
    await wait(raw.lost)
    assert not pending.called
    slow.callback(Payload(b"done"))
    assert await wait(pending) == Payload(b"done")
