"""Raw Twisted baseline: a 24-bit length-prefixed protocol written directly on ``Protocol``.

Wire format: ``length (3 bytes, big endian) | body``; the first byte of the body is the kind:

========  =========  =====================================================================
kind      direction  meaning
========  =========  =====================================================================
``R``     c -> s     request; the server writes the same frame back (echo)
``F``     c -> s     fire-and-forget; the server counts it
``C``     c -> s     count query; the server answers ``c<decimal count of F frames>``
``S``     c -> s     stream request, ``S<n>:<size>``; the server answers n ``s<size bytes>``
                     frames then one ``e`` frame, writing through a streaming producer so
                     that it only writes while the transport wants data
``X``     c -> s     cancel the running stream; the server stops it and writes ``e``
========  =========  =====================================================================

This is the yardstick: parsing is done in place over the received ``bytes`` (or a
``bytearray`` holding a partial frame), each frame is copied exactly once into the ``bytes``
handed to ``frameReceived``, and writers respect the transports' producer interface.

Transports (``BENCH_TRANSPORT``): ``tcp``; ``tls`` (the same protocol through Twisted's TLS
endpoints); ``ws`` / ``wss``: the same bodies, one per binary WebSocket message (no length
prefix), through autobahn's Twisted WebSocket protocols (``sendMessage`` / ``onMessage``),
over TCP or TLS.
"""

from __future__ import annotations

import sys

from twisted.internet.interfaces import IPushProducer
from twisted.internet.protocol import Factory, Protocol
from zope.interface import implementer

if __package__ in (None, ""):  # executed as a file
    sys.path.insert(0, __file__.rsplit("/", 2)[0])

from benchmarks import common as bench
from benchmarks.common import (
    Deadline,
    RunResult,
    Spec,
    announce_port,
    child_main,
    emit_result,
    parse_stream_request,
    run_twisted_client,
    stream_request,
)

K_REQ, K_FNF, K_COUNT, K_STREAM, K_CANCEL = b"R"[0], b"F"[0], b"C"[0], b"S"[0], b"X"[0]
K_COUNT_REPLY, K_ITEM, K_END = b"c"[0], b"s"[0], b"e"[0]


def framed(body: bytes) -> bytes:
    """Prefix ``body`` with its 24-bit big-endian length."""
    return len(body).to_bytes(3, "big") + body




class FramedProtocol(Protocol):
    """Length-prefix parser; subclasses implement ``frameReceived(body: bytes)``."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._need = 3  # bytes the buffer must hold before parsing is worth trying

    def frameReceived(self, body: bytes) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def dataReceived(self, data: bytes) -> None:
        buf = self._buf
        if buf:
            buf += data
            if len(buf) < self._need:
                return
            with memoryview(buf) as view:
                pos = self._parse(view, len(buf), True)
            del buf[:pos]
        else:
            pos = self._parse(data, len(data), False)
            if pos < len(data):
                buf += memoryview(data)[pos:]
        if len(buf) >= 3:
            self._need = 3 + ((buf[0] << 16) | (buf[1] << 8) | buf[2])
        else:
            self._need = 3

    def _parse(self, data, size: int, copy: bool) -> int:
        frame = self.frameReceived
        pos = 0
        while size - pos >= 3:
            end = pos + 3 + ((data[pos] << 16) | (data[pos + 1] << 8) | data[pos + 2])
            if end > size:
                break
            # bytes slice of bytes: one copy; memoryview of the bytearray: bytes() copies once.
            frame(bytes(data[pos + 3 : end]) if copy else data[pos + 3 : end])
            pos = end
        return pos


# ----------------------------------------------------------------------------- server


@implementer(IPushProducer)
class StreamProducer:
    """Writes ``n`` prebuilt item frames while the transport is not paused, then ``e``."""

    def __init__(self, proto: ServerLogic, n: int, size: int) -> None:
        self.proto = proto
        self.transport = proto.transport  # (under WebSocket: the TCP/TLS transport)
        self.write = proto.write_encoded
        self.frame = proto.encode(b"s" + b"x" * size)
        self.remaining = n
        self.paused = False
        self.finished = False

    def start(self) -> None:
        self.transport.registerProducer(self, True)
        self._produce()

    def _produce(self) -> None:
        write = self.write
        frame = self.frame
        while self.remaining and not self.paused:
            self.remaining -= 1
            write(frame)
        if not self.remaining:
            self._finish()

    def _finish(self) -> None:
        if self.finished:
            return
        self.finished = True
        self.remaining = 0
        self.transport.unregisterProducer()
        self.write(self.proto.encode(b"e"))
        self.proto.stream = None

    def cancel(self) -> None:
        self._finish()

    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        if not self.finished:
            self._produce()

    def stopProducing(self) -> None:
        self.remaining = 0
        self.finished = True


class ServerLogic:
    """The server's side of the workloads, over any framing: ``encode(body)`` makes what
    ``write_encoded`` sends as one frame."""

    fnf_count = 0
    stream: StreamProducer | None = None
    encode = staticmethod(framed)

    def write_encoded(self, frame: bytes) -> None:
        self.transport.write(frame)

    def frameReceived(self, body: bytes) -> None:
        kind = body[0]
        if kind == K_REQ:
            self.write_encoded(self.encode(body))
        elif kind == K_FNF:
            self.fnf_count += 1
        elif kind == K_COUNT:
            self.write_encoded(self.encode(b"c%d" % self.fnf_count))
        elif kind == K_STREAM:
            n, size = parse_stream_request(body[1:])
            self.stream = StreamProducer(self, n, size)
            self.stream.start()
        elif kind == K_CANCEL:
            if self.stream is not None:
                self.stream.cancel()
        else:
            self.transport.loseConnection()


class RawServerProtocol(ServerLogic, FramedProtocol):
    """TCP / TLS: 24-bit length-prefixed frames."""

    def connectionMade(self) -> None:
        self.write_encoded = self.transport.write


def _ws_classes():
    """autobahn-based server and client protocols (imported only for ws / wss)."""
    from autobahn.twisted.websocket import (
        WebSocketClientProtocol,
        WebSocketServerFactory,
        WebSocketServerProtocol,
    )

    class WSServerProtocol(ServerLogic, WebSocketServerProtocol):
        """One body per binary WebSocket message."""

        encode = staticmethod(bytes)

        def write_encoded(self, message: bytes) -> None:
            self.sendMessage(message, True)

        def onMessage(self, payload: bytes, isBinary: bool) -> None:
            self.frameReceived(payload)

    class WSClientProtocol(ClientLogic, WebSocketClientProtocol):
        encode = staticmethod(bytes)

        def __init__(self) -> None:
            WebSocketClientProtocol.__init__(self)
            ClientLogic.__init__(self)
            from twisted.internet.defer import Deferred

            self.opened = Deferred()

        def write_encoded(self, message: bytes) -> None:
            self.sendMessage(message, True)

        def onOpen(self) -> None:
            self.opened.callback(self)

        def onMessage(self, payload: bytes, isBinary: bool) -> None:
            self.frameReceived(payload)

    def server_factory():
        factory = WebSocketServerFactory()
        factory.protocol = WSServerProtocol
        factory.setProtocolOptions(autoFragmentSize=0, maxFramePayloadSize=0,
                                   maxMessagePayloadSize=0)
        return factory

    return server_factory, WSClientProtocol


def server() -> None:
    from twisted.internet import reactor

    kind = bench.transport()
    if bench.is_ws(kind):
        factory = _ws_classes()[0]()
    else:
        factory = Factory.forProtocol(RawServerProtocol)

    def listening(port) -> None:
        announce_port(port.getHost().port)

    bench.twisted_server_endpoint(reactor, kind).listen(factory).addCallback(listening)
    reactor.run()


# ----------------------------------------------------------------------------- client


@implementer(IPushProducer)
class ClientLogic:
    """One measured run at a time; ``frameReceived`` dispatches to the current run's handler.
    ``encode(body)`` makes what ``write_encoded`` sends as one frame."""

    encode = staticmethod(framed)

    def write_encoded(self, frame: bytes) -> None:
        self.transport.write(frame)

    def __init__(self) -> None:
        self.handler = self._unexpected
        self.done = None
        self.result: RunResult | None = None
        self.fnf_expected = 0  # cumulative F frames sent on this connection
        self._paused = False
        self._produce = None

    def connectionLost(self, reason=None) -> None:
        super().connectionLost(reason)
        if self.done is not None and not self.done.called:
            self.done.errback(reason)

    def _unexpected(self, body: bytes) -> None:
        self.transport.loseConnection()

    def frameReceived(self, body: bytes) -> None:
        self.handler(body)

    def _finish(self, deadline: Deadline, ops: int, nbytes: int, complete: bool) -> None:
        self.result = RunResult(ops, nbytes, deadline.elapsed(), complete)

    def _resolve(self) -> None:
        self.handler = self._unexpected
        done, self.done = self.done, None
        done.callback(self.result)

    # IPushProducer, used while sending fire-and-forget frames
    def pauseProducing(self) -> None:
        self._paused = True

    def resumeProducing(self) -> None:
        self._paused = False
        if self._produce is not None:
            self._produce()

    def stopProducing(self) -> None:
        self._paused = True

    def run(self, spec: Spec, count: int, budget: float):
        from twisted.internet.defer import Deferred

        self.done = Deferred()
        deadline = Deadline(budget)
        getattr(self, "_start_" + spec.kind)(spec, count, deadline)
        return self.done

    # request-response, ``inflight`` outstanding
    def _start_rr(self, spec: Spec, count: int, deadline: Deadline) -> None:
        request = self.encode(b"R" + b"x" * spec.size)
        write = self.write_encoded
        state = {"sent": 0, "got": 0, "nbytes": 0, "stop": False}

        def on_reply(body: bytes) -> None:
            got = state["got"] = state["got"] + 1
            state["nbytes"] += len(body) - 1
            if not state["stop"] and (got & 63) == 0 and deadline.passed():
                state["stop"] = True
            if state["sent"] < count and not state["stop"]:
                state["sent"] += 1
                write(request)
            elif got == state["sent"]:
                self._finish(deadline, got, state["nbytes"], got == count)
                self._resolve()

        self.handler = on_reply
        first = min(spec.inflight, count)
        state["sent"] = first
        for _ in range(first):
            write(request)

    # request-stream
    def _start_stream(self, spec: Spec, count: int, deadline: Deadline) -> None:
        state = {"items": 0, "nbytes": 0, "canceled": False}

        def on_frame(body: bytes) -> None:
            if body[0] == K_ITEM:
                if state["canceled"]:
                    return
                items = state["items"] = state["items"] + 1
                state["nbytes"] += len(body) - 1
                if (items & 255) == 0 and deadline.passed():
                    state["canceled"] = True
                    self._finish(deadline, items, state["nbytes"], False)
                    self.write_encoded(self.encode(b"X"))
            elif body[0] == K_END:
                if not state["canceled"]:
                    self._finish(deadline, state["items"], state["nbytes"], True)
                self._resolve()
            else:
                self._unexpected(body)

        self.handler = on_frame
        self.write_encoded(self.encode(b"S" + stream_request(count, spec.size)))

    # fire-and-forget, then count queries until the server saw them all
    def _start_fnf(self, spec: Spec, count: int, deadline: Deadline) -> None:
        message = self.encode(b"F" + b"x" * spec.size)
        count_frame = self.encode(b"C")
        write = self.write_encoded
        state = {"sent": 0}
        base = self.fnf_expected

        def produce() -> None:
            sent = state["sent"]
            while sent < count and not self._paused:
                write(message)
                sent += 1
                if (sent & 1023) == 0 and deadline.passed():
                    state["sent"] = sent
                    count_reached()
                    return
            state["sent"] = sent
            if sent >= count:
                count_reached()

        def count_reached() -> None:
            self._produce = None
            self.transport.unregisterProducer()
            self.fnf_expected = base + state["sent"]
            write(count_frame)

        def on_count(body: bytes) -> None:
            if body[0] != K_COUNT_REPLY:
                return self._unexpected(body)
            if int(body[1:]) >= self.fnf_expected:
                sent = state["sent"]
                self._finish(deadline, sent, sent * spec.size, sent == count)
                self._resolve()
            else:
                write(count_frame)

        self.handler = on_count
        self._paused = False
        self._produce = produce
        self.transport.registerProducer(self, True)
        produce()


class RawClientProtocol(ClientLogic, FramedProtocol):
    """TCP / TLS: 24-bit length-prefixed frames."""

    def __init__(self) -> None:
        FramedProtocol.__init__(self)
        ClientLogic.__init__(self)

    def connectionMade(self) -> None:
        self.write_encoded = self.transport.write


async def _client(reactor, port: int, spec: Spec) -> None:
    from twisted.internet.endpoints import connectProtocol

    kind = bench.transport()
    endpoint = bench.twisted_client_endpoint(reactor, port, kind)
    if bench.is_ws(kind):
        from autobahn.twisted.websocket import WebSocketClientFactory

        factory = WebSocketClientFactory(bench.ws_url(port, kind))
        factory.setProtocolOptions(autoFragmentSize=0, maxFramePayloadSize=0,
                                   maxMessagePayloadSize=0)
        proto = _ws_classes()[1]()
        proto.factory = factory
        await connectProtocol(endpoint, proto)
        await proto.opened
    else:
        proto = await connectProtocol(endpoint, RawClientProtocol())
    try:
        if spec.warmup:
            await proto.run(spec, spec.warmup, spec.budget)
        runs = [await proto.run(spec, spec.count, spec.budget) for _ in range(spec.repeat)]
    finally:
        proto.transport.loseConnection()
    emit_result(runs)


def client(port: int, spec: Spec) -> None:
    run_twisted_client(_client, port, spec)


if __name__ == "__main__":
    child_main(server, client)
