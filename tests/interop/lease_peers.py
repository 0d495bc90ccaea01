"""Run rsocket-py's lease peers (``peers/py/lease_server.py``, ``peers/py/lease_client.py``).

Their options and events are documented in the two scripts' docstrings; in short:

* :func:`start_lease_server`: rsocket-py ``RSocketServer`` granting ``lease_requests``
  requests for ``lease_ttl`` ms (then every ``lease_interval`` ms); ``request_client=K``
  makes it send K request-responses to the client after SETUP (``honor_lease``: honouring the
  client's leases, i.e. queueing what they do not allow).  Events: ``setup``, ``lease_sent``,
  ``lease_received``, ``request``, ``result``, ``results_done``, ``stopping``.
* :func:`run_lease_client`: rsocket-py ``RSocketClient(honor_lease=True)`` sending ``count``
  request-responses (``ignore_lease``: sending regardless of leases), granting the server
  ``lease_requests`` (if given), serving ``serve`` seconds more; returns its final JSON:
  ``results`` (``payload`` | ``error`` | ``queued`` each), ``leases``, ``served``.

* :func:`run_js_lease_client`: rsocket-js 1.0.0-alpha.3 ``RSocketConnector({lease})``
  (``peers/js-1.0.0-alpha.3/lease_client.js``) sending ``count`` request-responses; it queues
  up to ``max_pending`` requests a lease does not allow and rejects the rest locally; it never
  grants a lease itself.

* :func:`start_java_lease_server`: rsocket-java 1.1.5's ``ReliabilityServer`` with
  ``RSocketServer.lease(spec -> spec.sender(..).maxPendingRequests(..))``
  (``peers/java-reliability``, started by ``resume_peers.start_java_server``): the same
  options and events as :func:`start_lease_server` (``max_pending``, ``await_lease`` besides).
* :func:`run_java_lease_client`: rsocket-java's ``LeaseClient``
  (``RSocketConnector.lease(..)``), the options and result of :func:`run_lease_client`
  (``max_pending``, ``await_lease`` besides); its requester queues what a lease does not allow
  (up to ``max_pending``, default 256) and rejects the rest locally with
  ``MissingLeaseException`` (REJECTED); its responder enforces what it granted.

rsocket-py honours leases by queueing and never enforces its own: see ``lease_common.py``.
"""

from __future__ import annotations

import peers
import resume_peers

PEER = "rsocket-py"
JS_PEER = "rsocket-js-1.0.0-alpha.3"
JS_CLIENT_SCRIPT = "lease_client.js"
SERVER_SCRIPT = "lease_server.py"
CLIENT_SCRIPT = "lease_client.py"


def start_lease_server(*, lease_requests: int = 3, lease_ttl: int = 60_000,
                       lease_interval: int | None = None, honor_lease: bool = False,
                       request_client: int = 0, request_wait: float = 2.0,
                       startup_timeout: float = 30.0,
                       lifetime: int = peers.SERVER_LIFETIME) -> peers.PeerServer:
    """Start rsocket-py's lease server; wait until it listens.

    :returns: a :class:`peers.PeerServer` (``.port``, ``wait_event``, ``stop``).
    :raises peers.PeerFailure: it did not start.
    """
    peer = peers.PEERS[PEER]
    argv = peer.program_argv(SERVER_SCRIPT) + peers.flag_options(
        port=0, lease_requests=lease_requests, lease_ttl=lease_ttl,
        lease_interval=lease_interval, honor_lease=honor_lease, request_client=request_client,
        request_wait=request_wait, timeout=lifetime, watch_stdin=True)
    return peers.start_program(f"{PEER} lease server", argv, peer.directory, startup_timeout)


def start_lease_server_deferred(**kwargs):
    """:func:`start_lease_server` in a thread: a Deferred firing with the PeerServer."""
    from twisted.internet.threads import deferToThread
    return deferToThread(start_lease_server, **kwargs)


def run_lease_client(port: int, *, count: int = 3, wait: float = 2.0,
                     ignore_lease: bool = False, lease_requests: int | None = None,
                     lease_ttl: int = 60_000, lease_interval: int | None = None,
                     serve: float = 0.0, timeout: int = 30) -> dict:
    """Run rsocket-py's lease client against 127.0.0.1:``port``; its final JSON result.

    :raises peers.PeerFailure: it failed, printed no JSON or timed out.
    """
    peer = peers.PEERS[PEER]
    argv = peer.program_argv(CLIENT_SCRIPT) + peers.flag_options(
        port=port, count=count, wait=wait, ignore_lease=ignore_lease,
        lease_requests=lease_requests, lease_ttl=lease_ttl, lease_interval=lease_interval,
        serve=serve or None, timeout=timeout)
    return peers.run_program(f"{PEER} lease client", argv, peer.directory, timeout + 15)


def run_lease_client_deferred(port: int, **kwargs):
    """:func:`run_lease_client` in a thread: a Deferred firing with the result dict."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_lease_client, port, **kwargs)


def run_js_lease_client(port: int, *, count: int = 3, wait: int = 1500,
                        max_pending: int | None = None, timeout: int = 30) -> dict:
    """Run rsocket-js 1.0.0-alpha.3's lease client against 127.0.0.1:``port``.

    :param wait: milliseconds each request gets before it is reported ``queued``.
    :returns: ``{"peer", "results": [{index, payload | error | queued}], "exit_code"}``.
    :raises peers.PeerFailure: it failed, printed no JSON or timed out.
    """
    peer = peers.PEERS[JS_PEER]
    argv = peer.program_argv(JS_CLIENT_SCRIPT) + peers.flag_options(
        port=port, count=count, wait=wait, max_pending=max_pending, timeout=timeout)
    return peers.run_program(f"{JS_PEER} lease client", argv, peer.directory, timeout + 15)


def run_js_lease_client_deferred(port: int, **kwargs):
    """:func:`run_js_lease_client` in a thread: a Deferred firing with the result dict."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_js_lease_client, port, **kwargs)


def start_java_lease_server(*, lease_requests: int = 3, lease_ttl: int = 60_000,
                            lease_interval: int | None = None, max_pending: int | None = None,
                            request_client: int = 0, request_wait: float = 2.0,
                            await_lease: bool = False, lifetime: int = peers.SERVER_LIFETIME
                            ) -> peers.PeerServer:
    """Start rsocket-java's lease server: grants ``lease_requests`` for ``lease_ttl`` ms (then
    every ``lease_interval`` ms); ``request_client=K`` sends K request-responses to the
    client after SETUP (after the client's first LEASE with ``await_lease``), each given
    ``request_wait`` seconds; its requester queues up to ``max_pending`` (default 256) of them.

    :returns: a :class:`peers.PeerServer`.  :raises peers.PeerFailure: it did not start.
    """
    return resume_peers.start_java_server(
        lease=True, lease_requests=lease_requests, lease_ttl=lease_ttl,
        lease_interval=lease_interval, max_pending=max_pending,
        request_client=request_client or None, request_wait=int(request_wait * 1000),
        await_lease=await_lease, lifetime=lifetime)


def start_java_lease_server_deferred(**kwargs):
    """:func:`start_java_lease_server` in a thread: a Deferred firing with the PeerServer."""
    from twisted.internet.threads import deferToThread
    return deferToThread(start_java_lease_server, **kwargs)


def run_java_lease_client(port: int, *, count: int = 3, wait: float = 2.0,
                          max_pending: int | None = None, await_lease: bool = False,
                          lease_requests: int | None = None, lease_ttl: int = 60_000,
                          serve: float = 0.0, timeout: int = 30) -> dict:
    """Run rsocket-java's lease client against 127.0.0.1:``port``: ``count``
    request-responses, each given ``wait`` seconds before it counts as ``queued``; it grants
    the server ``lease_requests`` for ``lease_ttl`` ms (if given) and serves ``serve``
    seconds more.

    :returns: ``{"peer", "results": [{index, payload | error {code, message, class} |
        queued}], "served": [...], "awaited_lease_ms", "exit_code"}``.
    :raises peers.PeerFailure: it failed, printed no JSON or timed out.
    """
    return resume_peers.run_java_program(
        "LeaseClient", deadline=timeout + 30, port=port, count=count, wait=int(wait * 1000),
        max_pending=max_pending, await_lease=await_lease, grant_requests=lease_requests,
        grant_ttl=lease_ttl if lease_requests is not None else None,
        serve=int(serve * 1000) or None, timeout=timeout)


def run_java_lease_client_deferred(port: int, **kwargs):
    """:func:`run_java_lease_client` in a thread: a Deferred firing with the result dict."""
    from twisted.internet.threads import deferToThread
    return deferToThread(run_java_lease_client, port, **kwargs)
