"""The 2015 ReactiveSocket draft (rsocket_tx.reactivesocket) against itself, for the benchmark
workloads, through its public API only.

The draft is served by the same :class:`~rsocket_tx.responder.Responder` API as RSocket 1.0
and its client is an :class:`~rsocket_tx.requester.RSocket` (``ReactiveSocket``), so the
application and the client's workloads are :mod:`benchmarks.impl_rsocket_tx`'s; only the
server factory and the connect differ: ``ReactiveSocketServerFactory(responder)`` listened on
the transport's endpoint, and ``rsocket_tx.reactivesocket.connect(endpoint)``. Over WebSocket
the server is rsocket_tx's ``WebSocketServerEndpoint`` (one frame per binary message, without
the draft's length word), and the client offers the draft's subprotocol
(``reactivesocket-2015``), as an ``rs2015+ws://`` URI does.

All five workloads apply: the draft has request-response, fire-and-forget and request-stream
(REQUEST_N flow control), like RSocket 1.0.
"""

from __future__ import annotations

import sys

if __package__ in (None, ""):  # executed as a file
    sys.path.insert(0, __file__.rsplit("/", 2)[0])

from benchmarks import common as bench
from benchmarks import impl_rsocket_tx as tx
from benchmarks.common import Spec, child_main, run_twisted_client

NAME = "rsocket_tx 2015 draft"


def _listen(reactor, responder_factory):
    """``ReactiveSocketServerFactory`` on the transport's endpoint (``BENCH_TRANSPORT``)."""
    from rsocket_tx.reactivesocket import ReactiveSocketServerFactory

    kind = bench.transport()
    endpoint = bench.twisted_server_endpoint(reactor, kind)
    if bench.is_ws(kind):
        from rsocket_tx.transports.websocket import WebSocketServerEndpoint

        endpoint = WebSocketServerEndpoint(reactor, endpoint, bench.WS_PATH)
    return endpoint.listen(ReactiveSocketServerFactory(responder_factory, reactor=reactor))


def _connect(reactor, port: int):
    """``rsocket_tx.reactivesocket.connect`` over the transport (``BENCH_TRANSPORT``)."""
    from rsocket_tx.reactivesocket import WEBSOCKET_SUBPROTOCOL, connect

    kind = bench.transport()
    endpoint = bench.twisted_client_endpoint(reactor, port, kind)
    if bench.is_ws(kind):
        from rsocket_tx.transports.websocket import WebSocketClientEndpoint

        endpoint = WebSocketClientEndpoint(reactor, endpoint, bench.ws_url(port, kind),
                                           subprotocols=(WEBSOCKET_SUBPROTOCOL,))
    return connect(endpoint, reactor=reactor)


def server() -> None:
    tx.server(listen=_listen, name=NAME)


async def _run(reactor, port: int, spec: Spec) -> None:
    await tx.run_client(reactor, port, spec, connect=_connect)


def client(port: int, spec: Spec) -> None:
    run_twisted_client(_run, port, spec)


if __name__ == "__main__":
    child_main(server, client)
