"""rsocket-py 0.4.20 lease interop server: grants leases, and may request the client.

Usage (run with the project venv's python)::

    python lease_server.py [--port P] [--host 127.0.0.1] [--lease-requests N]
                           [--lease-ttl MS] [--lease-interval MS] [--honor-lease]
                           [--request-client K] [--request-wait S]
                           [--timeout SECONDS] [--watch-stdin]

Prints ``LISTENING <port>`` once bound, then one JSON event per line.

* Every connection gets a ``lease_publisher``: a LEASE of ``--lease-requests`` (default 3)
  requests for ``--lease-ttl`` ms (default 60000) as soon as the SETUP is handled, then every
  ``--lease-interval`` ms (default: no more).  rsocket-py sends it only when the SETUP has L.
  rsocket-py never enforces it: requests beyond it are served all the same.
* The responder answers request-response with ``echo:<data>``.
* ``--request-client K``: after the SETUP, the server sends K request-responses to the client
  (data ``s0``, ``s1``, ...), one after another, each given ``--request-wait`` seconds (default
  2) and reported as a ``result`` event.  ``--honor-lease`` makes this server-side requester
  honour the client's leases (rsocket-py then *queues* what the lease does not allow: it is
  reported ``queued``); without it, rsocket-py sends regardless of the client's leases.

Events: ``setup`` (``lease``: the L flag), ``lease_sent`` (``ttl``, ``requests``),
``lease_received`` (``ttl``, ``requests``), ``request`` (``interaction``, ``data``), ``result``
(``index`` and ``payload`` | ``error`` {code, message} | ``queued``), ``results_done``,
``stopping``.
"""

from __future__ import annotations

import asyncio
import logging
import sys

from lease_common import (
    EchoHandler,
    RepeatingLeasePublisher,
    lease_received,
    request_sequence,
)
from peer_common import _Parser, emit, parse_or_fail, serve_tcp
from rsocket.rsocket_server import RSocketServer
from rsocket.transports.tcp import TransportTCP


def parse_args(argv):
    parser = _Parser(prog="lease_server.py", add_help=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--lease-requests", type=int, default=3)
    parser.add_argument("--lease-ttl", type=int, default=60_000)
    parser.add_argument("--lease-interval", type=int)
    parser.add_argument("--honor-lease", action="store_true")
    parser.add_argument("--request-client", type=int, default=0)
    parser.add_argument("--request-wait", type=float, default=2.0)
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--watch-stdin", action="store_true")
    return parser.parse_args(argv)


class ServerEcho(EchoHandler):
    who = "server"


class LeaseServer(RSocketServer):
    args = None

    async def handle_setup(self, frame):
        emit({"event": "setup", "lease": bool(frame.flags_lease)})
        await super().handle_setup(frame)
        if self.args.request_client:
            asyncio.create_task(self._request_client())

    async def handle_lease(self, frame):
        lease_received(frame, "server")
        await super().handle_lease(frame)

    async def _request_client(self):
        await request_sequence(self, self.args.request_client, self.args.request_wait, "s")
        emit({"event": "results_done"})


async def serve(args) -> None:
    LeaseServer.args = args

    def make_connection(reader, writer):
        publisher = RepeatingLeasePublisher(args.lease_requests, args.lease_ttl,
                                            args.lease_interval, "server")
        return LeaseServer(TransportTCP(reader, writer), handler_factory=ServerEcho,
                           honor_lease=args.honor_lease, lease_publisher=publisher)

    await serve_tcp(args, make_connection)


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    asyncio.run(serve(parse_or_fail(parse_args, argv)))


if __name__ == "__main__":
    main(sys.argv[1:])
