"""RSocket's face on the ``rsocket-tx`` command line: an RSocket client and server (the
command itself, which gathers every protocol's commands, is :mod:`rsocket_tx.faces.main`; the
plumbing the protocols share is the face kit, :mod:`rsocket_tx.faces.clikit`).

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

from twisted.internet import error as internet_error
from twisted.internet.defer import CancelledError, Deferred
from twisted.internet.defer import TimeoutError as ConnectTimeout

from ..core.errors import ConnectionLostError, RSocketError
from ..core.payload import Payload
from ..extensions import COMPOSITE_METADATA, BearerAuth, SimpleAuth, build_metadata
from ..transports.endpoints import client_endpoint
from ..transports.tls import TLSError
from .clikit import (
    EXIT_CONNECTION,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RSOCKET_ERROR,
    EXIT_TIMEOUT,  # noqa: F401 - importable from here
    EXIT_USAGE,
    PAYLOAD_SOURCES,  # noqa: F401 - importable from here
    Face,
    Streams,
    UsageError,  # noqa: F401 - importable from here
    add_payload_arguments,
    await_command,
    exit_status_for,  # noqa: F401 - importable from here
    format_data,  # noqa: F401 - importable from here
    format_payload,
    parse_seconds,
    parse_timeout,
    read_source,
    resolve_payload_arguments,
    source_lines,
    wrong_port_hint,
)
from .serving import (
    SettingsError,
    describe_listen_failure,
    parse_int_option,
    scheme_hint,
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
    "FACE",
    "add_commands",
    "validate",
    "execute",
    "is_server",
    "help_epilog",
]

DEFAULT_MIME = "application/octet-stream"
DEFAULT_KEEPALIVE = 20_000  # ms
DEFAULT_MAX_LIFETIME = 90_000  # ms
DEFAULT_REQUEST_N = 256
DEFAULT_CONNECT_TIMEOUT = 10.0  # seconds


# -- parser ----------------------------------------------------------------------------------

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


def help_epilog() -> str:
    """The module docstring from its examples on, as plain text for ``rsocket-tx --help``."""
    text = (__doc__ or "").split("Examples::", 1)[-1]
    text = text.replace("``", "'").replace("::", ":")
    more = "See 'rsocket-tx COMMAND --help' for the options of a command."
    return f"examples:{text.rstrip()}\n\n{more}"


def add_commands(commands) -> dict[str, argparse.ArgumentParser]:
    """Add RSocket's commands (``request``, ``fnf``, ``stream``, ``channel``,
    ``metadata-push``, ``serve``) to ``rsocket-tx``
    (:attr:`rsocket_tx.faces.clikit.Face.add_commands`).

    :param commands: the subparsers action of the ``rsocket-tx`` parser.
    :returns: the commands' parsers, by name.
    """
    parsers = {}
    for name, summary in _COMMANDS.items():
        sub = commands.add_parser(name, help=summary, description=summary)
        _add_client_options(sub, name)
        parsers[name] = sub
    serve = commands.add_parser(
        "serve",
        help="serve a responder (as twistd rsocket does) until SIGINT/SIGTERM",
        description="Serve an RSocket responder (default: the demo responder) until"
        " SIGINT/SIGTERM; the same server and options as 'twistd rsocket'.",
    )
    _add_serve_options(serve)
    parsers["serve"] = serve
    return parsers


def validate(args: argparse.Namespace) -> None:
    """Check and convert the arguments of an RSocket command (after argparse): client
    commands get ints (bytes, milliseconds) and a float ``timeout`` (seconds) or ``None``;
    ``serve`` gets ``settings`` (a :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings`).

    :raises SettingsError: naming the first invalid option.
    """
    if args.command == "serve":
        args.settings = parse_server_settings(
            listen=args.endpoints,
            debug=args.debug,
            **{o.attr: getattr(args, o.attr) for o in SERVER_OPTIONS},
            **{f.attr: getattr(args, f.attr) for f in SERVER_FLAGS},
        )
    else:
        _validate_client(args)


def is_server(args: argparse.Namespace) -> bool:
    """Whether the command is ``serve``."""
    return args.command == "serve"


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
    args.connect_timeout = parse_seconds("connect-timeout", args.connect_timeout,
                                          DEFAULT_CONNECT_TIMEOUT)
    _validate_extensions(args)
    resolve_payload_arguments(args, "-" if args.command == "channel" else None)
    if args.command == "metadata-push" and args.metadata is None:
        raise SettingsError("--metadata: required by metadata-push")


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
        lines = source_lines(reactor, args.data, streams.stdin)
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


async def execute(reactor, args: argparse.Namespace, streams: Streams,
                  interrupted=lambda: False) -> int:
    """Run a validated RSocket command on a running reactor
    (:attr:`rsocket_tx.faces.clikit.Face.execute`).

    :param reactor: the reactor.
    :param args: from :func:`validate`.
    :param streams: the command's standard streams.
    :param interrupted: true once the reactor is stopping (a failure then exits 130, quietly).
    :returns: the exit status (see the module docstring); ``serve`` returns only if it cannot
        start.
    """
    if args.command == "serve":
        return await _serve(reactor, args, streams)

    def failed(error: BaseException) -> int:
        if interrupted():
            return EXIT_INTERRUPTED  # the reactor is stopping: the error is only its echo
        return _exit_status_for(error, streams)

    return await await_command(reactor, Deferred.fromCoroutine(_client(reactor, args, streams)),
                               args.timeout, streams, failed)


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


#: RSocket's commands, as :mod:`rsocket_tx.faces.main` gathers them.
FACE = Face(add_commands=add_commands, validate=validate, execute=execute, is_server=is_server)
