"""Test certificates made at test time: a CA, server and client certificates it signs (also a
server certificate for another name and one without a subjectAltName), and a second CA nobody
trusts. Nothing private is committed: every key is generated per run.

EC P-256 keys (fast to make); certificates valid from one day ago to 30 days ahead.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Issuer", "TLSFiles", "make_ca", "make_tls_files"]


@dataclass
class Issuer:
    """A certificate and its private key (a CA or a leaf)."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def key_pem(self) -> bytes:
        return self.key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _builder(subject: str, issuer: x509.Name, public_key) -> x509.CertificateBuilder:
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(_name(subject))
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
    )


def make_ca(common_name: str = "rsocket_tx test CA") -> Issuer:
    """A self-signed CA certificate (basicConstraints CA:true, keyCertSign)."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        _builder(common_name, _name(common_name), key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return Issuer(cert, key)


def make_leaf(ca: Issuer, common_name: str, *, hosts: tuple[str, ...] = (),
              client: bool = False) -> Issuer:
    """A certificate signed by ``ca``: a server certificate for ``hosts`` (DNS names or IP
    addresses, as subjectAltName), or with ``client`` a client certificate."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = _builder(common_name, ca.cert.subject, key.public_key()).add_extension(
        x509.BasicConstraints(ca=False, path_length=None), critical=True
    )
    names = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    usage = ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH
    builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    builder = builder.add_extension(
        x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
    )
    return Issuer(builder.sign(ca.key, hashes.SHA256()), key)


@dataclass
class TLSFiles:
    """Paths (str) of PEM files written by :func:`make_tls_files`."""

    ca: str  #: the test CA's certificate
    server_cert: str  #: for localhost and 127.0.0.1, signed by the CA
    server_key: str
    server_combined: str  #: server key and certificate in one file
    client_cert: str  #: a client certificate signed by the CA
    client_key: str
    other_ca: str  #: a CA that signed nothing here (the "wrong CA")
    rogue_client_cert: str  #: a client certificate signed by the other CA
    rogue_client_key: str
    wrong_host_cert: str  #: signed by the CA, for "other.example" only
    wrong_host_key: str
    no_san_cert: str  #: signed by the CA, no subjectAltName, subject CN "localhost"
    no_san_key: str
    ca_dir: str  #: a directory holding ca.pem (the directory form of trustRoots)


def make_tls_files(directory) -> TLSFiles:
    """Generate the CAs, keys and certificates into ``directory`` (created if missing)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    ca = make_ca()
    other = make_ca("rsocket_tx untrusted test CA")
    server = make_leaf(ca, "localhost", hosts=("localhost", "127.0.0.1", "::1"))
    client = make_leaf(ca, "test client", client=True)
    rogue = make_leaf(other, "rogue client", client=True)
    wrong = make_leaf(ca, "other.example", hosts=("other.example",))
    # what `openssl req -x509 -subj /CN=localhost` makes: a name in the CN only, which RFC
    # 6125 clients must not use
    no_san = make_leaf(ca, "localhost")

    def write(name: str, data: bytes) -> str:
        path = d / name
        path.write_bytes(data)
        return str(path)

    (d / "cas").mkdir(exist_ok=True)
    return TLSFiles(
        ca=write("ca.pem", ca.cert_pem()),
        server_cert=write("server.crt", server.cert_pem()),
        server_key=write("server.key", server.key_pem()),
        server_combined=write("server.pem", server.key_pem() + server.cert_pem()),
        client_cert=write("client.crt", client.cert_pem()),
        client_key=write("client.key", client.key_pem()),
        other_ca=write("other-ca.pem", other.cert_pem()),
        rogue_client_cert=write("rogue.crt", rogue.cert_pem()),
        rogue_client_key=write("rogue.key", rogue.key_pem()),
        wrong_host_cert=write("wrong-host.crt", wrong.cert_pem()),
        wrong_host_key=write("wrong-host.key", wrong.key_pem()),
        no_san_cert=write("no-san.crt", no_san.cert_pem()),
        no_san_key=write("no-san.key", no_san.key_pem()),
        ca_dir=str(Path(write("cas/ca.pem", ca.cert_pem())).parent),
    )
