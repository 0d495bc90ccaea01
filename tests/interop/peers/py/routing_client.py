"""rsocket-py 0.4.20 routing interop client: ONE routed interaction, result printed as JSON.

Usage (run with the project venv's python)::

    python routing_client.py --port P --interaction I [--host 127.0.0.1] [--route R]
        [--data JSON] [--next JSON ...] [--next-metadata] [--auth-simple USER:PASS]
        [--auth-bearer TOKEN] [--auth-custom TYPE=TEXT] [--setup-auth-simple USER:PASS]
        [--setup-auth-bearer TOKEN] [--custom-entry MIME=TEXT ...] [--stream-data-mime MIME]
        [--data-mime-type MIME] [--metadata-mime-type MIME] [--take N] [--request-n N]
        [--timeout SECONDS]

I is request-response, fire-and-forget, request-stream or request-channel.  The SETUP says
metadata MIME ``message/x.rsocket.composite-metadata.v0`` and data MIME ``application/json``
(``--metadata-mime-type`` / ``--data-mime-type`` change them).  The request metadata is built
with rsocket-py's helpers (``rsocket.extensions.helpers``: ``composite``, ``route``,
``authenticate_simple``, ``authenticate_bearer``, ``data_mime_type``, ``metadata_item``), in
this order: routing (``--route``), authentication, per-stream data MIME, custom entries.
``--auth-custom TYPE=TEXT`` is an ``Authentication`` subclass with a custom type name (which
rsocket-py writes as a length-prefixed string).  ``--setup-auth-*`` put an authentication entry
in the SETUP metadata (composite).

Request-channel: the first payload is ``--data`` (with the metadata), then one payload per
``--next`` (without metadata unless ``--next-metadata``), then completion (C on the last
PAYLOAD, or on REQUEST_CHANNEL when there is no ``--next``).

Result (one JSON line): ``peer``, ``interaction``, ``route`` and ``payload`` (request-response),
``sent`` (fire-and-forget), or ``payloads`` + ``completed`` + ``cancelled`` (stream/channel).  A
payload is ``{"data": text|null, "data_b64", "json": parsed|null, "metadata": [entry]|null,
"metadata_b64"|null, "metadata_error"}`` where an entry is ``{"mime", "content_b64"}`` (+
``tags``/``auth``/``data_mime``/``accept``).  Exit codes: 0 ok, 1 the peer sent ERROR
(``{"error": {"code", "message"}}``) or an ERROR on stream 0 (``connection_error``, same form,
always present, null when none; rsocket-py does not fail the requests for it: ``error`` is then
what the request itself got), 2 local failure/timeout, 3 unsupported.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from datetime import timedelta

from peer_common import (
    EXIT_RSOCKET_ERROR,
    MAX_REQUEST_N,
    ListPublisher,
    UsageError,
    _Parser,
    parse_or_fail,
    run_client,
    run_interaction,
)
from routing_common import (
    APPLICATION_JSON,
    COMPOSITE,
    b64,
    describe_data,
    describe_entries,
    parse_composite,
    split_pair,
)
from rsocket.error_codes import ErrorCode
from rsocket.extensions.authentication import Authentication
from rsocket.extensions.authentication_content import AuthenticationContent
from rsocket.extensions.helpers import (
    authenticate_bearer,
    authenticate_simple,
    composite,
    data_mime_type,
    metadata_item,
    route,
)
from rsocket.helpers import single_transport_provider
from rsocket.payload import Payload
from rsocket.request_handler import BaseRequestHandler
from rsocket.rsocket_client import RSocketClient
from rsocket.transports.tcp import TransportTCP

INTERACTIONS = ("request-response", "fire-and-forget", "request-stream", "request-channel")


class CustomAuthentication(Authentication):
    """An authentication entry with a custom (non well-known) auth type name."""

    def __init__(self, auth_type: str, payload: bytes):
        self._type = auth_type.encode("ascii")
        self.payload = payload

    def serialize(self) -> bytes:
        return self.payload

    def parse(self, buffer: bytes):
        self.payload = buffer

    @property
    def type(self) -> bytes:
        return self._type


def parse_args(argv):
    parser = _Parser(prog="routing_client.py", add_help=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--interaction", choices=INTERACTIONS, required=True)
    parser.add_argument("--route")
    parser.add_argument("--data")
    parser.add_argument("--next", action="append", default=[])
    parser.add_argument("--next-metadata", action="store_true")
    auth = parser.add_mutually_exclusive_group()
    auth.add_argument("--auth-simple")
    auth.add_argument("--auth-bearer")
    auth.add_argument("--auth-custom")
    setup_auth = parser.add_mutually_exclusive_group()
    setup_auth.add_argument("--setup-auth-simple")
    setup_auth.add_argument("--setup-auth-bearer")
    parser.add_argument("--custom-entry", action="append", default=[])
    parser.add_argument("--stream-data-mime")
    parser.add_argument("--data-mime-type", default=APPLICATION_JSON)
    parser.add_argument("--metadata-mime-type", default=COMPOSITE)
    parser.add_argument("--take", type=int)
    parser.add_argument("--request-n", type=int, default=MAX_REQUEST_N)
    parser.add_argument("--timeout", type=int, default=30)
    args = parser.parse_args(argv)
    if (args.stream_data_mime or args.data_mime_type) == APPLICATION_JSON:
        for text in [args.data, *args.next]:
            if text is not None:
                json.loads(text)  # JSON data must be JSON text (ValueError: a usage error)
    return args


def auth_item(simple: str | None, bearer: str | None, custom: str | None = None):
    if simple is not None:
        user, password = split_pair(simple, ":", "--auth-simple")
        return authenticate_simple(user, password)
    if bearer is not None:
        return authenticate_bearer(bearer)
    if custom is not None:
        auth_type, content = split_pair(custom, "=", "--auth-custom")
        return AuthenticationContent(CustomAuthentication(auth_type, content.encode("utf-8")))
    return None


def request_metadata(args) -> bytes:
    items = []
    if args.route is not None:
        items.append(route(args.route))
    item = auth_item(args.auth_simple, args.auth_bearer, args.auth_custom)
    if item is not None:
        items.append(item)
    if args.stream_data_mime is not None:
        items.append(data_mime_type(args.stream_data_mime.encode("ascii")))
    for entry in args.custom_entry:
        mime, content = split_pair(entry, "=", "--custom-entry")
        items.append(metadata_item(content.encode("utf-8"), mime.encode("ascii")))
    return composite(*items)


def setup_payload(args) -> Payload | None:
    item = auth_item(args.setup_auth_simple, args.setup_auth_bearer)
    if item is None:
        return None
    return Payload(b"", composite(item))


def describe(payload: Payload, data_mime: str) -> dict:
    metadata = payload.metadata
    out = describe_data(payload.data, data_mime)
    if metadata:  # rsocket-py reports absent metadata as b"" (README quirk py 6)
        parsed, error = parse_composite(metadata)
        out["metadata"] = describe_entries(parsed) if parsed is not None else None
        out["metadata_b64"] = b64(metadata)
        out["metadata_error"] = error
    else:
        out["metadata"] = None
        out["metadata_b64"] = None
        out["metadata_error"] = None
    return out


class ConnectionErrors(BaseRequestHandler):
    """Records ERROR frames on stream 0 (rsocket-py hands them to the handler only)."""

    def __init__(self, sink: list):
        super().__init__()
        self._sink = sink

    async def on_error(self, error_code: ErrorCode, payload: Payload):
        self._sink.append({"code": int(error_code),
                           "message": bytes(payload.data or b"").decode("utf-8", "replace")})


async def run(args) -> tuple[int, dict]:
    metadata = request_metadata(args)
    data = (args.data or "").encode("utf-8")
    reader, writer = await asyncio.open_connection(args.host, args.port)
    connection_errors: list[dict] = []
    client = RSocketClient(
        single_transport_provider(TransportTCP(reader, writer)),
        data_encoding=args.data_mime_type.encode("ascii"),
        metadata_encoding=args.metadata_mime_type.encode("ascii"),
        keep_alive_period=timedelta(seconds=20),
        max_lifetime_period=timedelta(seconds=90),
        setup_payload=setup_payload(args),
        handler_factory=lambda: ConnectionErrors(connection_errors),
    )
    data_mime = args.stream_data_mime or args.data_mime_type
    outbound = None
    if args.interaction == "request-channel" and args.next:
        outbound = ListPublisher([Payload(n.encode("utf-8"),
                                          metadata if args.next_metadata else None)
                                  for n in args.next])
    async with client:
        code, outcome = await run_interaction(client, args, Payload(data, metadata),
                                              lambda received: describe(received, data_mime),
                                              outbound)
    result = {"peer": "rsocket-py", "interaction": args.interaction, "route": args.route,
              **outcome, "connection_error": connection_errors[0] if connection_errors else None}
    return (EXIT_RSOCKET_ERROR if connection_errors else code), result


def main(argv: list[str]) -> None:
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    run_client(run, parse_or_fail(parse_args, argv, (UsageError, ValueError)))


if __name__ == "__main__":
    main(sys.argv[1:])
