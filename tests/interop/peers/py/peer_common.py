"""Shared helpers of the rsocket-py interop peer scripts (server.py, client.py and the routing
peers routing_server.py, routing_client.py).

Mirrors ``../common.js``: same command line, same JSON output, same demo responder rules.
The formats are documented in ``tests/interop/peers.py`` and ``README.md``.  The last part
holds the rsocket-py pieces the programs share: the TCP server loop, the client's bounded run,
one requester interaction, the collecting subscriber and the list publisher.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import json
import sys
import threading

from reactivestreams.publisher import Publisher
from reactivestreams.subscriber import Subscriber
from reactivestreams.subscription import Subscription
from rsocket.error_codes import ErrorCode
from rsocket.exceptions import RSocketProtocolError
from rsocket.payload import Payload
from rsocket.rsocket_server import RSocketServer

HOST = "127.0.0.1"
MAX_REQUEST_N = 2_147_483_647

EXIT_OK = 0
EXIT_RSOCKET_ERROR = 1
EXIT_FAILURE = 2
EXIT_UNSUPPORTED = 3

INTERACTIONS = (
    "request-response",
    "fire-and-forget",
    "metadata-push",
    "request-stream",
    "request-channel",
)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and exit 2 with text output
        raise UsageError(message)


def emit(obj: dict) -> None:
    """Write one JSON line to stdout and flush it."""
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def finish(code: int, obj: dict | None = None):
    if obj is not None:
        emit(obj)
    sys.stdout.flush()
    raise SystemExit(code)


def pattern(n: int) -> bytes:
    """The repeated pattern of --data-size/--metadata-size: byte i is i % 256."""
    return bytes(range(256)) * (n // 256) + bytes(range(n % 256))


def describe_payload(data: bytes | None, metadata: bytes | None, mode: str) -> dict:
    """JSON form of a payload; mode is "full", "digest" or "both" (see common.js)."""
    data = bytes(data or b"")
    out: dict = {}
    if mode != "digest":
        out["data"] = base64.b64encode(data).decode("ascii")
        out["metadata"] = None if metadata is None else base64.b64encode(metadata).decode("ascii")
    if mode != "full":
        out["data_len"] = len(data)
        out["data_sha256"] = hashlib.sha256(data).hexdigest()
        out["metadata_len"] = None if metadata is None else len(metadata)
        out["metadata_sha256"] = (
            None if metadata is None else hashlib.sha256(bytes(metadata)).hexdigest()
        )
    return out


def error_requested(data: bytes | None) -> str | None:
    """The application error message if data starts with ``error:``, else None."""
    data = bytes(data or b"")
    if data.startswith(b"error:"):
        return data[len(b"error:"):].decode("utf-8", "replace")
    return None


def stream_count(data: bytes | None) -> int:
    """Request-stream count: decimal data, 10 if empty; ValueError otherwise."""
    text = bytes(data or b"").decode("latin-1")
    if text == "":
        return 10
    if not text.isdigit():
        raise ValueError(f"request-stream data must be a decimal count, got {text!r}")
    return int(text)


def _add_payload_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--data")
    group.add_argument("--data-b64")
    group.add_argument("--data-size", type=int)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--metadata")
    group.add_argument("--metadata-b64")
    group.add_argument("--metadata-size", type=int)


def parse_client_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="client.py", add_help=False)
    parser.add_argument("interaction", choices=INTERACTIONS)
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, required=True)
    _add_payload_options(parser)
    parser.add_argument("--request-n", type=int, default=MAX_REQUEST_N)
    parser.add_argument("--take", type=int)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--fragment", type=int)
    parser.add_argument("--completion", choices=("flag", "frame"), default="flag")
    parser.add_argument("--digest", action="store_true")
    parser.add_argument("--timeout", type=int, default=30)
    parser.add_argument("--keepalive", type=int, default=20_000)
    parser.add_argument("--lifetime", type=int, default=90_000)
    parser.add_argument("--setup-data")
    parser.add_argument("--setup-metadata")
    _add_transport_options(parser)
    args = parser.parse_args(argv)
    if args.count < 1:
        raise UsageError("--count must be >= 1 (the first payload travels in REQUEST_CHANNEL)")
    args.mode = (
        "digest"
        if args.digest or args.data_size is not None or args.metadata_size is not None
        else "full"
    )
    return args


def parse_server_args(argv: list[str]) -> argparse.Namespace:
    parser = _Parser(prog="server.py", add_help=False)
    parser.add_argument("--host", default=HOST)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--fragment", type=int)
    parser.add_argument("--completion", choices=("flag", "frame"), default="flag")
    parser.add_argument("--request-n", type=int, default=256)
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--watch-stdin", action="store_true")
    _add_transport_options(parser)
    return parser.parse_args(argv)


def _add_transport_options(parser: argparse.ArgumentParser) -> None:
    """``--transport tcp|ws`` (default tcp), ``--path`` (WebSocket URL path, default ``/``),
    ``--ws-library aiohttp|websockets`` (which rsocket-py WebSocket transport, default
    aiohttp)."""
    parser.add_argument("--transport", choices=("tcp", "ws"), default="tcp")
    parser.add_argument("--path", default="/")
    parser.add_argument("--ws-library", choices=("aiohttp", "websockets"), default="aiohttp")


def payload_from_args(args: argparse.Namespace) -> tuple[bytes, bytes | None]:
    if args.data_size is not None:
        data = pattern(args.data_size)
    elif args.data_b64 is not None:
        data = base64.b64decode(args.data_b64)
    else:
        data = (args.data or "").encode("utf-8")
    if args.metadata_size is not None:
        metadata: bytes | None = pattern(args.metadata_size)
    elif args.metadata_b64 is not None:
        metadata = base64.b64decode(args.metadata_b64)
    elif args.metadata is not None:
        metadata = args.metadata.encode("utf-8")
    else:
        metadata = None
    return data, metadata


# ---------------------------------------------------------------------------------------------
# rsocket-py pieces shared by the programs
# ---------------------------------------------------------------------------------------------

def parse_or_fail(parse, argv: list[str], errors: tuple = (UsageError,)):
    """``parse(argv)``; one of ``errors`` finishes with EXIT_FAILURE ``usage: ...``."""
    try:
        return parse(argv)
    except errors as exc:
        finish(EXIT_FAILURE, {"failure": f"usage: {exc}"})


async def serve_tcp(args: argparse.Namespace, make_connection) -> None:
    """Listen on ``args.host``:``args.port``, print ``LISTENING <port>`` and serve every
    connection with ``make_connection(reader, writer)`` (an RSocketServer).  Stops after
    ``args.timeout`` seconds or, with ``args.watch_stdin``, at stdin EOF: emits ``stopping``
    and closes the listener and (best effort) every connection."""
    connections = []

    def on_connection(reader, writer):
        connections.append(make_connection(reader, writer))

    server = await asyncio.start_server(on_connection, args.host, args.port)
    print(f"LISTENING {server.sockets[0].getsockname()[1]}", flush=True)
    await _until_stopped(args)
    server.close()
    await _close_all(connections)


async def serve(args: argparse.Namespace, make_server) -> None:
    """:func:`serve_tcp` for every ``--transport``: ``make_server(transport)`` builds the
    RSocketServer of one connection from an rsocket-py transport.

    * ``tcp``: ``TransportTCP`` (asyncio streams);
    * ``ws`` + ``--ws-library aiohttp``: an aiohttp web application answering WebSocket
      upgrades at ``--path`` (404 elsewhere), ``TransportAioHttpWebsocket``;
    * ``ws`` + ``--ws-library websockets``: ``websockets.serve`` (any path),
      ``WebsocketsTransport``.

    The WebSocket servers accept messages of any size (the libraries' defaults: aiohttp
    4 MiB, websockets 1 MiB, would refuse our 16 MiB frames) and keep their other defaults.
    """
    if args.transport == "tcp":
        from rsocket.transports.tcp import TransportTCP
        await serve_tcp(args, lambda reader, writer: make_server(TransportTCP(reader, writer)))
        return
    connections = []
    if args.ws_library == "aiohttp":
        from aiohttp import web
        from rsocket.transports.aiohttp_websocket import TransportAioHttpWebsocket

        async def handler(request):
            ws = web.WebSocketResponse(max_msg_size=0)  # 0: no limit
            await ws.prepare(request)
            transport = TransportAioHttpWebsocket(ws)
            connections.append(make_server(transport))
            await transport.handle_incoming_ws_messages()
            return ws

        app = web.Application()
        app.router.add_get(args.path, handler)
        runner = web.AppRunner(app, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, args.host, args.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        print(f"LISTENING {port}", flush=True)
        await _until_stopped(args)
        await _close_all(connections)
        await runner.cleanup()
    else:
        import websockets
        from rsocket.transports.websockets_transport import WebsocketsTransport

        async def ws_handler(websocket):
            transport = WebsocketsTransport()
            connections.append(make_server(transport))
            await transport.handler(websocket)

        server = await websockets.serve(ws_handler, args.host, args.port, max_size=None)
        port = next(iter(server.sockets)).getsockname()[1]
        print(f"LISTENING {port}", flush=True)
        await _until_stopped(args)
        server.close()
        await _close_all(connections)


async def _until_stopped(args: argparse.Namespace) -> None:
    """Wait for ``args.timeout`` seconds or, with ``args.watch_stdin``, stdin EOF; then emit
    ``stopping``."""
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    if args.watch_stdin:
        def watch():
            sys.stdin.buffer.read()  # returns at EOF
            loop.call_soon_threadsafe(lambda: stop.done() or stop.set_result("stdin closed"))
        threading.Thread(target=watch, daemon=True).start()
    loop.call_later(args.timeout, lambda: stop.done() or stop.set_result("timeout"))
    reason = await stop
    emit({"event": "stopping", "reason": reason})


async def _close_all(connections) -> None:
    for connection in connections:
        try:
            await asyncio.wait_for(connection.close(), 2)
        except Exception:  # noqa: BLE001 - best effort on shutdown
            pass


def ws_url(args: argparse.Namespace) -> str:
    """``ws://host:port/path`` of a client's ``--host``/``--port``/``--path``."""
    path = args.path if args.path.startswith("/") else "/" + args.path
    return f"ws://{args.host}:{args.port}{path}"


async def open_client_transport(args: argparse.Namespace):
    """Connect for ``args.transport`` and return ``(transport, close)``: an rsocket-py
    transport for ``RSocketClient`` and a coroutine function closing what was opened (call it
    after the client is closed).

    * ``tcp``: ``TransportTCP`` over ``asyncio.open_connection``;
    * ``ws`` + aiohttp: ``TransportAioHttpClient`` over our own ``ClientSession.ws_connect``
      (so that ``max_msg_size`` can be lifted; the transport then leaves the socket to us);
    * ``ws`` + websockets: ``WebsocketsTransport`` whose ``handler`` runs in a task on a
      ``websockets.connect`` connection (``max_size=None``).

    :raises OSError: the connection failed.
    """
    if args.transport == "tcp":
        from rsocket.transports.tcp import TransportTCP
        reader, writer = await asyncio.open_connection(args.host, args.port)

        async def close_tcp():
            pass
        return TransportTCP(reader, writer), close_tcp
    url = ws_url(args)
    if args.ws_library == "aiohttp":
        import aiohttp
        from rsocket.transports.aiohttp_websocket import TransportAioHttpClient
        session = aiohttp.ClientSession()
        try:
            ws = await session.ws_connect(url, max_msg_size=0)
        except aiohttp.ClientError as exc:
            await session.close()
            raise OSError(f"WebSocket connection to {url} failed: {exc}") from exc

        async def close_aiohttp():
            await ws.close()
            await session.close()
        return TransportAioHttpClient(websocket=ws), close_aiohttp
    import websockets
    from rsocket.transports.websockets_transport import WebsocketsTransport
    try:
        ws = await websockets.connect(url, max_size=None)
    except websockets.exceptions.WebSocketException as exc:
        raise OSError(f"WebSocket connection to {url} failed: {exc}") from exc
    transport = WebsocketsTransport()
    task = asyncio.create_task(transport.handler(ws))

    async def close_websockets():
        # WebsocketsTransport queues outbound frames for its producer task: let it write them
        for _ in range(200):
            if transport._outgoing_frame_queue.empty():
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)
        task.cancel()
        await ws.close()
    return transport, close_websockets


class ChannelFlagServer(RSocketServer):
    """RSocketServer telling its handler (``initial_complete``) whether the REQUEST_CHANNEL
    being handled carried C: the handler API does not say."""

    async def handle_request_channel(self, frame):
        self._handler.initial_complete = bool(frame.flags_complete)
        await super().handle_request_channel(frame)


def run_client(run, args: argparse.Namespace) -> None:
    """Finish with the ``(code, result)`` of ``await run(args)``, given ``args.timeout``
    seconds; a timeout, a connection failure or another exception finishes with
    EXIT_FAILURE."""

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


def error_of(exc: BaseException) -> dict | None:
    """``{"code", "message"}`` of an ERROR from the peer, None for any other exception.

    rsocket-py raises RuntimeError(message) for APPLICATION_ERROR, RSocketProtocolError
    (error_code, data) for every other code."""
    if isinstance(exc, RSocketProtocolError):
        return {"code": int(exc.error_code), "message": exc.data or ""}
    if type(exc) is RuntimeError:
        return {"code": int(ErrorCode.APPLICATION_ERROR), "message": str(exc)}
    return None


class Collector(Subscriber):
    """Collects a stream/channel as ``describe(payload)`` dicts, requesting ``batch`` at a
    time, cancelling after ``take``."""

    def __init__(self, batch: int, take: int | None, describe):
        self.batch = batch
        self.take = take
        self.describe = describe
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
        self.payloads.append(self.describe(value))
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


async def run_interaction(client, args: argparse.Namespace, payload: Payload, describe,
                          outbound: Publisher | None = None) -> tuple[int, dict]:
    """Run ``args.interaction`` on ``client`` with ``payload`` (the first channel payload, or
    the METADATA_PUSH metadata), ``outbound`` the channel payloads after it.  Streams and
    channels request ``args.request_n`` at a time and cancel after ``args.take``; payloads
    are reported as ``describe(payload)``.

    :returns: ``(EXIT_OK, {payload | sent | payloads, completed, cancelled})`` or
        ``(EXIT_RSOCKET_ERROR, {error, payloads (streams)})`` when the peer sent ERROR.
    """
    result: dict = {}
    collector = None
    try:
        if args.interaction == "request-response":
            response = await client.request_response(payload)
            result["payload"] = describe(response)
        elif args.interaction == "fire-and-forget":
            await client.fire_and_forget(payload)
            result["sent"] = True
        elif args.interaction == "metadata-push":
            await client.metadata_push(payload.metadata if payload.metadata is not None else b"")
            result["sent"] = True
        else:
            collector = Collector(args.request_n, args.take, describe)
            if args.interaction == "request-stream":
                requester = client.request_stream(payload)
            else:
                requester = client.request_channel(payload, outbound)
            requester.initial_request_n(args.request_n).subscribe(collector)
            await collector.done
    except Exception as exc:  # noqa: BLE001 - classify below
        error = error_of(exc)
        if error is None:
            raise
        result["error"] = error
        if collector is not None:
            result["payloads"] = collector.payloads
        return EXIT_RSOCKET_ERROR, result
    if collector is not None:
        result["payloads"] = collector.payloads
        result["completed"] = collector.completed
        result["cancelled"] = collector.cancelled
    return EXIT_OK, result


class ListPublisher(Publisher, Subscription):
    """Sends ``payloads`` as credit arrives.  ``completion`` "flag": C on the last PAYLOAD;
    "frame": a separate completion once the last one has gone, needing no credit.  With
    ``error``, the first request(n) fails it with that message instead."""

    def __init__(self, payloads: list[Payload], completion: str = "flag",
                 error: str | None = None):
        self._payloads = list(payloads)
        self._completion = completion
        self._error = error
        self._done = False
        self._subscriber: Subscriber | None = None

    def subscribe(self, subscriber: Subscriber):
        self._subscriber = subscriber
        subscriber.on_subscribe(self)

    def _complete(self):
        if not self._done:
            self._done = True
            self._subscriber.on_complete()

    def request(self, n: int):
        if self._error is not None:
            if not self._done:
                self._done = True
                self._subscriber.on_error(RuntimeError(self._error))
            return
        while n > 0 and self._payloads and not self._done:
            payload = self._payloads.pop(0)
            n -= 1
            if not self._payloads and self._completion == "flag":
                self._done = True
                self._subscriber.on_next(payload, is_complete=True)
                return
            self._subscriber.on_next(payload)
        if not self._payloads:
            self._complete()

    def cancel(self):
        self._done = True


class ChannelResponder(Publisher, Subscription, Subscriber):
    """Responder side of an echo channel: answers every inbound payload, the first one (from
    REQUEST_CHANNEL) included, following the requester's credit.

    As Publisher/Subscription it is the outbound side (the requester's credit arrives in
    request(n)); as Subscriber it receives the inbound payloads after the first one, granting
    ``batch`` credit at a time.  Subclasses define ``_answer(value, is_complete)``: report an
    inbound payload, return the payload that answers it.

    :param first: the answer to the REQUEST_CHANNEL payload.
    :param completion: ``"flag"``: C on the answer to the payload that carried C; ``"frame"``:
        a separate PAYLOAD[C]; ``"last"``: C on whatever answer goes last once the inbound
        side is done.
    :param error: fail the channel with this message instead (no answer, no credit).
    :param labels: added to the ``request_n`` and ``cancel`` events.
    """

    def __init__(self, first: Payload, initial_complete: bool, completion: str, batch: int,
                 error: str | None = None, labels: dict | None = None):
        self._initial_complete = initial_complete  # C on REQUEST_CHANNEL
        self._queue: list[tuple[Payload, bool]] = (
            [] if error else [(first, initial_complete and completion == "flag")])
        self._completion = completion
        self._batch = batch
        self._error = error
        self._labels = labels or {}
        self._demand = 0
        self._received_since_request = 0
        self._inbound: Subscription | None = None
        self._inbound_done = initial_complete and completion == "last"
        self._done = False
        self._outbound: Subscriber | None = None
        self._first_request = True

    def _answer(self, value: Payload, is_complete: bool) -> Payload:
        raise NotImplementedError

    # outbound -------------------------------------------------------------------------
    def subscribe(self, subscriber: Subscriber):
        self._outbound = subscriber
        subscriber.on_subscribe(self)

    def request(self, n: int):
        emit({"event": "request_n", **self._labels, "n": n, "initial": self._first_request})
        self._first_request = False
        self._demand += n
        self._drain()

    def cancel(self):
        if not self._done:
            self._done = True
            emit({"event": "cancel", **self._labels})

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
            if last or (self._completion == "last" and self._inbound_done and not self._queue):
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
        answer = self._answer(value, is_complete)
        if is_complete:
            self._inbound_done = True
            emit({"event": "channel_inbound_complete", "form": "flag"})
        self._queue.append((answer, is_complete and self._completion == "flag"))
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
