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
"""

from __future__ import annotations

import peers

PEER = "rsocket-js-1.0.0-alpha.3"
SERVER_SCRIPT = "resume_server.js"
CLIENT_SCRIPT = "resume_client.js"


def start_js_resume_server(*, session_timeout: int = 60_000, request_n: int | None = None,
                           log_keepalive: bool = False, startup_timeout: float = 30.0,
                           lifetime: int = 600) -> peers.PeerServer:
    """Start the js resume server; wait until it listens.

    :param session_timeout: milliseconds a detached session waits for RESUME.
    :returns: a :class:`peers.PeerServer` (``.port``, ``wait_event``, ``drain_events``,
        ``stop``).
    :raises peers.PeerFailure: it did not start.
    """
    peer = peers.PEERS[PEER]
    argv = peer._argv(SERVER_SCRIPT) + peers._options(
        port=0, session_timeout=session_timeout, request_n=request_n,
        log_keepalive=log_keepalive, timeout=lifetime, watch_stdin=True)
    return peers._start_program(f"{PEER} resume server", argv, peer.directory, startup_timeout)


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
    argv = peer._argv(CLIENT_SCRIPT) + [interaction] + peers._options(
        port=port, count=count, request_n=request_n, keepalive=keepalive, lifetime=lifetime,
        reconnect_delay=reconnect_delay, max_reconnects=max_reconnects, token_b64=token_b64,
        timeout=timeout)
    return peers._run_program(f"{PEER} resume client {interaction}", argv, peer.directory,
                              timeout + 15)


def run_js_resume_client_deferred(port: int, interaction: str, **kwargs):
    """:func:`run_js_resume_client` in a thread (a Deferred): the reactor keeps serving."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_js_resume_client, port, interaction, **kwargs)
