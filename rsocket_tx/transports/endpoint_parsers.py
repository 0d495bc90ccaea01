"""Endpoint-string parsers for TLS and WebSocket, plugged into Twisted's
:func:`~twisted.internet.endpoints.serverFromString` and
:func:`~twisted.internet.endpoints.clientFromString` by ``twisted/plugins/rsocket_tx_endpoints.py``.

Server strings (a plain TLS server is Twisted's own ``ssl:PORT:privateKey=KEY:certKey=CERT``,
or Twisted's ``tls:DIR:port=PORT`` with a directory of PEM files by host name; Twisted owns both
prefixes)::

    mtls:PORT:privateKey=KEY[:certKey=CERT]:caCerts=CA[:interface=ADDR][:backlog=N]
        [:extraCertChain=CHAIN][:dhParameters=DH]
    ws:PORT[:interface=ADDR][:path=/rsocket][:static=DIR][:backlog=N]
    wss:PORT:privateKey=KEY[:certKey=CERT][:caCerts=CA][:path=..][:static=..][:interface=..]

Client strings (``tls:`` is Twisted's prefix, but rsocket_tx parses ``tls:`` client strings
itself so that they verify host names the way ``tls://`` does; see :class:`TLSClientParser`)::

    tls:host=H:port=P[:trustRoots=CA][:certificate=CERT][:privateKey=KEY][:timeout=SECONDS]
        [:bindAddress=ADDR][:endpoint=DESCRIPTION]
    ws:host=H:port=P[:path=/rsocket][:timeout=SECONDS][:bindAddress=ADDR]
    wss:host=H:port=P[:path=..][:trustRoots=CA][:certificate=CERT][:privateKey=KEY]

``PORT`` may be given as ``port=PORT``; ``host`` and ``port`` of a client may be positional
(``ws:localhost:8080``). Files are PEM; ``caCerts`` and ``trustRoots`` are a file of one or
more certificates or a directory of ``*.pem`` files. Files are read when the string is parsed,
so a missing file is reported at once (:class:`ValueError`).

The functions :func:`tls_server`, :func:`ws_server`, :func:`ws_client` build the endpoints
for the parsers and for the ``tls://``, ``ws://`` and ``wss://`` URIs of
:mod:`rsocket_tx.transports.endpoints`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from twisted.internet.endpoints import HostnameEndpoint
from twisted.internet.interfaces import (
    IStreamClientEndpoint,
    IStreamClientEndpointStringParserWithReactor,
    IStreamServerEndpoint,
    IStreamServerEndpointStringParser,
)
from twisted.plugin import IPlugin
from zope.interface import implementer

from . import tls
from .limits import DEFAULT_BACKLOG

__all__ = [
    "MutualTLSServerParser",
    "WebSocketServerParser",
    "SecureWebSocketServerParser",
    "WebSocketClientParser",
    "TLSClientParser",
    "split_description",
    "SecureWebSocketClientParser",
    "tls_server",
    "ws_server",
    "ws_client",
    "TLS_SERVER_KEYS",
    "TLS_CLIENT_KEYS",
]

#: Parameters of a TLS server (strings and URI queries), mapped to :func:`tls.server_options`.
TLS_SERVER_KEYS = {
    "privateKey": "private_key",
    "certKey": "certificate",
    "caCerts": "ca_certs",
    "extraCertChain": "extra_cert_chain",
    "dhParameters": "dh_parameters",
}
#: Parameters of a TLS client (``wss:`` strings, ``tls://`` and ``wss://`` URIs).
TLS_CLIENT_KEYS = {
    "trustRoots": "trust_roots",
    "certificate": "certificate",
    "privateKey": "private_key",
}


def parse_port(value: str | int, where: str, *, allow_zero: bool) -> int:
    """``value`` (str or int) as a TCP port; :class:`ValueError` naming ``where`` if not."""
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: port must be an integer 0..65535, got {value!r}") from None
    if not (0 if allow_zero else 1) <= port <= 65535:
        raise ValueError(f"{where}: port out of range: {port}")
    return port


def _int(value: Any, name: str, where: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {name} must be an integer, got {value!r}") from None


def _float(value: Any, name: str, where: str) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: {name} must be a number of seconds, got {value!r}") from None


def check_path(path: str, where: str) -> str:
    """A WebSocket resource path: must start with ``/``."""
    if not path.startswith("/"):
        raise ValueError(f"{where}: the WebSocket path must start with '/', got {path!r}")
    return path


def check_static(directory: str | None, where: str) -> str | None:
    """The directory of static files served next to the WebSocket: must exist."""
    if directory is not None and not Path(directory).is_dir():
        raise ValueError(f"{where}: static directory {directory!r} does not exist")
    return directory


def _tls_kwargs(params: dict[str, Any], keys: Mapping[str, str],
                where: str) -> dict[str, Any]:
    out = {}
    for key, arg in keys.items():
        if key in params:
            out[arg] = params.pop(key)
    return out


def _reject_unknown(params: dict[str, Any], known: Iterable[str], where: str) -> None:
    if params:
        unknown = ", ".join(sorted(params))
        raise ValueError(f"{where}: unknown parameter(s) {unknown} (known: "
                         f"{', '.join(sorted(known))})")


def tls_server(reactor: Any, port: int, tls_params: dict[str, Any], *, interface: str = "",
               backlog: int = DEFAULT_BACKLOG, where: str = "mtls") -> IStreamServerEndpoint:
    """A TLS server endpoint from string parameters (``privateKey`` required)."""
    if "private_key" not in tls_params:
        raise ValueError(f"{where}: privateKey=FILE is required (the server's PEM key, maybe "
                         "with its certificate)")
    try:
        return tls.tls_server_endpoint(reactor, port, interface=interface, backlog=backlog,
                                       **tls_params)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def ws_server(reactor: Any, port: int, *, interface: str = "", backlog: int = DEFAULT_BACKLOG,
              path: str = "/", static: str | None = None, tls_params: dict[str, Any] | None = None,
              where: str = "ws") -> IStreamServerEndpoint:
    """A WebSocket server endpoint
    (:class:`~rsocket_tx.transports.websocket.WebSocketServerEndpoint`) on TCP, or on TLS when
    ``tls_params`` is given (wss)."""
    check_path(path, where)
    check_static(static, where)
    if tls_params is not None:
        inner = tls_server(reactor, port, tls_params, interface=interface, backlog=backlog,
                           where=where)
    else:
        inner = tls.tcp_server_endpoint(reactor, port, interface, backlog)
    from .websocket import WebSocketServerEndpoint

    return WebSocketServerEndpoint(reactor, inner, path, static=static)


def ws_client(reactor: Any, host: str, port: int, *, path: str = "/", secure: bool = False,
              tls_params: dict[str, Any] | None = None, timeout: float = 30,
              bind_address: str | None = None, where: str = "ws") -> IStreamClientEndpoint:
    """A WebSocket client endpoint
    (:class:`~rsocket_tx.transports.websocket.WebSocketClientEndpoint`) to
    ``ws://host:port/path``, or ``wss://…`` (``secure``) verifying the server's certificate."""
    check_path(path, where)
    if not host:
        raise ValueError(f"{where}: host is required")
    if secure:
        try:
            inner = tls.tls_client_endpoint(reactor, host, port, timeout=timeout,
                                            bind_address=bind_address, **(tls_params or {}))
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    else:
        inner = HostnameEndpoint(reactor, host, port, timeout=timeout,
                                 bindAddress=None if bind_address is None else (bind_address, 0))
    url_host = f"[{host}]" if ":" in host else host
    url = f"{'wss' if secure else 'ws'}://{url_host}:{port}{path}"
    from .websocket import WebSocketClientEndpoint

    return WebSocketClientEndpoint(reactor, inner, url)


# -- string parsers ------------------------------------------------------------------------------


def _server_common(prefix: str, args: tuple[object, ...],
                   kwargs: dict[str, object]) -> tuple[dict[str, Any], int, str, int]:
    params: dict[str, Any] = dict(kwargs)
    if len(args) > 1:
        raise ValueError(f"{prefix}: too many positional parameters {list(args)!r} (write "
                         f"{prefix}:PORT:name=value...)")
    if args:
        if "port" in params:
            raise ValueError(f"{prefix}: the port is given twice")
        params["port"] = args[0]
    if "port" not in params:
        raise ValueError(f"{prefix}: missing port (write {prefix}:PORT or {prefix}:port=PORT)")
    port = parse_port(params.pop("port"), prefix, allow_zero=True)
    interface = params.pop("interface", "")
    backlog = _int(params.pop("backlog", DEFAULT_BACKLOG), "backlog", prefix)
    return params, port, interface, backlog


@implementer(IPlugin, IStreamServerEndpointStringParser)
class MutualTLSServerParser:
    """Server ``mtls:PORT:privateKey=KEY[:certKey=CERT]:caCerts=CA[:interface=ADDR]``: TLS
    that requires client certificates signed by the CA(s) in ``caCerts`` (mutual TLS)."""

    prefix = "mtls"

    def parseStreamServer(self, reactor: Any, *args: object,  # noqa: N802 - Twisted's name
                          **kwargs: object) -> IStreamServerEndpoint:
        params, port, interface, backlog = _server_common(self.prefix, args, kwargs)
        tls_params = _tls_kwargs(params, TLS_SERVER_KEYS, self.prefix)
        _reject_unknown(params, ["port", "interface", "backlog", *TLS_SERVER_KEYS], self.prefix)
        if "ca_certs" not in tls_params:
            raise ValueError("mtls: caCerts=FILE is required (the CA certificate(s) client "
                             "certificates must be signed by); for TLS without client "
                             "certificates use ssl:PORT:privateKey=KEY:certKey=CERT")
        return tls_server(reactor, port, tls_params, interface=interface, backlog=backlog)


@implementer(IPlugin, IStreamServerEndpointStringParser)
class WebSocketServerParser:
    """Server ``ws:PORT[:interface=ADDR][:path=/rsocket][:static=DIR]``."""

    prefix = "ws"
    secure = False

    def parseStreamServer(self, reactor: Any, *args: object,  # noqa: N802 - Twisted's name
                          **kwargs: object) -> IStreamServerEndpoint:
        params, port, interface, backlog = _server_common(self.prefix, args, kwargs)
        path = params.pop("path", "/")
        static = params.pop("static", None)
        known = ["port", "interface", "backlog", "path", "static"]
        tls_params = None
        if self.secure:
            tls_params = _tls_kwargs(params, TLS_SERVER_KEYS, self.prefix)
            known += list(TLS_SERVER_KEYS)
        _reject_unknown(params, known, self.prefix)
        return ws_server(reactor, port, interface=interface, backlog=backlog, path=path,
                         static=static, tls_params=tls_params, where=self.prefix)


@implementer(IPlugin, IStreamServerEndpointStringParser)
class SecureWebSocketServerParser(WebSocketServerParser):
    """Server ``wss:PORT:privateKey=KEY[:certKey=CERT][:caCerts=CA][:path=..][:static=..]``."""

    prefix = "wss"
    secure = True


def _client_common(prefix: str, args: tuple[object, ...],
                   kwargs: dict[str, object]) -> tuple[dict[str, Any], str, int]:
    """The host and port of a client string (positional or named) and the other params."""
    params: dict[str, Any] = dict(kwargs)
    if len(args) > 2:
        raise ValueError(f"{prefix}: too many positional parameters {list(args)!r}")
    for name, value in zip(("host", "port"), args):
        if name in params:
            raise ValueError(f"{prefix}: {name} is given twice")
        params[name] = value
    for name in ("host", "port"):
        if name not in params:
            raise ValueError(f"{prefix}: missing {name} (write {prefix}:host=HOST:port=PORT)")
    host = params.pop("host")
    if not host:
        raise ValueError(f"{prefix}: host is required")
    return params, host, parse_port(params.pop("port"), prefix, allow_zero=False)


@implementer(IStreamClientEndpointStringParserWithReactor)
class TLSClientParser:
    """Client ``tls:host=H:port=P[:trustRoots=CA][:certificate=C][:privateKey=K]
    [:timeout=S][:bindAddress=A][:endpoint=DESCRIPTION]``: Twisted's ``tls:`` client string,
    parsed by rsocket_tx so that the connection verifies the host name with
    :class:`~rsocket_tx.transports.tls.HostnameVerifyingOptions` (Twisted's own parser
    accepts a certificate without a subjectAltName for any host). ``trustRoots`` is a PEM
    file or a directory of ``*.pem`` files; ``endpoint`` is a client endpoint description to
    run TLS over instead of TCP to ``host``, which is then only the name verified.

    Not a Twisted plugin (Twisted owns the prefix, and of two plugins with one prefix it
    picks either): :func:`rsocket_tx.transports.endpoints.client_endpoint` calls it for every
    ``tls:`` string.
    """

    prefix = "tls"

    def parseStreamClient(self, reactor: Any, *args: object,  # noqa: N802 - Twisted's name
                          **kwargs: object) -> IStreamClientEndpoint:
        p = self.prefix
        params, host, port = _client_common(p, args, kwargs)
        timeout = _float(params.pop("timeout", 30), "timeout", p)
        bind_address = params.pop("bindAddress", None)
        inner = params.pop("endpoint", None)
        tls_params = _tls_kwargs(params, TLS_CLIENT_KEYS, p)
        _reject_unknown(params, ["host", "port", "timeout", "bindAddress", "endpoint",
                                 *TLS_CLIENT_KEYS], p)
        try:
            if inner is None:
                return tls.tls_client_endpoint(reactor, host, port, timeout=timeout,
                                               bind_address=bind_address, **tls_params)
            from twisted.internet.endpoints import wrapClientTLS

            from .endpoints import client_endpoint

            return wrapClientTLS(tls.client_options(host, **tls_params),
                                 client_endpoint(reactor, inner))
        except ValueError as e:
            raise ValueError(f"{p}: {e}") from None


def split_description(spec: str) -> tuple[list[str], dict[str, str]]:
    """Split a Twisted endpoint description into its positional and named parameters, by
    the grammar of :func:`twisted.internet.endpoints.clientFromString`: ``:`` separates the
    parameters, the first ``=`` of one names it, a backslash escapes the next character.

    :param spec: e.g. ``"tls:host=localhost:port=7879"``.
    :returns: ``(["tls"], {"host": "localhost", "port": "7879"})``.
    """
    args: list[str] = []
    kwargs: dict[str, str] = {}
    parts = [""]  # [value] or [name, value] of the parameter being read
    chars = iter(spec)
    for c in chars:
        if c == "\\":
            parts[-1] += next(chars, "")
        elif c == ":":
            _add_parameter(parts, args, kwargs)
            parts = [""]
        elif c == "=" and len(parts) == 1:
            parts.append("")
        else:
            parts[-1] += c
    _add_parameter(parts, args, kwargs)
    return args, kwargs


def _add_parameter(parts: list[str], args: list[str], kwargs: dict[str, str]) -> None:
    if len(parts) == 1:
        args.append(parts[0])
    else:
        kwargs[parts[0]] = parts[1]


@implementer(IPlugin, IStreamClientEndpointStringParserWithReactor)
class WebSocketClientParser:
    """Client ``ws:host=H:port=P[:path=/rsocket][:timeout=S][:bindAddress=A]``."""

    prefix = "ws"
    secure = False

    def parseStreamClient(self, reactor: Any, *args: object,  # noqa: N802 - Twisted's name
                          **kwargs: object) -> IStreamClientEndpoint:
        p = self.prefix
        params, host, port = _client_common(p, args, kwargs)
        path = params.pop("path", "/")
        timeout = _float(params.pop("timeout", 30), "timeout", p)
        bind_address = params.pop("bindAddress", None)
        known = ["host", "port", "path", "timeout", "bindAddress"]
        tls_params = None
        if self.secure:
            tls_params = _tls_kwargs(params, TLS_CLIENT_KEYS, p)
            known += list(TLS_CLIENT_KEYS)
        _reject_unknown(params, known, p)
        return ws_client(reactor, host, port, path=path, secure=self.secure,
                         tls_params=tls_params, timeout=timeout, bind_address=bind_address,
                         where=p)


@implementer(IPlugin, IStreamClientEndpointStringParserWithReactor)
class SecureWebSocketClientParser(WebSocketClientParser):
    """Client ``wss:host=H:port=P[:path=..][:trustRoots=CA][:certificate=C][:privateKey=K]``."""

    prefix = "wss"
    secure = True
