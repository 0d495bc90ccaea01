"""Drive the Apache River 2.2.3 Jini ERI mux peer (``peers/river``; seed 004).

One jar, ``peers/river/target/river-peer.jar`` (River's ``net.jini:jsk-platform:2.2.3`` and two
programs), built by ``peers/river/install.sh`` together with the ``java.rmi.activation
.ActivationID`` stand-in that Java 17 needs (``target/patch``; see ``peers/river/README.md``).
The tests build it themselves: :func:`ensure_built` runs ``install.sh`` (a no-op when nothing
changed) once per pytest process.

* **server** (:func:`start_server`, a :class:`peers.PeerServer`): River's ``TcpServerEndpoint`` on
  127.0.0.1 with a dispatcher that echoes a request body, or runs the command a body starts
  with (:func:`command`: ``digest``, ``stream``, ``bytes N``, ``abort N``, ``hold NAME``,
  ``release NAME``, ``stats``).  It reports JSON events on stdout (``listening``,
  ``connection``, ``command``, ``request``, ``request_failed``, ``aborted``, ``held``), read
  with :meth:`peers.PeerServer.wait_event`.
* **client** (:class:`RiverClient`, :func:`start_client`): River's ``TcpEndpoint`` client as a
  daemon: :meth:`RiverClient.call` sends one operation (``send``, ``concurrent``,
  ``sequential``, ``abort``, ``abort-read``, ``stats``) and returns its JSON answer; several
  calls may run at once (answers are matched by id).

River reads each side's **initial inbound ration** (bytes, announced in its connection header)
from a system property once per JVM, so every ration needs a JVM of its own: :class:`RiverPeers`
(the ``river`` fixture of ``conftest.py``) starts each (role, ration) once per session, on first
use.  Every wait is bounded (:data:`CALL_TIMEOUT`); nothing sleeps.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
import queue
import shutil
import subprocess
import threading
from pathlib import Path

import peers

RIVER_DIR = peers.PEERS_DIR / "river"
INSTALL = RIVER_DIR / "install.sh"
JAR = RIVER_DIR / "target" / "river-peer.jar"
#: the compiled ActivationID stand-in (a directory patched into module java.rmi)
PATCH = RIVER_DIR / "target" / "patch"
SERVER_MAIN = "rsocket_tx.interop.river.Server"
CLIENT_MAIN = "rsocket_tx.interop.river.ClientDaemon"
#: River 2.2.3's system properties for the initial inbound ration, in bytes (``MuxServer``,
#: ``MuxClient``): a multiple of 256 up to 0xFFFF * 256, 0 = unlimited; default 32,768
SERVER_RATION_PROPERTY = "com.sun.jini.jeri.connection.mux.server.initialInboundRation"
CLIENT_RATION_PROPERTY = "com.sun.jini.jeri.connection.mux.client.initialInboundRation"
DEFAULT_RATION = 32_768
#: the first bytes of a request body that carries a command to River's server (Server.java)
MAGIC = b"RIVERPEER "
#: JVM options: a quick start (C1 only), a heap for 10 MiB bodies, and the Java 17 workaround
#: for River's use of the removed java.rmi.activation.ActivationID
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx512m",
               f"--patch-module=java.rmi={PATCH}",
               "--add-exports=java.rmi/java.rmi.activation=ALL-UNNAMED")
#: seconds a JVM may take to start on a loaded machine
STARTUP_TIMEOUT = 90.0
#: seconds one client operation may take (128 concurrent requests or 10 MiB on a loaded machine)
CALL_TIMEOUT = 240.0
#: seconds the build (install.sh) may take: Maven fetches River's jar on a fresh machine
BUILD_TIMEOUT = 900.0

_BUILD_LOCK = threading.Lock()
_built = False


def java_missing() -> str | None:
    """Why the River peer cannot run here (no ``java``: :data:`peers.JAVA`), or None."""
    if shutil.which(peers.JAVA) is None and not Path(peers.JAVA).exists():
        return f"{peers.JAVA} not found (Java 17)"
    return None


def ensure_built() -> None:
    """Build the peer with ``install.sh`` (once per process; it skips an up-to-date build).
    Without Maven an existing build is used as it is.

    :raises peers.PeersNotInstalled: the build failed (its output in the message), e.g.
        Maven is missing and nothing was built.
    """
    global _built
    with _BUILD_LOCK:
        if _built:
            return
        if shutil.which("mvn") is None and JAR.exists() and PATCH.exists():
            _built = True
            return
        try:
            done = subprocess.run(["bash", str(INSTALL)], capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT, cwd=RIVER_DIR)
        except subprocess.TimeoutExpired:
            raise peers.PeersNotInstalled(f"{INSTALL} took more than {BUILD_TIMEOUT}s") from None
        if done.returncode != 0 or not JAR.exists() or not PATCH.exists():
            raise peers.PeersNotInstalled(
                f"the River peer did not build ({INSTALL} exited {done.returncode}):\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        _built = True


def jvm_argv(main: str, *, server_ration: int | None = None,
             client_ration: int | None = None) -> list[str]:
    """argv running ``main`` of the peer jar with the River ration properties given."""
    properties = []
    if server_ration is not None:
        properties.append(f"-D{SERVER_RATION_PROPERTY}={server_ration}")
    if client_ration is not None:
        properties.append(f"-D{CLIENT_RATION_PROPERTY}={client_ration}")
    return [peers.JAVA, *JVM_OPTIONS, *properties, "-cp", str(JAR), main]


def command(name: str, body: bytes = b"") -> bytes:
    """A request body that makes River's server run ``name`` (e.g. ``"bytes 5000"``) on
    ``body``."""
    return MAGIC + name.encode("ascii") + b"\n" + body


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pattern(n: int, offset: int = 0) -> bytes:
    """The test body: byte i is ``(offset + i) % 256`` (as the Java programs make it)."""
    return bytes((offset + i) & 0xFF for i in range(256)) * (n // 256) + \
        bytes((offset + i) & 0xFF for i in range(n % 256))


def digest(data: bytes) -> dict:
    """``{"length", "sha256"}`` of ``data``: what the programs report."""
    return {"length": len(data), "sha256": sha256(data)}


# ---------------------------------------------------------------------------------------------
# server
# ---------------------------------------------------------------------------------------------

def start_server(*, ration: int | None = None, lifetime: int = 4 * 3600) -> peers.PeerServer:
    """Start River's server and wait until it listens (:data:`STARTUP_TIMEOUT`).

    :param ration: its initial inbound ration in bytes (None: River's 32,768; 0: unlimited).
    :param lifetime: seconds after which it exits by itself (also at stdin EOF: ``stop()``).
    :returns: a :class:`peers.PeerServer` (``port`` on 127.0.0.1, ``wait_event``, ``stop``)
        with one more attribute, ``ration``: the initial inbound ration River announces, in
        bytes (from its ``listening`` event).
    :raises peers.PeerFailure: it did not start.
    """
    ensure_built()
    argv = jvm_argv(SERVER_MAIN, server_ration=ration) + [
        "--port", "0", "--timeout", str(lifetime), "--watch-stdin"]
    server = peers.start_program("apache-river-2.2.3 server", argv, RIVER_DIR, STARTUP_TIMEOUT)
    try:
        listening = server.wait_event("listening", timeout=STARTUP_TIMEOUT)
    except BaseException:
        server.stop()
        raise
    server.ration = listening["server_ration"]
    return server


# ---------------------------------------------------------------------------------------------
# client daemon
# ---------------------------------------------------------------------------------------------

class RiverClient:
    """River's ``TcpEndpoint`` client daemon.  Thread-safe; several calls may be in flight.

    :ivar ration: its initial inbound ration in bytes (River's client property).
    """

    def __init__(self, process: subprocess.Popen, argv: list[str]) -> None:
        self.process = process
        self.argv = argv
        self.ration = DEFAULT_RATION
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._waiting: dict[str, queue.Queue] = {}
        self._first: queue.Queue = queue.Queue()
        self._eof = False
        self._stderr = peers.LineReader(process.stderr, None)
        self._stderr.start()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    @property
    def stderr(self) -> str:
        return "\n".join(self._stderr.lines[-100:])

    def _read(self) -> None:
        for raw in iter(self.process.stdout.readline, b""):
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("{"):
                continue
            try:
                answer = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                sink = self._waiting.pop(str(answer.get("id")), None)
            (sink or self._first).put(answer)
        with self._lock:
            self._eof = True
            sinks = list(self._waiting.values())
            self._waiting.clear()
        for sink in [*sinks, self._first]:
            sink.put(None)

    def wait_ready(self, timeout: float) -> None:
        """Wait for the daemon's ``ready`` answer (:func:`peers.start_daemon`); read its
        ration from it."""
        try:
            ready = self._first.get(timeout=timeout)
        except queue.Empty:
            raise peers.PeerFailure(f"River client not ready within {timeout}s; stderr:\n"
                                    f"{self.stderr}") from None
        if not ready or not ready.get("ready"):
            raise peers.PeerFailure(f"River client did not start ({ready}); stderr:\n"
                                    f"{self.stderr}")
        self.ration = ready["client_ration"]

    def call(self, op: str, timeout: float = CALL_TIMEOUT, **options) -> dict:
        """Run one operation of the daemon (``peers/river/README.md``, "Client daemon").

        :param op: ``send``, ``concurrent``, ``sequential``, ``abort``, ``abort-read`` or
            ``stats``.
        :param options: ``port``, ``sizes`` (list of int), ``size``, ``count``, ``read``,
            ``offset``, ``prefix`` (bytes, sent before the pattern), and the flags ``keep``
            (answer the response in ``b64``), ``fresh`` (a new endpoint, so new connections),
            ``nio`` (River's NIO transport: no socket factory, no connection count).
        :returns: the answer: ``results`` (each ``size``, ``length``, ``sha256``, ``error``),
            ``connections`` (TCP connections River opened during the op), ...
        :raises peers.PeerFailure: the daemon died, did not answer within ``timeout`` seconds,
            or the op itself failed (``failure`` in the answer).
        """
        words = [op]
        for name, value in options.items():
            if value is None or value is False:
                continue
            if value is True:
                words.append(name)
            elif isinstance(value, bytes):
                words.append(f"{name}={base64.b64encode(value).decode('ascii')}")
            elif isinstance(value, list | tuple):
                words.append(f"{name}={','.join(str(v) for v in value)}")
            else:
                words.append(f"{name}={value}")
        ident = str(next(self._ids))
        words.append(f"id={ident}")
        line = " ".join(words)
        sink: queue.Queue = queue.Queue()
        with self._lock:
            if self._eof:
                raise peers.PeerFailure(f"River client exited ({self.process.poll()}); "
                                        f"stderr:\n{self.stderr}")
            self._waiting[ident] = sink
            try:
                self.process.stdin.write(line.encode("utf-8") + b"\n")
                self.process.stdin.flush()
            except OSError as exc:
                self._waiting.pop(ident, None)
                raise peers.PeerFailure(f"River client stdin closed ({exc}); stderr:\n"
                                        f"{self.stderr}") from None
        try:
            answer = sink.get(timeout=timeout)
        except queue.Empty:
            with self._lock:
                self._waiting.pop(ident, None)
            raise peers.PeerFailure(f"River client: no answer to {line!r} within {timeout}s; "
                                    f"stderr:\n{self.stderr}") from None
        if answer is None:
            raise peers.PeerFailure(f"River client exited ({self.process.poll()}) during "
                                    f"{line!r}; stderr:\n{self.stderr}")
        if "failure" in answer:
            raise peers.PeerFailure(f"River client: {line!r} failed: {answer['failure']}")
        return answer

    def call_deferred(self, op: str, **options):
        """:meth:`call` in a thread: a Deferred firing with the answer (the reactor keeps
        serving our side meanwhile)."""
        from twisted.internet.threads import deferToThread
        return deferToThread(self.call, op, **options)

    def stop(self, timeout: float = 20.0) -> int | None:
        """Close its stdin (it exits), kill it after ``timeout``; returns the exit code."""
        return peers.stop_program(self.process, (self._stderr,), timeout)


def start_client(*, ration: int | None = None) -> RiverClient:
    """Start River's client daemon and wait until it is ready (:data:`STARTUP_TIMEOUT`).

    :param ration: its initial inbound ration in bytes (None: River's 32,768; 0: unlimited).
    :raises peers.PeerFailure: it did not start.
    """
    ensure_built()
    argv = jvm_argv(CLIENT_MAIN, client_ration=ration)
    return peers.start_daemon(RiverClient, argv, RIVER_DIR, STARTUP_TIMEOUT)


# ---------------------------------------------------------------------------------------------
# the session's JVMs
# ---------------------------------------------------------------------------------------------

class RiverPeers:
    """River's servers and client daemons of a test session: one JVM per role and ration,
    started on first use (in a thread: the ``*_deferred`` methods never block the reactor),
    all stopped by :meth:`stop`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._servers: dict[int | None, peers.PeerServer] = {}
        self._clients: dict[int | None, RiverClient] = {}

    def server(self, ration: int | None = None) -> peers.PeerServer:
        """River's server with this initial inbound ration (bytes; None = River's default)."""
        return self._running("server", self._servers, start_server, ration)

    def client(self, ration: int | None = None) -> RiverClient:
        """River's client daemon with this initial inbound ration (bytes; None = default)."""
        return self._running("client", self._clients, start_client, ration)

    def _running(self, role: str, started: dict, start, ration: int | None):
        """The JVM of ``role`` with ``ration`` in ``started``, started with ``start`` on first
        use.

        :raises peers.PeerFailure: it died, or does not start.
        """
        with self._lock:
            program = started.get(ration)
            if program is not None and program.process.poll() is not None:
                raise peers.PeerFailure(f"River {role} (ration {ration}) died with "
                                        f"{program.process.returncode}; stderr:\n"
                                        f"{program.stderr}")
            if program is None:
                program = started[ration] = start(ration=ration)
            return program

    def server_deferred(self, ration: int | None = None):
        """:meth:`server` in a thread: a Deferred."""
        from twisted.internet.threads import deferToThread
        return deferToThread(self.server, ration)

    def client_deferred(self, ration: int | None = None):
        """:meth:`client` in a thread: a Deferred."""
        from twisted.internet.threads import deferToThread
        return deferToThread(self.client, ration)

    def stop(self) -> None:
        """Stop every JVM started."""
        with self._lock:
            programs = [*self._servers.values(), *self._clients.values()]
            self._servers.clear()
            self._clients.clear()
        for program in programs:
            program.stop()

