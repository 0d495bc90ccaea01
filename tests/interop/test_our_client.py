"""OUR CLIENT (``rsocket_tx.connect()``, in-process under pytest-twisted) against the
third-party SERVERS.

Each peer's demo server (``peers.start_server``: rsocket-py 0.4.20, rsocket-js 1.0.0-alpha.3,
rsocket-js 0.0.27) is started once per module per option set by the ``peer_server`` fixture:

* ``DEFAULT``: the peer's defaults (completion py ``flag``, js ``frame``);
* ``VARIANT``: the other completion form where the peer has it, ``--request-n 2`` (the echo
  channel grants our outbound side 2 credits at a time), and on rsocket-py ``--fragment 64``
  (its responses are fragmented; the other two cannot fragment as responders).

Everything waits through Deferreds (``*_deferred`` helpers of ``peers.py``, ``addTimeout``), so
the reactor keeps serving our side while the peer works.  What crossed the wire on our side is
captured with ``connect(frame_logger=...)``.  Where a peer library cannot do something the test
skips with the reason recorded in ``peers.CAPABILITIES`` (and nothing else is skipped).
"""

from __future__ import annotations

import hashlib

import peers
import pytest
import pytest_twisted
from peers import digest_of, pattern, payload_bytes, supports, unsupported_reason
from twisted.internet import defer, reactor

from rsocket_tx import ApplicationError, Payload, connect
from rsocket_tx.core.frames import FrameType

pytestmark = [pytest.mark.interop, pytest.mark.usefixtures("no_logged_errors")]

PEERS = list(peers.PEERS)
#: (peer, transport): every peer server over TCP and over WebSocket (rsocket-py with both of
#: its WebSocket libraries), our client connecting with the matching tcp:// or ws:// endpoint
TARGETS = peers.targets()
BIG = 100_000
BIG_METADATA = 1_000
#: our fragment size in the fragmentation cases (bytes per frame, the minimum we accept)
OUR_FRAGMENT = 64
APPLICATION_ERROR = 0x201
#: seconds any single wait may take
WAIT = 30

DEFAULT: dict = {}
VARIANT = {
    "rsocket-py": {"completion": "frame", "request_n": 2, "fragment": 64},
    "rsocket-js-1.0.0-alpha.3": {"completion": "flag", "request_n": 2},
    "rsocket-js-0.0.27": {"request_n": 2},
    "rsocket-java-1.1.5": {"request_n": 2, "fragment": 64},
    "rsocket-go-0.8.12": {"request_n": 2},
    "rsocket-rust-0.7.5": {"fragment": 64},
}


def need(peer: str, transport: str, *capabilities: str) -> None:
    """Skip when the peer library lacks a capability on ``transport`` (reason from the
    capability table)."""
    why = unsupported_reason(peer, *capabilities, transport=transport)
    if why is not None:
        pytest.skip(why)


def wait(d, timeout: float = WAIT) -> defer.Deferred:
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


def echoed_metadata(peer: str, metadata: bytes | None) -> bytes | None:
    """What the peer's echo sends back for ``metadata``."""
    if not metadata or not supports(peer, "server:echo-metadata"):
        return None  # js 0.0.27 drops response metadata; nobody echoes empty metadata
    return metadata


def digest(payload: Payload) -> dict:
    return digest_of(payload.data, payload.metadata)


def event_digest(event: dict) -> dict:
    return {k: event[k] for k in ("data_len", "data_sha256", "metadata_len", "metadata_sha256")}


class Wire:
    """``frame_logger`` for connect(): keeps every frame sent and received."""

    def __init__(self) -> None:
        self.frames: list[tuple[str, object]] = []
        self._waiters: list = []

    def __call__(self, direction: str, frame) -> None:
        self.frames.append((direction, frame))
        for waiter in list(self._waiters):
            predicate, count, d = waiter
            if sum(1 for df in self.frames if predicate(*df)) >= count:
                self._waiters.remove(waiter)
                d.callback(None)

    def wait_for(self, predicate, count: int = 1) -> defer.Deferred:
        """Deferred firing once ``count`` frames satisfy ``predicate(direction, frame)``."""
        d = defer.Deferred()
        self._waiters.append((predicate, count, d))
        if sum(1 for df in self.frames if predicate(*df)) >= count:
            self._waiters.remove((predicate, count, d))
            d.callback(None)
        return wait(d)

    def of(self, direction: str, frame_type: FrameType, stream_id: int | None = None):
        return [f for d, f in self.frames if d == direction and f.frame_type == frame_type
                and (stream_id is None or f.stream_id == stream_id)]

    def check_credit(self, stream_id: int) -> list[int]:
        """Every PAYLOAD with N we sent on ``stream_id`` was covered by the credit the peer
        had granted before it (REQUEST_N received).  Returns the grants."""
        credit, sent, granted = 0, 0, []
        for direction, frame in self.frames:
            if frame.stream_id != stream_id:
                continue
            if direction == "recv" and frame.frame_type == FrameType.REQUEST_N:
                credit += frame.request_n
                granted.append(frame.request_n)
            elif (direction == "send" and frame.frame_type == FrameType.PAYLOAD and frame.next):
                sent += 1
                assert sent <= credit, f"we sent payload #{sent} with {credit} credit"
        return granted

    def completion(self, stream_id: int) -> str | None:
        """How the peer completed ``stream_id`` towards us: C with N (flag) or alone (frame)."""
        for frame in self.of("recv", FrameType.PAYLOAD, stream_id):
            if frame.complete:
                return "flag" if frame.next else "frame"
        return None


def endpoint_of(server):
    """What connect() is given for a peer server: its URI, ``tcp://127.0.0.1:PORT`` or
    ``ws://127.0.0.1:PORT/rsocket``."""
    return server.url


@pytest_twisted.async_yield_fixture
async def client():
    """``await client(server, **connect_kwargs)`` -> (RSocket, Wire); all closed afterwards."""
    opened = []

    async def open_(server, **kwargs):
        wire = Wire()
        rsocket = await wait(connect(endpoint_of(server), reactor=reactor,
                                     frame_logger=wire, **kwargs))
        opened.append(rsocket)
        server.drain_events()  # what earlier tests left behind
        return rsocket, wire

    yield open_
    for rsocket in opened:
        if rsocket.is_open:
            await wait(rsocket.close())


@pytest.fixture
def connected(peer_server, client):
    """``await connected(peer, transport, **server_options)`` -> (server, RSocket, Wire):
    ``peer``'s demo server on ``transport`` (``peer_server``) and our client connected to it
    with connect()'s defaults."""

    async def open_(peer: str, transport: str = "tcp", **server_options):
        server = await peer_server(peer, transport, **server_options)
        rsocket, wire = await client(server)
        return server, rsocket, wire

    return open_


async def event(server, name: str, payload: Payload | None = None, **match) -> dict:
    """The next event ``name`` whose fields equal ``match`` and, given ``payload``, whose data
    (and non-empty metadata) have its sha256 — events other tests may have left behind do not
    match.  Waits in a thread: the reactor keeps running."""
    if payload is not None:
        expected = digest(payload)
        match["data_sha256"] = expected["data_sha256"]
        if payload.metadata:
            match["metadata_sha256"] = expected["metadata_sha256"]

    def predicate(e: dict) -> bool:
        return e.get("event") == name and all(e.get(k) == v for k, v in match.items())

    return await wait(server.next_event_deferred(WAIT - 5, predicate))


async def assert_usable(rsocket, data: bytes = b"after") -> None:
    """The connection still answers: a request-response echoes ``data``."""
    assert (await wait(rsocket.request_response(Payload(data)))).data == data


async def take_then_cancel(stream, count: int = 3) -> list[bytes]:
    """Iterate ``stream``, cancelling it once ``count`` items have arrived; the data of every
    item that arrived (cancel() ends the iteration)."""
    items = []
    async for item in stream:
        items.append(item.data)
        if len(items) == count:
            stream.cancel()
    return items


async def expect_application_error(d, message: str) -> None:
    """``d`` fails with ERROR[APPLICATION_ERROR] carrying ``message``."""
    with pytest.raises(ApplicationError) as info:
        await wait(d)
    assert info.value.error_code == APPLICATION_ERROR
    assert info.value.message == message


# ---------------------------------------------------------------------------------------------
# SETUP
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_setup_with_payload(peer, transport, peer_server, client):
    """Our SETUP (with data and metadata, MIME types, keepalive, lifetime) as the peer sees it.
    It must go out in one write: rsocket-js 1.0.0-alpha.3 crashes on a split SETUP."""
    server = await peer_server(peer, transport)
    rsocket, _ = await client(server, setup_payload=Payload(b"setup-data", b"setup-meta"),
                              data_mime_type="application/json",
                              metadata_mime_type="text/plain", keepalive_interval=15_000,
                              max_lifetime=60_000)
    seen = await event(server, "setup", Payload(b"setup-data", b"setup-meta"))
    assert payload_bytes(seen) == (b"setup-data", b"setup-meta")
    if supports(peer, "server:setup-details"):
        assert seen["data_mime_type"] == "application/json"
        assert seen["metadata_mime_type"] == "text/plain"
        assert (seen["keepalive"], seen["lifetime"]) in [(15_000, 60_000), (15, 60)]
    if "version" in seen:
        assert seen["version"] == [1, 0]
    await assert_usable(rsocket, b"after setup")
    assert server.process.poll() is None  # still alive


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_keepalive_answered(peer, transport, peer_server, client):
    """With a 100 ms keepalive interval our KEEPALIVE[R]s are answered (R clear) and the
    connection stays usable: we wait for the 3rd answer, not for a time.  A server may send
    KEEPALIVE[R] too (rsocket-java does, every interval): we answer each one, and send no
    KEEPALIVE without R otherwise."""
    server = await peer_server(peer, transport)
    rsocket, wire = await client(server, keepalive_interval=100, max_lifetime=20_000)

    def answer(direction, frame):
        return (direction == "recv" and frame.frame_type == FrameType.KEEPALIVE
                and not frame.respond)

    await wire.wait_for(answer, 3)
    sent = wire.of("send", FrameType.KEEPALIVE)
    theirs = [f for f in wire.of("recv", FrameType.KEEPALIVE) if f.respond]
    assert len([f for f in sent if f.respond]) >= 3
    assert len([f for f in sent if not f.respond]) <= len(theirs), (sent, theirs)
    assert rsocket.is_open
    await assert_usable(rsocket, b"alive")


# ---------------------------------------------------------------------------------------------
# request-response
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_response_echo_with_metadata(peer, transport, connected):
    server, rsocket, _ = await connected(peer, transport)
    request = Payload(b"hello " + peer.encode(), b"meta \x00\xff")
    response = await wait(rsocket.request_response(request))
    assert response == Payload(request.data, echoed_metadata(peer, request.metadata))
    seen = await event(server, "request", request, interaction="request-response")
    assert payload_bytes(seen) == (request.data, request.metadata)


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_response_without_metadata(peer, transport, connected):
    server, rsocket, _ = await connected(peer, transport)
    response = await wait(rsocket.request_response(Payload(b"plain")))
    assert response == Payload(b"plain")
    assert response.metadata is None
    seen = await event(server, "request", Payload(b"plain"), interaction="request-response")
    if peer != "rsocket-py":  # rsocket-py reports absent metadata as b"" (peers.py docstring)
        assert seen["metadata"] is None


@pytest.mark.parametrize("metadata", [None, b"metadata only"], ids=["empty", "metadata-only"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_response_empty_data(peer, transport, metadata, connected):
    """Empty data, with or without metadata."""
    server, rsocket, _ = await connected(peer, transport)
    response = await wait(rsocket.request_response(Payload(b"", metadata)))
    if metadata is None and not supports(peer, "server:echo-empty-payload"):
        # rsocket-py completes without a value (PAYLOAD[C], no N): request_response gives None
        assert response is None
    else:
        assert response == Payload(b"", echoed_metadata(peer, metadata))
    seen = await event(server, "request", Payload(b"", metadata),
                       interaction="request-response")
    assert seen["data_len"] == 0


@pytest.mark.parametrize("fragmentation", ["none", "ours", "theirs", "both"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_response_100kb(peer, transport, fragmentation, peer_server, client):
    """100 kB data + 1 kB metadata echoed; our request fragmented (fragment_size=64), their
    response fragmented (rsocket-py --fragment 64), both or neither."""
    theirs = fragmentation in ("theirs", "both")
    ours = fragmentation in ("ours", "both")
    if theirs:
        need(peer, transport, "server:fragment", "server:complete-on-last-fragment")
    server = await peer_server(peer, transport, **(VARIANT[peer] if theirs else DEFAULT))
    rsocket, wire = await client(server, fragment_size=OUR_FRAGMENT if ours else None)
    request = Payload(pattern(BIG), pattern(BIG_METADATA))
    response = await wait(rsocket.request_response(request))
    assert digest(response) == digest_of(request.data, echoed_metadata(peer, request.metadata))
    seen = await event(server, "request", request, interaction="request-response")
    assert event_digest(seen) == digest_of(request.data, request.metadata)
    sent = [f for d, f in wire.frames if d == "send" and f.stream_id == 1]
    received = [f for d, f in wire.frames if d == "recv" and f.stream_id == 1]
    assert any(f.follows for f in sent) == ours
    assert any(f.follows for f in received) == theirs
    if ours:
        assert len(sent) > BIG // OUR_FRAGMENT


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_response_application_error(peer, transport, connected):
    server, rsocket, _ = await connected(peer, transport)
    message = "boom \u2713 " + peer
    await expect_application_error(
        rsocket.request_response(Payload(b"error:" + message.encode())), message)
    # the connection is still usable
    await assert_usable(rsocket, b"after")


# ---------------------------------------------------------------------------------------------
# fire-and-forget, metadata-push
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", ["small", "100kb", "100kb-fragmented"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_fire_and_forget(peer, transport, size, peer_server, client):
    server = await peer_server(peer, transport)
    fragmented = size == "100kb-fragmented"
    rsocket, wire = await client(server, fragment_size=OUR_FRAGMENT if fragmented else None)
    if size == "small":
        payload = Payload(b"fnf from rsocket_tx", b"fnf-meta")
    else:
        payload = Payload(pattern(BIG), pattern(BIG_METADATA))
    await wait(rsocket.fire_and_forget(payload))
    seen = await event(server, "fnf", payload)
    assert event_digest(seen) == digest(payload)
    assert any(f.follows for d, f in wire.frames if d == "send" and f.stream_id == 1) \
        == fragmented


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_fire_and_forget_beyond_max_frame_size(peer, transport, connected):
    """17 MB cannot fit one frame (24-bit length): we fragment it without being asked.
    (Fire-and-forget: none of the peers can send a payload this large back — the js servers
    never fragment as responders, rsocket-py truncates the length unless told to fragment.)"""
    need(peer, transport, "server:receive-max-frame")
    server, rsocket, wire = await connected(peer, transport)
    data = pattern(17_000_000)
    await wait(rsocket.fire_and_forget(Payload(data, b"big")))
    seen = await event(server, "fnf", Payload(data, b"big"))
    assert event_digest(seen) == digest_of(data, b"big")
    (first,) = wire.of("send", FrameType.REQUEST_FNF)
    assert first.follows
    await assert_usable(rsocket, b"after")


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_metadata_push_to_their_server(peer, transport, connected):
    """Ours to them; the connection keeps working afterwards."""
    need(peer, transport, "server:metadata-push", "server:keeps-connection-after-metadata-push")
    server, rsocket, wire = await connected(peer, transport)
    metadata = b"pushed by rsocket_tx \x00\x01\xfe\xff"
    await wait(rsocket.metadata_push(metadata))
    seen = await event(server, "metadata_push")
    assert seen["metadata_len"] == len(metadata)
    assert seen["metadata_sha256"] == hashlib.sha256(metadata).hexdigest()
    (frame,) = wire.of("send", FrameType.METADATA_PUSH)
    assert frame.metadata == metadata
    await assert_usable(rsocket, b"still there")


# ---------------------------------------------------------------------------------------------
# request-stream
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["default", "variant"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_stream(peer, transport, variant, connected):
    """5 items; with both completion forms where the peer has them (the stream completes with
    C on the last PAYLOAD or with a separate PAYLOAD[C])."""
    options = VARIANT[peer] if variant == "variant" else DEFAULT
    if variant == "variant" and "completion" not in options:
        need(peer, transport, "server:completion-flag")
    completion = options.get("completion", peers.PEERS[peer].default_completion)
    server, rsocket, wire = await connected(peer, transport, **options)
    stream = rsocket.request_stream(Payload(b"5", b"stream-meta"))
    items = await wait(stream.collect())
    assert items == [Payload(str(i).encode()) for i in range(5)]
    seen = await event(server, "request", Payload(b"5", b"stream-meta"),
                       interaction="request-stream")
    assert payload_bytes(seen) == (b"5", b"stream-meta")
    assert wire.completion(stream.stream_id) == completion


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_stream_1000_items(peer, transport, connected):
    """The default prefetch (256): our REQUEST_Ns keep 1000 items flowing, exactly once each."""
    need(peer, transport, "server:request-n")
    server, rsocket, wire = await connected(peer, transport)
    stream = rsocket.request_stream(Payload(b"1000"))
    items = await wait(stream.collect())
    assert [p.data for p in items] == [str(i).encode() for i in range(1000)]
    (request,) = wire.of("send", FrameType.REQUEST_STREAM)
    ns = [f.request_n for f in wire.of("send", FrameType.REQUEST_N, stream.stream_id)]
    assert request.initial_request_n + sum(ns) >= 1000


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_stream_fragmented_request(peer, transport, peer_server, client):
    """A REQUEST_STREAM carrying 5000 B of metadata, fragmented at 64 bytes by us."""
    server = await peer_server(peer, transport)
    rsocket, wire = await client(server, fragment_size=OUR_FRAGMENT)
    stream = rsocket.request_stream(Payload(b"3", pattern(5_000)), prefetch=5)
    items = await wait(stream.collect())
    assert [p.data for p in items] == [b"0", b"1", b"2"]
    seen = await event(server, "request", Payload(b"3", pattern(5_000)),
                       interaction="request-stream")
    assert event_digest(seen) == digest_of(b"3", pattern(5_000))
    (first,) = wire.of("send", FrameType.REQUEST_STREAM)
    assert first.follows and first.initial_request_n == 5


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_stream_prefetch_2(peer, transport, connected):
    """prefetch=2: REQUEST_STREAM asks for 2, and we never ask for more than 2 at a time."""
    need(peer, transport, "server:request-n")
    server, rsocket, wire = await connected(peer, transport)
    stream = rsocket.request_stream(Payload(b"7"), prefetch=2)
    items = []
    async for item in stream:
        items.append(item.data)
    assert items == [str(i).encode() for i in range(7)]
    (request,) = wire.of("send", FrameType.REQUEST_STREAM)
    assert request.initial_request_n == 2
    ns = [f.request_n for f in wire.of("send", FrameType.REQUEST_N, stream.stream_id)]
    assert ns and all(1 <= n <= 2 for n in ns), ns
    assert 2 + sum(ns) >= 7
    await event(server, "request_n", interaction="request-stream", initial=True, n=2)


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_stream_cancel_mid_stream(peer, transport, connected):
    """1000 items asked, 2 at a time; we cancel after 3: the server sees CANCEL, we get nothing
    more, and the connection goes on."""
    need(peer, transport, "server:request-n")
    server, rsocket, wire = await connected(peer, transport)
    stream = rsocket.request_stream(Payload(b"1000"), prefetch=2)
    assert await take_then_cancel(stream) == [b"0", b"1", b"2"]
    cancelled = await event(server, "cancel", interaction="request-stream")
    assert wire.of("send", FrameType.CANCEL, stream.stream_id)
    # the peer emitted no more than we had asked for (2 up front + a REQUEST_N per item taken)
    granted = 2 + sum(f.request_n for f in wire.of("send", FrameType.REQUEST_N,
                                                   stream.stream_id))
    assert 3 <= cancelled.get("sent", 3) <= granted <= 5
    await assert_usable(rsocket, b"after cancel")


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_stream_take(peer, transport, connected):
    """collect(take=4) cancels after the 4th item."""
    need(peer, transport, "server:request-n")
    server, rsocket, wire = await connected(peer, transport)
    stream = rsocket.request_stream(Payload(b"500"), prefetch=3)
    items = await wait(stream.collect(take=4))
    assert [p.data for p in items] == [b"0", b"1", b"2", b"3"]
    await event(server, "cancel", interaction="request-stream")
    assert wire.of("send", FrameType.CANCEL, stream.stream_id)


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_stream_application_error(peer, transport, connected):
    server, rsocket, _ = await connected(peer, transport)
    stream = rsocket.request_stream(Payload(b"error:stream boom"))
    await expect_application_error(stream.collect(), "stream boom")


# ---------------------------------------------------------------------------------------------
# request-channel
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["default", "variant"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_channel_echo(peer, transport, variant, connected):
    """b"0" in REQUEST_CHANNEL then b"1".."4" (metadata on all), our side completing when the
    iterable ends (a separate PAYLOAD[C]); the variant server grants 2 credits at a time, so
    our outbound waits for REQUEST_N."""
    server, rsocket, wire = await connected(
        peer, transport, **(VARIANT[peer] if variant == "variant" else DEFAULT))
    metadata = b"chan-meta"
    outbound = [Payload(str(i).encode(), metadata) for i in range(1, 5)]
    stream = rsocket.request_channel(Payload(b"0", metadata), outbound)
    items = await wait(stream.collect())
    assert items == [Payload(str(i).encode(), echoed_metadata(peer, metadata))
                     for i in range(5)]
    first = await event(server, "request", Payload(b"0", metadata),
                        interaction="request-channel")
    assert payload_bytes(first) == (b"0", metadata)
    done = await event(server, "channel_inbound_complete")
    assert done["form"] == "frame"
    (ours,) = [f for f in wire.of("send", FrameType.PAYLOAD, stream.stream_id) if f.complete]
    assert not ours.next and ours.data == b""  # our completion: a separate PAYLOAD[C]
    granted = wire.check_credit(stream.stream_id)
    if variant == "variant" and "request_n" in VARIANT[peer]:
        assert granted and all(n == 2 for n in granted), granted
    assert wire.completion(stream.stream_id) is not None


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_channel_many_with_credit_2(peer, transport, connected):
    """20 outbound payloads from an async generator against a server granting 2 at a time."""
    need(peer, transport, "server:request-n")
    server, rsocket, wire = await connected(peer, transport, **VARIANT[peer])

    async def outbound():
        for i in range(1, 20):
            yield Payload(str(i).encode())

    stream = rsocket.request_channel(Payload(b"0"), outbound(), prefetch=4)
    items = await wait(stream.collect())
    assert [p.data for p in items] == [str(i).encode() for i in range(20)]
    granted = wire.check_credit(stream.stream_id)
    assert sum(granted) >= 19 and all(n == 2 for n in granted), granted


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_channel_complete_in_request(peer, transport, connected):
    """complete=True: C on REQUEST_CHANNEL itself, nothing else from us."""
    need(peer, transport, "server:channel-initial-complete")
    server, rsocket, wire = await connected(peer, transport)
    stream = rsocket.request_channel(Payload(b"only", b"m"), complete=True)
    items = await wait(stream.collect())
    assert items == [Payload(b"only", echoed_metadata(peer, b"m"))]
    (request,) = wire.of("send", FrameType.REQUEST_CHANNEL)
    assert request.complete
    first = await event(server, "request", Payload(b"only", b"m"),
                        interaction="request-channel")
    assert first.get("complete") is True
    done = await event(server, "channel_inbound_complete")
    assert done["form"] == "request"


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_channel_no_outbound(peer, transport, connected):
    """outbound=None also completes our side in REQUEST_CHANNEL (same as complete=True)."""
    need(peer, transport, "server:channel-initial-complete")
    server, rsocket, _ = await connected(peer, transport)
    items = await wait(rsocket.request_channel(Payload(b"solo")).collect())
    assert [p.data for p in items] == [b"solo"]
    done = await event(server, "channel_inbound_complete")
    assert done["form"] == "request"


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_channel_cancel_mid_stream(peer, transport, connected):
    need(peer, transport, "server:request-n")
    server, rsocket, wire = await connected(peer, transport)
    outbound = [Payload(str(i).encode()) for i in range(1, 30)]
    stream = rsocket.request_channel(Payload(b"0"), outbound, prefetch=2)
    assert await take_then_cancel(stream) == [b"0", b"1", b"2"]
    await event(server, "cancel", interaction="request-channel")
    assert wire.of("send", FrameType.CANCEL, stream.stream_id)
    await assert_usable(rsocket, b"after cancel")


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_channel_application_error_from_them(peer, transport, connected):
    server, rsocket, _ = await connected(peer, transport)
    stream = rsocket.request_channel(Payload(b"error:channel boom"),
                                     [Payload(b"1"), Payload(b"2")])
    await expect_application_error(stream.collect(), "channel boom")


@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_channel_application_error_from_us(peer, transport, connected):
    """Our outbound source raises after 2 payloads: ERROR[APPLICATION_ERROR] reaches them."""
    need(peer, transport, "server:survives-channel-error")
    server, rsocket, wire = await connected(peer, transport)

    def outbound():
        yield Payload(b"1")
        yield Payload(b"2")
        raise RuntimeError("outbound boom")

    stream = rsocket.request_channel(Payload(b"0"), outbound())
    with pytest.raises(ApplicationError) as info:  # ERROR ends the channel both ways
        await wait(stream.collect())
    assert info.value.message == "RuntimeError: outbound boom"  # (the type is kept)
    (sent,) = wire.of("send", FrameType.ERROR, stream.stream_id)
    assert (sent.error_code, sent.data) == (APPLICATION_ERROR, b"RuntimeError: outbound boom")
    if peer == "rsocket-js-1.0.0-alpha.3":
        # the library calls the responder's cancel() and then onError() for an inbound ERROR
        # (RequestChannelStream.js, RequestChannelResponderStream.handle); the harness's echo
        # queue (common.js EchoQueue) is done after cancel() and drops the error, so the
        # server reports the end of the channel as a cancel
        await event(server, "cancel", interaction="request-channel")
        return
    error = await event(server, "channel_inbound_error")
    # rsocket-py hands APPLICATION_ERROR to the application as a bare RuntimeError(message)
    # (README quirk py 6), so its event has no code
    if peer != "rsocket-py":
        assert error["code"] == APPLICATION_ERROR
    assert error["message"] == "RuntimeError: outbound boom"


@pytest.mark.parametrize("fragmentation", ["none", "ours", "theirs"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_request_channel_100kb(peer, transport, fragmentation, peer_server, client):
    """3 payloads of 100 kB data + 1 kB metadata each way."""
    theirs = fragmentation == "theirs"
    if theirs:
        need(peer, transport, "server:fragment", "server:fragment-stream-payloads")
    server = await peer_server(peer, transport, **(VARIANT[peer] if theirs else DEFAULT))
    ours = fragmentation == "ours"
    rsocket, wire = await client(server, fragment_size=OUR_FRAGMENT if ours else None)
    payloads = [Payload(bytes([i]) + pattern(BIG - 1), pattern(BIG_METADATA)) for i in range(3)]
    stream = rsocket.request_channel(payloads[0], payloads[1:])
    items = await wait(stream.collect())
    assert [digest(p) for p in items] == [
        digest_of(p.data, echoed_metadata(peer, p.metadata)) for p in payloads]
    first = await event(server, "request", payloads[0], interaction="request-channel")
    assert event_digest(first) == digest(payloads[0])
    for expected in payloads[1:]:
        assert event_digest(await event(server, "channel_next", expected)) == digest(expected)
    sent = [f for d, f in wire.frames if d == "send" and f.stream_id == stream.stream_id]
    received = [f for d, f in wire.frames if d == "recv" and f.stream_id == stream.stream_id]
    assert any(getattr(f, "follows", False) for f in sent) == ours
    assert any(getattr(f, "follows", False) for f in received) == theirs


# ---------------------------------------------------------------------------------------------
# several interactions at once on one connection
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("fragmentation", ["none", "ours", "theirs"])
@pytest.mark.parametrize(("peer", "transport"), TARGETS)
@pytest_twisted.ensureDeferred
async def test_concurrent_interactions(peer, transport, fragmentation, peer_server, client):
    """3 request-responses of 100 kB, 2 streams and 2 channels of 20 kB payloads in flight
    together on one connection; fragmented (at 64 bytes) by us or by them, the fragments of
    different streams share the wire."""
    theirs = fragmentation == "theirs"
    if theirs:
        need(peer, transport, "server:fragment", "server:fragment-stream-payloads")
    server = await peer_server(peer, transport, **(VARIANT[peer] if theirs else DEFAULT))
    rsocket, _ = await client(server,
                              fragment_size=OUR_FRAGMENT if fragmentation == "ours" else None)
    responses = [rsocket.request_response(Payload(bytes([i]) + pattern(BIG - 1),
                                                  b"rr-%d" % i)) for i in range(3)]
    streams = [rsocket.request_stream(Payload(b"%d" % n), prefetch=3).collect()
               for n in (30, 40)]
    channel_payloads = [[Payload(bytes([c, i]) * 10_000) for i in range(4)] for c in range(2)]
    channels = [rsocket.request_channel(ps[0], ps[1:], prefetch=2).collect()
                for ps in channel_payloads]
    results = await wait(defer.gatherResults(responses + streams + channels,
                                             consumeErrors=True))
    for i, response in enumerate(results[:3]):
        assert digest(response) == digest_of(bytes([i]) + pattern(BIG - 1),
                                             echoed_metadata(peer, b"rr-%d" % i))
    assert [p.data for p in results[3]] == [str(i).encode() for i in range(30)]
    assert [p.data for p in results[4]] == [str(i).encode() for i in range(40)]
    for echoed, sent in zip(results[5:], channel_payloads):
        assert [digest(p) for p in echoed] == [digest(p) for p in sent]
