"""The face kit's twistd side (DESIGN §2): what the server faces of every protocol share --
``twistd rsocket`` and ``rsocket-tx serve`` (:mod:`rsocket_tx.faces.tap`), ``twistd jini-mux``
(:mod:`rsocket_tx.jini.tap`), ``twistd rsnet`` (:mod:`rsocket_tx.rsnet.tap`), ``twistd rs2015``
(:mod:`rsocket_tx.reactivesocket.tap`) and ``twistd mux`` (:mod:`rsocket_tx.faces.mux`). It
imports no face; the command-line side of the kit is :mod:`rsocket_tx.faces.clikit`.

Nothing here knows a protocol: a face passes in its endpoint parser, its factory and the names
it logs under.

* option checks: :class:`SettingsError`, :func:`parse_int_option`, :class:`ConfigOption`
  (with :func:`parse_config_options`, :func:`option_message`), :func:`parse_listen`,
  :func:`check_listen`, :func:`import_named`, :func:`load_class`, :func:`named_class`;
* :class:`ListenOptions` -- a twistd :class:`~twisted.python.usage.Options` base with a
  repeatable ``--listen``/``-l``;
* :class:`ServerService` -- one factory served on several endpoints: a failed listen fails the
  start (and stops the endpoints already listening), ``stopService`` closes the connections
  gracefully; :class:`EndpointService` and :class:`ObservedEndpoint` are its parts;
* :func:`metrics_module` -- :mod:`rsocket_tx.metrics` for ``--metrics``, or a usage error
  naming the extra to install.
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import sys
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from twisted.application.internet import StreamServerEndpointService
from twisted.application.service import MultiService, Service
from twisted.internet.defer import (
    CancelledError,
    Deferred,
    DeferredList,
    gatherResults,
    maybeDeferred,
    succeed,
)
from twisted.internet.error import CannotListenError
from twisted.internet.interfaces import IStreamServerEndpoint
from twisted.logger import Logger
from twisted.python import usage
from twisted.python.failure import Failure
from zope.interface import implementer

_T = TypeVar("_T")  # the base class load_class() and named_class() check for

__all__ = [
    "SettingsError",
    "parse_int_option",
    "ConfigOption",
    "parse_config_options",
    "option_message",
    "check_listen",
    "scheme_hint",
    "parse_listen",
    "import_named",
    "current_directory_on_path",
    "describe_import_error",
    "load_class",
    "named_class",
    "ListenOptions",
    "suggest_option",
    "ListenFailed",
    "describe_listen_failure",
    "format_address",
    "ObservedEndpoint",
    "EndpointService",
    "ServerService",
    "metrics_module",
    "METRICS_INSTALL_HINT",
]

log = Logger()


class SettingsError(ValueError):
    """An option value is invalid; the message names the option and says what is expected."""


# -- option checks -------------------------------------------------------------------------------


def parse_int_option(
    name: str, value, *, minimum: int, maximum: int | None = None, unit: str
) -> int | None:
    """Validate an integer option.

    :param name: the option's long name, without ``--`` (for the message).
    :param value: ``None`` (not given), an int, or a decimal string (``_`` separators allowed).
    :param minimum: the smallest value accepted.
    :param maximum: the largest value accepted (``None``: no limit).
    :param unit: the unit, for the message (``"bytes"``, ``"milliseconds"``).
    :returns: the integer, or ``None`` if ``value`` is ``None``.
    :raises SettingsError: if it is not an integer or out of range.
    """
    if value is None:
        return None
    if isinstance(value, bool):
        raise SettingsError(f"--{name}: expected an integer number of {unit}, got {value!r}")
    if isinstance(value, int):
        number = value
    else:
        text = str(value).strip().replace("_", "")
        try:
            number = int(text, 10)
        except ValueError:
            raise SettingsError(
                f"--{name}: expected an integer number of {unit}, got {value!r}"
            ) from None
    if number < minimum:
        raise SettingsError(f"--{name}: must be at least {minimum} {unit}, got {number}")
    if maximum is not None and number > maximum:
        raise SettingsError(f"--{name}: must be at most {maximum} {unit}, got {number}")
    return number


@dataclass(frozen=True)
class ConfigOption:
    """One setting of a protocol's connection config (e.g.
    :class:`~rsocket_tx.jini.config.JiniMuxConfig`,
    :class:`~rsocket_tx.rsnet.config.RSNetConfig`) as a command-line option of its faces.

    :ivar name: the long option name, without ``--``; the setting is ``name`` with ``_`` for
        ``-``.
    :ivar metavar: the value's placeholder (its unit).
    :ivar help: the help text (says the unit and the default).
    :ivar unit: the unit, for error messages.
    :ivar server: the option applies to the server faces (twistd, ``rsocket-tx serve``).
    :ivar client: the option applies to the client face (the ``rsocket-tx`` command).
    """

    name: str
    metavar: str
    help: str
    unit: str
    server: bool = True
    client: bool = True

    @property
    def attr(self) -> str:
        """The config's field."""
        return self.name.replace("-", "_")


def parse_config_options(options: Iterable[ConfigOption], values) -> dict:
    """Validate integer :class:`ConfigOption` values as typed on a command line.

    :param options: the options.
    :param values: a mapping of option values by :attr:`ConfigOption.attr` (ints or decimal
        strings, ``_`` separators allowed); ``None`` or absent = the default.
    :returns: ``{attr: int}`` for the options given (each >= 0), for the config's constructor.
    :raises SettingsError: naming the first invalid option and what it accepts.
    """
    kwargs = {}
    for option in options:
        number = parse_int_option(option.name, values.get(option.attr), minimum=0,
                                  unit=option.unit)
        if number is not None:
            kwargs[option.attr] = number
    return kwargs


def option_message(options: Iterable[ConfigOption], message: str) -> str:
    """A config's error (``"hello_timeout must be ..."``, a :class:`ValueError`'s message)
    worded for the command line (``"--hello-timeout: must be ..."``); other messages as
    they are."""
    for option in options:
        if message.startswith(option.attr + " "):
            return f"--{option.name}: {message[len(option.attr) + 1:]}"
    return message


class _NoReactor:
    """Stands in for the reactor while endpoint strings are only checked, so that option
    parsing never imports (and so installs) the global reactor before twistd picks one."""


def check_listen(spec, server_endpoint: Callable) -> str:
    """Check that ``spec`` parses as a server endpoint, without a reactor.

    :param spec: an endpoint string or URI (or an endpoint object).
    :param server_endpoint: the face's parser, ``server_endpoint(reactor, spec)``
        (e.g. :func:`rsocket_tx.transports.endpoints.server_endpoint`), raising ValueError.
    :returns: ``spec``.
    :raises SettingsError: if it cannot be parsed (the message starts with ``--listen:``).
    """
    try:
        server_endpoint(_NoReactor(), spec)
    except ValueError as e:
        hint = scheme_hint(spec) if "Unknown endpoint type" in str(e) else ""
        raise SettingsError(f"--listen: {e}{hint}") from None
    except OSError as e:  # a file the endpoint names (a TLS key...) cannot be read
        raise SettingsError(f"--listen: {spec}: {e}") from None
    except Exception:
        pass  # a parser that wants a real reactor: checked when the service is built
    return spec


_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]*):(\d{1,5})")


def scheme_hint(spec: str) -> str:
    """A "did you mean" for an address typed without its transport: ``HOST:PORT``
    (``localhost:7878``, ``[::1]:7878``, ``:7878``) or a bare port.

    :param spec: the endpoint as typed.
    :returns: ``" (did you mean tcp://localhost:7878?)"`` (a bare port: on ``localhost``), or
        ``""`` when ``spec`` is not such an address. (``tcp:7878`` looks like one too: give
        the hint only when the endpoint type is unknown.)
    """
    text = spec.strip()
    if text.isdigit() and len(text) <= 5:
        return f" (did you mean tcp://localhost:{text}?)"
    found = _HOST_PORT.fullmatch(text)
    if found is None:
        return ""
    return f" (did you mean tcp://{found.group(1)}:{found.group(2)}?)"


def parse_listen(listen: Iterable[str] | None, default: str,
                 server_endpoint: Callable) -> tuple[str, ...]:
    """Validate the ``--listen`` values of a server face.

    :param listen: endpoint strings / URIs, in the order given (``None`` or empty: ``default``).
    :param default: the face's default endpoint.
    :param server_endpoint: the face's parser (see :func:`check_listen`).
    :returns: the endpoints, at least one.
    :raises SettingsError: one does not parse, or one is given twice.
    """
    specs = tuple(listen) if listen else (default,)
    for spec in specs:
        check_listen(spec, server_endpoint)
    if len(set(specs)) != len(specs):
        raise SettingsError(f"--listen: the same endpoint is given twice: {list(specs)}")
    return specs


def import_named(option: str, spec: str, kind: str = "Class"):
    """Import the object named ``spec`` for ``--option``.

    :param option: the option's long name, without ``--`` (for the message).
    :param spec: ``package.module:Attr`` (``Attr`` may be dotted: ``module:Outer.Inner``) or
        ``package.module.Attr``.
    :param kind: what ``Attr`` is, for the message (``"Class"``, ``"Name"``).
    :returns: the object.
    :raises SettingsError: if the module cannot be imported (or raises while importing) or has
        no such attribute.
    """
    text = spec.strip()
    if ":" in text:
        module_name, _, attr_path = text.partition(":")
    else:
        module_name, _, attr_path = text.rpartition(".")
    if not module_name or not attr_path:
        raise SettingsError(f"--{option}: expected package.module:{kind}, got {spec!r}")
    current_directory_on_path()
    try:
        obj = importlib.import_module(module_name)
    except Exception as e:  # not found, or the module itself raised while importing
        raise SettingsError(f"--{option}: {describe_import_error(module_name, e)}") from None
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SettingsError(
                f"--{option}: module {module_name!r} has no attribute {attr_path!r}"
            ) from None
    return obj


def current_directory_on_path() -> None:
    """Put the current directory first on ``sys.path`` (once), so that ``--responder mod:Class``
    and the other ``module:Name`` options find a module in the directory the server is started
    from, as gunicorn and ``python -m`` do (an installed console script such as ``twistd`` or
    ``rsocket-tx`` does not put it there)."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)


def describe_import_error(module_name: str, error: BaseException) -> str:
    """Say in one line why importing ``module_name`` failed, with the file and line.

    :param module_name: the module imported (``"mypackage.mymodule"``).
    :param error: what ``importlib.import_module`` raised.
    :returns: ``"cannot import module 'm': no module named 'm' (looked in the current directory
        /srv and the Python path)"`` when the module itself is missing, else
        ``"cannot import module 'm' from /srv/m.py line 3: NameError: name 'x' is not defined"``:
        the innermost place of the error outside the import machinery (for a SyntaxError,
        the file and line it names).
    """
    if isinstance(error, ModuleNotFoundError) and error.name is not None and (
            module_name == error.name or module_name.startswith(error.name + ".")):
        return (f"cannot import module {module_name!r}: no module named {error.name!r}"
                f" (looked in the current directory {os.getcwd()} and the Python path)")
    where = ""
    if isinstance(error, SyntaxError) and error.filename:
        where = f" from {error.filename} line {error.lineno}"
        message = f"{type(error).__name__}: {error.msg}"
    else:
        frames = [f for f in traceback.extract_tb(error.__traceback__)
                  if not f.filename.startswith("<frozen ")
                  and os.path.abspath(f.filename) != os.path.abspath(__file__)]
        if frames:
            where = f" from {frames[-1].filename} line {frames[-1].lineno}"
        message = f"{type(error).__name__}: {error}"
    return f"cannot import module {module_name!r}{where}: {message}"


def load_class(option: str, spec: str, base: type[_T], base_name: str) -> type[_T]:
    """Import the subclass of ``base`` named ``spec`` (see :func:`import_named`).

    :param base_name: how the message names ``base`` (``"rsocket_tx.Responder"``).
    :returns: the class.
    :raises SettingsError: it cannot be imported, or is not a subclass of ``base``.
    """
    obj = import_named(option, spec, "Class")
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise SettingsError(
            f"--{option}: {spec!r} is not a subclass of {base_name} (it is {obj!r})"
        )
    return obj


def named_class(option: str, value: object, base: type[_T], base_name: str) -> tuple[str, type[_T]]:
    """A class option given as ``package.module:Class`` (imported, :func:`load_class`) or as
    the class itself.

    :returns: ``(the name "module:Class", the class)``.
    :raises SettingsError: it cannot be imported, or is not a subclass of ``base``.
    """
    if isinstance(value, str):
        return value, load_class(option, value, base, base_name)
    if not (isinstance(value, type) and issubclass(value, base)):
        raise SettingsError(f"--{option}: {value!r} is not a {base.__name__} subclass")
    return f"{value.__module__}:{value.__qualname__}", value


# -- twistd options ------------------------------------------------------------------------------


class ListenOptions(usage.Options):
    """The twistd options of a server face: ``--listen``/``-l`` ENDPOINT, repeatable (the
    values in ``self["listen"]``, in order), and validation in :meth:`postOptions`.

    A subclass sets :attr:`listen_help`, a ``compData`` completing ``--listen`` and its other
    options, and implements :meth:`parse_settings`.
    """

    synopsis = "[options]"
    #: the help text of ``--listen``
    listen_help = "endpoint to listen on; repeat to listen on several"

    def __init__(self) -> None:
        super().__init__()
        self["listen"] = []
        self.docs["listen"] = self.listen_help

    def opt_listen(self, endpoint: str) -> None:
        self["listen"].append(endpoint)

    opt_l = opt_listen

    def parse_settings(self):
        """The validated settings of the options parsed (stored as ``self["settings"]``).

        :raises SettingsError: naming the first invalid option.
        """
        raise NotImplementedError

    def postOptions(self) -> None:
        try:
            self["settings"] = self.parse_settings()
        except SettingsError as e:
            raise usage.UsageError(str(e)) from None

    def parseOptions(self, options=None) -> None:
        """Parse ``options``; an unknown option's error suggests the nearest known one.

        Under twistd (a ``twistd`` command line with this face as its subcommand), a usage
        error is written first, on standard error, followed by one line of usage, and twistd
        exits with status 1, instead of twistd printing every option's help and then the
        error.

        :raises usage.UsageError: an invalid option (not under twistd).
        :raises SystemExit: status 1, under twistd, having written the error.
        """
        try:
            super().parseOptions(options)
        except usage.UsageError as e:
            message = str(e)
            unknown = _UNKNOWN_OPTION.fullmatch(message)
            if unknown:
                message += suggest_option(unknown.group(1), self.longOpt)
            command = getattr(getattr(self, "parent", None), "subCommand", None)
            if not command:
                raise usage.UsageError(message) from None
            sys.stderr.write(f"twistd {command}: error: {message}\n"
                             f"usage: twistd [options] {command} [options]"
                             f" ('twistd {command} --help' lists them)\n")
            sys.stderr.flush()
            raise SystemExit(1) from None


_UNKNOWN_OPTION = re.compile(r"option --?(\S+) not recognized")


def suggest_option(unknown: str, known: Iterable[str]) -> str:
    """A "did you mean" for an unknown long option.

    :param unknown: the option typed, with or without its leading dashes.
    :param known: the long options (with or without ``--``; a trailing ``=`` is ignored).
    :returns: ``" (did you mean --fragment-size?)"``, or ``""`` when nothing is close.
    """
    names = [name.strip("-").rstrip("=") for name in known]
    close = difflib.get_close_matches(unknown.strip("-").split("=", 1)[0], names, n=1,
                                      cutoff=0.6)
    return f" (did you mean --{close[0]}?)" if close else ""


# -- the service ---------------------------------------------------------------------------------


def format_address(address) -> str:
    """``host:port`` (``[host]:port`` for IPv6) of a listening port's address, the path of a
    UNIX socket, else ``str(address)``."""
    host = getattr(address, "host", None)
    port = getattr(address, "port", None)
    if host is not None and port is not None:
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    name = getattr(address, "name", None)
    if name is not None:
        return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
    return str(address)


@implementer(IStreamServerEndpoint)
class ObservedEndpoint:
    """Wraps a server endpoint to log where it listens and to tell waiters when it does.

    :param endpoint: the ``IStreamServerEndpoint``.
    :param spec: how the user named it (for the log).
    :param server_name: what the log calls the server (``"RSocket server"``).
    :param logger: the face's :class:`~twisted.logger.Logger`.
    :ivar outcome: the listening port, or the Failure of ``listen``; None before.
    """

    def __init__(self, endpoint, spec: str, server_name: str = "server",
                 logger: Logger = log) -> None:
        self.endpoint = endpoint
        self.spec = spec
        self.server_name = server_name
        self.logger = logger
        self.outcome = None
        self.waiters: list[Deferred] = []

    def listen(self, factory) -> Deferred:
        d = self.endpoint.listen(factory)
        d.addBoth(self.settle)
        return d

    def settle(self, outcome):
        """``listen`` ended with ``outcome`` (a port or a Failure): log it, tell the waiters.

        :returns: ``outcome``.
        """
        if not isinstance(outcome, Failure):
            self.logger.info("{server} listening on {address} (endpoint {spec})",
                             server=self.server_name, address=format_address(outcome.getHost()),
                             spec=self.spec)
        self.outcome = outcome
        waiters, self.waiters = self.waiters, []
        for d in waiters:
            if isinstance(outcome, Failure):
                d.errback(outcome)
            else:
                d.callback(outcome)
        return outcome

    def when_listening(self) -> Deferred:
        """A Deferred firing with the port once listening, or failing as ``listen`` did."""
        if isinstance(self.outcome, Failure):
            d: Deferred = Deferred()
            d.errback(self.outcome)
            return d
        if self.outcome is not None:
            return succeed(self.outcome)
        d = Deferred()
        self.waiters.append(d)
        return d


class EndpointService(StreamServerEndpointService):
    """A :class:`~twisted.application.internet.StreamServerEndpointService` that fails
    start-up when its endpoint cannot listen (a port in use…), as
    ``twisted.application.strports.service`` does, instead of logging and running deaf (and
    without Twisted's private ``_raiseSynchronously``). Any face may use it.

    :param endpoint: an ``IStreamServerEndpoint``.
    :param factory: the factory to listen with.
    :param server_name: what the log calls the server, should listening fail later.
    :param logger: the face's :class:`~twisted.logger.Logger`.
    :ivar listening: the Deferred of the endpoint's ``listen`` (firing with the port) once
        started, else None.
    """

    def __init__(self, endpoint, factory, server_name: str = "server",
                 logger: Logger = log) -> None:
        super().__init__(endpoint, factory)
        self.server_name = server_name
        self.logger = logger
        self.listening: Deferred | None = None

    def privilegedStartService(self) -> None:
        Service.privilegedStartService(self)
        self.listening = self.endpoint.listen(self.factory)
        starting = True
        raised_now = []

        def failed(failure):
            if starting:
                raised_now.append(failure)  # raised below
            elif not failure.check(CancelledError):
                self.logger.failure("{server} endpoint failed to listen", failure,
                                    server=self.server_name)

        self.listening.addErrback(failed)
        starting = False
        if raised_now:
            raised_now[0].raiseException()

    def startService(self) -> None:
        Service.startService(self)
        if self.listening is None:
            self.privilegedStartService()

    def stopService(self) -> Deferred:
        """Stop listening (or cancel the attempt to).

        :returns: a Deferred firing with None once the port has stopped listening.
        """
        listening = self.listening
        assert listening is not None, "stopService() follows startService()"
        listening.cancel()

        def stop_listening(port):
            if port is not None:
                return port.stopListening()

        def stopped(result):
            self.running = False
            return result

        return listening.addCallback(stop_listening).addBoth(stopped)


def describe_listen_failure(error: BaseException) -> str:
    """One line saying why a server endpoint cannot listen, as ``rsocket-tx serve`` and
    ``twistd`` print it: ``"cannot listen on 127.0.0.1:7878: Address already in use"``
    (``*``: every interface)."""
    if isinstance(error, CannotListenError):
        cause = getattr(error.socketError, "strerror", None) or str(error.socketError)
        return f"cannot listen on {error.interface or '*'}:{error.port}: {cause}"
    return f"cannot listen: {error}"


class ListenFailed(SystemExit, Exception):
    """An endpoint of a server started by twistd (or a ``.tac`` file) cannot listen.

    An :class:`Exception`, so that twistd reports it to the parent of a daemon and removes
    its pid file; a :class:`SystemExit` with status 1, so that the interpreter exits without
    printing a traceback (the reason has been logged, in one line). ``str()`` is the reason.
    """

    def __init__(self, reason: str) -> None:
        super().__init__(1)
        self.reason = reason

    def __str__(self) -> str:
        return self.reason


class ServerService(MultiService):
    """A :class:`~twisted.application.service.MultiService` with one :class:`EndpointService`
    per listen endpoint, all serving the same factory.

    :param settings: the face's validated settings (kept as :attr:`settings`).
    :param factory: the server factory; its ``close_connections()`` closes every connection
        gracefully, returning a Deferred. It is made quiet (``noisy = False``): the service
        logs where it listens, with the endpoint.
    :param name: the service's name (``"rsocket"``).
    :param server_name: what the log calls the server (``"RSocket server"``).
    :param logger: the face's :class:`~twisted.logger.Logger` (its namespace shows in the log).
    :ivar endpoints: the :class:`ObservedEndpoint` of each endpoint, in the order added.
    :ivar listen_services: the :class:`EndpointService` of each endpoint, in the same order.
    """

    def __init__(self, settings, factory, *, name: str | None = None,
                 server_name: str = "server", logger: Logger = log) -> None:
        super().__init__()
        self.settings = settings
        self.factory = factory
        factory.noisy = False
        if name is not None:
            self.setName(name)
        self.server_name = server_name
        self.logger = logger
        self.endpoints: list[ObservedEndpoint] = []
        self.listen_services: list[EndpointService] = []

    def add_endpoint(self, endpoint, spec: str) -> EndpointService:
        """Listen on ``endpoint`` too (``spec`` names it in the log) once started; an endpoint
        that cannot listen fails the start (:class:`EndpointService`).

        :returns: its :class:`EndpointService`.
        """
        observed = ObservedEndpoint(endpoint, spec, self.server_name, self.logger)
        self.endpoints.append(observed)
        service = EndpointService(observed, self.factory, self.server_name, self.logger)
        service.setServiceParent(self)
        self.listen_services.append(service)
        return service

    def listen_on(self, reactor, specs: Iterable[str], server_endpoint: Callable) -> None:
        """:meth:`add_endpoint` for each of ``specs``, parsed with ``server_endpoint(reactor,
        spec)``.

        :raises ValueError: an endpoint cannot be parsed.
        """
        for spec in specs:
            self.add_endpoint(server_endpoint(reactor, spec), spec)

    def privilegedStartService(self) -> None:
        """Start listening (what twistd and a ``.tac`` file call first).

        :raises ListenFailed: an endpoint cannot listen (the port is in use…), having logged
            one line saying so, so that twistd exits with status 1 without a traceback.
        """
        try:
            self.start_or_abort(super().privilegedStartService)
        except (CannotListenError, OSError) as e:
            reason = describe_listen_failure(e)
            self.logger.error("{server}: {reason}", server=self.server_name, reason=reason)
            raise ListenFailed(reason) from None

    def startService(self) -> None:
        self.start_or_abort(super().startService)

    def start_or_abort(self, start: Callable[[], None]) -> None:
        """Call ``start``; if it raises (an endpoint could not listen), :meth:`abort_start`
        and raise."""
        try:
            start()
        except BaseException:
            self.abort_start()
            raise

    def abort_start(self) -> None:
        """An endpoint could not listen: stop those already listening, so that a failed start
        leaves nothing behind."""
        for service in self.listen_services:
            if service.listening is not None:
                maybeDeferred(service.stopService).addErrback(
                    lambda f: self.logger.failure("stopping after a failed start", f))
        self.running = False

    def close_connections(self) -> Deferred:
        """Close every connection of the factory gracefully (a subclass may say so first).

        :returns: a Deferred firing once they are closed.
        """
        return maybeDeferred(self.factory.close_connections)

    def stopService(self) -> Deferred:
        """Stop listening, then close every connection gracefully (what twistd does on
        SIGTERM; :meth:`close_connections`).

        :returns: a Deferred (twistd waits for it) firing once every endpoint has stopped
            listening and every connection is closed.
        """
        stopped = maybeDeferred(super().stopService)
        closed = self.close_connections()
        return gatherResults([stopped, closed], consumeErrors=True).addCallback(lambda _: None)

    def when_listening(self) -> Deferred:
        """Fire with the listening ports (in the order added) once every endpoint listens, or
        fail with the first endpoint's error. Call after :meth:`startService`."""
        d = DeferredList([e.when_listening() for e in self.endpoints], fireOnOneErrback=True,
                         consumeErrors=True)
        return d.addCallbacks(lambda results: [port for _, port in results],
                              lambda failure: failure.value.subFailure)


#: What to run when ``--metrics`` is given without its optional dependency.
METRICS_INSTALL_HINT = "pip install 'rsocket_tx[metrics]'"


def metrics_module():
    """:mod:`rsocket_tx.metrics`, imported only when ``--metrics`` is given (it needs the
    ``metrics`` extra).

    :raises usage.UsageError: ``prometheus_client`` is not installed (the message names the
        extra to install: :data:`METRICS_INSTALL_HINT`).
    """
    try:
        from .. import metrics
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] != "prometheus_client":
            raise
        raise usage.UsageError(f"--metrics needs prometheus_client, which is not installed: "
                               f"{METRICS_INSTALL_HINT}") from None
    return metrics
