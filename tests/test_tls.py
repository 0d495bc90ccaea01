"""TLS end to end on loopback: verified round trips through every TLS string and URI form,
clear errors when verification fails (wrong CA, wrong host name, no trust roots), mutual TLS
accepted with a client certificate and refused without one or with one of another CA; the
CLI over TLS. Certificates are generated at test time (tests/tlscerts.py)."""

from __future__ import annotations

import io

import pytest
import pytest_twisted
from tlscerts import make_tls_files
from twisted.internet import reactor
from twisted_support import EchoResponder, wait

from rsocket_tx import Payload, connect, serve
from rsocket_tx.core.errors import ConnectionLostError
from rsocket_tx.faces.cli import EXIT_CONNECTION, EXIT_OK
from rsocket_tx.faces.main import run
from rsocket_tx.transports.tls import (
    TLSError,
    TLSVerificationError,
    load_certificates,
    load_private_certificate,
    tls_error,
)


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("tls"))


class Servers:
    def __init__(self) -> None:
        self.ports: list = []

    async def serve(self, spec: str) -> int:
        port = await wait(serve(spec, EchoResponder, reactor=reactor))
        self.ports.append(port)
        return port.getHost().port

    async def close(self) -> None:
        for port in self.ports:
            await port.factory.close_connections(drain_timeout=0)
            await port.stopListening()


@pytest_twisted.async_yield_fixture
async def servers():
    s = Servers()
    yield s
    await s.close()


def _server_ssl(certs) -> str:
    return f"ssl:0:interface=127.0.0.1:privateKey={certs.server_key}:certKey={certs.server_cert}"


def _server_uri(certs, **extra) -> str:
    query = f"privateKey={certs.server_key}&certKey={certs.server_cert}"
    for k, v in extra.items():
        query += f"&{k}={v}"
    return f"tls://127.0.0.1:0?{query}"


async def _round_trip(endpoint: str) -> None:
    rsocket = await wait(connect(endpoint, reactor=reactor))
    try:
        response = await wait(rsocket.request_response(Payload(b"over tls", b"m")))
        assert response == Payload(b"over tls", b"m")
        items = await wait(rsocket.request_stream(Payload(b"3")).collect())
        assert [p.data for p in items] == [b"0", b"1", b"2"]
    finally:
        await rsocket.close()


# -- verified round trips ------------------------------------------------------------------------


@pytest.mark.parametrize("server_form", ["ssl", "uri", "uri-combined", "mtls-off"])
@pytest.mark.parametrize("client_form", ["twisted-tls", "uri-file", "uri-dir", "uri-localhost"])
@pytest_twisted.ensureDeferred
async def test_round_trip_every_form(certs, servers, server_form, client_form):
    if server_form == "ssl":
        spec = _server_ssl(certs)
    elif server_form == "uri":
        spec = _server_uri(certs)
    elif server_form == "uri-combined":
        spec = f"tls://127.0.0.1:0?privateKey={certs.server_combined}"
    else:  # Twisted's ssl: via a server endpoint object: the URI with backlog
        spec = _server_uri(certs, backlog="10")
    port = await servers.serve(spec)
    client = {
        "twisted-tls": f"tls:host=127.0.0.1:port={port}:trustRoots={certs.ca_dir}",
        "uri-file": f"tls://127.0.0.1:{port}?trustRoots={certs.ca}",
        "uri-dir": f"tls://127.0.0.1:{port}?trustRoots={certs.ca_dir}&timeout=5",
        "uri-localhost": f"tls://localhost:{port}?trustRoots={certs.ca}",
    }[client_form]
    await _round_trip(client)


# -- verification failures -------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_wrong_ca_fails_connect_with_a_clear_error(certs, servers):
    port = await servers.serve(_server_uri(certs))
    with pytest.raises(TLSVerificationError) as info:
        await wait(connect(f"tls://127.0.0.1:{port}?trustRoots={certs.other_ca}",
                           reactor=reactor))
    message = str(info.value)
    assert message.startswith("TLS verification failed: the peer's certificate is not trusted")
    assert "certificate verify failed" in message
    assert "[(" not in message  # not OpenSSL's bare tuple
    assert isinstance(info.value, ConnectionLostError)


@pytest_twisted.ensureDeferred
async def test_platform_trust_by_default_rejects_a_private_ca(certs, servers):
    """Without trustRoots the system store is used: our test CA is not in it."""
    port = await servers.serve(_server_uri(certs))
    with pytest.raises(TLSVerificationError, match="not trusted"):
        await wait(connect(f"tls://127.0.0.1:{port}", reactor=reactor))
    with pytest.raises(TLSVerificationError, match="not trusted"):
        await wait(connect(f"tls:host=127.0.0.1:port={port}", reactor=reactor))


@pytest_twisted.ensureDeferred
async def test_wrong_hostname_fails_with_a_clear_error(certs, servers):
    spec = (f"tls://127.0.0.1:0?privateKey={certs.wrong_host_key}"
            f"&certKey={certs.wrong_host_cert}")
    port = await servers.serve(spec)
    with pytest.raises(TLSVerificationError) as info:
        await wait(connect(f"tls://127.0.0.1:{port}?trustRoots={certs.ca}", reactor=reactor))
    assert str(info.value) == (
        "TLS verification failed: the server's certificate does not name the host connected "
        "to (127.0.0.1): connect with a name the certificate lists")
    with pytest.raises(TLSVerificationError, match=r"does not name the host .*\(localhost\)"):
        await wait(connect(f"tls:host=localhost:port={port}:trustRoots={certs.ca_dir}",
                           reactor=reactor))


@pytest_twisted.ensureDeferred
async def test_verification_failure_is_not_resumed(certs, servers):
    """A resumable client does not keep reconnecting after a verification failure."""
    port = await servers.serve(_server_uri(certs))
    with pytest.raises(TLSVerificationError):
        await wait(connect(f"tls://127.0.0.1:{port}?trustRoots={certs.other_ca}",
                           reactor=reactor, resume=True, reconnect_initial_delay=0))
    pending = [c for c in reactor.getDelayedCalls() if "_reconnect_now" in repr(c.func)]
    assert pending == []


# -- mutual TLS ----------------------------------------------------------------------------------


def _mtls_server(certs) -> list[str]:
    return [
        f"mtls:0:interface=127.0.0.1:privateKey={certs.server_key}:certKey={certs.server_cert}"
        f":caCerts={certs.ca}",
        _server_uri(certs, caCerts=certs.ca),
    ]


@pytest.mark.parametrize("form", [0, 1])
@pytest_twisted.ensureDeferred
async def test_mutual_tls_accepts_a_client_certificate(certs, servers, form):
    port = await servers.serve(_mtls_server(certs)[form])
    await _round_trip(f"tls://127.0.0.1:{port}?trustRoots={certs.ca}"
                      f"&certificate={certs.client_cert}&privateKey={certs.client_key}")
    await _round_trip(f"tls:host=127.0.0.1:port={port}:trustRoots={certs.ca_dir}"
                      f":certificate={certs.client_cert}:privateKey={certs.client_key}")


async def _refused(endpoint: str) -> TLSError:
    """Connect and make a request: TLS 1.3 lets the client finish its handshake before the
    server checks its certificate, so the refusal may come with connect() or right after."""
    try:
        rsocket = await wait(connect(endpoint, reactor=reactor))
    except TLSError as e:
        return e
    with pytest.raises(ConnectionLostError) as info:
        await wait(rsocket.request_response(Payload(b"x")))
    return info.value


@pytest_twisted.ensureDeferred
async def test_mutual_tls_refuses_a_client_without_certificate(certs, servers):
    port = await servers.serve(_mtls_server(certs)[0])
    error = await _refused(f"tls://127.0.0.1:{port}?trustRoots={certs.ca}")
    assert "TLS verification failed: the server requires a client certificate" in str(error)
    assert port in [p.getHost().port for p in servers.ports]
    assert not servers.ports[0].factory.connections  # no RSocket connection was accepted


@pytest_twisted.ensureDeferred
async def test_mutual_tls_refuses_a_certificate_of_another_ca(certs, servers):
    port = await servers.serve(_mtls_server(certs)[1])
    error = await _refused(f"tls://127.0.0.1:{port}?trustRoots={certs.ca}"
                           f"&certificate={certs.rogue_client_cert}"
                           f"&privateKey={certs.rogue_client_key}")
    assert "TLS verification failed: the peer does not trust the CA that signed our " \
           "certificate" in str(error)


# -- CLI -------------------------------------------------------------------------------------------


async def _cli(argv) -> tuple[int, bytes, str]:
    stdout, stderr = io.BytesIO(), io.StringIO()
    status = await wait(run(reactor, argv, stdin=io.BytesIO(), stdout=stdout, stderr=stderr),
                        timeout=30)
    return status, stdout.getvalue(), stderr.getvalue()


@pytest_twisted.ensureDeferred
async def test_cli_over_tls(certs, servers):
    port = await servers.serve(_mtls_server(certs)[0])
    status, out, err = await _cli([
        "request", f"tls://localhost:{port}?trustRoots={certs.ca}&certificate="
        f"{certs.client_cert}&privateKey={certs.client_key}", "-d", "hello"])
    assert (status, out) == (EXIT_OK, b"hello\n"), err
    status, out, err = await _cli([
        "stream", f"tls:host=127.0.0.1:port={port}:trustRoots={certs.ca_dir}:certificate="
        f"{certs.client_cert}:privateKey={certs.client_key}", "-d", "2"])
    assert (status, out) == (EXIT_OK, b"0\n1\n"), err


@pytest.mark.parametrize("scheme", ["ws", "wss"])
@pytest_twisted.ensureDeferred
async def test_cli_over_websocket(certs, servers, scheme):
    tls = f"?privateKey={certs.server_key}&certKey={certs.server_cert}" if scheme == "wss" else ""
    port = await servers.serve(f"{scheme}://127.0.0.1:0/rsocket{tls}")
    trust = f"?trustRoots={certs.ca}" if scheme == "wss" else ""
    status, out, err = await _cli(["request", f"{scheme}://localhost:{port}/rsocket{trust}",
                                   "-d", "hello", "-m", "meta"])
    assert (status, out) == (EXIT_OK, b"hello\n"), err
    string = f"{scheme}:host=localhost:port={port}:path=/rsocket" + (
        f":trustRoots={certs.ca}" if scheme == "wss" else "")
    status, out, err = await _cli(["stream", string, "-d", "3"])
    assert (status, out) == (EXIT_OK, b"0\n1\n2\n"), err
    status, out, err = await _cli(["request", f"{scheme}://localhost:{port}/elsewhere{trust}",
                                   "-d", "x"])
    assert status == EXIT_CONNECTION and "404" in err, err


@pytest_twisted.ensureDeferred
async def test_cli_reports_verification_failure(certs, servers):
    port = await servers.serve(_server_uri(certs))
    status, out, err = await _cli(["request", f"tls://127.0.0.1:{port}?trustRoots="
                                   f"{certs.other_ca}", "-d", "x"])
    assert status == EXIT_CONNECTION
    assert "TLS verification failed: the peer's certificate is not trusted" in err


# -- files and errors ------------------------------------------------------------------------------


def test_load_certificates_file_dir_and_errors(certs, tmp_path):
    assert len(load_certificates(certs.ca)) == 1
    assert len(load_certificates(certs.ca_dir)) == 1
    bundle = tmp_path / "bundle.pem"
    bundle.write_bytes(open(certs.ca, "rb").read() + open(certs.other_ca, "rb").read())
    assert len(load_certificates(bundle)) == 2
    with pytest.raises(ValueError, match="cannot read the certificate file"):
        load_certificates(tmp_path / "missing.pem")
    with pytest.raises(ValueError, match="no PEM certificate found"):
        load_certificates(certs.server_key)


def test_load_private_certificate_errors(certs):
    load_private_certificate(certs.server_combined)
    with pytest.raises(ValueError, match="does not belong to the certificate"):
        load_private_certificate(certs.client_key, certs.server_cert)
    with pytest.raises(ValueError, match="no PEM certificate"):
        load_private_certificate(certs.server_key)


@pytest.mark.parametrize("spec, message", [
    ("tls://127.0.0.1:1?trustRoots=/nonexistent.pem", "cannot read the certificate file"),
    ("tls://127.0.0.1:1?bogus=1", "unknown parameter 'bogus'"),
    ("tls://127.0.0.1:1?trustRoots=a&trustRoots=b", "given twice"),
    ("tls://127.0.0.1:1/path", "unexpected path"),
    ("tls://:1", "missing host"),
])
def test_client_uri_errors(spec, message):
    from rsocket_tx.transports.endpoints import client_endpoint

    with pytest.raises(ValueError, match=message):
        client_endpoint(reactor, spec)


def test_tls_error_of_other_failures():
    from OpenSSL import SSL

    error = tls_error(SSL.Error([("SSL routines", "", "wrong version number")]))
    assert type(error) is TLSError
    assert str(error) == "TLS failed: wrong version number"
    assert tls_error(ValueError("x")) is None


# -- WebSocket over TLS -------------------------------------------------------------------------


@pytest_twisted.ensureDeferred
async def test_wss_verification_failures_are_clear(certs, servers):
    port = await servers.serve(f"wss://127.0.0.1:0/rs?privateKey={certs.server_key}"
                               f"&certKey={certs.server_cert}")
    with pytest.raises(TLSVerificationError, match="the peer's certificate is not trusted"):
        await wait(connect(f"wss://127.0.0.1:{port}/rs?trustRoots={certs.other_ca}",
                           reactor=reactor))
    await _round_trip(f"wss://localhost:{port}/rs?trustRoots={certs.ca}")
    wrong = await servers.serve(f"wss:0:interface=127.0.0.1:path=/rs:privateKey="
                                f"{certs.wrong_host_key}:certKey={certs.wrong_host_cert}")
    with pytest.raises(TLSVerificationError, match=r"does not name the host .*\(localhost\)"):
        await wait(connect(f"wss:host=localhost:port={wrong}:path=/rs:trustRoots={certs.ca}",
                           reactor=reactor))
