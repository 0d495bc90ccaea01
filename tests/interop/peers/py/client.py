"""rsocket-py 0.4.20 interop client: runs ONE interaction and prints the result as JSON.

Usage (run with the project venv's python)::

    python client.py INTERACTION --port P [--host 127.0.0.1]
        [--data S | --data-b64 B | --data-size N] [--metadata S | --metadata-b64 B |
        --metadata-size N] [--request-n K] [--take M] [--count N] [--fragment N]
        [--completion flag|frame] [--digest] [--timeout SECONDS] [--keepalive MS] [--lifetime MS]
        [--setup-data S] [--setup-metadata S]

INTERACTION is request-response, fire-and-forget, metadata-push, request-stream or
request-channel.  Exit codes: 0 success, 1 the peer sent an RSocket ERROR (JSON
``{"error": {"code", "message"}}``), 2 local failure/timeout (``{"failure": ...}``),
3 unsupported by this peer (``{"unsupported": ...}``).  See ``tests/interop/peers.py``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from datetime import timedelta

from peer_common import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_RSOCKET_ERROR,
    EXIT_UNSUPPORTED,
    UsageError,
    describe_payload,
    finish,
    parse_client_args,
    payload_from_args,
)
from reactivestreams.publisher import Publisher
from reactivestreams.subscriber import Subscriber
from reactivestreams.subscription import Subscription
from rsocket.error_codes import ErrorCode
from rsocket.exceptions import RSocketProtocolError
from rsocket.helpers import single_transport_provider
from rsocket.payload import Payload
from rsocket.rsocket_client import RSocketClient
from rsocket.transports.tcp import TransportTCP

MINIMUM_FRAGMENT_SIZE = 64
OCTET_STREAM = b"application/octet-stream"


class PeerError(Exception):
    """An ERROR frame from the peer, as rsocket-py reports it."""

    def __init__(self, code: int, message: str):
        super().__init__(code, message)
        self.code = code
        self.message = message


def to_peer_error(exc: BaseException) -> PeerError | None:
    """rsocket-py raises RuntimeError(message) for APPLICATION_ERROR, RSocketProtocolError
    (error_code, data) for every other code."""
    if isinstance(exc, RSocketProtocolError):
        return PeerError(int(exc.error_code), exc.data or "")
    if type(exc) is RuntimeError:
        return PeerError(int(ErrorCode.APPLICATION_ERROR), str(exc))
    return None


class Collector(Subscriber):
    """Collects a stream/channel, requesting ``batch`` at a time, cancelling after ``take``."""

    def __init__(self, batch: int, take: int | None, mode: str):
        self.batch = batch
        self.take = take
        self.mode = mode
        self.payloads: list[dict] = []
        self.since_request = 0
        self.subscription: Subscription | None = None
        self.done: asyncio.Future = asyncio.get_running_loop().create_future()
        self.completed = False
        self.cancelled = False

    def on_subscribe(self, subscription: Subscription):
        self.subscription = subscription

    def on_next(self, value: Payload, is_complete=False):
        if self.done.done():
            return
        self.payloads.append(describe_payload(value.data, value.metadata, self.mode))
        self.since_request += 1
        if is_complete:
            self.completed = True
            self.done.set_result(None)
        elif self.take is not None and len(self.payloads) >= self.take:
            self.cancelled = True
            self.subscription.cancel()
            self.done.set_result(None)
        elif self.since_request >= self.batch:
            self.since_request = 0
            self.subscription.request(self.batch)

    def on_error(self, exception: Exception):
        if not self.done.done():
            self.done.set_exception(exception)

    def on_complete(self):
        if not self.done.done():
            self.completed = True
            self.done.set_result(None)


class Outbound(Publisher, Subscription):
    """The requester's channel payloads b"1" .. b"count-1" (b"0" is in REQUEST_CHANNEL)."""

    def __init__(self, count: int, metadata: bytes | None, completion: str):
        self._next = 1
        self._count = count
        self._metadata = metadata
        self._completion = completion
        self._done = False
        self._subscriber: Subscriber | None = None

    def subscribe(self, subscriber: Subscriber):
        self._subscriber = subscriber
        subscriber.on_subscribe(self)
        if self._count == 1:
            # frame completion with nothing left to send; must follow REQUEST_CHANNEL, which
            # rsocket-py queues right after this subscribe() returns
            asyncio.get_running_loop().call_soon(self._complete)

    def _complete(self):
        if not self._done:
            self._done = True
            self._subscriber.on_complete()

    def request(self, n: int):
        while n > 0 and self._next < self._count and not self._done:
            last = self._next == self._count - 1
            payload = Payload(str(self._next).encode("ascii"), self._metadata)
            self._next += 1
            n -= 1
            if last and self._completion == "flag":
                self._done = True
                self._subscriber.on_next(payload, is_complete=True)
                return
            self._subscriber.on_next(payload)
        if self._next >= self._count:
            self._complete()

    def cancel(self):
        self._done = True


def setup_payload(args) -> Payload | None:
    if args.setup_data is None and args.setup_metadata is None:
        return None
    return Payload((args.setup_data or "").encode("utf-8"),
                   None if args.setup_metadata is None else args.setup_metadata.encode("utf-8"))


async def run(args) -> tuple[int, dict]:
    data, metadata = payload_from_args(args)
    reader, writer = await asyncio.open_connection(args.host, args.port)
    client = RSocketClient(
        single_transport_provider(TransportTCP(reader, writer)),
        data_encoding=OCTET_STREAM,
        metadata_encoding=OCTET_STREAM,
        keep_alive_period=timedelta(milliseconds=args.keepalive),
        max_lifetime_period=timedelta(milliseconds=args.lifetime),
        fragment_size_bytes=args.fragment,
        setup_payload=setup_payload(args),
    )
    result: dict = {"peer": "rsocket-py", "interaction": args.interaction}
    async with client:
        collector = None
        try:
            if args.interaction == "request-response":
                response = await client.request_response(Payload(data, metadata))
                result["payload"] = describe_payload(response.data, response.metadata, args.mode)
            elif args.interaction == "fire-and-forget":
                await client.fire_and_forget(Payload(data, metadata))
                result["sent"] = True
            elif args.interaction == "metadata-push":
                await client.metadata_push(metadata if metadata is not None else b"")
                result["sent"] = True
            elif args.interaction == "request-stream":
                collector = Collector(args.request_n, args.take, args.mode)
                client.request_stream(Payload(data, metadata)) \
                    .initial_request_n(args.request_n).subscribe(collector)
                await collector.done
            else:
                collector = Collector(args.request_n, args.take, args.mode)
                first = Payload(b"0", metadata)
                outbound = None
                if args.count > 1 or args.completion == "frame":
                    outbound = Outbound(args.count, metadata, args.completion)
                client.request_channel(first, outbound) \
                    .initial_request_n(args.request_n).subscribe(collector)
                await collector.done
        except Exception as exc:  # noqa: BLE001 - classify below
            error = to_peer_error(exc)
            if error is None:
                raise
            result["error"] = {"code": error.code, "message": error.message}
            if collector is not None:
                result["payloads"] = collector.payloads
            return EXIT_RSOCKET_ERROR, result
        if collector is not None:
            result["payloads"] = collector.payloads
            result["completed"] = collector.completed
            result["cancelled"] = collector.cancelled
    return EXIT_OK, result


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    try:
        args = parse_client_args(argv)
    except UsageError as exc:
        finish(EXIT_FAILURE, {"failure": f"usage: {exc}"})
    if args.fragment is not None and args.fragment < MINIMUM_FRAGMENT_SIZE:
        finish(EXIT_UNSUPPORTED, {"unsupported": (
            f"rsocket-py cannot fragment below {MINIMUM_FRAGMENT_SIZE} bytes per frame "
            "(fragment size counts the whole frame including the 3-byte length prefix)")})

    async def bounded():
        return await asyncio.wait_for(run(args), args.timeout)

    try:
        code, result = asyncio.run(bounded())
    except TimeoutError:
        finish(EXIT_FAILURE, {"failure": f"timeout after {args.timeout}s"})
    except OSError as exc:
        finish(EXIT_FAILURE, {"failure": f"connection failed: {exc}"})
    except Exception as exc:  # noqa: BLE001
        finish(EXIT_FAILURE, {"failure": f"{type(exc).__name__}: {exc}"})
    finish(code, result)


if __name__ == "__main__":
    main(sys.argv[1:])
