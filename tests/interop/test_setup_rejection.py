"""A rejected SETUP, both ways, against every peer (RSocket 1.0 Protocol §Connection
Establishment: a server that does not accept a SETUP answers ERROR[REJECTED_SETUP] on stream 0
and closes).

The demo contract (``tests/interop/peers/README.md``): a SETUP whose data starts with
``reject:`` is refused with ERROR[REJECTED_SETUP] (0x003) whose message is the rest of the data.
Our ``InteropResponder`` follows it (its ``accept_setup`` raises ``RejectedSetupError``), and so
does every peer's demo server.

* their client, our server (``twistd rsocket``): the peer client reports the ERROR with its
  code and message;
* our client (``connect()``), their server: the request made on the refused connection fails
  with :class:`~rsocket_tx.RejectedSetupError` carrying the peer's message (rsocket-js 0.0.27
  puts a text of its own before it: ``peers.SETUP_REJECTION_PREFIX``);
* our CLI, their server: exit status 1 and ``REJECTED_SETUP: <message>`` on standard error.
"""

from __future__ import annotations

import peers
import pytest
import pytest_twisted
from peers import unsupported_reason
from twisted.internet import reactor, utils

from rsocket_tx import Payload, RejectedSetupError, connect

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("no_logged_errors")]

REJECTED_SETUP = 0x003
MESSAGE = "not welcome here"
#: seconds any single wait may take
WAIT = 30


def need(peer: str, transport: str, *capabilities: str) -> None:
    """Skip when the peer lacks a capability on ``transport`` (reason from the table)."""
    why = unsupported_reason(peer, *capabilities, transport=transport)
    if why is not None:
        pytest.skip(why)


@pytest.mark.parametrize(("peer", "transport"), peers.targets())
def test_our_server_rejects_their_setup(peer, transport, our_server):
    """Their client's SETUP data ``reject:...``: our responder refuses it; the peer client
    reports ERROR[REJECTED_SETUP] with our message, and no request reached our responder."""
    need(peer, transport, "client:setup-payload", "client:report-setup-rejection")
    since = our_server.mark()
    result = peers.run_client(peer, our_server.port_for(transport), "request-response",
                              transport=transport, data="never served",
                              setup_data=f"reject:{MESSAGE}", timeout=WAIT)
    assert result["exit_code"] == peers.EXIT_RSOCKET_ERROR, result
    assert result["error"] == {"code": REJECTED_SETUP, "message": MESSAGE}
    our_server.wait_event("setup_rejected", since, message=MESSAGE)
    assert [e for e in our_server.events(since) if e["event"] == "request"] == []


@pytest.mark.parametrize(("peer", "transport"), peers.targets())
@pytest_twisted.ensureDeferred
async def test_their_server_rejects_our_setup(peer, transport, peer_server):
    """Our SETUP data ``reject:...``: the request on that connection fails with
    RejectedSetupError and the peer's message; the peer reported the refusal."""
    need(peer, transport, "server:reject-setup")
    server = await peer_server(peer, transport)
    rsocket = await connect(server.url, reactor=reactor,
                            setup_payload=Payload(f"reject:{MESSAGE}".encode()))
    try:
        response = rsocket.request_response(Payload(b"never served"))
        with pytest.raises(RejectedSetupError) as raised:
            await response.addTimeout(WAIT, reactor)
        assert raised.value.message == peers.SETUP_REJECTION_PREFIX.get(peer, "") + MESSAGE
        event = await server.wait_event_deferred("setup_rejected", WAIT)
        assert event["message"] == MESSAGE
    finally:
        await rsocket.close()


@pytest.mark.parametrize(("peer", "transport"), peers.targets(("tcp", "ws")))
@pytest_twisted.ensureDeferred
async def test_their_server_rejects_our_cli(peer, transport, peer_server, rsocket_tx_cli):
    """``rsocket-tx request URL --setup-data reject:...``: exit status 1, the error code name
    and the peer's message on standard error, nothing on standard output."""
    need(peer, transport, "server:reject-setup")
    server = await peer_server(peer, transport)
    out, err, status = await utils.getProcessOutputAndValue(
        rsocket_tx_cli, ["request", server.url, "-d", "x", "--setup-data", f"reject:{MESSAGE}",
                         "--timeout", str(WAIT)], reactor=reactor)
    assert (status, out) == (1, b""), err
    expected = f"REJECTED_SETUP: {peers.SETUP_REJECTION_PREFIX.get(peer, '')}{MESSAGE}\n"
    assert err.endswith(expected.encode()), err

