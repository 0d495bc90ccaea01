"""``rsocket-tx``: an RSocket command-line client and server.

Examples::

    rsocket-tx serve tcp:7878                         # the demo responder (echo and count)
    rsocket-tx serve tcp:7878 ws:8080:path=/rsocket 'tls://:7879?privateKey=key.pem&certKey=cert.pem'
    rsocket-tx request 'tls://localhost:7879?trustRoots=ca.pem' -d hello
    rsocket-tx stream ws://localhost:8080/rsocket -d 5
    rsocket-tx request tcp://localhost:7878 -d hello -m meta
    rsocket-tx request tcp:host=localhost:port=7878 -d @question.json --output json
    rsocket-tx stream tcp://localhost:7878 -d 5       # prints 0 … 4, one per line
    rsocket-tx stream tcp://localhost:7878 -d 1000 --take 3 --request-n 2
    echo -e "a\\nb" | rsocket-tx channel tcp://localhost:7878
    rsocket-tx fnf tcp://localhost:7878 -d "log me"
    rsocket-tx metadata-push tcp://localhost:7878 -m "tenant=blue"
    rsocket-tx --version
    rsocket-tx request tcp://localhost:7878 --route orders.7 --auth-simple alice:secret \\
        --data-mime application/json -d '{"qty": 2}'

``--route``, ``--auth-simple``/``--auth-bearer`` and a per-stream ``--data-mime`` are sent as
entries of composite metadata (``message/x.rsocket.composite-metadata.v0``, the SETUP metadata
MIME type they select by default), after which ``--metadata`` may add entries of its own.

Values of ``--data``, ``--metadata``, ``--setup-data`` and ``--setup-metadata``: ``TEXT`` (the
literal, UTF-8), ``@FILE`` (the file's bytes), ``-`` (all of standard input), ``@@TEXT`` (the
literal ``@TEXT``). Only one of them may read standard input. ``DATA`` (the last positional
argument) and ``--data-file FILE`` are the same as ``--data``; give the data once. Every
protocol's client commands (``jini``, ``rsnet``, ``rs2015``) take their payload with these
same options (:func:`add_payload_arguments`). ``channel`` sends one payload per line of its
data (standard input by default); the metadata goes with the first payload only.

Output (``--output``):

* ``text`` (default): each payload's data, as raw bytes, followed by a newline.
* ``json``: one JSON object per line and payload: ``{"data": TEXT, "metadata": TEXT}``; a value
  that is not valid UTF-8 is given base64-encoded under ``data_base64`` / ``metadata_base64``
  instead, and ``"metadata": null`` means the payload had no metadata.

A client command writes only its own messages on standard error; ``--debug`` adds every frame
and the library's log lines. Secrets given on the command line (``--auth-simple``'s password,
``--auth-bearer``'s token, a URI's password) are written as ``***``.

Exit status: 0 success; 1 the peer answered with an RSocket ERROR (its code name and message are
printed on standard error); 2 bad usage or unreadable input; 3 cannot connect, or the connection
was lost; 4 ``--timeout`` expired; 130 interrupted (SIGINT/SIGTERM) before the end.
"""

from __future__ import annotations

import argparse
import base64
import difflib
import io
import json
import os
import queue
import re
import sys
import threading
from collections.abc import Callable

from twisted.internet import error as internet_error
from twisted.internet.defer import CancelledError, Deferred, succeed
from twisted.internet.defer import TimeoutError as ConnectTimeout
from twisted.logger import (
    FilteringLogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    globalLogBeginner,
    textFileLogObserver,
)

from ..core.errors import ConnectionLostError, RSocketError
from ..core.payload import Payload
from ..extensions import COMPOSITE_METADATA, BearerAuth, SimpleAuth, build_metadata
from ..transports.endpoints import client_endpoint
from ..transports.tls import TLSError, TLSVerificationError
from .framelog import URI_PASSWORD, mask_uri_passwords
from .serving import (
    SettingsError,
    describe_listen_failure,
    parse_int_option,
    scheme_hint,
    suggest_option,
)
from .tap import (
    DEBUG_HELP,
    DEFAULT_LISTEN,
    SERVER_FLAGS,
    SERVER_OPTIONS,
    build_service,
    make_frame_logger,
    parse_fragment_size,
    parse_server_settings,
)

__all__ = [
    "main",
    "run",
    "build_parser",
    "parse_args",
    "UsageError",
    "EXIT_OK",
    "EXIT_RSOCKET_ERROR",
    "EXIT_USAGE",
    "EXIT_CONNECTION",
    "EXIT_TIMEOUT",
    "EXIT_INTERRUPTED",
    "Streams",
    "add_payload_arguments",
    "resolve_payload_arguments",
    "read_source",
    "PAYLOAD_SOURCES",
    "exit_status_for",
    "format_data",
    "parse_timeout",
    "await_command",
]

EXIT_OK = 0
EXIT_RSOCKET_ERROR = 1
EXIT_USAGE = 2
EXIT_CONNECTION = 3
EXIT_TIMEOUT = 4
EXIT_INTERRUPTED = 130

PROG = "rsocket-tx"
DEFAULT_MIME = "application/octet-stream"
DEFAULT_KEEPALIVE = 20_000  # ms
DEFAULT_MAX_LIFETIME = 90_000  # ms
DEFAULT_REQUEST_N = 256
DEFAULT_CONNECT_TIMEOUT = 10.0  # seconds


class UsageError(Exception):
    """The command line is invalid; ``str()`` is the message (without the usage line).

    :ivar usage: the usage line of the (sub)command, or ``""``.
    """

    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class _Exit(Exception):
    def __init__(self, status: int, message: str | None, stdout: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.stdout = stdout  # the message goes to standard output (--version)


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of exiting, so :func:`run` works in-process, and
    says "did you mean" for a near miss (an option, a command, a choice)."""

    def __init__(self, *args, **kwargs) -> None:
        self.known_options: list[str] = []  # (before: the base class adds --help)
        self.subcommand_actions: list[argparse.Action] = []
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        action = super().add_argument(*args, **kwargs)
        self.known_options.extend(o for o in action.option_strings if o.startswith("--"))
        return action

    def add_subparsers(self, **kwargs):
        action = super().add_subparsers(**kwargs)
        self.subcommand_actions.append(action)
        return action

    def all_options(self) -> list[str]:
        """The long options of this parser and of its subcommands, at every depth."""
        options = list(self.known_options)
        for action in self.subcommand_actions:
            choices = action.choices  # the subcommands' parsers, by name
            for sub in choices.values() if isinstance(choices, dict) else ():
                if isinstance(sub, _Parser):
                    options.extend(sub.all_options())
        return options

    def error(self, message):
        choice = _INVALID_CHOICE.search(message)
        if choice:
            choices = [c.strip().strip("'") for c in choice.group(2).split(",")]
            close = difflib.get_close_matches(choice.group(1), choices, n=1)
            if close:
                message += f" (did you mean {close[0]!r}?)"
        raise UsageError(message, self.format_usage())

    def exit(self, status=0, message=None):
        raise _Exit(status, message)


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


class _VersionAction(argparse.Action):
    """``--version``: print ``rsocket-tx VERSION`` on standard output and exit 0."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        raise _Exit(EXIT_OK, f"{PROG} {package_version()}\n", stdout=True)


def package_version() -> str:
    """The version of the installed ``rsocket_tx`` (``rsocket_tx.__version__``, else the
    package metadata)."""
    import rsocket_tx

    version = getattr(rsocket_tx, "__version__", None)
    if version:
        return str(version)
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as metadata_version

    try:
        return metadata_version("rsocket_tx")
    except PackageNotFoundError:
        return "unknown"


# -- parser ----------------------------------------------------------------------------------

_SOURCE_HELP = "TEXT, @FILE or - (standard input)"

#: The payload options whose values :func:`read_source` reads, as ``argparse`` destinations:
#: at most one of them may read standard input.
PAYLOAD_SOURCES = ("data", "metadata", "setup_data", "setup_metadata")


def add_payload_arguments(p: argparse.ArgumentParser, *, data: str | None,
                          metadata: str | None = None, setup: bool = False) -> None:
    """Add the payload arguments of a client command: the one grammar of every ``rsocket-tx``
    command, whatever its protocol (docs/cli.rst, *The payload*). Each value is ``TEXT``,
    ``@FILE``, ``-`` (standard input) or ``@@TEXT`` (:func:`read_source`):

    * the data, given once: ``DATA`` (positional, optional, after the positionals ``p`` has
      already), ``--data``/``-d DATA``, or ``--data-file``/``-f FILE`` (``-d @FILE``;
      ``-``: standard input);
    * ``--metadata``/``-m METADATA``, where the protocol has metadata;
    * ``--setup-data`` and ``--setup-metadata``, where the protocol has a SETUP payload.

    :func:`resolve_payload_arguments` then checks them (in the command's validation).

    :param p: the command's parser.
    :param data: the help of the data (what it is to this command); None: no data.
    :param metadata: the help of ``--metadata``; None: no metadata.
    :param setup: add ``--setup-data`` and ``--setup-metadata``.
    """
    if data is not None:
        p.add_argument("data_arg", metavar="DATA", nargs="?",
                       help=f"the same as --data (give the data once): {data}")
        p.add_argument("--data", "-d", metavar="DATA", help=f"{data}: {_SOURCE_HELP}")
        p.add_argument("--data-file", "-f", metavar="FILE",
                       help="the same as --data @FILE (- for standard input)")
    if metadata is not None:
        p.add_argument("--metadata", "-m", metavar="METADATA",
                       help=f"{metadata}: {_SOURCE_HELP}")
    if setup:
        p.add_argument("--setup-data", metavar="DATA", help=f"SETUP payload data: {_SOURCE_HELP}")
        p.add_argument("--setup-metadata", metavar="METADATA",
                       help=f"SETUP payload metadata: {_SOURCE_HELP}")


def resolve_payload_arguments(args: argparse.Namespace, default: str | None = None) -> None:
    """Check the arguments of :func:`add_payload_arguments` (after argparse) and set
    ``args.data`` to the data's value for :func:`read_source`, whichever way it was given
    (``default`` when it was not: None, empty data, or ``"-"``, standard input).

    :raises SettingsError: the data given more than once, or more than one option reading
        standard input.
    """
    data_file = getattr(args, "data_file", None)
    if data_file is not None and data_file != "-":
        # (@FILE; a name starting with @ as ./@NAME, or @@ would make it a literal)
        data_file = "@" + (f"./{data_file}" if data_file.startswith("@") else data_file)
    given = [(name, value) for name, value in (
        ("DATA", getattr(args, "data_arg", None)), ("--data", getattr(args, "data", None)),
        ("--data-file", data_file)) if value is not None]
    if len(given) > 1:
        raise SettingsError("give the data once: as DATA, with --data or with --data-file"
                            f" (got {' and '.join(name for name, _ in given)})")
    args.data = given[0][1] if given else default
    stdin_users = [name for name in PAYLOAD_SOURCES if getattr(args, name, None) == "-"]
    if len(stdin_users) > 1:
        shown = ", ".join("--" + n.replace("_", "-") for n in stdin_users)
        raise SettingsError(f"only one option can read standard input, got '-' for {shown}")


def _add_client_options(p: argparse.ArgumentParser, command: str) -> None:
    p.add_argument(
        "endpoint",
        metavar="ENDPOINT",
        help="where to connect: a URI (tcp://HOST:PORT, tls://HOST:PORT?trustRoots=CA.pem,"
        " ws://HOST:PORT/PATH, wss://HOST:PORT/PATH?trustRoots=CA.pem) or an endpoint string"
        " (tcp:host=H:port=P, tls:host=H:port=P:trustRoots=CADIR, ws:host=H:port=P:path=/P,"
        " wss:host=H:port=P:path=/P)",
    )
    add_payload_arguments(p, data=_data_help(command), metadata=_metadata_help(command),
                          setup=True)
    if command != "metadata-push":
        p.add_argument(
            "--route", "-r", metavar="ROUTE",
            help="the request's route (a routing tag in composite metadata)",
        )
        p.add_argument(
            "--auth-simple", metavar="USER:PASSWORD",
            help="simple (username and password) credentials in the request metadata",
        )
        p.add_argument(
            "--auth-bearer", metavar="TOKEN",
            help="bearer token credentials in the request metadata",
        )
        p.add_argument(
            "--setup-auth", action="store_true",
            help="send the --auth-* credentials in the SETUP metadata instead (they then hold"
            " for the whole connection)",
        )
    p.add_argument(
        "--data-mime",
        metavar="MIME",
        help=f"the request data's MIME type; also the SETUP data MIME type unless"
        f" --setup-data-mime differs, in which case it is sent as per-stream MIME metadata"
        f" (default {DEFAULT_MIME})",
    )
    p.add_argument(
        "--setup-data-mime",
        metavar="MIME",
        help="SETUP data MIME type (default: --data-mime, else application/octet-stream)",
    )
    p.add_argument(
        "--metadata-mime",
        metavar="MIME",
        help=f"SETUP metadata MIME type (default: {COMPOSITE_METADATA} when --route, --auth-*"
        f" or a per-stream --data-mime is given, else {DEFAULT_MIME})",
    )
    if command in ("stream", "channel"):
        p.add_argument("--take", metavar="N", help="stop (CANCEL) after N payloads; default: all")
        p.add_argument(
            "--request-n",
            metavar="N",
            help="credit requested at a time (the REQUEST_N batch, prefetch);"
            f" default {DEFAULT_REQUEST_N}",
        )
    p.add_argument(
        "--fragment",
        "--fragment-size",
        dest="fragment",
        metavar="BYTES",
        help="fragment payloads so no frame sent is larger than BYTES (>= 64); default: none",
    )
    p.add_argument(
        "--keepalive",
        metavar="MS",
        help=f"KEEPALIVE interval in milliseconds; default {DEFAULT_KEEPALIVE}",
    )
    p.add_argument(
        "--max-lifetime",
        metavar="MS",
        help=f"max lifetime in milliseconds; default {DEFAULT_MAX_LIFETIME}",
    )
    p.add_argument(
        "--lease", action="store_true",
        help="ask for leases (SETUP L flag): wait for the server's first LEASE before the"
        " request, which the lease must allow",
    )
    p.add_argument(
        "--resume", action="store_true",
        help="make the connection resumable: reconnect and resume the session if the"
        " transport fails (the server must allow resume)",
    )
    p.add_argument(
        "--timeout",
        metavar="SECONDS",
        help="give up after SECONDS for the whole operation (exit status 4); default: none",
    )
    p.add_argument(
        "--connect-timeout",
        metavar="SECONDS",
        help="give up connecting (TCP, then the TLS or WebSocket handshake) after SECONDS"
        f" (exit status 3); default {DEFAULT_CONNECT_TIMEOUT:g}",
    )
    p.add_argument(
        "--debug", action="store_true", help="print every frame sent and received on stderr"
    )
    if command in ("request", "stream", "channel"):
        p.add_argument(
            "--output",
            "-o",
            choices=("text", "json"),
            default="text",
            help="text: each payload's data (raw bytes) on its own line;"
            " json: one object per payload (default text)",
        )


def _data_help(command: str) -> str | None:
    """The help of a client command's data (None: it has none)."""
    if command == "channel":
        return "the payloads' data, one payload per line; default: standard input"
    if command == "metadata-push":
        return None
    if command == "stream":
        return "the payload's data (the demo responder reads a decimal count); default empty"
    return "the payload's data; default empty"


def _metadata_help(command: str) -> str:
    if command == "metadata-push":
        return "the metadata to push (required)"
    if command == "channel":
        return "the first payload's metadata; default: none"
    return "the payload's metadata; default: none (no M flag)"


def _add_serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "endpoints",
        metavar="ENDPOINT",
        nargs="*",
        help="endpoint(s) to listen on, all serving the same responder: tcp:7878,"
        " tcp://0.0.0.0:7878, ssl:7879:privateKey=KEY:certKey=CERT,"
        " mtls:7879:privateKey=KEY:caCerts=CA, tls://:7879?privateKey=KEY,"
        " ws:8080:path=/rsocket[:static=DIR], wss:8443:privateKey=KEY:path=/rsocket,"
        f" ws://:8080/rsocket … (default {DEFAULT_LISTEN})",
    )
    for option in SERVER_OPTIONS:
        p.add_argument(
            f"--{option.name}",
            *(f"--{alias}" for alias in option.aliases),
            dest=option.attr,
            metavar=option.metavar,
            help=option.help,
            action="append" if option.repeatable else "store",
        )
    for flag in SERVER_FLAGS:
        p.add_argument(f"--{flag.name}", dest=flag.attr, action="store_true", help=flag.help)
    p.add_argument("--debug", action="store_true", help=DEBUG_HELP)


_COMMANDS = {
    "request": "request-response: send one payload, print the response",
    "fnf": "fire-and-forget: send one payload",
    "stream": "request-stream: send one payload, print the stream",
    "channel": "request-channel: send lines as payloads, print the response stream",
    "metadata-push": "metadata-push: send metadata on the connection",
}


def _help_epilog() -> str:
    """The module docstring from its examples on, as plain text for ``--help``."""
    text = (__doc__ or "").split("Examples::", 1)[-1]
    text = text.replace("``", "'").replace("::", ":")
    more = "See 'rsocket-tx COMMAND --help' for the options of a command."
    return f"examples:{text.rstrip()}\n\n{more}"


def build_parser() -> argparse.ArgumentParser:
    """The ``rsocket-tx`` argument parser (raises :class:`UsageError` instead of exiting)."""
    parser = _Parser(
        prog=PROG,
        description="RSocket 1.0 command-line client and server (rsocket_tx, Twisted).",
        epilog=_help_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True
    parser.command_parsers = {}
    for name, summary in _COMMANDS.items():
        sub = commands.add_parser(name, help=summary, description=summary)
        _add_client_options(sub, name)
        parser.command_parsers[name] = sub
    serve = commands.add_parser(
        "serve",
        help="serve a responder (as twistd rsocket does) until SIGINT/SIGTERM",
        description="Serve an RSocket responder (default: the demo responder) until"
        " SIGINT/SIGTERM; the same server and options as 'twistd rsocket'.",
    )
    _add_serve_options(serve)
    parser.command_parsers["serve"] = serve
    from ..jini.cli import add_parser as add_jini_parser  # (rsocket_tx.jini.cli imports this)

    parser.command_parsers["jini"] = add_jini_parser(commands)
    from ..rsnet.cli import add_parser as add_rsnet_parser  # (rsocket_tx.rsnet.cli imports this)

    parser.command_parsers["rsnet"] = add_rsnet_parser(commands)
    from ..reactivesocket.cli import add_parser as add_rs2015_parser  # (it imports this)

    parser.command_parsers["rs2015"] = add_rs2015_parser(commands)
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse and validate ``argv`` (without the program name).

    Numbers are checked and converted; endpoints, the responder and ``--data``-style values are
    checked later (when run).

    :param argv: the arguments.
    :returns: the namespace; client commands get ints (bytes, milliseconds) and a float
        ``timeout`` (seconds) or ``None``; ``serve`` gets ``settings`` (a
        :class:`~rsocket_tx.faces.tap.ServerSettings`).
    :raises UsageError: on any invalid argument.
    """
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        sub = parser.command_parsers.get(args.command, parser)
        message = f"unrecognized arguments: {' '.join(extras)}"
        unknown = next((e for e in extras if e.startswith("--")), None)
        if unknown is not None:
            message += suggest_option(unknown, sub.all_options())
        raise UsageError(message, sub.format_usage())
    try:
        if args.command == "serve":
            args.settings = parse_server_settings(
                listen=args.endpoints,
                debug=args.debug,
                **{o.attr: getattr(args, o.attr) for o in SERVER_OPTIONS},
                **{f.attr: getattr(args, f.attr) for f in SERVER_FLAGS},
            )
        elif args.command == "jini":
            from ..jini.cli import validate as validate_jini

            validate_jini(args)
        elif args.command == "rsnet":
            from ..rsnet.cli import validate as validate_rsnet

            validate_rsnet(args)
        elif args.command == "rs2015":
            from ..reactivesocket.cli import validate as validate_rs2015

            validate_rs2015(args)
        else:
            _validate_client(args)
    except SettingsError as e:
        sub = parser.command_parsers[args.command]
        raise UsageError(str(e), sub.format_usage()) from None
    return args


def _validate_client(args: argparse.Namespace) -> None:
    args.fragment = parse_fragment_size(args.fragment)
    args.keepalive = parse_int_option(
        "keepalive", args.keepalive, minimum=1, maximum=2**31 - 1, unit="milliseconds"
    )
    if args.keepalive is None:
        args.keepalive = DEFAULT_KEEPALIVE
    args.max_lifetime = parse_int_option(
        "max-lifetime", args.max_lifetime, minimum=1, maximum=2**31 - 1, unit="milliseconds"
    )
    if args.max_lifetime is None:
        args.max_lifetime = DEFAULT_MAX_LIFETIME
    if hasattr(args, "take"):
        args.take = parse_int_option("take", args.take, minimum=1, unit="payloads")
        args.request_n = parse_int_option(
            "request-n", args.request_n, minimum=1, maximum=2**31 - 1, unit="payloads"
        )
        if args.request_n is None:
            args.request_n = DEFAULT_REQUEST_N
    args.timeout = parse_timeout(args.timeout)
    args.connect_timeout = _parse_seconds("connect-timeout", args.connect_timeout,
                                          DEFAULT_CONNECT_TIMEOUT)
    _validate_extensions(args)
    resolve_payload_arguments(args, "-" if args.command == "channel" else None)
    if args.command == "metadata-push" and args.metadata is None:
        raise SettingsError("--metadata: required by metadata-push")


def parse_timeout(value) -> float | None:
    """Validate ``--timeout`` (every command of ``rsocket-tx`` but ``serve``).

    :param value: ``None`` (not given) or a decimal string, in seconds.
    :returns: the seconds (a positive, finite float), or ``None``.
    :raises SettingsError: it is not a number, or not positive and finite.
    """
    return _parse_seconds("timeout", value, None)


def _parse_seconds(name: str, value, default: float | None) -> float | None:
    """Validate a positive, finite number of seconds (``None``: ``default``).

    :raises SettingsError: it is not such a number.
    """
    if value is None:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise SettingsError(f"--{name}: expected a number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise SettingsError(f"--{name}: must be a positive number of seconds, got {seconds}")
    return seconds


def _validate_extensions(args: argparse.Namespace) -> None:
    """Resolve the MIME types and the metadata-extension options of a client command."""
    for option, mime in (("--data-mime", args.data_mime),
                         ("--setup-data-mime", args.setup_data_mime),
                         ("--metadata-mime", args.metadata_mime)):
        if mime is not None and (not mime.isascii() or not 0 < len(mime) <= 255):
            raise SettingsError(f"{option}: expected 1 to 255 ASCII characters, got {mime!r}")
    args.setup_data_mime = args.setup_data_mime or args.data_mime or DEFAULT_MIME
    # a request MIME type other than the connection's goes in per-stream MIME metadata
    args.stream_data_mime = args.data_mime if args.data_mime not in (
        None, args.setup_data_mime) else None
    route = getattr(args, "route", None)
    simple, bearer = getattr(args, "auth_simple", None), getattr(args, "auth_bearer", None)
    if simple is not None and bearer is not None:
        raise SettingsError("--auth-simple and --auth-bearer: give only one")
    args.auth = None
    if simple is not None:
        user, sep, password = simple.partition(":")
        if not sep or not user:
            raise SettingsError("--auth-simple: expected USER:PASSWORD (a user name, a colon,"
                                " the password)")
        args.auth = SimpleAuth(user, password)
    elif bearer is not None:
        if not bearer:
            raise SettingsError("--auth-bearer: the token is empty")
        args.auth = BearerAuth(bearer)
    if getattr(args, "setup_auth", False) and args.auth is None:
        raise SettingsError("--setup-auth: give the credentials with --auth-simple or"
                            " --auth-bearer")
    if args.metadata_mime is None:
        uses = route is not None or args.auth is not None or args.stream_data_mime is not None
        args.metadata_mime = COMPOSITE_METADATA if uses else DEFAULT_MIME
    if args.metadata is not None and args.metadata_mime != COMPOSITE_METADATA and (
            route is not None or args.stream_data_mime is not None
            or (args.auth is not None and not getattr(args, "setup_auth", False))):
        raise SettingsError(f"--metadata with --route, --auth-* or a per-stream --data-mime "
                            f"needs --metadata-mime {COMPOSITE_METADATA} (the entries are"
                            f" concatenated)")
    try:  # fail on the command line, not after connecting
        build_metadata(args.metadata_mime, route=route,
                       auth=None if getattr(args, "setup_auth", False) else args.auth,
                       data_mime_type=args.stream_data_mime)
        if getattr(args, "setup_auth", False):
            build_metadata(args.metadata_mime, auth=args.auth)
    except ValueError as e:
        raise SettingsError(str(e)) from None


# -- input and output -------------------------------------------------------------------------


class Streams:
    """The standard streams of a command.

    :ivar stdin: binary file (``-`` inputs).
    :ivar stdout: binary file the output is written to.
    :ivar stderr: text file for messages; given ``secrets`` (see :func:`secrets_in`), a
        :class:`RedactingWriter` that writes ``***`` in their place.
    """

    def __init__(self, stdin, stdout, stderr, secrets: list[str] | None = None) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = RedactingWriter(stderr, secrets) if secrets else stderr

    def error(self, message: str) -> None:
        """Write ``rsocket-tx: message`` on stderr."""
        self.stderr.write(f"{PROG}: {message}\n")
        self.stderr.flush()

    def write(self, data: bytes) -> None:
        """Write ``data`` on stdout, flushed."""
        self.stdout.write(data)
        self.stdout.flush()


#: Options whose value is a secret (``--auth-simple``: the part after the first colon).
_SECRET_OPTIONS = ("--auth-simple", "--auth-bearer")


def secrets_in(argv: list[str]) -> list[str]:
    """The secrets on a command line, never to be written back (on standard error, in
    ``--debug`` lines, in log lines): the password of ``--auth-simple USER:PASSWORD``, the
    token of ``--auth-bearer TOKEN`` (also as ``--opt=VALUE`` and abbreviated), and the
    password of a URI's ``user:password@``.

    :param argv: the arguments, without the program name.
    :returns: the secrets found, in the order given.
    """
    found = []
    for i, token in enumerate(argv):
        name, eq, value = token.partition("=")
        option = next((o for o in _SECRET_OPTIONS
                       if name.startswith("--auth-") and o.startswith(name)), None)
        if option is not None:
            if not eq:
                value = argv[i + 1] if i + 1 < len(argv) else ""
            if option == "--auth-simple":
                _, sep, password = value.partition(":")
                value = password if sep else value
            if value:
                found.append(value)
        found.extend(m.group(1) for m in URI_PASSWORD.finditer(token))
    return found


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (as typed, and as ``repr`` escapes it) replaced by
    ``***``, and the password of any URI's ``user:password@`` too
    (:func:`~rsocket_tx.faces.framelog.mask_uri_passwords`). Credentials in frames' metadata
    are masked by the frame log itself (:mod:`rsocket_tx.faces.framelog`), which decodes it.
    """
    for secret in sorted(secrets, key=len, reverse=True):
        for form in (secret, repr(secret)[1:-1], repr(secret.encode())[2:-1]):
            if form:
                text = text.replace(form, "***")
    return mask_uri_passwords(text)


class RedactingWriter:
    """A text file that writes :func:`redact` of what it is given (standard error, when the
    command line holds secrets).

    :param file: the text file written to.
    :param secrets: the secrets (see :func:`secrets_in`).
    """

    def __init__(self, file, secrets: list[str]) -> None:
        self.file = file
        self.secrets = list(secrets)

    def write(self, text: str) -> int:
        self.file.write(redact(text, self.secrets))
        return len(text)

    def flush(self) -> None:
        self.file.flush()

    def __getattr__(self, name: str):
        return getattr(self.file, name)


def _literal(value: str) -> bytes:
    return os.fsencode(value)  # the bytes typed, even if they are not valid UTF-8


def read_source(value: str | None, stdin) -> bytes | None:
    """Read the value of a ``--data``-style option.

    :param value: ``None`` (not given), ``"-"`` (all of ``stdin``), ``"@FILE"`` (the file's
        bytes), ``"@@TEXT"`` (the literal ``@TEXT``) or a literal (encoded as the file system
        encoding, UTF-8 in practice).
    :param stdin: a binary file.
    :returns: the bytes, or ``None`` if ``value`` is ``None``.
    :raises OSError: if the file cannot be read.
    """
    if value is None:
        return None
    if value == "-":
        return stdin.read()
    if value.startswith("@@"):
        return _literal(value[1:])
    if value.startswith("@"):
        with open(value[1:], "rb") as f:
            return f.read()
    return _literal(value)


def _strip_newline(line: bytes) -> bytes:
    if line.endswith(b"\r\n"):
        return line[:-2]
    if line.endswith(b"\n"):
        return line[:-1]
    return line


class _LineReader:
    """Reads lines of a binary file one at a time, on demand, on a daemon thread, so that a
    slow or interactive standard input never blocks the reactor and is read no faster than
    the peer grants credit. A daemon thread does not keep the process alive at exit."""

    def __init__(self, reactor, file) -> None:
        self._reactor = reactor
        self._file = file
        self._requests: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._buffer = b""
        self._eof = False
        try:
            self._fd = file.fileno()
        except (AttributeError, OSError, io.UnsupportedOperation):
            self._fd = None

    def next_line(self) -> Deferred:
        """A Deferred firing with the next line (without its newline), or None at the end."""
        d = Deferred()
        self._requests.put(d)
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="rsocket-tx stdin", daemon=True)
            self._thread.start()
        return d

    def _run(self) -> None:
        while True:
            d = self._requests.get()
            try:
                line = self._read_line()
            except Exception as e:  # delivered to the reactor thread
                self._reactor.callFromThread(d.errback, e)
                return
            self._reactor.callFromThread(d.callback, line)
            if line is None:
                return

    def _read_line(self) -> bytes | None:
        if self._fd is None:
            line = self._file.readline()
            return _strip_newline(line) if line else None
        # Raw reads on the descriptor: no buffered-reader lock held across interpreter exit.
        while b"\n" not in self._buffer and not self._eof:
            chunk = os.read(self._fd, 65536)
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
        if b"\n" in self._buffer:
            line, _, self._buffer = self._buffer.partition(b"\n")
            return _strip_newline(line + b"\n")
        if self._buffer:
            line, self._buffer = self._buffer, b""
            return line
        return None


async def _lines(reactor, value: str, stdin):
    """The lines of ``--data`` for channel: standard input read lazily, or a file / literal."""
    if value == "-":
        reader = _LineReader(reactor, stdin)
        while True:
            line = await reader.next_line()
            if line is None:
                return
            yield line
    else:
        content = read_source(value, stdin)
        for line in content.splitlines():
            yield line


def _json_value(obj: dict, name: str, value: bytes | None) -> None:
    if value is None:
        obj[name] = None
        return
    try:
        obj[name] = value.decode("utf-8")
    except UnicodeDecodeError:
        obj[name + "_base64"] = base64.b64encode(value).decode("ascii")


def format_payload(payload: Payload, output: str) -> bytes:
    """Render one received payload for standard output.

    :param payload: the payload.
    :param output: ``"text"``: the data bytes as they are, then ``b"\\n"``; ``"json"``: one
        line of JSON, ``{"data": str, "metadata": str | null}``, a value that is not valid UTF-8
        being given as ``data_base64`` / ``metadata_base64`` (standard base64) instead.
    :returns: the bytes to write, ending with a newline.
    """
    if output == "json":
        obj: dict = {}
        _json_value(obj, "data", payload.data)
        _json_value(obj, "metadata", payload.metadata)
        return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"
    return bytes(payload.data) + b"\n"


def format_data(data: bytes, output: str) -> bytes:
    """Render one received message (a response, an element) of a protocol without metadata
    for standard output (``rsocket-tx jini``, ``rsocket-tx rsnet``).

    :param data: the bytes received.
    :param output: ``"text"``: ``data`` then ``b"\\n"``; ``"raw"``: ``data`` alone;
        ``"json"``: one line, ``{"data": str}``, or ``{"data_base64": str}`` (standard base64)
        when ``data`` is not valid UTF-8.
    :returns: the bytes to write.
    """
    if output == "raw":
        return data
    if output == "json":
        obj: dict = {}
        _json_value(obj, "data", data)
        return json.dumps(obj, ensure_ascii=False).encode("utf-8") + b"\n"
    return data + b"\n"


# -- running -----------------------------------------------------------------------------------


class _Done(Exception):
    """Ends an operation early with an exit status (already reported)."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


async def _client(reactor, args: argparse.Namespace, streams: Streams) -> int:
    from ..client import connect
    from ..core.config import ConnectionConfig

    try:
        endpoint = client_endpoint(reactor, args.endpoint)
    except ValueError as e:
        hint = scheme_hint(args.endpoint) if "Unknown endpoint type" in str(e) else ""
        streams.error(f"{e}{hint}")
        return EXIT_USAGE
    try:
        setup_data = read_source(args.setup_data, streams.stdin)
        setup_metadata = read_source(args.setup_metadata, streams.stdin)
        metadata = read_source(args.metadata, streams.stdin)
        data = None if args.command == "channel" else read_source(args.data, streams.stdin)
    except OSError as e:
        streams.error(f"cannot read input: {e}")
        return EXIT_USAGE
    setup_payload = None
    if setup_data is not None or setup_metadata is not None:
        setup_payload = Payload(setup_data or b"", setup_metadata)

    frame_logger = None
    if args.debug:

        def emit(line: str) -> None:
            streams.stderr.write(line + "\n")
            streams.stderr.flush()

        secrets = [secret.encode() for secret in getattr(streams.stderr, "secrets", ())]
        frame_logger = make_frame_logger(emit, secrets)

    try:
        connecting = connect(
            endpoint,
            reactor=reactor,
            setup_payload=setup_payload,
            data_mime_type=args.setup_data_mime,
            metadata_mime_type=args.metadata_mime,
            auth=args.auth if getattr(args, "setup_auth", False) else None,
            resume=args.resume,
            lease=args.lease,
            config=ConnectionConfig(keepalive_interval=args.keepalive,
                                    max_lifetime=args.max_lifetime,
                                    fragment_size=args.fragment),
            frame_logger=frame_logger,
        )
        rsocket = await connecting.addTimeout(args.connect_timeout, reactor)
    except ConnectTimeout:
        streams.error(f"cannot connect to {args.endpoint}: no connection within"
                      f" {args.connect_timeout:g} s{wrong_port_hint(args.endpoint, None)}")
        return EXIT_CONNECTION
    except (internet_error.ConnectError, internet_error.ConnectionClosed, OSError,
            TLSError) as e:
        streams.error(f"cannot connect to {args.endpoint}: {e}"
                      f"{wrong_port_hint(args.endpoint, e)}")
        return EXIT_CONNECTION
    except RSocketError as e:
        streams.error(f"connection refused by {args.endpoint}: {e}")
        return EXIT_RSOCKET_ERROR

    try:
        await _interact(reactor, rsocket, args, streams, data, metadata)
    except BaseException:
        # No waiting: the operation failed or was cancelled; the process is about to end.
        rsocket.close(drain_timeout=0).addErrback(lambda _: None)
        raise
    await rsocket.close()
    return EXIT_OK


_SCHEME = re.compile(r"\s*([A-Za-z0-9+.-]+):")
_HTTP_STATUS = re.compile(r"\[\d{3}\]")


def wrong_port_hint(endpoint: str, error: BaseException | None) -> str:
    """A hint for a TLS or WebSocket client whose handshake failed (or never ended: ``error``
    ``None``), as when it is pointed at a port that speaks something else.

    :param endpoint: the endpoint as typed (a URI or an endpoint string).
    :param error: what connecting failed with; ``None``: it timed out.
    :returns: ``"; the server at tls://... did not answer a TLS handshake: is it a plain
        tcp:// server?"``, a WebSocket equivalent, or ``""`` (the connection was refused, the
        host is unknown, a certificate was not trusted, an HTTP status came back...).
    """
    found = _SCHEME.match(endpoint)
    scheme = found.group(1).lower() if found else ""
    if isinstance(error, (internet_error.ConnectionRefusedError, internet_error.DNSLookupError,
                          internet_error.NoRouteError, internet_error.TCPTimedOutError,
                          internet_error.TimeoutError, TLSVerificationError)):
        return ""  # refused, unknown host, untrusted certificate: the port is not the issue
    if scheme in ("tls", "ssl", "wss"):
        other = "ws://" if scheme == "wss" else "tcp://"
        return (f"; the server at {endpoint} did not answer a TLS handshake: is it a plain"
                f" {other} server?")
    if scheme == "ws" and (error is None or not _HTTP_STATUS.search(str(error))):
        return (f"; the server at {endpoint} did not answer a WebSocket (HTTP) handshake: is"
                " it a tcp:// or tls:// server?")
    return ""


def _write(streams: Streams, payload: Payload, output: str) -> None:
    streams.write(format_payload(payload, output))


def _request_options(args) -> dict:
    """The metadata-extension keyword arguments of the request (see RSocket.request_*)."""
    if args.command == "metadata-push":
        return {}
    return {"route": args.route, "data_mime_type": args.stream_data_mime,
            "auth": None if args.setup_auth else args.auth}


async def _interact(reactor, rsocket, args, streams: Streams, data, metadata) -> None:
    command = args.command
    options = _request_options(args)
    if command == "request":
        response = await rsocket.request_response(Payload(data or b"", metadata), **options)
        if response is not None:  # None: the responder completed without a payload
            _write(streams, response, args.output)
    elif command == "fnf":
        await rsocket.fire_and_forget(Payload(data or b"", metadata), **options)
    elif command == "metadata-push":
        await rsocket.metadata_push(metadata)
    elif command == "stream":
        prefetch = min(args.request_n, args.take) if args.take else args.request_n
        stream = rsocket.request_stream(Payload(data or b"", metadata), prefetch=prefetch,
                                        **options)
        await _print_stream(stream, args, streams)
    elif command == "channel":
        lines = _lines(reactor, args.data, streams.stdin)
        try:
            first = await lines.__anext__()
        except StopAsyncIteration:
            streams.error("channel: no input payloads (the data had no line)")
            raise _Done(EXIT_USAGE) from None

        async def outbound():
            async for line in lines:
                yield Payload(line)

        prefetch = min(args.request_n, args.take) if args.take else args.request_n
        stream = rsocket.request_channel(Payload(first, metadata), outbound(), prefetch=prefetch,
                                         **options)
        await _print_stream(stream, args, streams)
    else:  # pragma: no cover - argparse restricts the commands
        raise AssertionError(command)


async def _print_stream(stream, args, streams: Streams) -> None:
    received = 0
    try:
        async for payload in stream:
            _write(streams, payload, args.output)
            received += 1
            if args.take is not None and received >= args.take:
                break
    except BaseException:
        _cancel_quietly(stream)
        raise
    if args.take is not None and received >= args.take:
        _cancel_quietly(stream)


def _cancel_quietly(stream) -> None:
    try:
        stream.cancel()
    except Exception:
        pass  # already finished


async def _serve(reactor, args: argparse.Namespace, streams: Streams) -> int:
    try:
        service = build_service(args.settings, reactor)
    except ValueError as e:
        streams.error(str(e))
        return EXIT_USAGE
    try:
        service.startService()
        await service.when_listening()
    except Exception as e:
        streams.error(describe_listen_failure(e))
        if service.running:
            await service.stopService()
        return EXIT_CONNECTION
    reactor.addSystemEventTrigger("before", "shutdown", service.stopService)
    await Deferred()  # until the reactor stops (SIGINT/SIGTERM)
    return EXIT_OK  # pragma: no cover


async def _execute(
    reactor, args: argparse.Namespace, streams: Streams, interrupted=lambda: False
) -> int:
    if args.command == "serve":
        return await _serve(reactor, args, streams)
    if args.command == "jini":
        from ..jini.cli import execute as execute_jini

        return await execute_jini(reactor, args, streams.stdin, streams.stdout, streams.stderr)
    if args.command == "rsnet":
        from ..rsnet.cli import execute as execute_rsnet

        return await execute_rsnet(reactor, args, streams.stdin, streams.stdout, streams.stderr)
    if args.command == "rs2015":
        from ..reactivesocket.cli import execute as execute_rs2015

        return await execute_rs2015(reactor, args, streams.stdin, streams.stdout,
                                    streams.stderr)

    def failed(error: BaseException) -> int:
        if interrupted():
            return EXIT_INTERRUPTED  # the reactor is stopping: the error is only its echo
        return _exit_status_for(error, streams)

    return await await_command(reactor, Deferred.fromCoroutine(_client(reactor, args, streams)),
                               args.timeout, streams, failed)


async def await_command(reactor, work: Deferred, timeout: float | None, streams: Streams,
                        failed: Callable[[BaseException], int]) -> int:
    """Wait for a command's ``work`` under its ``--timeout``.

    :param reactor: the reactor.
    :param work: the command, a Deferred firing with its exit status.
    :param timeout: seconds after which ``work`` is cancelled (``None``: no limit).
    :param streams: where "timed out after N seconds" is reported.
    :param failed: called with the error when ``work`` fails (before the time is up); returns
        the exit status, or raises.
    :returns: the exit status: ``work``'s, ``failed``'s, or :data:`EXIT_TIMEOUT`.
    """
    timed_out = False
    timer = None
    if timeout is not None:

        def expire() -> None:
            nonlocal timed_out
            timed_out = True
            work.cancel()

        timer = reactor.callLater(timeout, expire)
    try:
        status = await work
    except BaseException as e:
        if timed_out:
            return _timed_out(timeout, streams)
        return failed(e)
    finally:
        if timer is not None and timer.active():
            timer.cancel()
    return _timed_out(timeout, streams) if timed_out else status


def _timed_out(timeout: float, streams: Streams) -> int:
    seconds = f"{timeout:g}"
    streams.error(f"timed out after {seconds} second{'s' if seconds != '1' else ''}")
    return EXIT_TIMEOUT


def _exit_status_for(error: BaseException, streams: Streams) -> int:
    """Report ``error`` on stderr and return the exit status; re-raise what is unexpected."""
    if isinstance(error, _Done):
        return error.status
    if isinstance(error, TLSError):
        streams.error(str(error))
        return EXIT_CONNECTION
    if isinstance(error, ConnectionLostError):
        streams.error(f"connection lost: {error}")
        return EXIT_CONNECTION
    if isinstance(error, RSocketError):
        streams.error(f"error: {error}")
        return EXIT_RSOCKET_ERROR
    if isinstance(error, (internet_error.ConnectionDone, internet_error.ConnectionLost)):
        streams.error(f"connection lost: {error}")
        return EXIT_CONNECTION
    if isinstance(error, BrokenPipeError):
        return EXIT_OK  # the reader of our output went away (| head): stop quietly
    if isinstance(error, CancelledError):
        streams.error("cancelled")
        return EXIT_INTERRUPTED
    raise error


def exit_status_for(error: BaseException, endpoint: str, streams: Streams,
                    protocol_status: Callable[[BaseException], int | None] | None = None,
                    ) -> int:
    """Report a protocol command's ``error`` on stderr and return its exit status (the
    commands of :mod:`rsocket_tx.jini.cli`, :mod:`rsocket_tx.rsnet.cli` and
    :mod:`rsocket_tx.reactivesocket.cli`).

    A broken pipe (the reader of our output went away: ``| head``) is :data:`EXIT_OK`, quietly;
    a TLS failure :data:`EXIT_CONNECTION`; then ``protocol_status(error)`` decides, if it
    returns a status (having reported the error); then a failure to connect to ``endpoint``
    and a lost connection are :data:`EXIT_CONNECTION`, a cancel :data:`EXIT_INTERRUPTED`.

    :param error: what the command's work failed with.
    :param endpoint: the endpoint as the user typed it (for "cannot connect to ...").
    :param streams: the command's :class:`Streams`.
    :param protocol_status: the protocol's own errors: a status, or None for the rest.
    :returns: the exit status.
    :raises BaseException: ``error`` itself when it is none of these (a bug).
    """
    if isinstance(error, BrokenPipeError):
        return EXIT_OK
    if isinstance(error, TLSError):
        streams.error(str(error))
        return EXIT_CONNECTION
    if protocol_status is not None:
        status = protocol_status(error)
        if status is not None:
            return status
    if isinstance(error, (internet_error.ConnectError, internet_error.DNSLookupError)):
        streams.error(f"cannot connect to {endpoint}: {error}")
        return EXIT_CONNECTION
    if isinstance(error, (internet_error.ConnectionDone, internet_error.ConnectionLost,
                          OSError)):
        streams.error(f"connection lost: {error}")
        return EXIT_CONNECTION
    if isinstance(error, CancelledError):
        streams.error("cancelled")
        return EXIT_INTERRUPTED
    raise error


def run(reactor, argv: list[str], *, stdin=None, stdout=None, stderr=None) -> Deferred:
    """Run one ``rsocket-tx`` command on a running reactor (for tests and embedding).

    :param reactor: the reactor.
    :param argv: the arguments, without the program name.
    :param stdin: binary file for ``-`` inputs (default ``sys.stdin.buffer``).
    :param stdout: binary file the payloads are written to (default ``sys.stdout.buffer``).
    :param stderr: text file for messages and ``--debug`` (default ``sys.stderr``).
    :returns: a Deferred firing with the exit status (see the module docstring); ``serve``
        only fires if it cannot start.
    """
    streams = Streams(
        stdin if stdin is not None else sys.stdin.buffer,
        stdout if stdout is not None else sys.stdout.buffer,
        stderr if stderr is not None else sys.stderr,
        secrets_in(argv),
    )
    args = _parse_or_status(argv, streams.stderr, streams.stdout)
    if isinstance(args, int):
        return succeed(args)
    return Deferred.fromCoroutine(_execute(reactor, args, streams))


def _parse_or_status(argv: list[str], stderr, stdout) -> argparse.Namespace | int:
    """Parse ``argv``; on a usage error, ``--help`` or ``--version``, report and return the
    exit status (``stdout``: a binary file, for ``--version``)."""
    try:
        return parse_args(argv)
    except UsageError as e:
        stderr.write(e.usage)
        stderr.write(f"{PROG}: error: {e}\n")
        return EXIT_USAGE
    except _Exit as e:  # --help (argparse printed it) or an argparse exit with a message
        if e.message and e.stdout:
            stdout.write(e.message.encode())
            stdout.flush()
        elif e.message:
            stderr.write(e.message)
        return e.status


def _is_server(args: argparse.Namespace) -> bool:
    return args.command == "serve" or "serve" in (
        getattr(args, "jini_command", None), getattr(args, "rsnet_command", None),
        getattr(args, "rs2015_command", None))


def log_level(args: argparse.Namespace) -> LogLevel:
    """The least level of the log lines (:mod:`twisted.logger`) written on standard error:
    a server command's log is its output (info; debug with ``--debug``); a client command
    writes its own messages, so library lines show only with ``--debug`` (and a critical
    one, an unhandled error, always).

    :param args: the parsed command line.
    """
    debug = bool(getattr(args, "debug", False))
    if _is_server(args):
        return LogLevel.debug if debug else LogLevel.info
    return LogLevel.debug if debug else LogLevel.critical


def _begin_logging(args: argparse.Namespace, secrets: list[str]) -> None:
    stderr = RedactingWriter(sys.stderr, secrets) if secrets else sys.stderr
    observer = FilteringLogObserver(
        textFileLogObserver(stderr),
        [LogLevelFilterPredicate(defaultLogLevel=log_level(args))],
    )
    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)


def main(argv: list[str] | None = None) -> None:
    """The ``rsocket-tx`` console script: parse ``argv`` (default ``sys.argv[1:]``), run the
    command under :func:`twisted.internet.task.react`, exit with its status.

    :raises SystemExit: always.
    """
    from twisted.internet.task import react

    argv = sys.argv[1:] if argv is None else argv
    secrets = secrets_in(argv)
    stderr = RedactingWriter(sys.stderr, secrets) if secrets else sys.stderr
    args = _parse_or_status(argv, stderr, sys.stdout.buffer)
    if isinstance(args, int):
        raise SystemExit(args)
    _begin_logging(args, secrets)

    state = {"finished": False, "interrupted": False}

    def on_shutdown() -> None:
        if not state["finished"]:
            state["interrupted"] = True

    async def react_main(reactor) -> None:
        reactor.addSystemEventTrigger("before", "shutdown", on_shutdown)
        streams = Streams(sys.stdin.buffer, sys.stdout.buffer, sys.stderr, secrets)
        status = await _execute(reactor, args, streams, lambda: state["interrupted"])
        state["finished"] = True
        if status != EXIT_OK:
            raise SystemExit(status)

    try:
        react(react_main)
    except SystemExit as e:
        code = e.code
        if state["interrupted"] and args.command != "serve":
            sys.stderr.write(f"{PROG}: interrupted\n")
            code = EXIT_INTERRUPTED
        _silence_broken_stdout()
        raise SystemExit(code) from None


def _silence_broken_stdout() -> None:
    # If the reader of stdout went away, Python's final flush would print a BrokenPipeError.
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    # python -m rsocket_tx.faces.cli: run the module imported under its own name (the copy
    # running as __main__ would be a second one, with classes of its own)
    from rsocket_tx.faces.cli import main as main_of_the_module

    main_of_the_module()
