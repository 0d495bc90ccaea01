"""Fixtures of the interop tests: the third-party peers (``peers.py``) and our own server, run
as ``twistd -n rsocket`` in a subprocess.

* The peers must be installed (``make test`` and ``make peers`` run
  ``tests/interop/install_peers.sh``): if they are not, the tests FAIL with the message of
  :func:`peers.ensure_installed` — they are never skipped for that.  A module that needs
  none of them (the Jini ERI ones) sets ``RSOCKET_PEERS = False``.
* :class:`OurServer` starts ``twistd -n --pidfile= rsocket --listen
  tcp:port=0:interface=127.0.0.1 --listen ws:port=0:interface=127.0.0.1:path=/rsocket …`` (one
  process serving TCP and WebSocket), learns its ports from the ``RSocket server listening on``
  log lines (with a deadline), keeps every line it logs (``--debug`` adds one line per frame)
  and is always terminated.  The module fixtures start each server once per module.
* ``peer_server(peer, **options)`` starts a peer's demo server once per module per option set.
* ``river`` (the Apache River Jini ERI mux peer, ``river_peer.py``), ``routing_peers_installed``
  and ``no_logged_errors`` are for the modules that ask for them
  (``pytest.mark.usefixtures``).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import peers
import pytest
from logcheck import LogCapture, at_least_warn, check
from responders import EVENT_MARKER

REPO = Path(__file__).resolve().parents[2]

#: Seconds to wait for our server to log that it listens.
STARTUP_TIMEOUT = 60.0
#: Seconds any single wait on our server's log may take (a bug shows up as a failure).
WAIT = 15.0

INTEROP_RESPONDER = "tests.interop.responders:InteropResponder"

_LISTENING = re.compile(r"RSocket server listening on 127\.0\.0\.1:(\d+) \(endpoint (\S+)\)")
#: --listen of our server per transport (the WebSocket one at peers.WS_PATH)
LISTEN = {
    "tcp": "tcp:port=0:interface=127.0.0.1",
    "ws": f"ws:port=0:interface=127.0.0.1:path={peers.WS_PATH}",
}
_PROBLEM = re.compile(r"#(warn|error|critical)\]|Traceback|Unhandled")
#: a frame debug line; each starts with the connection id and peer ("[c3 127.0.0.1:4711] ")
_CONN = r"(?:\[c\d+ [^\]]*\] )?"
_FRAME = re.compile(r"\[rsocket_tx\.frames#debug\] " + _CONN
                    + r"(send|recv) (\S+) stream=(\d+)(.*)$")


def _fail_unless_installed(check) -> None:
    """Fail (not skip) the test when ``check()`` raises :class:`peers.PeersNotInstalled`."""
    try:
        check()
        problem = None
    except peers.PeersNotInstalled as exc:
        problem = str(exc)
    if problem is not None:
        pytest.fail(f"{problem}\n(`make test` installs them: it runs `make peers` first)",
                    pytrace=False)


@pytest.fixture(scope="session")
def _rsocket_peers_checked():
    _fail_unless_installed(peers.ensure_installed)


@pytest.fixture(autouse=True)
def peers_installed(request):
    """Fail (not skip) every interop test when the RSocket peers are missing, except in the
    modules that set ``RSOCKET_PEERS = False`` (the Jini ones: they build their own peer)."""
    if getattr(request.module, "RSOCKET_PEERS", True):
        request.getfixturevalue("_rsocket_peers_checked")


@pytest.fixture(scope="session")
def routing_peers_installed():
    """Fail (not skip) the tests using it when the routing peers are missing
    (:func:`peers.ensure_routing_installed`)."""
    _fail_unless_installed(peers.ensure_routing_installed)


@pytest.fixture(scope="session")
def java_reliability_installed():
    """Fail (not skip) the tests using it when the rsocket-java reliability jar
    (``peers/java-reliability``) was not built (:func:`resume_peers.ensure_java_installed`)."""
    import resume_peers

    _fail_unless_installed(resume_peers.ensure_java_installed)


@pytest.fixture
def no_logged_errors():
    """Fail a test during which the in-process side (our library) logged a warning, an error
    or an unhandled failure (twisted.logger), e.g. an unhandled error in a Deferred: stricter
    than the autouse ``no_logged_failures`` of tests/conftest.py (:mod:`logcheck`).  For the
    modules that run our library in-process: ``pytest.mark.usefixtures("no_logged_errors")``."""
    capture = LogCapture(at_least_warn).start()
    yield
    check(capture.stop())


# ---------------------------------------------------------------------------------------------
# Our server: twistd -n rsocket
# ---------------------------------------------------------------------------------------------

def twistd_argv(*options: str, listen=(LISTEN["tcp"],)) -> list[str]:
    """argv running ``twistd`` from the interpreter's environment (the project venv), listening
    on every endpoint string of ``listen``."""
    script = Path(sys.executable).parent / "twistd"
    if script.exists():
        head = [str(script)]
    else:  # an environment without the console script: the same thing through -c
        head = [sys.executable, "-c",
                "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; "
                "run()"]
    listens = [arg for spec in listen for arg in ("--listen", spec)]
    return head + ["-n", "--pidfile=", "rsocket", *listens, *options]


class Frame:
    """One line of the ``--debug`` frame log: ``direction`` (send/recv), ``type`` (PAYLOAD…),
    ``stream`` and the rest of the line (``fields``); ``has(flag)`` looks for a flag name."""

    def __init__(self, direction: str, frame_type: str, stream: int, fields: str) -> None:
        self.direction = direction
        self.type = frame_type
        self.stream = stream
        self.fields = fields

    def has(self, word: str) -> bool:
        return word in self.fields.split()

    def value(self, name: str) -> str | None:
        match = re.search(rf"\b{name}=(\S+)", self.fields)
        return match.group(1) if match else None

    def __repr__(self) -> str:
        return f"<{self.direction} {self.type} stream={self.stream}{self.fields}>"


class OurServer:
    """``twistd -n rsocket`` in a subprocess.

    :ivar port: the TCP port it listens on (127.0.0.1), None without TCP.
    :ivar ports: transport (``tcp``, ``ws``) -> port, one per ``transports``.
    :ivar lines: every line it printed so far (stdout and stderr interleaved).
    """

    def __init__(self, *options: str, name: str = "our server",
                 transports=("tcp",)) -> None:
        self.name = name
        self.transports = tuple(transports)
        self.argv = twistd_argv(*options, listen=[LISTEN[t] for t in self.transports])
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        # the repository root on sys.path: twistd finds twisted/plugins/rsocket_tx_plugin.py
        # and tests.interop.responders there whatever the install mode
        env["PYTHONPATH"] = os.pathsep.join(
            [str(REPO)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
        self.lines: list[str] = []
        self._changed = threading.Condition()
        self._eof = False
        self.process = subprocess.Popen(self.argv, cwd=str(REPO), env=env,
                                        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port: int | None = None
        self.ports: dict[str, int] = {}
        try:
            since = 0
            while len(self.ports) < len(self.transports):
                match = self.wait_line(_LISTENING, since=since, timeout=STARTUP_TIMEOUT)
                since = self.lines.index(match.string) + 1
                for transport in self.transports:
                    if match.group(2) == LISTEN[transport]:
                        self.ports[transport] = int(match.group(1))
        except BaseException:
            self.stop()
            raise
        self.port = self.ports.get("tcp")

    def port_for(self, transport: str) -> int:
        """The port serving ``transport`` (a :data:`peers.TRANSPORTS` name: every ``ws*``
        is our WebSocket endpoint)."""
        return self.ports["tcp" if transport == "tcp" else "ws"]

    def _read(self) -> None:
        for raw in iter(self.process.stdout.readline, b""):
            with self._changed:
                self.lines.append(raw.decode("utf-8", "replace").rstrip("\n"))
                self._changed.notify_all()
        with self._changed:
            self._eof = True
            self._changed.notify_all()

    def output(self, since: int = 0, last: int = 60) -> str:
        return "\n".join(self.lines[since:][-last:])

    def mark(self) -> int:
        """The current end of the log, to look only at what comes after."""
        with self._changed:
            return len(self.lines)

    def wait_line(self, pattern, since: int, timeout: float = WAIT) -> re.Match:
        """Wait for a line matching ``pattern`` (regex) at or after index ``since``."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        index = since
        with self._changed:
            while True:
                while index < len(self.lines):
                    match = regex.search(self.lines[index])
                    index += 1
                    if match:
                        return match
                if self._eof:
                    raise AssertionError(
                        f"{self.name} exited ({self.process.poll()}) before logging "
                        f"{regex.pattern!r}:\n{self.output(since)}")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(
                        f"{self.name} did not log {regex.pattern!r} within {timeout}s:\n"
                        f"{self.output(since)}")
                self._changed.wait(remaining)

    def events(self, since: int) -> list[dict]:
        """The responder's ``INTEROP-EVENT`` reports logged at or after ``since``."""
        with self._changed:
            lines = self.lines[since:]
        out = []
        for line in lines:
            at = line.find(EVENT_MARKER)
            if at >= 0:
                out.append(json.loads(line[at + len(EVENT_MARKER):]))
        return out

    def wait_event(self, name: str, since: int, timeout: float = WAIT, **match) -> dict:
        """Wait for a responder report ``name`` whose fields equal ``match``."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events(since):
                if event["event"] == name and all(event.get(k) == v for k, v in match.items()):
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self._eof:
                raise AssertionError(
                    f"{self.name}: no {name} event matching {match} "
                    f"({'exited' if self._eof else f'within {timeout}s'}); events: "
                    f"{self.events(since)}\n{self.output(since)}")
            with self._changed:
                self._changed.wait(min(remaining, 0.5))

    def frames(self, since: int) -> list[Frame]:
        """The frames logged (``--debug``) at or after ``since``."""
        with self._changed:
            lines = self.lines[since:]
        out = []
        for line in lines:
            match = _FRAME.search(line)
            if match:
                out.append(Frame(match.group(1), match.group(2), int(match.group(3)),
                                 match.group(4)))
        return out

    def wait_frame(self, direction: str, frame_type: str, since: int,
                   timeout: float = WAIT) -> None:
        self.wait_line(rf"\[rsocket_tx\.frames#debug\] {_CONN}{direction} {frame_type} ", since,
                       timeout)

    def problems(self) -> list[str]:
        """Log lines at level warn/error/critical, tracebacks and unhandled errors."""
        return [line for line in self.lines if _PROBLEM.search(line)]

    def stop_and_check(self) -> None:
        """Stop; then fail if it did not shut down cleanly or logged a problem during the
        module (a teardown error of the module's last test).  twistd re-raises the SIGTERM
        that stopped it once shut down, so the exit code is 0 or -SIGTERM."""
        code = self.stop()
        problems = self.problems()
        clean = code in (0, -signal.SIGTERM) and any("Server Shut Down." in line
                                                     for line in self.lines[-20:])
        assert clean and not problems, (
            f"{self.name} exited with {code} after SIGTERM; problems logged:\n"
            + "\n".join(problems[:40]) + f"\nlast lines:\n{self.output(last=20)}")

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM, then SIGKILL after ``timeout``; returns the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        self._reader.join(timeout)
        return self.process.returncode


@pytest.fixture(scope="session")
def rsocket_tx_cli() -> str:
    """Path of our ``rsocket-tx`` console script in the running environment (the venv)."""
    script = Path(sys.executable).parent / "rsocket-tx"
    assert script.exists(), f"{script} missing: install the project (make venv)"
    return str(script)


@pytest.fixture(scope="session")
def our_server_class():
    """:class:`OurServer`, for the test modules' own servers (they cannot ``import conftest``:
    several conftest files share that module name)."""
    return OurServer


@pytest.fixture(scope="module")
def our_server():
    """InteropResponder, no fragmentation, frame log on; TCP and WebSocket (``port_for``)."""
    server = OurServer("--responder", INTEROP_RESPONDER, "--debug", transports=("tcp", "ws"),
                       name="twistd rsocket (InteropResponder)")
    yield server
    server.stop_and_check()


@pytest.fixture(scope="module")
def our_fragmenting_server():
    """InteropResponder, ``--fragment-size 64`` (no frame larger than 64 bytes), frame log on."""
    server = OurServer("--responder", INTEROP_RESPONDER, "--fragment-size", "64", "--debug",
                       transports=("tcp", "ws"),
                       name="twistd rsocket (InteropResponder, --fragment-size 64)")
    yield server
    server.stop_and_check()


@pytest.fixture(scope="module")
def demo_server():
    """The plugin's default responder (rsocket_tx.apps.demo.DemoResponder)."""
    server = OurServer(transports=("tcp", "ws"), name="twistd rsocket (demo responder)")
    yield server
    server.stop_and_check()


# ---------------------------------------------------------------------------------------------
# Peer servers
# ---------------------------------------------------------------------------------------------

#: seconds a peer server started by :func:`peer_server` lives at most: a safety net only (it is
#: stopped at the end of its module or session, and at stdin EOF when pytest exits); a 10-minute
#: lifetime once ended the servers of ``test_our_client.py`` mid-module on a loaded machine
SERVER_LIFETIME = peers.SERVER_LIFETIME


@pytest.fixture(scope="session")
def session_peer_servers():
    """The JVM peers' demo servers, kept for the whole session by :func:`peer_server` (JVM
    startup is slow: one JVM per peer, transport and option set, not one per module); all
    stopped at the end of the session."""
    started: dict = {}
    yield started
    for server in started.values():
        server.stop()


@pytest.fixture(scope="module")
def peer_server(session_peer_servers):
    """``await peer_server(peer, transport="tcp", **options)``: that peer's demo server on
    ``transport`` started with ``options`` (see :func:`peers.start_server`), once per module per
    transport and option set, all stopped at the end of the module; a JVM peer's server
    (``runtime == "jvm"``) once per session instead (:func:`session_peer_servers`).  Returns a
    Deferred (the start runs in a thread: the reactor never blocks).
    """
    from twisted.internet.defer import succeed

    module_servers: dict = {}

    def get(peer: str, transport: str = "tcp", **options):
        options["transport"] = transport
        key = (peer, tuple(sorted(options.items())))
        options["lifetime"] = SERVER_LIFETIME
        started = module_servers
        if peers.PEERS[peer].runtime == "jvm":
            started = session_peer_servers
        server = started.get(key)
        if server is not None:
            if server.process.poll() is not None:
                raise AssertionError(f"{peer} server {options} died (exit code "
                                     f"{server.process.returncode}); stderr:\n{server.stderr}")
            return succeed(server)
        d = peers.start_server_deferred(peer, **options)

        def keep(server):
            started[key] = server
            return server

        return d.addCallback(keep)

    yield get
    for server in module_servers.values():
        server.stop()


# ---------------------------------------------------------------------------------------------
# The Spring Boot peer (spring_peer.py): one server JVM and one client JVM per session
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def spring_server():
    """The Spring Boot RSocket server (:func:`spring_peer.start_server`), TCP and WebSocket,
    started once per session; fails (not skips) when its jar was not built."""
    import spring_peer

    _fail_unless_installed(spring_peer.ensure_installed)
    server = spring_peer.start_server()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def spring_client():
    """The Spring ``RSocketRequester`` daemon (:func:`spring_peer.start_client`), started once
    per session; fails (not skips) when its jar was not built."""
    import spring_peer

    _fail_unless_installed(spring_peer.ensure_installed)
    client = spring_peer.start_client()
    yield client
    client.stop()


# ---------------------------------------------------------------------------------------------
# The Apache River 2.2.3 peer (river_peer.py): one JVM per role and ration per session
# ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="session")
def river():
    """:class:`river_peer.RiverPeers`: River's servers and client daemons, each (role,
    initial ration) started once per session on first use.  The tests build the peer
    themselves (``peers/river/install.sh``); they skip only when Java is missing."""
    import river_peer

    missing = river_peer.java_missing()
    if missing is not None:
        pytest.skip(f"the Apache River peer needs Java 17: {missing}")
    _fail_unless_installed(river_peer.ensure_built)
    started = river_peer.RiverPeers()
    yield started
    started.stop()
