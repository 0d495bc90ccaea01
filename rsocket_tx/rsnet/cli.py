"""``rsocket-tx rsnet``: subscribe to a Reactive Streams network publisher and print its
elements, or publish lines under a name.

Examples::

    rsocket-tx rsnet subscribe rsnet+tcp://localhost:7880 count/5          # 1 .. 5
    rsocket-tx rsnet subscribe rsnet+tcp://localhost:7880 count --limit 3 --demand 2
    rsocket-tx rsnet subscribe 'rsnet+tls://example.com:7881?trustRoots=ca.pem' count/3
    rsocket-tx rsnet subscribe rsnet+ws://localhost:8080/rsnet ints/4 -o json
    printf 'a\\nb\\n' | rsocket-tx rsnet publish rsnet+tcp://localhost:7880 lines
    rsocket-tx rsnet publish rsnet+tcp://localhost:7880 lines -d @lines.txt --serve-only

``subscribe`` subscribes to the publisher NAME of the server with a demand window of
``--demand`` elements (requested up front, topped up by half as elements are printed) and
prints each element: ``text`` (default) the bytes and a newline; ``raw`` the bytes alone;
``json`` one line ``{"data": TEXT}`` (``{"data_base64": ...}`` when not UTF-8). ``--limit N``
cancels after N elements.

``publish`` publishes each line (without its end of line) of its data as one element of the
publisher NAME on this side of the connection. The data is given as for every ``rsocket-tx``
command: ``--data``/``-d`` ``TEXT``, ``@FILE``, ``-`` (standard input, the default) or
``@@TEXT``; ``DATA`` (positional, after NAME) and ``--data-file FILE`` are the same. The
protocol is symmetric, the server subscribes to the client. To make it do so, ``publish``
subscribes to the server's publisher ``--through`` (default ``echo/NAME``: the demo server
subscribes back to NAME and relays it) and prints what comes back; it ends when that
subscription completes. With ``--serve-only`` it subscribes to nothing and ends once one of
the server's subscriptions to NAME has been sent every line (for servers that subscribe by
themselves).

Exit status (as for the other ``rsocket-tx`` commands): 0 success; 1 the publisher sent
*onError* (printed); 2 bad usage or unreadable input; 3 cannot connect, or the connection
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

from ..faces.clikit import (
    EXIT_CONNECTION,
    EXIT_OK,
    EXIT_RSOCKET_ERROR,
    EXIT_TIMEOUT,
    EXIT_USAGE,
    Face,
    Streams,
    UsageError,
    add_payload_arguments,
    await_command,
    exit_status_for,
    format_data,
    parse_timeout,
    read_source,
    resolve_payload_arguments,
)
from ..faces.serving import SettingsError, parse_int_option
from .errors import ConnectionClosedError, RSNetError, SubscriptionError
from .publishers import DEFAULT_WINDOW
from .tap import CONFIG_OPTIONS, parse_config

__all__ = ["FACE", "add_parser", "validate", "execute", "read_lines", "EXIT_ON_ERROR"]

#: The publisher sent *onError* (exit status; RSocket's commands use it for an ERROR).
EXIT_ON_ERROR = EXIT_RSOCKET_ERROR

_ENDPOINT_HELP = (
    "where the server listens: a URI (rsnet+tcp://HOST:PORT, rsnet+tls://HOST:PORT?trustRoots="
    "CA.pem, rsnet+ws://HOST:PORT/PATH, rsnet+wss://...; tcp://, tls://, ws:// too) or a"
    " Twisted endpoint string (tcp:host=H:port=P)"
)


def _summary(text: str) -> dict[str, str]:
    return {"help": text, "description": text}


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``rsnet`` command, with its subcommands, to ``rsocket-tx``.

    :param commands: the subparsers action of the ``rsocket-tx`` parser.
    :returns: the ``rsnet`` parser.
    """
    rsnet = commands.add_parser(
        "rsnet", help="Reactive Streams network: subscribe, publish (rsnet COMMAND --help)",
        description="A client of the Reactive Streams network protocol: subscribe to a"
        " server's publisher, or publish lines for the server to subscribe to.",
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = rsnet.add_subparsers(dest="rsnet_command", metavar="RSNET_COMMAND",
                               parser_class=type(rsnet))
    sub.required = True
    subscribe = sub.add_parser("subscribe", **_summary(
        "subscribe to the server's publisher NAME, print its elements"))
    subscribe.add_argument("endpoint", metavar="ENDPOINT", help=_ENDPOINT_HELP)
    subscribe.add_argument("name", metavar="NAME", help="the publisher's name")
    subscribe.add_argument("--demand", metavar="N",
                           help="the demand window: elements requested up front and at most"
                           " waiting to be printed; half of it is requested again as"
                           f" elements are printed (default {DEFAULT_WINDOW})")
    subscribe.add_argument("--limit", "-n", metavar="N",
                           help="cancel after N elements (default: until onComplete)")
    _add_output(subscribe)
    publish = sub.add_parser("publish", **_summary(
        "publish lines of standard input as the publisher NAME, for the server to"
        " subscribe to"))
    publish.add_argument("endpoint", metavar="ENDPOINT", help=_ENDPOINT_HELP)
    publish.add_argument("name", metavar="NAME", help="the name to publish the lines under")
    add_payload_arguments(publish, data="the elements, one per line; default: standard input")
    publish.add_argument("--through", metavar="PUBLISHER",
                         help="the server's publisher to subscribe to, which makes it"
                         " subscribe to NAME (default echo/NAME); what it sends is printed")
    publish.add_argument("--serve-only", action="store_true",
                         help="subscribe to nothing: end once a subscription of the server"
                         " to NAME has been sent every line")
    publish.add_argument("--demand", metavar="N",
                         help=f"the demand window of --through (default {DEFAULT_WINDOW})")
    _add_output(publish)
    for parser in (subscribe, publish):
        _add_common(parser)
        parser.set_defaults(rsnet_usage=parser.format_usage())
    return rsnet


def _add_output(p: argparse.ArgumentParser) -> None:
    p.add_argument("--output", "-o", choices=("text", "raw", "json"), default="text",
                   help="text: each element and a newline; raw: the bytes alone; json: one"
                   " JSON object per element (default text)")


def _add_common(p: argparse.ArgumentParser) -> None:
    for option in CONFIG_OPTIONS:
        if option.client:
            p.add_argument(f"--{option.name}", dest=option.attr, metavar=option.metavar,
                           help=option.help)
    p.add_argument("--timeout", metavar="SECONDS",
                   help="give up after SECONDS for the whole command (exit status 4);"
                   " default: none")


def _epilog() -> str:
    text = (__doc__ or "").split("Examples::", 1)[-1].split("\n\n``subscribe``", 1)[0]
    return "examples:" + text.replace("\\\\", "\\").rstrip()


def validate(args: argparse.Namespace) -> None:
    """Check and convert the arguments of a ``rsocket-tx rsnet`` command (after argparse).

    Sets ``args.config`` (an :class:`~rsocket_tx.rsnet.config.RSNetConfig`), ``args.timeout``
    (seconds or None), ``args.demand`` (items) and for ``subscribe`` ``args.limit`` (items or
    None), for ``publish`` ``args.through`` (a name or None).

    :raises UsageError: naming the first invalid option, with the subcommand's usage.
    """
    try:
        args.config = parse_config({o.attr: getattr(args, o.attr) for o in CONFIG_OPTIONS
                                    if o.client})
        args.timeout = parse_timeout(args.timeout)
        args.demand = parse_int_option("demand", args.demand, minimum=1, maximum=2**63 - 1,
                                       unit="elements") or DEFAULT_WINDOW
        if args.rsnet_command == "subscribe":
            args.limit = parse_int_option("limit", args.limit, minimum=1, unit="elements")
        else:
            resolve_payload_arguments(args, "-")
            if args.serve_only and args.through is not None:
                raise SettingsError("give either --through or --serve-only, not both")
            if not args.serve_only and args.through is None:
                args.through = f"echo/{args.name}"
    except SettingsError as e:
        raise UsageError(str(e), args.rsnet_usage) from None


def read_lines(data: bytes) -> list[bytes]:
    """The lines of ``data`` without their ends (``\\n`` or ``\\r\\n``); a last line without
    an end counts, an empty input has none."""
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


async def execute(reactor: Any, args: argparse.Namespace, stdin: Any, stdout: Any,
                  stderr: Any) -> int:
    """Run a validated ``rsocket-tx rsnet`` command on a running reactor.

    :param reactor: the reactor.
    :param args: from :func:`validate`.
    :param stdin: binary file (``publish``'s lines).
    :param stdout: binary file the elements are written to.
    :param stderr: text file for messages.
    :returns: the exit status (see the module docstring).
    """
    from .endpoints import client_endpoint

    out = Streams(stdin, stdout, stderr)
    try:
        endpoint = client_endpoint(reactor, args.endpoint)
    except (ValueError, TypeError) as e:
        out.error(str(e))
        return EXIT_USAGE
    lines: list[bytes] = []
    if args.rsnet_command == "publish":
        try:
            data = read_source(args.data, stdin) or b""
        except OSError as e:
            out.error(f"cannot read input: {e}")
            return EXIT_USAGE
        lines = read_lines(data)
    connection: list[Any] = []
    work = _run(reactor, endpoint, args, lines, out, connection)
    status = await await_command(reactor, Deferred.fromCoroutine(work), args.timeout, out,
                                 lambda e: _exit_status_for(e, args.endpoint, out))
    if connection:
        try:
            if status == EXIT_TIMEOUT:
                await connection[0].close()  # (a peer that is slow to answer a goodbye too)
            else:
                await connection[0].goodbye()
        except Exception:  # noqa: BLE001 - the command's outcome is already decided
            pass
    return status


async def _run(reactor: Any, endpoint: Any, args: argparse.Namespace, lines: list[bytes],
               out: Streams, connection: list[Any]) -> int:
    from .client import connect

    publishers = None
    done: Deferred[None] = Deferred()
    if args.rsnet_command == "publish":
        name = args.name

        def publish(request: Any) -> Any:
            def elements() -> Any:
                yield from lines
                if args.serve_only and not done.called:
                    # every line is sent: end once the onComplete queued now is written
                    reactor.callLater(0, done.callback, None)

            return elements()

        publishers = {name: publish}
    protocol = await connect(reactor, endpoint, publishers, args.config)
    connection.append(protocol)
    if args.rsnet_command == "publish" and args.serve_only:
        await done
        return EXIT_OK
    target = args.name if args.rsnet_command == "subscribe" else args.through
    subscription = protocol.subscribe(target, window=args.demand)
    limit = getattr(args, "limit", None)
    count = 0
    try:
        async for element in subscription:
            out.write(format_data(element, args.output))
            count += 1
            if limit is not None and count >= limit:
                break
    finally:
        subscription.cancel()
    return EXIT_OK


def _exit_status_for(error: BaseException, endpoint: str, out: Streams) -> int:
    """Report ``error`` on stderr and return the exit status; re-raise what is unexpected."""
    return exit_status_for(error, endpoint, out, lambda e: _rsnet_status(e, out))


def _rsnet_status(error: BaseException, out: Streams) -> int | None:
    if isinstance(error, SubscriptionError):
        out.error(f"onError: {error.error}")
        return EXIT_ON_ERROR
    if isinstance(error, ConnectionClosedError):
        out.error(f"connection ended: {error.reason or error}")
        return EXIT_CONNECTION
    if isinstance(error, RSNetError):
        out.error(f"error: {error}")
        return EXIT_CONNECTION
    return None


#: ``rsocket-tx rsnet``, as :mod:`rsocket_tx.faces.main` gathers it (no command of it serves).
FACE = Face(
    add_commands=lambda commands: {"rsnet": add_parser(commands)},
    validate=validate,
    execute=lambda reactor, args, streams, interrupted: execute(
        reactor, args, streams.stdin, streams.stdout, streams.stderr),
    is_server=lambda args: False,
)
