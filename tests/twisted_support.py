"""Helpers of the Twisted-layer tests: a loopback harness that serves, connects and
cleans up; a raw TCP client that speaks frames; an echo responder; frame helpers."""

from __future__ import annotations

import io
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

import pytest
from twisted.internet import defer, reactor
from twisted.internet import error as internet_error
from twisted.internet.endpoints import TCP4ClientEndpoint, TCP4ServerEndpoint, connectProtocol
from twisted.internet.protocol import Factory, Protocol
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from twisted.python import usage

from rsocket_tx import Payload, Responder, connect, serve
from rsocket_tx.core.frames import decode, encode
from rsocket_tx.core.framing import FrameReader, frame_with_length
from rsocket_tx.protocol import RSocketServerFactory

#: Upper bound for anything a test waits on, so a bug shows up as a failure, not a hang.
WAIT = 10

#: Every server option but ``--listen``, each with a value other than its default (for the
#: tests of the twistd plugin's options and of ``rsocket-tx serve``, which must agree).
SERVER_OPTIONS_ARGV = (
    "--responder",
    "rsocket_tx.apps.demo:DemoResponder",
    "--fragment-size",
    "1024",
    "--max-frame-size",
    "65536",
    "--max-reassembled-size",
    "1_000_000",
    "--setup-timeout",
    "5000",
    "--min-keepalive-interval",
    "100",
    "--max-lifetime-limit",
    "300000",
    "--max-setup-frame-size",
    "4096",
    "--max-reassembly-buffer-size",
    "2_000_000",
    "--max-connections",
    "500",
    "--debug",
)


def wait(d, timeout: float = WAIT) -> defer.Deferred:
    """``d`` (a Deferred or coroutine) failing with TimeoutError if it does not fire in time."""
    if not isinstance(d, defer.Deferred):
        d = defer.ensureDeferred(d)
    return d.addTimeout(timeout, reactor)


def parse_options(options_class: type[usage.Options], *argv: str) -> usage.Options:
    """A twistd plugin's options (``options_class``) parsed from ``argv``."""
    options = options_class()
    options.parseOptions(list(argv))
    return options


def options_usage_error(options_class: type[usage.Options], *argv: str) -> str:
    """The message of the UsageError ``options_class`` raises for ``argv`` (the test fails if
    it raises none)."""
    with pytest.raises(usage.UsageError) as info:
        parse_options(options_class, *argv)
    return str(info.value)


def wire(*frames) -> bytes:
    """Frames encoded with their 24-bit length prefix."""
    return b"".join(frame_with_length(encode(f)) for f in frames)


def parse(data: bytes) -> list:
    """Decode a byte stream of length-prefixed frames."""
    return [decode(f) for f in FrameReader().feed(data)]


def server_protocol(responder_factory, *, transport=None, clock=None, **settings):
    """A server protocol of ``RSocketServerFactory(responder_factory, **settings)`` connected
    to ``transport`` (a new StringTransport unless given), its reactor ``clock`` (a new Clock
    unless given); nothing received yet. Returns ``(proto, transport, clock)``."""
    clock = Clock() if clock is None else clock
    transport = StringTransport() if transport is None else transport
    proto = RSocketServerFactory(responder_factory, reactor=clock, **settings).buildProtocol(None)
    proto.makeConnection(transport)
    return proto, transport, clock


class LoggedPair:
    """A client and a server connected in memory on one Clock, logging the frames each sends
    (``sent["client"]``, ``sent["server"]``).

    :param responder: the server's responder factory.
    :param setup: the client's SETUP (``rsocket_tx.client.make_setup(...)``).
    :param client_settings: keyword settings of the client's ``RSocketClientFactory``.
    """

    def __init__(self, responder, setup, **client_settings) -> None:
        from twisted.test.iosim import connectedServerAndClient

        from rsocket_tx.protocol import RSocketClientFactory

        self.clock = Clock()
        self.sent: dict[str, list] = {"client": [], "server": []}

        def logger(side):
            return lambda direction, frame: (
                direction == "send" and self.sent[side].append(frame))

        server_factory = RSocketServerFactory(responder, reactor=self.clock,
                                              frame_logger=logger("server"))
        client_factory = RSocketClientFactory(setup, reactor=self.clock,
                                              frame_logger=logger("client"), **client_settings)
        self.client, self.server, self.pump = connectedServerAndClient(
            lambda: server_factory.buildProtocol(None),
            lambda: client_factory.buildProtocol(None), clock=self.clock)
        self.rsocket = self.client.rsocket


class EchoResponder(Responder):
    """Echoes request-response; a stream of N items for data b"N"; echoes a channel."""

    def request_response(self, payload):
        return Payload(payload.data, payload.metadata)

    def request_stream(self, payload):
        n = int(payload.data or b"3")
        return [Payload(b"%d" % i, payload.metadata) for i in range(n)]

    async def request_channel(self, payload, inbound):
        yield payload
        async for item in inbound:
            yield item


class RecordingChannelResponder(Responder):
    """A channel echo that records the data of what comes in (the request's, then every
    inbound item's) in ``inbound`` (a list of its own unless one is given)."""

    def __init__(self, inbound: list | None = None) -> None:
        self.inbound: list[bytes] = [] if inbound is None else inbound

    async def request_channel(self, payload, inbound):
        self.inbound.append(payload.data)
        yield payload
        async for item in inbound:
            self.inbound.append(item.data)
            yield item


@asynccontextmanager
async def failed_start_on_a_taken_port(tap):
    """A server service of the face ``tap`` (a module with ``parse_server_settings`` and
    ``build_service``) told to listen on a free loopback port and on one another listener
    holds: its ``startService`` is checked to fail with CannotListenError and to leave the
    service not running. Yields the service; the other listener stops afterwards."""
    taken = await TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1").listen(
        Factory.forProtocol(Protocol))
    try:
        busy = taken.getHost().port
        settings = tap.parse_server_settings(
            listen=["tcp:0:interface=127.0.0.1", f"tcp:{busy}:interface=127.0.0.1"])
        service = tap.build_service(settings, reactor)
        with pytest.raises(internet_error.CannotListenError):
            service.startService()
        assert not service.running
        yield service
    finally:
        await taken.stopListening()


class LoopbackServer:
    """A server ``factory`` (set by the subclass) on a loopback TCP port: ``port`` once
    :meth:`start` has run."""

    factory: Any
    port: Any = None

    async def start(self) -> int:
        """Listen on a free loopback port; returns its number."""
        endpoint = TCP4ServerEndpoint(reactor, 0, interface="127.0.0.1")
        self.port = await wait(endpoint.listen(self.factory))
        return self.port.getHost().port

    def tcp(self) -> TCP4ClientEndpoint:
        """A client endpoint to the port."""
        return TCP4ClientEndpoint(reactor, "127.0.0.1", self.port.getHost().port)


class CommandResult(NamedTuple):
    """What an ``rsocket-tx`` command run in process (:func:`run_command`) gave."""

    #: the exit status
    status: int
    #: its standard output
    out: bytes
    #: its standard error
    err: str


async def run_command(argv, stdin: bytes = b"", timeout: float = 30) -> CommandResult:
    """Run ``rsocket-tx ARGV`` in process (:func:`rsocket_tx.faces.main.run`) on the reactor,
    with ``stdin`` as its standard input; fails with TimeoutError after ``timeout`` seconds."""
    from rsocket_tx.faces.main import run

    out, err = io.BytesIO(), io.StringIO()
    status = await run(reactor, list(argv), stdin=io.BytesIO(stdin), stdout=out,
                       stderr=err).addTimeout(timeout, reactor)
    return CommandResult(status, out.getvalue(), err.getvalue())


class BytesClient(Protocol):
    """A TCP client that records the bytes it receives (``received``); ``closed`` fires when
    its connection is lost."""

    def __init__(self) -> None:
        self.closed: defer.Deferred = defer.Deferred()
        self.received = b""

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.received += data

    def connectionLost(self, reason=None) -> None:  # noqa: N802 - Twisted's name
        self.closed.callback(None)


class RawClient(Protocol):
    """A frame-level TCP client with no RSocket logic: send bytes, inspect what came back."""

    def __init__(self) -> None:
        self.frames: list = []
        self.lost = defer.Deferred()
        self._reader = FrameReader()
        self._waiters: list = []

    def dataReceived(self, data: bytes) -> None:
        self.frames.extend(decode(f) for f in self._reader.feed(data))
        for pred, d in list(self._waiters):
            match = next((f for f in self.frames if pred(f)), None)
            if match is not None:
                self._waiters.remove((pred, d))
                d.callback(match)

    def connectionLost(self, reason=None) -> None:
        waiters, self._waiters = self._waiters, []
        for _, d in waiters:
            d.errback(AssertionError(f"connection lost; frames received: {self.frames!r}"))
        self.lost.callback(None)

    def send(self, data: bytes) -> None:
        self.transport.write(data)

    def frame(self, pred) -> defer.Deferred:
        """Deferred firing with the first received frame satisfying ``pred``."""
        match = next((f for f in self.frames if pred(f)), None)
        if match is not None:
            return defer.succeed(match)
        d = defer.Deferred()
        self._waiters.append((pred, d))
        return wait(d)


class Harness:
    """Serve and connect on loopback; tear everything down (connections, then ports)."""

    def __init__(self) -> None:
        self._ports: list = []
        self._lost: list = []
        self.server_protocols: list = []

    def _track(self, proto) -> None:
        """Remember ``proto`` for :meth:`cleanup`; give it a ``lost`` Deferred (fired once,
        with None, when its connection is lost) unless it has its own (a
        :class:`RawClient`)."""
        lost = getattr(proto, "lost", None)
        if not isinstance(lost, defer.Deferred):
            lost = defer.Deferred()
            original = proto.connectionLost

            def connectionLost(reason=None):
                try:
                    original(reason)
                finally:
                    lost.callback(None)

            proto.connectionLost = connectionLost
            proto.lost = lost
        self._lost.append((proto, lost))

    async def serve(self, responder_factory=EchoResponder, **kw) -> int:
        port = await serve("tcp:0:interface=127.0.0.1", responder_factory, reactor=reactor, **kw)
        self._ports.append(port)
        factory = port.factory
        build = factory.buildProtocol

        def buildProtocol(addr):
            proto = build(addr)
            self._track(proto)
            self.server_protocols.append(proto)
            return proto

        factory.buildProtocol = buildProtocol
        return port.getHost().port

    async def connect(self, port: int, **kw):
        rs = await wait(connect(f"tcp://127.0.0.1:{port}", reactor=reactor, **kw))
        self._track(rs._protocol)
        return rs

    async def raw(self, port: int) -> RawClient:
        client = RawClient()
        await wait(connectProtocol(TCP4ClientEndpoint(reactor, "127.0.0.1", port), client))
        self._track(client)
        return client

    async def cleanup(self) -> None:
        for proto, lost in self._lost:
            if not lost.called and proto.transport is not None:
                proto.transport.abortConnection()
        for _, lost in self._lost:
            await wait(lost)
        for port in self._ports:
            await port.stopListening()


class PauseRecordingResponder(Responder):
    """Serves a request-stream of ``n`` items of ``chunk`` and records how the server protocol
    is paused by its transport while the source is pulled (for backpressure tests).

    Subclass it with ``server_protocols`` (a list the harness fills; the last one is used),
    ``n``, ``chunk`` and ``state`` set. ``state`` gets ``pulled``, ``pulled_while_paused``,
    ``paused_at`` (items pulled at each pause), ``resumes``, ``paused``; ``first_pause`` (a
    Deferred, optional) fires with the items pulled at the first pause.
    """

    server_protocols: list
    n: int
    chunk: bytes
    state: dict
    first_pause: defer.Deferred | None = None

    @staticmethod
    def new_state() -> dict:
        return {"pulled": 0, "pulled_while_paused": 0, "paused_at": [], "resumes": 0,
                "paused": False}

    def request_stream(self, payload):
        state, first = self.state, self.first_pause
        proto = self.server_protocols[-1]
        pause, resume = proto.pauseProducing, proto.resumeProducing

        def pauseProducing():
            state["paused_at"].append(state["pulled"])
            state["paused"] = True
            if first is not None and not first.called:
                first.callback(state["pulled"])
            pause()

        def resumeProducing():
            state["resumes"] += 1
            state["paused"] = False
            resume()

        proto.pauseProducing = pauseProducing
        proto.resumeProducing = resumeProducing

        def gen():
            for _ in range(self.n):
                if state["paused"]:
                    state["pulled_while_paused"] += 1
                state["pulled"] += 1
                yield Payload(self.chunk)

        return gen()
