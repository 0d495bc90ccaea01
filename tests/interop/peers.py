"""Drive the third-party RSocket peers used by the interop tests.

Three peers, each with a SERVER and a CLIENT program under ``tests/interop/peers/``:

======================== ======= ==================================================
peer                     runtime programs
======================== ======= ==================================================
rsocket-py               python  ``peers/py/server.py``, ``peers/py/client.py`` (rsocket 0.4.20)
rsocket-js-1.0.0-alpha.3 node    ``peers/js-1.0.0-alpha.3/{server,client}.js``
rsocket-js-0.0.27        node    ``peers/js-0.0.27/{server,client}.js``
rsocket-go-0.8.12        exec    ``peers/go/bin/{server,client}`` (Go module rsocket-go
                                 v0.8.12, built by ``peers/go/install.sh``)
rsocket-java-1.1.5       jvm     ``peers/java`` (``target/rsocket-java-peer.jar``: main classes
                                 ``rsocket_tx.interop.Server``, ``Client``, ``ClientDaemon``)
rsocket-rust-0.7.5       exec    ``peers/rust/target/release/{server,client}`` (crates
                                 rsocket_rust 0.7.5 + transports 0.7.4, built by
                                 ``peers/rust/install.sh``)
======================== ======= ==================================================

Every program speaks TCP and WebSocket (``transport=``: ``tcp``, ``ws``, and for rsocket-py
also ``ws-websockets``; see :data:`TRANSPORTS`, :func:`targets`, README.md "WebSocket").

Install with ``tests/interop/install_peers.sh`` (npm into the two js folders; pip for
rsocket-py if missing).  :func:`ensure_installed` says so when something is missing.

Servers (:func:`start_server`) listen on 127.0.0.1 (``.url`` says how to reach them), run
the *demo responder* and report what they receive as JSON events; clients
(:func:`run_client`) run ONE interaction against a port and return its JSON result.
Everything is bounded by timeouts; nothing sleeps.

Payload encoding (both directions, all peers)
---------------------------------------------
* Options: ``data``/``metadata`` given as ``str`` are sent UTF-8 encoded, as ``bytes`` they
  are passed base64 (``--data-b64``); ``data_size=N``/``metadata_size=N`` send N bytes of
  :func:`pattern` (byte i is ``i % 256``).  ``metadata=None`` (default) sends no metadata.
* Results: a payload is ``{"data": <base64>, "metadata": <base64> | None}``.  With
  ``digest=True`` (implied by ``data_size``/``metadata_size``) it is instead
  ``{"data_len", "data_sha256", "metadata_len", "metadata_sha256"}`` (metadata ones None when
  absent).  Server events carry all six keys.  Use :func:`payload_bytes`, :func:`digest_of`.
* ``metadata`` None means the peer library reported no metadata.  rsocket-py cannot tell
  "no M flag" from "empty metadata": it reports ``""`` for both (see README.md).

Client results
--------------
``run_client`` returns the parsed JSON dict plus ``"exit_code"``:

* request-response: ``{"payload": {...}}`` (``None`` if completed without a payload)
* fire-and-forget / metadata-push: ``{"sent": True}``
* request-stream / request-channel: ``{"payloads": [...], "completed": bool, "cancelled": bool}``
* exit code 1, the peer sent ERROR: ``{"error": {"code": int, "message": str}}``
  (+ ``"payloads"`` received before it, for streams)

Exit code 3 raises :class:`PeerUnsupported`, 2/other raise :class:`PeerFailure`.  A peer
with a client daemon (:attr:`Peer.client_daemon`: rsocket-java, whose JVM is slow to start)
runs every client interaction of a pytest process through ONE daemon process
(:class:`_ClientDaemon`), with the same results and errors.

Server events (``PeerServer.next_event`` / ``wait_event``), one JSON object per line:
``setup``, ``request`` (``interaction`` + payload), ``request_n`` (``interaction``, ``n``,
``initial``), ``cancel`` (``interaction``), ``fnf`` (payload), ``metadata_push``
(``metadata``/``metadata_len``/``metadata_sha256``), ``channel_next`` (payload, ``complete``),
``channel_inbound_complete`` (``form``: ``request`` = C on REQUEST_CHANNEL, ``flag`` = C on
a PAYLOAD with N, ``frame`` = PAYLOAD with only C; rsocket-js 0.0.27 always says ``frame``),
``channel_inbound_error``, ``error``, ``stopping``.  Which peer emits which: README.md.

Twisted tests must not block the reactor while our in-process endpoint has to answer: use
:func:`run_client_deferred`, :func:`start_server_deferred` and
:meth:`PeerServer.next_event_deferred` (threads via ``deferToThread``).
"""

from __future__ import annotations

import atexit
import base64
import collections
import hashlib
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
PEERS_DIR = HERE / "peers"
INSTALL_SCRIPT = HERE / "install_peers.sh"
HOST = "127.0.0.1"

EXIT_OK = 0
EXIT_RSOCKET_ERROR = 1
EXIT_FAILURE = 2
EXIT_UNSUPPORTED = 3

#: Transports of the peer programs.  ``ws`` is each peer's own WebSocket transport
#: (rsocket-py: aiohttp, its ``websocket_client``/``websocket_handler_factory`` helpers;
#: rsocket-js: the ``rsocket-websocket-client``/``-server`` packages of its version);
#: ``ws-websockets`` is rsocket-py's second one, on the ``websockets`` library.  One RSocket
#: frame per binary WebSocket message, no length prefix.  See README.md, "WebSocket".
TRANSPORTS = ("tcp", "ws", "ws-websockets")
#: URL path of the WebSocket servers (ours and the peers'; the js peers accept any path)
WS_PATH = "/rsocket"

INTERACTIONS = (
    "request-response",
    "fire-and-forget",
    "metadata-push",
    "request-stream",
    "request-channel",
)

#: Interpreter for the rsocket-py peer (needs rsocket==0.4.20): the running one by default.
PYTHON = os.environ.get("RSOCKET_TX_INTEROP_PYTHON", sys.executable)
#: Node executable for the rsocket-js peers.
NODE = os.environ.get("RSOCKET_TX_INTEROP_NODE") or shutil.which("node") or "node"
#: Java executable (17) for the JVM peers.
JAVA = os.environ.get("RSOCKET_TX_INTEROP_JAVA") or shutil.which("java") or "java"


class PeerError(Exception):
    """Base class of the errors raised by this module."""


class PeersNotInstalled(PeerError):
    """A peer's runtime or packages are missing: run tests/interop/install_peers.sh."""


class PeerUnsupported(PeerError):
    """The peer library cannot do what was asked (its program exited with code 3).

    :ivar reason: the program's explanation.
    """

    def __init__(self, peer: str, reason: str):
        super().__init__(f"{peer}: {reason}")
        self.peer = peer
        self.reason = reason


class PeerFailure(PeerError):
    """A peer program failed (exit code 2, crash, bad output or timeout)."""


@dataclass(frozen=True)
class Peer:
    """One third-party implementation and how to run its programs."""

    name: str
    #: "python" or "node" (the script runs under :data:`PYTHON` / :data:`NODE`), "exec" (the
    #: script is an executable built by the folder's ``install.sh``, a path relative to
    #: ``directory``) or "jvm" (the script is a main class in the jar :attr:`jar`)
    runtime: str
    directory: Path
    server_script: str
    client_script: str
    #: completion form used when ``completion`` is not given ("flag" or "frame")
    default_completion: str
    #: npm packages that must be installed in ``directory`` (name -> exact version)
    npm_packages: tuple[tuple[str, str], ...] = ()
    #: transports its programs speak (:data:`TRANSPORTS`)
    transports: tuple[str, ...] = ("tcp", "ws")
    #: "jvm" runtime: the jar (relative to ``directory``) that holds the main classes and their
    #: dependencies, built by the folder's ``install.sh``
    jar: str = ""
    #: "jvm" runtime: options given to :data:`JAVA` before ``-cp`` (GC, stack size, JIT level)
    jvm_options: tuple[str, ...] = ()
    #: main class (same jar) of a client DAEMON: when set, :func:`run_client` sends the client
    #: program's arguments to ONE long-running daemon process per pytest process instead of
    #: starting a program per run (JVM startup; see :class:`_ClientDaemon`)
    client_daemon: str = ""

    def program_argv(self, script: str) -> list[str]:
        """argv that runs ``script`` (a file or, for "jvm", a main class) of this peer."""
        if self.runtime == "exec":
            return [str(self.directory / script)]
        if self.runtime == "jvm":
            return [JAVA, *self.jvm_options, "-cp", str(self.directory / self.jar), script]
        executable = PYTHON if self.runtime == "python" else NODE
        return [executable, str(self.directory / script)]

    def built_files(self) -> list[Path]:
        """The files the folder's ``install.sh`` builds (executables, jar): empty for the
        interpreted runtimes."""
        if self.runtime == "exec":
            return [self.directory / self.server_script, self.directory / self.client_script]
        if self.runtime == "jvm":
            return [self.directory / self.jar]
        return []

    def transport_args(self, transport: str, path: str = WS_PATH) -> list[str]:
        """The ``--transport``/``--path``/``--ws-library`` flags of ``transport``.

        :raises ValueError: the peer does not speak ``transport``.
        """
        if transport not in self.transports:
            raise ValueError(f"{self.name} speaks {self.transports}, not {transport!r}")
        if transport == "tcp":
            return []
        argv = ["--transport", "ws", "--path", path]
        if transport == "ws-websockets":
            argv += ["--ws-library", "websockets"]
        return argv

    def server_command(self, port: int = 0, *, fragment: int | None = None,
                       completion: str | None = None, request_n: int | None = None,
                       timeout: int = 600, watch_stdin: bool = True,
                       transport: str = "tcp", path: str = WS_PATH) -> list[str]:
        """argv of the server program (see :func:`start_server` for the options)."""
        argv = self.program_argv(self.server_script) + ["--port", str(port),
                                                        "--timeout", str(timeout)]
        argv += self.transport_args(transport, path)
        if fragment is not None:
            argv += ["--fragment", str(fragment)]
        if completion is not None:
            argv += ["--completion", completion]
        if request_n is not None:
            argv += ["--request-n", str(request_n)]
        if watch_stdin:
            argv.append("--watch-stdin")
        return argv

    def client_command(self, port: int, interaction: str, *, transport: str = "tcp",
                       path: str = WS_PATH, **options) -> list[str]:
        """argv of the client program (see :func:`run_client` for the options)."""
        return self.program_argv(self.client_script) + self.client_args(
            port, interaction, transport=transport, path=path, **options)

    def client_args(self, port: int, interaction: str, *, transport: str = "tcp",
                    path: str = WS_PATH, **options) -> list[str]:
        """The client program's arguments (:meth:`client_command` without the executable):
        what a :attr:`client_daemon` is sent."""
        if interaction not in INTERACTIONS:
            raise ValueError(f"unknown interaction {interaction!r}; one of {INTERACTIONS}")
        argv = [interaction, "--port", str(port)]
        argv += self.transport_args(transport, path)
        for name, value in options.items():
            if value is None or value is False:
                continue
            if name not in _CLIENT_OPTIONS:
                raise TypeError(f"unknown client option {name!r}")
            flag = "--" + name.replace("_", "-")
            if name in ("data", "metadata") and isinstance(value, (bytes, bytearray)):
                argv += [flag + "-b64", base64.b64encode(bytes(value)).decode("ascii")]
            elif value is True:
                argv.append(flag)
            else:
                argv += [flag, str(value)]
        return argv


_CLIENT_OPTIONS = frozenset({
    "host", "data", "metadata", "data_size", "metadata_size", "request_n", "take", "count",
    "fragment", "completion", "digest", "timeout", "keepalive", "lifetime", "setup_data",
    "setup_metadata",
})

PEERS: dict[str, Peer] = {
    "rsocket-py": Peer(
        name="rsocket-py",
        runtime="python",
        directory=PEERS_DIR / "py",
        server_script="server.py",
        client_script="client.py",
        default_completion="flag",
        transports=("tcp", "ws", "ws-websockets"),
    ),
    "rsocket-js-1.0.0-alpha.3": Peer(
        name="rsocket-js-1.0.0-alpha.3",
        runtime="node",
        directory=PEERS_DIR / "js-1.0.0-alpha.3",
        server_script="server.js",
        client_script="client.js",
        default_completion="frame",
        npm_packages=(("rsocket-core", "1.0.0-alpha.3"), ("rsocket-tcp-server", "1.0.0-alpha.3"),
                      ("rsocket-tcp-client", "1.0.0-alpha.3"),
                      ("rsocket-websocket-server", "1.0.0-alpha.3"),
                      ("rsocket-websocket-client", "1.0.0-alpha.3"), ("ws", "8.23.0")),
    ),
    "rsocket-js-0.0.27": Peer(
        name="rsocket-js-0.0.27",
        runtime="node",
        directory=PEERS_DIR / "js-0.0.27",
        server_script="server.js",
        client_script="client.js",
        default_completion="frame",
        npm_packages=(("rsocket-core", "0.0.27"), ("rsocket-tcp-server", "0.0.27"),
                      ("rsocket-tcp-client", "0.0.27"), ("rsocket-flowable", "0.0.27"),
                      ("rsocket-websocket-server", "0.0.27"),
                      ("rsocket-websocket-client", "0.0.27"), ("ws", "8.23.0")),
    ),
    "rsocket-java-1.1.5": Peer(
        name="rsocket-java-1.1.5",
        runtime="jvm",
        directory=PEERS_DIR / "java",
        jar="target/rsocket-java-peer.jar",
        server_script="rsocket_tx.interop.Server",
        client_script="rsocket_tx.interop.Client",
        client_daemon="rsocket_tx.interop.ClientDaemon",
        jvm_options=("-XX:+UseSerialGC", "-Xss512k", "-XX:TieredStopAtLevel=1", "-Xmx768m"),
        default_completion="frame",
    ),
    "rsocket-go-0.8.12": Peer(
        name="rsocket-go-0.8.12",
        runtime="exec",
        directory=PEERS_DIR / "go",
        server_script="bin/server",
        client_script="bin/client",
        default_completion="frame",
    ),
    "rsocket-rust-0.7.5": Peer(
        name="rsocket-rust-0.7.5",
        runtime="exec",
        directory=PEERS_DIR / "rust",
        server_script="target/release/server",
        client_script="target/release/client",
        default_completion="frame",
    ),
}

# ---------------------------------------------------------------------------------------------
# Capabilities.  Keys: "<side>:<what>", side "client" (the peer as requester) or "server"
# (the peer as responder).  Value: (supported, reason) - the reason explains a False and
# documents how a True behaves.  Verified against each other, see peers/README.md.
# ---------------------------------------------------------------------------------------------

_PY, _JS1, _JS0 = "rsocket-py", "rsocket-js-1.0.0-alpha.3", "rsocket-js-0.0.27"

_SPLIT_SETUP = ("rsocket-py writes SETUP in several send() calls when it has a SETUP payload "
                "(header, metadata, data), which crashes rsocket-js 1.0.0-alpha.3 servers")
_JS_EMPTY_METADATA = ("rsocket-js decodes M with a zero-length metadata as no metadata (null)")
_PY_ROUND_ROBIN = ("rsocket-py sends one fragment at a time and moves the fragmenting frame to "
                   "the back of its send queue (rsocket_base.py _get_next_frame_to_send), so the "
                   "fragments of consecutive PAYLOADs of one stream interleave (item 1 fragment "
                   "1, item 2 fragment 1, item 1 fragment 2, ...) and a PAYLOAD[C] can overtake "
                   "the rest of a fragmented PAYLOAD: no receiver can reassemble them.  A lone "
                   "fragmented payload (request-response, fire-and-forget, REQUEST_*) is fine "
                   "(seen on the wire against rsocket_tx)")

CAPABILITIES: dict[str, dict[str, tuple[bool, str]]] = {
    _PY: {
        "client:request-response": (True, "a PAYLOAD[C] without N is returned as an empty "
                                          "payload (not exercised by the demo responders)"),
        "client:fire-and-forget": (True, ""),
        "client:metadata-push": (True, "METADATA_PUSH with the M flag set"),
        "client:request-stream": (True, ""),
        "client:request-channel": (True, ""),
        "client:fragment": (True, "fragment size N: each fragment carries N - 3 - header bytes "
                                  "of metadata+data (header 10 on the first REQUEST_STREAM/"
                                  "CHANNEL fragment, else 6); the 3-byte metadata length comes on "
                                  "top, so fragments with M are N + 3 bytes with the prefix; "
                                  "minimum 64"),
        "client:completion-flag": (True, "default: C on the last channel PAYLOAD (or on "
                                         "REQUEST_CHANNEL when count=1)"),
        "client:completion-frame": (True, "separate PAYLOAD[C] after the last payload"),
        "client:empty-metadata": (False, "rsocket-py sets M only for non-empty metadata"),
        "client:receive-empty-metadata": (False, "rsocket-py reports absent metadata as b'' too "
                                                 "(results show \"\" for both)"),
        "client:setup-payload": (True, _SPLIT_SETUP),
        "client:setup-single-write": (False, _SPLIT_SETUP),
        "client:reassemble": (True, ""),
        "client:fragment-channel-payloads": (False, _PY_ROUND_ROBIN),
        "server:request-response": (True, ""),
        "server:fire-and-forget": (True, "fnf event"),
        "server:metadata-push": (True, "metadata_push event"),
        "server:metadata-push-without-m-flag": (False, "rsocket-py reads METADATA_PUSH metadata "
                                                       "only if M is set: rsocket-js 0.0.27's "
                                                       "METADATA_PUSH arrives with empty metadata"),
        "server:keeps-connection-after-metadata-push": (True, ""),
        "server:request-stream": (True, ""),
        "server:request-channel": (True, ""),
        "server:channel-initial-complete": (True, "C on REQUEST_CHANNEL completes the inbound "
                                                  "side"),
        "server:fragment": (True, "see client:fragment for what the size counts"),
        "server:fragment-stream-payloads": (False, _PY_ROUND_ROBIN),
        "server:echo-metadata": (True, "request-response and channel echo metadata"),
        "server:echo-empty-metadata": (False, "rsocket-py sets M only for non-empty metadata"),
        "server:completion-flag": (True, "default: C on the last PAYLOAD"),
        "server:completion-frame": (True, "separate PAYLOAD[C]"),
        "server:reassemble": (True, ""),
        "server:echo-empty-payload": (False, "rsocket-py answers a request-response whose "
                                             "response is empty (data b'', no metadata) with "
                                             "PAYLOAD[C] without N: completion without a value "
                                             "(seen on the wire against rsocket_tx)"),
        "server:survives-split-setup": (True, ""),
        "server:setup-details": (True, "setup event has version, keepalive, lifetime, MIME "
                                       "types, lease/resume flags and the payload"),
        "server:reject-setup": (True, "an exception from on_setup is sent as "
                                      "ERROR[REJECTED_SETUP] with its text"),
        "client:report-setup-rejection": (True, "the ERROR on stream 0 reaches only the "
                                                "handler's on_error; the pending request then "
                                                "fails with CONNECTION_ERROR and no message "
                                                "(TCP) or never (WebSocket): the client program "
                                                "reports the on_error"),
    },
    _JS1: {
        "client:request-response": (True, "a PAYLOAD[C] without N gives payload None"),
        "client:fire-and-forget": (True, ""),
        "client:metadata-push": (False, "rsocket-js 1.0.0-alpha.3 cannot send METADATA_PUSH "
                                        "(RSocketRequester.metadataPush throws "
                                        "'Method not implemented.')"),
        "client:request-stream": (True, ""),
        "client:request-channel": (True, ""),
        "client:fragment": (True, "maxOutboundFragmentSize N counts the frame body after the "
                                  "6-byte header (3-byte metadata length + metadata + data); "
                                  "the first REQUEST_STREAM/CHANNEL fragment is 1 byte over "
                                  "(request n counted as 3 bytes)"),
        "client:completion-flag": (True, "C on the last channel PAYLOAD (or on REQUEST_CHANNEL "
                                         "when count=1)"),
        "client:completion-frame": (True, "default: separate PAYLOAD[C]"),
        "client:empty-metadata": (True, "an empty metadata Buffer is sent with M set"),
        "client:receive-empty-metadata": (False, _JS_EMPTY_METADATA),
        "client:setup-payload": (True, "SETUP in one write"),
        "client:setup-single-write": (True, ""),
        "client:reassemble": (True, ""),
        "client:fragment-channel-payloads": (True, "consecutive channel PAYLOADs are fragmented "
                                                   "one after the other"),
        "server:request-response": (True, ""),
        "server:fire-and-forget": (True, "fnf event"),
        "server:metadata-push": (False, "rsocket-js 1.0.0-alpha.3 closes the connection (TCP "
                                        "FIN, no ERROR frame) when it receives METADATA_PUSH"),
        "server:metadata-push-without-m-flag": (False, "closes the connection on any "
                                                       "METADATA_PUSH"),
        "server:keeps-connection-after-metadata-push": (False, "rsocket-js 1.0.0-alpha.3 closes "
                                                               "the connection (no ERROR frame)"),
        "server:request-stream": (True, ""),
        "server:request-channel": (True, ""),
        "server:channel-initial-complete": (True, ""),
        "server:fragment": (False, "rsocket-js 1.0.0-alpha.3 fragments only as a requester: "
                                   "responder streams are built with fragment size 0"),
        "server:fragment-stream-payloads": (False, "rsocket-js 1.0.0-alpha.3 fragments only as "
                                                   "a requester"),
        "server:echo-metadata": (True, "request-response and channel echo metadata"),
        "server:echo-empty-metadata": (False, _JS_EMPTY_METADATA),
        "server:completion-flag": (True, "C on the last PAYLOAD"),
        "server:completion-frame": (True, "default: separate PAYLOAD[C]"),
        "server:reassemble": (True, ""),
        "server:echo-empty-payload": (True, "PAYLOAD[N|C] with empty data"),
        "server:survives-split-setup": (False, "the whole server process crashes (TypeError) "
                                               "when the first TCP read of a connection holds "
                                               "less than a complete SETUP frame"),
        "server:setup-details": (True, "setup event has keepalive, lifetime, MIME types, "
                                       "flags and the payload (no version)"),
        "server:reject-setup": (True, "an exception from acceptor.accept is sent as "
                                      "ERROR[REJECTED_SETUP] with its message"),
        "client:report-setup-rejection": (True, "pending requests fail first with a plain "
                                                "Error('Closed. Original cause [...]'), then "
                                                "onClose gets RSocketError(code, message)"),
    },
    _JS0: {
        "client:request-response": (True, "a PAYLOAD[C] without N never resolves its Single "
                                          "(client ends with a timeout failure)"),
        "client:fire-and-forget": (True, ""),
        "client:metadata-push": (True, "METADATA_PUSH is sent WITHOUT the M flag"),
        "client:request-stream": (True, ""),
        "client:request-channel": (True, ""),
        "client:fragment": (False, "rsocket-js 0.0.27 never fragments (it only reassembles)"),
        "client:completion-flag": (False, "rsocket-js 0.0.27 always completes a channel with "
                                          "a separate PAYLOAD[C]"),
        "client:completion-frame": (True, "always"),
        "client:empty-metadata": (True, "an empty metadata Buffer is sent with M set"),
        "client:receive-empty-metadata": (False, _JS_EMPTY_METADATA),
        "client:setup-payload": (True, "SETUP in one write"),
        "client:setup-single-write": (True, ""),
        "client:reassemble": (True, ""),
        "client:fragment-channel-payloads": (False, "rsocket-js 0.0.27 never fragments (it "
                                                    "only reassembles)"),
        "server:request-response": (True, "response is PAYLOAD[N|C]"),
        "server:fire-and-forget": (True, "fnf event"),
        "server:metadata-push": (True, "metadata_push event"),
        "server:metadata-push-without-m-flag": (True, "metadata read whatever the M flag"),
        "server:keeps-connection-after-metadata-push": (True, ""),
        "server:request-stream": (True, ""),
        "server:request-channel": (True, ""),
        "server:channel-initial-complete": (False, "rsocket-js 0.0.27 ignores C on "
                                                   "REQUEST_CHANNEL: the echo channel never "
                                                   "completes"),
        "server:fragment": (False, "rsocket-js 0.0.27 never fragments (it only reassembles)"),
        "server:fragment-stream-payloads": (False, "rsocket-js 0.0.27 never fragments (it "
                                                   "only reassembles)"),
        "server:echo-metadata": (False, "rsocket-js 0.0.27 drops response metadata "
                                        "(RSocketMachine._sendStreamPayload never sets M)"),
        "server:echo-empty-metadata": (False, "rsocket-js 0.0.27 drops response metadata"),
        "server:completion-flag": (False, "rsocket-js 0.0.27 always completes streams and "
                                          "channels with a separate PAYLOAD[C]"),
        "server:completion-frame": (True, "always"),
        "server:reassemble": (True, ""),
        "server:echo-empty-payload": (True, "PAYLOAD[N|C] with empty data"),
        "server:survives-split-setup": (True, ""),
        "server:setup-details": (False, "rsocket-js 0.0.27 hands only the SETUP payload to the "
                                        "application: setup event has data/metadata only"),
        "server:reject-setup": (True, "an exception from getRequestHandler is sent as "
                                      "ERROR[REJECTED_SETUP] 'Application rejected setup, "
                                      "reason: <message>' (see SETUP_REJECTION_PREFIX)"),
        "client:report-setup-rejection": (True, "the pending request fails with the ERROR's "
                                                "code and message"),
    },
}


# rsocket-go 0.8.12 (Go module github.com/rsocket/rsocket-go, peers/go): what it does on the
# wire, seen against rsocket_tx (our server's --debug frame log) and the other peers
# (peers/go/README.md).
_GO = "rsocket-go-0.8.12"
_GO_SEPARATE_C = ("rsocket-go completes every stream and channel it sends with a separate "
                  "PAYLOAD[C] (its subscribers' OnComplete); nothing in its API puts C on a "
                  "PAYLOAD with N or on REQUEST_CHANNEL")
_GO_EMPTY_METADATA = ("rsocket-go sets M only for non-empty metadata (payload.New reports "
                      "empty metadata as absent)")
CAPABILITIES[_GO] = {
    "client:request-response": (True, "a PAYLOAD[C] without N resolves the Mono with an "
                                      "empty payload (data b'', no metadata; seen with a raw "
                                      "server)"),
    "client:fire-and-forget": (True, ""),
    "client:metadata-push": (True, "METADATA_PUSH with the M flag set"),
    "client:request-stream": (True, "cancel sends CANCEL"),
    "client:request-channel": (True, "REQUEST_CHANNEL carries the N flag; see "
                                      "client:cancel-channel"),
    "client:fragment": (True, "Fragment(mtu) N: every frame is at most N bytes without the "
                              "3-byte length prefix (header 6, request n 4, metadata length "
                              "3 counted); 10 <= N <= 2^24-4"),
    "client:completion-flag": (False, _GO_SEPARATE_C),
    "client:completion-frame": (True, "always: separate PAYLOAD[C]"),
    "client:empty-metadata": (False, _GO_EMPTY_METADATA),
    "client:receive-empty-metadata": (True, "a PAYLOAD with M and a 0-length metadata is "
                                            "reported as empty metadata, without M as none "
                                            "(seen with a raw server)"),
    "client:setup-payload": (True, "SETUP in one write"),
    "client:setup-single-write": (True, ""),
    "client:reassemble": (True, ""),
    "client:fragment-channel-payloads": (True, "consecutive channel PAYLOADs are fragmented "
                                               "one after the other"),
    "server:request-response": (True, "response is PAYLOAD[N|C]"),
    "server:fire-and-forget": (True, "fnf event"),
    "server:metadata-push": (True, "metadata_push event"),
    "server:metadata-push-without-m-flag": (True, "METADATA_PUSH metadata is the frame body "
                                                  "whatever the M flag"),
    "server:keeps-connection-after-metadata-push": (True, ""),
    "server:request-stream": (True, ""),
    "server:request-channel": (True, "see server:survives-channel-error"),
    "server:channel-initial-complete": (False, "rsocket-go ignores C on REQUEST_CHANNEL "
                                               "(respondRequestChannel only hands the payload "
                                               "on): the echo channel never completes"),
    "server:fragment": (False, "rsocket-go puts the C (and N) of a fragmented "
                               "request-response reply on its FIRST fragment (PAYLOAD[M,F,C,N], "
                               "then PAYLOAD[F,N]..., PAYLOAD[N]): rsocket-py reassembles it, "
                               "but rsocket_tx and both rsocket-js take the C as the end and "
                               "deliver the first fragment alone (seen on the wire); stream and "
                               "channel PAYLOADs (N only) are fragmented correctly"),
    "server:fragment-stream-payloads": (True, "each PAYLOAD's fragments go out together, N on "
                                              "every fragment"),
    "server:echo-metadata": (True, "request-response and channel echo metadata"),
    "server:echo-empty-metadata": (False, _GO_EMPTY_METADATA),
    "server:completion-flag": (False, _GO_SEPARATE_C),
    "server:completion-frame": (True, "always: separate PAYLOAD[C]"),
    "server:reassemble": (True, ""),
    "server:echo-empty-payload": (True, "PAYLOAD[N|C] with empty data"),
    "server:survives-split-setup": (True, "length-prefixed reads"),
    "server:setup-details": (True, "setup event has version, keepalive, lifetime, MIME "
                                   "types, lease/resume flags and the payload"),
    "client:cancel-channel": (False, "rsocket-go's channel requester sends no CANCEL when "
                                     "its subscriber cancels (RequestChannel's DoFinally only "
                                     "forgets the stream): the outbound side goes on to its "
                                     "PAYLOAD[C], then the client closes the connection"),
    "server:survives-channel-error": (False, "an ERROR from the requester on a channel crashes "
                                             "the whole rsocket-go server process: "
                                             "onFrameError has no case for a responder channel, "
                                             "and the transport then formats its error from the "
                                             "released frame ('panic: frame has been "
                                             "released!')"),
    "server:reject-setup": (True, "an error from the ServerAcceptor is sent as "
                                  "ERROR[REJECTED_SETUP] with its text, then the connection "
                                  "is closed"),
    "client:report-setup-rejection": (True, "the ERROR on stream 0 becomes the socket's error: "
                                            "the pending request fails with its code and "
                                            "message when the connection closes"),
}

# rsocket-rust 0.7.5 (crates rsocket_rust 0.7.5, rsocket_rust_transport_tcp/websocket 0.7.4,
# peers/rust): what it does on the wire, seen against rsocket_tx (our server's --debug frame
# log, peers/frameproxy.py) and the other peers (peers/rust/README.md).
_RUST = "rsocket-rust-0.7.5"
_RUST_SEPARATE_C = ("rsocket-rust ends every stream and channel it sends with a separate "
                    "PAYLOAD[C] (DuplexSocket sends it once the stream ends); nothing in its "
                    "API puts C on a PAYLOAD with N or on REQUEST_CHANNEL")
_RUST_FRAGMENT = ("fragment(N): each frame is N bytes without the 3-byte length prefix and "
                  "without the 3-byte metadata length (header 6 + request n 4 + metadata + "
                  "data); continuations are PAYLOAD[F] without N, the last one a PAYLOAD with "
                  "no flag at all (N on the first and last fragments of a channel PAYLOAD), "
                  "a response's first fragment carries C; minimum 64")
_RUST_NO_REQUEST_N = ("rsocket-rust 0.7.5 has no flow control: its requester always sends "
                      "initial request n 2147483647 and never REQUEST_N (no API for it)")
CAPABILITIES[_RUST] = {
    "client:request-response": (True, "a PAYLOAD[C] without N gives payload None"),
    "client:fire-and-forget": (True, ""),
    "client:metadata-push": (False, "rsocket-rust sends METADATA_PUSH on the next request "
                                    "stream id (1, not 0) and without the M flag "
                                    "(DuplexSocket::metadata_push takes self.seq.next()): "
                                    "rsocket_tx, rsocket-py and both rsocket-js ignore a "
                                    "METADATA_PUSH whose stream id is not 0 (only "
                                    "rsocket-rust's own server takes it)"),
    "client:request-stream": (True, "REQUEST_STREAM with initial request n 2147483647"),
    "client:request-channel": (True, "REQUEST_CHANNEL with request n 2147483647 and the N bit "
                                     "(0x20) set; every outbound payload is sent at once, "
                                     "whatever credit the responder granted"),
    "client:request-n": (False, _RUST_NO_REQUEST_N),
    "client:fragment": (True, _RUST_FRAGMENT),
    "client:completion-flag": (False, _RUST_SEPARATE_C),
    "client:completion-frame": (True, "always: separate PAYLOAD[C]"),
    "client:empty-metadata": (True, "an empty metadata is sent with M set and length 0"),
    "client:receive-empty-metadata": (True, "M with a 0-length metadata gives Some(b'') "
                                            "(unfragmented frames; reassembly turns it into "
                                            "None)"),
    "client:setup-payload": (True, "SETUP in one write"),
    "client:setup-single-write": (True, ""),
    "client:reassemble": (True, ""),
    "client:fragment-channel-payloads": (True, "consecutive channel PAYLOADs are fragmented "
                                               "one after the other"),
    "client:cancel-channel": (True, "dropping the response stream sends CANCEL only when the "
                                    "next PAYLOAD of the channel arrives (and again for each "
                                    "later one); the program waits for it"),
    "client:receive-max-frame": (True, "TCP: no length limit; WebSocket: tungstenite's limits "
                                       "(16 MiB frames, 64 MiB messages)"),
    "server:request-response": (True, "response is PAYLOAD[N|C]"),
    "server:fire-and-forget": (True, "fnf event"),
    "server:metadata-push": (True, "metadata_push event"),
    "server:metadata-push-without-m-flag": (True, "METADATA_PUSH metadata is the frame body "
                                                  "whatever the M flag"),
    "server:keeps-connection-after-metadata-push": (True, ""),
    "server:receive-max-frame": (True, "TCP: no length limit; WebSocket: tungstenite's limits "
                                       "(16 MiB frames, 64 MiB messages)"),
    "server:request-stream": (True, ""),
    "server:request-channel": (True, ""),
    "server:survives-channel-error": (True, "an ERROR from the requester ends the inbound "
                                            "side with that error (channel_inbound_error)"),
    "server:request-n": (False, "rsocket-rust 0.7.5 has no flow control: its responder "
                                "ignores the initial request n and REQUEST_N (\"TODO: support "
                                "RequestN\") and sends every item at once; its channel "
                                "responder grants REQUEST_N 2147483647"),
    "server:channel-initial-complete": (False, "rsocket-rust ignores C on REQUEST_CHANNEL "
                                               "(on_request_channel registers the inbound "
                                               "handler whatever the flags): the echo channel "
                                               "never completes"),
    "server:fragment": (True, _RUST_FRAGMENT),
    "server:complete-on-last-fragment": (False, "rsocket-rust puts C (with N and F) on the "
                                                "FIRST fragment of a fragmented "
                                                "request-response answer too: PAYLOAD[M,F,C,N], "
                                                "[M,F] or [F] ..., [C,N] (try_send_payload adds "
                                                "F to the response flags on the first "
                                                "fragment); a receiver that lets C end "
                                                "reassembly (rsocket-java, rsocket-js, "
                                                "rsocket_tx) keeps only the first fragment"),
    "client:reassemble-past-complete": (True, "the Joiner collects every fragment while F is "
                                              "set and takes the flags of the first"),
    "server:fragment-stream-payloads": (False, "rsocket-rust's channel responder never "
                                               "fragments (on_request_channel builds its "
                                               "PAYLOADs without the splitter): a channel "
                                               "PAYLOAD over the fragment size goes out whole "
                                               "(stream PAYLOADs are fragmented one after the "
                                               "other)"),
    "server:echo-metadata": (True, "request-response and channel echo metadata"),
    "server:echo-empty-metadata": (True, "an empty metadata is echoed with M set and length 0"),
    "server:completion-flag": (False, _RUST_SEPARATE_C),
    "server:completion-frame": (True, "always: separate PAYLOAD[C]"),
    "server:reassemble": (True, ""),
    "server:echo-empty-payload": (True, "PAYLOAD[N|C] with empty data"),
    "server:survives-split-setup": (True, "length-prefixed reads (tokio-util codec)"),
    "server:setup-details": (True, "setup event has version, keepalive, lifetime, MIME types, "
                                   "lease/resume flags and the payload (the program's wire "
                                   "tap sees the SETUP frame)"),
    "server:reject-setup": (True, "an error from the acceptor is sent as ERROR[REJECTED_SETUP] "
                                  "with its text; the connection stays open"),
    "client:report-setup-rejection": (True, "rsocket-rust drops an ERROR on stream 0 "
                                            "(on_error finds no handler) and the request "
                                            "waits for ever: the client program reports the "
                                            "ERROR its wire tap read"),
}
# rsocket-java 1.1.5 (Maven Central io.rsocket:rsocket-core + rsocket-transport-netty, the
# reference implementation; peers/java): what it does on the wire, seen against rsocket_tx (our
# server's --debug frame log), through peers/frameproxy.py and against the other peers
# (peers/java/README.md).
_JAVA = "rsocket-java-1.1.5"
_JAVA_SEPARATE_C = ("rsocket-java ends every stream and channel it sends with a separate "
                    "PAYLOAD[C] (Reactor onComplete after the last onNext); it never sets C on "
                    "a PAYLOAD with N, and on REQUEST_CHANNEL only with leasing")
_JAVA_FRAGMENT = ("fragment(mtu) N counts the whole frame with the 3-byte length prefix: "
                  "frames of N - 3 bytes (header 6 + request n 4 on the first REQUEST_STREAM/"
                  "CHANNEL fragment + metadata length 3 when it carries metadata + metadata + "
                  "data); over WebSocket (no prefix) the frames are N - 3 bytes too; "
                  "continuations are PAYLOAD[F,N] with M while they carry metadata, the last "
                  "fragment of a response carries its C; minimum 64")
_JAVA_EMPTY_METADATA = "M with a 0-length metadata, both ways (Payload.hasMetadata())"
_JAVA_MAX_FRAME = ("over TCP rsocket-java reads frames of at most 16,777,212 bytes: its "
                   "RSocketLengthCodec is a Netty LengthFieldBasedFrameDecoder whose maximum "
                   "(16,777,215) counts the 3-byte length field too; a longer frame (up to the "
                   "24-bit maximum 16,777,215 that rsocket_tx used to fragment at) is dropped "
                   "without a word and the stream hangs (seen with a 17 MB fire-and-forget and "
                   "request-response echo from rsocket_tx); rsocket_tx now sends frames of at "
                   "most 16,777,212 bytes unless told otherwise "
                   "(config.DEFAULT_OUTBOUND_FRAME_LIMIT), which it reads")
CAPABILITIES[_JAVA] = {
    "client:request-response": (True, "a PAYLOAD[C] without N completes the Mono empty: "
                                      "payload None (source: RequestResponseRequesterMono."
                                      "handleComplete)"),
    "client:fire-and-forget": (True, ""),
    "client:metadata-push": (True, "METADATA_PUSH with the M flag set"),
    "client:request-stream": (True, ""),
    "client:request-channel": (True, "the first outbound payload travels in REQUEST_CHANNEL; "
                                     "the others follow the responder's REQUEST_N"),
    "client:request-n": (True, "request(K) exactly: initial request n K, then REQUEST_N K "
                               "after every K received"),
    "client:fragment": (True, _JAVA_FRAGMENT),
    "client:completion-flag": (False, _JAVA_SEPARATE_C),
    "client:completion-frame": (True, "always: separate PAYLOAD[C]"),
    "client:empty-metadata": (True, _JAVA_EMPTY_METADATA),
    "client:receive-empty-metadata": (True, _JAVA_EMPTY_METADATA),
    "client:setup-payload": (True, "SETUP in one write"),
    "client:setup-single-write": (True, ""),
    "client:reassemble": (True, ""),
    "client:fragment-channel-payloads": (True, "consecutive channel PAYLOADs are fragmented "
                                               "one after the other"),
    "client:report-setup-rejection": (True, "the pending request fails with "
                                            "RejectedSetupException: the ERROR's code and "
                                            "message"),
    "server:request-response": (True, "response is PAYLOAD[N|C]"),
    "server:fire-and-forget": (True, "fnf event"),
    "server:metadata-push": (True, "metadata_push event"),
    "server:metadata-push-without-m-flag": (True, "METADATA_PUSH metadata is the frame body "
                                                  "whatever the M flag (MetadataPushFrameCodec."
                                                  "metadata; seen with rsocket-js 0.0.27)"),
    "server:keeps-connection-after-metadata-push": (True, ""),
    "server:request-stream": (True, ""),
    "server:request-channel": (True, ""),
    "server:request-n": (True, "the echo channel grants REQUEST_N K (request(K + 1) at "
                               "first: rsocket-java counts the REQUEST_CHANNEL payload in the "
                               "first request and sends REQUEST_N(n - 1))"),
    "server:channel-initial-complete": (True, "C on REQUEST_CHANNEL completes the inbound "
                                              "side"),
    "server:fragment": (True, _JAVA_FRAGMENT),
    "server:fragment-stream-payloads": (True, "each PAYLOAD's fragments go out together"),
    "server:echo-metadata": (True, "request-response and channel echo metadata"),
    "server:echo-empty-metadata": (True, _JAVA_EMPTY_METADATA),
    "server:completion-flag": (False, _JAVA_SEPARATE_C),
    "server:completion-frame": (True, "always: separate PAYLOAD[C]"),
    "server:reassemble": (True, ""),
    "server:echo-empty-payload": (True, "PAYLOAD[N|C] with empty data"),
    "server:survives-split-setup": (True, "length-prefixed reads (Netty frame decoder)"),
    "server:setup-details": (True, "setup event has version (from the program's frame spy), "
                                   "keepalive, lifetime, MIME types, lease/resume flags and "
                                   "the payload"),
    "server:reject-setup": (True, "an error from the SocketAcceptor is sent as "
                                  "ERROR[REJECTED_SETUP] with its message, then the "
                                  "connection is closed"),
    "client:receive-max-frame": (True, _JAVA_MAX_FRAME),
    "server:receive-max-frame": (True, _JAVA_MAX_FRAME),
}
#: every other peer reads the largest frames rsocket_tx sends unasked (the beyond-max-frame-size
#: tests: 16,777,212 bytes, config.DEFAULT_OUTBOUND_FRAME_LIMIT)
for _table in CAPABILITIES.values():
    _table.setdefault("client:receive-max-frame", (True, ""))
    _table.setdefault("server:receive-max-frame", (True, ""))
#: every other peer honours request n (the demo programs' --request-n)
for _table in CAPABILITIES.values():
    _table.setdefault("client:request-n", (True, ""))
    _table.setdefault("server:request-n", (True, ""))
#: a response whose FIRST fragment carries C (rsocket-rust's, "server:complete-on-last-
#: fragment"): the rsocket-java and rsocket-js requesters stop reassembling there, as
#: rsocket_tx does; rsocket-py, rsocket-go and rsocket-rust go on to the fragment without F
#: (seen: selfcheck.py against the rsocket-rust server with --fragment 64 and 1000)
_C_ENDS_REASSEMBLY = ("a fragment with C ends reassembly even when F is set: the first "
                      "fragment of rsocket-rust's PAYLOAD[M,F,C,N] ... [C,N] is delivered alone "
                      "(58 B of metadata, no data, with --fragment 64) and the rest is dropped")
for _name in (_JS1, _JS0, _JAVA):
    CAPABILITIES[_name]["client:reassemble-past-complete"] = (False, _C_ENDS_REASSEMBLY)
CAPABILITIES[_GO]["server:complete-on-last-fragment"] = (False, "see server:fragment")
for _table in CAPABILITIES.values():
    _table.setdefault("server:complete-on-last-fragment", (True, ""))
    _table.setdefault("client:reassemble-past-complete", (True, "F wins: reassembly goes on "
                                                                "to the fragment without F"))
#: every other peer's channel requester sends CANCEL when it cancels, and every other peer's
#: channel responder survives an ERROR from the requester (both checked by the interop tests)
for _table in CAPABILITIES.values():
    _table.setdefault("server:survives-close-mid-stream", (True, ""))
    _table.setdefault("client:cancel-channel", (True, "CANCEL"))
    _table.setdefault("server:survives-channel-error", (True, ""))

#: Capabilities that differ on a transport: ``(peer, transport) -> {capability: (supported,
#: reason)}``, on top of :data:`CAPABILITIES` (which describes TCP).  Checked like the TCP
#: table: selfcheck.py --transport ws, and against rsocket_tx (README.md, "WebSocket").
_WS_SETUP = ("over WebSocket a frame is one binary message: rsocket-py's SETUP (with a payload) "
             "goes out as one message, so nothing is split")
TRANSPORT_CAPABILITIES: dict[tuple[str, str], dict[str, tuple[bool, str]]] = {
    (_PY, "ws"): {"client:setup-single-write": (True, _WS_SETUP)},
    (_PY, "ws-websockets"): {"client:setup-single-write": (True, _WS_SETUP)},
    (_JS1, "ws"): {"server:survives-split-setup": (True, "over WebSocket a SETUP cannot be "
                                                         "split (one message per frame)"),
                   "server:survives-close-mid-stream": (
                       False, "the whole rsocket-js 1.0.0-alpha.3 WebSocket server process dies "
                              "(uncaught 'WebSocket is not open: readyState 2 (CLOSING)') when "
                              "it emits a stream item after the client began closing the "
                              "WebSocket: seen when a client cancels and closes at once")},
    (_JAVA, "ws"): {
        "client:receive-max-frame": (True, "WebSocket messages up to 16,777,215 bytes "
                                           "(maxFramePayloadLength)"),
        "server:receive-max-frame": (True, "WebSocket messages up to 16,777,215 bytes "
                                           "(maxFramePayloadLength)"),
    },
}


#: What a peer's demo server puts before the application's text in the ERROR[REJECTED_SETUP]
#: message (peer -> prefix; none for the peers that send the text alone).
SETUP_REJECTION_PREFIX: dict[str, str] = {
    _JS0: "Application rejected setup, reason: ",
}


def _capability(peer: str, capability: str, transport: str) -> tuple[bool, str]:
    override = TRANSPORT_CAPABILITIES.get((peer, transport), {})
    if capability in override:
        return override[capability]
    return CAPABILITIES[peer][capability]


def supports(peer: str, capability: str, transport: str = "tcp") -> bool:
    """Whether ``peer`` can do ``capability`` (a key of :data:`CAPABILITIES`) on
    ``transport``."""
    return _capability(peer, capability, transport)[0]


def reason(peer: str, capability: str, transport: str = "tcp") -> str:
    """The explanation recorded for ``capability`` of ``peer`` (why not, or how)."""
    return _capability(peer, capability, transport)[1]


def unsupported_reason(peer: str, *capabilities: str, transport: str = "tcp") -> str | None:
    """The reason of the first capability ``peer`` lacks on ``transport``, or None if it has
    them all.

    Meant for ``pytest.skip(...)``/``xfail`` messages.
    """
    for capability in capabilities:
        supported, why = _capability(peer, capability, transport)
        if not supported:
            where = "" if transport == "tcp" else f" over {transport}"
            return f"{peer} lacks {capability}{where}: {why}"
    return None


def targets(transports=TRANSPORTS) -> list[tuple[str, str]]:
    """Every ``(peer, transport)`` pair the peers speak, restricted to ``transports``: the
    parametrization of the interop tests."""
    return [(name, transport) for name, peer in PEERS.items() for transport in peer.transports
            if transport in transports]


# ---------------------------------------------------------------------------------------------
# Payload helpers
# ---------------------------------------------------------------------------------------------

def pattern(n: int) -> bytes:
    """The bytes sent for ``data_size=n``/``metadata_size=n``: byte i is ``i % 256``."""
    return bytes(range(256)) * (n // 256) + bytes(range(n % 256))


def digest_of(data: bytes | None, metadata: bytes | None = None) -> dict:
    """The digest form of a payload, to compare with results obtained with ``digest=True``."""
    return {
        "data_len": len(data or b""),
        "data_sha256": hashlib.sha256(data or b"").hexdigest(),
        "metadata_len": None if metadata is None else len(metadata),
        "metadata_sha256": None if metadata is None else hashlib.sha256(metadata).hexdigest(),
    }


def payload_bytes(described: dict) -> tuple[bytes, bytes | None]:
    """``(data, metadata)`` of a full-form payload dict (metadata None when absent)."""
    metadata = described.get("metadata")
    return (base64.b64decode(described["data"]),
            None if metadata is None else base64.b64decode(metadata))


def datas(result: dict) -> list[bytes]:
    """The data of every payload of a stream/channel result."""
    return [payload_bytes(p)[0] for p in result.get("payloads", [])]


# ---------------------------------------------------------------------------------------------
# Installation check
# ---------------------------------------------------------------------------------------------

def ensure_installed(peers=None) -> None:
    """Check that the peers can run.

    :param peers: names to check (default: all of :data:`PEERS`).
    :raises PeersNotInstalled: with a message telling to run ``install_peers.sh``.
    """
    problems = []
    for name in peers or PEERS:
        peer = PEERS[name]
        if peer.runtime in ("exec", "jvm"):
            problems += [f"{name}: {path} not built" for path in peer.built_files()
                         if not path.exists()]
        elif peer.runtime == "node":
            if shutil.which(NODE) is None and not Path(NODE).exists():
                problems.append(f"{name}: node executable {NODE!r} not found (Node 20 needed)")
                continue
            problems += _npm_problems(peer, peer.npm_packages)
        else:
            check = subprocess.run(
                [PYTHON, "-c", "import importlib.metadata as m, aiohttp, websockets; "
                               "print(m.version('rsocket'))"],
                capture_output=True, text=True, timeout=60,
            )
            if check.returncode != 0:
                problems.append(f"{name}: rsocket, aiohttp or websockets not importable by "
                                f"{PYTHON}")
            elif check.stdout.strip() != "0.4.20":
                problems.append(f"{name}: rsocket {check.stdout.strip()} installed, "
                                "expected 0.4.20")
    raise_if_problems(problems)


def _npm_problems(peer: Peer, packages) -> list[str]:
    """What is wrong with the ``(name, version)`` npm ``packages`` in ``peer``'s folder."""
    problems = []
    for package, version in packages:
        manifest = peer.directory / "node_modules" / package / "package.json"
        try:
            found = json.loads(manifest.read_text())["version"]
        except (OSError, ValueError, KeyError):
            problems.append(f"{peer.name}: {package} missing in {peer.directory}/node_modules")
            continue
        if found != version:
            problems.append(f"{peer.name}: {package} is {found}, expected {version}")
    return problems


def raise_if_problems(problems: list[str]) -> None:
    if problems:
        raise PeersNotInstalled(
            "interop peers not installed:\n  " + "\n  ".join(problems)
            + f"\nRun: {INSTALL_SCRIPT}"
        )


# ---------------------------------------------------------------------------------------------
# Servers
# ---------------------------------------------------------------------------------------------

class LineReader(threading.Thread):
    """Drains a pipe into a queue of lines so the child never blocks on a full pipe."""

    def __init__(self, stream, sink: queue.Queue | None):
        super().__init__(daemon=True)
        self._stream = stream
        self._sink = sink
        self.lines: list[str] = []

    def run(self) -> None:
        for raw in iter(self._stream.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            if self._sink is not None:
                self._sink.put(line)
        if self._sink is not None:
            self._sink.put(None)  # EOF marker


class PeerServer:
    """A running peer server.  Unpacks as ``process, port = server``.

    :ivar peer: peer name.  :ivar process: the :class:`subprocess.Popen`.
    :ivar port: the TCP port it listens on (127.0.0.1).
    :ivar transport: ``tcp``, ``ws`` or ``ws-websockets`` (:data:`TRANSPORTS`).
    :ivar path: URL path of a WebSocket server.
    :ivar events: every JSON event consumed so far by the ``*event*`` methods.
    """

    def __init__(self, peer: str, process: subprocess.Popen, argv: list[str]):
        self.peer = peer
        self.process = process
        self.argv = argv
        self.port: int | None = None
        self.transport = "tcp"
        self.path = WS_PATH
        self.events: list[dict] = []
        self._lines: queue.Queue = queue.Queue()
        self._eof = False
        self._stdout = LineReader(process.stdout, self._lines)
        self._stderr = LineReader(process.stderr, None)
        self._stdout.start()
        self._stderr.start()

    def __iter__(self):
        return iter((self.process, self.port))

    @property
    def url(self) -> str:
        """Where our client connects: ``tcp://127.0.0.1:PORT`` or ``ws://127.0.0.1:PORT/PATH``
        (``ws-websockets`` is a ``ws://`` server too)."""
        if self.transport == "tcp":
            return f"tcp://{HOST}:{self.port}"
        return f"ws://{HOST}:{self.port}{self.path}"

    def __enter__(self) -> PeerServer:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def stderr(self) -> str:
        """Everything the server wrote to stderr so far."""
        return "\n".join(self._stderr.lines)

    @property
    def stdout_lines(self) -> list[str]:
        """Every stdout line so far (LISTENING and events, consumed or not)."""
        return list(self._stdout.lines)

    def _next_line(self, deadline: float) -> str | None:
        if self._eof:
            return None
        remaining = deadline - time.monotonic()
        line = self._lines.get(timeout=remaining) if remaining > 0 else self._lines.get_nowait()
        if line is None:
            self._eof = True
        return line

    def _wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._next_line(deadline)
            except queue.Empty:
                self.stop()
                raise PeerFailure(f"{self.peer} server did not print LISTENING within "
                                  f"{timeout}s; stderr:\n{self.stderr}") from None
            if line is None:
                code = self.process.wait(timeout=10)
                self._stderr.join(5)
                last = self._stdout.lines[-1] if self._stdout.lines else ""
                if code == EXIT_UNSUPPORTED:
                    raise PeerUnsupported(self.peer, _json_or_none(last, "unsupported") or last)
                raise PeerFailure(f"{self.peer} server exited with {code} before listening: "
                                  f"{last}\nstderr:\n{self.stderr}")
            if line.startswith("LISTENING "):
                self.port = int(line.split()[1])
                return

    def next_event(self, timeout: float = 10.0, predicate=None) -> dict:
        """Consume events until one satisfies ``predicate`` (default: any) and return it.

        :param timeout: seconds to wait overall.
        :raises PeerFailure: on timeout or if the server's stdout ended.
        """
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._next_line(deadline)
            except queue.Empty:
                raise PeerFailure(f"{self.peer} server: no matching event within {timeout}s; "
                                  f"consumed: {self.events[-10:]}\nstderr:\n{self.stderr}"
                                  ) from None
            if line is None:
                raise PeerFailure(f"{self.peer} server output ended (exit code "
                                  f"{self.process.poll()}); stderr:\n{self.stderr}")
            try:
                event = json.loads(line)
            except ValueError:
                continue  # not an event (library noise on stdout)
            self.events.append(event)
            if predicate is None or predicate(event):
                return event

    def wait_event(self, name: str, timeout: float = 10.0, **match) -> dict:
        """Consume events until one named ``name`` whose fields equal ``match`` arrives."""
        return self.next_event(timeout, lambda e: e.get("event") == name
                               and all(e.get(k) == v for k, v in match.items()))

    def drain_events(self) -> list[dict]:
        """Consume and return the events already printed, without waiting."""
        out = []
        while True:
            try:
                out.append(self.next_event(0))
            except PeerFailure:
                return out

    def next_event_deferred(self, timeout: float = 10.0, predicate=None):
        """:meth:`next_event` in a thread: a Deferred for reactor-based tests."""
        from twisted.internet.threads import deferToThread
        return deferToThread(self.next_event, timeout, predicate)

    def wait_event_deferred(self, name: str, timeout: float = 10.0, **match):
        """:meth:`wait_event` in a thread: a Deferred for reactor-based tests."""
        from twisted.internet.threads import deferToThread
        return deferToThread(self.wait_event, name, timeout, **match)

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop the server (stdin EOF, then kill) and return its exit code."""
        return stop_program(self.process, (self._stdout, self._stderr), timeout)


def stop_program(process: subprocess.Popen, readers, timeout: float) -> int | None:
    """Stop a peer program that exits at stdin EOF: close its stdin, kill it if it is still
    running after ``timeout`` seconds, then join its :class:`LineReader` ``readers``.

    :returns: its exit code.
    """
    if process.poll() is None:
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)
    elif process.stdin and not process.stdin.closed:
        process.stdin.close()
    for reader in readers:
        reader.join(timeout)
    return process.returncode


def _json_or_none(line: str, key: str):
    try:
        return json.loads(line).get(key)
    except (ValueError, AttributeError):
        return None


#: seconds a peer server lives at most when nobody stops it: a safety net only, since every
#: server is started with ``--watch-stdin`` and stops when its stdin (our pipe) closes; long
#: enough for the slowest module on a loaded machine (10 minutes once was not)
SERVER_LIFETIME = 4 * 3600


def start_server(peer: str, port: int = 0, fragment: int | None = None, *,
                 completion: str | None = None, request_n: int | None = None,
                 transport: str = "tcp", path: str = WS_PATH,
                 startup_timeout: float = 30.0, lifetime: int = SERVER_LIFETIME) -> PeerServer:
    """Start ``peer``'s demo server and wait (reading its stdout) until it listens.

    :param peer: a key of :data:`PEERS`.
    :param port: TCP port on 127.0.0.1, 0 = any free port (read back from ``.port``).
    :param fragment: fragment responses (rsocket-py only; size counts the whole frame incl.
        the 3-byte length prefix on TCP, the frame alone on WebSocket, >= 64).
    :param completion: ``"flag"`` (C on the last PAYLOAD) or ``"frame"`` (separate PAYLOAD[C])
        for streams and channels; None = the peer's default (:attr:`Peer.default_completion`).
    :param request_n: credit batch the channel responder grants (default 256).
    :param transport: one of the peer's :attr:`Peer.transports` (:data:`TRANSPORTS`).
    :param path: URL path of a WebSocket server (rsocket-py aiohttp serves only that path;
        the others accept any).
    :param startup_timeout: seconds to wait for ``LISTENING``.
    :param lifetime: seconds after which the server exits by itself.
    :returns: a :class:`PeerServer` (also unpacks as ``(process, port)``); stop it with
        ``.stop()`` or use it as a context manager.  ``.transport`` and ``.url`` say how to
        reach it.
    :raises PeerUnsupported: the peer cannot do the requested option.
    :raises PeerFailure: it did not start.
    :raises ValueError: the peer does not speak ``transport``.
    """
    argv = PEERS[peer].server_command(port, fragment=fragment, completion=completion,
                                      request_n=request_n, timeout=lifetime,
                                      transport=transport, path=path)
    server = start_program(peer, argv, PEERS[peer].directory, startup_timeout)
    server.transport = transport
    server.path = path
    return server


def start_program(label: str, argv: list[str], cwd: Path, startup_timeout: float
                   ) -> PeerServer:
    """Start a server program and wait until it prints ``LISTENING``.

    :raises PeerUnsupported: it exited with code 3.  :raises PeerFailure: it did not start.
    """
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=cwd)
    server = PeerServer(label, process, argv)
    server._wait_listening(startup_timeout)
    return server


def start_daemon(make, argv: list[str], cwd: Path, startup_timeout: float):
    """Start a client daemon program (commands on its stdin, answers on its stdout) and wait
    until it is ready.

    :param make: ``make(process, argv)`` wraps the :class:`subprocess.Popen` in an object with
        ``wait_ready(timeout)`` (raising :class:`PeerFailure`) and ``stop(timeout)``, e.g. a
        daemon class.
    :returns: that object, once ready.
    :raises PeerFailure: it did not start (it is stopped).
    """
    process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, cwd=cwd)
    daemon = make(process, argv)
    try:
        daemon.wait_ready(startup_timeout)
    except BaseException:
        daemon.stop(5)
        raise
    return daemon


def start_server_deferred(peer: str, port: int = 0, fragment: int | None = None, **kwargs):
    """:func:`start_server` in a thread: a Deferred firing with the :class:`PeerServer`."""
    from twisted.internet.threads import deferToThread
    return deferToThread(start_server, peer, port, fragment, **kwargs)


# ---------------------------------------------------------------------------------------------
# Clients
# ---------------------------------------------------------------------------------------------

def run_client(peer: str, port: int, interaction: str, *, timeout: float | None = None,
               **options) -> dict:
    """Run ``peer``'s client for one interaction against 127.0.0.1:``port``.

    :param interaction: one of :data:`INTERACTIONS`.
    :param timeout: seconds for the whole run (default: the client's own ``timeout`` option
        (30) + 15); the process is killed after it.
    :param transport: (keyword) one of the peer's :attr:`Peer.transports`, default ``tcp``;
        ``path`` (keyword): the WebSocket URL path (default :data:`WS_PATH`).
    :param options: ``data``/``metadata`` (str = UTF-8, bytes = raw), ``data_size``,
        ``metadata_size`` (bytes of :func:`pattern`), ``request_n`` (credit batch: the client
        requests that many, and again after each batch), ``take`` (cancel after that many
        payloads), ``count`` (channel: send b"0".."count-1", default 3), ``fragment``
        (fragment requests, see :data:`CAPABILITIES` for what the size counts),
        ``completion`` ("flag"/"frame", channel outbound), ``digest`` (report sha256+length),
        ``timeout`` (client-side seconds), ``keepalive``/``lifetime`` (SETUP, ms),
        ``setup_data``/``setup_metadata`` (str, SETUP payload; see "client:setup-single-write").
    :returns: the JSON result with ``"exit_code"`` (0 success, 1 peer sent ERROR).
    :raises PeerUnsupported: exit code 3.
    :raises PeerFailure: exit code 2, another code, no JSON, or timeout.
    """
    the_peer = PEERS[peer]
    if timeout is None:
        timeout = int(options.get("timeout") or 30) + 15
    label = f"{peer} client {interaction}"
    if the_peer.client_daemon:
        args = the_peer.client_args(port, interaction, **options)
        return _client_daemon(peer).run(args, label, timeout)
    argv = the_peer.client_command(port, interaction, **options)
    return run_program(label, argv, the_peer.directory, timeout, peer=peer)


def run_client_deferred(peer: str, port: int, interaction: str, **kwargs):
    """:func:`run_client` in a thread: a Deferred firing with the result dict."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_client, peer, port, interaction, **kwargs)


def _text(value) -> str:
    if value is None:
        return ""
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


# ---------------------------------------------------------------------------------------------
# Routing, composite metadata and authentication peers (peers/README.md, "Routing and
# composite metadata"): a routing CLIENT for rsocket-py (``py/routing_client.py``, rsocket-py's
# ``rsocket.extensions`` helpers) and rsocket-js 1.0.0-alpha.3 (``messaging_client.js``,
# rsocket-messaging's RSocketRequester + rsocket-composite-metadata), and a routing SERVER for
# rsocket-py (``py/routing_server.py``, RequestRouter + RoutingRequestHandler).
# ---------------------------------------------------------------------------------------------

#: peer -> client program of the routing clients
ROUTING_CLIENTS: dict[str, str] = {
    "rsocket-py": "routing_client.py",
    "rsocket-js-1.0.0-alpha.3": "messaging_client.js",
}
#: the peer whose routing server exists (rsocket-messaging 1.0.0-alpha.3 has a routing
#: RSocketResponder but nothing for authentication: no js routing server here)
ROUTING_SERVER_PEER = "rsocket-py"
ROUTING_SERVER_SCRIPT = "routing_server.py"
ROUTING_INTERACTIONS = ("request-response", "fire-and-forget", "request-stream",
                        "request-channel")
#: npm packages the js routing client needs besides the peer's own
ROUTING_NPM_PACKAGES = (("rsocket-composite-metadata", "1.0.0-alpha.3"),
                        ("rsocket-messaging", "1.0.0-alpha.3"))
#: credentials the routing server accepts unless told otherwise
ROUTING_SERVER_USERS = {"alice": "secret"}
ROUTING_SERVER_TOKENS = ("t0ken",)


def ensure_routing_installed(peers=None) -> None:
    """:func:`ensure_installed` for the routing peers, plus the js routing packages.

    :raises PeersNotInstalled: something is missing (run ``install_peers.sh``).
    """
    chosen = list(peers or ROUTING_CLIENTS)
    ensure_installed(chosen)
    raise_if_problems([problem for name in chosen if PEERS[name].runtime == "node"
                        for problem in _npm_problems(PEERS[name], ROUTING_NPM_PACKAGES)])


def _pair(value, sep: str) -> str:
    if isinstance(value, str):
        return value
    left, right = value
    return f"{left}{sep}{right}"


def routing_client_command(peer: str, port: int, interaction: str, *, host: str | None = None,
                           route: str | None = None, data=None, data_text: str | None = None,
                           next=(), next_metadata: bool = False, auth_simple=None,
                           auth_bearer: str | None = None, auth_custom=None,
                           setup_auth_simple=None, setup_auth_bearer: str | None = None,
                           custom_entries=(), stream_data_mime: str | None = None,
                           data_mime_type: str | None = None,
                           metadata_mime_type: str | None = None, take: int | None = None,
                           request_n: int | None = None, timeout: int | None = None
                           ) -> list[str]:
    """argv of a routing client (see :func:`run_routing_client` for the options)."""
    if interaction not in ROUTING_INTERACTIONS:
        raise ValueError(f"unknown interaction {interaction!r}; one of {ROUTING_INTERACTIONS}")
    if data is not None and data_text is not None:
        raise TypeError("give data (JSON-encoded here) or data_text (sent as is), not both")
    the_peer = PEERS[peer]
    argv = the_peer.program_argv(ROUTING_CLIENTS[peer]) + ["--port", str(port),
                                                    "--interaction", interaction]

    def add(flag: str, value) -> None:
        if value is not None:
            argv.extend([flag, str(value)])

    add("--host", host)
    add("--route", route)
    add("--data", json.dumps(data) if data is not None else data_text)
    for item in next:
        add("--next", json.dumps(item))
    if next_metadata:
        argv.append("--next-metadata")
    add("--auth-simple", None if auth_simple is None else _pair(auth_simple, ":"))
    add("--auth-bearer", auth_bearer)
    add("--auth-custom", None if auth_custom is None else _pair(auth_custom, "="))
    add("--setup-auth-simple", None if setup_auth_simple is None
        else _pair(setup_auth_simple, ":"))
    add("--setup-auth-bearer", setup_auth_bearer)
    for entry in custom_entries:
        add("--custom-entry", _pair(entry, "="))
    add("--stream-data-mime", stream_data_mime)
    add("--data-mime-type", data_mime_type)
    add("--metadata-mime-type", metadata_mime_type)
    add("--take", take)
    add("--request-n", request_n)
    add("--timeout", timeout)
    return argv


def flag_options(**options) -> list[str]:
    """Command-line flags for ``options``: ``name_x=value`` becomes ``--name-x value``,
    ``True`` a bare ``--name-x``; ``None`` and ``False`` are left out."""
    argv: list[str] = []
    for name, value in options.items():
        if value is None or value is False:
            continue
        flag = "--" + name.replace("_", "-")
        argv += [flag] if value is True else [flag, str(value)]
    return argv


def run_program(label: str, argv: list[str], cwd: Path, timeout: float, *,
                 peer: str | None = None) -> dict:
    """Run one client program; its last JSON line plus ``exit_code`` (0 or 1).

    :param label: names the program in errors.
    :param peer: the :attr:`PeerUnsupported.peer` (default: ``label``).
    :raises PeerUnsupported: exit code 3.  :raises PeerFailure: anything else.
    """
    try:
        completed = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                                   timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        raise PeerFailure(f"{label} timed out after {timeout}s: {argv}\nstderr:\n"
                          f"{_text(exc.stderr)}") from None
    stdout, stderr = _text(completed.stdout), _text(completed.stderr)
    result = None
    lines = [line for line in stdout.splitlines() if line.startswith("{")]
    if lines:
        try:
            result = json.loads(lines[-1])
        except ValueError:
            result = None
    return _client_outcome(label, argv, completed.returncode, result, stdout, stderr,
                           peer or label)


def _client_outcome(label: str, argv: list[str], code: int | None, result: dict | None,
                    stdout: str, stderr: str, peer: str) -> dict:
    """``result`` plus ``exit_code`` for exit codes 0 and 1.

    :raises PeerUnsupported: exit code 3 (reason from ``result``).
    :raises PeerFailure: any other code, or no JSON ``result``.
    """
    if code == EXIT_UNSUPPORTED and result is not None:
        raise PeerUnsupported(peer, result.get("unsupported", ""))
    if code not in (EXIT_OK, EXIT_RSOCKET_ERROR) or result is None:
        raise PeerFailure(f"{label} exited with {code}: {argv}\nstdout:\n{stdout}\n"
                          f"stderr:\n{stderr}")
    result["exit_code"] = code
    return result


#: seconds a client daemon may take to start (JVM startup on a loaded machine)
DAEMON_STARTUP_TIMEOUT = 60.0


class _ClientDaemon:
    """ONE running client daemon of a peer (:attr:`Peer.client_daemon`): every
    :func:`run_client` of that peer in this process goes through it, one run at a time.

    Protocol: the daemon prints ``{"ready": true, ...}`` once started, then answers each stdin
    line (a JSON array: the client program's arguments, :meth:`Peer.client_args`) with one
    JSON line, the client's result plus ``"exit_code"`` (what the program would exit with).
    Started on first use, started again when it has died; a run that times out kills it (its
    late answer must not be taken for the next run's).  :func:`stop_client_daemons` (at exit)
    closes its stdin, which ends it.
    """

    def __init__(self, peer: Peer) -> None:
        self.peer = peer
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._lines: queue.Queue = queue.Queue()
        #: the last stderr lines, for error messages, and how many there were in all
        self._stderr: collections.deque = collections.deque(maxlen=200)
        self._stderr_count = 0

    @staticmethod
    def _pump(stream, sink) -> None:
        for raw in iter(stream.readline, b""):
            sink(raw.decode("utf-8", "replace").rstrip("\n"))
        sink(None)  # EOF marker

    def _start(self) -> None:
        argv = self.peer.program_argv(self.peer.client_daemon)
        self._lines = lines = queue.Queue()
        self._stderr.clear()
        self._process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, cwd=self.peer.directory)
        for stream, sink in ((self._process.stdout, lines.put),
                             (self._process.stderr, self._stderr_line)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()
        ready = self._next_result(time.monotonic() + DAEMON_STARTUP_TIMEOUT, "start")
        if not ready.get("ready"):
            self._kill()
            raise PeerFailure(f"{self.peer.name} client daemon: unexpected first line {ready}")

    def _next_result(self, deadline: float, what: str) -> dict:
        """The next JSON line of the daemon (other lines are skipped).

        :raises PeerFailure: EOF (the daemon died) or ``deadline`` passed (the daemon is
            killed).
        """
        while True:
            try:
                line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                self._kill()
                raise PeerFailure(f"{self.peer.name} client daemon: no answer to {what} in "
                                  f"time\nstderr:\n{self.stderr}") from None
            if line is None:
                code = self._process.wait(timeout=10)
                raise PeerFailure(f"{self.peer.name} client daemon exited with {code} during "
                                  f"{what}\nstderr:\n{self.stderr}")
            if line.startswith("{"):
                try:
                    return json.loads(line)
                except ValueError:
                    continue

    def _stderr_line(self, line: str | None) -> None:
        if line is not None:
            self._stderr.append(line)
            self._stderr_count += 1

    @property
    def stderr(self) -> str:
        """The daemon's last 60 stderr lines."""
        return "\n".join(list(self._stderr)[-60:])

    def _stderr_since(self, mark: int) -> str:
        """The stderr lines written since ``_stderr_count`` was ``mark`` (as many as kept)."""
        new = min(self._stderr_count - mark, len(self._stderr))
        return "\n".join(list(self._stderr)[len(self._stderr) - new:]) if new > 0 else ""

    def run(self, args: list[str], label: str, timeout: float) -> dict:
        """Run the client with ``args``; like :func:`run_program` (same result, same errors;
        ``timeout`` seconds for the answer)."""
        argv = self.peer.program_argv(self.peer.client_script) + args  # the same run, standalone
        with self._lock:
            if self._process is None or self._process.poll() is not None:
                self._start()
            mark = self._stderr_count
            try:
                self._process.stdin.write((json.dumps(args) + "\n").encode("utf-8"))
                self._process.stdin.flush()
            except OSError as exc:
                raise PeerFailure(f"{label}: client daemon gone ({exc}): {argv}\nstderr:\n"
                                  f"{self.stderr}") from None
            try:
                result = self._next_result(time.monotonic() + timeout, label)
            except PeerFailure as exc:
                raise PeerFailure(f"{label} timed out or failed after at most {timeout}s: "
                                  f"{argv}\n{exc}") from None
            stderr = self._stderr_since(mark)
        code = result.pop("exit_code", None)
        return _client_outcome(label, argv, code, result, json.dumps(result), stderr,
                               self.peer.name)

    def _kill(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.wait(timeout=10)

    def stop(self, timeout: float = 10.0) -> None:
        """Close its stdin (the daemon exits at EOF); kill it after ``timeout`` seconds."""
        process = self._process
        if process is None or process.poll() is not None:
            return
        try:
            process.stdin.close()
        except OSError:
            pass
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=timeout)


_DAEMONS: dict[str, _ClientDaemon] = {}
_DAEMONS_LOCK = threading.Lock()


def _client_daemon(peer: str) -> _ClientDaemon:
    """The :class:`_ClientDaemon` of ``peer`` in this process (created, not started)."""
    with _DAEMONS_LOCK:
        daemon = _DAEMONS.get(peer)
        if daemon is None:
            daemon = _DAEMONS[peer] = _ClientDaemon(PEERS[peer])
        return daemon


@atexit.register
def stop_client_daemons() -> None:
    """Stop every client daemon this process started (registered with :mod:`atexit`)."""
    with _DAEMONS_LOCK:
        daemons = list(_DAEMONS.values())
    for daemon in daemons:
        daemon.stop()


def run_routing_client(peer: str, port: int, interaction: str, *, timeout: float | None = None,
                       **options) -> dict:
    """Run ``peer``'s routing client for one routed interaction against 127.0.0.1:``port``.

    The SETUP names composite metadata and ``application/json`` data (unless
    ``metadata_mime_type`` / ``data_mime_type`` say otherwise).

    :param peer: a key of :data:`ROUTING_CLIENTS`.
    :param interaction: one of :data:`ROUTING_INTERACTIONS`.
    :param timeout: seconds for the whole run (default: the client's ``timeout`` (30) + 15).
    :param options: ``route`` (routing entry; none without it), ``data`` (any JSON value,
        sent JSON-encoded) or ``data_text`` (str sent as is), ``next`` (channel: JSON values
        sent after the first payload, the last with C), ``next_metadata`` (those carry the
        metadata too), ``auth_simple`` ((user, password) or "user:password"), ``auth_bearer``
        (token), ``auth_custom`` ((type, text)), ``setup_auth_simple`` / ``setup_auth_bearer``
        (the same in the SETUP metadata), ``custom_entries`` ([(mime, text)], extra composite
        entries), ``stream_data_mime`` (per-stream data MIME entry), ``take`` (cancel after
        that many), ``request_n``, client-side ``timeout`` (s).
    :returns: the JSON result with ``"exit_code"`` (0, or 1 when the peer sent ERROR): ``peer``,
        ``interaction``, ``route``, ``payload`` / ``sent`` / ``payloads`` + ``completed`` +
        ``cancelled``, ``error`` ({code, message}), ``connection_error`` (ERROR on stream 0).
        A payload is ``{"data": text|None, "data_b64", "json", "metadata": [{mime, content_b64,
        ...}]|None, "metadata_b64", "metadata_error"}``.
    :raises PeerUnsupported: exit code 3.
    :raises PeerFailure: exit code 2, another code, no JSON, or timeout.
    """
    argv = routing_client_command(peer, port, interaction, **options)
    if timeout is None:
        timeout = int(options.get("timeout") or 30) + 15
    return run_program(f"{peer} routing client {interaction}", argv, PEERS[peer].directory,
                        timeout)


def run_routing_client_deferred(peer: str, port: int, interaction: str, **kwargs):
    """:func:`run_routing_client` in a thread: a Deferred firing with the result dict."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_routing_client, peer, port, interaction, **kwargs)


def start_routing_server(port: int = 0, *, users: dict[str, str] | None = None,
                         tokens=None, startup_timeout: float = 30.0,
                         lifetime: int = SERVER_LIFETIME) -> PeerServer:
    """Start rsocket-py's routing server (``py/routing_server.py``) and wait until it listens.

    :param users: username -> password it accepts (default :data:`ROUTING_SERVER_USERS`).
    :param tokens: bearer tokens it accepts (default :data:`ROUTING_SERVER_TOKENS`).
    :returns: a :class:`PeerServer`; its events are ``setup``, ``routed`` (``interaction``,
        ``seen``), ``request_n``, ``cancel``, ``channel_inbound_complete``, ``stopping``.
    :raises PeerFailure: it did not start.
    """
    peer = PEERS[ROUTING_SERVER_PEER]
    argv = peer.program_argv(ROUTING_SERVER_SCRIPT) + ["--port", str(port),
                                                       "--timeout", str(lifetime), "--watch-stdin"]
    for name, password in (users if users is not None else ROUTING_SERVER_USERS).items():
        argv += ["--user", f"{name}:{password}"]
    for token in (tokens if tokens is not None else ROUTING_SERVER_TOKENS):
        argv += ["--token", token]
    return start_program(f"{ROUTING_SERVER_PEER} routing server", argv, peer.directory,
                          startup_timeout)


def start_routing_server_deferred(port: int = 0, **kwargs):
    """:func:`start_routing_server` in a thread: a Deferred firing with the PeerServer."""
    from twisted.internet.threads import deferToThread
    return deferToThread(start_routing_server, port, **kwargs)
