"""rsocket_tx client and server for the benchmark workloads, through its public API only.

``rsocket_tx`` is imported lazily: when it cannot be imported the server prints
``UNAVAILABLE rsocket_tx not importable: <reason>`` instead of its port (and a client prints an
error result), so the harness shows "n/a" in the rsocket_tx cells instead of crashing.

Usage mirrors what an application does: ``serve()`` with a ``Responder`` subclass,
``connect()``, ``RSocket.request_response`` with Deferred callbacks (each reply's callback
issues the next request, as the raw Twisted client does),
``fire_and_forget_many`` (the bulk form of ``fire_and_forget``: each batch of 1000 messages
in one call, awaiting its Deferred, then yielding one reactor turn), and
``request_stream(..., prefetch=...)`` consumed with ``async for``. The transport
(``BENCH_TRANSPORT``: tcp, tls, ws, wss) is an endpoint object: Twisted's TCP/SSL endpoints,
wrapped in ``rsocket_tx.transports.websocket``'s endpoints for ws/wss.
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
#: rsocket_tx's default request-stream window up front (rsocket_tx.streams.DEFAULT_PREFETCH)
DEFAULT_PREFETCH = 256
#: fire-and-forget messages per fire_and_forget_many call (the workload's batch)
_FNF_BATCH = 1000


def _import():
    """Return the rsocket_tx public API, or raise ImportError with a readable reason."""
    try:
        import rsocket_tx
        from rsocket_tx import Payload, Responder, connect, serve
    except Exception as exc:
        raise ImportError(UNAVAILABLE_PREFIX + describe(exc)) from exc
    return rsocket_tx, Payload, Responder, connect, serve


# ----------------------------------------------------------------------------- endpoints


def _server_endpoint(reactor):
    """TCP, TLS (Twisted's SSL endpoint), WebSocket or WebSocket over TLS
    (``rsocket_tx.transports.websocket``), after ``BENCH_TRANSPORT``."""
    kind = bench.transport()
    endpoint = bench.twisted_server_endpoint(reactor, kind)
    if bench.is_ws(kind):
        from rsocket_tx.transports.websocket import WebSocketServerEndpoint

        endpoint = WebSocketServerEndpoint(reactor, endpoint, bench.WS_PATH)
    return endpoint


def _client_endpoint(reactor, port: int):
    kind = bench.transport()
    endpoint = bench.twisted_client_endpoint(reactor, port, kind)
    if bench.is_ws(kind):
        from rsocket_tx.transports.websocket import WebSocketClientEndpoint

        endpoint = WebSocketClientEndpoint(reactor, endpoint, bench.ws_url(port, kind))
    return endpoint


# ----------------------------------------------------------------------------- server


def _serve_rsocket(reactor, responder_factory):
    """rsocket_tx's RSocket server: ``serve(endpoint, responder_factory)``."""
    return _import()[4](_server_endpoint(reactor), responder_factory, reactor=reactor)


def server(listen=None, name: str = "rsocket_tx") -> None:
    """Serve the benchmark application (:class:`BenchResponder`) until stdin closes.

    :param listen: ``listen(reactor, responder_factory)`` -> Deferred firing with the
        listening port (default: rsocket_tx's RSocket ``serve()``); the 2015 draft's module
        passes its own (the same Responder API serves both protocols).
    :param name: the implementation named in an UNAVAILABLE line.
    """
    try:
        _, payload_class, responder_class, _, _ = _import()
    except ImportError as exc:
        announce_unavailable(str(exc))
        return

    from twisted.internet import reactor

    listen = listen or _serve_rsocket

    class BenchResponder(responder_class):
        def __init__(self) -> None:
            super().__init__()
            self.fnf_count = 0

        def request_response(self, payload):
            if payload.data == bench.COUNT_QUERY:
                return payload_class(b"%d" % self.fnf_count)
            return payload_class(payload.data)

        def fire_and_forget(self, payload) -> None:
            self.fnf_count += 1

        def request_stream(self, payload):
            n, size = parse_stream_request(payload.data)
            return itertools.repeat(payload_class(b"x" * size), n)

    def listening(port) -> None:
        announce_port(port.getHost().port)

    def failed(failure) -> None:
        announce_unavailable(f"{name} serve() failed: " + describe(failure.value))
        reactor.stop()

    try:
        d = listen(reactor, BenchResponder)
    except Exception as exc:
        announce_unavailable(f"{name} serve() failed: " + describe(exc))
        return
    d.addCallbacks(listening, failed)
    reactor.run()


# ----------------------------------------------------------------------------- client


def _request_response_load(request_response, request, load, inflight: int):
    """The "rr" workload with Deferred callbacks, as the raw Twisted client does it: each
    reply's callback counts it and issues the next request (``inflight`` chains). Returns a
    Deferred firing when every chain has ended (or failing with the first error)."""
    from twisted.internet.defer import Deferred

    done = Deferred()
    chains = [inflight]

    def failed(failure) -> None:
        if not done.called:
            done.errback(failure)

    def reply(payload) -> None:
        load.got += 1
        load.nbytes += len(payload.data)
        if (load.got & 63) == 0 and load.deadline.passed():
            load.stop = True
        if load.issued < load.count and not load.stop:
            load.issued += 1
            request_response(request).addCallbacks(reply, failed)
            return
        chains[0] -= 1
        if chains[0] == 0 and not done.called:
            done.callback(None)

    for _ in range(inflight):
        load.issued += 1
        request_response(request).addCallbacks(reply, failed)
    return done


async def _fire_and_forget_load(reactor, rs, payload_class, spec: Spec, count: int,
                                deadline, state: dict) -> bench.RunResult:
    """The "fnf" workload (:func:`benchmarks.common.fire_and_forget_run`'s, in bulk): each
    batch of 1000 in one ``fire_and_forget_many`` call (one REQUEST_FNF frame per message on
    the wire, as ``fire_and_forget`` sends them; one Deferred per batch), awaited until
    written, then one reactor turn; then COUNT_QUERY request-responses until the server has
    received them all."""
    from twisted.internet.task import deferLater

    batch = [payload_class(b"x" * spec.size)] * _FNF_BATCH
    sent = 0
    while sent < count:
        k = min(_FNF_BATCH, count - sent)
        await rs.fire_and_forget_many(batch if k == _FNF_BATCH else batch[:k])
        sent += k
        if deadline.passed():
            break
        await deferLater(reactor, 0, lambda: None)
    state["fnf_expected"] += sent
    query = payload_class(bench.COUNT_QUERY)
    while int((await rs.request_response(query)).data) < state["fnf_expected"]:
        pass
    return bench.RunResult(sent, sent * spec.size, deadline.elapsed(), sent == count)


async def _run(reactor, rs, payload_class, spec: Spec, count: int, budget: float,
               state: dict) -> bench.RunResult:
    deadline = bench.Deadline(budget)
    if spec.kind == "rr":
        load = bench.RequestResponseLoad(count, deadline)
        await _request_response_load(rs.request_response, payload_class(b"x" * spec.size),
                                     load, min(spec.inflight, count))
        return load.result()

    if spec.kind == "stream":
        # the workload's window of 256 is rsocket_tx's default: leave it to the default flow
        # control (256 items up front, the window grown by bytes for small items); any other
        # window (the 1 MiB stream's 16) is passed as a fixed prefetch
        prefetch = None if spec.prefetch == DEFAULT_PREFETCH else spec.prefetch
        stream = rs.request_stream(payload_class(stream_request(count, spec.size)),
                                   prefetch=prefetch)
        items = 0
        nbytes = 0
        complete = True
        async for item in stream:
            items += 1
            nbytes += len(item.data)
            if (items & 255) == 0 and deadline.passed():
                complete = items == count
                stream.cancel()
                break
        return bench.RunResult(items, nbytes, deadline.elapsed(), complete)

    if spec.kind == "fnf":
        return await _fire_and_forget_load(reactor, rs, payload_class, spec, count, deadline,
                                           state)

    raise ValueError(f"unknown workload kind {spec.kind!r}")


def _connect_rsocket(reactor, port: int):
    """rsocket_tx's RSocket client: ``connect(endpoint)``."""
    return _import()[3](_client_endpoint(reactor, port), reactor=reactor)


async def run_client(reactor, port: int, spec: Spec, connect=None) -> None:
    """Connect (``connect(reactor, port)`` -> Deferred firing with an
    :class:`~rsocket_tx.requester.RSocket`; default rsocket_tx's RSocket ``connect()``), run
    the warm-up and the measured runs of ``spec`` and print the result."""
    try:
        _, payload_class, _, _, _ = _import()
    except ImportError as exc:
        emit_result(error=str(exc))
        return
    rs = await (connect or _connect_rsocket)(reactor, port)
    state = {"fnf_expected": 0}
    try:
        if spec.warmup:
            await _run(reactor, rs, payload_class, spec, spec.warmup, spec.budget, state)
        runs = [await _run(reactor, rs, payload_class, spec, spec.count, spec.budget, state)
                for _ in range(spec.repeat)]
        emit_result(runs)
    finally:
        try:
            await rs.close().addTimeout(2, reactor)
        except Exception:
            pass  # the numbers are out; a slow or failing close does not matter here


def client(port: int, spec: Spec) -> None:
    run_twisted_client(run_client, port, spec)


if __name__ == "__main__":
    child_main(server, client)
