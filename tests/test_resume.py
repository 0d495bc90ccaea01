"""Resumption in the Twisted layer (spec §Resuming Operation): connect(resume=True) against
serve(resume=True).

Most tests run client and server in memory on one ``Clock`` (``twisted.test.iosim``): a
:class:`Net` connects them, can cut a connection (dropping what is in flight, possibly in the
middle of a frame), stall it (half-open), or refuse new connections, so every rule that
involves time (backoff, max lifetime, session expiry) is driven by the clock. A few run on
loopback TCP with hand-written frames (the version rsocket-js writes, tokens in use).
"""

from __future__ import annotations

import pytest
import pytest_twisted
from twisted.internet import defer
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.task import Clock
from twisted.test import iosim
from twisted_support import EchoResponder, RecordingChannelResponder, wait, wire
from zope.interface import implementer

from rsocket_tx import Payload, connect
from rsocket_tx.core import errors as E
from rsocket_tx.core import frames as F
from rsocket_tx.faces.tap import SettingsError, parse_server_settings
from rsocket_tx.protocol import RSocketServerFactory

KEEPALIVE = 1000  # ms
LIFETIME = 5000  # ms
TOKEN = b"0123456789abcdef"


class Items(RecordingChannelResponder):
    """A stream of N items b"0".."N-1" (data = b"N"); a channel echo that records what came
    in; request-response echo; fire-and-forget recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.fnf: list[bytes] = []
        self.streams_ended: list[str] = []

    def request_response(self, payload):
        return Payload(payload.data)

    def fire_and_forget(self, payload):
        self.fnf.append(payload.data)

    def request_stream(self, payload):
        n = int(payload.data)
        try:
            for i in range(n):
                yield Payload(b"%d" % i)
        finally:
            self.streams_ended.append("stream")


@implementer(IStreamClientEndpoint)
class _Endpoint:
    def __init__(self, net: Net) -> None:
        self.net = net

    def connect(self, factory):
        return self.net._connect(factory)


class Net:
    """Client and server factories joined in memory; one iosim link per connection."""

    def __init__(self, server_factory: RSocketServerFactory, clock: Clock) -> None:
        self.server_factory = server_factory
        self.clock = clock
        self.links: list[iosim.IOPump] = []
        self.stalled: set[int] = set()
        self.refuse = False
        self.attempts = 0
        self.attempt_times: list[float] = []
        self.endpoint = _Endpoint(self)

    def _connect(self, factory):
        self.attempts += 1
        self.attempt_times.append(self.clock.seconds())
        if self.refuse:
            return defer.fail(ConnectionRefusedError("refused by the test"))
        client = factory.buildProtocol(None)
        server = self.server_factory.buildProtocol(None)
        pump = iosim.connect(server, iosim.makeFakeServer(server), client,
                             iosim.makeFakeClient(client), greet=False, clock=self.clock)
        self.links.append(pump)
        return defer.succeed(client)

    @property
    def link(self) -> iosim.IOPump:
        return self.links[-1]

    def flush(self) -> None:
        """Move everything on the live links (stalled ones drop it), run due calls."""
        for _ in range(1000):
            moved = False
            self.clock.advance(0)
            for i, pump in enumerate(self.links):
                if i in self.stalled:
                    moved |= self._stalled_pump(pump)
                elif not pump.clientIO.disconnected or not pump.serverIO.disconnected:
                    moved |= pump.pump(advanceClock=False)
            if not moved:
                return
        raise AssertionError("the links never went quiet")

    @staticmethod
    def _stalled_pump(pump: iosim.IOPump) -> bool:
        # half-open: bytes vanish; a side that drops its transport learns it, the other not
        pump.clientIO.getOutBuffer()
        pump.serverIO.getOutBuffer()
        moved = False
        for io in (pump.clientIO, pump.serverIO):
            if io.disconnecting and not io.disconnected:
                io.disconnected = True
                io.reportDisconnect()
                moved = True
        return moved

    def advance(self, seconds: float, step: float = 0.05) -> None:
        """Let ``seconds`` pass in small steps, flushing the links after each."""
        while seconds > 1e-9:
            dt = min(step, seconds)
            self.clock.advance(dt)
            seconds -= dt
            self.flush()

    def to_server_only(self) -> None:
        """Deliver what the client sent, and let the server work, but deliver nothing back."""
        self._one_way(self.link.clientIO, self.link.serverIO)

    def to_client_only(self) -> None:
        """Deliver what the server sent, and let the client work, but deliver nothing back."""
        self._one_way(self.link.serverIO, self.link.clientIO)

    def _one_way(self, source, dest) -> None:
        for _ in range(20):
            self.clock.advance(0)
            data = source.getOutBuffer()
            if data is not None:
                dest.bufferReceived(data)

    def cut(self, deliver_to_client: int = 0, deliver_to_server: int = 0) -> None:
        """The current link dies: in-flight bytes are lost, except the first ones given."""
        pump = self.link
        s2c = pump.serverIO.getOutBuffer() or b""
        c2s = pump.clientIO.getOutBuffer() or b""
        if deliver_to_server:
            pump.serverIO.bufferReceived(c2s[:deliver_to_server])
        if deliver_to_client:
            pump.clientIO.bufferReceived(s2c[:deliver_to_client])
        pump.serverIO.disconnecting = True
        pump.serverIO.disconnectReason = ConnectionRefusedError("cut by the test")
        self.flush()


def _setup(server_kw=None, client_kw=None, responder: Items | None = None):
    clock = Clock()
    responder = responder or Items()
    factory = RSocketServerFactory(lambda: responder, reactor=clock, resume=True,
                                   **(server_kw or {}))
    net = Net(factory, clock)
    kw = dict(resume=True, keepalive_interval=KEEPALIVE, max_lifetime=LIFETIME)
    kw.update(client_kw or {})
    d = connect(net.endpoint, reactor=clock, **kw)
    net.flush()
    rs = d.result
    return net, rs, responder, factory


def _collect(stream) -> tuple[list[bytes], defer.Deferred]:
    """Consume ``stream``: (the items so far, Deferred firing at its end)."""
    got: list[bytes] = []

    async def run():
        async for payload in stream:
            got.append(payload.data)
        return got

    return got, defer.ensureDeferred(run())


def _wire_size(n: int) -> int:
    """Bytes on TCP of the PAYLOAD frames of items 0..n-1 (3 + 6 header bytes + the data)."""
    return sum(9 + len(b"%d" % i) for i in range(n))


def _expected(n: int) -> list[bytes]:
    return [b"%d" % i for i in range(n)]


# ----------------------------------------------------------------------------- resumption


@pytest.mark.parametrize("extra", [0, 1, 4])
def test_cut_mid_stream_resumes_with_nothing_lost_or_repeated(extra):
    net, rs, responder, factory = _setup()
    assert rs.is_resumable and rs.resumes == 0
    resumed = rs.resumed
    stream = rs.request_stream(Payload(b"300"), prefetch=300)
    got, done = _collect(stream)
    net.to_server_only()
    net.cut(deliver_to_client=_wire_size(40) + extra)  # 40 whole items and a bit
    assert got == _expected(40)
    assert rs._protocol._conn.is_detached and not done.called
    net.advance(0.1)  # the first reconnection attempt
    assert net.attempts == 2 and rs.resumes == 1 and resumed.called
    assert done.called and got == _expected(300)
    assert responder.streams_ended == ["stream"]  # generated once: resent from the buffer


def test_keepalive_positions_trim_both_resume_buffers():
    net, rs, responder, factory = _setup()
    got, done = _collect(rs.request_stream(Payload(b"50"), prefetch=100))
    net.flush()
    [server] = factory.connections
    client = rs._protocol
    assert server._conn.resume_buffer.size == server._conn.sent_position > 0
    assert client._conn.resume_buffer.size == client._conn.sent_position > 0
    net.advance(KEEPALIVE / 1000)  # the client's KEEPALIVE and the server's answer
    assert server._conn.resume_buffer.size == 0
    assert server._conn.resume_buffer.first_position == client._conn.received_position
    assert client._conn.resume_buffer.size == 0
    assert client._conn.resume_buffer.first_position == server._conn.received_position


def test_a_channel_resumes_both_ways_after_each_of_several_cuts():
    net, rs, responder, factory = _setup(client_kw=dict(reconnect_initial_delay=0))
    sent = [Payload(b"%d" % i) for i in range(1, 200)]
    got, done = _collect(rs.request_channel(Payload(b"0"), iter(sent), prefetch=64))
    for cut in range(5):
        net.to_server_only()
        net.cut(deliver_to_client=7 + 13 * cut, deliver_to_server=50 + 37 * cut)
        net.flush()
    net.flush()
    assert rs.resumes == 5
    assert done.called
    assert got == _expected(200)
    assert responder.inbound == _expected(200)


def test_backoff_doubles_while_reconnecting_fails_and_resets_after_a_resume():
    net, rs, responder, factory = _setup(client_kw=dict(reconnect_initial_delay=100,
                                                        reconnect_max_delay=800))
    net.refuse = True
    cut_at = net.clock.seconds()
    net.cut()
    net.advance(3.15, step=0.01)
    times = [cut_at] + net.attempt_times[1:]
    waits = [b - a for a, b in zip(times, times[1:])]
    # 0.1 s, then each wait twice the one before, up to the cap of 0.8 s (each within one
    # clock step of 0.01 s)
    assert waits == pytest.approx([0.1, 0.2, 0.4, 0.8, 0.8, 0.8], abs=0.015)
    net.refuse = False
    net.advance(0.8)
    assert rs.resumes == 1
    before = net.attempts
    cut_at = net.clock.seconds()
    net.cut()
    net.advance(0.15, step=0.01)
    assert net.attempts == before + 1 and rs.resumes == 2
    assert net.attempt_times[-1] - cut_at == pytest.approx(0.1, abs=0.02)  # reset


def test_requests_made_while_detached_go_out_after_the_resume():
    net, rs, responder, factory = _setup()
    net.refuse = True
    net.cut()
    response = rs.request_response(Payload(b"later"))
    written = rs.fire_and_forget(Payload(b"fnf"))
    with pytest.raises(E.LocalProtocolError, match="transport is down"):
        rs.metadata_push(b"m")
    net.advance(1.0)
    assert not response.called and not written.called and responder.fnf == []
    net.refuse = False
    net.advance(2.0)
    assert rs.resumes == 1
    assert response.result.data == b"later"
    assert written.called and responder.fnf == [b"fnf"]


def test_half_open_is_detected_by_max_lifetime_and_resumed():
    net, rs, responder, factory = _setup()
    stream = rs.request_stream(Payload(b"1000"), prefetch=8)
    net.flush()  # 8 items wait in the stream, unconsumed
    [server] = factory.connections
    net.stalled.add(len(net.links) - 1)  # nothing passes any more; nobody is told
    net.advance(LIFETIME / 1000 + KEEPALIVE / 1000 + 0.2)
    # the client gave the dead transport up and resumed on a new connection; the server, that
    # still held the stalled one, handed the session over to the new one
    assert rs.resumes == 1 and server.resumes == 1
    got, done = _collect(stream)
    net.flush()
    assert done.called and got == _expected(1000)


# ---------------------------------------------------------------------------- limits


def test_session_expiry_makes_the_server_reject_the_resume():
    net, rs, responder, factory = _setup(server_kw=dict(resume_session_timeout=2000),
                                         client_kw=dict(resume_session_timeout=60_000))
    stream = rs.request_stream(Payload(b"100000"), prefetch=10)  # not consumed: it waits
    net.flush()
    net.refuse = True
    net.cut()
    net.advance(1.9)
    assert len(factory.sessions) == 1
    net.advance(0.2)  # past the server's resume session timeout
    assert len(factory.sessions) == 0 and factory.connections == set()
    assert responder.streams_ended == ["stream"]  # the server side of the stream is over
    net.refuse = False
    net.advance(10.0)  # the client's next attempt: RESUME, answered ERROR[REJECTED_RESUME]
    got, done = _collect(stream)
    assert got == _expected(10)  # what had arrived, then the error
    error = done.result.value
    done.addErrback(lambda f: None)
    assert isinstance(error, E.RejectedResumeError)
    assert "no resumable session has this token" in str(error)
    attempts = net.attempts
    net.advance(30.0)
    assert net.attempts == attempts  # a rejected client never tries again (spec)
    assert rs._protocol.when_closed().called


def test_client_gives_up_after_its_resume_session_timeout():
    net, rs, responder, factory = _setup(client_kw=dict(resume_session_timeout=3000))
    response = rs.request_response(Payload(b"x"))
    net.refuse = True
    net.cut()
    net.advance(2.9)
    assert not response.called
    net.advance(0.2)
    assert isinstance(response.result.value, E.ConnectionLostError)
    assert "not resumed within 3000 ms" in str(response.result.value)
    response.addErrback(lambda f: None)
    attempts = net.attempts
    net.advance(60.0)
    assert net.attempts == attempts


def test_server_resume_buffer_overflow_refuses_the_resume_with_a_clear_error():
    net, rs, responder, factory = _setup(server_kw=dict(max_resume_buffer_size=1000))
    got, done = _collect(rs.request_stream(Payload(b"500"), prefetch=500))
    net.to_server_only()  # the server sends 500 items (about 4 KB) that never arrive
    net.cut()
    net.advance(0.1)
    error = done.result.value
    done.addErrback(lambda f: None)
    assert isinstance(error, E.RejectedResumeError)
    assert "frames from position 0 are no longer kept" in str(error)
    assert "resume buffer limit of 1000 bytes" in str(error)
    assert got == [] and len(factory.sessions) == 0


def test_client_resume_buffer_overflow_refuses_the_resume():
    net, rs, responder, factory = _setup(client_kw=dict(max_resume_buffer_size=500))
    sent = [Payload(b"x" * 20) for _ in range(100)]
    got, done = _collect(rs.request_channel(Payload(b"0"), iter(sent), prefetch=8))
    net.to_server_only()  # REQUEST_CHANNEL; the server grants credit
    net.to_client_only()  # the client sends its 100 items (2,600 bytes)...
    net.cut()  # ...none reach the server; the client kept only the last 500 bytes
    net.advance(0.1)
    error = done.result.value
    done.addErrback(lambda f: None)
    assert isinstance(error, E.RejectedResumeError)
    assert "frames would be lost" in str(error)


def test_max_resume_sessions_refuses_one_more_setup():
    net, rs, responder, factory = _setup(server_kw=dict(max_resume_sessions=1))
    d = connect(net.endpoint, reactor=net.clock, resume=True)
    net.flush()
    second = d.result
    assert isinstance(second.close_reason, E.RejectedSetupError)
    assert "too many resumable sessions (the limit is 1)" in str(second.close_reason)
    assert len(factory.sessions) == 1


def test_close_while_detached_ends_the_session_at_once():
    net, rs, responder, factory = _setup()
    response = rs.request_response(Payload(b"x"))
    net.refuse = True
    net.cut()
    closed = rs.closed
    assert not closed.called
    rs._protocol.close()
    assert closed.called and isinstance(response.result.value, E.ConnectionError)
    response.addErrback(lambda f: None)
    attempts = net.attempts
    net.advance(10.0)
    assert net.attempts == attempts


# ----------------------------------------------------------------- loopback, by hand


@pytest_twisted.async_yield_fixture
async def h(harness):
    """The loopback harness; afterwards every resumable session still open is ended (so no
    client keeps reconnecting, no server keeps a detached session, after the test)."""
    yield harness
    for proto, _ in list(harness._lost):
        conn = getattr(proto, "_conn", None)
        if conn is not None and conn.is_resumable and conn.is_open:
            await wait(proto.close())


def test_tokens_are_random_and_16_bytes_by_default():
    net, a, _, factory = _setup()
    b = connect(net.endpoint, reactor=net.clock, resume=True)
    net.flush()
    tokens = {p._conn.resume_token for p in factory.connections}
    assert len(tokens) == 2 and all(len(t) == 16 for t in tokens)
    assert tokens == set(factory.sessions._sessions)
    assert b.result._protocol._conn.resume_token in tokens


async def refused_at_setup(rs, match: str) -> None:
    """A request on ``rs`` fails: the server refused its SETUP with ``match`` in the error."""
    with pytest.raises(E.RejectedSetupError, match=match):
        await wait(rs.request_response(Payload(b"x")))


@pytest_twisted.ensureDeferred
async def test_server_without_resume_refuses_a_resumable_client(h):
    port = await h.serve(EchoResponder)
    rs = await h.connect(port, resume=True)
    await refused_at_setup(rs, "resume is not supported")


@pytest_twisted.ensureDeferred
async def test_a_token_in_use_is_refused(h):
    port = await h.serve(EchoResponder, resume=True)
    first = await h.connect(port, resume_token=TOKEN)
    assert (await wait(first.request_response(Payload(b"a")))).data == b"a"
    second = await h.connect(port, resume_token=TOKEN)
    await refused_at_setup(second, "already in use")


@pytest_twisted.ensureDeferred
async def test_resume_with_the_swapped_version_of_rsocket_js(h):
    port = await h.serve(EchoResponder, resume=True)
    setup = F.SetupFrame(keepalive_interval=60_000, max_lifetime=60_000,
                         metadata_mime_type=b"m", data_mime_type=b"d", resume_token=TOKEN)
    request = F.RequestStreamFrame(stream_id=1, initial_request_n=2, data=b"5")
    first = await h.raw(port)
    first.send(wire(setup, request))
    await first.frame(lambda f: isinstance(f, F.PayloadFrame) and f.data == b"1")
    first.transport.abortConnection()
    await wait(first.lost)
    second = await h.raw(port)
    # we claim to have received only the first item (its PAYLOAD frame is 7 bytes)
    second.send(wire(F.ResumeFrame(token=TOKEN, last_received_server_position=7,
                                   first_available_client_position=0, major_version=0,
                                   minor_version=1)))
    ok = await second.frame(lambda f: isinstance(f, F.ResumeOkFrame))
    assert ok.last_received_client_position == len(F.encode(request))
    second.send(wire(F.RequestNFrame(stream_id=1, request_n=10)))
    await second.frame(lambda f: isinstance(f, F.PayloadFrame) and f.complete)
    items = [f.data for f in second.frames if isinstance(f, F.PayloadFrame) and f.next]
    assert items == [b"1", b"2", b"3", b"4"]  # "1" again (lost), then the rest, once


@pytest_twisted.ensureDeferred
async def test_resume_with_an_unknown_version_is_rejected(h):
    port = await h.serve(EchoResponder, resume=True)
    raw = await h.raw(port)
    raw.send(wire(F.ResumeFrame(token=TOKEN, last_received_server_position=0,
                                first_available_client_position=0, major_version=2)))
    err = await raw.frame(lambda f: isinstance(f, F.ErrorFrame))
    assert err.error_code == E.ErrorCode.REJECTED_RESUME and b"version 2.0" in err.data
    await wait(raw.lost)


@pytest_twisted.ensureDeferred
async def test_resume_of_an_unknown_token_is_rejected(h):
    port = await h.serve(EchoResponder, resume=True)
    raw = await h.raw(port)
    raw.send(wire(F.ResumeFrame(token=b"nobody", last_received_server_position=0,
                                first_available_client_position=0)))
    err = await raw.frame(lambda f: isinstance(f, F.ErrorFrame))
    assert err.error_code == E.ErrorCode.REJECTED_RESUME
    await wait(raw.lost)


# ------------------------------------------------------------------------- settings


def test_connect_checks_the_token():
    with pytest.raises(ValueError, match="1..65535 bytes"):
        connect("tcp:host=127.0.0.1:port=1", reactor=Clock(), resume_token=b"")
    with pytest.raises(ValueError, match="reconnect_max_delay"):
        connect("tcp:host=127.0.0.1:port=1", reactor=Clock(), resume=True,
                reconnect_initial_delay=500, reconnect_max_delay=100)


def test_server_options():
    settings = parse_server_settings(resume=True, resume_session_timeout="5000",
                                     max_resume_buffer_size="1_000",
                                     max_resume_sessions="3")
    assert (settings.resume, settings.resume_session_timeout,
            settings.max_resume_buffer_size, settings.max_resume_sessions) == (
        True, 5000, 1000, 3)
    assert parse_server_settings().resume is False
    with pytest.raises(SettingsError, match="--max-resume-buffer-size: must be at least 1"):
        parse_server_settings(max_resume_buffer_size="0")
    with pytest.raises(SettingsError, match="--resume-session-timeout"):
        parse_server_settings(resume_session_timeout="soon")

