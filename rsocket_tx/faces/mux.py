"""The ``twistd mux`` plugin: one port, every protocol (:mod:`rsocket_tx.transports.oneport`).

Usage::

    twistd -n mux --listen tcp:7878 \\
        --protocol 'rsocket --responder mypackage.mymodule:MyResponder' \\
        --protocol 'jini-mux --dispatcher mypackage.mymodule:MyDispatcher' \\
        --tls-key key.pem --tls-cert cert.pem

Each ``--protocol`` names a protocol of the registry
:data:`~rsocket_tx.transports.oneport.PROTOCOLS` (``rsocket``, ``jini-mux``, ...) followed by
the options of its own twistd plugin, parsed and checked by that plugin (``twistd rsocket
--help``, ``twistd jini-mux --help``); ``--listen`` belongs to ``twistd mux`` alone. With no
``--protocol``, every registered protocol is served with its defaults. Every ``--listen``
endpoint serves all of them, over plain TCP, over TLS when ``--tls-key`` is given (TLS is told
apart from plain bytes by the server), and over WebSocket (``ws://`` and, with TLS, ``wss://``,
chosen by WebSocket subprotocol). On SIGTERM each protocol closes its connections gracefully,
as its own plugin does.

A protocol's ``--metrics ENDPOINT`` (``--protocol 'rsocket --metrics tcp:9100'``) serves the
Prometheus metrics of that protocol's connections while the one-port server runs
(:mod:`rsocket_tx.metrics`); a plugin without the option refuses it as it refuses any unknown
option.

``--max-connections`` caps the connections of the whole server, every protocol, TLS and
WebSocket together, those not recognised yet included (past it a new connection is closed at
once and the log says so); a protocol's own ``--max-connections`` is not used here.
"""

from __future__ import annotations

import importlib
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from twisted.internet.defer import Deferred, DeferredList
from twisted.internet.interfaces import IStreamServerEndpoint
from twisted.logger import Logger
from twisted.python import usage

from ..transports import endpoints
from ..transports.limits import DEFAULT_MAX_CONNECTIONS
from ..transports.oneport import (
    DEFAULT_MAX_SNIFF_SIZE,
    DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE,
    DEFAULT_SNIFF_TIMEOUT,
    PROTOCOLS,
    OnePortConfig,
    OnePortFactory,
)
from .serving import (
    ListenOptions,
    ServerService,
    SettingsError,
    metrics_module,
    parse_int_option,
    parse_listen,
)

if TYPE_CHECKING:  # pragma: no cover
    from _typeshed import DataclassInstance

__all__ = [
    "Options",
    "makeService",
    "ProtocolSettings",
    "MuxServerSettings",
    "MuxServerService",
    "parse_protocol",
    "parse_server_settings",
    "build_service",
    "server_endpoint",
    "DEFAULT_LISTEN",
]

log = Logger()

#: Where ``twistd mux`` listens when no ``--listen`` is given.
DEFAULT_LISTEN = "tcp:7878"
_WEBSOCKET_SCHEMES = ("ws", "wss")

LISTEN_HELP = (
    "endpoint to listen on: a Twisted endpoint string (tcp:7878, tcp:7878:interface=127.0.0.1,"
    " unix:/path; ssl:... to require TLS) or a URI (tcp://:7878); not ws/wss: WebSocket is"
    f" recognised on every endpoint; repeat to listen on several (default {DEFAULT_LISTEN})"
)


def server_endpoint(reactor, spec) -> IStreamServerEndpoint:
    """Turn ``spec`` into an endpoint for the one-port server.

    :param reactor: the reactor (``None``: the global reactor).
    :param spec: an endpoint string or URI as :func:`rsocket_tx.transports.endpoints.
        server_endpoint` takes it, but not a WebSocket one (the server tells WebSocket apart
        by itself), or an ``IStreamServerEndpoint``.
    :raises ValueError: the string cannot be parsed, or names a WebSocket endpoint.
    """
    if isinstance(spec, str):
        text = spec.strip()
        scheme = text.partition("://")[0] if endpoints.is_uri(text) else text.partition(":")[0]
        if scheme.lower() in _WEBSOCKET_SCHEMES:
            raise ValueError(f"{spec!r}: the one-port server recognises WebSocket on every "
                             "endpoint; listen on tcp (or ssl) instead")
    return endpoints.server_endpoint(reactor, spec)


@dataclass(frozen=True)
class ProtocolSettings:
    """One protocol served, with its own plugin's validated settings.

    :ivar name: its name in :data:`~rsocket_tx.transports.oneport.PROTOCOLS`.
    :ivar args: its options as typed (after the name).
    :ivar tap: the module of its twistd plugin (``Options``, ``build_service``).
    :ivar settings: what its plugin's ``Options`` parsed into ``["settings"]`` (no endpoints):
        a dataclass instance with a ``listen`` field.
    :ivar metrics: its ``--metrics`` endpoint (``twistd rsocket``'s option: Prometheus
        metrics of that protocol's connections, served while the one-port server runs), or
        None.
    """

    name: str
    args: tuple[str, ...]
    tap: str
    settings: DataclassInstance
    metrics: str | None = None


@dataclass(frozen=True)
class MuxServerSettings:
    """Validated settings of ``twistd mux``, built by :func:`parse_server_settings`.

    :ivar listen: endpoint strings or URIs (at least one, no duplicates).
    :ivar protocols: the protocols served, in the order their first bytes are checked.
    :ivar tls_key: path of the PEM private key for TLS (None: TLS not recognised).
    :ivar tls_cert: path of the PEM certificate (None: in ``tls_key``).
    :ivar tls_ca: mutual TLS: path of the CA certificates client certificates must be signed by.
    :ivar websocket: recognise WebSocket upgrades.
    :ivar config: the one-port limits (:class:`~rsocket_tx.transports.oneport.OnePortConfig`).
    """

    listen: tuple[str, ...] = (DEFAULT_LISTEN,)
    protocols: tuple[ProtocolSettings, ...] = ()
    tls_key: str | None = None
    tls_cert: str | None = None
    tls_ca: str | None = None
    websocket: bool = True
    config: OnePortConfig = field(default_factory=OnePortConfig)


def parse_protocol(spec: str) -> ProtocolSettings:
    """Parse one ``--protocol`` value: a protocol name, then its plugin's options.

    :param spec: e.g. ``"rsocket"`` or ``"jini-mux --dispatcher pkg.mod:Echo"`` (shell
        quoting rules).
    :returns: the :class:`ProtocolSettings`.
    :raises SettingsError: an unknown protocol, one with no twistd plugin, an option its plugin
        refuses, or a ``--listen`` (the message starts with ``--protocol NAME:``).
    """
    try:
        words = shlex.split(spec)
    except ValueError as e:
        raise SettingsError(f"--protocol: {e} in {spec!r}") from None
    if not words:
        raise SettingsError("--protocol: empty (give a protocol name: "
                            f"{', '.join(_servable())})")
    name, args = words[0], tuple(words[1:])
    description = PROTOCOLS.get(name)
    if description is None or description.tap is None:
        raise SettingsError(f"--protocol: unknown protocol {name!r} (known: "
                            f"{', '.join(_servable())})")
    options = importlib.import_module(description.tap).Options()
    try:
        options.parseOptions(list(args))
    except usage.UsageError as e:
        raise SettingsError(f"--protocol {name}: {e}") from None
    if options["listen"]:
        raise SettingsError(f"--protocol {name}: --listen is an option of twistd mux itself "
                            "(every protocol is served on every --listen endpoint)")
    return ProtocolSettings(name, args, description.tap, options["settings"],
                            options.get("metrics") or None)


def _servable() -> list[str]:
    return [name for name, d in PROTOCOLS.items() if d.tap is not None]


def parse_server_settings(*, listen: Iterable[str] | None = None,
                          protocols: Sequence[str] | None = None, tls_key=None, tls_cert=None,
                          tls_ca=None, websocket: bool = True, sniff_timeout=None,
                          max_sniff_size=None, max_websocket_message_size=None,
                          max_connections=None) -> MuxServerSettings:
    """Validate ``twistd mux`` options as typed; ``None`` means "not given".

    :param listen: endpoint strings / URIs (``None`` or empty: :data:`DEFAULT_LISTEN`).
    :param protocols: ``--protocol`` values (:func:`parse_protocol`); ``None`` or empty: every
        registered protocol with a twistd plugin, with its defaults.
    :param tls_key: path of the PEM private key (may hold the certificate too); None: no TLS.
    :param tls_cert: path of the PEM certificate.
    :param tls_ca: mutual TLS: path of the CA certificates (file or directory).
    :param websocket: recognise WebSocket upgrades.
    :param sniff_timeout: milliseconds a connection gets to be recognised.
    :param max_sniff_size: bytes buffered while a connection is not recognised.
    :param max_websocket_message_size: the largest message of a byte-stream protocol, bytes.
    :param max_connections: connections open at once, server-wide (>= 1).
    :returns: the :class:`MuxServerSettings`.
    :raises SettingsError: naming the first invalid option.
    """
    specs = parse_listen(listen, DEFAULT_LISTEN, server_endpoint)
    given = list(protocols or []) or _servable()
    parsed = tuple(parse_protocol(spec) for spec in given)
    names = [p.name for p in parsed]
    for name in names:
        if names.count(name) > 1:
            raise SettingsError(f"--protocol: {name} is given twice")
    if (tls_cert is not None or tls_ca is not None) and tls_key is None:
        raise SettingsError("--tls-cert/--tls-ca: give --tls-key too")
    if tls_key is not None:
        from ..transports.tls import server_options

        try:
            server_options(tls_key, tls_cert, ca_certs=tls_ca)
        except ValueError as e:
            raise SettingsError(f"--tls-key: {e}") from None
    limits = {}
    for name, value, minimum, unit in (
            ("sniff-timeout", sniff_timeout, 1, "milliseconds"),
            ("max-sniff-size", max_sniff_size, 16, "bytes"),
            ("max-websocket-message-size", max_websocket_message_size, 1, "bytes"),
            ("max-connections", max_connections, 1, "connections")):
        number = parse_int_option(name, value, minimum=minimum, unit=unit)
        if number is not None:
            limits[name.replace("-", "_")] = number
    return MuxServerSettings(listen=specs, protocols=parsed, tls_key=tls_key, tls_cert=tls_cert,
                             tls_ca=tls_ca, websocket=websocket,
                             config=OnePortConfig(**limits))


class MuxServerService(ServerService):
    """The :class:`~rsocket_tx.faces.serving.ServerService` of ``twistd mux``: one
    :class:`~rsocket_tx.transports.oneport.OnePortFactory` on every listen endpoint.

    :ivar factory: the :class:`~rsocket_tx.transports.oneport.OnePortFactory`.
    :ivar protocol_services: each protocol's own service (built by its plugin, never started: it
        listens nowhere), by name; its ``close_connections`` closes that protocol's
        connections as its plugin does.
    """

    def __init__(self, settings: MuxServerSettings, factory: OnePortFactory,
                 services: dict) -> None:
        super().__init__(settings, factory, name="mux", server_name="one-port server",
                         logger=log)
        self.protocol_services = services

    def close_connections(self) -> Deferred:
        """Close the connections not recognised yet at once, and every protocol's gracefully
        (as its own plugin does on SIGTERM).

        :returns: a Deferred firing once they are all closed.
        """
        self.factory.close_unrecognised()
        closing = [service.close_connections() for service in self.protocol_services.values()]
        return DeferredList(closing, consumeErrors=True).addCallback(lambda _: None)


def build_service(settings: MuxServerSettings, reactor=None) -> MuxServerService:
    """Build (not start) the ``twistd mux`` service.

    :param settings: from :func:`parse_server_settings`.
    :param reactor: the reactor (``None``: the global reactor, imported only now).
    :returns: a :class:`MuxServerService`; starting it listens on every endpoint.
    :raises ValueError: an endpoint cannot be parsed, or a TLS file cannot be read.
    """
    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    services = {}
    for protocol in settings.protocols:
        tap = importlib.import_module(protocol.tap)
        services[protocol.name] = tap.build_service(replace(protocol.settings, listen=()),
                                                    reactor)
    tls = None
    if settings.tls_key is not None:
        from ..transports.tls import server_options

        tls = server_options(settings.tls_key, settings.tls_cert, ca_certs=settings.tls_ca)
    factory = OnePortFactory({name: service.factory for name, service in services.items()},
                             reactor=reactor, tls=tls, websocket=settings.websocket,
                             config=settings.config)
    service = MuxServerService(settings, factory, services)
    for protocol in settings.protocols:
        if protocol.metrics is not None:  # --protocol 'rsocket --metrics ENDPOINT'
            metrics_module().install_metrics(service, protocol.metrics, reactor=reactor,
                                             factory=services[protocol.name].factory)
    service.listen_on(reactor, settings.listen, server_endpoint)
    return service


class Options(ListenOptions):
    """``twistd mux`` options. After parsing, ``self["settings"]`` holds the validated
    :class:`MuxServerSettings`."""

    listen_help = LISTEN_HELP
    longdesc = (
        "Serve several protocols on one port: each connection's protocol is told from its"
        " first bytes (RSocket 1.0 SETUP/RESUME, the Jini ERI mux header, ...), over TCP, TLS"
        " (--tls-key) and WebSocket (chosen by subprotocol)."
    )
    optFlags = [["no-websocket", None, "do not recognise WebSocket upgrades"]]
    optParameters = [
        ["tls-key", None, None, "PEM private key of the server's TLS certificate (may hold the"
         " certificate too): TLS connections are then recognised and served"],
        ["tls-cert", None, None, "PEM certificate (and chain) of the server, if not in --tls-key"],
        ["tls-ca", None, None, "mutual TLS: PEM CA certificates (file or directory) a client's"
         " certificate must be signed by"],
        ["sniff-timeout", None, None, "milliseconds a new connection gets to send enough bytes"
         f" to tell its protocol, then it is closed (default {DEFAULT_SNIFF_TIMEOUT})"],
        ["max-sniff-size", None, None, "bytes of a new connection buffered while its protocol"
         f" is not known, then it is closed (default {DEFAULT_MAX_SNIFF_SIZE})"],
        ["max-websocket-message-size", None, None, "the largest WebSocket message of a"
         f" byte-stream protocol such as jini-mux, bytes (default"
         f" {DEFAULT_MAX_WEBSOCKET_MESSAGE_SIZE})"],
        ["max-connections", None, None, "connections open at once on the whole server (every"
         " protocol, TLS and WebSocket, those not recognised yet included); past it a new one is"
         " closed at once and the log says so; a --protocol's own --max-connections is not used"
         f" (default {DEFAULT_MAX_CONNECTIONS})"],
    ]
    compData = usage.Completions(optActions={"listen": usage.CompleteList([DEFAULT_LISTEN])})

    def __init__(self) -> None:
        super().__init__()
        self["protocol"] = []
        self.docs["protocol"] = (
            "a protocol to serve, then the options of its own twistd plugin, quoted as one"
            " argument ('jini-mux --dispatcher pkg.mod:Class'); repeat for several (default:"
            f" every protocol: {', '.join(_servable())})")

    def opt_protocol(self, value: str) -> None:
        self["protocol"].append(value)

    def parse_settings(self) -> MuxServerSettings:
        return parse_server_settings(
            listen=self["listen"], protocols=self["protocol"], tls_key=self["tls-key"],
            tls_cert=self["tls-cert"], tls_ca=self["tls-ca"],
            websocket=not self["no-websocket"], sniff_timeout=self["sniff-timeout"],
            max_sniff_size=self["max-sniff-size"],
            max_websocket_message_size=self["max-websocket-message-size"],
            max_connections=self["max-connections"])


def makeService(options) -> MuxServerService:
    """Build the ``twistd mux`` service from parsed :class:`Options`.

    :raises ValueError: an endpoint cannot be parsed.
    """
    return build_service(options["settings"])
