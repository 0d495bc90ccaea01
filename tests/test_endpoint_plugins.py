"""The endpoint-string plugins (twisted/plugins/rsocket_tx_endpoints.py): discovery, every
server and client form through Twisted's own ``serverFromString`` / ``clientFromString``
(real round trips on loopback for mtls, ws, wss), and their errors."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import pytest_twisted
from tlscerts import make_tls_files
from twisted.internet import reactor
from twisted.internet.endpoints import clientFromString, serverFromString
from twisted.internet.interfaces import (
    IStreamClientEndpointStringParserWithReactor,
    IStreamServerEndpointStringParser,
)
from twisted.plugin import getPlugins
from twisted_support import EchoResponder, wait

from rsocket_tx import Payload, connect, serve
from rsocket_tx.transports.websocket import WebSocketClientEndpoint, WebSocketServerEndpoint

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(autouse=True)
def repo_on_path(monkeypatch):
    """The repo's twisted/plugins visible as from the repo root (see tests/test_tap.py)."""
    from twisted.plugin import pluginPackagePaths

    import twisted.plugins

    if str(REPO) not in sys.path:
        monkeypatch.syspath_prepend(str(REPO))
    paths = [p for p in pluginPackagePaths("twisted.plugins") if p not in twisted.plugins.__path__]
    monkeypatch.setattr(twisted.plugins, "__path__", list(twisted.plugins.__path__) + paths)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


# -- discovery -------------------------------------------------------------------------------------


def _prefixes(interface) -> list[str]:
    return sorted(p.prefix for p in getPlugins(interface))


def test_plugins_are_discovered_once():
    servers = _prefixes(IStreamServerEndpointStringParser)
    clients = _prefixes(IStreamClientEndpointStringParserWithReactor)
    for prefix in ("mtls", "ws", "wss"):
        assert servers.count(prefix) == 1, servers
    for prefix in ("ws", "wss"):
        assert clients.count(prefix) == 1, clients
    # tls: stays Twisted's (client and server): no second parser with that prefix
    assert servers.count("tls") == 1 and clients.count("tls") == 1


def test_plugin_module_is_tiny():
    source = (REPO / "twisted" / "plugins" / "rsocket_tx_endpoints.py").read_text()
    assert "from rsocket_tx.transports.endpoint_parsers import" in source
    assert "def " not in source and "class " not in source
    assert not (REPO / "twisted" / "plugins" / "__init__.py").exists()


# -- server and client strings: round trips ------------------------------------------------


def _forms(certs):
    key, cert, ca = certs.server_key, certs.server_cert, certs.ca
    client_auth = f"certificate={certs.client_cert}:privateKey={certs.client_key}"
    return {
        "mtls": (f"mtls:0:interface=127.0.0.1:privateKey={key}:certKey={cert}:caCerts={ca}",
                 f"tls:host=localhost:port={{port}}:trustRoots={certs.ca_dir}:{client_auth}"),
        "mtls-port-keyword": (
            f"mtls:port=0:interface=127.0.0.1:privateKey={certs.server_combined}:caCerts={ca}",
            f"tls:host=127.0.0.1:port={{port}}:trustRoots={certs.ca_dir}:{client_auth}"),
        "ws": ("ws:0:interface=127.0.0.1:path=/rsocket",
               "ws:host=127.0.0.1:port={port}:path=/rsocket"),
        "ws-positional": ("ws:port=0:interface=127.0.0.1", "ws:127.0.0.1:{port}"),
        "wss": (f"wss:0:interface=127.0.0.1:path=/rs:privateKey={key}:certKey={cert}",
                f"wss:host=localhost:port={{port}}:path=/rs:trustRoots={ca}"),
        "wss-mutual": (
            f"wss:0:interface=127.0.0.1:path=/rs:privateKey={key}:certKey={cert}:caCerts={ca}",
            f"wss:host=127.0.0.1:port={{port}}:path=/rs:trustRoots={certs.ca_dir}:{client_auth}"),
    }


@pytest.mark.parametrize("form", ["mtls", "mtls-port-keyword", "ws", "ws-positional", "wss",
                                  "wss-mutual"])
@pytest_twisted.ensureDeferred
async def test_string_round_trip(certs, form):
    server_spec, client_spec = _forms(certs)[form]
    endpoint = serverFromString(reactor, server_spec)
    port = await wait(serve(endpoint, EchoResponder, reactor=reactor))
    try:
        client = clientFromString(reactor, client_spec.format(port=port.getHost().port))
        rsocket = await wait(connect(client, reactor=reactor))
        try:
            response = await wait(rsocket.request_response(Payload(b"ping", b"meta")))
            assert response == Payload(b"ping", b"meta")
            items = await wait(rsocket.request_stream(Payload(b"2")).collect())
            assert [p.data for p in items] == [b"0", b"1"]
        finally:
            await rsocket.close()
    finally:
        await port.factory.close_connections(drain_timeout=0)
        await port.stopListening()


def test_ws_server_string_builds_the_websocket_endpoint(tmp_path):
    endpoint = serverFromString(reactor, f"ws:8080:path=/rsocket:static={tmp_path}")
    assert isinstance(endpoint, WebSocketServerEndpoint)
    assert (endpoint.path, endpoint.static) == ("/rsocket", str(tmp_path))
    assert serverFromString(reactor, "ws:8080").path == "/"


def test_ws_client_strings_build_the_url():
    endpoint = clientFromString(reactor, "ws:host=example.com:port=8080:path=/rsocket")
    assert isinstance(endpoint, WebSocketClientEndpoint)
    assert endpoint.url == "ws://example.com:8080/rsocket"
    assert clientFromString(reactor, r"ws:host=\:\:1:port=80").url == "ws://[::1]:80/"
    wss = clientFromString(reactor, "wss:host=example.com:port=443:path=/x")
    assert wss.url == "wss://example.com:443/x"


@pytest.mark.parametrize("spec, message", [
    ("mtls:0:privateKey={key}", "caCerts=FILE is required"),
    ("mtls:0:caCerts={ca}", "privateKey=FILE is required"),
    ("mtls:0:privateKey=/nonexistent.key:caCerts={ca}", "cannot read the private key file"),
    ("mtls:0:privateKey={key}:certKey={cert}:caCerts=/nonexistent.pem",
     "cannot read the certificate file"),
    ("mtls:privateKey={key}:caCerts={ca}", "missing port"),
    ("mtls:x:privateKey={key}:caCerts={ca}", "port must be an integer"),
    ("mtls:0:privateKey={key}:caCerts={ca}:bogus=1", "unknown parameter"),
    ("ws:0:path=rsocket", "must start with '/'"),
    ("ws:0:static=/nonexistent/dir", "static directory '/nonexistent/dir' does not exist"),
    ("ws:0:privateKey={key}", "unknown parameter"),
    ("ws:70000", "port out of range"),
    ("wss:0", "privateKey=FILE is required"),
])
def test_server_string_errors(certs, spec, message):
    from rsocket_tx.transports.endpoints import server_endpoint

    spec = spec.format(key=certs.server_key, cert=certs.server_cert, ca=certs.ca)
    with pytest.raises(ValueError, match=message):
        server_endpoint(reactor, spec)


@pytest.mark.parametrize("spec, message", [
    ("ws:host=h", "missing port"),
    ("ws:port=80", "missing host"),
    ("ws:host=h:port=0", "port out of range"),
    ("ws:host=h:port=80:path=x", "must start with '/'"),
    ("ws:host=h:port=80:trustRoots=ca.pem", "unknown parameter"),
    ("ws:host=h:port=80:timeout=soon", "timeout must be a number"),
    ("wss:host=h:port=443:trustRoots=/nonexistent.pem", "cannot read the certificate file"),
])
def test_client_string_errors(spec, message):
    from rsocket_tx.transports.endpoints import client_endpoint

    with pytest.raises(ValueError, match=message):
        client_endpoint(reactor, spec)
