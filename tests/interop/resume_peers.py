"""Run rsocket-js 1.0.0-alpha.3's resume peers (``peers/js-1.0.0-alpha.3/resume_server.js``,
``resume_client.js``; options, events and results in their headers and in
``peers/README.md``, "Resume").

* :func:`start_js_resume_server`: ``RSocketServer({resume: {sessionTimeout}})`` serving a
  counted request-stream, an echo request-channel and an echo request-response; events
  ``tcp_connection``, ``setup``, ``resume`` (the RESUME fields and the server's positions),
  ``resume_ok``, ``error_sent``, ``stream_done``, ``channel_done``, ``cancel``.
* :func:`run_js_resume_client`: ``RSocketConnector({resume})`` running one request-stream or
  request-channel of ``count`` items that it checks item by item, reconnecting and resuming
  after every transport failure; returns ``received``, ``in_order``, ``completed``,
  ``reconnect_attempts``, ``error`` (and ``exit_code``: 0 all good, 1 an error or wrong
  items).

rsocket-java 1.1.5 (``peers/java-reliability/``, one jar built by its ``install.sh``; options
and output in each program's Javadoc and in that folder's README.md):

* :func:`start_java_server`: ``ReliabilityServer``, rsocket-java's ``RSocketServer`` serving
  echo request-response (``echo:<data>``), a counted request-stream and an echo channel, with
  ``resume=True`` (``RSocketServer.resume(new Resume().sessionDuration(..))``) and/or
  ``lease=True`` (``RSocketServer.lease(..)``, see ``lease_peers``); events ``setup``,
  ``request``, ``lease_sent``, ``stream_done``, ``channel_done``, ``cancel``, ``result``,
  ``results_done``, ``closed`` (the connection closed: ``error`` ``{code, message, class}`` or
  None, ``at_ms`` epoch milliseconds).
* :func:`run_java_resume_client`: ``ResumeClient``, ``RSocketConnector.resume(new Resume()
  .retry(Retry.fixedDelay(..)))`` running one request-stream or request-channel of ``count``
  items checked item by item; the same result keys as the js resume client.
* :func:`run_java_keepalive_client`: ``KeepaliveClient``, connected with ``keepAlive(..)``
  until the connection closes (``test_keepalive_interop``).
* :func:`run_java_program`: any program of the jar (``LeaseClient`` for ``lease_peers``).
"""

from __future__ import annotations

import peers

PEER = "rsocket-js-1.0.0-alpha.3"
SERVER_SCRIPT = "resume_server.js"
CLIENT_SCRIPT = "resume_client.js"


def start_js_resume_server(*, session_timeout: int = 60_000, request_n: int | None = None,
                           log_keepalive: bool = False, startup_timeout: float = 30.0,
                           lifetime: int = peers.SERVER_LIFETIME) -> peers.PeerServer:
    """Start the js resume server; wait until it listens.

    :param session_timeout: milliseconds a detached session waits for RESUME.
    :returns: a :class:`peers.PeerServer` (``.port``, ``wait_event``, ``drain_events``,
        ``stop``).
    :raises peers.PeerFailure: it did not start.
    """
    peer = peers.PEERS[PEER]
    argv = peer.program_argv(SERVER_SCRIPT) + peers.flag_options(
        port=0, session_timeout=session_timeout, request_n=request_n,
        log_keepalive=log_keepalive, timeout=lifetime, watch_stdin=True)
    return peers.start_program(f"{PEER} resume server", argv, peer.directory, startup_timeout)


def start_js_resume_server_deferred(**kwargs):
    """:func:`start_js_resume_server` in a thread (a Deferred)."""
    from twisted.internet.threads import deferToThread
    return deferToThread(start_js_resume_server, **kwargs)


def run_js_resume_client(port: int, interaction: str, *, count: int = 1000,
                         request_n: int | None = None, keepalive: int | None = None,
                         lifetime: int | None = None, reconnect_delay: int | None = None,
                         max_reconnects: int | None = None, token_b64: str | None = None,
                         timeout: int = 60) -> dict:
    """Run the js resume client against 127.0.0.1:``port``.

    :param interaction: ``"request-stream"`` or ``"request-channel"``.
    :returns: its JSON result plus ``exit_code``.
    :raises peers.PeerFailure: exit code 2 (usage, connection failure, timeout) or no JSON.
    """
    peer = peers.PEERS[PEER]
    argv = peer.program_argv(CLIENT_SCRIPT) + [interaction] + peers.flag_options(
        port=port, count=count, request_n=request_n, keepalive=keepalive, lifetime=lifetime,
        reconnect_delay=reconnect_delay, max_reconnects=max_reconnects, token_b64=token_b64,
        timeout=timeout)
    return peers.run_program(f"{PEER} resume client {interaction}", argv, peer.directory,
                              timeout + 15)


def run_js_resume_client_deferred(port: int, interaction: str, **kwargs):
    """:func:`run_js_resume_client` in a thread (a Deferred): the reactor keeps serving."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_js_resume_client, port, interaction, **kwargs)


# ---------------------------------------------------------------------------------- rsocket-java

JAVA_PEER = "rsocket-java-1.1.5"
_JAVA_MAIN = "rsockettx.interop.reliability."
#: the rsocket-java reliability programs: one fat jar, one main class per program (not in
#: ``peers.PEERS``: they speak the resume/lease/keepalive contracts, not the demo one)
JAVA = peers.Peer(
    name=JAVA_PEER,
    runtime="jvm",
    directory=peers.PEERS_DIR / "java-reliability",
    server_script=_JAVA_MAIN + "ReliabilityServer",
    client_script=_JAVA_MAIN + "ResumeClient",
    default_completion="flag",
    jar="target/rsocket-java-reliability.jar",
)


def ensure_java_installed() -> None:
    """:raises peers.PeersNotInstalled: the jar of :data:`JAVA` was not built."""
    peers.raise_if_problems([f"{JAVA_PEER}: {path} not built" for path in JAVA.built_files()
                              if not path.exists()])


def start_java_server(*, resume: bool = False, session_duration: int | None = None,
                      store_bytes: int | None = None, cleanup_on_keepalive: bool = False,
                      lease: bool = False, lease_requests: int | None = None,
                      lease_ttl: int | None = None, lease_interval: int | None = None,
                      max_pending: int | None = None, request_client: int | None = None,
                      request_wait: int | None = None, await_lease: bool = False,
                      hold_client: bool = False, startup_timeout: float = 60.0,
                      lifetime: int = peers.SERVER_LIFETIME) -> peers.PeerServer:
    """Start rsocket-java's ``ReliabilityServer`` on 127.0.0.1; wait until it listens.

    :param resume: resumable sessions kept ``session_duration`` ms (default 60,000) with a
        frame store of ``store_bytes`` (default 100,000, rsocket-java's).
    :param lease: grant ``lease_requests`` (default 3) for ``lease_ttl`` ms (default 60,000),
        once or every ``lease_interval`` ms; ``max_pending``: how many of the server's own
        requests wait for the client's lease (rsocket-java's default 256).
    :param request_client: K request-responses the server sends the client after SETUP, each
        given ``request_wait`` ms (default 2,000) before it counts as ``queued``; with
        ``await_lease`` only once the client's first LEASE arrived.
    :param hold_client: send each client a request-response "hold" after SETUP and report how
        it ended (``hold`` event: ``payload``, ``error``, ``at_ms``): a pending request fails
        with what closed the connection.
    :param startup_timeout: seconds to wait for ``LISTENING`` (a JVM starts slowly).
    :param lifetime: seconds after which the server exits by itself.
    :returns: a :class:`peers.PeerServer`.
    :raises peers.PeerFailure: it did not start.
    """
    ensure_java_installed()
    argv = JAVA.program_argv(JAVA.server_script) + peers.flag_options(
        port=0, resume=resume, session_duration=session_duration, store_bytes=store_bytes,
        cleanup_on_keepalive=cleanup_on_keepalive, lease=lease, lease_requests=lease_requests,
        lease_ttl=lease_ttl, lease_interval=lease_interval, max_pending=max_pending,
        request_client=request_client, request_wait=request_wait, await_lease=await_lease,
        hold_client=hold_client, timeout=lifetime,
        watch_stdin=True)
    return peers.start_program(f"{JAVA_PEER} server", argv, JAVA.directory, startup_timeout)


def start_java_server_deferred(**kwargs):
    """:func:`start_java_server` in a thread (a Deferred)."""
    from twisted.internet.threads import deferToThread
    return deferToThread(start_java_server, **kwargs)


def run_java_program(program: str, *, deadline: float, positional=(), **options) -> dict:
    """Run the main class ``program`` of the rsocket-java jar with ``options``
    (``peers.flag_options``); its last JSON line plus ``exit_code`` (0 or 1).

    :param deadline: seconds the whole run may take (the process is killed after it); the
        program's own ``timeout`` option (seconds) should be shorter.
    :raises peers.PeerFailure: exit code 2 (usage, connection failure, its own timeout), no
        JSON, or ``deadline``.
    """
    ensure_java_installed()
    argv = (JAVA.program_argv(_JAVA_MAIN + program) + list(positional)
            + peers.flag_options(**options))
    return peers.run_program(f"{JAVA_PEER} {program}", argv, JAVA.directory, deadline)


def run_java_resume_client(port: int, interaction: str, *, count: int = 1000,
                           request_n: int | None = None, keepalive: int | None = None,
                           lifetime: int | None = None, reconnect_delay: int | None = None,
                           max_reconnects: int | None = None,
                           session_duration: int | None = None,
                           cleanup_on_keepalive: bool = False, timeout: int = 60) -> dict:
    """Run rsocket-java's ``ResumeClient`` against 127.0.0.1:``port``.

    :param interaction: ``"request-stream"`` or ``"request-channel"``.
    :param keepalive: / ``lifetime``: SETUP, ms (defaults 500 / 30,000).
    :param timeout: seconds the client may run (it exits 2 after them).
    :returns: ``peer``, ``interaction``, ``count``, ``received``, ``in_order``, ``completed``,
        ``reconnect_attempts``, ``error`` (``{code, message, class}``), ``first_bad``, plus
        ``exit_code`` (0 all good, 1 an error or wrong items).
    :raises peers.PeerFailure: exit code 2 or no JSON.
    """
    return run_java_program(
        "ResumeClient", positional=[interaction], deadline=timeout + 30, port=port, count=count,
        request_n=request_n, keepalive=keepalive, lifetime=lifetime,
        reconnect_delay=reconnect_delay, max_reconnects=max_reconnects,
        session_duration=session_duration, cleanup_on_keepalive=cleanup_on_keepalive,
        timeout=timeout)


def run_java_resume_client_deferred(port: int, interaction: str, **kwargs):
    """:func:`run_java_resume_client` in a thread (a Deferred)."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_java_resume_client, port, interaction, **kwargs)


def run_java_keepalive_client(port: int, *, keepalive: int = 500, lifetime: int = 5000,
                              timeout: int = 60) -> dict:
    """Run rsocket-java's ``KeepaliveClient`` against 127.0.0.1:``port``: it connects with
    ``keepAlive(keepalive ms, lifetime ms)``, sends one request-response "ping", then one
    "hold" that the server should never answer, and waits until the connection closes.

    :returns: ``ping`` (the reply's data), ``connected_at_ms`` / ``closed_at_ms`` (epoch
        milliseconds), ``after_ms``, ``error`` (how "hold" failed: ``{code, message, class}``
        or None), ``close_error`` (how ``onClose()`` ended, None: completed), plus
        ``exit_code`` (1 when "hold" failed).
    :raises peers.PeerFailure: exit code 2 (e.g. still open after ``timeout`` s) or no JSON.
    """
    return run_java_program("KeepaliveClient", deadline=timeout + 30, port=port,
                            keepalive=keepalive, lifetime=lifetime, timeout=timeout)


def run_java_keepalive_client_deferred(port: int, **kwargs):
    """:func:`run_java_keepalive_client` in a thread (a Deferred)."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_java_keepalive_client, port, **kwargs)
