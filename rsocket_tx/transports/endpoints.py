"""Endpoint strings and URIs -> Twisted endpoints.

Everywhere rsocket_tx takes an address (:func:`rsocket_tx.connect`, :func:`rsocket_tx.serve`, the
``twistd rsocket`` plugin, the ``rsocket-tx`` CLI) it accepts one of three forms:

* a Twisted endpoint description string, parsed with
  :func:`twisted.internet.endpoints.clientFromString` or
  :func:`~twisted.internet.endpoints.serverFromString`: ``"tcp:host=localhost:port=7878"``,
  ``"tcp:7878:interface=127.0.0.1"``, ``"unix:/run/rsocket.sock"``, ``"ssl:7879:..."`` … and
  the forms rsocket_tx plugs in (:mod:`rsocket_tx.transports.endpoint_parsers`): server ``mtls:``
  (TLS requiring client certificates), ``ws:``, ``wss:``, client ``ws:``, ``wss:`` (server
  ``tls:`` and ``ssl:`` are Twisted's own; client ``tls:`` strings are parsed by rsocket_tx so
  that they verify host names, and client ``ssl:`` strings, which do not, are refused).
* a URI ``scheme://host:port[/path][?name=value&...]``: ``tcp://``, ``tls://``, ``ws://``,
  ``wss://``. A client URI needs a host (``tcp://localhost:7878``, ``tcp://[::1]:7878``); a server
  URI's host is the interface to listen on (``tcp://0.0.0.0:7878``, ``tcp://[::]:7878``; empty =
  every IPv4 interface: ``tcp://:7878``). The query carries the TLS files and options with the
  names of the endpoint strings (``tls://host:7879?trustRoots=ca.pem``,
  ``wss://:8443/rsocket?privateKey=key.pem&certKey=cert.pem``); the path of ``ws://`` and
  ``wss://`` is the WebSocket resource. More schemes plug in with :func:`register_uri_scheme`.
* an endpoint object already made (:class:`~twisted.internet.interfaces.IStreamClientEndpoint`
  or :class:`~twisted.internet.interfaces.IStreamServerEndpoint`), returned as is.

A string is taken as a URI when it starts with ``scheme://``; otherwise it is a Twisted endpoint
description. Every form is listed with examples in ``docs/transports.rst``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import SplitResult, parse_qsl, urlsplit

from twisted.internet.endpoints import (
    HostnameEndpoint,
    TCP4ServerEndpoint,
    TCP6ServerEndpoint,
    clientFromString,
    serverFromString,
)
from twisted.internet.interfaces import IStreamClientEndpoint, IStreamServerEndpoint
from zope.interface.interface import InterfaceClass

from .limits import DEFAULT_BACKLOG, with_backlog

__all__ = [
    "client_endpoint",
    "server_endpoint",
    "register_uri_scheme",
    "uri_schemes",
    "is_uri",
    "DEFAULT_PORT",
]

#: The port used by examples and by the servers' default listen endpoint (``tcp:7878``).
DEFAULT_PORT = 7878

_URI_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")

_N = TypeVar("_N", int, float)
_E = TypeVar("_E")

ClientBuilder = Callable[[object, SplitResult], IStreamClientEndpoint]
ServerBuilder = Callable[[object, SplitResult], IStreamServerEndpoint]


@dataclass(frozen=True)
class _Scheme:
    client: ClientBuilder | None
    server: ServerBuilder | None


_SCHEMES: dict[str, _Scheme] = {}


def register_uri_scheme(
    scheme: str, *, client: ClientBuilder | None = None, server: ServerBuilder | None = None
) -> None:
    """Teach :func:`client_endpoint` and :func:`server_endpoint` a URI scheme.

    :param scheme: the scheme, case-insensitive (``"ws"``, ``"tls"`` …).
    :param client: ``client(reactor, parts) -> IStreamClientEndpoint`` where ``parts`` is the
        :class:`urllib.parse.SplitResult` of the URI; it raises :class:`ValueError` on a bad URI.
        ``None``: the scheme cannot be used to connect.
    :param server: the same for listening (``-> IStreamServerEndpoint``); ``None``: the scheme
        cannot be used to listen.
    :raises ValueError: if ``scheme`` is not a valid URI scheme name.
    """
    if not _URI_RE.match(scheme + "://"):
        raise ValueError(f"invalid URI scheme name {scheme!r}")
    _SCHEMES[scheme.lower()] = _Scheme(client=client, server=server)


def uri_schemes() -> list[str]:
    """Return the URI schemes known, sorted (``["tcp", "tls", "ws", "wss"]`` unless more were
    registered)."""
    return sorted(_SCHEMES)


def is_uri(spec: str) -> bool:
    """Return whether ``spec`` is written as a URI (``scheme://…``) rather than a Twisted
    endpoint description."""
    return _URI_RE.match(spec) is not None


def _default_reactor(reactor: Any) -> Any:
    if reactor is None:
        from twisted.internet import reactor as global_reactor

        return global_reactor
    return reactor


def client_endpoint(reactor: Any, spec: str | bytes | IStreamClientEndpoint
                    ) -> IStreamClientEndpoint:
    """Turn ``spec`` into an endpoint to connect to.

    :param reactor: the reactor the endpoint uses (``None``: the global reactor).
    :param spec: a Twisted client endpoint description (``"tcp:host=localhost:port=7878"``,
        ``"unix:path=/run/rsocket.sock"``), a URI (``"tcp://localhost:7878"``,
        ``"tcp://[::1]:7878"``) or an :class:`~twisted.internet.interfaces.IStreamClientEndpoint`
        (returned unchanged).
        Also ``"tls:host=H:port=P:trustRoots=CADIR"``, ``"ws:host=H:port=P:path=/rsocket"``,
        ``"wss:host=H:port=P:trustRoots=ca.pem"``, ``"tls://H:P?trustRoots=ca.pem"``,
        ``"ws://H:P/rsocket"``, ``"wss://H:P/rsocket"``.
    :returns: an :class:`~twisted.internet.interfaces.IStreamClientEndpoint`. A ``tcp://`` URI
        gives a :class:`~twisted.internet.endpoints.HostnameEndpoint` (name resolution, IPv4 and
        IPv6); TLS ones verify the server's certificate and host name (platform trust store
        unless ``trustRoots``).
    :raises ValueError: if the string cannot be parsed: unknown endpoint type, unsupported URI
        scheme, missing or invalid host or port, unexpected URI parts, a TLS file that cannot
        be read.
    :raises TypeError: if ``spec`` is neither a string nor a client endpoint.
    """
    endpoint: IStreamClientEndpoint = _endpoint(reactor, spec, "client", IStreamClientEndpoint,
                                                clientFromString, "connect")
    return endpoint


def server_endpoint(reactor: Any, spec: str | bytes | IStreamServerEndpoint
                    ) -> IStreamServerEndpoint:
    """Turn ``spec`` into an endpoint to listen on.

    :param reactor: the reactor the endpoint uses (``None``: the global reactor).
    :param spec: a Twisted server endpoint description (``"tcp:7878"``,
        ``"tcp:port=7878:interface=127.0.0.1"``, ``"unix:/run/rsocket.sock"``), a URI
        (``"tcp://0.0.0.0:7878"``; ``"tcp://:7878"`` = every IPv4 interface; ``"tcp://[::]:7878"``
        = every IPv6 interface; port 0 = a free port chosen by the system), ``"ssl:8443:privateKey=
        key.pem:certKey=cert.pem"``, ``"mtls:8443:privateKey=key.pem:caCerts=ca.pem"``,
        ``"ws:8080:path=/rsocket[:static=DIR]"``,
        ``"wss:8443:privateKey=key.pem:path=/rsocket"``, ``"tls://:8443?privateKey=key.pem"``,
        ``"ws://127.0.0.1:8080/rsocket?static=DIR"``, ``"wss://:8443/rsocket?privateKey=..."``,
        or an :class:`~twisted.internet.interfaces.IStreamServerEndpoint` (returned unchanged).
    :returns: an :class:`~twisted.internet.interfaces.IStreamServerEndpoint`.
    :raises ValueError: if the string cannot be parsed: unknown endpoint type, unsupported URI
        scheme, missing or invalid port, unexpected URI parts, a TLS file that cannot be read.
    :raises TypeError: if ``spec`` is neither a string nor a server endpoint.
    """
    endpoint: IStreamServerEndpoint = _endpoint(reactor, spec, "server", IStreamServerEndpoint,
                                                serverFromString, "listen")
    return endpoint


def _endpoint(reactor: Any, spec: object, side: str, interface: InterfaceClass,
              from_string: Callable[[Any, str], Any], verb: str) -> Any:
    """The shared body of :func:`client_endpoint` and :func:`server_endpoint`."""
    if interface.providedBy(spec):
        return spec
    spec = _check_string(spec, side)
    reactor = _default_reactor(reactor)
    if is_uri(spec):
        parts, scheme = _split_uri(spec)
        make = getattr(scheme, side)
        if make is None:
            raise ValueError(f"URI scheme {parts.scheme!r} cannot be used to {verb}: {spec!r}")
        return make(reactor, parts)
    if side == "server":
        spec = with_backlog(spec)  # Twisted's listeners default to a backlog of 50
    else:
        from_string = _client_from_string
    try:
        return from_string(reactor, spec)
    except (ValueError, TypeError) as e:
        raise ValueError(f"invalid {side} endpoint {spec!r}: {_describe(e)}") from e


def _client_from_string(reactor: Any, spec: str) -> IStreamClientEndpoint:
    """:func:`~twisted.internet.endpoints.clientFromString`, except for TLS: every TLS client
    verifies the server's host name (:class:`~rsocket_tx.transports.tls.HostnameVerifyingOptions`),
    so ``tls:`` strings are parsed by rsocket_tx and ``ssl:`` ones (which never check the
    host name) are refused."""
    from . import endpoint_parsers as ep

    args, kwargs = ep.split_description(spec)
    prefix = args[0].lower() if args else ""
    if prefix == "ssl":
        raise ValueError("ssl: client strings do not verify the server's host name; write "
                         "tls:host=HOST:port=PORT[:trustRoots=CA] or tls://HOST:PORT[?trustRoots=CA]")
    if prefix == "tls":
        return ep.TLSClientParser().parseStreamClient(reactor, *args[1:], **kwargs)
    endpoint: IStreamClientEndpoint = clientFromString(reactor, spec)
    return endpoint


def _check_string(spec: object, side: str) -> str:
    if isinstance(spec, bytes):
        spec = spec.decode("utf-8")
    if not isinstance(spec, str):
        raise TypeError(
            f"a {side} endpoint must be a string or an IStream{side.capitalize()}Endpoint,"
            f" not {type(spec).__name__}"
        )
    spec = spec.strip()
    if not spec:
        raise ValueError(f"empty {side} endpoint")
    return spec


def _describe(e: Exception) -> str:
    text = str(e)
    if isinstance(e, TypeError):
        # Twisted reports unknown or missing keyword arguments as TypeErrors of the parser:
        # keep the part after "__init__() " / "_parseTCP() ".
        text = re.sub(r"^[\w.]+\(\) ", "", text)
    elif text.startswith("invalid literal for int()"):
        text = "expected an integer: " + text
    return text


def _split_uri(spec: str) -> tuple[SplitResult, _Scheme]:
    try:
        parts = urlsplit(spec)
    except ValueError as e:
        raise ValueError(f"invalid URI {spec!r}: {e}") from None
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None:
        known = ", ".join(f"{s}://" for s in uri_schemes())
        raise ValueError(
            f"unsupported URI scheme {parts.scheme!r} in {spec!r} (supported: {known},"
            " or a Twisted endpoint description such as 'tcp:host=localhost:port=7878')"
        )
    return parts, scheme


def _uri_port(parts: SplitResult, *, allow_zero: bool) -> int:
    uri = parts.geturl()
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"invalid port in {uri!r}: expected an integer 0..65535") from None
    if port is None:
        raise ValueError(f"missing port in {uri!r} (write {parts.scheme}://HOST:PORT)")
    if port == 0 and not allow_zero:
        raise ValueError(f"port 0 cannot be connected to: {uri!r}")
    return port


def _reject_extras(parts: SplitResult) -> None:
    uri = parts.geturl()
    if parts.path not in ("", "/"):
        raise ValueError(f"unexpected path {parts.path!r} in {uri!r}")
    if parts.query:
        raise ValueError(f"unexpected query {parts.query!r} in {uri!r}")
    if parts.fragment:
        raise ValueError(f"unexpected fragment {parts.fragment!r} in {uri!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"unexpected user information in {uri!r}")


def _tcp_client(reactor: Any, parts: SplitResult) -> IStreamClientEndpoint:
    _reject_extras(parts)
    port = _uri_port(parts, allow_zero=False)
    host = parts.hostname
    if not host:
        raise ValueError(f"missing host in {parts.geturl()!r} (write tcp://HOST:PORT)")
    return HostnameEndpoint(reactor, host, port)


def _tcp_server(reactor: Any, parts: SplitResult) -> IStreamServerEndpoint:
    params = _query(parts, ["backlog"])  # (and no fragment, no user information)
    _no_path(parts)
    backlog = _backlog(params, parts.geturl())
    port = _uri_port(parts, allow_zero=True)
    host = parts.hostname or ""
    try:
        address = ipaddress.ip_address(host) if host else None
    except ValueError:
        address = None  # a host name: bound as IPv4 (the socket layer resolves it)
    if address is not None and address.version == 6:
        return TCP6ServerEndpoint(reactor, port, interface=host, backlog=backlog)
    return TCP4ServerEndpoint(reactor, port, interface=host, backlog=backlog)


register_uri_scheme("tcp", client=_tcp_client, server=_tcp_server)


# -- tls://, ws://, wss:// ---------------------------------------------------------------------


def _query(parts: SplitResult, known: Sequence[str]) -> dict[str, str]:
    """The query parameters of a URI, each at most once and all in ``known``."""
    uri = parts.geturl()
    if parts.fragment:
        raise ValueError(f"unexpected fragment {parts.fragment!r} in {uri!r}")
    if parts.username is not None or parts.password is not None:
        raise ValueError(f"unexpected user information in {uri!r}")
    try:
        pairs = parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
    except ValueError:
        raise ValueError(f"invalid query {parts.query!r} in {uri!r}") from None
    params: dict[str, str] = {}
    for name, value in pairs:
        if name not in known:
            raise ValueError(f"unknown parameter {name!r} in {uri!r} (known: "
                             f"{', '.join(sorted(known))})")
        if name in params:
            raise ValueError(f"parameter {name!r} given twice in {uri!r}")
        params[name] = value
    return params


def _no_path(parts: SplitResult) -> None:
    if parts.path not in ("", "/"):
        raise ValueError(f"unexpected path {parts.path!r} in {parts.geturl()!r}")


def _client_host(parts: SplitResult) -> str:
    host = parts.hostname
    if not host:
        raise ValueError(f"missing host in {parts.geturl()!r} (write {parts.scheme}://HOST:PORT)")
    return host


def _tls_args(params: dict[str, str], keys: Mapping[str, str]) -> dict[str, str]:
    return {arg: params.pop(key) for key, arg in keys.items() if key in params}


def _number(params: dict[str, str], uri: str, key: str, default: str,
            kind: Callable[[str], _N], what: str) -> _N:
    value = params.pop(key, default)
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{key} must be {what} in {uri!r}") from None


def _timeout(params: dict[str, str], uri: str) -> float:
    return _number(params, uri, "timeout", "30", float, "a number of seconds")


def _backlog(params: dict[str, str], uri: str) -> int:
    return _number(params, uri, "backlog", str(DEFAULT_BACKLOG), int, "an integer")


def _in_uri(uri: str, build: Callable[[], _E]) -> _E:
    try:
        return build()
    except ValueError as e:
        raise ValueError(f"{e} (in {uri!r})") from None


def _tls_client(reactor: Any, parts: SplitResult) -> IStreamClientEndpoint:
    from . import endpoint_parsers as ep
    from .tls import tls_client_endpoint

    uri = parts.geturl()
    _no_path(parts)
    params = _query(parts, [*ep.TLS_CLIENT_KEYS, "timeout"])
    port = _uri_port(parts, allow_zero=False)
    host = _client_host(parts)
    timeout = _timeout(params, uri)
    return _in_uri(uri, lambda: tls_client_endpoint(
        reactor, host, port, timeout=timeout, **_tls_args(params, ep.TLS_CLIENT_KEYS)))


def _tls_server(reactor: Any, parts: SplitResult) -> IStreamServerEndpoint:
    from . import endpoint_parsers as ep

    uri = parts.geturl()
    _no_path(parts)
    params = _query(parts, [*ep.TLS_SERVER_KEYS, "backlog"])
    port = _uri_port(parts, allow_zero=True)
    backlog = _backlog(params, uri)
    return _in_uri(uri, lambda: ep.tls_server(
        reactor, port, _tls_args(params, ep.TLS_SERVER_KEYS), interface=parts.hostname or "",
        backlog=backlog, where="tls://"))


def _ws_client(secure: bool) -> ClientBuilder:
    def build(reactor: Any, parts: SplitResult) -> IStreamClientEndpoint:
        from . import endpoint_parsers as ep

        uri = parts.geturl()
        params = _query(parts, [*(ep.TLS_CLIENT_KEYS if secure else ()), "timeout"])
        host = _client_host(parts)
        if parts.port is None and not _has_port(parts):
            port = 443 if secure else 80
        else:
            port = _uri_port(parts, allow_zero=False)
        timeout = _timeout(params, uri)
        tls_params = _tls_args(params, ep.TLS_CLIENT_KEYS) if secure else None
        return _in_uri(uri, lambda: ep.ws_client(
            reactor, host, port, path=parts.path or "/", secure=secure, tls_params=tls_params,
            timeout=timeout, where=f"{parts.scheme}://"))

    return build


def _has_port(parts: SplitResult) -> bool:
    try:
        return parts.port is not None
    except ValueError:
        return True  # invalid: reported by _uri_port


def _ws_server(secure: bool) -> ServerBuilder:
    def build(reactor: Any, parts: SplitResult) -> IStreamServerEndpoint:
        from . import endpoint_parsers as ep

        uri = parts.geturl()
        params = _query(parts, [*(ep.TLS_SERVER_KEYS if secure else ()), "static", "backlog"])
        port = _uri_port(parts, allow_zero=True)
        backlog = _backlog(params, uri)
        static = params.pop("static", None)
        tls_params = _tls_args(params, ep.TLS_SERVER_KEYS) if secure else None
        return _in_uri(uri, lambda: ep.ws_server(
            reactor, port, interface=parts.hostname or "", backlog=backlog,
            path=parts.path or "/", static=static, tls_params=tls_params,
            where=f"{parts.scheme}://"))

    return build


register_uri_scheme("tls", client=_tls_client, server=_tls_server)
register_uri_scheme("ws", client=_ws_client(False), server=_ws_server(False))
register_uri_scheme("wss", client=_ws_client(True), server=_ws_server(True))
