"""The ``twistd rsnet`` plugin: options, validation, and the service serving Reactive Streams
network publishers.

Usage::

    twistd -n rsnet --listen tcp:7880:interface=127.0.0.1 \\
        --listen 'rsnet+tls://:7881?privateKey=key.pem&certKey=cert.pem' \\
        --listen rsnet+ws://:8080/rsnet \\
        --publishers mypackage.mymodule:publishers --max-element-size 65536

``--publishers`` names a :class:`~rsocket_tx.rsnet.publishers.Publisher` subclass (one
instance serves every connection), a Publisher instance, or a mapping ``{name:
factory(request)}``; default: the demo publishers (:class:`~rsocket_tx.rsnet.demo.DemoPublisher`:
``count``, ``count/N``, ``ints/N``, ``echo/NAME``, ``error``).

The pieces are shared with the command line (:mod:`rsocket_tx.rsnet.cli`):
:data:`CONFIG_OPTIONS` and :func:`parse_config` (the
:class:`~rsocket_tx.rsnet.config.RSNetConfig` settings as options), :func:`parse_server_settings`,
:func:`build_service`. The protocol-neutral parts are those of ``twistd rsocket``
(:mod:`rsocket_tx.faces.serving`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

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
from . import config as rsnet_config
from .config import RSNetConfig
from .endpoints import server_endpoint

__all__ = [
    "Options",
    "makeService",
    "RSNetServerSettings",
    "ConfigOption",
    "CONFIG_OPTIONS",
    "parse_config",
    "parse_server_settings",
    "load_publishers",
    "build_service",
    "RSNetServerService",
    "DEFAULT_LISTEN",
    "DEFAULT_PUBLISHERS",
    "LISTEN_HELP",
]

log = Logger()

#: Where ``twistd rsnet`` listens when no ``--listen`` is given.
DEFAULT_LISTEN = "tcp:7880"
#: The publishers served when no ``--publishers`` is given: the demo.
DEFAULT_PUBLISHERS = "rsocket_tx.rsnet.demo:DemoPublisher"

LISTEN_HELP = (
    "endpoint to listen on: a Twisted endpoint string (tcp:7880, tcp:7880:interface=127.0.0.1,"
    " ssl:7881:privateKey=KEY:certKey=CERT, ws:8080:path=/rsnet, unix:/path) or a URI"
    " (rsnet+tcp://127.0.0.1:7880, rsnet+tls://:7881?privateKey=KEY&certKey=CERT,"
    " rsnet+ws://:8080/rsnet; tcp://, tls://, ws:// too); repeat to listen on several"
    f" (default {DEFAULT_LISTEN})"
)


C = rsnet_config
#: The :class:`~rsocket_tx.rsnet.config.RSNetConfig` settings the faces take as options.
CONFIG_OPTIONS: tuple[ConfigOption, ...] = (
    ConfigOption("max-element-size", "BYTES",
                 "the largest element (one onNext, one part of a split element) accepted"
                 f" from the peer (default {C.DEFAULT_MAX_ELEMENT_SIZE})", "bytes"),
    ConfigOption("max-reassembled-size", "BYTES",
                 "the largest element joined from onNextPart messages"
                 f" (default {C.DEFAULT_MAX_REASSEMBLED_SIZE})", "bytes"),
    ConfigOption("max-part-size", "BYTES",
                 "elements we send longer than this are split into onNextPart messages"
                 f" (default {C.DEFAULT_MAX_PART_SIZE})", "bytes"),
    ConfigOption("max-peer-subscriptions", "N",
                 "subscriptions the peer may have open to our publishers at once; more are"
                 f" refused with onError (default {C.DEFAULT_MAX_PEER_SUBSCRIPTIONS})",
                 "subscriptions"),
    ConfigOption("hello-timeout", "MS",
                 f"milliseconds to wait for the peer's hello (default {C.DEFAULT_HELLO_TIMEOUT})",
                 "milliseconds"),
    ConfigOption("goodbye-timeout", "MS",
                 "milliseconds to wait for the peer to acknowledge our goodbye"
                 f" (default {C.DEFAULT_GOODBYE_TIMEOUT})", "milliseconds"),
    ConfigOption("max-send-buffer-size", "BYTES",
                 "bytes waiting for a peer that does not read before its connection is aborted"
                 f" (default {C.DEFAULT_MAX_SEND_BUFFER_SIZE})", "bytes"),
    ConfigOption("drain-timeout", "MS",
                 "milliseconds publications in progress get to end in a graceful close (on"
                 f" SIGTERM) before the goodbye (default {C.DEFAULT_DRAIN_TIMEOUT})",
                 "milliseconds", client=False),
)


def parse_config(values: Mapping[str, object]) -> RSNetConfig:
    """Validate the :data:`CONFIG_OPTIONS` as typed on a command line.

    :param values: option values by :attr:`ConfigOption.attr` (ints or decimal strings,
        ``_`` separators allowed); ``None`` or absent = the default.
    :returns: the :class:`~rsocket_tx.rsnet.config.RSNetConfig` (``max_buffered_input`` is
        raised with a larger ``max_element_size``).
    :raises SettingsError: naming the first invalid option and what it accepts.
    """
    kwargs: dict[str, Any] = parse_config_options(CONFIG_OPTIONS, values)
    element = kwargs.get("max_element_size", C.DEFAULT_MAX_ELEMENT_SIZE)
    largest = max(element, C.DEFAULT_MAX_PACKED_SIZE, C.DEFAULT_MAX_STRING_LENGTH,
                  5 * C.DEFAULT_MAX_EXTENSIONS) + C.MESSAGE_OVERHEAD + 4
    kwargs["max_buffered_input"] = max(C.DEFAULT_MAX_BUFFERED_INPUT, largest)
    try:
        return RSNetConfig(**kwargs)
    except ValueError as e:
        raise SettingsError(option_message(CONFIG_OPTIONS, str(e))) from None


def load_publishers(spec: Any) -> Any:
    """The publishers named ``spec``, as a :class:`~rsocket_tx.rsnet.publishers.Publisher`.

    :param spec: ``package.module:name`` naming a Publisher subclass (instantiated once), a
        Publisher instance or a mapping ``{name: factory}``; or one of those objects itself.
    :returns: the :class:`~rsocket_tx.rsnet.publishers.Publisher`.
    :raises SettingsError: it cannot be imported, or is none of those (the message starts
        with ``--publishers:``).
    """
    from .publishers import as_publisher

    obj = import_named("publishers", spec, "Name") if isinstance(spec, str) else spec
    try:
        return as_publisher(obj)
    except TypeError as e:
        raise SettingsError(f"--publishers: {spec!r}: {e}") from None


@dataclass(frozen=True)
class RSNetServerSettings:
    """Validated server settings, built by :func:`parse_server_settings`.

    :ivar listen: endpoint strings or URIs to listen on (at least one, no duplicates).
    :ivar publishers_name: how ``--publishers`` named them.
    :ivar publishers: the :class:`~rsocket_tx.rsnet.publishers.Publisher` served.
    :ivar config: the connection settings (:class:`~rsocket_tx.rsnet.config.RSNetConfig`).
    :ivar max_connections: connections open at once on every listen endpoint together (>= 1;
        default :data:`~rsocket_tx.transports.limits.DEFAULT_MAX_CONNECTIONS`, 4,096); past
        it a new one is closed at once and the log says so.
    """

    listen: tuple[str, ...] = (DEFAULT_LISTEN,)
    publishers_name: str = DEFAULT_PUBLISHERS
    publishers: Any = None
    config: RSNetConfig = field(default_factory=RSNetConfig)
    max_connections: int = DEFAULT_MAX_CONNECTIONS


def parse_server_settings(*, listen: Iterable[str] | None = None, publishers: Any = None,
                          max_connections: Any = None,
                          **config_values: Any) -> RSNetServerSettings:
    """Validate server options as typed on a command line; ``None`` means "not given".

    :param listen: endpoint strings / URIs (``None`` or empty: :data:`DEFAULT_LISTEN`).
    :param publishers: ``package.module:name`` or the object (see :func:`load_publishers`;
        ``None``: :data:`DEFAULT_PUBLISHERS`).
    :param max_connections: connections open at once (>= 1; ``None``: 4,096).
    :param config_values: the :data:`CONFIG_OPTIONS` by :attr:`ConfigOption.attr`.
    :returns: the :class:`RSNetServerSettings`.
    :raises SettingsError: (a :class:`ValueError`) naming the first invalid option.
    :raises TypeError: an unknown keyword argument.
    """
    unknown = sorted(set(config_values) - {o.attr for o in CONFIG_OPTIONS})
    if unknown:
        raise TypeError(f"unknown settings: {', '.join(unknown)}")
    specs = parse_listen(listen, DEFAULT_LISTEN, server_endpoint)
    if publishers is None:
        publishers = DEFAULT_PUBLISHERS
    name = publishers if isinstance(publishers, str) else repr(publishers)
    loaded = load_publishers(publishers)
    config = parse_config(config_values)
    cap = parse_int_option("max-connections", max_connections, minimum=1, maximum=2**31 - 1,
                           unit="connections")
    return RSNetServerSettings(listen=specs, publishers_name=name, publishers=loaded,
                               config=config,
                               max_connections=DEFAULT_MAX_CONNECTIONS if cap is None else cap)


class RSNetServerService(ServerService):
    """The :class:`~rsocket_tx.faces.serving.ServerService` of ``twistd rsnet``: one endpoint
    service per listen endpoint, all serving the same
    :class:`~rsocket_tx.rsnet.server.RSNetServerFactory`; on stop, publications in progress get
    ``drain_timeout`` ms, then each connection gets a *goodbye*. Its log says "RS-network
    server".

    :ivar factory: the server factory.
    :ivar settings: the :class:`RSNetServerSettings` it was built from.
    """

    def __init__(self, settings: RSNetServerSettings, factory: Any) -> None:
        super().__init__(settings, factory, name="rsnet", server_name="RS-network server",
                         logger=log)


def build_service(settings: RSNetServerSettings, reactor: Any = None) -> RSNetServerService:
    """Build (not start) the server service for ``settings``.

    :param settings: from :func:`parse_server_settings`.
    :param reactor: the reactor (``None``: the global reactor, imported only now).
    :returns: an :class:`RSNetServerService`; starting it listens on every endpoint.
    :raises ValueError: an endpoint cannot be parsed.
    """
    from .server import RSNetServerFactory

    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    publishers = settings.publishers
    if publishers is None:
        publishers = load_publishers(DEFAULT_PUBLISHERS)
    limit = ConnectionLimit(settings.max_connections, server_name="RS-network server",
                            reactor=reactor)
    factory = RSNetServerFactory(publishers, settings.config, reactor, connection_limit=limit)
    service = RSNetServerService(settings, factory)
    service.listen_on(reactor, settings.listen, server_endpoint)
    return service


class Options(ListenOptions):
    """``twistd rsnet`` options. After parsing, ``self["settings"]`` holds the validated
    :class:`RSNetServerSettings`."""

    listen_help = LISTEN_HELP
    longdesc = (
        "Serve Reactive Streams network publishers (the 2015 reactive-streams-io draft, as"
        " rsocket_tx completes it) over TCP, TLS and WebSocket; default: the demo publishers"
        " count, count/N, ints/N, echo/NAME and error."
    )
    optParameters = [
        ["publishers", None, None,
         "what to publish, as package.module:name: a Publisher subclass, a Publisher instance"
         " or a mapping {name: factory(request)} (default"
         f" {DEFAULT_PUBLISHERS}, the demo)"],
        ["max-connections", None, None, "connections open at once, every --listen endpoint"
         " together; past it a new one is closed at once and the log says so (default"
         f" {DEFAULT_MAX_CONNECTIONS})"],
    ] + [[o.name, None, None, o.help] for o in CONFIG_OPTIONS if o.server]
    compData = usage.Completions(optActions={"listen": usage.CompleteList([DEFAULT_LISTEN])})

    def parse_settings(self) -> RSNetServerSettings:
        return parse_server_settings(
            listen=self["listen"], publishers=self["publishers"],
            max_connections=self["max-connections"],
            **{o.attr: self[o.name] for o in CONFIG_OPTIONS if o.server})


def makeService(options: Any) -> RSNetServerService:  # noqa: N802 - twistd's name
    """Build the ``twistd rsnet`` service from parsed :class:`Options`.

    :raises ValueError: an endpoint cannot be parsed.
    """
    return build_service(options["settings"])
