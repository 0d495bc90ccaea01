"""The 2015 draft against itself over real loopback transports: a Responder subclass served by
ReactiveSocketServerFactory, every interaction called from the client (connect()), over TCP,
TLS and WebSocket; and both directions (the server requesting from the client)."""

from __future__ import annotations

import itertools

import pytest
import pytest_twisted
from tlscerts import make_tls_files
from twisted.internet import defer, reactor

from rsocket_tx.core import errors as E
from rsocket_tx.core.payload import Payload
from rsocket_tx.reactivesocket import ReactiveSocketServerFactory, connect
from rsocket_tx.reactivesocket.client import server_endpoint, transport_spec
from rsocket_tx.reactivesocket.frames import FrameType
from rsocket_tx.responder import Responder

aio = pytest_twisted.ensureDeferred
WAIT = 10


def wait(d, timeout: float = WAIT):
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


class Recorder:
    """What the server's responders saw, with Deferreds to wait for one-way messages."""

    def __init__(self) -> None:
        self.fnf: list[Payload] = []
        self.pushed: list[bytes] = []
        self.setups = []
        self.arrived: list[defer.Deferred] = []

    def note(self, item) -> None:
        waiters, self.arrived = self.arrived, []
        for d in waiters:
            d.callback(item)

    def next(self) -> defer.Deferred:
        d = defer.Deferred()
        self.arrived.append(d)
        return d


class DraftResponder(Responder):
    """Serves every interaction of the draft."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    def accept_setup(self, setup):
        self.recorder.setups.append(setup)
        if setup.payload.data == b"reject me":
            raise E.RejectedSetupError("not today")

    def request_response(self, payload):
        if payload.data == b"fail":
            raise ValueError("asked to fail")
        if payload.data == b"nothing":
            return None
        return Payload(b"echo:" + payload.data, payload.metadata)

    def fire_and_forget(self, payload):
        self.recorder.fnf.append(payload)
        self.recorder.note(payload)

    def metadata_push(self, metadata):
        self.recorder.pushed.append(metadata)
        self.recorder.note(metadata)

    def request_stream(self, payload):
        if payload.data == b"forever":
            return (Payload(b"%d" % i) for i in itertools.count())
        if payload.data == b"boom":
            def broken():
                yield Payload(b"first")
                raise RuntimeError("the source broke")
            return broken()
        return [Payload(b"%d" % i) for i in range(int(payload.data))]


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_tls_files(tmp_path_factory.mktemp("rs2015-tls"))


class Loop:
    def __init__(self) -> None:
        self.ports = []
        self.clients = []
        self.recorder = Recorder()

    async def serve(self, spec: str = "tcp://127.0.0.1:0", **settings):
        recorder = self.recorder
        factory = ReactiveSocketServerFactory(lambda: DraftResponder(recorder), **settings)
        port = await wait(server_endpoint(reactor, spec).listen(factory))
        self.ports.append(port)
        self.factory = factory
        return port

    async def connect(self, spec: str, **kwargs):
        rs = await wait(connect(spec, **kwargs))
        self.clients.append(rs)
        return rs

    async def cleanup(self) -> None:
        for rs in self.clients:
            if rs.is_open:
                await wait(rs.close())
        for port in self.ports:
            await port.stopListening()


@pytest_twisted.async_yield_fixture
async def loop():
    lp = Loop()
    yield lp
    await lp.cleanup()


#: the server logs (with their tracebacks) the handler errors every_interaction provokes
HANDLER_BUGS_LOGGED = pytest.mark.logs_failure(
    "the responder's handler and stream source raise on purpose: the server logs them",
    match=r"builtins\.(ValueError: asked to fail|RuntimeError: the source broke)")


async def every_interaction(rs, recorder: Recorder) -> None:
    # request-response, with metadata, an error, and an answer with no payload
    assert await wait(rs.request_response(Payload(b"hi", b"md"))) == Payload(b"echo:hi", b"md")
    with pytest.raises(E.ApplicationError, match="^APPLICATION_ERROR: ValueError: asked to fail$"):
        await wait(rs.request_response(Payload(b"fail")))
    assert await wait(rs.request_response(Payload(b"nothing"))) is None
    # fire-and-forget
    arrived = recorder.next()
    await wait(rs.fire_and_forget(Payload(b"fnf", b"m")))
    assert await wait(arrived) == Payload(b"fnf", b"m")
    # request-stream: flow control over more items than the prefetch window
    items = await wait(rs.request_stream(Payload(b"300"), prefetch=7).collect())
    assert [p.data for p in items] == [b"%d" % i for i in range(300)]
    assert await wait(rs.request_stream(Payload(b"0")).collect()) == []
    # a stream whose source fails
    got = []
    with pytest.raises(E.ApplicationError,
                       match="^APPLICATION_ERROR: RuntimeError: the source broke$"):
        async for p in rs.request_stream(Payload(b"boom")):
            got.append(p.data)
    assert got == [b"first"]
    # request-sub: an endless stream, taken in part then canceled
    sub = rs.request_subscription(Payload(b"forever"), prefetch=5)
    taken = []
    async for p in sub:
        taken.append(p.data)
        if len(taken) == 40:
            sub.cancel()
            break
    assert taken == [b"%d" % i for i in range(40)]
    # metadata-push
    arrived = recorder.next()
    await wait(rs.metadata_push(b"pushed"))
    assert await wait(arrived) == b"pushed"
    # a finite source on a subscription: the draft has no COMPLETE there
    with pytest.raises(E.ApplicationError, match="subscription ended"):
        await wait(rs.request_subscription(Payload(b"2")).collect())
    # what the draft lacks is refused locally
    with pytest.raises(E.LocalProtocolError, match="no REQUEST_CHANNEL"):
        rs.request_channel(Payload(b"x"), [])
    # the connection still works
    assert await wait(rs.request_response(Payload(b"again"))) == Payload(b"echo:again")


@HANDLER_BUGS_LOGGED
@aio
async def test_tcp_every_interaction(loop):
    port = await loop.serve("rs2015+tcp://127.0.0.1:0")
    rs = await loop.connect(f"rs2015+tcp://127.0.0.1:{port.getHost().port}",
                            setup_payload=Payload(b"hello", b"setup-md"),
                            data_mime_type="application/json")
    await every_interaction(rs, loop.recorder)
    setup = loop.recorder.setups[0]
    assert setup.version == (0, 0)
    assert setup.data_mime_type == "application/json"
    assert setup.payload == Payload(b"hello", b"setup-md")


@HANDLER_BUGS_LOGGED
@aio
async def test_tls_every_interaction(loop, certs):
    port = await loop.serve(f"rs2015+tls://127.0.0.1:0?privateKey={certs.server_key}"
                            f"&certKey={certs.server_cert}")
    rs = await loop.connect(f"tls://127.0.0.1:{port.getHost().port}?trustRoots={certs.ca}")
    await every_interaction(rs, loop.recorder)


@HANDLER_BUGS_LOGGED
@aio
async def test_websocket_every_interaction(loop):
    port = await loop.serve("ws://127.0.0.1:0/rs2015")
    rs = await loop.connect(f"ws://127.0.0.1:{port.getHost().port}/rs2015")
    await every_interaction(rs, loop.recorder)


@aio
async def test_large_responses_are_fragmented_and_reassembled(loop):
    class Big(Responder):
        def request_response(self, payload):
            return Payload(bytes(range(256)) * 1000, b"m" * 300)

    factory = ReactiveSocketServerFactory(Big, fragment_size=1024)
    port = await wait(server_endpoint(reactor, "tcp://127.0.0.1:0").listen(factory))
    loop.ports.append(port)
    frames = []
    rs = await loop.connect(f"tcp://127.0.0.1:{port.getHost().port}",
                            frame_logger=lambda direction, f: frames.append((direction, f)))
    answer = await wait(rs.request_response(Payload(b"big")))
    assert answer == Payload(bytes(range(256)) * 1000, b"m" * 300)
    responses = [f for d, f in frames if d == "recv" and f.frame_type == FrameType.RESPONSE]
    assert len(responses) > 200 and all(f.follows for f in responses[:-1])
    assert not responses[-1].follows


@aio
async def test_rejected_setup_fails_the_client(loop):
    port = await loop.serve()
    d = connect(f"tcp://127.0.0.1:{port.getHost().port}", setup_payload=Payload(b"reject me"))
    rs = await wait(d)
    loop.clients.append(rs)
    with pytest.raises(E.RejectedSetupError, match="not today"):
        await wait(rs.request_response(Payload(b"x")))
    await wait(rs.closed)
    assert isinstance(rs.close_reason, E.RejectedSetupError)


@aio
async def test_leases(loop):
    from rsocket_tx.core.lease import FixedRateLeasePolicy

    port = await loop.serve(lease_policy=FixedRateLeasePolicy(ttl=60_000, requests=2))
    rs = await loop.connect(f"tcp://127.0.0.1:{port.getHost().port}", lease=True)
    assert rs.lease.available() == 2
    assert await wait(rs.request_response(Payload(b"a"))) == Payload(b"echo:a")
    assert await wait(rs.request_response(Payload(b"b"))) == Payload(b"echo:b")
    with pytest.raises(E.LeaseError):
        rs.request_response(Payload(b"c"))


@aio
async def test_the_server_requests_from_the_client(loop):
    """Both requesters of a connection: the server's responder calls the client's."""
    requested = defer.Deferred()

    class Asker(Responder):
        def request_response(self, payload):
            return self.rsocket.request_response(Payload(b"from server"))

    class ClientSide(Responder):
        def request_response(self, payload):
            requested.callback(payload)
            return Payload(b"client answers")

    factory = ReactiveSocketServerFactory(Asker)
    port = await wait(server_endpoint(reactor, "tcp://127.0.0.1:0").listen(factory))
    loop.ports.append(port)
    rs = await loop.connect(f"tcp://127.0.0.1:{port.getHost().port}", responder=ClientSide())
    assert await wait(rs.request_response(Payload(b"go"))) == Payload(b"client answers")
    assert (await wait(requested)) == Payload(b"from server")


class RawClient:
    """A TCP client that writes bytes and collects what comes back until the server closes."""

    @staticmethod
    async def exchange(port, data: bytes) -> bytes:
        from twisted.internet.endpoints import TCP4ClientEndpoint, connectProtocol
        from twisted.internet.protocol import Protocol

        class Collect(Protocol):
            def __init__(self):
                self.received = b""
                self.done = defer.Deferred()

            def dataReceived(self, data):
                self.received += data

            def connectionLost(self, reason):
                self.done.callback(self.received)

        proto = Collect()
        await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port), proto))
        proto.transport.write(data)
        return await wait(proto.done)


def frames_of(data: bytes):
    from rsocket_tx.reactivesocket import frames as F
    return [F.decode(b) for b in F.FrameReader(1 << 20).feed(data)]


@aio
async def test_hostile_first_frame_gets_setup_error_and_close(loop):
    from rsocket_tx.reactivesocket import frames as F
    port = await loop.serve()
    got = await RawClient.exchange(port.getHost().port,
                                   F.frame_with_length(F.encode(F.CancelFrame(stream_id=1))))
    assert frames_of(got) == [F.SetupErrorFrame(
        error_code=F.SetupErrorCode.INVALID_SETUP,
        data=b"the first frame must be SETUP, got CANCEL")]


@aio
async def test_hostile_bytes_after_setup_get_error_on_stream_0_and_close(loop):
    from rsocket_tx.reactivesocket import frames as F
    port = await loop.serve()
    setup = F.frame_with_length(F.encode(F.SetupFrame(metadata_mime_type=b"",
                                                      data_mime_type=b"")))
    got = await RawClient.exchange(port.getHost().port, setup + b"\x80\x00\x00\x10" + bytes(12))
    [error] = frames_of(got)
    assert error.stream_id == 0 and isinstance(error, F.ErrorFrame)
    assert b"reserved R bit" in error.data


@aio
async def test_an_rsocket_1_0_client_is_refused_with_unsupported_setup(loop):
    """An RSocket 1.0 SETUP read as this draft: its first frame (a 2015 length word of
    0x00002800 is past the max frame size) fails the handshake: SETUP_ERROR and close."""
    from rsocket_tx.client import make_setup as make_10_setup
    from rsocket_tx.core.frames import encode as encode_10
    from rsocket_tx.core.framing import frame_with_length as with_length_10
    from rsocket_tx.reactivesocket import frames as F
    port = await loop.serve(max_frame_size=4096)
    got = await RawClient.exchange(port.getHost().port, with_length_10(encode_10(make_10_setup())))
    [error] = frames_of(got)
    assert isinstance(error, F.SetupErrorFrame)


def test_rs2015_uris_name_their_transport():
    assert transport_spec("rs2015+tcp://h:1") == "tcp://h:1"
    assert transport_spec("RS2015+wss://h:1/p?x=1") == "wss://h:1/p?x=1"
    assert transport_spec("tcp:host=h:port=1") == "tcp:host=h:port=1"
    with pytest.raises(ValueError, match="missing transport"):
        transport_spec("rs2015+://h:1")
