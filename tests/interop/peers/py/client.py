"""rsocket-py 0.4.20 interop client: runs ONE interaction and prints the result as JSON.

Usage (run with the project venv's python)::

    python client.py INTERACTION --port P [--host 127.0.0.1]
        [--data S | --data-b64 B | --data-size N] [--metadata S | --metadata-b64 B |
        --metadata-size N] [--request-n K] [--take M] [--count N] [--fragment N]
        [--completion flag|frame] [--digest] [--timeout SECONDS] [--keepalive MS] [--lifetime MS]
        [--setup-data S] [--setup-metadata S]
        [--transport tcp|ws] [--path /P] [--ws-library aiohttp|websockets]

INTERACTION is request-response, fire-and-forget, metadata-push, request-stream or
request-channel.  Exit codes: 0 success, 1 the peer sent an RSocket ERROR (JSON
``{"error": {"code", "message"}}``), 2 local failure/timeout (``{"failure": ...}``),
3 unsupported by this peer (``{"unsupported": ...}``).  See ``tests/interop/peers.py``.
``--transport ws`` connects to ``ws://HOST:PORT/PATH`` with rsocket-py's aiohttp transport or,
with ``--ws-library websockets``, its websockets transport (one frame per binary message).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from datetime import timedelta

from peer_common import (
    EXIT_UNSUPPORTED,
    ListPublisher,
    describe_payload,
    finish,
    open_client_transport,
    parse_client_args,
    parse_or_fail,
    payload_from_args,
    run_client,
    run_interaction,
)
from reactivestreams.subscriber import Subscriber
from rsocket.error_codes import ErrorCode
from rsocket.helpers import single_transport_provider
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.rsocket_client import RSocketClient

MINIMUM_FRAGMENT_SIZE = 64
OCTET_STREAM = b"application/octet-stream"


class Outbound(ListPublisher):
    """The requester's channel payloads b"1" .. b"count-1" (b"0" is in REQUEST_CHANNEL)."""

    def __init__(self, count: int, metadata: bytes | None, completion: str):
        super().__init__([Payload(str(i).encode("ascii"), metadata) for i in range(1, count)],
                         completion)

    def subscribe(self, subscriber: Subscriber):
        super().subscribe(subscriber)
        if not self._payloads:
            # frame completion with nothing left to send; must follow REQUEST_CHANNEL, which
            # rsocket-py queues right after this subscribe() returns
            asyncio.get_running_loop().call_soon(self._complete)


class ConnectionErrorWatch(BaseRequestHandler):
    """Our client's handler: an ERROR on stream 0 (e.g. REJECTED_SETUP) ends the run.

    rsocket-py hands such an ERROR only to ``on_error`` and fails the pending requests later
    with a generic CONNECTION_ERROR without a message (or, over WebSocket, never): the
    interaction is raced against this report."""

    def __init__(self) -> None:
        super().__init__()
        self.closed_by: asyncio.Future = asyncio.get_running_loop().create_future()

    async def on_error(self, error_code: ErrorCode, payload: Payload):
        if not self.closed_by.done():
            self.closed_by.set_result({
                "code": int(error_code),
                "message": bytes(payload.data or b"").decode("utf-8", "replace")})


def setup_payload(args) -> Payload | None:
    if args.setup_data is None and args.setup_metadata is None:
        return None
    return Payload((args.setup_data or "").encode("utf-8"),
                   None if args.setup_metadata is None else args.setup_metadata.encode("utf-8"))


async def run(args) -> tuple[int, dict]:
    data, metadata = payload_from_args(args)
    transport, close_transport = await open_client_transport(args)
    watch = ConnectionErrorWatch()
    client = RSocketClient(
        single_transport_provider(transport),
        data_encoding=OCTET_STREAM,
        metadata_encoding=OCTET_STREAM,
        keep_alive_period=timedelta(milliseconds=args.keepalive),
        max_lifetime_period=timedelta(milliseconds=args.lifetime),
        fragment_size_bytes=args.fragment,
        setup_payload=setup_payload(args),
        handler_factory=lambda: watch,
    )
    payload, outbound = Payload(data, metadata), None
    if args.interaction == "request-channel":
        payload = Payload(b"0", metadata)
        if args.count > 1 or args.completion == "frame":
            outbound = Outbound(args.count, metadata, args.completion)

    def describe(received: Payload) -> dict:
        return describe_payload(received.data, received.metadata, args.mode)

    try:
        async with client:
            interaction = asyncio.ensure_future(
                run_interaction(client, args, payload, describe, outbound))
            closed_by = watch.closed_by
            await asyncio.wait([interaction, closed_by], return_when=asyncio.FIRST_COMPLETED)
            if closed_by.done():
                interaction.cancel()
                code, result = 1, {"error": closed_by.result(),
                                   "connection_error": closed_by.result()}
            else:
                code, result = interaction.result()
    finally:
        await close_transport()
    return code, {"peer": "rsocket-py", "interaction": args.interaction, **result}


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    args = parse_or_fail(parse_client_args, argv)
    if args.fragment is not None and args.fragment < MINIMUM_FRAGMENT_SIZE:
        finish(EXIT_UNSUPPORTED, {"unsupported": (
            f"rsocket-py cannot fragment below {MINIMUM_FRAGMENT_SIZE} bytes per frame "
            "(fragment size counts the whole frame including the 3-byte length prefix)")})
    run_client(run, args)


if __name__ == "__main__":
    main(sys.argv[1:])
