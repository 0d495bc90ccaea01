"""OUR COMMAND-LINE CLIENT (``rsocket-tx``, a subprocess) against the third-party SERVERS.

Every peer's demo server (``peer_server`` fixture, once per module per transport) is called by
``rsocket-tx`` with the endpoint URI a user would type (``tcp://127.0.0.1:PORT`` or
``ws://127.0.0.1:PORT/rsocket``), once per interaction model, plus an application error and a
1 MiB payload that our CLI fragments.  The CLI's output formats and exit statuses are those of
``rsocket-tx --help`` (docs/cli.rst): text output is each payload's data on a line, ``-o json``
one object per payload, exit status 1 when the peer answered with ERROR.  Where a peer library
cannot do something the test skips with the reason recorded in ``peers.CAPABILITIES``.
"""

from __future__ import annotations

import base64
import json

import peers
import pytest
import pytest_twisted
from peers import pattern, supports, unsupported_reason
from twisted.internet import reactor, utils

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("no_logged_errors")]

#: (peer, transport): every peer server over TCP and its own WebSocket transport
TARGETS = peers.targets(("tcp", "ws"))
#: seconds the CLI is given (``--timeout``); a wait on the peer's events takes at most this too
WAIT = 30
MiB = 1024 * 1024
#: our CLI's fragment size for the 1 MiB payload (bytes per frame)
FRAGMENT = 64 * 1024


def need(peer: str, transport: str, *capabilities: str) -> None:
    """Skip when the peer lacks a capability on ``transport`` (reason from the table)."""
    why = unsupported_reason(peer, *capabilities, transport=transport)
    if why is not None:
        pytest.skip(why)


@pytest.fixture
def cli(rsocket_tx_cli, peer_server):
    """``await cli(peer, transport, command, *args)`` -> (status, stdout bytes, stderr bytes,
    the PeerServer): runs ``rsocket-tx COMMAND URL ARGS --timeout WAIT`` against ``peer``'s demo
    server on ``transport`` (events earlier tests left behind are drained first)."""

    async def run(peer: str, transport: str, command: str, *args: str):
        server = await peer_server(peer, transport)
        server.drain_events()
        out, err, status = await utils.getProcessOutputAndValue(
            rsocket_tx_cli, [command, server.url, *args, "--timeout", str(WAIT)],
            reactor=reactor)
        return status, out, err, server

    return run


def json_lines(out: bytes) -> list[dict]:
    return [json.loads(line) for line in out.decode().splitlines()]


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request(peer, transport, cli):
    """``request -d -m -o json``: the echo's data, and its metadata where the peer echoes it."""
    status, out, err, server = await cli(peer, transport, "request", "-d", "hello", "-m",
                                         "meta", "-o", "json")
    assert status == 0, err
    expected_metadata = "meta" if supports(peer, "server:echo-metadata", transport) else None
    assert json_lines(out) == [{"data": "hello", "metadata": expected_metadata}]
    event = await server.wait_event_deferred("request", WAIT, interaction="request-response")
    assert peers.payload_bytes(event) == (b"hello", b"meta")


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_stream_in_request_n_batches(peer, transport, cli):
    """``stream -d 5 --request-n 2``: 0..4, one per line; the server saw request-n 2 batches."""
    status, out, err, server = await cli(peer, transport, "stream", "-d", "5",
                                         "--request-n", "2")
    assert (status, out) == (0, b"0\n1\n2\n3\n4\n"), err
    event = await server.wait_event_deferred("request_n", WAIT, interaction="request-stream",
                                             initial=True)
    assert event["n"] == 2


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_stream_take_cancels(peer, transport, cli):
    """``stream -d 1000 --take 3 --request-n 2``: three items, then CANCEL reaches the peer
    while its stream is still waiting for credit."""
    need(peer, transport, "server:request-n", "server:survives-close-mid-stream")
    status, out, err, server = await cli(peer, transport, "stream", "-d", "1000", "--take", "3",
                                         "--request-n", "2")
    assert (status, out) == (0, b"0\n1\n2\n"), err
    await server.wait_event_deferred("cancel", WAIT, interaction="request-stream")


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_channel_from_a_file(peer, transport, cli, tmp_path):
    """``channel -d @FILE``: one payload per line, each echoed back in order."""
    lines = tmp_path / "lines.txt"
    lines.write_text("a\nb\nc\n")
    status, out, err, server = await cli(peer, transport, "channel", "-d", f"@{lines}")
    assert (status, out) == (0, b"a\nb\nc\n"), err
    await server.wait_event_deferred("channel_inbound_complete", WAIT)


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_fire_and_forget(peer, transport, cli):
    """``fnf -d -m``: exit 0 at once, and the peer received the payload."""
    status, out, err, server = await cli(peer, transport, "fnf", "-d", "log me", "-m", "m")
    assert (status, out) == (0, b""), err
    event = await server.wait_event_deferred("fnf", WAIT)
    assert peers.payload_bytes(event) == (b"log me", b"m")


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_metadata_push(peer, transport, cli):
    """``metadata-push -m``: the peer received the metadata."""
    need(peer, transport, "server:metadata-push")
    status, out, err, server = await cli(peer, transport, "metadata-push", "-m", "tenant=blue")
    assert (status, out) == (0, b""), err
    event = await server.wait_event_deferred("metadata_push", WAIT)
    assert base64.b64decode(event["metadata"]) == b"tenant=blue"


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_application_error(peer, transport, cli):
    """``request -d error:boom``: exit status 1 and ``APPLICATION_ERROR: boom`` on stderr."""
    status, out, err, _ = await cli(peer, transport, "request", "-d", "error:boom")
    assert (status, out) == (1, b""), err
    assert err.endswith(b"APPLICATION_ERROR: boom\n"), err


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_one_mib_request_fragmented(peer, transport, cli, tmp_path):
    """``request -d @1MiB --fragment 65536 -o json``: our CLI sends the request in fragments
    of at most 64 KiB and prints the whole 1 MiB echo."""
    need(peer, transport, "server:reassemble")
    data = pattern(MiB)
    source = tmp_path / "one-mib.bin"
    source.write_bytes(data)
    status, out, err, _ = await cli(peer, transport, "request", "-d", f"@{source}",
                                    "--fragment", str(FRAGMENT), "-o", "json")
    assert status == 0, err
    [answer] = json_lines(out)
    assert base64.b64decode(answer["data_base64"]) == data
