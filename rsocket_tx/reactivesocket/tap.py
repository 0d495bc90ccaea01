"""The ``twistd rs2015`` plugin: serve a :class:`~rsocket_tx.responder.Responder` over the 2015
ReactiveSocket draft.

Usage::

    twistd -n rs2015 --listen tcp:7070:interface=127.0.0.1 \\
        --listen 'rs2015+tls://:7071?privateKey=key.pem&certKey=cert.pem' \\
        --listen rs2015+ws://:8080/rs2015 \\
        --responder mypackage.mymodule:MyResponder --drain-timeout 5000

The draft is served by the RSocket :class:`~rsocket_tx.responder.Responder` API
(:class:`~rsocket_tx.reactivesocket.protocol.ReactiveSocketServerFactory` takes the same
:class:`~rsocket_tx.core.config.ConnectionConfig`), so this face takes ``twistd rsocket``'s
settings (:mod:`rsocket_tx.faces.rsocket_settings`, which the two faces share; this one imports
no other face) with the options the draft has no use for left out:

* :data:`SERVER_OPTIONS` -- ``twistd rsocket``'s
  :data:`~rsocket_tx.faces.rsocket_settings.SERVER_OPTIONS`
  less :data:`RSOCKET_ONLY` (keepalive and max lifetime limits: the draft has no KEEPALIVE and
  its SETUP no max lifetime; resume: it has no RESUME) and less the ``--resume`` switch;
* :func:`parse_server_settings` -- strings in, a validated
  :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings` out (the ``rs2015+`` URIs accepted in
  ``--listen``);
* :func:`build_service` -- settings in, a :class:`ReactiveSocketServerService` out; ``twistd
  mux --protocol 'rs2015 ...'`` (:mod:`rsocket_tx.faces.mux`) calls it too.

The protocol-neutral parts (``--listen``, the multi-endpoint service, ``module:Class``
loading) are those of :mod:`rsocket_tx.faces.serving`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from twisted.logger import Logger
from twisted.python import usage

from ..faces import rsocket_settings
from ..faces.framelog import make_frame_logger
from ..faces.rsocket_settings import DEBUG_HELP, ResponderArgOption, ServerOption, ServerSettings
from ..faces.serving import ListenOptions, ServerService, parse_listen
from .client import server_endpoint, transport_spec

__all__ = [
    "Options",
    "makeService",
    "SERVER_OPTIONS",
    "RSOCKET_ONLY",
    "parse_server_settings",
    "build_service",
    "ReactiveSocketServerService",
    "DEFAULT_LISTEN",
    "LISTEN_HELP",
]

log = Logger()

#: Where ``twistd rs2015`` listens when no ``--listen`` is given.
DEFAULT_LISTEN = "tcp:7070"

#: The options of ``twistd rsocket`` that the draft has no use for: it has no KEEPALIVE (so no
#: minimum keepalive interval), its SETUP carries no max lifetime, and it has no RESUME.
RSOCKET_ONLY = frozenset({
    "min-keepalive-interval",
    "max-lifetime-limit",
    "resume-session-timeout",
    "max-resume-buffer-size",
    "max-resume-sessions",
})

#: The options with a value of ``twistd rs2015``: ``twistd rsocket``'s, less
#: :data:`RSOCKET_ONLY` (same names, units, defaults and checks).
SERVER_OPTIONS: tuple[ServerOption, ...] = tuple(
    option for option in rsocket_settings.SERVER_OPTIONS if option.name not in RSOCKET_ONLY)

LISTEN_HELP = (
    "endpoint to listen on: a Twisted endpoint string (tcp:7070, tcp:7070:interface=127.0.0.1,"
    " ssl:7071:privateKey=KEY:certKey=CERT, ws:8080:path=/rs2015, unix:/path) or a URI"
    " (rs2015+tcp://127.0.0.1:7070, rs2015+tls://:7071?privateKey=KEY&certKey=CERT,"
    " rs2015+ws://:8080/rs2015; tcp://, tls://, ws:// too); repeat to listen on several"
    f" (default {DEFAULT_LISTEN})"
)


def parse_server_settings(*, listen: Iterable[str] | None = None, debug: bool = False,
                          **options: Any) -> ServerSettings:
    """Validate ``twistd rs2015`` options as typed on a command line; ``None`` means "not
    given".

    :param listen: endpoint strings or URIs, ``rs2015+tcp://``, ``rs2015+tls://``,
        ``rs2015+ws://`` and ``rs2015+wss://`` among them (``None`` or empty:
        :data:`DEFAULT_LISTEN`).
    :param debug: log every frame sent and received (the draft's frames).
    :param options: the :data:`SERVER_OPTIONS` by
        :attr:`~rsocket_tx.faces.rsocket_settings.ServerOption.attr`
        (``responder="pkg.mod:Class"``, ``drain_timeout="5000"``...), in the units and ranges
        of :func:`rsocket_tx.faces.rsocket_settings.parse_server_settings`.
    :returns: the :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings` (``resume``
        False, the settings of :data:`RSOCKET_ONLY` at their defaults; ``listen`` as given).
    :raises SettingsError: (a :class:`ValueError`) naming the first invalid option.
    :raises TypeError: an unknown keyword argument, or one of :data:`RSOCKET_ONLY`.
    """
    unknown = sorted(set(options) - {o.attr for o in SERVER_OPTIONS})
    if unknown:
        raise TypeError(f"unknown settings of the 2015 draft: {', '.join(unknown)}")
    specs = parse_listen(listen, DEFAULT_LISTEN, server_endpoint)
    settings = rsocket_settings.parse_server_settings(
        listen=[transport_spec(spec) for spec in specs], debug=debug, **options)
    return dataclasses.replace(settings, listen=specs)


class ReactiveSocketServerService(ServerService):
    """The :class:`~rsocket_tx.faces.serving.ServerService` of ``twistd rs2015``: one endpoint
    service per listen endpoint, all serving the same
    :class:`~rsocket_tx.reactivesocket.protocol.ReactiveSocketServerFactory`; on stop, open
    streams get ``drain_timeout`` ms, then each connection gets ERROR on stream 0. Its log says
    "ReactiveSocket 2015 server".

    :ivar factory: the server factory.
    :ivar settings: the :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings` it was
        built from.
    """

    def __init__(self, settings: ServerSettings, factory: Any) -> None:
        super().__init__(settings, factory, name="rs2015",
                         server_name="ReactiveSocket 2015 server", logger=log)


def build_service(settings: ServerSettings, reactor: Any = None) -> ReactiveSocketServerService:
    """Build (not start) the server service for ``settings``.

    :param settings: from :func:`parse_server_settings`.
    :param reactor: the reactor (``None``: the global reactor, imported only now).
    :returns: a :class:`ReactiveSocketServerService`; starting it listens on every endpoint.
    :raises ValueError: an endpoint cannot be parsed, or ``settings.resume`` is set.
    """
    from .protocol import ReactiveSocketServerFactory

    if reactor is None:
        from twisted.internet import reactor as global_reactor

        reactor = global_reactor
    factory = ReactiveSocketServerFactory(
        settings.make_responder_factory(),
        reactor=reactor,
        config=settings.connection_config(),
        lease_policy=settings.make_lease_policy(),
        frame_logger=make_frame_logger() if settings.debug else None,
    )
    service = ReactiveSocketServerService(settings, factory)
    service.listen_on(reactor, settings.listen, server_endpoint)
    return service


class Options(ResponderArgOption, ListenOptions):
    """``twistd rs2015`` options (generated from :data:`SERVER_OPTIONS`). After parsing,
    ``self["settings"]`` holds the validated
    :class:`~rsocket_tx.faces.rsocket_settings.ServerSettings`."""

    listen_help = LISTEN_HELP
    longdesc = (
        "Serve an RSocket Responder over the 2015 ReactiveSocket draft (default: the demo"
        " responder: echo request-response, count request-stream and request-sub, log"
        " fire-and-forget and metadata-push)."
    )
    optFlags = [["debug", None, DEBUG_HELP]]
    optParameters = [[o.name, None, None, o.help] for o in SERVER_OPTIONS if not o.repeatable]
    compData = usage.Completions(optActions={"listen": usage.CompleteList([DEFAULT_LISTEN])})

    def __init__(self) -> None:
        super().__init__()
        self.update({o.name: [] for o in SERVER_OPTIONS if o.repeatable})

    def parse_settings(self) -> ServerSettings:
        return parse_server_settings(listen=self["listen"], debug=bool(self["debug"]),
                                     **{o.attr: self[o.name] for o in SERVER_OPTIONS})


def makeService(options: Any) -> ReactiveSocketServerService:  # noqa: N802 - twistd's name
    """Build the ``twistd rs2015`` service from parsed :class:`Options`.

    :param options: parsed :class:`Options` (a mapping with a ``"settings"`` entry).
    :returns: the :class:`ReactiveSocketServerService`.
    :raises ValueError: an endpoint cannot be parsed.
    """
    return build_service(options["settings"])
