"""The ``twistd yamux`` plugin: options, validation, and the service serving a Twisted
protocol factory on every stream of every yamux session.

Usage::

    twistd -n yamux --listen tcp:7890:interface=127.0.0.1 \\
        --listen 'yamux+tls://:7891?privateKey=key.pem&certKey=cert.pem' \\
        --stream-factory mypackage.mymodule:factory --max-streams 256

``--stream-factory`` names an ``IProtocolFactory`` (an instance, or a class built with no
arguments): each stream a client opens gets one of its protocols, as a TCP connection would;
default the echo (:class:`~rsocket_tx.yamux.echo.EchoFactory`).

The pieces are shared with the command line (:mod:`rsocket_tx.yamux.cli`):
:data:`CONFIG_OPTIONS` and :func:`parse_config`. The protocol-neutral parts are the face kit's
(:mod:`rsocket_tx.faces.serving`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from twisted.internet.interfaces import IProtocolFactory
from twisted.logger import Logger
from twisted.python import usage

from ..faces.serving import (
    ConfigOption,
    ListenOptions,
    ServerService,
    SettingsError,
    import_named,
    option_message,
    parse_config_options,
    parse_int_option,
    parse_listen,
)
from ..transports.limits import DEFAULT_MAX_CONNECTIONS, ConnectionLimit
from . import config as C  # noqa: N812 - the defaults, as the help texts quote them
from .config import YamuxConfig
from .endpoints import server_endpoint

__all__ = [
    "CONFIG_OPTIONS",
    "DEFAULT_LISTEN",
    "DEFAULT_STREAM_FACTORY",
    "LISTEN_HELP",
    "Options",
    "YamuxServerService",
    "YamuxServerSettings",
    "build_service",
    "load_stream_factory",
    "makeService",
    "parse_config",
    "parse_server_settings",
]

log = Logger()

#: Where ``twistd yamux`` listens when no ``--listen`` is given.
DEFAULT_LISTEN = "tcp:7890"
#: The stream factory served when no ``--stream-factory`` is given: the echo.
DEFAULT_STREAM_FACTORY = "rsocket_tx.yamux.echo:EchoFactory"

LISTEN_HELP = (
    "endpoint to listen on: a Twisted endpoint string (tcp:7890, tcp:7890:interface=127.0.0.1,"
    " ssl:7891:privateKey=KEY:certKey=CERT, unix:/path) or a URI (yamux+tcp://127.0.0.1:7890,"
    " yamux+tls://:7891?privateKey=KEY&certKey=CERT; tcp://, tls:// too); repeat to listen on"
    f" several (default {DEFAULT_LISTEN})"
)

#: The :class:`~rsocket_tx.yamux.config.YamuxConfig` settings the faces take as options (the
#: times are whole seconds; ``--keepalive-interval 0`` turns the keepalive off).
CONFIG_OPTIONS: tuple[ConfigOption, ...] = (
    ConfigOption("receive-window", "BYTES",
                 "the window granted to each stream, at least 262144 (default 262144)", "bytes"),
    ConfigOption("max-frame-length", "BYTES",
                 "the longest Data frame accepted (default: the receive window)", "bytes"),
    ConfigOption("max-streams", "N",
                 "streams the peer may have open at once; more are refused with RST"
                 f" (default {C.DEFAULT_MAX_STREAMS})", "streams"),
    ConfigOption("accept-backlog", "N",
                 "streams the peer opened not yet accepted; more are refused with RST"
                 f" (default {C.DEFAULT_ACCEPT_BACKLOG})", "streams", client=False),
    ConfigOption("send-frame-size", "BYTES",
                 f"the longest Data frame sent (default {C.DEFAULT_SEND_FRAME_SIZE})", "bytes"),
    ConfigOption("keepalive-interval", "SECONDS",
                 "seconds between keepalive Pings; 0: none (default"
                 f" {C.DEFAULT_KEEPALIVE_INTERVAL:.0f})", "seconds"),
    ConfigOption("ping-timeout", "SECONDS",
                 "seconds a Ping waits for its answer; an unanswered keepalive ends the session"
                 f" (default {C.DEFAULT_PING_TIMEOUT:.0f})", "seconds"),
    ConfigOption("stream-close-timeout", "SECONDS",
                 "seconds after our FIN within which the peer's must come, else RST; 0: wait"
                 f" for ever (default {C.DEFAULT_STREAM_CLOSE_TIMEOUT:.0f})", "seconds"),
    ConfigOption("max-send-buffer-size", "BYTES",
                 "bytes waiting for a peer that does not read before its connection is aborted"
                 f" (default {C.DEFAULT_MAX_SEND_BUFFER_SIZE})", "bytes"),
)

#: the options in seconds whose 0 means "none"
_OFF_AT_ZERO = ("keepalive_interval", "stream_close_timeout")


def parse_config(values: Mapping[str, object]) -> YamuxConfig:
    """Validate the :data:`CONFIG_OPTIONS` as typed on a command line.

    :param values: option values by :attr:`ConfigOption.attr` (ints or decimal strings,
        ``_`` separators allowed); ``None`` or absent = the default.
    :returns: the :class:`~rsocket_tx.yamux.config.YamuxConfig`.
    :raises SettingsError: naming the first invalid option and what it accepts.
    """
    kwargs: dict[str, Any] = parse_config_options(CONFIG_OPTIONS, values)
    for name in _OFF_AT_ZERO:
        if kwargs.get(name) == 0:
            kwargs[name] = None
    try:
        return YamuxConfig(**kwargs)
    except ValueError as e:
        raise SettingsError(option_message(CONFIG_OPTIONS, str(e))) from None


def load_stream_factory(spec: Any) -> Any:
    """The ``IProtocolFactory`` named ``spec``.

    :param spec: ``package.module:name`` naming a factory instance or a class built with no
        arguments; or the factory itself.
    :returns: the factory.
    :raises SettingsError: it cannot be imported, or is no ``IProtocolFactory`` (the message
        starts with ``--stream-factory:``).
    """
    obj = import_named("stream-factory", spec, "Name") if isinstance(spec, str) else spec
    if isinstance(obj, type):
        try:
            obj = obj()
        except TypeError as e:
            raise SettingsError(f"--stream-factory: {spec!r} cannot be built with no "
                                f"arguments: {e}") from None
    if not IProtocolFactory.providedBy(obj):
        raise SettingsError(f"--stream-factory: {spec!r} is no IProtocolFactory (give a "
                            f"twisted.internet.protocol.Factory, or a class of one)")
    return obj


@dataclass(frozen=True)
class YamuxServerSettings:
    """Validated server settings, built by :func:`parse_server_settings`.

    :ivar listen: endpoint strings or URIs to listen on (at least one, no duplicates).
    :ivar stream_factory_name: how ``--stream-factory`` named it.
    :ivar stream_factory: the ``IProtocolFactory`` each stream gets a protocol of.
    :ivar config: the session settings (:class:`~rsocket_tx.yamux.config.YamuxConfig`).
    :ivar max_connections: sessions open at once on every listen endpoint together (>= 1).
    """

    listen: tuple[str, ...] = (DEFAULT_LISTEN,)
    stream_factory_name: str = DEFAULT_STREAM_FACTORY
    stream_factory: Any = None
    config: YamuxConfig = field(default_factory=YamuxConfig)
    max_connections: int = DEFAULT_MAX_CONNECTIONS


def parse_server_settings(*, listen: Iterable[str] | None = None, stream_factory: Any = None,
                          max_connections: Any = None,
                          **config_values: Any) -> YamuxServerSettings:
    """Validate server options as typed on a command line; ``None`` means "not given".

    :param listen: endpoint strings / URIs (``None`` or empty: :data:`DEFAULT_LISTEN`).
    :param stream_factory: ``package.module:name`` or the factory (``None``:
        :data:`DEFAULT_STREAM_FACTORY`).
    :param max_connections: sessions open at once (>= 1; ``None``: 4,096).
    :param config_values: the :data:`CONFIG_OPTIONS` by :attr:`ConfigOption.attr`.
    :returns: the :class:`YamuxServerSettings`.
    :raises SettingsError: (a :class:`ValueError`) naming the first invalid option.
    :raises TypeError: an unknown keyword argument.
    """
    unknown = sorted(set(config_values) - {o.attr for o in CONFIG_OPTIONS})
    if unknown:
        raise TypeError(f"unknown settings: {', '.join(unknown)}")
    specs = parse_listen(listen, DEFAULT_LISTEN, server_endpoint)
    if stream_factory is None:
        stream_factory = DEFAULT_STREAM_FACTORY
    name = stream_factory if isinstance(stream_factory, str) else repr(stream_factory)
    loaded = load_stream_factory(stream_factory)
    config = parse_config(config_values)
    cap = parse_int_option("max-connections", max_connections, minimum=1, maximum=2**31 - 1,
                           unit="connections")
    return YamuxServerSettings(listen=specs, stream_factory_name=name, stream_factory=loaded,
                               config=config,
                               max_connections=DEFAULT_MAX_CONNECTIONS if cap is None else cap)


class YamuxServerService(ServerService):
    """The :class:`~rsocket_tx.faces.serving.ServerService` of ``twistd yamux``: one endpoint
    service per listen endpoint, all serving the same
    :class:`~rsocket_tx.yamux.factory.YamuxServerFactory`; on stop, each session gets Go Away
    and its transport is closed. Its log says "yamux server"."""

    def __init__(self, settings: YamuxServerSettings, factory: Any) -> None:
        super().__init__(settings, factory, name="yamux", server_name="yamux server",
                         logger=log)


def build_service(settings: YamuxServerSettings, reactor: Any = None) -> YamuxServerService:
    """Build (not start) the server service for ``settings``.

    :param settings: from :func:`parse_server_settings`.
    :param reactor: the reactor (``None``: the global reactor, imported only now).
    :returns: a :class:`YamuxServerService`; starting it listens on every endpoint.
    :raises ValueError: an endpoint cannot be parsed.
    """
    from .factory import YamuxServerFactory

    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    stream_factory = settings.stream_factory
    if stream_factory is None:
        stream_factory = load_stream_factory(DEFAULT_STREAM_FACTORY)
    limit = ConnectionLimit(settings.max_connections, server_name="yamux server",
                            reactor=reactor)
    factory = YamuxServerFactory(stream_factory, settings.config, reactor,
                                 connection_limit=limit)
    service = YamuxServerService(settings, factory)
    service.listen_on(reactor, settings.listen, server_endpoint)
    return service


class Options(ListenOptions):
    """``twistd yamux`` options. After parsing, ``self["settings"]`` holds the validated
    :class:`YamuxServerSettings`."""

    listen_help = LISTEN_HELP
    longdesc = (
        "Serve yamux (HashiCorp's stream multiplexer) over TCP and TLS: every stream a client"
        " opens runs a protocol of --stream-factory (default: echo)."
    )
    optParameters = [
        ["stream-factory", None, None,
         "the IProtocolFactory serving each stream, as package.module:name (an instance, or a"
         f" class built with no arguments; default {DEFAULT_STREAM_FACTORY}, the echo)"],
        ["max-connections", None, None, "sessions open at once, every --listen endpoint"
         " together; past it a new one is closed at once and the log says so (default"
         f" {DEFAULT_MAX_CONNECTIONS})"],
    ] + [[o.name, None, None, o.help] for o in CONFIG_OPTIONS if o.server]
    compData = usage.Completions(optActions={"listen": usage.CompleteList([DEFAULT_LISTEN])})

    def parse_settings(self) -> YamuxServerSettings:
        return parse_server_settings(
            listen=self["listen"], stream_factory=self["stream-factory"],
            max_connections=self["max-connections"],
            **{o.attr: self[o.name] for o in CONFIG_OPTIONS if o.server})


def makeService(options: Any) -> YamuxServerService:  # noqa: N802 - twistd's name
    """Build the ``twistd yamux`` service from parsed :class:`Options`.

    :raises ValueError: an endpoint cannot be parsed.
    """
    return build_service(options["settings"])
