"""rsocket-py 0.4.20 routing interop server: RequestRouter + RoutingRequestHandler over TCP.

Usage (run with the project venv's python)::

    python routing_server.py [--port P] [--host 127.0.0.1] [--user NAME:PASSWORD ...]
                             [--token TOKEN ...] [--timeout SECONDS] [--watch-stdin]

The connection's metadata MIME type must be composite (RoutingRequestHandler rejects the SETUP
otherwise).  Prints ``LISTENING <port>`` once bound, then one JSON event per line.

Routes (``RequestRouter``; every reply is JSON):

* ``echo`` (request-response): data = the *seen* document of the request (below); the reply's
  metadata is composite: routing ``echo.reply`` + a custom ``application/x.rsocket-py`` entry.
* ``secure.echo`` (request-response): like ``echo``, but only with valid credentials (the
  request's auth entry, else the SETUP's): ERROR[REJECTED] otherwise.
* ``fail`` (request-response): ERROR[APPLICATION_ERROR] ``failed as asked: <data>``.
* ``echo.stream`` (request-stream): the seen document, then ``{"index": i}`` for i < count
  (``{"count": n}`` in the data, default 2).  Follows request-n, C on the last PAYLOAD.
* ``echo.channel`` (request-channel): one seen document per inbound payload (the first one
  included; ``"index"`` added), completes after the requester completes.
* ``echo.fnf`` (fire-and-forget): only the ``routed`` event.
* anything else: rsocket-py's own ``RSocketUnknownRoute(route)`` -> ERROR[APPLICATION_ERROR]
  whose message is the route.

The *seen* document: ``interaction``, ``route``, ``tags``, ``auth`` (``{"type": "simple",
"username", "password"}``, ``{"type": "bearer", "token"}``), ``data_mime_type`` /
``accept_mime_types`` (per-stream entries), ``custom`` (``[{mime, content_b64, text}]``: entries
rsocket-py has no class for), ``entries`` (every entry), ``data`` / ``data_b64`` / ``json``,
``principal`` (secure routes), and ``setup`` (this connection's SETUP, see the ``setup`` event).

Credentials: ``--user`` (default ``alice:secret``) and ``--token`` (default ``t0ken``).  A SETUP
carrying an authentication entry with other credentials is rejected (REJECTED_SETUP); a SETUP
without one is accepted.

Events: ``setup`` (``data_mime_type``, ``metadata_mime_type``, ``auth``, ``entries``,
``error`` (rsocket-py could not parse the SETUP metadata), ``data``, ``rejected`` (reason or
null)), ``routed`` (``interaction`` + ``seen``), ``request_n`` / ``cancel`` (``route``),
``channel_inbound_complete``, ``stopping``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys

from peer_common import (
    ChannelFlagServer,
    ChannelResponder,
    ListPublisher,
    UsageError,
    _Parser,
    emit,
    parse_or_fail,
    serve_tcp,
)
from routing_common import (
    COMPOSITE,
    describe_data,
    describe_entries,
    parse_composite,
    split_pair,
    summarize,
    text,
)
from rsocket.error_codes import ErrorCode
from rsocket.exceptions import RSocketProtocolError
from rsocket.extensions.helpers import composite, metadata_item, route
from rsocket.payload import Payload
from rsocket.routing.request_router import RequestRouter
from rsocket.routing.routing_request_handler import RoutingRequestHandler
from rsocket.transports.tcp import TransportTCP

CHANNEL_BATCH = 256


def parse_args(argv):
    parser = _Parser(prog="routing_server.py", add_help=False)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--user", action="append", default=[])
    parser.add_argument("--token", action="append", default=[])
    parser.add_argument("--timeout", type=int, default=600)
    parser.add_argument("--watch-stdin", action="store_true")
    args = parser.parse_args(argv)
    try:
        args.users = dict(split_pair(u, ":", "--user") for u in (args.user or ["alice:secret"]))
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    args.tokens = set(args.token or ["t0ken"])
    return args


class Connection:
    """What one connection's SETUP said."""

    def __init__(self):
        self.data_mime_type: str | None = None
        self.setup: dict = {}
        self.setup_auth: dict | None = None


def check_credentials(auth: dict | None, users: dict, tokens: set) -> str | None:
    """The principal for valid credentials, else None."""
    if auth is None:
        return None
    if auth["type"] == "simple":
        if users.get(auth["username"]) == auth["password"]:
            return auth["username"]
        return None
    if auth["type"] == "bearer":
        return f"bearer:{auth['token']}" if auth["token"] in tokens else None
    return None


class RouteStream(ListPublisher):
    """Publishes prepared payloads following request(n), C on the last PAYLOAD; reports
    ``request_n`` and ``cancel`` with the route's name."""

    def __init__(self, name: str, payloads: list[Payload]):
        super().__init__(payloads)
        self._name = name
        self._first = True

    def request(self, n: int):
        emit({"event": "request_n", "route": self._name, "n": n, "initial": self._first})
        self._first = False
        super().request(n)

    def cancel(self):
        if not self._done:
            emit({"event": "cancel", "route": self._name})
        super().cancel()


class ChannelEcho(ChannelResponder):
    """``echo.channel``: one seen document per inbound payload, C on the last one."""

    def __init__(self, describe, first: Payload, initial_complete: bool):
        self._describe = describe
        self._index = 0
        super().__init__(self._answer(first, initial_complete), initial_complete, "last",
                         CHANNEL_BATCH, labels={"route": "echo.channel"})

    def _answer(self, value: Payload, is_complete: bool) -> Payload:
        seen = self._describe("request-channel", value)
        seen["index"] = self._index
        self._index += 1
        emit({"event": "routed", "interaction": "request-channel", "seen": seen})
        return Payload(json.dumps(seen).encode("utf-8"))


def make_handler(args):
    """One RequestRouter + handler per connection (routes close over the connection)."""
    connection = Connection()
    router = RequestRouter()

    def seen(interaction: str, payload: Payload, principal: str | None = None) -> dict:
        parsed, error = parse_composite(payload.metadata)
        summary = summarize(parsed)
        mime = summary["data_mime_type"] or connection.data_mime_type
        return {"interaction": interaction, **summary,
                "entries": describe_entries(parsed) if parsed is not None else None,
                "metadata_error": error, **describe_data(payload.data, mime),
                "principal": principal, "setup": connection.setup}

    def reply(document: dict, metadata: bytes | None = None) -> Payload:
        return Payload(json.dumps(document).encode("utf-8"), metadata)

    @router.response("echo")
    async def echo(payload: Payload):
        document = seen("request-response", payload)
        emit({"event": "routed", "interaction": "request-response", "seen": document})
        return reply(document, composite(route("echo.reply"),
                                         metadata_item(b"from rsocket-py",
                                                       b"application/x.rsocket-py")))

    @router.response("secure.echo")
    async def secure_echo(payload: Payload):
        parsed, _ = parse_composite(payload.metadata)
        auth = summarize(parsed)["auth"] or connection.setup_auth
        principal = check_credentials(auth, args.users, args.tokens)
        # _verify_authentication (below) already refused missing/bad credentials
        document = seen("request-response", payload, principal)
        emit({"event": "routed", "interaction": "request-response", "seen": document})
        return reply(document)

    @router.response("fail")
    async def fail(payload: Payload):
        emit({"event": "routed", "interaction": "request-response",
              "seen": seen("request-response", payload)})
        raise RuntimeError("failed as asked: " + bytes(payload.data or b"").decode("utf-8",
                                                                                  "replace"))

    @router.stream("echo.stream")
    async def echo_stream(payload: Payload):
        document = seen("request-stream", payload)
        emit({"event": "routed", "interaction": "request-stream", "seen": document})
        count = 2
        if isinstance(document["json"], dict) and isinstance(document["json"].get("count"), int):
            count = document["json"]["count"]
        items = [reply(document)] + [reply({"index": i}) for i in range(count)]
        return RouteStream("echo.stream", items)

    @router.channel("echo.channel")
    async def echo_channel(payload: Payload):
        channel = ChannelEcho(seen, payload, handler.initial_complete)
        return channel, channel

    @router.fire_and_forget("echo.fnf")
    async def echo_fnf(payload: Payload):
        emit({"event": "routed", "interaction": "fire-and-forget",
              "seen": seen("fire-and-forget", payload)})

    class Handler(RoutingRequestHandler):
        initial_complete = False  # set by ChannelFlagServer for the REQUEST_CHANNEL being handled

        async def on_setup(self, data_encoding: bytes, metadata_encoding: bytes,
                           payload: Payload):
            connection.data_mime_type = text(data_encoding)
            parsed, error = parse_composite(payload.metadata)
            summary = summarize(parsed)
            connection.setup_auth = summary["auth"]
            connection.setup = {
                "data_mime_type": text(data_encoding),
                "metadata_mime_type": text(metadata_encoding),
                "auth": summary["auth"],
                "entries": describe_entries(parsed) if parsed is not None else None,
                "error": error,
                "data": describe_data(payload.data, text(data_encoding))["data"],
            }
            rejected = None
            if text(metadata_encoding) != COMPOSITE:
                rejected = f"metadata MIME type {text(metadata_encoding)!r} is not composite"
            elif summary["auth"] is not None and check_credentials(
                    summary["auth"], args.users, args.tokens) is None:
                rejected = "bad SETUP credentials"
            emit({"event": "setup", **connection.setup, "rejected": rejected})
            if rejected == "bad SETUP credentials":
                raise RuntimeError(rejected)  # rsocket-py sends REJECTED_SETUP with this text
            await super().on_setup(data_encoding, metadata_encoding, payload)

        async def _verify_authentication(self, route_name: str, composite_metadata):
            # rsocket-py's own verifier demands auth on every route: only secure.* here
            if not route_name.startswith("secure."):
                return
            auth = summarize(composite_metadata)["auth"] or connection.setup_auth
            if auth is None:
                raise RSocketProtocolError(ErrorCode.REJECTED,
                                           f"authentication required for {route_name!r}")
            if check_credentials(auth, args.users, args.tokens) is None:
                raise RSocketProtocolError(ErrorCode.REJECTED,
                                           f"bad {auth['type']} credentials")

    handler = Handler(router)
    return handler


def main(argv: list[str]) -> None:
    # rsocket-py logs every refused request with a traceback at ERROR: keep stderr readable
    logging.basicConfig(level=logging.CRITICAL, stream=sys.stderr)
    args = parse_or_fail(parse_args, argv)
    asyncio.run(serve_tcp(args, lambda reader, writer: ChannelFlagServer(
        TransportTCP(reader, writer), handler_factory=lambda: make_handler(args))))


if __name__ == "__main__":
    main(sys.argv[1:])
