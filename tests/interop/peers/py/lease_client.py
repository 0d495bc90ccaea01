"""rsocket-py 0.4.20 lease interop client: asks for leases (SETUP L flag) and requests.

Usage (run with the project venv's python)::

    python lease_client.py --port P [--host 127.0.0.1] [--count K] [--wait S]
                           [--ignore-lease] [--lease-requests N] [--lease-ttl MS]
                           [--lease-interval MS] [--serve S] [--timeout S]

* Connects with ``honor_lease=True``: SETUP carries L, and rsocket-py's requester honours the
  server's leases by *queueing* what they do not allow (a queued request is reported
  ``queued`` after ``--wait`` seconds, default 2, and left queued).
* ``--ignore-lease``: SETUP still carries L, but once the first LEASE has arrived (or
  ``--wait`` has passed) the requester sends regardless of leases (it stands for a misbehaving
  client, to show the server enforcing its leases).
* ``--lease-requests N``: the client's responder grants the server N requests for
  ``--lease-ttl`` ms (default 60000), once or every ``--lease-interval`` ms.  Without it the
  client grants nothing (rsocket-py sends no LEASE).  rsocket-py never enforces it.
* Sends ``--count`` (default 3) request-responses with data ``0``, ``1``, ... one after another.
* ``--serve S``: then stays connected S seconds more, serving the server's requests
  (``echo:<data>``).

Prints events as they happen (``lease_received``, ``lease_sent``, ``request``, ``result``),
then one final JSON line: ``{"peer": "rsocket-py", "results": [...], "leases": [...],
"served": [...]}`` (exit code 0), or ``{"failure": ...}`` (exit code 2).
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
from peer_common import EXIT_OK, _Parser, parse_or_fail, run_client
from rsocket.helpers import single_transport_provider
from rsocket.rsocket_client import RSocketClient
from rsocket.transports.tcp import TransportTCP

OCTET_STREAM = b"application/octet-stream"


def parse_args(argv):
    parser = _Parser(prog="lease_client.py", add_help=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--wait", type=float, default=2.0)
    parser.add_argument("--ignore-lease", action="store_true")
    parser.add_argument("--lease-requests", type=int)
    parser.add_argument("--lease-ttl", type=int, default=60_000)
    parser.add_argument("--lease-interval", type=int)
    parser.add_argument("--serve", type=float, default=0.0)
    parser.add_argument("--timeout", type=int, default=30)
    return parser.parse_args(argv)


class LeaseClient(RSocketClient):
    leases: list[dict] = []
    first_lease: asyncio.Event | None = None

    async def handle_lease(self, frame):
        self.leases.append(lease_received(frame, "client"))
        await super().handle_lease(frame)
        self.first_lease.set()


class ClientEcho(EchoHandler):
    who = "client"
    served: list[str] = []

    async def request_response(self, payload):
        self.served.append(bytes(payload.data or b"").decode("utf-8", "replace"))
        return await super().request_response(payload)


async def run(args) -> tuple[int, dict]:
    reader, writer = await asyncio.open_connection(args.host, args.port)
    publisher = None
    if args.lease_requests is not None:
        publisher = RepeatingLeasePublisher(args.lease_requests, args.lease_ttl,
                                            args.lease_interval, "client")
    client = LeaseClient(single_transport_provider(TransportTCP(reader, writer)),
                         handler_factory=ClientEcho, honor_lease=True, lease_publisher=publisher,
                         data_encoding=OCTET_STREAM, metadata_encoding=OCTET_STREAM)
    LeaseClient.first_lease = asyncio.Event()
    async with client:
        if args.ignore_lease:
            client._honor_lease = False  # SETUP already went out with L: now ignore leases
            # the first request waits for the first LEASE all the same, so what the server
            # enforces is its grant, not the race between its LEASE and our first request
            try:
                await asyncio.wait_for(LeaseClient.first_lease.wait(), args.wait)
            except TimeoutError:
                pass
        results = await request_sequence(client, args.count, args.wait)
        if args.serve:
            await asyncio.sleep(args.serve)
    return EXIT_OK, {"peer": "rsocket-py", "results": results, "leases": LeaseClient.leases,
                     "served": ClientEcho.served}


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    run_client(run, parse_or_fail(parse_args, argv))


if __name__ == "__main__":
    main(sys.argv[1:])
