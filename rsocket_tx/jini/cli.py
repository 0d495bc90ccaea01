"""``rsocket-tx jini``: send requests to a Jini ERI mux server and print the responses.

Examples::

    rsocket-tx jini request jini+tcp://localhost:9000 -d hello       # prints hello
    rsocket-tx jini request tcp:host=localhost:port=9000 -d @request.bin -o raw
    rsocket-tx jini request 'jini+tls://example.com:9443?trustRoots=ca.pem' -d hello
    echo hello | rsocket-tx jini request jini+tcp://localhost:9000 -d -
    rsocket-tx jini request jini+tcp://localhost:9000 -d hi --repeat 1000 --concurrency 128
    rsocket-tx jini request jini+tcp://localhost:9000 -d hi --initial-ration 256 --fragment-size 100
    rsocket-tx jini ping jini+tcp://localhost:9000 --count 3

The request body is given as for every ``rsocket-tx`` command: ``--data``/``-d`` ``TEXT``
(UTF-8), ``@FILE`` (its bytes), ``-`` (standard input) or ``@@TEXT`` (the literal ``@TEXT``);
``DATA`` (positional) and ``--data-file FILE`` are the same; without any, the body is empty.
Each response is written to standard output: ``text``
(default) the response bytes and a newline; ``raw`` the bytes alone; ``json`` one line
``{"data": TEXT}`` (``{"data_base64": ...}`` when the bytes are not UTF-8).

Exit status (as for the other ``rsocket-tx`` commands): 0 success; 1 the server aborted the
request (its *Abort*: the message says whether the request may have been processed); 2 bad
usage or unreadable input; 3 cannot connect, or the connection ended (lost, the server's
*Error* or *Shutdown*); 4 ``--timeout`` expired; 130 interrupted.

The command is part of ``rsocket-tx`` (:mod:`rsocket_tx.faces.main`), which calls
:func:`add_parser`, :func:`validate` and :func:`execute` through :data:`FACE`. The plumbing
shared with the other protocols' commands is the face kit's (:mod:`rsocket_tx.faces.clikit`);
this face imports no other face.
"""

from __future__ import annotations

import argparse

from twisted.internet.defer import Deferred, DeferredSemaphore

from ..faces.clikit import (
    EXIT_CONNECTION,
    EXIT_OK,
    EXIT_RSOCKET_ERROR,
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
from .errors import (
    ConnectionShutdownError,
    ConnectionTerminatedError,
    JiniMuxError,
    SessionAbortedError,
)
from .tap import CONFIG_OPTIONS, client_endpoint, parse_config

__all__ = [
    "FACE",
    "add_parser",
    "validate",
    "execute",
    "format_response",
    "EXIT_ABORTED",
    "MAX_CONCURRENCY",
]

#: The server aborted the request (exit status; RSocket's commands use it for an ERROR).
EXIT_ABORTED = EXIT_RSOCKET_ERROR
#: The most requests ``--concurrency`` allows in flight at once.
MAX_CONCURRENCY = 65_536

_ENDPOINT_HELP = (
    "where the server listens: a URI (jini+tcp://HOST:PORT, jini+tls://HOST:PORT?trustRoots=CA.pem;"
    " tcp:// and tls:// too) or a Twisted endpoint string (tcp:host=H:port=P,"
    " tls:host=H:port=P:trustRoots=CADIR)"
)


def _summary(text: str) -> dict:
    return {"help": text, "description": text}


def add_parser(commands) -> argparse.ArgumentParser:
    """Add the ``jini`` command, with its subcommands, to ``rsocket-tx``.

    :param commands: the subparsers action of the ``rsocket-tx`` parser (its parser class
        raises instead of exiting; the subcommands use it too).
    :returns: the ``jini`` parser.
    """
    jini = commands.add_parser(
        "jini", help="Jini ERI mux client: send requests, ping (jini COMMAND --help)",
        description="A client of the Jini ERI multiplexing protocol (Apache River's"
        " TcpEndpoint): send requests, print the responses.",
        epilog=_epilog(), formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = jini.add_subparsers(dest="jini_command", metavar="JINI_COMMAND",
                              parser_class=type(jini))
    sub.required = True
    request = sub.add_parser("request", **_summary(
        "send a request body on a new session, print the response"))
    request.add_argument("endpoint", metavar="ENDPOINT", help=_ENDPOINT_HELP)
    add_payload_arguments(request, data="the request body; default empty")
    request.add_argument("--repeat", "-n", metavar="N",
                         help="send the request N times (default 1); the responses are"
                         " printed in order")
    request.add_argument("--concurrency", "-c", metavar="N",
                         help="with --repeat: at most N requests in flight at once (a"
                         " connection carries 128 sessions; more open more connections;"
                         " default 1)")
    request.add_argument("--output", "-o", choices=("text", "raw", "json"), default="text",
                         help="text: the response bytes and a newline; raw: the bytes alone;"
                         " json: one JSON object per response (default text)")
    _add_common(request)
    ping = sub.add_parser("ping", **_summary(
        "send Ping messages on one connection, print each PingAck's round trip"))
    ping.add_argument("endpoint", metavar="ENDPOINT", help=_ENDPOINT_HELP)
    ping.add_argument("--count", metavar="N", help="pings to send, one after the other"
                      " (default 1)")
    _add_common(ping)
    for parser in (request, ping):
        parser.set_defaults(jini_usage=parser.format_usage())
    return jini


def _add_common(p: argparse.ArgumentParser) -> None:
    for option in CONFIG_OPTIONS:
        if option.client:
            names = [f"--{option.name}"]
            if option.name == "initial-ration":
                names.append("--ration")
            p.add_argument(*names, dest=option.attr, metavar=option.metavar, help=option.help)
    p.add_argument("--timeout", metavar="SECONDS",
                   help="give up after SECONDS for the whole command (exit status 4);"
                   " default: none")


def _epilog() -> str:
    text = (__doc__ or "").split("Examples::", 1)[-1].split("\n\nThe command is part", 1)[0]
    return "examples:" + text.replace("``", "'").replace("*", "").rstrip()


def validate(args: argparse.Namespace) -> None:
    """Check and convert the arguments of a ``rsocket-tx jini`` command (after argparse).

    Sets ``args.config`` (a :class:`~rsocket_tx.jini.config.JiniMuxConfig`), ``args.timeout``
    (seconds or None), and for ``request`` ``args.repeat`` and ``args.concurrency`` (ints),
    for ``ping`` ``args.count``. The endpoint and the data file are checked when run.

    :raises UsageError: naming the first invalid option, with the subcommand's usage.
    """
    try:
        _validate(args)
    except SettingsError as e:
        raise UsageError(str(e), args.jini_usage) from None


def _validate(args: argparse.Namespace) -> None:
    args.config = parse_config({o.attr: getattr(args, o.attr) for o in CONFIG_OPTIONS
                                if o.client})
    args.timeout = parse_timeout(args.timeout)
    if args.jini_command == "request":
        resolve_payload_arguments(args)
        args.repeat = parse_int_option("repeat", args.repeat, minimum=1, unit="requests") or 1
        args.concurrency = parse_int_option("concurrency", args.concurrency, minimum=1,
                                            maximum=MAX_CONCURRENCY, unit="requests") or 1
    else:
        args.count = parse_int_option("count", args.count, minimum=1, unit="pings") or 1


# -- output ----------------------------------------------------------------------------------


#: Render one response for standard output (:func:`rsocket_tx.faces.clikit.format_data`).
format_response = format_data


# -- running ---------------------------------------------------------------------------------


async def execute(reactor, args: argparse.Namespace, stdin, stdout, stderr) -> int:
    """Run a validated ``rsocket-tx jini`` command on a running reactor.

    :param reactor: the reactor.
    :param args: from :func:`validate`.
    :param stdin: binary file (``--data-file -``).
    :param stdout: binary file the responses are written to.
    :param stderr: text file for messages.
    :returns: the exit status (see the module docstring).
    """
    out = Streams(stdin, stdout, stderr)
    try:
        endpoint = client_endpoint(reactor, args.endpoint)
    except (ValueError, TypeError) as e:
        out.error(str(e))
        return EXIT_USAGE
    body = b""
    if args.jini_command == "request":
        try:
            body = read_source(args.data, stdin) or b""
        except OSError as e:
            out.error(f"cannot read input: {e}")
            return EXIT_USAGE

    from .client import JiniMuxClient

    client = JiniMuxClient(reactor, endpoint, args.config)
    if args.jini_command == "request":
        work = _requests(client, body, args, out)
    else:
        work = _pings(client, args, out)
    status = await await_command(reactor, Deferred.fromCoroutine(work), args.timeout, out,
                                 lambda e: _exit_status_for(e, args.endpoint, out))
    await client.close()
    return status


async def _requests(client, body: bytes, args: argparse.Namespace, out: Streams) -> int:
    """Send ``body`` ``args.repeat`` times, ``args.concurrency`` at once; print the responses
    in order; :data:`EXIT_OK`. The first failure cancels the rest and is raised."""
    if args.repeat == 1:
        out.write(format_response(await client.request(body), args.output))
        return EXIT_OK
    semaphore = DeferredSemaphore(args.concurrency)
    pending: list[Deferred] = [semaphore.run(client.request, body)
                               for _ in range(args.repeat)]
    try:
        for d in pending:
            out.write(format_response(await d, args.output))
    finally:
        for d in pending:
            if not d.called:
                d.cancel()
            d.addErrback(lambda _: None)
    return EXIT_OK


async def _pings(client, args: argparse.Namespace, out: Streams) -> int:
    for i in range(1, args.count + 1):
        rtt = await client.ping()
        out.write(f"PingAck {i} from {args.endpoint}: {rtt * 1000:.3f} ms\n".encode())
    return EXIT_OK


def _exit_status_for(error: BaseException, endpoint: str, out: Streams) -> int:
    """Report ``error`` on stderr and return the exit status; re-raise what is unexpected."""
    return exit_status_for(error, endpoint, out, lambda e: _jini_status(e, out))


def _jini_status(error: BaseException, out: Streams) -> int | None:
    if isinstance(error, SessionAbortedError):
        retry = "it may have been partially processed" if error.partial else \
            "it was not processed, a retry is safe"
        detail = f": {error.detail}" if error.detail else ""
        out.error(f"the server aborted the request ({retry}){detail}")
        return EXIT_ABORTED
    if isinstance(error, ConnectionShutdownError):
        out.error(f"the server shut the connection down: {error.reason or error}")
        return EXIT_CONNECTION
    if isinstance(error, ConnectionTerminatedError):
        out.error(f"connection ended: {error.reason or error}")
        return EXIT_CONNECTION
    if isinstance(error, JiniMuxError):
        out.error(f"error: {error}")
        return EXIT_CONNECTION
    return None


#: ``rsocket-tx jini``, as :mod:`rsocket_tx.faces.main` gathers it (no command of it serves).
FACE = Face(
    add_commands=lambda commands: {"jini": add_parser(commands)},
    validate=validate,
    execute=lambda reactor, args, streams, interrupted: execute(
        reactor, args, streams.stdin, streams.stdout, streams.stderr),
    is_server=lambda args: False,
)
