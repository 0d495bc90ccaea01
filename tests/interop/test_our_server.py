"""OUR SERVER (``twistd -n rsocket``, a subprocess) against the third-party CLIENTS.

Each test runs one peer client program (``peers.run_client``: rsocket-py 0.4.20, rsocket-js
1.0.0-alpha.3, rsocket-js 0.0.27) against our server, started once per module through the twistd
plugin (fixtures in ``conftest.py``):

* ``our_server``: ``--responder tests.interop.responders:InteropResponder --debug`` — the demo
  responder plus the ``error:`` convention, reporting what it sees; the frame log shows what
  crossed the wire;
* ``our_fragmenting_server``: the same with ``--fragment-size 64``;
* ``demo_server``: the plugin's default, :class:`rsocket_tx.apps.demo.DemoResponder`.

Nothing here needs the reactor: the peer runs in its own process and so does our server, so the
tests simply wait for the client program.  Where a peer library cannot do something the test
skips with the reason recorded in ``peers.CAPABILITIES`` (and nothing else is skipped).
"""

from __future__ import annotations

import hashlib

import peers
import pytest
from peers import datas, digest_of, pattern, payload_bytes, run_client, unsupported_reason

pytestmark = pytest.mark.interop

PEERS = list(peers.PEERS)
#: (peer, transport): every peer client over TCP and over WebSocket (rsocket-py with both of
#: its WebSocket libraries) against our one server listening on both
TARGETS = peers.targets()
BIG = 100_000
BIG_METADATA = 1_000
#: fragment size the peer clients are asked for (rsocket-py's minimum; see CAPABILITIES)
PEER_FRAGMENT = 64
APPLICATION_ERROR = 0x201


def need(peer: str, transport: str, *capabilities: str) -> None:
    """Skip when the peer library lacks a capability on ``transport`` (reason from the
    capability table)."""
    why = unsupported_reason(peer, *capabilities, transport=transport)
    if why is not None:
        pytest.skip(why)


def absent(peer: str, metadata: bytes | None) -> bool:
    """Whether a client result's metadata means "no metadata": rsocket-py reports an absent
    metadata as b"" (peers.py docstring), the js clients as None."""
    if peer == "rsocket-py":
        return metadata in (None, b"")
    return metadata is None


def digest_fields(event: dict) -> dict:
    return {k: event[k] for k in ("data_len", "data_sha256", "metadata_len", "metadata_sha256")}


def check_credit(frames, stream: int = 1) -> list[int]:
    """Walk our server's frame log for one stream: every PAYLOAD with N we sent must be covered
    by credit (initial request n + REQUEST_Ns received before it).  Returns the request ns."""
    credit = 0
    granted = []
    sent = 0
    for frame in frames:
        if frame.stream != stream:
            continue
        if frame.direction == "recv" and frame.type in ("REQUEST_STREAM", "REQUEST_CHANNEL"):
            credit = int(frame.value("initial_request_n"))
            granted.append(credit)
        elif frame.direction == "recv" and frame.type == "REQUEST_N":
            n = int(frame.value("request_n"))
            credit += n
            granted.append(n)
        elif frame.direction == "send" and frame.type == "PAYLOAD" and frame.has("next"):
            sent += 1
            assert sent <= credit, (
                f"our server sent payload #{sent} with only {credit} credit: {frames}")
    return granted


# ---------------------------------------------------------------------------------------------
# request-response
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_response_echo_with_metadata(peer, transport, our_server):
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-response",
                        transport=transport,
                        data="hello from " + peer, metadata="meta:" + peer)
    assert result["exit_code"] == 0, result
    data, metadata = payload_bytes(result["payload"])
    assert data == ("hello from " + peer).encode()
    assert metadata == ("meta:" + peer).encode()
    request = our_server.wait_event("request", mark, interaction="request-response")
    assert request["data_len"] == len(data) and request["metadata_len"] == len(metadata)
    setup = our_server.wait_event("setup", mark)
    assert setup["version"] == [1, 0]
    assert setup["data_mime_type"] == setup["metadata_mime_type"] == "application/octet-stream"
    assert setup["keepalive"] == 20_000 and setup["lifetime"] == 90_000


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_setup_with_payload(peer, transport, our_server):
    """The peer's SETUP with data and metadata (rsocket-py writes it in several send() calls:
    our server must reassemble it)."""
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-response",
                        transport=transport, data="x",
                        setup_data="setup-data", setup_metadata="setup-meta",
                        keepalive=15_000, lifetime=60_000)
    assert result["exit_code"] == 0, result
    setup = our_server.wait_event("setup", mark)
    assert digest_fields(setup) == digest_of(b"setup-data", b"setup-meta")
    assert (setup["keepalive"], setup["lifetime"]) == (15_000, 60_000)


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_response_without_metadata(peer, transport, our_server):
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-response",
                        transport=transport, data="no metadata here")
    assert result["exit_code"] == 0, result
    data, metadata = payload_bytes(result["payload"])
    assert data == b"no metadata here"
    assert absent(peer, metadata), metadata
    request = our_server.wait_event("request", mark, interaction="request-response")
    assert request["metadata_len"] is None  # no M flag on the request either


@pytest.mark.parametrize("metadata", [None, "metadata only"], ids=["empty", "metadata-only"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_response_empty_data(peer, transport, metadata, our_server):
    """Empty data, with or without metadata, echoed as such."""
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-response",
                        transport=transport, data="", metadata=metadata)
    assert result["exit_code"] == 0, result
    assert result["payload"] is not None, result
    data, got = payload_bytes(result["payload"])
    assert data == b""
    if metadata is None:
        assert absent(peer, got), got
    else:
        assert got == metadata.encode()
    request = our_server.wait_event("request", mark, interaction="request-response")
    assert request["data_len"] == 0


@pytest.mark.parametrize("fragmentation", ["none", "peer", "ours", "both"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_response_100kb(peer, transport, fragmentation, our_server,
                                our_fragmenting_server):
    """100 kB data + 1 kB metadata echoed; fragmented by the peer (request), by us (response),
    both or neither."""
    peer_fragments = fragmentation in ("peer", "both")
    if peer_fragments:
        need(peer, transport, "client:fragment")
    server = our_fragmenting_server if fragmentation in ("ours", "both") else our_server
    mark = server.mark()
    result = run_client(peer, server.port_for(transport), "request-response",
                        transport=transport, data_size=BIG,
                        metadata_size=BIG_METADATA,
                        fragment=PEER_FRAGMENT if peer_fragments else None)
    assert result["exit_code"] == 0, result
    expected = digest_of(pattern(BIG), pattern(BIG_METADATA))
    assert result["payload"] == expected
    request = server.wait_event("request", mark, interaction="request-response")
    assert digest_fields(request) == expected
    frames = server.frames(mark)
    received = [f for f in frames if f.direction == "recv" and f.stream == 1]
    sent = [f for f in frames if f.direction == "send" and f.stream == 1]
    # the wire did what the case says
    assert any(f.has("follows") for f in received) == peer_fragments, received[:3]
    assert any(f.has("follows") for f in sent) == (server is our_fragmenting_server), sent[:3]
    if server is our_fragmenting_server:
        assert len(sent) > BIG // 64


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_response_beyond_max_frame_size(peer, transport, our_server):
    """17 MB each way.  The peer must fragment its request (a frame cannot be larger than
    16 MiB); our server, run without --fragment-size, must fragment the echo by itself."""
    need(peer, transport, "client:fragment", "client:receive-max-frame")
    size = 17_000_000
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-response",
                        transport=transport, data_size=size,
                        fragment=1_000_000, timeout=60)
    assert result["exit_code"] == 0, result
    expected = digest_of(pattern(size))
    # (data only: rsocket-py reports the absent metadata as b"")
    assert (result["payload"]["data_len"], result["payload"]["data_sha256"]) \
        == (expected["data_len"], expected["data_sha256"])
    request = our_server.wait_event("request", mark, interaction="request-response")
    assert digest_fields(request) == expected
    sent = [f for f in our_server.frames(mark) if f.direction == "send" and f.stream == 1]
    assert len(sent) == 2 and sent[0].has("follows") and not sent[1].has("follows"), sent


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_response_application_error(peer, transport, our_server):
    message = f"boom for {peer} \u2713"
    result = run_client(peer, our_server.port_for(transport), "request-response",
                        transport=transport, data="error:" + message)
    assert result["exit_code"] == 1, result
    assert result["error"] == {"code": APPLICATION_ERROR, "message": message}


# ---------------------------------------------------------------------------------------------
# fire-and-forget, metadata-push
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_fire_and_forget_with_metadata(peer, transport, our_server):
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "fire-and-forget",
                        transport=transport, data="fnf " + peer,
                        metadata="fnf-meta")
    assert result == {"peer": peer, "interaction": "fire-and-forget", "sent": True,
                      "exit_code": 0}
    event = our_server.wait_event("fnf", mark)
    assert digest_fields(event) == digest_of(("fnf " + peer).encode(), b"fnf-meta")


@pytest.mark.parametrize("fragmented", [False, True], ids=["whole", "peer-fragments"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_fire_and_forget_100kb(peer, transport, fragmented, our_server):
    if fragmented:
        need(peer, transport, "client:fragment")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "fire-and-forget",
                        transport=transport, data_size=BIG,
                        metadata_size=BIG_METADATA,
                        fragment=PEER_FRAGMENT if fragmented else None)
    assert result["exit_code"] == 0, result
    event = our_server.wait_event("fnf", mark)
    assert digest_fields(event) == digest_of(pattern(BIG), pattern(BIG_METADATA))
    received = [f for f in our_server.frames(mark) if f.direction == "recv" and f.stream == 1]
    assert any(f.has("follows") for f in received) == fragmented


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_metadata_push_to_our_server(peer, transport, our_server):
    """Theirs to us.  rsocket-js 0.0.27 sends METADATA_PUSH without the M flag (its quirk 1):
    the metadata must still arrive."""
    need(peer, transport, "client:metadata-push")
    mark = our_server.mark()
    metadata = f"pushed by {peer}".encode()
    result = run_client(peer, our_server.port_for(transport), "metadata-push",
                        transport=transport, metadata=metadata.decode())
    assert result["exit_code"] == 0, result
    event = our_server.wait_event("metadata_push", mark)
    assert event["metadata_len"] == len(metadata)
    assert event["metadata_sha256"] == hashlib.sha256(metadata).hexdigest()


# ---------------------------------------------------------------------------------------------
# request-stream
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_stream(peer, transport, our_server):
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-stream",
                        transport=transport, data="5",
                        metadata="stream-meta")
    assert result["exit_code"] == 0, result
    assert datas(result) == [b"0", b"1", b"2", b"3", b"4"]
    assert result["completed"] is True and result["cancelled"] is False
    request = our_server.wait_event("request", mark, interaction="request-stream")
    assert digest_fields(request) == digest_of(b"5", b"stream-meta")
    assert our_server.wait_event("stream_end", mark)["outcome"] == "complete"


@pytest.mark.parametrize("request_n", [None, 100])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_stream_1000_items(peer, transport, request_n, our_server):
    if request_n is not None:
        need(peer, transport, "client:request-n")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-stream",
                        transport=transport, data="1000",
                        request_n=request_n)
    assert result["exit_code"] == 0, result
    assert datas(result) == [str(i).encode() for i in range(1000)]
    assert result["completed"] is True
    our_server.wait_event("stream_end", mark, outcome="complete", sent=1000)
    check_credit(our_server.frames(mark))


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_stream_fragmented_request(peer, transport, our_server):
    """A REQUEST_STREAM carrying 5000 B of metadata, fragmented by the peer."""
    need(peer, transport, "client:fragment")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-stream",
                        transport=transport, data="3", metadata_size=5_000,
                        fragment=PEER_FRAGMENT)
    assert result["exit_code"] == 0, result
    assert [p["data_sha256"] for p in result["payloads"]] == [
        digest_of(str(i).encode())["data_sha256"] for i in range(3)]
    request = our_server.wait_event("request", mark, interaction="request-stream")
    assert digest_fields(request) == digest_of(b"3", pattern(5_000))
    (first,) = [f for f in our_server.frames(mark) if f.type == "REQUEST_STREAM"]
    assert first.has("follows")


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_stream_request_n_2(peer, transport, our_server):
    """The peer requests 2 at a time: our server never sends beyond the credit."""
    need(peer, transport, "client:request-n")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-stream",
                        transport=transport, data="7", request_n=2)
    assert result["exit_code"] == 0, result
    assert datas(result) == [str(i).encode() for i in range(7)]
    assert result["completed"] is True
    our_server.wait_event("stream_end", mark, outcome="complete", sent=7)
    granted = check_credit(our_server.frames(mark))
    assert granted[0] == 2 and all(n == 2 for n in granted), granted
    assert len(granted) >= 4  # 2 + 2 + 2 + 2 >= 7


@pytest.mark.parametrize("count", [1, 3, 256])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_stream_exact_credit(peer, transport, count, our_server):
    """The peer asks for exactly the stream's length (initial request n == ``count`` items):
    our server sends every item and completes on that credit alone (RSocket 1.0 §Flow
    Control: a completion needs no credit; Reactive Streams allows onComplete without
    demand).  The peer clients ask for another batch once a batch has arrived, which would
    let a responder that waits for credit complete late, so the check is on our frame log:
    the completion went out before any REQUEST_N came in.  (A Reactor requester with a finite
    ``request(n)`` or ``limitRate(n)`` hangs on such a responder.)"""
    need(peer, transport, "client:request-n")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-stream",
                        transport=transport, data=str(count), request_n=count)
    assert result["exit_code"] == 0, result
    assert datas(result) == [str(i).encode() for i in range(count)]
    assert result["completed"] is True
    our_server.wait_event("stream_end", mark, outcome="complete")
    frames = [f for f in our_server.frames(mark) if f.stream == 1]
    (start,) = [i for i, f in enumerate(frames) if f.type == "REQUEST_STREAM"]
    # from this request on: the frame log has no connection id, and the previous test's
    # connection may still have delivered a frame on its stream 1 after the mark
    frames = frames[start:]
    assert int(frames[0].value("initial_request_n")) == count
    (done,) = [i for i, f in enumerate(frames)
               if f.direction == "send" and f.type == "PAYLOAD" and f.has("complete")]
    until_done = frames[:done + 1]
    assert [f for f in until_done if f.direction == "recv" and f.type == "REQUEST_N"] == [], (
        f"our server completed only after more credit came: {until_done}")
    assert len([f for f in until_done if f.direction == "send" and f.has("next")]) == count


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_stream_cancel_mid_stream(peer, transport, our_server):
    """1000 items asked, 2 at a time, cancelled after 3: our server stops its source."""
    need(peer, transport, "client:request-n")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-stream",
                        transport=transport, data="1000", request_n=2,
                        take=3)
    assert result["exit_code"] == 0, result
    assert datas(result) == [b"0", b"1", b"2"]
    assert result["cancelled"] is True and result["completed"] is False
    end = our_server.wait_event("stream_end", mark)
    assert end["outcome"] == "closed"
    # the credit was 4 when the peer cancelled; + 1: with the credit used up our pump pulls one
    # item ahead (held, never sent: check_credit below checks the wire) to see an early end
    assert 3 <= end["sent"] <= 4 + 1
    frames = our_server.frames(mark)
    assert any(f.direction == "recv" and f.type == "CANCEL" for f in frames), frames
    check_credit(frames)


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_stream_application_error(peer, transport, our_server):
    result = run_client(peer, our_server.port_for(transport), "request-stream",
                        transport=transport, data="error:stream boom")
    assert result["exit_code"] == 1, result
    assert result["error"] == {"code": APPLICATION_ERROR, "message": "stream boom"}
    assert result.get("payloads", []) == []


# ---------------------------------------------------------------------------------------------
# request-channel
# ---------------------------------------------------------------------------------------------

def inbound_completion(frames, stream: int = 1) -> str | None:
    """How the peer completed its side of the channel, as seen in our frame log."""
    for frame in frames:
        if frame.direction != "recv" or frame.stream != stream or not frame.has("complete"):
            continue
        if frame.type == "REQUEST_CHANNEL":
            return "request"
        if frame.type == "PAYLOAD":
            return "flag" if frame.has("next") else "frame"
    return None


@pytest.mark.parametrize("completion", ["flag", "frame"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_channel_echo(peer, transport, completion, our_server):
    """5 payloads with metadata, the peer completing with C on its last PAYLOAD (flag) or with
    a separate PAYLOAD[C] (frame); our echo completes after it."""
    need(peer, transport, f"client:completion-{completion}")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-channel",
                        transport=transport, count=5,
                        metadata="chan-meta", completion=completion)
    assert result["exit_code"] == 0, result
    assert [payload_bytes(p) for p in result["payloads"]] == [
        (str(i).encode(), b"chan-meta") for i in range(5)]
    assert result["completed"] is True
    assert our_server.wait_event("channel_inbound_end", mark)["outcome"] == "complete"
    assert [e["data_len"] for e in our_server.events(mark) if e["event"] == "channel_next"] \
        == [1, 1, 1, 1]
    assert inbound_completion(our_server.frames(mark)) == completion


@pytest.mark.parametrize("completion", ["flag", "frame"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_channel_single_payload(peer, transport, completion, our_server):
    """Only the REQUEST_CHANNEL payload: flag puts C on REQUEST_CHANNEL itself."""
    need(peer, transport, f"client:completion-{completion}")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-channel",
                        transport=transport, count=1,
                        completion=completion)
    assert result["exit_code"] == 0, result
    assert datas(result) == [b"0"]
    assert result["completed"] is True
    assert our_server.wait_event("channel_inbound_end", mark)["outcome"] == "complete"
    expected = "request" if completion == "flag" else "frame"
    assert inbound_completion(our_server.frames(mark)) == expected


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_channel_request_n_2(peer, transport, our_server):
    need(peer, transport, "client:request-n")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-channel",
                        transport=transport, count=9, request_n=2)
    assert result["exit_code"] == 0, result
    assert datas(result) == [str(i).encode() for i in range(9)]
    assert result["completed"] is True
    our_server.wait_event("channel_inbound_end", mark, outcome="complete")
    granted = check_credit(our_server.frames(mark))
    assert granted[0] == 2 and all(n == 2 for n in granted), granted


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_channel_cancel_mid_stream(peer, transport, our_server):
    need(peer, transport, "client:request-n")
    need(peer, transport, "client:cancel-channel")
    mark = our_server.mark()
    result = run_client(peer, our_server.port_for(transport), "request-channel",
                        transport=transport, count=50, request_n=2,
                        take=3)
    assert result["exit_code"] == 0, result
    assert datas(result) == [b"0", b"1", b"2"]
    assert result["cancelled"] is True and result["completed"] is False
    frames_seen = our_server.wait_event("channel_inbound_end", mark)
    assert frames_seen["outcome"] == "cancelled"
    frames = our_server.frames(mark)
    assert any(f.direction == "recv" and f.type == "CANCEL" for f in frames), frames
    check_credit(frames)


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_channel_application_error(peer, transport, our_server):
    """The peer clients always send data b"0" first, so InteropResponder also looks at the first
    payload's metadata for ``error:``."""
    result = run_client(peer, our_server.port_for(transport), "request-channel",
                        transport=transport, count=3,
                        metadata="error:channel boom")
    assert result["exit_code"] == 1, result
    assert result["error"] == {"code": APPLICATION_ERROR, "message": "channel boom"}
    assert result.get("payloads", []) == []


@pytest.mark.parametrize(("fragmentation", "count"), [
    ("none", 3), ("ours", 3), ("peer", 3), ("peer", 2),
], ids=["whole", "ours", "peer", "peer-one-payload"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_request_channel_100kb_metadata(peer, transport, fragmentation, count, our_server,
                                        our_fragmenting_server):
    """``count`` payloads each with 100 kB of metadata, echoed: whole, fragmented by our server
    (its echo) or by the peer (its payloads; with count 2 only one PAYLOAD follows the
    REQUEST_CHANNEL, which rsocket-py can fragment correctly)."""
    if fragmentation == "peer":
        need(peer, transport, "client:fragment")
        if count > 2:
            need(peer, transport, "client:fragment-channel-payloads")
    server = our_fragmenting_server if fragmentation == "ours" else our_server
    mark = server.mark()
    result = run_client(peer, server.port_for(transport), "request-channel",
                        transport=transport, count=count, metadata_size=BIG,
                        fragment=PEER_FRAGMENT if fragmentation == "peer" else None)
    assert result["exit_code"] == 0, result
    expected = [digest_of(str(i).encode(), pattern(BIG)) for i in range(count)]
    assert result["payloads"] == expected
    assert result["completed"] is True
    server.wait_event("channel_inbound_end", mark, outcome="complete")
    nexts = [digest_fields(e) for e in server.events(mark) if e["event"] == "channel_next"]
    assert nexts == expected[1:]
    frames = server.frames(mark)
    assert any(f.direction == "recv" and f.has("follows") for f in frames) \
        == (fragmentation == "peer")
    assert any(f.direction == "send" and f.has("follows") for f in frames) \
        == (fragmentation == "ours")


# ---------------------------------------------------------------------------------------------
# the plugin's default responder
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("peer", "transport"), TARGETS)
def test_demo_responder(peer, transport, demo_server):
    """``twistd -n rsocket`` without --responder: echo, count, echo channel."""
    port = demo_server.port_for(transport)
    result = run_client(peer, port, "request-response", transport=transport, data="demo",
                        metadata="demo-meta")
    assert payload_bytes(result["payload"]) == (b"demo", b"demo-meta")
    result = run_client(peer, port, "request-stream", transport=transport, data="4",
                        request_n=2 if peers.supports(peer, "client:request-n") else None)
    assert datas(result) == [b"0", b"1", b"2", b"3"] and result["completed"] is True
    result = run_client(peer, port, "request-channel", transport=transport, count=4,
                        metadata="m")
    assert [payload_bytes(p) for p in result["payloads"]] == [
        (str(i).encode(), b"m") for i in range(4)]
    assert result["completed"] is True
    # the demo's only error: a stream count that is not a number is ERROR[INVALID]
    result = run_client(peer, port, "request-stream", transport=transport, data="abc")
    assert result["exit_code"] == 1, result
    assert result["error"]["code"] == 0x204
    assert result["error"]["message"].startswith("request-stream data must be a decimal count")
