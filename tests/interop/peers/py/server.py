"""rsocket-py 0.4.20 interop server: the demo responder over TCP.

Usage (run with the project venv's python)::

    python server.py [--port P] [--host 127.0.0.1] [--fragment N] [--completion flag|frame]
                     [--request-n K] [--timeout SECONDS] [--watch-stdin]
                     [--transport tcp|ws] [--path /P] [--ws-library aiohttp|websockets]

Prints ``LISTENING <port>`` once bound, then one JSON event per line (see README.md).
``--fragment N``: rsocket-py ``fragment_size_bytes`` = the whole frame *including* the 3-byte
length prefix, minimum 64 (rsocket-py refuses smaller).  ``--completion``: how streams and
channels end, ``flag`` = C flag on the last PAYLOAD (default), ``frame`` = a separate PAYLOAD with
only C set.  ``--request-n K``: credit batch the channel responder grants the requester.
Stops after ``--timeout`` seconds (default 600) or, with ``--watch-stdin``, at stdin EOF.
``--transport ws``: WebSocket (one frame per binary message) through rsocket-py's aiohttp server
transport at ``--path`` (default ``/``) or, with ``--ws-library websockets``, its websockets
transport (any path).
"""

from __future__ import annotations

import asyncio
import logging
import sys

from peer_common import (
    EXIT_FAILURE,
    EXIT_UNSUPPORTED,
    ChannelFlagServer,
    ChannelResponder,
    ListPublisher,
    describe_payload,
    emit,
    error_requested,
    finish,
    parse_or_fail,
    parse_server_args,
    serve,
    stream_count,
)
from rsocket.error_codes import ErrorCode
from rsocket.exceptions import RSocketProtocolError
from rsocket.helpers import create_future
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler

MINIMUM_FRAGMENT_SIZE = 64  # rsocket.frame_fragmenter: fragment_size_bytes < 64 raises


def payload_event(event: str, data, metadata, **extra) -> None:
    emit({"event": event, **extra, **describe_payload(data, metadata, "both")})


class CountStream(ListPublisher):
    """Publisher of b"0" .. b"N-1" honouring request(n); errors if ``error`` is set."""

    def __init__(self, count: int, completion: str, error: str | None = None):
        super().__init__([Payload(str(i).encode("ascii")) for i in range(count)], completion,
                         error)
        self._count = count
        self._first_request = True

    def request(self, n: int):
        emit({"event": "request_n", "interaction": "request-stream", "n": n,
              "initial": self._first_request})
        self._first_request = False
        super().request(n)

    def cancel(self):
        if not self._done:
            emit({"event": "cancel", "interaction": "request-stream",
                  "sent": self._count - len(self._payloads)})
        super().cancel()


class EchoChannel(ChannelResponder):
    """Responder side of the echo channel: echoes every payload (README.md, the demo
    responders)."""

    def __init__(self, first: Payload, initial_complete: bool, completion: str, batch: int,
                 error: str | None):
        super().__init__(first, initial_complete, completion, batch, error,
                         labels={"interaction": "request-channel"})

    def _answer(self, value: Payload, is_complete: bool) -> Payload:
        payload_event("channel_next", value.data, value.metadata, complete=is_complete)
        return Payload(value.data, value.metadata)


class DemoHandler(BaseRequestHandler):
    completion = "flag"
    batch = 256
    initial_complete = False  # set by ChannelFlagServer for the REQUEST_CHANNEL being handled

    async def on_setup(self, data_encoding: bytes, metadata_encoding: bytes, payload: Payload):
        # reported by DemoServer.handle_setup, which sees the whole frame
        data = bytes(payload.data or b"")
        if data.startswith(b"reject:"):
            message = data[len(b"reject:"):].decode("utf-8", "replace")
            emit({"event": "setup_rejected", "message": message})
            raise RuntimeError(message)  # rsocket-py answers ERROR[REJECTED_SETUP] with it

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


class DemoServer(ChannelFlagServer):
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


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    args = parse_or_fail(parse_server_args, argv)
    if args.fragment is not None and args.fragment < MINIMUM_FRAGMENT_SIZE:
        finish(EXIT_UNSUPPORTED, {"unsupported": (
            f"rsocket-py cannot fragment below {MINIMUM_FRAGMENT_SIZE} bytes per frame "
            "(fragment size counts the whole frame including the 3-byte length prefix)")})
    DemoHandler.completion = args.completion
    DemoHandler.batch = args.request_n
    asyncio.run(serve(args, lambda transport: DemoServer(
        transport,
        handler_factory=DemoHandler,
        fragment_size_bytes=args.fragment,
    )))


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except RSocketProtocolError as exc:  # pragma: no cover - defensive
        finish(EXIT_FAILURE, {"failure": str(exc)})
