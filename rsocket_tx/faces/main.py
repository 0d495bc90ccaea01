"""The ``rsocket-tx`` command (``python -m rsocket_tx``): one parser holding every protocol's
commands, the run loop, the exit status.

It imports each protocol's face and asks it for its commands through one object, the face's
``FACE`` (a :class:`~rsocket_tx.faces.clikit.Face`): RSocket (:mod:`rsocket_tx.faces.cli`:
``request``, ``fnf``, ``stream``, ``channel``, ``metadata-push``, ``serve``), Jini ERI mux
(:mod:`rsocket_tx.jini.cli`: ``jini``), RS-network (:mod:`rsocket_tx.rsnet.cli`: ``rsnet``),
the 2015 ReactiveSocket draft (:mod:`rsocket_tx.reactivesocket.cli`: ``rs2015``) and yamux
(:mod:`rsocket_tx.yamux.cli`: ``yamux``). So the
registration goes downward: no face imports another (DESIGN §2).

Exit status: 0 success; 1 the peer answered with an error (an RSocket ERROR, ...); 2 bad usage
or unreadable input; 3 cannot connect, or the connection was lost; 4 ``--timeout`` expired; 130
interrupted (SIGINT/SIGTERM) before the end (:mod:`rsocket_tx.faces.clikit`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.logger import (
    FilteringLogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    globalLogBeginner,
    textFileLogObserver,
)

from ..jini import cli as jini_face
from ..reactivesocket import cli as rs2015_face
from ..rsnet import cli as rsnet_face
from ..yamux import cli as yamux_face
from . import cli as rsocket_face
from .clikit import (
    EXIT_CONNECTION,  # noqa: F401 - importable from here
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_RSOCKET_ERROR,  # noqa: F401 - importable from here
    EXIT_TIMEOUT,  # noqa: F401 - importable from here
    EXIT_USAGE,
    PROG,
    CommandParser,
    Face,
    ParserExit,
    RedactingWriter,
    Streams,
    UsageError,
    VersionAction,
    secrets_in,
)
from .serving import SettingsError, suggest_option

__all__ = [
    "main",
    "run",
    "build_parser",
    "parse_args",
    "log_level",
    "FACES",
]

#: The protocols' faces whose commands ``rsocket-tx`` has, in the order of ``--help``.
FACES: tuple[Face, ...] = (rsocket_face.FACE, jini_face.FACE, rsnet_face.FACE, rs2015_face.FACE,
                          yamux_face.FACE)


class TopParser(CommandParser):
    """The ``rsocket-tx`` parser: a :class:`~rsocket_tx.faces.clikit.CommandParser` that knows
    its commands' parsers and faces.

    :ivar command_parsers: ``dict[str, argparse.ArgumentParser]``: each command's parser (a
        :class:`~rsocket_tx.faces.clikit.CommandParser`, the subparsers' class).
    :ivar faces: ``dict[str, Face]``: each command's face.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.command_parsers: dict[str, argparse.ArgumentParser] = {}
        self.faces: dict[str, Face] = {}


def build_parser() -> TopParser:
    """The ``rsocket-tx`` argument parser (raises :class:`UsageError` instead of exiting), with
    the commands of every face of :data:`FACES`.

    Its ``command_parsers`` attribute maps each command to its parser, ``faces`` each command to
    its face.
    """
    parser = TopParser(
        prog=PROG,
        description="RSocket 1.0 command-line client and server (rsocket_tx, Twisted).",
        epilog=rsocket_face.help_epilog(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=VersionAction)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND",
                                     parser_class=CommandParser)
    commands.required = True
    for face in FACES:
        for name, sub in face.add_commands(commands).items():
            parser.command_parsers[name] = sub
            parser.faces[name] = face
    return parser


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse and validate ``argv`` (without the program name), each command by its face
    (:attr:`~rsocket_tx.faces.clikit.Face.validate`).

    Numbers are checked and converted; endpoints, the responder and ``--data``-style values are
    checked later (when run).

    :param argv: the arguments.
    :returns: the namespace; ``face`` is the command's :class:`~rsocket_tx.faces.clikit.Face`.
        RSocket's client commands get ints (bytes, milliseconds) and a float ``timeout``
        (seconds) or ``None``; ``serve`` gets ``settings`` (a
        :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings`).
    :raises UsageError: on any invalid argument.
    """
    parser = build_parser()
    args, extras = parser.parse_known_args(argv)
    if extras:
        sub = parser.command_parsers.get(args.command, parser)
        message = f"unrecognized arguments: {' '.join(extras)}"
        unknown = next((e for e in extras if e.startswith("--")), None)
        if unknown is not None:
            options = sub.all_options() if isinstance(sub, CommandParser) else []
            message += suggest_option(unknown, options)
        raise UsageError(message, sub.format_usage())
    args.face = parser.faces[args.command]
    try:
        args.face.validate(args)
    except SettingsError as e:
        sub = parser.command_parsers[args.command]
        raise UsageError(str(e), sub.format_usage()) from None
    return args


async def _execute(
    reactor, args: argparse.Namespace, streams: Streams, interrupted=lambda: False
) -> int:
    return await args.face.execute(reactor, args, streams, interrupted)


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
    except ParserExit as e:  # --help (argparse printed it) or an argparse exit with a message
        if e.message and e.stdout:
            stdout.write(e.message.encode())
            stdout.flush()
        elif e.message:
            stderr.write(e.message)
        return e.status


def log_level(args: argparse.Namespace) -> LogLevel:
    """The least level of the log lines (:mod:`twisted.logger`) written on standard error:
    a server command's log is its output (info; debug with ``--debug``); a client command
    writes its own messages, so library lines show only with ``--debug`` (and a critical
    one, an unhandled error, always).

    :param args: the parsed command line.
    """
    debug = bool(getattr(args, "debug", False))
    if args.face.is_server(args):
        return LogLevel.debug if debug else LogLevel.info
    return LogLevel.debug if debug else LogLevel.critical


def _begin_logging(args: argparse.Namespace, secrets: list[str]) -> None:
    stderr = RedactingWriter(sys.stderr, secrets) if secrets else sys.stderr
    observer = FilteringLogObserver(
        # (its stub asks for an IO; it only writes and flushes: any text file object works)
        textFileLogObserver(stderr),  # type: ignore[arg-type]
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
    # python -m rsocket_tx.faces.main: run the module imported under its own name (the copy
    # running as __main__ would be a second one, with classes of its own)
    from rsocket_tx.faces.main import main as main_of_the_module

    main_of_the_module()
