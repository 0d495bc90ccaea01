"""rsocket-py 0.4.20 interop server: the demo responder over TCP.

Usage (run with the project venv's python)::

    python server.py [--port P] [--host 127.0.0.1] [--fragment N] [--completion flag|frame]
                     [--request-n K] [--timeout SECONDS] [--watch-stdin]

Prints ``LISTENING <port>`` once bound, then one JSON event per line (see README.md).
``--fragment N``: rsocket-py ``fragment_size_bytes`` = the whole frame *including* the 3-byte
length prefix, minimum 64 (rsocket-py refuses smaller).  ``--completion``: how streams and
channels end, ``flag`` = C flag on the last PAYLOAD (default), ``frame`` = a separate PAYLOAD with
only C set.  ``--request-n K``: credit batch the channel responder grants the requester.
Stops after ``--timeout`` seconds (default 600) or, with ``--watch-stdin``, at stdin EOF.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import threading

from peer_common import (
    EXIT_FAILURE,
    EXIT_UNSUPPORTED,
    UsageError,
    describe_payload,
    emit,
    error_requested,
    finish,
    parse_server_args,
    stream_count,
)
from reactivestreams.publisher import Publisher
from reactivestreams.subscriber import Subscriber
from reactivestreams.subscription import Subscription
from rsocket.error_codes import ErrorCode
from rsocket.exceptions import RSocketProtocolError
from rsocket.helpers import create_future
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.rsocket_server import RSocketServer
from rsocket.transports.tcp import TransportTCP

MINIMUM_FRAGMENT_SIZE = 64  # rsocket.frame_fragmenter: fragment_size_bytes < 64 raises


def payload_event(event: str, data, metadata, **extra) -> None:
    emit({"event": event, **extra, **describe_payload(data, metadata, "both")})


class CountStream(Publisher, Subscription):
    """Publisher of b"0" .. b"N-1" honouring request(n); errors if ``error`` is set."""

    def __init__(self, count: int, completion: str, error: str | None = None):
        self._count = count
        self._completion = completion
        self._error = error
        self._next = 0
        self._demand = 0
        self._done = False
        self._first_request = True
        self._subscriber: Subscriber | None = None

    def subscribe(self, subscriber: Subscriber):
        self._subscriber = subscriber
        subscriber.on_subscribe(self)

    def request(self, n: int):
        emit({"event": "request_n", "interaction": "request-stream", "n": n,
              "initial": self._first_request})
        self._first_request = False
        self._demand += n
        self._drain()

    def cancel(self):
        if not self._done:
            self._done = True
            emit({"event": "cancel", "interaction": "request-stream", "sent": self._next})

    def _drain(self):
        if self._done:
            return
        if self._error is not None:
            self._done = True
            self._subscriber.on_error(RuntimeError(self._error))
            return
        while self._demand > 0 and self._next < self._count and not self._done:
            last = self._next == self._count - 1
            payload = Payload(str(self._next).encode("ascii"))
            self._next += 1
            self._demand -= 1
            if last and self._completion == "flag":
                self._done = True
                self._subscriber.on_next(payload, is_complete=True)
                return
            self._subscriber.on_next(payload)
        if self._next >= self._count and not self._done:
            self._done = True
            self._subscriber.on_complete()


class EchoChannel(Publisher, Subscription, Subscriber):
    """Responder side of the echo channel.

    As Publisher/Subscription it is the outbound side (the requester's credit arrives in
    request(n)); as Subscriber it receives the inbound payloads after the first one.
    """

    def __init__(self, first: Payload, initial_complete: bool, completion: str, batch: int,
                 error: str | None):
        self._initial_complete = initial_complete  # C on REQUEST_CHANNEL
        self._queue: list[tuple[Payload, bool]] = (
            [] if error else [(first, initial_complete and completion == "flag")])
        self._completion = completion
        self._batch = batch
        self._error = error
        self._demand = 0
        self._received_since_request = 0
        self._inbound: Subscription | None = None
        self._inbound_done = False
        self._done = False
        self._outbound: Subscriber | None = None
        self._first_request = True

    # outbound -------------------------------------------------------------------------
    def subscribe(self, subscriber: Subscriber):
        self._outbound = subscriber
        subscriber.on_subscribe(self)

    def request(self, n: int):
        emit({"event": "request_n", "interaction": "request-channel", "n": n,
              "initial": self._first_request})
        self._first_request = False
        self._demand += n
        self._drain()

    def cancel(self):
        if not self._done:
            self._done = True
            emit({"event": "cancel", "interaction": "request-channel"})

    def _drain(self):
        if self._done or self._outbound is None:
            return
        if self._error is not None:
            self._done = True
            self._outbound.on_error(RuntimeError(self._error))
            return
        while self._demand > 0 and self._queue:
            payload, last = self._queue.pop(0)
            self._demand -= 1
            if last:
                self._done = True
                self._outbound.on_next(payload, is_complete=True)
                return
            self._outbound.on_next(payload)
        if self._inbound_done and not self._queue:
            self._done = True
            self._outbound.on_complete()

    # inbound --------------------------------------------------------------------------
    def on_subscribe(self, subscription: Subscription):
        self._inbound = subscription
        if not self._initial_complete and self._error is None:
            self._inbound.request(self._batch)

    def on_next(self, value: Payload, is_complete=False):
        payload_event("channel_next", value.data, value.metadata, complete=is_complete)
        if is_complete:
            self._inbound_done = True
            emit({"event": "channel_inbound_complete", "form": "flag"})
        self._queue.append((Payload(value.data, value.metadata),
                            is_complete and self._completion == "flag"))
        self._received_since_request += 1
        if not is_complete and self._received_since_request >= self._batch:
            self._received_since_request = 0
            self._inbound.request(self._batch)
        self._drain()

    def on_error(self, exception: Exception):
        self._inbound_done = True
        self._done = True
        emit({"event": "channel_inbound_error", "message": str(exception)})

    def on_complete(self):
        if not self._inbound_done:
            form = "request" if self._initial_complete else "frame"
            emit({"event": "channel_inbound_complete", "form": form})
        self._inbound_done = True
        self._drain()


class DemoHandler(BaseRequestHandler):
    completion = "flag"
    batch = 256
    initial_complete = False  # set by DemoServer.handle_request_channel for the next channel

    async def on_setup(self, data_encoding: bytes, metadata_encoding: bytes, payload: Payload):
        pass  # reported by DemoServer.handle_setup, which sees the whole frame

    async def request_response(self, payload: Payload):
        payload_event("request", payload.data, payload.metadata, interaction="request-response")
        future = create_future()
        error = error_requested(payload.data)
        if error is not None:
            future.set_exception(RuntimeError(error))
        else:
            future.set_result(Payload(payload.data, payload.metadata))
        return future

    async def request_fire_and_forget(self, payload: Payload):
        payload_event("fnf", payload.data, payload.metadata)

    async def on_metadata_push(self, payload: Payload):
        described = describe_payload(b"", bytes(payload.metadata or b""), "both")
        emit({"event": "metadata_push",
              **{k: v for k, v in described.items() if k.startswith("metadata")}})

    async def request_stream(self, payload: Payload):
        payload_event("request", payload.data, payload.metadata, interaction="request-stream")
        error = error_requested(payload.data)
        if error is not None:
            return CountStream(0, self.completion, error=error)
        try:
            count = stream_count(payload.data)
        except ValueError as exc:
            return CountStream(0, self.completion, error=str(exc))
        return CountStream(count, self.completion)

    async def request_channel(self, payload: Payload):
        payload_event("request", payload.data, payload.metadata, interaction="request-channel",
                      complete=self.initial_complete)
        channel = EchoChannel(payload, self.initial_complete, self.completion, self.batch,
                              error_requested(payload.data))
        return channel, channel

    async def on_error(self, error_code: ErrorCode, payload: Payload):
        emit({"event": "error", "code": int(error_code),
              "message": bytes(payload.data or b"").decode("utf-8", "replace")})


class DemoServer(RSocketServer):
    async def handle_request_channel(self, frame):
        # the handler API does not say whether REQUEST_CHANNEL carried C
        self._handler.initial_complete = bool(frame.flags_complete)
        await super().handle_request_channel(frame)

    async def handle_setup(self, frame):
        emit({
            "event": "setup",
            "version": [frame.major_version, frame.minor_version],
            "keepalive": frame.keep_alive_milliseconds,
            "lifetime": frame.max_lifetime_milliseconds,
            "data_mime_type": _text(frame.data_encoding),
            "metadata_mime_type": _text(frame.metadata_encoding),
            "lease": bool(frame.flags_lease),
            "resume": bool(frame.flags_resume),
            **describe_payload(frame.data, frame.metadata, "both"),
        })
        await super().handle_setup(frame)


def _text(value) -> str:
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("ascii", "replace")
    return str(value)


async def serve(args) -> None:
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    connections = []

    def on_connection(reader, writer):
        connections.append(DemoServer(
            TransportTCP(reader, writer),
            handler_factory=DemoHandler,
            fragment_size_bytes=args.fragment,
        ))

    server = await asyncio.start_server(on_connection, args.host, args.port)
    port = server.sockets[0].getsockname()[1]
    print(f"LISTENING {port}", flush=True)

    if args.watch_stdin:
        def watch():
            sys.stdin.buffer.read()  # returns at EOF
            loop.call_soon_threadsafe(lambda: stop.done() or stop.set_result("stdin closed"))
        threading.Thread(target=watch, daemon=True).start()
    loop.call_later(args.timeout, lambda: stop.done() or stop.set_result("timeout"))
    reason = await stop
    emit({"event": "stopping", "reason": reason})
    server.close()
    for connection in connections:
        try:
            await asyncio.wait_for(connection.close(), 2)
        except Exception:  # noqa: BLE001 - best effort on shutdown
            pass


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    try:
        args = parse_server_args(argv)
    except UsageError as exc:
        finish(EXIT_FAILURE, {"failure": f"usage: {exc}"})
    if args.fragment is not None and args.fragment < MINIMUM_FRAGMENT_SIZE:
        finish(EXIT_UNSUPPORTED, {"unsupported": (
            f"rsocket-py cannot fragment below {MINIMUM_FRAGMENT_SIZE} bytes per frame "
            "(fragment size counts the whole frame including the 3-byte length prefix)")})
    DemoHandler.completion = args.completion
    DemoHandler.batch = args.request_n
    asyncio.run(serve(args))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except RSocketProtocolError as exc:  # pragma: no cover - defensive
        finish(EXIT_FAILURE, {"failure": str(exc)})
