"""The face kit's command-line side (DESIGN §2): the plumbing every protocol's ``rsocket-tx``
commands share, whatever the protocol. It imports no face; each protocol's face
(:mod:`rsocket_tx.faces.cli` for RSocket, :mod:`rsocket_tx.jini.cli`, :mod:`rsocket_tx.rsnet.cli`,
:mod:`rsocket_tx.reactivesocket.cli`) imports it, and :mod:`rsocket_tx.faces.main` (the
``rsocket-tx`` command) gathers the faces' commands (each face's :class:`Face`). The twistd side
of the kit is :mod:`rsocket_tx.faces.serving`.

* exit statuses (:data:`EXIT_OK` ... :data:`EXIT_INTERRUPTED`), :class:`UsageError`, the parser
  class (:class:`CommandParser`: raises instead of exiting, says "did you mean");
* payload input: :func:`add_payload_arguments`, :func:`resolve_payload_arguments`,
  :func:`read_source` (``TEXT``, ``@FILE``, ``-``, ``@@TEXT``), :func:`source_lines`;
* payload output: :func:`format_payload`, :func:`format_data`;
* :class:`Streams` (standard streams; secrets redacted: :func:`secrets_in`, :func:`redact`);
* timeouts: :func:`parse_timeout`, :func:`await_command`; errors to exit statuses:
  :func:`exit_status_for`; endpoints: :func:`wrong_port_hint`.
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
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, overload

from twisted.internet import error as internet_error
from twisted.internet.defer import CancelledError, Deferred

from ..core.payload import Payload
from ..transports.tls import TLSError, TLSVerificationError
from .framelog import URI_PASSWORD, mask_uri_passwords
from .serving import SettingsError

__all__ = [
    "EXIT_OK",
    "EXIT_RSOCKET_ERROR",
    "EXIT_USAGE",
    "EXIT_CONNECTION",
    "EXIT_TIMEOUT",
    "EXIT_INTERRUPTED",
    "PROG",
    "UsageError",
    "ParserExit",
    "CommandParser",
    "VersionAction",
    "package_version",
    "Face",
    "PAYLOAD_SOURCES",
    "add_payload_arguments",
    "resolve_payload_arguments",
    "parse_timeout",
    "parse_seconds",
    "Streams",
    "secrets_in",
    "redact",
    "RedactingWriter",
    "read_source",
    "LineReader",
    "source_lines",
    "format_payload",
    "format_data",
    "wrong_port_hint",
    "await_command",
    "exit_status_for",
]

#: Exit status: success.
EXIT_OK = 0
#: Exit status: the peer answered with an error (an RSocket ERROR, a Jini abort, an onError).
EXIT_RSOCKET_ERROR = 1
#: Exit status: bad usage or unreadable input.
EXIT_USAGE = 2
#: Exit status: cannot connect, or the connection was lost.
EXIT_CONNECTION = 3
#: Exit status: ``--timeout`` expired.
EXIT_TIMEOUT = 4
#: Exit status: interrupted (SIGINT/SIGTERM) before the end.
EXIT_INTERRUPTED = 130

#: The command's name, in its messages (``rsocket-tx: ...``).
PROG = "rsocket-tx"

class UsageError(Exception):
    """The command line is invalid; ``str()`` is the message (without the usage line).

    :ivar usage: the usage line of the (sub)command, or ``""``.
    """

    def __init__(self, message: str, usage: str = "") -> None:
        super().__init__(message)
        self.usage = usage


class ParserExit(Exception):
    """The parser is done without a namespace (``--help``, ``--version``): exit with
    ``status``, having written ``message`` (on standard output if ``stdout``)."""

    def __init__(self, status: int, message: str | None, stdout: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.stdout = stdout  # the message goes to standard output (--version)


class CommandParser(argparse.ArgumentParser):
    """An ArgumentParser that raises (:class:`UsageError`, :class:`ParserExit`) instead of
    exiting, so :func:`rsocket_tx.faces.main.run` works in-process, and
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
                if isinstance(sub, CommandParser):
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
        raise ParserExit(status, message)


_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


class VersionAction(argparse.Action):
    """``--version``: print ``rsocket-tx VERSION`` on standard output and exit 0."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, default=argparse.SUPPRESS,
                 help="print the version and exit"):
        super().__init__(option_strings, dest=dest, default=default, nargs=0, help=help)

    def __call__(self, parser, namespace, values, option_string=None):
        raise ParserExit(EXIT_OK, f"{PROG} {package_version()}\n", stdout=True)


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



def parse_timeout(value) -> float | None:
    """Validate ``--timeout`` (every command of ``rsocket-tx`` but ``serve``).

    :param value: ``None`` (not given) or a decimal string, in seconds.
    :returns: the seconds (a positive, finite float), or ``None``.
    :raises SettingsError: it is not a number, or not positive and finite.
    """
    return parse_seconds("timeout", value, None)


def parse_seconds(name: str, value, default: float | None) -> float | None:
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


@overload
def read_source(value: str, stdin: Any) -> bytes: ...
@overload
def read_source(value: None, stdin: Any) -> None: ...
@overload
def read_source(value: str | None, stdin: Any) -> bytes | None: ...
def read_source(value: str | None, stdin: Any) -> bytes | None:
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


class LineReader:
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

    def next_line(self) -> Deferred[bytes | None]:
        """A Deferred firing with the next line (without its newline), or None at the end."""
        d: Deferred[bytes | None] = Deferred()
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


async def source_lines(reactor, value: str, stdin):
    """The lines of a ``--data``-style value (an async iterator of bytes, without their
    newlines): standard input read lazily (:class:`LineReader`), or a file or literal
    (:func:`read_source`) split into lines.

    :raises OSError: if the file cannot be read.
    """
    if value == "-":
        reader = LineReader(reactor, stdin)
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


def _timed_out(timeout: float | None, streams: Streams) -> int:
    assert timeout is not None  # (only a timeout times out)
    seconds = f"{timeout:g}"
    streams.error(f"timed out after {seconds} second{'s' if seconds != '1' else ''}")
    return EXIT_TIMEOUT



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


# -- a protocol's commands -------------------------------------------------------------------


@dataclass(frozen=True)
class Face:
    """One protocol's commands of ``rsocket-tx``, as its face module gives them to
    :mod:`rsocket_tx.faces.main` (its ``FACE``), which calls nothing else of it.

    :ivar add_commands: called with the subparsers action of the ``rsocket-tx`` parser (its
        parser class :class:`CommandParser`); adds the face's commands and returns their
        parsers by command name.
    :ivar validate: checks and converts the parsed arguments of one of its commands (after
        argparse); raises :class:`UsageError`, or :class:`~rsocket_tx.faces.serving.SettingsError`
        (reported with the command's usage).
    :ivar execute: ``execute(reactor, args, streams, interrupted)`` runs a validated command
        on a running reactor; its awaitable gives the exit status. ``interrupted()`` is true
        once the reactor is stopping (SIGINT/SIGTERM): a failure then is only its echo.
    :ivar is_server: whether the command serves (its log is its output: info lines shown).
    """

    add_commands: Callable[[Any], dict[str, argparse.ArgumentParser]]
    validate: Callable[[argparse.Namespace], None]
    execute: Callable[[Any, argparse.Namespace, Streams, Callable[[], bool]], Awaitable[int]]
    is_server: Callable[[argparse.Namespace], bool]
