"""Pieces shared by the orchestrator (``run.py``) and the per-implementation children.

Every implementation module (``impl_raw``, ``impl_rsocket_py``, ``impl_rsocket_tx``) is a small
program with two modes::

    python -m benchmarks.impl_X server          # prints "PORT <n>" (or "UNAVAILABLE <reason>")
    python -m benchmarks.impl_X client PORT SPEC  # SPEC: JSON workload spec, prints "RESULT <json>"

The application contract, identical for the three implementations:

* request-response: data ``b"count"`` -> reply with the decimal number of fire-and-forget
  messages this connection's server side has received so far; any other data -> echoed back.
* request-stream: data ``b"<n>:<size>"`` -> ``n`` items of ``size`` bytes each, then complete.
* fire-and-forget: the server counts it (per connection).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

COUNT_QUERY = b"count"

#: Transports every workload can run over: plain TCP, TLS over TCP, WebSocket (one message
#: per frame, no length prefix), WebSocket over TLS.
TRANSPORTS = ("tcp", "tls", "ws", "wss")
#: The URL path of every WebSocket server.
WS_PATH = "/rsocket"
#: The host name TLS clients verify (the throwaway certificate names it and 127.0.0.1).
TLS_HOST = "localhost"


def transport() -> str:
    """This child's transport (environment ``BENCH_TRANSPORT``; default tcp)."""
    return os.environ.get("BENCH_TRANSPORT") or "tcp"


def is_tls(kind: str) -> bool:
    return kind in ("tls", "wss")


def is_ws(kind: str) -> bool:
    return kind in ("ws", "wss")


def ws_url(port: int, kind: str) -> str:
    return f"{'wss' if kind == 'wss' else 'ws'}://{TLS_HOST}:{port}{WS_PATH}"


def tls_files() -> tuple[str, str]:
    """(certificate PEM path, private key PEM path) from the orchestrator's environment."""
    return os.environ["BENCH_TLS_CERT"], os.environ["BENCH_TLS_KEY"]


def make_tls_files(directory: str) -> tuple[str, str]:
    """Write a throwaway self-signed EC P-256 certificate for localhost and 127.0.0.1 and its
    key into ``directory``; return their paths (certificate, key). Made at run time: no key
    is ever committed."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, TLS_HOST)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName(TLS_HOST), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_path = os.path.join(directory, "bench-cert.pem")
    key_path = os.path.join(directory, "bench-key.pem")
    with open(cert_path, "wb") as f:
        f.write(cert.public_bytes(serialization.Encoding.PEM))
    with open(key_path, "wb") as f:
        f.write(key.private_bytes(serialization.Encoding.PEM,
                                  serialization.PrivateFormat.PKCS8,
                                  serialization.NoEncryption()))
    return cert_path, key_path


def twisted_tls_options():
    """(server options, client options) for Twisted TLS from :func:`tls_files`."""
    from twisted.internet import ssl

    cert_path, key_path = tls_files()
    with open(cert_path, "rb") as f:
        cert = f.read()
    with open(key_path, "rb") as f:
        key = f.read()
    server = ssl.PrivateCertificate.loadPEM(key + cert).options()
    client = ssl.optionsForClientTLS(TLS_HOST, trustRoot=ssl.Certificate.loadPEM(cert))
    return server, client


def twisted_server_endpoint(reactor, kind: str):
    """The TCP or TLS server endpoint on a free loopback port (the stream under WS too)."""
    from twisted.internet.endpoints import SSL4ServerEndpoint, TCP4ServerEndpoint

    if is_tls(kind):
        return SSL4ServerEndpoint(reactor, 0, twisted_tls_options()[0], interface="127.0.0.1")
    return TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1")


def twisted_client_endpoint(reactor, port: int, kind: str):
    """The TCP or TLS client endpoint to the loopback ``port`` (the stream under WS too)."""
    from twisted.internet.endpoints import TCP4ClientEndpoint, wrapClientTLS

    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    if is_tls(kind):
        endpoint = wrapClientTLS(twisted_tls_options()[1], endpoint)
    return endpoint


def asyncio_ssl_contexts():
    """(server SSLContext, client SSLContext) for asyncio from :func:`tls_files`."""
    import ssl

    cert_path, key_path = tls_files()
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(cert_path, key_path)
    client = ssl.create_default_context(cafile=cert_path)
    return server, client


def stream_request(n: int, size: int) -> bytes:
    """Request data of the stream workloads: ``b"<n>:<size>"``."""
    return b"%d:%d" % (n, size)


def parse_stream_request(data: bytes) -> tuple[int, int]:
    n, _, size = bytes(data).partition(b":")
    return int(n), int(size)


@dataclass
class Spec:
    """One workload as handed to a client child (JSON on the command line)."""

    name: str
    kind: str  # "rr" | "stream" | "fnf"
    count: int  # upper bound of operations (requests, items, messages) per measured run
    size: int  # payload bytes per operation
    inflight: int = 1  # rr: outstanding requests
    prefetch: int = 256  # stream: request-n window
    budget: float = 5.0  # seconds: stop issuing new work after this, report what completed
    warmup: int = 0  # operations before the measured runs (not reported)
    repeat: int = 1  # measured runs on the same connection

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Spec:
        return cls(**json.loads(text))


@dataclass
class RunResult:
    ops: int = 0  # completed operations (responses, stream items, fnf acknowledged by server)
    nbytes: int = 0  # payload bytes moved (responses / items / messages)
    seconds: float = 0.0
    complete: bool = True  # False: stopped by the time budget before ``count``
    extra: dict = field(default_factory=dict)


class Deadline:
    """Soft time budget of a measured run."""

    __slots__ = ("start", "end")

    def __init__(self, budget: float):
        self.start = time.perf_counter()
        self.end = self.start + budget

    def passed(self) -> bool:
        return time.perf_counter() >= self.end

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


class RequestResponseLoad:
    """The "rr" workload's shared counters: ``worker(request_response, request)`` coroutines
    (``spec.inflight`` of them) issue requests until ``count`` are issued or the deadline
    passes (checked every 64 replies); ``result()`` is the measured run."""

    def __init__(self, count: int, deadline: Deadline):
        self.count = count
        self.deadline = deadline
        self.issued = 0
        self.got = 0
        self.nbytes = 0
        self.stop = False

    async def worker(self, request_response, request) -> None:
        while self.issued < self.count and not self.stop:
            self.issued += 1
            reply = await request_response(request)
            self.got += 1
            self.nbytes += len(reply.data)
            if (self.got & 63) == 0 and self.deadline.passed():
                self.stop = True

    def result(self) -> RunResult:
        return RunResult(self.got, self.nbytes, self.deadline.elapsed(), self.got == self.count)


async def fire_and_forget_run(fire_and_forget, request_response, payload_class, spec: Spec,
                              count: int, deadline: Deadline, state: dict,
                              pause=None) -> RunResult:
    """The "fnf" workload: ``count`` messages in batches of 1000 (each batch awaited until
    written, which keeps the send queue bounded; ``await pause()`` after each batch when
    given), then COUNT_QUERY request-responses until the server has received them all
    (``state["fnf_expected"]`` counts this connection's messages across runs)."""
    message = payload_class(b"x" * spec.size)
    query = payload_class(COUNT_QUERY)
    sent = 0
    batch = 1000
    while sent < count:
        k = min(batch, count - sent)
        last = None
        for _ in range(k):
            last = fire_and_forget(message)
        sent += k
        await last
        if deadline.passed():
            break
        if pause is not None:
            await pause()
    state["fnf_expected"] += sent
    while True:
        reply = await request_response(query)
        if int(reply.data) >= state["fnf_expected"]:
            break
    return RunResult(sent, sent * spec.size, deadline.elapsed(), sent == count)


def stop_child(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """Stop a child process that exits when its stdin closes: close its stdin, wait up to
    ``grace`` seconds, then kill it.

    :param proc: the child, started with ``stdin=subprocess.PIPE``.
    :param grace: seconds it gets to exit by itself.
    """
    try:
        proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def die_with_parent() -> None:
    """Exit this child as soon as its stdin (a pipe from the orchestrator) closes."""

    def watch() -> None:
        try:
            while os.read(0, 65536):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def announce_port(port: int) -> None:
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()


def announce_unavailable(reason: str) -> None:
    sys.stdout.write("UNAVAILABLE " + " ".join(reason.split()) + "\n")
    sys.stdout.flush()


def emit_result(runs: list[RunResult] | None = None, error: str | None = None) -> None:
    if error is not None:
        body = {"ok": False, "error": error}
    else:
        body = {"ok": True, "runs": [asdict(r) for r in runs or []]}
    sys.stdout.write("RESULT " + json.dumps(body) + "\n")
    sys.stdout.flush()


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:300]


def pin_cpus(spec: str) -> None:
    """Restrict this process to the CPUs listed in ``spec`` ("0", "0,1"); "" leaves it alone."""
    cpus = {int(c) for c in spec.split(",") if c.strip()}
    if cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass


def child_main(server, client, argv: list[str] | None = None) -> None:
    """Dispatch ``server`` / ``client PORT SPEC`` for an implementation module."""
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    pin_cpus(os.environ.get("BENCH_CPUS_" + (argv[0].upper() if argv else "NONE"), ""))
    if argv[:1] == ["server"]:
        server()
    elif argv[:1] == ["client"] and len(argv) == 3:
        client(int(argv[1]), Spec.from_json(argv[2]))
    else:
        sys.stderr.write("usage: server | client PORT SPEC_JSON\n")
        sys.exit(2)


def run_twisted_client(run, port: int, spec: Spec) -> None:
    """Run ``await run(reactor, port, spec)`` under ``task.react``; report a failure as the
    child's result instead of crashing the harness."""
    from twisted.internet import defer, task

    async def main(reactor) -> None:
        try:
            await run(reactor, port, spec)
        except Exception as exc:  # report, never crash the harness
            emit_result(error=describe(exc))

    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
