"""TLS for RSocket: server and client endpoints on Twisted's TLS machinery.

Everything here is built from :mod:`twisted.internet.ssl` (``CertificateOptions``,
``optionsForClientTLS``, ``PrivateCertificate``, ``trustRootFromCertificates``,
``platformTrust``) and :func:`twisted.internet.endpoints.wrapServerTLS` /
:func:`~twisted.internet.endpoints.wrapClientTLS`, i.e. pyOpenSSL with service_identity
hostname checks. See ``docs/transports.rst`` for the endpoint strings and URIs that use it.

* A client verifies the server's certificate chain and that its subjectAltName names the
  host connected to (DNS name or IP address, RFC 6125) -- always, and any failure of that
  check fails the handshake (:class:`HostnameVerifyingOptions`: a certificate without a
  subjectAltName is refused, where Twisted's own check logs a traceback and accepts it);
  the trust roots are the platform's (the system CA store) unless a CA file is given.
* A server may require client certificates signed by a CA of its own (mutual TLS).
* A failed handshake is reported as :class:`TLSVerificationError` or :class:`TLSError` with
  a sentence that says what went wrong, instead of OpenSSL's tuple of strings.
"""

from __future__ import annotations

import ipaddress
import re
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography import x509
from OpenSSL import SSL, crypto
from service_identity.cryptography import (
    verify_certificate_hostname,
    verify_certificate_ip_address,
)
from service_identity.exceptions import VerificationError
from twisted.internet import ssl
from twisted.internet.endpoints import (
    HostnameEndpoint,
    TCP4ServerEndpoint,
    TCP6ServerEndpoint,
    wrapClientTLS,
    wrapServerTLS,
)
from twisted.internet.interfaces import (
    IOpenSSLClientConnectionCreator,
    IStreamClientEndpoint,
    IStreamServerEndpoint,
)
from twisted.python.failure import Failure
from zope.interface import implementer

from ..core.errors import ConnectionLostError
from .limits import DEFAULT_BACKLOG

if TYPE_CHECKING:  # pragma: no cover
    from _typeshed import StrPath
    from twisted.internet._sslverify import IOpenSSLTrustRoot  # (not in interfaces)
    from twisted.protocols.tls import TLSMemoryBIOProtocol
    from twisted.python.filepath import FilePath

__all__ = [
    "TLSError",
    "TLSVerificationError",
    "load_certificates",
    "load_private_certificate",
    "trust_root",
    "server_options",
    "client_options",
    "HostnameVerifyingOptions",
    "tls_server_endpoint",
    "tls_client_endpoint",
    "tls_error",
]


class TLSError(ConnectionLostError):
    """The TLS handshake (or the TLS layer) failed, so the RSocket connection could not start
    or was lost. ``message`` says why in words; ``reason`` keeps the original exception
    (an :class:`OpenSSL.SSL.Error` or a ``service_identity`` ``VerificationError``)."""

    def __init__(self, message: str, reason: BaseException | None = None) -> None:
        super().__init__(message)
        self.reason = reason

    def __str__(self) -> str:
        return self.message


class TLSVerificationError(TLSError):
    """Certificate verification failed: the peer's certificate is not signed by a trusted CA
    (or expired), does not name the host connected to, or the peer refused ours (mutual
    TLS). Retrying does not help: the configuration must change."""


# -- loading files ------------------------------------------------------------------------------

_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)


def _read(path: StrPath, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise ValueError(f"cannot read the {what} file {str(path)!r}: {e.strerror or e}") from None


def load_certificates(path: StrPath) -> list[ssl.Certificate]:
    """Load CA certificates (PEM).

    :param path: a file holding one or more PEM certificates, or a directory whose ``*.pem``
        files each hold one or more (str or :class:`pathlib.Path`).
    :returns: the certificates (at least one).
    :raises ValueError: the path cannot be read or holds no PEM certificate.
    """
    p = Path(path)
    files = sorted(p.glob("*.pem")) if p.is_dir() else [p]
    certificates = []
    for f in files:
        data = _read(f, "certificate")
        for pem in _PEM_CERT.findall(data):
            try:
                certificates.append(ssl.Certificate.loadPEM(pem))
            except Exception as e:  # OpenSSL.crypto.Error and friends
                raise ValueError(f"invalid PEM certificate in {str(f)!r}: {e}") from None
    if not certificates:
        where = f"directory {str(p)!r} (*.pem)" if p.is_dir() else f"file {str(p)!r}"
        raise ValueError(f"no PEM certificate found in the {where}")
    return certificates


def load_private_certificate(private_key: StrPath,
                             certificate: StrPath | None = None) -> ssl.PrivateCertificate:
    """Load a certificate and its private key (PEM).

    :param private_key: path of the PEM private key; it may also hold the certificate (and
        chain certificates after it).
    :param certificate: path of the PEM certificate; None: taken from ``private_key``.
    :returns: the :class:`twisted.internet.ssl.PrivateCertificate`.
    :raises ValueError: a file cannot be read, holds no certificate or key, or the key does
        not match the certificate.
    """
    key_pem = _read(private_key, "private key")
    cert_pem = key_pem if certificate is None else _read(certificate, "certificate")
    cert_source = private_key if certificate is None else certificate
    certs = _PEM_CERT.findall(cert_pem)
    if not certs:
        raise ValueError(f"no PEM certificate found in {str(cert_source)!r}")
    try:
        cert = ssl.Certificate.loadPEM(certs[0])
    except Exception as e:  # OpenSSL.crypto.Error
        raise ValueError(f"invalid PEM certificate in {str(cert_source)!r}: {e}") from None
    try:
        key = ssl.KeyPair.load(key_pem, crypto.FILETYPE_PEM)
    except Exception as e:  # OpenSSL.crypto.Error: not a key
        raise ValueError(f"no usable PEM private key in {str(private_key)!r}: {e}") from None
    try:
        private: ssl.PrivateCertificate = ssl.PrivateCertificate.fromCertificateAndKeyPair(
            cert, key)
    except Exception as e:
        raise ValueError(f"the private key {str(private_key)!r} does not belong to the "
                         f"certificate {str(cert_source)!r}: {e}") from None
    return private


def _chain(private_key: StrPath, certificate: StrPath | None) -> list[crypto.X509]:
    """Intermediate certificates following the leaf in the certificate file."""
    source = private_key if certificate is None else certificate
    pems = _PEM_CERT.findall(_read(source, "certificate"))[1:]
    return [ssl.Certificate.loadPEM(pem).original for pem in pems]


def trust_root(path: StrPath | None = None) -> IOpenSSLTrustRoot:
    """The trust root a client verifies servers with.

    :param path: CA certificates (see :func:`load_certificates`); None: the platform's trust
        store (:func:`twisted.internet.ssl.platformTrust`, i.e. the system CA bundle).
    :returns: an ``IOpenSSLTrustRoot``.
    :raises ValueError: as :func:`load_certificates`.
    """
    if path is None:
        platform: IOpenSSLTrustRoot = ssl.platformTrust()
        return platform
    given: IOpenSSLTrustRoot = ssl.trustRootFromCertificates(load_certificates(path))
    return given


# -- options -------------------------------------------------------------------------------------


def server_options(private_key: StrPath, certificate: StrPath | None = None, *,
                   ca_certs: StrPath | None = None, extra_cert_chain: StrPath | None = None,
                   dh_parameters: StrPath | None = None) -> ssl.CertificateOptions:
    """TLS settings of a server.

    :param private_key: path of the PEM private key (may also hold the certificate and its
        chain).
    :param certificate: path of the PEM certificate, maybe followed by intermediate CA
        certificates; None: in ``private_key``.
    :param ca_certs: mutual TLS: path of CA certificates (file or directory, see
        :func:`load_certificates`); a client must then present a certificate signed by one
        of them or the handshake fails. None: no client certificate asked for.
    :param extra_cert_chain: path of more intermediate certificates sent after ours.
    :param dh_parameters: path of Diffie-Hellman parameters (PEM) for DHE ciphers.
    :returns: a :class:`twisted.internet.ssl.CertificateOptions` (TLS 1.2 minimum, Twisted's
        defaults otherwise).
    :raises ValueError: a file cannot be read or is not what it should be.
    """
    private = load_private_certificate(private_key, certificate)
    chain = _chain(private_key, certificate)
    if extra_cert_chain is not None:
        chain += [c.original for c in load_certificates(extra_cert_chain)]
    kw: dict[str, Any] = {}
    if ca_certs is not None:
        kw["trustRoot"] = ssl.trustRootFromCertificates(load_certificates(ca_certs))
    if dh_parameters is not None:
        _read(dh_parameters, "DH parameters")
        kw["dhParameters"] = ssl.DiffieHellmanParameters.fromFile(_filepath(dh_parameters))
    # cryptography objects: pyOpenSSL deprecates passing its own X509 / PKey (Twisted takes
    # both; its annotation of extraCertChain names pyOpenSSL's X509 only)
    extra_chain = [c.to_cryptography() for c in chain] or None
    return ssl.CertificateOptions(privateKey=private.privateKey.original.to_cryptography_key(),
                                  certificate=private.original.to_cryptography(),
                                  extraCertChain=extra_chain,  # type: ignore[arg-type]
                                  **kw)


def _filepath(path: StrPath) -> FilePath[str]:
    from twisted.python.filepath import FilePath

    return FilePath(str(path))


def client_options(hostname: str, *, trust_roots: StrPath | None = None,
                   certificate: StrPath | None = None,
                   private_key: StrPath | None = None) -> HostnameVerifyingOptions:
    """TLS settings of a client: verify the server's certificate and that it names
    ``hostname``.

    :param hostname: the host name (or IP address) the certificate must name.
    :param trust_roots: path of the CA certificates to trust (file or directory); None: the
        platform's trust store.
    :param certificate: path of our PEM certificate, for servers that require one (mutual
        TLS); with ``private_key`` (else the key is looked for in this file).
    :param private_key: path of our PEM private key (may hold the certificate too).
    :returns: a :class:`HostnameVerifyingOptions` (an ``IOpenSSLClientConnectionCreator``).
    :raises ValueError: a file cannot be read, a private key without a certificate, or
        ``hostname`` is empty.
    """
    extra: dict[str, Any] = {}
    if certificate is not None or private_key is not None:
        key_file = private_key or certificate
        assert key_file is not None  # (one of the two is given)
        client_cert = load_private_certificate(key_file,
                                               certificate if private_key else None)
        extra = {"privateKey": client_cert.privateKey.original.to_cryptography_key(),
                 "certificate": client_cert.original.to_cryptography()}
    return HostnameVerifyingOptions(hostname, trust_root(trust_roots), extra)


@implementer(IOpenSSLClientConnectionCreator)
class HostnameVerifyingOptions:
    """Client TLS options that verify the server's certificate chain and host name, and
    fail the handshake when either check fails -- for whatever reason.

    The connections come from :func:`twisted.internet.ssl.optionsForClientTLS` (trust
    root, SNI, client certificate), but the host-name check is our own verify callback:
    Twisted's turns only a ``service_identity`` ``VerificationError`` into a failed
    handshake and merely logs anything else and accepts the certificate -- notably the
    ``CertificateError`` a certificate without a subjectAltName raises. Ours refuses the
    certificate on any exception and aborts the handshake with a
    :class:`TLSVerificationError` that names the host and the reason (RFC 6125 §6: the
    reference identity is checked against the subjectAltName only; the subject's common
    name is never used).

    :param hostname: the DNS name or IP address the server's certificate must name.
    :param trust_root: an ``IOpenSSLTrustRoot`` (see :func:`trust_root`).
    :param extra: more :class:`twisted.internet.ssl.CertificateOptions` arguments (our
        client certificate and key).
    :raises ValueError: ``hostname`` is empty.
    """

    def __init__(self, hostname: str, trust_root: IOpenSSLTrustRoot,
                 extra: dict[str, Any] | None = None) -> None:
        if not hostname:
            raise ValueError("a TLS client needs the host name (or IP address) the server's "
                             "certificate must name")
        self.hostname = hostname
        self._options: IOpenSSLClientConnectionCreator = ssl.optionsForClientTLS(
            hostname, trustRoot=trust_root, extraCertificateOptions=extra or None)
        try:
            self._ip: str | None = str(ipaddress.ip_address(hostname))
        except ValueError:
            self._ip = None

    def clientConnectionForTLS(self, tlsProtocol: TLSMemoryBIOProtocol) -> SSL.Connection:
        """Create the :class:`OpenSSL.SSL.Connection` for ``tlsProtocol`` (a
        :class:`twisted.protocols.tls.TLSMemoryBIOProtocol`), with our verify callback in
        place of Twisted's."""
        connection = self._options.clientConnectionForTLS(tlsProtocol)
        protocol = weakref.ref(tlsProtocol)

        def verify(conn: SSL.Connection, cert: crypto.X509, errno: int, depth: int,
                   ok: int) -> bool:
            # An exception escaping an OpenSSL callback is lost or re-raised out of
            # context (and Twisted's callback logs it and accepts the certificate): every
            # one is a refusal here.
            try:
                if not ok:
                    return False  # the chain: OpenSSL reports why ("certificate verify failed")
                if depth != 0:
                    return True  # the host name is checked on the server's own certificate
                error = self.identity_error(cert.to_cryptography())
            except BaseException as e:  # noqa: BLE001 - a refusal, reported below
                error = self._error(e)
            if error is None:
                return True
            tls = protocol()
            if tls is not None:
                tls.failVerification(Failure(error))
            return False

        connection.set_verify(SSL.VERIFY_PEER | SSL.VERIFY_FAIL_IF_NO_PEER_CERT, verify)
        return connection

    def identity_error(self, certificate: x509.Certificate) -> TLSVerificationError | None:
        """Check that ``certificate`` names our host.

        :param certificate: a :class:`cryptography.x509.Certificate`.
        :returns: None if it does, else the :class:`TLSVerificationError` saying why not
            (no subjectAltName, another name, a malformed name, any exception of
            ``service_identity``).
        """
        try:
            certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
        except x509.ExtensionNotFound:
            return TLSVerificationError(
                "TLS verification failed: the server's certificate has no subjectAltName, so "
                f"it names no host and cannot be verified for {self.hostname}: the server "
                "needs a certificate whose subjectAltName lists the names clients connect "
                "with (the subject's common name is not used)")
        except Exception as e:  # noqa: BLE001 - e.g. a malformed extension
            return self._error(e)
        try:
            if self._ip is not None:
                verify_certificate_ip_address(certificate, self._ip)
            else:
                verify_certificate_hostname(certificate, self.hostname)
        except Exception as e:  # noqa: BLE001 - every failure refuses the certificate
            return self._error(e)
        return None

    def _error(self, e: BaseException) -> TLSVerificationError:
        if isinstance(e, VerificationError):
            return _mismatch_error(e, [self.hostname])
        try:
            why = f"{type(e).__name__}: {e}"
        except Exception:  # noqa: BLE001 - an exception whose str() fails still refuses
            why = type(e).__name__
        return TLSVerificationError(
            f"TLS verification failed: the server's certificate cannot be verified for "
            f"{self.hostname}: {why}", e)


# -- endpoints ---------------------------------------------------------------------------------


def tls_server_endpoint(reactor: Any, port: int, *, private_key: StrPath,
                        certificate: StrPath | None = None, ca_certs: StrPath | None = None,
                        interface: str = "", backlog: int = DEFAULT_BACKLOG,
                        extra_cert_chain: StrPath | None = None,
                        dh_parameters: StrPath | None = None) -> IStreamServerEndpoint:
    """A TLS server endpoint over TCP (:func:`~twisted.internet.endpoints.wrapServerTLS`).

    :param port: TCP port (0: a free one).
    :param interface: address to listen on; "" every IPv4 interface; an IPv6 address listens
        on IPv6.
    :param backlog: listen queue length (default 1024).
    :param private_key: and the other parameters: see :func:`server_options`.
    :raises ValueError: a bad file (see :func:`server_options`).
    """
    options = server_options(private_key, certificate, ca_certs=ca_certs,
                             extra_cert_chain=extra_cert_chain, dh_parameters=dh_parameters)
    return wrapServerTLS(options, tcp_server_endpoint(reactor, port, interface, backlog))


def tcp_server_endpoint(reactor: Any, port: int, interface: str = "",
                        backlog: int = DEFAULT_BACKLOG) -> IStreamServerEndpoint:
    """A TCP server endpoint: IPv6 when ``interface`` is an IPv6 address, else IPv4."""
    try:
        v6 = bool(interface) and ipaddress.ip_address(interface).version == 6
    except ValueError:
        v6 = False  # a host name: bound as IPv4
    cls = TCP6ServerEndpoint if v6 else TCP4ServerEndpoint
    return cls(reactor, port, backlog=backlog, interface=interface)


def tls_client_endpoint(reactor: Any, host: str, port: int, *,
                        trust_roots: StrPath | None = None, certificate: StrPath | None = None,
                        private_key: StrPath | None = None, timeout: float = 30,
                        bind_address: str | None = None) -> IStreamClientEndpoint:
    """A TLS client endpoint (:func:`~twisted.internet.endpoints.wrapClientTLS` around a
    :class:`~twisted.internet.endpoints.HostnameEndpoint`), verifying the server's
    certificate and host name.

    :param host: host name or IP address to connect to and to verify.
    :param port: TCP port.
    :param timeout: seconds per connection attempt.
    :param bind_address: local address to connect from.
    :param trust_roots: and the other parameters: see :func:`client_options`.
    :raises ValueError: a bad file (see :func:`client_options`).
    """
    options = client_options(host, trust_roots=trust_roots, certificate=certificate,
                             private_key=private_key)
    bind = None if bind_address is None else (bind_address, 0)
    return wrapClientTLS(options, HostnameEndpoint(reactor, host, port, timeout=timeout,
                                                   bindAddress=bind))


# -- failures ------------------------------------------------------------------------------------

#: OpenSSL reason strings (lower case) -> what they mean, for :func:`tls_error`.
_PEER_REJECTED = {
    "certificate required": "the server requires a client certificate and none was sent",
    "unknown ca": "the peer does not trust the CA that signed our certificate",
    "bad certificate": "the peer rejected our certificate",
    "certificate unknown": "the peer rejected our certificate",
    "certificate expired": "the peer says our certificate has expired",
    "certificate revoked": "the peer says our certificate is revoked",
    "unsupported certificate": "the peer does not accept our kind of certificate",
    "access denied": "the peer refused access",
}


def _openssl_reasons(error: BaseException) -> list[str]:
    reasons = []
    for item in getattr(error, "args", ())[:1]:
        if isinstance(item, list):
            for entry in item:
                if isinstance(entry, tuple) and entry:
                    reasons.append(str(entry[-1]))
    return reasons or [str(error)]


def _mismatch_error(error: VerificationError,
                    default: Sequence[str] = ()) -> TLSVerificationError:
    """The sentence for ``service_identity``'s ``VerificationError`` (no name matched)."""
    names = []
    for mismatch in error.errors:
        ident = getattr(mismatch, "mismatched_id", None)
        name = getattr(ident, "hostname", None) or getattr(ident, "ip", None)
        if isinstance(name, bytes):
            name = name.decode("ascii", "replace")
        names.append(str(name) if name is not None else repr(mismatch))
    return TLSVerificationError(
        "TLS verification failed: the server's certificate does not name the host "
        f"connected to ({', '.join(names or default)}): connect with a name the certificate "
        "lists", error)


def tls_error(reason: BaseException | Failure | None) -> TLSError | None:
    """Describe a TLS failure in words.

    :param reason: a :class:`~twisted.python.failure.Failure` or exception from a connection
        that was lost.
    :returns: a :class:`TLSVerificationError` (certificate or host name rejected, by us or by
        the peer), a :class:`TLSError` (another TLS failure), or None if ``reason`` is not a
        TLS failure.
    """
    if isinstance(reason, Failure):
        reason = reason.value
    if isinstance(reason, TLSError):
        return reason
    inner = getattr(reason, "reason", None)  # e.g. a WebSocket handshake error keeping it
    if isinstance(inner, (BaseException, Failure)) and inner is not reason:
        return tls_error(inner)
    if isinstance(reason, VerificationError):
        return _mismatch_error(reason)
    if not isinstance(reason, SSL.Error):
        return None
    reasons = _openssl_reasons(reason)
    text = "; ".join(reasons)
    low = text.lower()
    if "certificate verify failed" in low:
        return TLSVerificationError(
            f"TLS verification failed: the peer's certificate is not trusted ({text}): it is "
            "not signed by a trusted CA (trustRoots / caCerts), has expired or is not valid "
            "yet", reason)
    if "peer did not return a certificate" in low:
        return TLSVerificationError(
            f"TLS verification failed: the client sent no certificate ({text})", reason)
    if "alert" in low:
        for key, meaning in _PEER_REJECTED.items():
            if key in low:
                return TLSVerificationError(f"TLS verification failed: {meaning} ({text})",
                                            reason)
    return TLSError(f"TLS failed: {text}", reason)
