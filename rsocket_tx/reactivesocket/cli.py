"""``rsocket-tx rs2015``: a client (and a server) of the 2015 ReactiveSocket draft.

Examples::

    rsocket-tx rs2015 serve rs2015+tcp://127.0.0.1:7070 \
        --responder rsocket_tx.apps.demo:DemoResponder
    rsocket-tx rs2015 request rs2015+tcp://localhost:7070 -d hello
    rsocket-tx rs2015 fnf rs2015+tcp://localhost:7070 -d note --metadata m
    rsocket-tx rs2015 stream rs2015+tcp://localhost:7070 -d 5 --request-n 2 -o json
    rsocket-tx rs2015 sub rs2015+tcp://localhost:7070 -d ticks --take 10
    rsocket-tx rs2015 metadata-push rs2015+tcp://localhost:7070 --metadata hello

The payload is given as for every ``rsocket-tx`` command: ``--data``/``-d``, ``--metadata``/``-m``,
``--setup-data`` and ``--setup-metadata`` take ``TEXT``, ``@FILE``, ``-`` (standard input; one
of them at most) or ``@@TEXT`` (the literal ``@TEXT``); ``DATA`` (positional) and
``--data-file FILE`` are the same as ``--data``. ``metadata-push`` has no data and requires
``--metadata``. Each received
payload is written to standard output: ``text`` (default) its data and a newline; ``json`` one
line ``{"data": ..., "metadata": ...}``. ``sub`` runs until ``--take`` items have arrived (then
cancels), the server's ERROR, or ``--timeout``.

Exit status (as for the other ``rsocket-tx`` commands): 0 success; 1 the server answered
ERROR or SETUP_ERROR; 2 bad usage or unreadable input; 3 cannot connect, or the connection
ended; 4 ``--timeout`` expired; 130 interrupted.

The command is part of ``rsocket-tx`` (:mod:`rsocket_tx.faces.main`), which calls
:func:`add_parser`, :func:`validate` and :func:`execute` through :data:`FACE`. The plumbing
shared with the other protocols' commands is the face kit's (:mod:`rsocket_tx.faces.clikit`);
this face imports no other face.
"""

from __future__ import annotations

import argparse
from typing import Any

from twisted.internet.defer import Deferred

from ..core.config import ConnectionConfig
from ..core.errors import ConnectionLostError, RSocketError
from ..core.payload import Payload
from ..faces.clikit import (
    EXIT_CONNECTION,
    EXIT_OK,
    EXIT_RSOCKET_ERROR,
    EXIT_USAGE,
    PAYLOAD_SOURCES,
    Face,
    Streams,
    UsageError,
    add_payload_arguments,
    await_command,
    exit_status_for,
    format_payload,
    parse_timeout,
    read_source,
    resolve_payload_arguments,
)
from ..faces.serving import SettingsError, load_class, parse_int_option
from ..responder import Responder

__all__ = ["FACE", "COMMANDS", "add_parser", "execute", "validate"]

#: The client commands and what they do.
COMMANDS = {
    "request": "request-response: send one payload, print the response",
    "fnf": "fire-and-forget: send one payload",
    "stream": "request-stream: send one payload, print the stream",
    "sub": "request-subscription: send one payload, print the endless stream",
    "metadata-push": "metadata-push: send metadata on the connection",
}
DEFAULT_REQUEST_N = 256

_ENDPOINT_HELP = ("the server: a URI (rs2015+tcp://HOST:PORT, rs2015+tls://HOST:PORT?trustRoots="
                  "CA.pem, rs2015+ws://HOST:PORT/PATH; tcp://, tls://, ws:// too) or a Twisted"
                  " endpoint string (tcp:host=H:port=P)")


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``rs2015`` command, with its subcommands, to ``rsocket-tx``.

    :param commands: the subparsers action of the ``rsocket-tx`` parser.
    :returns: the ``rs2015`` parser.
    """
    top = commands.add_parser(
        "rs2015", help="the 2015 ReactiveSocket draft: request, fnf, stream, sub,"
        " metadata-push, serve (rs2015 COMMAND --help)",
        description="A client and server of the 2015 ReactiveSocket draft.",
        epilog="examples:" + (__doc__ or "").split("Examples::", 1)[-1].split("\n\nThe payload")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = top.add_subparsers(dest="rs2015_command", metavar="RS2015_COMMAND",
                             parser_class=type(top))
    sub.required = True
    for name, summary in COMMANDS.items():
        p = sub.add_parser(name, help=summary, description=summary)
        p.add_argument("endpoint", metavar="ENDPOINT", help=_ENDPOINT_HELP)
        push = name == "metadata-push"
        add_payload_arguments(
            p, data=None if push else "the payload's data; default empty",
            metadata="the metadata to push (required)" if push else
            "the payload's metadata; default: none (no M flag)", setup=True)
        if name in ("stream", "sub"):
            p.add_argument("--request-n", "-n", metavar="N",
                           help=f"items requested at once (default {DEFAULT_REQUEST_N})")
            p.add_argument("--take", metavar="N", help="cancel after N items")
        p.add_argument("--data-mime", default="application/octet-stream", metavar="MIME",
                       help="SETUP data MIME type")
        p.add_argument("--metadata-mime", default="application/octet-stream", metavar="MIME",
                       help="SETUP metadata MIME type")
        p.add_argument("--lease", action="store_true",
                       help="set the SETUP L flag: wait for the server's LEASE")
        p.add_argument("--output", "-o", choices=("text", "json"), default="text",
                       help="text: data and a newline; json: one JSON object per payload")
        p.add_argument("--timeout", metavar="SECONDS",
                       help="give up after SECONDS (exit status 4); default: none")
        p.set_defaults(rs2015_usage=p.format_usage())
    serve = sub.add_parser("serve", help="serve a Responder until SIGINT/SIGTERM",
                           description="Serve a Responder over the 2015 draft until"
                           " SIGINT/SIGTERM.")
    serve.add_argument("endpoint", metavar="ENDPOINT", help="where to listen (rs2015+tcp://"
                       "127.0.0.1:7070, rs2015+ws://127.0.0.1:8080/rs, tcp:7070, ...)")
    serve.add_argument("--responder", metavar="MODULE:CLASS",
                       default="rsocket_tx.apps.demo:DemoResponder",
                       help="the Responder subclass (default rsocket_tx.apps.demo:DemoResponder)")
    serve.set_defaults(rs2015_usage=serve.format_usage())
    return top


def validate(args: argparse.Namespace) -> None:
    """Check and convert the arguments of a ``rsocket-tx rs2015`` command (after argparse):
    ``args.timeout`` (seconds or None), ``args.request_n`` and ``args.take`` (items),
    ``args.responder`` (a class, for ``serve``).

    :raises UsageError: naming the first invalid option, with the subcommand's usage.
    """
    try:
        if args.rs2015_command == "serve":
            args.responder = load_class("responder", args.responder, Responder,
                                        "rsocket_tx.Responder")
            return
        args.timeout = parse_timeout(args.timeout)
        resolve_payload_arguments(args)
        if args.rs2015_command == "metadata-push" and args.metadata is None:
            raise SettingsError("--metadata: required by metadata-push")
        if args.rs2015_command in ("stream", "sub"):
            args.request_n = parse_int_option("request-n", args.request_n, minimum=1,
                                              maximum=2**31 - 1, unit="items") \
                or DEFAULT_REQUEST_N
            args.take = parse_int_option("take", args.take, minimum=1, unit="items")
    except SettingsError as e:
        raise UsageError(str(e), args.rs2015_usage) from None


async def execute(reactor: Any, args: argparse.Namespace, stdin: Any, stdout: Any,
                  stderr: Any) -> int:
    """Run a validated ``rsocket-tx rs2015`` command on a running reactor.

    :returns: the exit status (see the module docstring).
    """
    out = Streams(stdin, stdout, stderr)
    if args.rs2015_command == "serve":
        return await _serve(reactor, args, out)
    try:
        data, metadata, setup_data, setup_metadata = (
            read_source(getattr(args, name), stdin) for name in PAYLOAD_SOURCES)
    except OSError as e:
        out.error(f"cannot read input: {e}")
        return EXIT_USAGE
    setup = None
    if setup_data is not None or setup_metadata is not None:
        setup = Payload(setup_data or b"", setup_metadata)
    return await await_command(reactor, Deferred.fromCoroutine(
        _client(reactor, args, out, data, metadata, setup)), args.timeout, out,
        lambda e: _exit_status_for(e, args.endpoint, out))


async def _client(reactor: Any, args: argparse.Namespace, out: Streams, data: bytes | None,
                  metadata: bytes | None, setup: Payload | None) -> int:
    from .client import connect

    try:
        rs = await connect(args.endpoint, reactor=reactor, setup_payload=setup,
                           data_mime_type=args.data_mime, metadata_mime_type=args.metadata_mime,
                           lease=args.lease, config=ConnectionConfig())
    except ValueError as e:
        out.error(str(e))
        return EXIT_USAGE
    command = args.rs2015_command
    payload = Payload(data or b"", metadata)
    try:
        if command == "request":
            answer = await rs.request_response(payload)
            if answer is not None:
                out.write(format_payload(answer, args.output))
        elif command == "fnf":
            await rs.fire_and_forget(payload)
        elif command == "metadata-push":
            await rs.metadata_push(metadata or b"")
        else:
            prefetch = min(args.request_n, args.take) if args.take else args.request_n
            stream = (rs.request_stream(payload, prefetch=prefetch) if command == "stream" else
                      rs.request_subscription(payload, prefetch=prefetch))
            count = 0
            async for item in stream:
                out.write(format_payload(item, args.output))
                count += 1
                if args.take is not None and count >= args.take:
                    stream.cancel()
                    break
    except BaseException:
        rs.close(drain_timeout=0).addErrback(lambda _: None)
        raise
    await rs.close()
    return EXIT_OK


async def _serve(reactor: Any, args: argparse.Namespace, out: Streams) -> int:
    from .client import server_endpoint
    from .protocol import ReactiveSocketServerFactory

    try:
        endpoint = server_endpoint(reactor, args.endpoint)
    except ValueError as e:
        out.error(str(e))
        return EXIT_USAGE
    factory = ReactiveSocketServerFactory(args.responder, reactor=reactor)
    try:
        port = await endpoint.listen(factory)
    except Exception as e:  # noqa: BLE001 - reported as the exit status
        out.error(f"cannot listen: {e}")
        return EXIT_CONNECTION
    out.stderr.write(f"rsocket-tx rs2015: listening on {port.getHost()}\n")
    out.stderr.flush()

    async def stop() -> None:
        await factory.close_connections(0)
        await port.stopListening()

    reactor.addSystemEventTrigger("before", "shutdown", lambda: Deferred.fromCoroutine(stop()))
    await Deferred()  # until the reactor stops
    return EXIT_OK  # pragma: no cover


def _exit_status_for(error: BaseException, endpoint: str, out: Streams) -> int:
    """Report ``error`` and return the exit status; re-raise what is unexpected."""
    return exit_status_for(error, endpoint, out, lambda e: _rs2015_status(e, out))


def _rs2015_status(error: BaseException, out: Streams) -> int | None:
    if isinstance(error, ConnectionLostError):
        out.error(f"connection lost: {error}")
        return EXIT_CONNECTION
    if isinstance(error, RSocketError):
        out.error(f"error: {error.message}")
        return EXIT_RSOCKET_ERROR
    return None


#: ``rsocket-tx rs2015``, as :mod:`rsocket_tx.faces.main` gathers it.
FACE = Face(
    add_commands=lambda commands: {"rs2015": add_parser(commands)},
    validate=validate,
    execute=lambda reactor, args, streams, interrupted: execute(
        reactor, args, streams.stdin, streams.stdout, streams.stderr),
    is_server=lambda args: args.rs2015_command == "serve",
)
