"""The Reactive Streams network protocol (rsocket_tx.rsnet) against itself, for the benchmark
workloads that apply, through its public API only.

RS-network has one interaction: a subscriber subscribes to a named publisher and the
publisher sends elements as the subscriber's demand (*request*) allows. So only the two stream
workloads apply: the client subscribes to the publisher named ``"<n>:<size>"``
(:func:`benchmarks.common.stream_request`) with ``connection.subscribe(name, window=...)``
(the workload's window: 256 for 64-byte items, 16 for 1 MiB items; the subscription requests
half the window each time half of it has been consumed) and counts the elements of ``async
for``; at the time budget it cancels. The server is ``rsocket_tx.rsnet.server.serve`` with a
:class:`~rsocket_tx.rsnet.publishers.Publisher` returning ``itertools.repeat(item, n)`` (plain
elements, each with its length, as RSocket's payloads; the protocol's packed fixed-size
elements are not used). Request-response and fire-and-forget have no counterpart (a publisher
cannot receive data from its subscriber; a subscriber cannot send elements): the harness shows
their cells as ``n/a``.

Transports: ``rsocket_tx.rsnet.server.serve`` on Twisted's TCP or TLS endpoint; over
WebSocket on :class:`~rsocket_tx.rsnet.endpoints.RSNetWebSocketServerEndpoint` (the one-port
server serving RS-network alone: the byte stream in binary messages, subprotocol ``rsnet``),
the client on :class:`~rsocket_tx.transports.oneport.ByteStreamWebSocketClientEndpoint`, which
is what ``connect(reactor, "rsnet+ws://...")`` builds.
"""

from __future__ import annotations

import itertools
import sys

if __package__ in (None, ""):  # executed as a file
    sys.path.insert(0, __file__.rsplit("/", 2)[0])

from benchmarks import common as bench
from benchmarks.common import (
    Spec,
    announce_port,
    announce_unavailable,
    child_main,
    describe,
    emit_result,
    parse_stream_request,
    run_twisted_client,
    stream_request,
)

UNAVAILABLE_PREFIX = "rsocket_tx not importable: "
#: The workload kinds RS-network has no interaction for: (the table's short cell text, why).
NOT_APPLICABLE = {
    "rr": ("no req-resp", "RS-network has no request-response: a subscriber sends its "
           "publisher only a name and demand, never data to answer"),
    "fnf": ("no fnf", "RS-network has no fire-and-forget: only a publisher sends elements, "
            "a subscriber sends none"),
}


def _server_endpoint(reactor):
    kind = bench.transport()
    endpoint = bench.twisted_server_endpoint(reactor, kind)
    if bench.is_ws(kind):
        from rsocket_tx.rsnet.endpoints import RSNetWebSocketServerEndpoint

        endpoint = RSNetWebSocketServerEndpoint(reactor, endpoint)
    return endpoint


def _client_endpoint(reactor, port: int):
    kind = bench.transport()
    endpoint = bench.twisted_client_endpoint(reactor, port, kind)
    if bench.is_ws(kind):
        from rsocket_tx.rsnet.codec import WEBSOCKET_SUBPROTOCOL
        from rsocket_tx.transports.oneport import ByteStreamWebSocketClientEndpoint

        endpoint = ByteStreamWebSocketClientEndpoint(reactor, endpoint,
                                                     bench.ws_url(port, kind),
                                                     WEBSOCKET_SUBPROTOCOL)
    return endpoint


def server() -> None:
    try:
        from rsocket_tx.rsnet.publishers import Publisher
        from rsocket_tx.rsnet.server import serve
    except Exception as exc:
        announce_unavailable(UNAVAILABLE_PREFIX + describe(exc))
        return
    from twisted.internet import reactor

    class BenchPublisher(Publisher):
        """``"<n>:<size>"`` -> ``n`` elements of ``size`` bytes, then onComplete."""

        def subscribe(self, request):
            n, size = parse_stream_request(request.publisher.encode())
            return itertools.repeat(b"x" * size, n)

    def failed(failure) -> None:
        announce_unavailable("rsnet serve() failed: " + describe(failure.value))
        reactor.stop()

    try:
        d = serve(reactor, _server_endpoint(reactor), BenchPublisher())
    except Exception as exc:
        announce_unavailable("rsnet serve() failed: " + describe(exc))
        return
    d.addCallbacks(lambda port: announce_port(port.getHost().port), failed)
    reactor.run()


async def _stream(connection, spec: Spec, count: int, budget: float) -> bench.RunResult:
    deadline = bench.Deadline(budget)
    subscription = connection.subscribe(stream_request(count, spec.size).decode(),
                                        window=spec.prefetch)
    items = 0
    nbytes = 0
    complete = True
    async for element in subscription:
        items += 1
        nbytes += len(element)
        if (items & 255) == 0 and deadline.passed():
            complete = items == count
            subscription.cancel()
            break
    return bench.RunResult(items, nbytes, deadline.elapsed(), complete)


async def _client(reactor, port: int, spec: Spec) -> None:
    if spec.kind in NOT_APPLICABLE:
        emit_result(error="not available: " + NOT_APPLICABLE[spec.kind][1])
        return
    try:
        from rsocket_tx.rsnet.client import connect
    except Exception as exc:
        emit_result(error=UNAVAILABLE_PREFIX + describe(exc))
        return
    connection = await connect(reactor, _client_endpoint(reactor, port))
    try:
        if spec.warmup:
            await _stream(connection, spec, spec.warmup, spec.budget)
        emit_result([await _stream(connection, spec, spec.count, spec.budget)
                     for _ in range(spec.repeat)])
    finally:
        try:
            await connection.close().addTimeout(2, reactor)
        except Exception:
            pass  # the numbers are out


def client(port: int, spec: Spec) -> None:
    run_twisted_client(_client, port, spec)


if __name__ == "__main__":
    child_main(server, client)
