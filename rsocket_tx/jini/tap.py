"""The ``twistd jini-mux`` plugin: options, validation, and the service serving a Jini ERI mux
dispatcher (Jini ERI Multiplexing Protocol, the server side).

Usage::

    twistd -n jini-mux --listen tcp:9000:interface=127.0.0.1 \\
        --listen 'jini+tls://:9443?privateKey=key.pem&certKey=cert.pem' \\
        --dispatcher mypackage.mymodule:MyDispatcher --initial-ration 65536

The pieces are shared with ``rsocket-tx jini serve`` (:mod:`rsocket_tx.jini.cli`), so both
faces accept the same options, check them the same way and build the same service:

* :func:`server_endpoint` / :func:`client_endpoint` -- endpoint strings and URIs, with the
  ``jini+tcp://`` and ``jini+tls://`` URI forms (those of :mod:`rsocket_tx.jini.endpoints`,
  which the library's client and :func:`~rsocket_tx.jini.server.serve` use too);
* :data:`CONFIG_OPTIONS` -- the :class:`~rsocket_tx.jini.config.JiniMuxConfig` settings as
  command-line options, and :func:`parse_config` to validate them;
* :func:`parse_server_settings` -- strings in, a validated :class:`JiniServerSettings` out;
* :func:`build_service` -- a :class:`JiniServerSettings` in, a :class:`JiniServerService` out.

The protocol-neutral parts (the multi-endpoint service, ``--listen``, ``module:Class`` loading,
:class:`~rsocket_tx.faces.serving.SettingsError`) are those of ``twistd rsocket``, in
:mod:`rsocket_tx.faces.serving`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from twisted.logger import Logger
from twisted.python import usage

from ..faces.serving import (
    ConfigOption,
    ListenOptions,
    ServerService,
    SettingsError,
    load_class,
    named_class,
    option_message,
    parse_config_options,
    parse_int_option,
    parse_listen,
)
from ..faces.serving import check_listen as check_endpoint
from ..transports.limits import DEFAULT_MAX_CONNECTIONS, ConnectionLimit
from .config import (
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_FRAGMENT_SIZE,
    DEFAULT_HANDSHAKE_TIMEOUT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_INITIAL_RATION,
    DEFAULT_MAX_CONNECTION_BUFFER,
    DEFAULT_MAX_SEND_BUFFER_SIZE,
    DEFAULT_MAX_SESSION_BUFFER,
    DEFAULT_PING_TIMEOUT,
    MAX_INITIAL_RATION,
    JiniMuxConfig,
)
from .endpoints import URI_PREFIX, client_endpoint, server_endpoint

__all__ = [
    "Options",
    "makeService",
    "JiniServerSettings",
    "ConfigOption",
    "CONFIG_OPTIONS",
    "parse_config",
    "parse_server_settings",
    "load_dispatcher",
    "check_listen",
    "server_endpoint",
    "client_endpoint",
    "build_service",
    "JiniServerService",
    "DEFAULT_LISTEN",
    "DEFAULT_DISPATCHER",
    "URI_PREFIX",
    "LISTEN_HELP",
]

log = Logger()

#: Where ``twistd jini-mux`` listens when no ``--listen`` is given.
DEFAULT_LISTEN = "tcp:9000"
#: The dispatcher served when no ``--dispatcher`` is given: the demo echo dispatcher.
DEFAULT_DISPATCHER = "rsocket_tx.jini.echo:EchoDispatcher"

LISTEN_HELP = (
    "endpoint to listen on: a Twisted endpoint string (tcp:9000, tcp:9000:interface=127.0.0.1,"
    " ssl:9443:privateKey=KEY:certKey=CERT, mtls:9443:privateKey=KEY:caCerts=CA, unix:/path)"
    " or a URI (jini+tcp://127.0.0.1:9000, jini+tls://:9443?privateKey=KEY&certKey=CERT;"
    " tcp:// and tls:// too); repeat to listen on several"
    f" (default {DEFAULT_LISTEN})"
)


# -- endpoints -----------------------------------------------------------------------------------
# (server_endpoint, client_endpoint and URI_PREFIX are those of rsocket_tx.jini.endpoints,
# which the client and serve() use too)


def check_listen(spec: str) -> str:
    """Check that ``spec`` parses as a server endpoint for the mux, without a reactor
    (:func:`rsocket_tx.faces.serving.check_listen`).

    :returns: ``spec``.
    :raises SettingsError: if it cannot be parsed (the message starts with ``--listen:``).
    """
    return check_endpoint(spec, server_endpoint)


# -- the settings as options ---------------------------------------------------------------------


#: The :class:`~rsocket_tx.jini.config.JiniMuxConfig` settings both faces take as options.
CONFIG_OPTIONS: tuple[ConfigOption, ...] = (
    ConfigOption(
        "initial-ration", "BYTES",
        "the ration announced in our connection header: bytes the peer may send on a session"
        f" before we grant more; a multiple of 256 up to {MAX_INITIAL_RATION}, or 0 for"
        f" unlimited (default {DEFAULT_INITIAL_RATION}; Apache River's is 32768)",
        "bytes"),
    ConfigOption(
        "fragment-size", "BYTES",
        "the largest Data message body sent, 1..65535"
        f" (default {DEFAULT_FRAGMENT_SIZE}; Apache River's is 1024)",
        "bytes"),
    ConfigOption(
        "max-sessions", "N",
        "sessions at once on one connection, 1..128; a server refuses more with an Abort"
        " (safe to retry), a client opens another connection (default 128)",
        "sessions"),
    ConfigOption(
        "max-session-buffer", "BYTES",
        "received bytes of one session held for the application before the session is"
        f" aborted, at least the initial ration (default {DEFAULT_MAX_SESSION_BUFFER})",
        "bytes"),
    ConfigOption(
        "max-connection-buffer", "BYTES",
        "the same, summed over the sessions of a connection"
        f" (default {DEFAULT_MAX_CONNECTION_BUFFER})",
        "bytes"),
    ConfigOption(
        "handshake-timeout", "MS",
        "milliseconds to wait for the peer's connection header"
        f" (default {DEFAULT_HANDSHAKE_TIMEOUT})",
        "milliseconds"),
    ConfigOption(
        "ping-timeout", "MS",
        "milliseconds to wait for the PingAck answering our Ping before the peer is taken"
        f" to be down (default {DEFAULT_PING_TIMEOUT})",
        "milliseconds"),
    ConfigOption(
        "max-send-buffer-size", "BYTES",
        "bytes waiting for a peer that does not read before its connection is aborted"
        f" (default {DEFAULT_MAX_SEND_BUFFER_SIZE})",
        "bytes"),
    ConfigOption(
        "drain-timeout", "MS",
        "milliseconds established sessions get to end in a graceful close (on SIGTERM)"
        f" before the connection is closed anyway (default {DEFAULT_DRAIN_TIMEOUT})",
        "milliseconds", client=False),
    ConfigOption(
        "idle-timeout", "MS",
        "milliseconds a connection may stay open with no session in progress before the"
        f" server shuts it down; 0: never (default {DEFAULT_IDLE_TIMEOUT})",
        "milliseconds", client=False),
)


def parse_config(values: Mapping[str, object]) -> JiniMuxConfig:
    """Validate the :data:`CONFIG_OPTIONS` as typed on a command line.

    :param values: option values by :attr:`ConfigOption.attr` (``"initial_ration"``...): ints
        or decimal strings (``_`` separators allowed); ``None`` or absent = the default.
    :returns: the :class:`~rsocket_tx.jini.config.JiniMuxConfig`.
    :raises SettingsError: naming the first invalid option (``--initial-ration: ...``) and
        what it accepts.
    """
    kwargs = parse_config_options(CONFIG_OPTIONS, values)
    if "initial_ration" in kwargs:
        # a ration too small for the buffer defaults: raise them with it, unless given
        ration = kwargs["initial_ration"]
        for attr, default in (("max_session_buffer", DEFAULT_MAX_SESSION_BUFFER),
                              ("max_connection_buffer", DEFAULT_MAX_CONNECTION_BUFFER)):
            if attr not in kwargs and ration > default:
                kwargs[attr] = ration
    try:
        return JiniMuxConfig(**kwargs)
    except ValueError as e:
        raise SettingsError(option_message(CONFIG_OPTIONS, str(e))) from None


# -- the dispatcher ------------------------------------------------------------------------------


def load_dispatcher(spec: str) -> type:
    """Import the dispatcher class named ``spec``.

    :param spec: ``package.module:Class`` (``Class`` may be dotted: ``module:Outer.Inner``);
        ``package.module.Class`` is accepted too.
    :returns: the class, a subclass of :class:`rsocket_tx.jini.Dispatcher`.
    :raises SettingsError: the module cannot be imported, has no such attribute, or the
        attribute is not a Dispatcher subclass (the message starts with ``--dispatcher:``).
    """
    from .server import Dispatcher

    return load_class("dispatcher", spec, Dispatcher, "rsocket_tx.jini.Dispatcher")


# -- settings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JiniServerSettings:
    """Validated server settings, built by :func:`parse_server_settings`.

    :ivar listen: endpoint strings or URIs to listen on (at least one, no duplicates).
    :ivar dispatcher: the ``module:Class`` the dispatcher was loaded from.
    :ivar dispatcher_factory: the :class:`~rsocket_tx.jini.Dispatcher` subclass served, called
        with no arguments by the server factory.
    :ivar config: the connection settings (:class:`~rsocket_tx.jini.config.JiniMuxConfig`).
    :ivar max_connections: connections open at once on every listen endpoint together (>= 1;
        default :data:`~rsocket_tx.transports.limits.DEFAULT_MAX_CONNECTIONS`, 4,096); past
        it a new one is closed at once and the log says so.
    """

    listen: tuple[str, ...] = (DEFAULT_LISTEN,)
    dispatcher: str = DEFAULT_DISPATCHER
    dispatcher_factory: type | None = None
    config: JiniMuxConfig = field(default_factory=JiniMuxConfig)
    max_connections: int = DEFAULT_MAX_CONNECTIONS


def parse_server_settings(*, listen: Iterable[str] | None = None, dispatcher=None,
                          max_connections=None, **config_values) -> JiniServerSettings:
    """Validate server options as typed on a command line; ``None`` means "not given".

    :param listen: endpoint strings / URIs (``None`` or empty: :data:`DEFAULT_LISTEN`).
    :param dispatcher: ``package.module:Class`` or a Dispatcher subclass (``None``: the demo
        :class:`~rsocket_tx.jini.EchoDispatcher`).
    :param max_connections: connections open at once (>= 1; ``None``: 4,096).
    :param config_values: the :data:`CONFIG_OPTIONS` by :attr:`ConfigOption.attr`
        (``initial_ration="65536"``...), see :func:`parse_config`.
    :returns: the :class:`JiniServerSettings`.
    :raises SettingsError: (a :class:`ValueError`) naming the first invalid option.
    :raises TypeError: an unknown keyword argument.
    """
    known = {o.attr for o in CONFIG_OPTIONS}
    unknown = sorted(set(config_values) - known)
    if unknown:
        raise TypeError(f"unknown settings: {', '.join(unknown)}")
    from .server import Dispatcher

    specs = parse_listen(listen, DEFAULT_LISTEN, server_endpoint)
    if dispatcher is None:
        dispatcher = DEFAULT_DISPATCHER
    name, factory = named_class("dispatcher", dispatcher, Dispatcher,
                                "rsocket_tx.jini.Dispatcher")
    config = parse_config(config_values)
    cap = parse_int_option("max-connections", max_connections, minimum=1, maximum=2**31 - 1,
                           unit="connections")
    return JiniServerSettings(listen=specs, dispatcher=name, dispatcher_factory=factory,
                              config=config,
                              max_connections=DEFAULT_MAX_CONNECTIONS if cap is None else cap)


# -- the service ---------------------------------------------------------------------------------


class JiniServerService(ServerService):
    """The :class:`~rsocket_tx.faces.serving.ServerService` of ``twistd jini-mux``: one
    :class:`~rsocket_tx.faces.serving.EndpointService` per listen endpoint, all serving the same
    :class:`~rsocket_tx.jini.JiniMuxServerFactory`; on stop, established sessions get
    ``drain_timeout`` ms to end. Its log says "Jini ERI mux server".

    :ivar factory: the server factory.
    :ivar settings: the :class:`JiniServerSettings` it was built from.
    """

    def __init__(self, settings: JiniServerSettings, factory) -> None:
        super().__init__(settings, factory, name="jini-mux", server_name="Jini ERI mux server",
                         logger=log)


def build_service(settings: JiniServerSettings, reactor=None) -> JiniServerService:
    """Build (not start) the server service for ``settings``.

    :param settings: from :func:`parse_server_settings`.
    :param reactor: the reactor (``None``: the global reactor, imported only now).
    :returns: a :class:`JiniServerService`; starting it listens on every endpoint.
    :raises ValueError: an endpoint cannot be parsed.
    """
    from .echo import EchoDispatcher
    from .server import JiniMuxServerFactory

    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    limit = ConnectionLimit(settings.max_connections, server_name="Jini ERI mux server",
                            reactor=reactor)
    factory = JiniMuxServerFactory(settings.dispatcher_factory or EchoDispatcher,
                                   config=settings.config, reactor=reactor,
                                   connection_limit=limit)
    service = JiniServerService(settings, factory)
    service.listen_on(reactor, settings.listen, server_endpoint)
    return service


# -- twistd --------------------------------------------------------------------------------------


class Options(ListenOptions):
    """``twistd jini-mux`` options. After parsing, ``self["settings"]`` holds the validated
    :class:`JiniServerSettings`."""

    listen_help = LISTEN_HELP
    longdesc = (
        "Serve a Jini ERI multiplexing protocol dispatcher (the protocol of Apache River's"
        " TcpEndpoint/TcpServerEndpoint); default: the demo echo dispatcher, which answers each"
        " request with its own body."
    )
    optParameters = [
        ["dispatcher", None, None,
         "the Dispatcher subclass to serve, as package.module:Class (one instance per"
         f" connection; default {DEFAULT_DISPATCHER}, the echo demo)"],
        ["max-connections", None, None, "connections open at once, every --listen endpoint"
         " together; past it a new one is closed at once and the log says so (default"
         f" {DEFAULT_MAX_CONNECTIONS})"],
    ] + [[o.name, None, None, o.help] for o in CONFIG_OPTIONS if o.server]
    compData = usage.Completions(optActions={"listen": usage.CompleteList([DEFAULT_LISTEN])})

    def parse_settings(self) -> JiniServerSettings:
        return parse_server_settings(
            listen=self["listen"], dispatcher=self["dispatcher"],
            max_connections=self["max-connections"],
            **{o.attr: self[o.name] for o in CONFIG_OPTIONS if o.server})


def makeService(options) -> JiniServerService:
    """Build the ``twistd jini-mux`` service from parsed :class:`Options`.

    :raises ValueError: an endpoint cannot be parsed.
    """
    return build_service(options["settings"])
