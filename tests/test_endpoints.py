"""rsocket_tx.transports.endpoints: endpoint strings, URIs and endpoint objects -> Twisted
endpoints."""

from __future__ import annotations

import pytest
from twisted.internet.endpoints import (
    HostnameEndpoint,
    TCP4ClientEndpoint,
    TCP4ServerEndpoint,
    TCP6ServerEndpoint,
    UNIXClientEndpoint,
    UNIXServerEndpoint,
)
from twisted.internet.interfaces import IStreamClientEndpoint, IStreamServerEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.testing import MemoryReactorClock

from rsocket_tx.transports import endpoints
from rsocket_tx.transports.endpoints import (
    client_endpoint,
    is_uri,
    register_uri_scheme,
    server_endpoint,
    uri_schemes,
)


@pytest.fixture
def reactor():
    return MemoryReactorClock()


def _listen(reactor, endpoint):
    """Listen on a memory reactor; return (port, interface) it was asked for."""
    endpoint.listen(Factory.forProtocol(Protocol))
    port, _factory, _backlog, interface = reactor.tcpServers[-1]
    return port, interface


def _connect(reactor, endpoint):
    endpoint.connect(Factory.forProtocol(Protocol))
    host, port, *_ = reactor.tcpClients[-1]
    return host, port


# -- client ------------------------------------------------------------------------------------


def test_client_twisted_string(reactor):
    endpoint = client_endpoint(reactor, "tcp:host=localhost:port=7878")
    assert isinstance(endpoint, TCP4ClientEndpoint)
    assert _connect(reactor, endpoint) == ("localhost", 7878)


def test_client_twisted_string_positional(reactor):
    endpoint = client_endpoint(reactor, "tcp:127.0.0.1:9000")
    assert _connect(reactor, endpoint) == ("127.0.0.1", 9000)


def test_client_twisted_unix_string(reactor, tmp_path):
    path = str(tmp_path / "s.sock")
    endpoint = client_endpoint(reactor, f"unix:path={path}")
    assert isinstance(endpoint, UNIXClientEndpoint)


@pytest.mark.parametrize(
    ("uri", "host", "port"),
    [
        ("tcp://localhost:7878", "localhost", 7878),
        ("tcp://127.0.0.1:1", "127.0.0.1", 1),
        ("tcp://[::1]:7878", "::1", 7878),
        ("TCP://example.com:65535/", "example.com", 65535),
        ("  tcp://localhost:7878  ", "localhost", 7878),
    ],
)
def test_client_uri(reactor, uri, host, port):
    endpoint = client_endpoint(reactor, uri)
    assert isinstance(endpoint, HostnameEndpoint)
    # HostnameEndpoint has no public accessors; these are what its constructor stored.
    assert endpoint._hostText == host
    assert endpoint._port == port
    assert endpoint._reactor is reactor


def test_client_endpoint_object_returned_as_is(reactor):
    endpoint = TCP4ClientEndpoint(reactor, "localhost", 1)
    assert client_endpoint(reactor, endpoint) is endpoint


def test_client_bytes_string(reactor):
    endpoint = client_endpoint(reactor, b"tcp://localhost:7878")
    assert IStreamClientEndpoint.providedBy(endpoint)


def test_client_default_reactor():
    from twisted.internet import reactor as global_reactor

    endpoint = client_endpoint(None, "tcp://localhost:7878")
    assert endpoint._reactor is global_reactor


#: (which endpoint, spec, part of the ValueError's message)
ENDPOINT_ERRORS = [
    ("client", "foo://localhost:7878", "unsupported URI scheme 'foo'"),
    ("client", "http://localhost:80", "unsupported URI scheme 'http'"),
    ("client", "tcp://localhost", "missing port"),
    ("client", "tcp://localhost:", "missing port"),
    ("client", "tcp://:7878", "missing host"),
    ("client", "tcp://localhost:abc", "invalid port"),
    ("client", "tcp://localhost:70000", "invalid port"),
    ("client", "tcp://localhost:0", "port 0"),
    ("client", "tcp://localhost:7878/path", "unexpected path"),
    ("client", "tcp://localhost:7878?x=1", "unexpected query"),
    ("client", "tcp://localhost:7878#frag", "unexpected fragment"),
    ("client", "tcp://user@localhost:7878", "unexpected user information"),
    ("client", "tcp://[::1:7878", "invalid URI"),
    ("client", "", "empty client endpoint"),
    ("client", "   ", "empty client endpoint"),
    ("client", "localhost:7878", "Unknown endpoint type: 'localhost'"),
    ("client", "bogus:whatever", "Unknown endpoint type: 'bogus'"),
    ("client", "tcp:host=localhost", "missing 1 required positional argument: 'port'"),
    ("client", "tcp:localhost:abc", "expected an integer"),
    ("client", "tcp:localhost:7878:bogus=1", "unexpected keyword argument 'bogus'"),
    ("server", "foo://0.0.0.0:7878", "unsupported URI scheme 'foo'"),
    ("server", "tcp://0.0.0.0", "missing port"),
    ("server", "tcp://", "missing port"),
    ("server", "tcp://0.0.0.0:port", "invalid port"),
    ("server", "tcp://0.0.0.0:-1", "invalid port"),
    ("server", "tcp://0.0.0.0:7878/x", "unexpected path"),
    ("server", "", "empty server endpoint"),
    ("server", "bogus:1", "Unknown endpoint type: 'bogus'"),
    ("server", "tcp:abc", "expected an integer"),
    ("server", "tcp:", "expected an integer"),
    ("server", "tcp:7878:bogus=1", "unexpected keyword argument 'bogus'"),
]


@pytest.mark.parametrize(("side", "spec", "message"), ENDPOINT_ERRORS)
def test_endpoint_errors(reactor, side, spec, message):
    make = {"client": client_endpoint, "server": server_endpoint}[side]
    with pytest.raises(ValueError) as info:
        make(reactor, spec)
    assert message in str(info.value)


def test_client_error_names_the_string(reactor):
    with pytest.raises(ValueError) as info:
        client_endpoint(reactor, "tcp:host=localhost")
    assert "invalid client endpoint 'tcp:host=localhost'" in str(info.value)


@pytest.mark.parametrize("spec", [7878, None, object(), ["tcp:7878"]])
def test_client_wrong_type(reactor, spec):
    with pytest.raises(TypeError, match="client endpoint must be a string"):
        client_endpoint(reactor, spec)


def test_server_endpoint_is_not_a_client_endpoint(reactor):
    with pytest.raises(TypeError):
        client_endpoint(reactor, TCP4ServerEndpoint(reactor, 1))


# -- server ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "port", "interface"),
    [
        ("tcp:7878", 7878, ""),
        ("tcp:port=7878:interface=127.0.0.1", 7878, "127.0.0.1"),
        ("tcp:0:interface=127.0.0.1", 0, "127.0.0.1"),
    ],
)
def test_server_twisted_string(reactor, spec, port, interface):
    endpoint = server_endpoint(reactor, spec)
    assert isinstance(endpoint, TCP4ServerEndpoint)
    assert _listen(reactor, endpoint) == (port, interface)


def test_server_twisted_unix_string(reactor, tmp_path):
    endpoint = server_endpoint(reactor, f"unix:{tmp_path / 's.sock'}")
    assert isinstance(endpoint, UNIXServerEndpoint)


@pytest.mark.parametrize(
    ("uri", "cls", "port", "interface"),
    [
        ("tcp://0.0.0.0:7878", TCP4ServerEndpoint, 7878, "0.0.0.0"),
        ("tcp://:7878", TCP4ServerEndpoint, 7878, ""),
        ("tcp://127.0.0.1:0", TCP4ServerEndpoint, 0, "127.0.0.1"),
        ("tcp://localhost:7878", TCP4ServerEndpoint, 7878, "localhost"),
        ("tcp://[::]:7878", TCP6ServerEndpoint, 7878, "::"),
        ("tcp://[::1]:7879/", TCP6ServerEndpoint, 7879, "::1"),
    ],
)
def test_server_uri(reactor, uri, cls, port, interface):
    endpoint = server_endpoint(reactor, uri)
    assert isinstance(endpoint, cls)
    assert _listen(reactor, endpoint) == (port, interface)


def test_server_endpoint_object_returned_as_is(reactor):
    endpoint = TCP4ServerEndpoint(reactor, 1)
    assert server_endpoint(reactor, endpoint) is endpoint


def test_server_wrong_type(reactor):
    with pytest.raises(TypeError, match="server endpoint must be a string"):
        server_endpoint(reactor, 7878)


# -- URI helpers and the scheme table -----------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("tcp://localhost:1", True),
        ("ws://h/x", True),
        ("tcp:host=localhost:port=1", False),
        ("tcp:7878", False),
        ("unix:/tmp/x", False),
    ],
)
def test_is_uri(spec, expected):
    assert is_uri(spec) is expected


def test_tcp_is_known():
    assert "tcp" in uri_schemes()


@pytest.fixture
def scheme_table(monkeypatch):
    monkeypatch.setattr(endpoints, "_SCHEMES", dict(endpoints._SCHEMES))


def test_register_uri_scheme(reactor, scheme_table):
    seen = []

    def client(reactor, parts):
        seen.append(("client", parts.hostname, parts.port, parts.path))
        return TCP4ClientEndpoint(reactor, parts.hostname, parts.port)

    register_uri_scheme("mem", client=client)
    endpoint = client_endpoint(reactor, "mem://somewhere:12/p")
    assert IStreamClientEndpoint.providedBy(endpoint)
    assert seen == [("client", "somewhere", 12, "/p")]
    assert "mem" in uri_schemes()
    with pytest.raises(ValueError, match="cannot be used to listen"):
        server_endpoint(reactor, "mem://somewhere:12")


def test_register_server_only_scheme(reactor, scheme_table):
    register_uri_scheme("lst", server=lambda reactor, parts: TCP4ServerEndpoint(reactor, 1))
    assert IStreamServerEndpoint.providedBy(server_endpoint(reactor, "LST://x:1"))
    with pytest.raises(ValueError, match="cannot be used to connect"):
        client_endpoint(reactor, "lst://x:1")


def test_register_bad_scheme_name(scheme_table):
    with pytest.raises(ValueError, match="invalid URI scheme name"):
        register_uri_scheme("1bad")


# -- tls://, ws://, wss:// (round trips over them: tests/test_tls.py, test_endpoint_plugins.py) --


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    from tlscerts import make_tls_files

    return make_tls_files(tmp_path_factory.mktemp("tls"))


def test_tls_ws_wss_are_known():
    assert {"tcp", "tls", "ws", "wss"} <= set(uri_schemes())


def test_tls_server_uri_listens_on_tcp(reactor, certs):
    endpoint = server_endpoint(
        reactor, f"tls://127.0.0.1:8443?privateKey={certs.server_key}&certKey={certs.server_cert}")
    assert IStreamServerEndpoint.providedBy(endpoint)
    assert _listen(reactor, endpoint) == (8443, "127.0.0.1")


def test_tls_client_uri(reactor, certs):
    endpoint = client_endpoint(reactor, f"tls://localhost:7879?trustRoots={certs.ca}")
    assert IStreamClientEndpoint.providedBy(endpoint)


@pytest.mark.parametrize("uri, url", [
    ("ws://localhost:8080/rsocket", "ws://localhost:8080/rsocket"),
    ("ws://localhost:8080", "ws://localhost:8080/"),
    ("ws://localhost/x", "ws://localhost:80/x"),
    ("wss://example.com/rs", "wss://example.com:443/rs"),
    ("ws://[::1]:9/", "ws://[::1]:9/"),
])
def test_ws_client_uri(reactor, uri, url):
    assert client_endpoint(reactor, uri).url == url


def test_ws_server_uri(reactor, tmp_path, certs):
    endpoint = server_endpoint(reactor, f"ws://127.0.0.1:8080/rsocket?static={tmp_path}")
    assert (endpoint.path, endpoint.static) == ("/rsocket", str(tmp_path))
    assert server_endpoint(reactor, "ws://:8080").path == "/"
    wss = server_endpoint(reactor, f"wss://:8443/rs?privateKey={certs.server_combined}"
                                   f"&caCerts={certs.ca}")
    assert wss.path == "/rs"


@pytest.mark.parametrize("side, uri, message", [
    ("server", "tls://:8443", "privateKey=FILE is required"),
    ("server", "tls://:8443/x?privateKey=k", "unexpected path"),
    ("server", "wss://:8443/rs", "privateKey=FILE is required"),
    ("server", "ws://:8080/rs?trustRoots=x", "unknown parameter 'trustRoots'"),
    ("server", "ws://:8080/rs?static=/nonexistent/dir", "does not exist"),
    ("server", "ws://:8080/rs?backlog=x", "backlog must be an integer"),
    ("client", "ws://:8080/rs", "missing host"),
    ("client", "ws://h:8080/rs?static=x", "unknown parameter 'static'"),
    ("client", "wss://h/rs?trustRoots=/nonexistent.pem", "cannot read the certificate file"),
    ("client", "tls://h:1?timeout=x", "timeout must be a number"),
])
def test_tls_ws_uri_errors(reactor, side, uri, message):
    make = server_endpoint if side == "server" else client_endpoint
    with pytest.raises(ValueError, match=message):
        make(reactor, uri)
