"""Host-name verification of every TLS client, on real loopback TLS servers: a certificate
without a subjectAltName (the one-line self-signed kind, here signed by the trusted CA so only
the name is wrong) and one for another name fail the handshake with a
:class:`TLSVerificationError` naming the host and the reason, and a good one connects -- for
RSocket ``connect()`` over every TLS string and URI form, the Jini mux client, the RS-network
client, the 2015-draft client, the reconnecting and load-balancing clients, and the
``rsocket-tx`` commands of each protocol. Nothing is logged as a failure (the autouse
``no_logged_failures`` fixture): Twisted's own check logs a critical traceback for a certificate
without a subjectAltName and then accepts it.

Each server is a one-port server (:class:`~rsocket_tx.transports.oneport.OnePortFactory`)
serving the four protocols, over TLS and WebSocket-over-TLS, with one of the certificates."""

from __future__ import annotations

import pytest
import pytest_twisted
from cryptography import x509
from tlscerts import make_tls_files
from twisted.internet import defer, reactor
from twisted_support import EchoResponder, LoopbackServer, run_command, wait

from rsocket_tx import Payload, connect
from rsocket_tx.faces.cli import EXIT_CONNECTION, EXIT_OK
from rsocket_tx.jini import EchoDispatcher, JiniMuxClient, JiniMuxServerFactory
from rsocket_tx.jini.tap import client_endpoint as jini_client_endpoint
from rsocket_tx.loadbalance import LoadbalanceRSocket
from rsocket_tx.protocol import RSocketServerFactory
from rsocket_tx.reactivesocket.client import connect as rs2015_connect
from rsocket_tx.reactivesocket.protocol import ReactiveSocketServerFactory
from rsocket_tx.reconnect import ReconnectState, connect_reconnecting
from rsocket_tx.rsnet.client import connect as rsnet_connect
from rsocket_tx.rsnet.server import RSNetServerFactory
from rsocket_tx.transports.endpoint_parsers import split_description
from rsocket_tx.transports.endpoints import client_endpoint
from rsocket_tx.transports.oneport import OnePortFactory
from rsocket_tx.transports.tls import (
    HostnameVerifyingOptions,
    TLSVerificationError,
    server_options,
    trust_root,
)

aio = pytest_twisted.ensureDeferred

CERTIFICATES = ["good", "no-san", "wrong-name"]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls-hostnames"))


class Server(LoopbackServer):
    """The four protocols (echo) on one loopback port, TLS with the certificate ``kind``."""

    def __init__(self, certs, kind: str) -> None:
        key, cert = {"good": (certs.server_key, certs.server_cert),
                     "no-san": (certs.no_san_key, certs.no_san_cert),
                     "wrong-name": (certs.wrong_host_key, certs.wrong_host_cert)}[kind]
        self.rsocket = RSocketServerFactory(EchoResponder, reactor=reactor)
        self.rs2015 = ReactiveSocketServerFactory(EchoResponder, reactor=reactor)
        self.factory = OnePortFactory(
            {"rsocket": self.rsocket,
             "jini-mux": JiniMuxServerFactory(EchoDispatcher, reactor=reactor),
             "rsnet": RSNetServerFactory(
                 {"count/3": lambda request: (b"%d" % i for i in range(3))}, reactor=reactor),
             "rs2015": self.rs2015},
            reactor=reactor, tls=server_options(key, cert))

    async def stop(self) -> None:
        await wait(self.port.stopListening())
        await wait(self.rsocket.close_connections(drain_timeout=0))
        await wait(self.rs2015.close_connections(drain_timeout=0))
        await wait(self.factory.close_connections())


@pytest_twisted.async_yield_fixture(params=CERTIFICATES)
async def server(request, certs):
    s = Server(certs, request.param)
    s.kind = request.param
    await s.start()
    yield s
    await s.stop()


# -- one attempt per client -------------------------------------------------------------------
# Each takes (port number, certs), makes a round trip and returns what came back; a failed
# handshake raises what the client raises.


async def _rsocket(endpoint: str) -> bytes:
    rsocket = await wait(connect(endpoint, reactor=reactor))
    try:
        return (await wait(rsocket.request_response(Payload(b"rsocket")))).data
    finally:
        await rsocket.close()


async def _jini(endpoint: str) -> bytes:
    client = JiniMuxClient(reactor, jini_client_endpoint(reactor, endpoint))
    try:
        return await wait(client.request(b"jini"))
    finally:
        await wait(client.close())


async def _rsnet(endpoint: str) -> bytes:
    protocol = await wait(rsnet_connect(reactor, endpoint))
    try:
        return b"".join([item async for item in protocol.subscribe("count/3")])
    finally:
        await wait(protocol.close())


async def _rs2015(endpoint: str) -> bytes:
    client = await wait(rs2015_connect(endpoint, reactor=reactor))
    try:
        return (await wait(client.request_response(Payload(b"rs2015")))).data
    finally:
        await client.close()


CLIENTS = {
    # RSocket connect(): every TLS string and URI form, host names and IP addresses
    "rsocket tls://": (_rsocket, "tls://localhost:{port}?trustRoots={ca}", b"rsocket"),
    "rsocket tls:": (_rsocket, "tls:host=127.0.0.1:port={port}:trustRoots={ca_dir}", b"rsocket"),
    "rsocket tls: endpoint=": (
        _rsocket, "tls:host=localhost:port={port}:trustRoots={ca_dir}"
                  ":endpoint=tcp\\:127.0.0.1\\:{port}", b"rsocket"),
    "rsocket wss://": (_rsocket, "wss://localhost:{port}/rs?trustRoots={ca}", b"rsocket"),
    "rsocket wss:": (_rsocket, "wss:host=127.0.0.1:port={port}:path=/rs:trustRoots={ca}",
                     b"rsocket"),
    # the other protocols' clients, over their URIs and a Twisted string
    "jini jini+tls://": (_jini, "jini+tls://localhost:{port}?trustRoots={ca}", b"jini"),
    "jini tls:": (_jini, "tls:host=localhost:port={port}:trustRoots={ca_dir}", b"jini"),
    "rsnet rsnet+tls://": (_rsnet, "rsnet+tls://127.0.0.1:{port}?trustRoots={ca}", b"012"),
    "rsnet rsnet+wss://": (_rsnet, "rsnet+wss://localhost:{port}/rsnet?trustRoots={ca}",
                           b"012"),
    "rs2015 rs2015+tls://": (_rs2015, "rs2015+tls://localhost:{port}?trustRoots={ca}",
                             b"rs2015"),
    "rs2015 rs2015+wss://": (_rs2015, "rs2015+wss://127.0.0.1:{port}/?trustRoots={ca}",
                             b"rs2015"),
}


def _endpoint(template: str, server: Server, certs) -> str:
    return template.format(port=server.port.getHost().port, ca=certs.ca, ca_dir=certs.ca_dir)


def _host(endpoint: str) -> str:
    return "127.0.0.1" if "127.0.0.1" in endpoint.split("endpoint=")[0] else "localhost"


def _check_refusal(error: BaseException, kind: str, host: str) -> None:
    """``error`` is the :class:`TLSVerificationError` for certificate ``kind`` and ``host``."""
    assert isinstance(error, TLSVerificationError), repr(error)
    message = str(error)
    assert message.startswith("TLS verification failed: "), message
    if kind == "no-san":
        assert message.startswith(
            "TLS verification failed: the server's certificate has no subjectAltName, so it "
            f"names no host and cannot be verified for {host}: "), message
    else:
        assert message == (
            "TLS verification failed: the server's certificate does not name the host "
            f"connected to ({host}): connect with a name the certificate lists")


@pytest.mark.parametrize("client", list(CLIENTS))
@aio
async def test_every_client_verifies_the_host_name(server, certs, client):
    attempt, template, expected = CLIENTS[client]
    endpoint = _endpoint(template, server, certs)
    if server.kind == "good":
        assert await attempt(endpoint) == expected
        return
    try:
        result = await attempt(endpoint)
    except Exception as e:  # noqa: BLE001 - checked below: the TLSVerificationError itself
        error = e
    else:
        pytest.fail(f"{client} accepted the {server.kind} certificate and got {result!r}")
    _check_refusal(error, server.kind, _host(endpoint))


async def _first_outcome(client) -> ReconnectState:
    """The state the reconnecting ``client`` reaches after its first attempt."""
    if client.state in (ReconnectState.CONNECTED, ReconnectState.BACKING_OFF,
                        ReconnectState.FAILED):
        return client.state
    reached: defer.Deferred = defer.Deferred()

    def observe(_, state: ReconnectState) -> None:
        if state is not ReconnectState.CONNECTING and not reached.called:
            reached.callback(state)

    client.add_observer(observe)
    try:
        return await wait(reached)
    finally:
        client.remove_observer(observe)


@aio
async def test_reconnecting_client_verifies_the_host_name(server, certs):
    endpoint = _endpoint("tls://localhost:{port}?trustRoots={ca}", server, certs)
    client = connect_reconnecting(
        endpoint, reactor=reactor,
        retry_if=lambda error: not isinstance(error, TLSVerificationError))
    try:
        state = await _first_outcome(client)
        if server.kind == "good":
            assert state is ReconnectState.CONNECTED
            assert (await wait(client.request_response(Payload(b"r")))).data == b"r"
        else:
            assert state is ReconnectState.FAILED  # retry_if: not worth retrying
            _check_refusal(client.last_error, server.kind, "localhost")
    finally:
        await wait(client.close(0))


@aio
async def test_load_balancing_client_verifies_the_host_name(server, certs):
    endpoint = _endpoint("tls:host=localhost:port={port}:trustRoots={ca_dir}", server, certs)
    balancer = LoadbalanceRSocket([endpoint], reactor=reactor)
    try:
        target = balancer.target(endpoint)
        state = await _first_outcome(target.client)
        if server.kind == "good":
            assert state is ReconnectState.CONNECTED
            assert (await wait(balancer.request_response(Payload(b"lb")))).data == b"lb"
        else:
            assert state is ReconnectState.BACKING_OFF
            assert not target.available
            _check_refusal(target.client.last_error, server.kind, "localhost")
    finally:
        await wait(balancer.close(0))


# -- the rsocket-tx commands -------------------------------------------------------------------

COMMANDS = {
    "rsocket": (["request", "tls://localhost:{port}?trustRoots={ca}", "-d", "hi"], b"hi\n"),
    "rsocket wss:": (["request", "wss:host=localhost:port={port}:path=/:trustRoots={ca}", "-d",
                      "hi"], b"hi\n"),
    "jini": (["jini", "request", "jini+tls://localhost:{port}?trustRoots={ca}", "hi"], b"hi\n"),
    "rsnet": (["rsnet", "subscribe", "rsnet+tls://localhost:{port}?trustRoots={ca}", "count/3"],
              b"0\n1\n2\n"),
    "rs2015": (["rs2015", "request", "rs2015+tls://localhost:{port}?trustRoots={ca}", "hi"],
               b"hi\n"),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@aio
async def test_every_command_verifies_the_host_name(server, certs, command):
    argv, expected = COMMANDS[command]
    result = await run_command([_endpoint(arg, server, certs) for arg in argv])
    if server.kind == "good":
        assert (result.status, result.out) == (EXIT_OK, expected), result.err
        return
    assert (result.status, result.out) == (EXIT_CONNECTION, b""), result.err
    if server.kind == "no-san":
        assert "the server's certificate has no subjectAltName" in result.err
        assert "cannot be verified for localhost" in result.err
    else:
        assert "does not name the host connected to (localhost)" in result.err
    assert "Traceback" not in result.err


# -- the check itself ----------------------------------------------------------------------------


def _certificate(path: str) -> x509.Certificate:
    with open(path, "rb") as f:
        return x509.load_pem_x509_certificate(f.read())


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "::1"])
def test_identity_of_each_certificate(certs, host):
    options = HostnameVerifyingOptions(host, trust_root(certs.ca))
    assert options.identity_error(_certificate(certs.server_cert)) is None
    no_san = options.identity_error(_certificate(certs.no_san_cert))
    _check_refusal(no_san, "no-san", host)
    _check_refusal(options.identity_error(_certificate(certs.wrong_host_cert)), "wrong-name",
                   host)


def test_any_exception_of_the_check_refuses_the_certificate(certs, monkeypatch):
    """Whatever service_identity raises -- not only its VerificationError -- is a refusal
    with the reason, never an acceptance."""
    from rsocket_tx.transports import tls

    def broken(certificate, hostname):
        raise RuntimeError("idna is not installed")

    monkeypatch.setattr(tls, "verify_certificate_hostname", broken)
    error = HostnameVerifyingOptions("localhost", trust_root(certs.ca)).identity_error(
        _certificate(certs.server_cert))
    assert isinstance(error, TLSVerificationError)
    assert str(error) == ("TLS verification failed: the server's certificate cannot be "
                          "verified for localhost: RuntimeError: idna is not installed")
    assert isinstance(error.reason, RuntimeError)


@aio
async def test_any_exception_of_the_check_fails_the_handshake(certs, monkeypatch):
    """End to end: the check raising something unexpected fails connect() with the reason
    (Twisted's own callback would log it as critical and accept the certificate)."""
    from rsocket_tx.transports import tls

    def broken(certificate, hostname):
        raise RuntimeError("idna is not installed")

    monkeypatch.setattr(tls, "verify_certificate_hostname", broken)
    server = Server(certs, "good")
    await server.start()
    try:
        with pytest.raises(TLSVerificationError, match=r"cannot be verified for localhost: "
                                                       r"RuntimeError: idna is not installed"):
            await _rsocket(f"tls://localhost:{server.port.getHost().port}?trustRoots={certs.ca}")
    finally:
        await server.stop()


def test_a_host_name_is_required():
    with pytest.raises(ValueError, match="needs the host name"):
        HostnameVerifyingOptions("", trust_root(None))


def test_ssl_client_strings_are_refused():
    """Twisted's ``ssl:`` client string never checks the host name: refused, with the fix."""
    with pytest.raises(ValueError, match=r"ssl: client strings do not verify the server's "
                                         r"host name; write tls:host=HOST:port=PORT"):
        client_endpoint(reactor, "ssl:host=localhost:port=7879")


def test_split_description_follows_twisteds_grammar():
    assert split_description("tls:host=h\\:x:port=1:k=v=w:pos") == (
        ["tls", "pos"], {"host": "h:x", "port": "1", "k": "v=w"})
    assert split_description("tls") == (["tls"], {})


@pytest.mark.parametrize(("spec", "message"), [
    ("tls:host=localhost", "missing port"),
    ("tls:port=1", "missing host"),
    ("tls:host=localhost:port=1:sslmethod=x", r"unknown parameter\(s\) sslmethod"),
    ("tls:host=localhost:port=1:trustRoots=/no/such.pem", "cannot read the certificate file"),
    ("tls:localhost:1:2", "too many positional parameters"),
])
def test_tls_client_string_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        client_endpoint(reactor, spec)
