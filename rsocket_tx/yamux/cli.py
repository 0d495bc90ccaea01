"""``rsocket-tx yamux``: send bytes on one yamux stream and print what comes back (a ``cat``
over one stream), or ping a yamux peer.

Examples::

    echo hello | rsocket-tx yamux yamux+tcp://localhost:7890        # the echo server: hello
    rsocket-tx yamux yamux+tcp://localhost:7890 -d @request.bin > reply.bin
    rsocket-tx yamux 'yamux+tls://example.com:7891?trustRoots=ca.pem' -d 'GET / HTTP/1.0'
    rsocket-tx yamux yamux+tcp://localhost:7890 --ping

The command opens one session and one stream, writes the data (``--data``/``-d`` ``TEXT``,
``@FILE``, ``-`` standard input, the default, or ``@@TEXT``; ``DATA`` positional and
``--data-file FILE`` are the same), half-closes the stream (FIN) and writes every byte the peer
sends on it to standard output until the peer closes it too; then it closes the session (Go
Away). ``--ping`` sends a Ping instead and prints the round trip in milliseconds.

Exit status (as for the other ``rsocket-tx`` commands): 0 success; 1 the peer reset the stream;
2 bad usage or unreadable input; 3 cannot connect, or the session ended; 4 ``--timeout``
expired; 130 interrupted.

The command is part of ``rsocket-tx`` (:mod:`rsocket_tx.faces.main`) through :data:`FACE`; the
plumbing is the face kit's (:mod:`rsocket_tx.faces.clikit`).
"""

from __future__ import annotations

import argparse
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionDone
from twisted.internet.interfaces import IHalfCloseableProtocol
from twisted.internet.protocol import Protocol, connectionDone
from twisted.python.failure import Failure
from zope.interface import implementer

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
    parse_timeout,
    read_source,
    resolve_payload_arguments,
)
from ..faces.serving import SettingsError
from .errors import ConnectionClosedError, StreamResetError, YamuxError
from .tap import CONFIG_OPTIONS, parse_config

__all__ = ["EXIT_RESET", "FACE", "add_parser", "execute", "validate"]

#: The peer reset the stream (exit status; RSocket's commands use it for an ERROR).
EXIT_RESET = EXIT_RSOCKET_ERROR

_ENDPOINT_HELP = (
    "where the server listens: a URI (yamux+tcp://HOST:PORT, yamux+tls://HOST:PORT?trustRoots="
    "CA.pem; tcp://, tls:// too) or a Twisted endpoint string (tcp:host=H:port=P)"
)


def add_parser(commands: Any) -> argparse.ArgumentParser:
    """Add the ``yamux`` command to ``rsocket-tx``.

    :param commands: the subparsers action of the ``rsocket-tx`` parser.
    :returns: the ``yamux`` parser.
    """
    text = (__doc__ or "").split("Examples::", 1)[-1].split("\n\nThe command", 1)[0]
    p = commands.add_parser(
        "yamux", help="yamux: send bytes on one stream, print the reply (or --ping)",
        description="A yamux client: open one stream, send the data, half-close, print what"
        " the peer sends back until it closes the stream.",
        epilog="examples:" + text.rstrip(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("endpoint", metavar="ENDPOINT", help=_ENDPOINT_HELP)
    add_payload_arguments(p, data="the bytes to send on the stream; default: standard input")
    p.add_argument("--ping", action="store_true",
                   help="send a Ping instead, print the round trip in milliseconds")
    for option in CONFIG_OPTIONS:
        if option.client:
            p.add_argument(f"--{option.name}", dest=option.attr, metavar=option.metavar,
                           help=option.help)
    p.add_argument("--timeout", metavar="SECONDS",
                   help="give up after SECONDS for the whole command (exit status 4);"
                   " default: none")
    p.set_defaults(yamux_usage=p.format_usage())
    return p


def validate(args: argparse.Namespace) -> None:
    """Check and convert the arguments (after argparse): sets ``args.config`` (a
    :class:`~rsocket_tx.yamux.config.YamuxConfig`), ``args.timeout`` (seconds or None) and
    ``args.data``.

    :raises UsageError: naming the first invalid option, with the command's usage.
    """
    try:
        args.config = parse_config({o.attr: getattr(args, o.attr) for o in CONFIG_OPTIONS
                                    if o.client})
        args.timeout = parse_timeout(args.timeout)
        resolve_payload_arguments(args, "-")
        if args.ping and any(getattr(args, n, None) is not None
                             for n in ("data_arg", "data_file")):
            raise SettingsError("--ping sends no data: give either --ping or the data")
    except SettingsError as e:
        raise UsageError(str(e), args.yamux_usage) from None


@implementer(IHalfCloseableProtocol)
class Cat(Protocol):
    """Writes ``data`` on its stream and FIN; copies what comes back to ``out``;
    :attr:`done` fires (or fails with the reason) when the stream has ended."""

    transport: Any  # (a YamuxStreamTransport)

    def __init__(self, data: bytes, out: Streams) -> None:
        self.data = data
        self.out = out
        self.done: Deferred[None] = Deferred()

    def connectionMade(self) -> None:  # noqa: N802 - Twisted's name
        if self.data:
            self.transport.write(self.data)
        self.transport.loseConnection()

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.out.write(data)

    def readConnectionLost(self) -> None:  # noqa: N802 - Twisted's name
        """(Our FIN is on its way: ``connectionLost`` follows.)"""

    def writeConnectionLost(self) -> None:  # noqa: N802 - Twisted's name
        """(Our FIN went out.)"""

    def connectionLost(self, reason: Failure = connectionDone) -> None:  # noqa: N802
        if reason.check(ConnectionDone):
            self.done.callback(None)
        else:
            self.done.errback(StreamResetError(self.transport.stream_id,
                                               reason.getErrorMessage()))


async def execute(reactor: Any, args: argparse.Namespace, stdin: Any, stdout: Any,
                  stderr: Any) -> int:
    """Run a validated ``rsocket-tx yamux`` command on a running reactor.

    :param reactor: the reactor.
    :param args: from :func:`validate`.
    :param stdin: binary file (the data's ``-``).
    :param stdout: binary file the reply is written to.
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
    data = b""
    if not args.ping:
        try:
            data = read_source(args.data, stdin) or b""
        except OSError as e:
            out.error(f"cannot read input: {e}")
            return EXIT_USAGE
    sessions: list[Any] = []
    work = Deferred.fromCoroutine(_run(reactor, endpoint, args, data, out, sessions))
    status = await await_command(reactor, work, args.timeout, out,
                                 lambda e: exit_status_for(e, args.endpoint, out,
                                                           lambda e: _yamux_status(e, out)))
    for session in sessions:
        await session.close()
    return status


async def _run(reactor: Any, endpoint: Any, args: argparse.Namespace, data: bytes,
               out: Streams, sessions: list[Any]) -> int:
    from .factory import connect

    session = await connect(reactor, endpoint, args.config)
    sessions.append(session)
    if args.ping:
        rtt = await session.ping()
        out.write(b"%.3f ms\n" % (rtt * 1000))
        return EXIT_OK
    cat = Cat(data, out)
    session.open_stream(cat)
    await cat.done
    return EXIT_OK


def _yamux_status(error: BaseException, out: Streams) -> int | None:
    if isinstance(error, StreamResetError):
        out.error(f"the stream was reset: {error}")
        return EXIT_RESET
    if isinstance(error, ConnectionClosedError):
        out.error(f"session ended: {error.reason or error}")
        return EXIT_CONNECTION
    if isinstance(error, YamuxError):
        out.error(f"error: {error}")
        return EXIT_CONNECTION
    return None


#: ``rsocket-tx yamux``, as :mod:`rsocket_tx.faces.main` gathers it (it serves nothing).
FACE = Face(
    add_commands=lambda commands: {"yamux": add_parser(commands)},
    validate=validate,
    execute=lambda reactor, args, streams, interrupted: execute(
        reactor, args, streams.stdin, streams.stdout, streams.stderr),
    is_server=lambda args: False,
)
