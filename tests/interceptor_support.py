"""An in-memory client and server whose factories have interceptors (the tests of
rsocket_tx.interceptors, .metrics and .otel that push thousands of requests through)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from twisted.internet.task import Clock
from twisted.python.failure import Failure
from twisted.test.iosim import connectedServerAndClient

from rsocket_tx.client import make_setup
from rsocket_tx.extensions import COMPOSITE_METADATA
from rsocket_tx.interceptors import Interceptor
from rsocket_tx.protocol import RSocketClientFactory, RSocketServerFactory


class ObservedPair:
    """``client`` (the client's RSocket) connected in memory to a server of
    ``responder_factory``; :meth:`flush` moves every byte and due timer."""

    def __init__(self, responder_factory: Callable, server: Iterable[Interceptor] = (),
                 client: Iterable[Interceptor] = (),
                 metadata_mime_type: str = COMPOSITE_METADATA) -> None:
        self.clock = Clock()
        server_factory = RSocketServerFactory(responder_factory, reactor=self.clock,
                                              interceptors=list(server))
        client_factory = RSocketClientFactory(
            make_setup(metadata_mime_type=metadata_mime_type), reactor=self.clock,
            interceptors=list(client))
        self.client_protocol, self.server_protocol, self.pump = connectedServerAndClient(
            lambda: server_factory.buildProtocol(None),
            lambda: client_factory.buildProtocol(None), clock=self.clock)
        self.client = self.client_protocol.rsocket
        self.flush()

    def flush(self) -> None:
        for _ in range(3):
            self.clock.advance(0)
            self.pump.flush()

    def requests(self, routes: Iterable[str], data: bytes = b"") -> list:
        """Make a request-response per route, 200 at a time (under the server's limit of
        concurrent streams); return each one's result in order (a Payload, or the exception
        it failed with)."""
        names = list(routes)
        results: list = [None] * len(names)

        def keep(result, n: int) -> None:
            results[n] = result.value if isinstance(result, Failure) else result

        for start in range(0, len(names), 200):
            for n in range(start, min(start + 200, len(names))):
                self.client.request_response(data, route=names[n]).addBoth(keep, n)
            self.flush()
        return results

    def close(self) -> None:
        self.client.close(drain_timeout=0)
        self.flush()
        self.clock.advance(60)
        self.flush()
