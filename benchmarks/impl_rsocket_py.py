"""rsocket-py 0.4.20 (asyncio, TCP) client and server for the benchmark workloads.

Configured as fairly as its API allows:

* transport ``TransportTCP`` with its default read size (``--py-read-buffer`` changes it, passed
  as the environment variable ``BENCH_PY_READ_BUFFER``);
* the server's stream publisher is a minimal ``Publisher``/``Subscription`` that emits the
  requested number of items synchronously on ``request(n)`` (much cheaper than the library's
  ``StreamFromGenerator``, which goes through two asyncio queues per item);
* the client's stream subscriber asks for ``prefetch // 2`` more items every time half the
  window arrived (the library's ``CollectorSubscriber`` waits for the whole window, which
  stalls the pipe), and only counts items instead of keeping them;
* keepalive 20 s / lifetime 90 s and ``application/octet-stream`` as for rsocket_tx.

Transports (``BENCH_TRANSPORT``): ``tcp``; ``tls``: ``TransportTCP`` over asyncio streams opened
with an ``ssl.SSLContext``; ``ws`` / ``wss``: rsocket-py's aiohttp WebSocket transports
(``websocket_handler_factory`` on an ``aiohttp.web`` server, ``TransportAioHttpClient`` over an
``aiohttp`` client WebSocket), over TCP or TLS.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import timedelta

if __package__ in (None, ""):  # executed as a file
    sys.path.insert(0, __file__.rsplit("/", 2)[0])

from benchmarks import common as bench
from benchmarks.common import (
    Spec,
    announce_port,
    child_main,
    describe,
    emit_result,
    parse_stream_request,
    stream_request,
)

MIME = b"application/octet-stream"
KEEPALIVE = timedelta(seconds=20)
LIFETIME = timedelta(seconds=90)


def quiet() -> None:
    """rsocket-py logs a warning per frame of a canceled stream still in flight."""
    import logging

    logging.getLogger("pyrsocket").setLevel(logging.ERROR)


def read_buffer_size() -> int:
    return int(os.environ.get("BENCH_PY_READ_BUFFER") or 1024)


def _classes():
    """Build the rsocket-py based classes lazily (the import is not free)."""
    from reactivestreams.subscriber import Subscriber
    from rsocket.helpers import DefaultPublisherSubscription, create_future
    from rsocket.payload import Payload
    from rsocket.request_handler import BaseRequestHandler

    class CountPublisher(DefaultPublisherSubscription):
        """Emits ``n`` copies of one payload, as many as requested, synchronously."""

        def __init__(self, n: int, item: Payload) -> None:
            self._remaining = n
            self._item = item

        def request(self, n: int) -> None:
            subscriber = self._subscriber
            item = self._item
            k = min(n, self._remaining)
            for _ in range(k):
                self._remaining -= 1
                subscriber.on_next(item, self._remaining == 0)

        def cancel(self) -> None:
            self._remaining = 0

    class BenchHandler(BaseRequestHandler):
        def __init__(self) -> None:
            self.fnf_count = 0

        async def request_response(self, payload: Payload):
            if payload.data == bench.COUNT_QUERY:
                return create_future(Payload(b"%d" % self.fnf_count))
            return create_future(Payload(payload.data))

        async def request_fire_and_forget(self, payload: Payload) -> None:
            self.fnf_count += 1

        async def request_stream(self, payload: Payload):
            n, size = parse_stream_request(payload.data)
            return CountPublisher(n, Payload(b"x" * size))

    class CountingSubscriber(Subscriber):
        """Counts items; re-requests half the window each time half of it arrived."""

        def __init__(self, prefetch: int, deadline: bench.Deadline) -> None:
            self.prefetch = prefetch
            self.half = max(1, prefetch // 2)
            self.pending = 0
            self.items = 0
            self.nbytes = 0
            self.deadline = deadline
            self.complete = False
            self.elapsed = 0.0
            self.done = asyncio.get_running_loop().create_future()
            self.subscription = None

        def on_subscribe(self, subscription) -> None:
            self.subscription = subscription

        def _end(self, complete: bool) -> None:
            if not self.done.done():
                self.complete = complete
                self.elapsed = self.deadline.elapsed()
                self.done.set_result(None)

        def on_next(self, value, is_complete: bool = False) -> None:
            if self.done.done():
                return
            self.items += 1
            self.nbytes += len(value.data)
            if is_complete:
                self._end(True)
                return
            if (self.items & 255) == 0 and self.deadline.passed():
                self._end(False)
                self.subscription.cancel()
                return
            self.pending += 1
            if self.pending >= self.half:
                self.pending = 0
                self.subscription.request(self.half)

        def on_error(self, exception: Exception) -> None:
            if not self.done.done():
                self.done.set_exception(exception)

        def on_complete(self) -> None:
            self._end(True)

    return BenchHandler, CountingSubscriber, Payload


# ----------------------------------------------------------------------------- server


def server() -> None:
    from rsocket.rsocket_server import RSocketServer
    from rsocket.transports.tcp import TransportTCP

    quiet()
    handler_class = _classes()[0]
    size = read_buffer_size()
    connections = set()

    def session(reader, writer) -> None:
        rsocket = RSocketServer(TransportTCP(reader, writer, read_buffer_size=size),
                                handler_factory=handler_class,
                                data_encoding=MIME, metadata_encoding=MIME,
                                keep_alive_period=KEEPALIVE, max_lifetime_period=LIFETIME)
        connections.add(rsocket)

    kind = bench.transport()
    server_ssl = bench.asyncio_ssl_contexts()[0] if bench.is_tls(kind) else None

    async def main() -> None:
        srv = await asyncio.start_server(session, "127.0.0.1", 0, ssl=server_ssl)
        announce_port(srv.sockets[0].getsockname()[1])
        async with srv:
            await srv.serve_forever()

    async def main_ws() -> None:
        from aiohttp import web
        from rsocket.transports.aiohttp_websocket import websocket_handler_factory

        app = web.Application()
        app.add_routes([web.get(bench.WS_PATH, websocket_handler_factory(
            handler_factory=handler_class, data_encoding=MIME, metadata_encoding=MIME,
            keep_alive_period=KEEPALIVE, max_lifetime_period=LIFETIME))])
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_ssl)
        await site.start()
        announce_port(site._server.sockets[0].getsockname()[1])
        await asyncio.Event().wait()

    asyncio.run(main_ws() if bench.is_ws(kind) else main())


# ----------------------------------------------------------------------------- client


async def _run(client, spec: Spec, count: int, budget: float, state: dict) -> bench.RunResult:
    _, counting_subscriber, payload_class = state["classes"]
    deadline = bench.Deadline(budget)
    if spec.kind == "rr":
        load = bench.RequestResponseLoad(count, deadline)
        request = payload_class(b"x" * spec.size)
        await asyncio.gather(*(load.worker(client.request_response, request)
                               for _ in range(min(spec.inflight, count))))
        return load.result()

    if spec.kind == "stream":
        subscriber = counting_subscriber(spec.prefetch, deadline)
        request = payload_class(stream_request(count, spec.size))
        client.request_stream(request).initial_request_n(spec.prefetch).subscribe(subscriber)
        await subscriber.done
        return bench.RunResult(subscriber.items, subscriber.nbytes, subscriber.elapsed,
                         subscriber.complete)

    if spec.kind == "fnf":
        return await bench.fire_and_forget_run(
            client.fire_and_forget, client.request_response, payload_class,
            spec, count, deadline, state)

    raise ValueError(f"unknown workload kind {spec.kind!r}")


async def _client(port: int, spec: Spec) -> None:
    from rsocket.helpers import single_transport_provider
    from rsocket.rsocket_client import RSocketClient
    from rsocket.transports.tcp import TransportTCP

    quiet()
    state = {"classes": _classes(), "fnf_expected": 0}
    kind = bench.transport()
    client_ssl = bench.asyncio_ssl_contexts()[1] if bench.is_tls(kind) else None
    session = None
    if bench.is_ws(kind):
        import aiohttp
        from rsocket.transports.aiohttp_websocket import TransportAioHttpClient

        session = aiohttp.ClientSession()
        websocket = await session.ws_connect(bench.ws_url(port, kind), ssl=client_ssl or False,
                                             max_msg_size=0)
        transport = TransportAioHttpClient(websocket=websocket)
    else:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ssl,
            server_hostname=bench.TLS_HOST if client_ssl else None)
        transport = TransportTCP(reader, writer, read_buffer_size=read_buffer_size())
    try:
        async with RSocketClient(single_transport_provider(transport),
                                 data_encoding=MIME, metadata_encoding=MIME,
                                 keep_alive_period=KEEPALIVE,
                                 max_lifetime_period=LIFETIME) as client:
            if spec.warmup:
                await _run(client, spec, spec.warmup, spec.budget, state)
            runs = [await _run(client, spec, spec.count, spec.budget, state)
                    for _ in range(spec.repeat)]
    finally:
        if session is not None:
            await websocket.close()
            await session.close()
    emit_result(runs)


def client(port: int, spec: Spec) -> None:
    try:
        asyncio.run(_client(port, spec))
    except Exception as exc:  # report, never crash the harness
        emit_result(error=describe(exc))


if __name__ == "__main__":
    child_main(server, client)
