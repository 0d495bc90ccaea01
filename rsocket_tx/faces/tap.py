"""The ``twistd rsocket`` plugin: options, validation and the service that serves responders.

Usage::

    twistd -n rsocket --listen tcp:7878 --listen tcp://[::1]:7879 \\
        --responder mypackage.mymodule:MyResponder --fragment-size 65536 --debug

The pieces here are shared with ``rsocket-tx serve`` (:mod:`rsocket_tx.faces.cli`), so both faces
accept the same options, validate them the same way and build the same service:

* :data:`~rsocket_tx.faces.rsocket_settings.SERVER_OPTIONS` — the option table both faces
  generate their parsers from;
* :func:`~rsocket_tx.faces.rsocket_settings.parse_server_settings` — strings (or numbers) in, a
  validated :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings` out;
* :func:`build_service` — a ``ServerSettings`` in, an :class:`RSocketServerService` out;
* :func:`describe_frame` / :func:`make_frame_logger` — the ``--debug`` frame log (from
  :mod:`rsocket_tx.faces.framelog`, which masks credentials).

The option table, ``parse_server_settings`` and ``ServerSettings`` are in
:mod:`rsocket_tx.faces.rsocket_settings` (shared with ``twistd rs2015``, which is not this face)
and importable from here. What is not RSocket's (:class:`~rsocket_tx.faces.serving.SettingsError`,
:func:`~rsocket_tx.faces.serving.parse_int_option`, the multi-endpoint service, the ``--listen``
option, ``module:Class`` loading) is in :mod:`rsocket_tx.faces.serving`, shared with ``twistd
jini-mux``; ``SettingsError``, ``parse_int_option`` and ``EndpointService`` are importable from
here too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from twisted.internet.defer import Deferred
from twisted.logger import Logger
from twisted.python import usage

from ..core.errors import UnsupportedSetupError
from ..transports.endpoints import server_endpoint
from .framelog import describe_frame, make_frame_logger  # noqa: F401 - importable from here
from .rsocket_settings import (  # importable from here, as before
    DEBUG_HELP,
    DEFAULT_LISTEN,
    LISTEN_HELP,
    MAX_FRAME_SIZE,  # noqa: F401 - importable from here
    MIN_FRAGMENT_SIZE,  # noqa: F401 - importable from here
    SERVER_FLAGS,
    SERVER_OPTIONS,
    ResponderArgOption,
    ServerFlag,  # noqa: F401 - importable from here
    ServerOption,  # noqa: F401 - importable from here
    ServerSettings,
    check_listen,  # noqa: F401 - importable from here
    load_lease_policy,  # noqa: F401 - importable from here
    load_responder,  # noqa: F401 - importable from here
    parse_fragment_size,  # noqa: F401 - importable from here
    parse_responder_args,  # noqa: F401 - importable from here
    parse_server_settings,
)
from .serving import (  # importable from here, as before
    METRICS_INSTALL_HINT,  # noqa: F401 - importable from here
    ListenOptions,
    ServerService,
    SettingsError,  # noqa: F401 - importable from here
    metrics_module,
    parse_int_option,  # noqa: F401 - importable from here
)
from .serving import EndpointService as EndpointService  # importable from here, as before

if TYPE_CHECKING:  # pragma: no cover
    from ..responder import Responder

__all__ = [
    "Options",
    "makeService",
    "build_service",
    "RSocketServerService",
]

log = Logger()


# -- the service -----------------------------------------------------------------------------


class RSocketServerService(ServerService):
    """The :class:`~rsocket_tx.faces.serving.ServerService` of ``twistd rsocket``: one
    :class:`~rsocket_tx.faces.serving.EndpointService` per listen endpoint, all serving the same
    :class:`~rsocket_tx.protocol.RSocketServerFactory`; its log says "RSocket server".

    :ivar factory: the server factory.
    :ivar settings: the :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings` it was
        built from.
    """

    def __init__(self, settings: ServerSettings, factory) -> None:
        super().__init__(settings, factory, name="rsocket", server_name="RSocket server",
                         logger=log)

    def close_connections(self) -> Deferred:
        """Close every connection gracefully: open streams get ``drain_timeout`` ms to finish;
        new requests are refused.

        :returns: a Deferred firing once every connection is closed: at most ``drain_timeout``
            ms plus :data:`rsocket_tx.protocol.ABORT_DELAY` s.
        """
        connections = len(self.factory.connections)
        if connections:
            log.info(
                "Closing {n} RSocket connection(s) gracefully (drain timeout {timeout} ms)",
                n=connections,
                timeout=self.settings.drain_timeout,
            )
        return self.factory.close_connections()


def _keepalive_limited(cls: type[Responder], settings: ServerSettings) -> type[Responder]:
    """Subclass ``cls`` so that its ``accept_setup`` refuses a keepalive interval below the
    server's minimum (``UnsupportedSetupError``) before running the class's own check. (The
    max lifetime limit is a connection setting, ``max_lifetime_limit``, enforced by the
    RSocket core for every server.)"""
    min_interval = settings.min_keepalive_interval
    if not min_interval:
        return cls

    def accept_setup(self, setup):
        interval = setup.keepalive_interval
        if interval < min_interval:
            raise UnsupportedSetupError(
                f"keepalive interval {interval} ms is below this server's minimum of"
                f" {min_interval} ms"
            )
        return cls.accept_setup(self, setup)

    # (type() makes a subclass of cls)
    return cast("type[Responder]", type(
        cls.__name__,
        (cls,),
        {"accept_setup": accept_setup, "__module__": cls.__module__, "__doc__": cls.__doc__},
    ))


def build_service(settings: ServerSettings, reactor=None) -> RSocketServerService:
    """Build (not start) the server service for ``settings``.

    :param settings: from :func:`~rsocket_tx.faces.rsocket_settings.parse_server_settings`.
    :param reactor: the reactor (``None``: the global reactor, imported only now).
    :returns: an :class:`RSocketServerService`; starting it listens on every endpoint.
    :raises ValueError: if an endpoint cannot be parsed.
    """
    from ..apps.demo import DemoResponder
    from ..protocol import RSocketServerFactory

    responder = settings.make_responder_factory(
        _keepalive_limited(settings.responder_factory or DemoResponder, settings))
    factory = RSocketServerFactory(
        responder,
        reactor=reactor,
        config=settings.connection_config(),
        lease_policy=settings.make_lease_policy(),
        frame_logger=make_frame_logger() if settings.debug else None,
    )
    service = RSocketServerService(settings, factory)
    service.listen_on(reactor, settings.listen, server_endpoint)
    return service


# -- twistd ----------------------------------------------------------------------------------


class Options(ResponderArgOption, ListenOptions):
    """``twistd rsocket`` options (generated from
    :data:`~rsocket_tx.faces.rsocket_settings.SERVER_OPTIONS`).

    After parsing, ``self["settings"]`` holds the validated
    :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings`.
    """

    listen_help = LISTEN_HELP
    longdesc = (
        "Serve an RSocket responder (default: the demo responder: echo request-response and"
        " request-channel, count request-stream, log fire-and-forget and metadata-push)."
    )
    optFlags = [["debug", None, DEBUG_HELP]] + [[f.name, None, f.help] for f in SERVER_FLAGS]
    optParameters = [[o.name, None, None, o.help] for o in SERVER_OPTIONS if not o.repeatable]
    compData = usage.Completions(optActions={"listen": usage.CompleteList([DEFAULT_LISTEN])})

    def __init__(self) -> None:
        super().__init__()
        for option in SERVER_OPTIONS:
            if option.repeatable:
                self[option.name] = []

    def opt_metrics(self, endpoint: str) -> None:
        """serve Prometheus metrics over HTTP on this endpoint (e.g.
        tcp:9100:interface=127.0.0.1; GET /metrics); needs the 'metrics' extra
        (prometheus_client)"""
        try:
            self["metrics"] = metrics_module().check_metrics_endpoint(endpoint)
        except ValueError as exc:
            raise usage.UsageError(str(exc)) from None

    def parse_settings(self) -> ServerSettings:
        return parse_server_settings(
            listen=self["listen"],
            debug=bool(self["debug"]),
            **{o.attr: self[o.name] for o in SERVER_OPTIONS},
            **{f.attr: bool(self[f.name]) for f in SERVER_FLAGS},
        )


def makeService(options) -> RSocketServerService:
    """Build the ``twistd rsocket`` service from parsed :class:`Options`.

    :param options: parsed :class:`Options` (a mapping with a ``"settings"`` entry).
    :returns: the :class:`RSocketServerService`.
    :raises ValueError: if an endpoint cannot be parsed.
    """
    service = build_service(options["settings"])
    if options.get("metrics"):  # --metrics ENDPOINT: rsocket_tx.metrics
        metrics_module().install_metrics(service, options["metrics"])
    return service

