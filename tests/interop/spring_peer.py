"""Drive the Spring Boot RSocket peer (``peers/spring``, Spring Boot 4.0.7, rsocket-java 1.1.5).

One executable jar, ``peers/spring/target/rsocket-spring-peer.jar`` (built by
``peers/spring/install.sh``), run in two modes (``peers/spring/README.md``):

* **server** (:class:`SpringServer`, :func:`start_server`): the ``@MessageMapping`` order service
  behind Spring Security RSocket, on TCP (Spring Boot's own RSocket server) and WebSocket (a
  second server, any URL path) on 127.0.0.1.  It prints JSON events on stdout (``setup``,
  ``audit``, ``request_n``, ``cancel``, ``complete``, ``stopping``), read with
  :meth:`peers.PeerServer.wait_event`.
* **client** (:class:`SpringClient`, :func:`start_client`): an ``RSocketRequester`` daemon.  The
  JVM starts once; each :meth:`SpringClient.call` writes one JSON command line and reads its
  JSON answer line; every call opens its own connection (so SETUP options vary per call).

Both JVMs start once per pytest session (the ``spring_server`` / ``spring_client`` fixtures of
``conftest.py``): a Spring Boot start takes 5-20 s on a loaded machine.

Credentials the server accepts (:data:`USERS`, and bearer tokens made by :func:`make_jwt`:
HS256 JWTs signed with :data:`JWT_KEY`, principal = ``sub``, authorities ``SCOPE_<word>`` for
each word of ``scope``).  Routes ``public.*`` are open to all, ``admin.*`` need
``SCOPE_admin``, every other request must be authenticated.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import queue
import subprocess
import threading
import time

import peers

SPRING_DIR = peers.PEERS_DIR / "spring"
#: the executable Spring Boot jar install.sh builds
JAR = SPRING_DIR / "target" / "rsocket-spring-peer.jar"
#: seconds a Spring Boot JVM may take to start (a loaded 2-core machine)
STARTUP_TIMEOUT = 120.0
#: users of the server's simple authentication (username -> password)
USERS = {"alice": "secret", "bob": "hunter2"}
#: HMAC-SHA256 key of the server's bearer tokens (``SecurityConfig.JWT_KEY``)
JWT_KEY = b"rsocket-tx-interop-spring-hs256!"
#: JVM options: a quicker start (C1 only) and a small heap; the peers do little work
JVM_OPTIONS = ("-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx256m")


def ensure_installed() -> None:
    """:raises peers.PeersNotInstalled: the jar was not built (run ``install_peers.sh``)."""
    if not JAR.exists():
        raise peers.PeersNotInstalled(
            f"interop peers not installed:\n  spring: {JAR} not built\n"
            f"Run: {peers.INSTALL_SCRIPT} (or {SPRING_DIR / 'install.sh'})")


def program_argv(mode: str, *options: str) -> list[str]:
    return [peers.JAVA, *JVM_OPTIONS, "-jar", str(JAR), mode, *options]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def make_jwt(subject: str, *, scope: str | None = None, lifetime: int = 3600,
             key: bytes = JWT_KEY) -> str:
    """An HS256 JWT for the Spring server's bearer authentication.

    :param subject: the ``sub`` claim (Spring's principal name).
    :param scope: space-separated words (authorities ``SCOPE_<word>``), or None.
    :param lifetime: seconds from now to ``exp`` (negative: already expired).
    :param key: the HMAC key (another key: a token Spring must refuse).
    :returns: the compact serialization ``header.claims.signature``.
    """
    now = int(time.time())
    claims = {"sub": subject, "iat": now, "exp": now + lifetime}
    if lifetime < 0:
        claims["iat"] = now + 2 * lifetime
    if scope is not None:
        claims["scope"] = scope
    signing_input = ".".join(_b64url(json.dumps(part, separators=(",", ":")).encode())
                             for part in ({"alg": "HS256", "typ": "JWT"}, claims))
    signature = hmac.new(key, signing_input.encode("ascii"), hashlib.sha256).digest()
    return f"{signing_input}.{_b64url(signature)}"


# ---------------------------------------------------------------------------------------------
# server mode
# ---------------------------------------------------------------------------------------------

class SpringServer(peers.PeerServer):
    """The Spring server (a :class:`peers.PeerServer`: ``wait_event``, ``stop``, ``stderr``).

    :ivar ports: transport (``tcp``, ``ws``) -> port on 127.0.0.1.
    """

    ports: dict[str, int]

    def url_for(self, transport: str) -> str:
        """``tcp://127.0.0.1:P`` or ``ws://127.0.0.1:P/rsocket`` (the path is not checked)."""
        if transport == "tcp":
            return f"tcp://{peers.HOST}:{self.ports['tcp']}"
        return f"ws://{peers.HOST}:{self.ports['ws']}{peers.WS_PATH}"

    def endpoint(self, transport: str) -> str:
        """The same as a Twisted endpoint string (what ``rsocket-tx`` also accepts)."""
        if transport == "tcp":
            return f"tcp:host={peers.HOST}:port={self.ports['tcp']}"
        return f"ws:host={peers.HOST}:port={self.ports['ws']}:path={peers.WS_PATH}"


def start_server(*, lifetime: int = 3600, security: str = "either") -> SpringServer:
    """Start the Spring server and wait (up to :data:`STARTUP_TIMEOUT`) until both transports
    listen.

    :param lifetime: seconds after which it exits by itself (it also exits at stdin EOF, i.e.
        :meth:`SpringServer.stop`).
    :param security: ``either`` (one authentication interceptor for both credential kinds) or
        ``docs`` (``simpleAuthentication()`` + ``jwt()``, see README.md).
    :raises peers.PeerFailure: it did not start.
    """
    ensure_installed()
    argv = program_argv("server", "--port", "0", "--ws-port", "0", "--timeout", str(lifetime),
                 "--security", security, "--watch-stdin")
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=SPRING_DIR)
    server = SpringServer("spring", process, argv)
    server._wait_listening(STARTUP_TIMEOUT)
    server.ports = {}
    for line in server.stdout_lines:
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("event") == "listening":
                server.ports[event["transport"]] = event["port"]
    if set(server.ports) != {"tcp", "ws"}:
        server.stop()
        raise peers.PeerFailure(f"spring server listens on {server.ports}, expected tcp and ws")
    return server


# ---------------------------------------------------------------------------------------------
# client mode
# ---------------------------------------------------------------------------------------------

class SpringClient:
    """The ``RSocketRequester`` daemon: :meth:`call` runs one request on a new connection.

    Thread-safe (one call at a time).  Stop with :meth:`stop`.
    """

    def __init__(self, process: subprocess.Popen, argv: list[str]) -> None:
        self.process = process
        self.argv = argv
        self._lines: queue.Queue = queue.Queue()
        self._stdout = peers.LineReader(process.stdout, self._lines)
        self._stderr = peers.LineReader(process.stderr, None)
        self._stdout.start()
        self._stderr.start()
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    @property
    def stderr(self) -> str:
        return "\n".join(self._stderr.lines)

    def _next_line(self, deadline: float, what: str) -> str:
        remaining = deadline - time.monotonic()
        try:
            line = self._lines.get(timeout=max(remaining, 0.001))
        except queue.Empty:
            raise peers.PeerFailure(f"spring client: no {what} in time; stderr:\n"
                                    f"{self.stderr[-4000:]}") from None
        if line is None:
            self._lines.put(None)  # later calls see the EOF too
            raise peers.PeerFailure(f"spring client exited ({self.process.poll()}) before "
                                    f"{what}; stderr:\n{self.stderr[-4000:]}")
        return line

    def wait_ready(self, timeout: float) -> None:
        """Wait until the daemon says READY (:func:`peers.start_daemon`)."""
        deadline = time.monotonic() + timeout
        while self._next_line(deadline, "READY") != "READY":
            pass

    def call(self, url: str, interaction: str = "request-response", *, route: str,
             timeout: float = 20.0, **command) -> dict:
        """Run one request from Spring to ``url``.

        :param url: ``tcp://host:port`` or ``ws://host:port/path``.
        :param interaction: ``request-response``, ``fire-and-forget``, ``request-stream`` or
            ``request-channel``.
        :param route: the route (``RSocketRequester.route(route, *route_vars)``).
        :param timeout: seconds Spring blocks for the answer (``block(Duration)``).
        :param command: ``data`` (a JSON value, encoded by Spring's codec of the connection's
            data MIME type), ``items`` (channel: every payload, the first included),
            ``route_vars``, ``data_mime`` (SETUP data MIME type; None: Spring's default),
            ``metadata_mime``, ``setup_auth`` / ``auth`` (``{"simple": [user, password]}`` or
            ``{"bearer": token}``), ``stream_data_mime`` (per-stream data MIME entry; the data
            is encoded with Spring's codec of that type), ``accept`` (list: accept-MIME
            entry), ``retrieve`` (``"bytes"``: the raw response data as ``{"b64": ...}``),
            ``limit_rate`` (Reactor's ``limitRate(n)``), ``request_n`` (a subscriber that
            requests exactly n, once), ``take``.
        :returns: the answer: ``ok``, ``setup`` (``data_mime_type``, ``metadata_mime_type`` the
            requester used), and ``value`` / ``sent`` / ``values`` + ``completed`` +
            ``cancelled``; when not ok, ``error`` (``code``, ``message``, ``class``: an
            RSocket ERROR), ``unsupported`` (Spring cannot do it) or ``failure``.
        :raises peers.PeerFailure: the daemon died or did not answer in time.
        """
        with self._lock:
            ident = next(self._ids)
            line = json.dumps({"id": ident, "url": url, "interaction": interaction,
                               "route": route, "timeout_ms": int(timeout * 1000), **command})
            try:
                self.process.stdin.write(line.encode("utf-8") + b"\n")
                self.process.stdin.flush()
            except OSError as exc:
                raise peers.PeerFailure(f"spring client stdin closed ({exc}); stderr:\n"
                                        f"{self.stderr[-4000:]}") from None
            deadline = time.monotonic() + timeout + 30
            while True:
                answer = self._next_line(deadline, f"answer to {line}")
                if answer.startswith("{"):
                    document = json.loads(answer)
                    if document.get("id") == ident:
                        return document

    def stop(self, timeout: float = 20.0) -> int | None:
        """Close its stdin (it exits), kill it after ``timeout``; returns the exit code."""
        return peers.stop_program(self.process, (self._stdout, self._stderr), timeout)


def start_client(*, lifetime: int = 3600) -> SpringClient:
    """Start the client daemon and wait (up to :data:`STARTUP_TIMEOUT`) until it is READY.

    :param lifetime: seconds after which it exits by itself.
    :raises peers.PeerFailure: it did not start.
    """
    ensure_installed()
    argv = program_argv("client", "--timeout", str(lifetime))
    return peers.start_daemon(SpringClient, argv, SPRING_DIR, STARTUP_TIMEOUT)


def cbor_or_json(answer: dict, decoder) -> object:
    """Decode a ``retrieve="bytes"`` answer's value with ``decoder(bytes)``."""
    return decoder(base64.b64decode(answer["value"]["b64"]))
