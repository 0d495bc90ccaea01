"""CPU per Jini ERI mux round trip, without a socket: the sans-IO connections alone, and the
whole Twisted stack (client, server, dispatcher) on in-memory transports.

``sans-io``
    a client and a server :class:`~rsocket_tx.jini.connection.JiniMuxConnection`: per round
    trip the client opens a session and sends a 64-byte body with eof, the server reads it,
    answers it with eof, and the client reads the answer (each side acknowledging what it
    read, as the Twisted layer does);
``stack-1`` / ``stack-100``
    :class:`~rsocket_tx.jini.JiniMuxClient` ``request(body)`` awaited in 1 (or 100)
    coroutines against ``rsocket_tx.jini`` 's server with the echo dispatcher of
    ``benchmarks.jini_bench`` (``await read_all()``, write the body back), both on one
    :class:`~twisted.internet.task.Clock` and ``StringTransport`` s that a loop pumps (what
    one side writes is the other's next read);
``transfer``
    the same stack echoing 10 MiB bodies (the default ration and fragment size).

::

    .venv/bin/python -m benchmarks.jini_cpu [--rounds N] [--only sans-io,stack-1,...]

Prints CPU microseconds (``time.process_time``) per round trip, client and server together
(the transfer: milliseconds per MiB echoed), the least of ``--repeat`` runs. Nothing asserts.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from twisted.internet import defer
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport
from zope.interface import implementer  # type: ignore[import-untyped]

from rsocket_tx.jini import JiniMuxClient, JiniMuxConfig
from rsocket_tx.jini.connection import JiniMuxConnection, Role
from rsocket_tx.jini.events import DataReceived, SessionOpened
from rsocket_tx.jini.server import Dispatcher, JiniMuxServerFactory

BODY = bytes(range(64))


def sans_io(rounds: int) -> float:
    """CPU seconds of ``rounds`` round trips between two sans-IO connections."""
    client = JiniMuxConnection(Role.CLIENT)
    server = JiniMuxConnection(Role.SERVER)
    server.receive_data(b"".join(client.chunks_to_send()), 0.0)
    client.receive_data(b"".join(server.chunks_to_send()), 0.0)
    start = time.process_time()
    for _ in range(rounds):
        sid = client.open_session()
        client.send_data(sid, BODY, True)
        for event in server.receive_data(b"".join(client.chunks_to_send()), 0.0):
            if isinstance(event, DataReceived):
                server.acknowledge_received_data(event.session_id, len(event.data))
                if event.eof:
                    server.send_data(event.session_id, event.data, True)
            elif not isinstance(event, SessionOpened):
                raise AssertionError(event)
        for event in client.receive_data(b"".join(server.chunks_to_send()), 0.0):
            if isinstance(event, DataReceived):
                client.acknowledge_received_data(event.session_id, len(event.data))
        if client.chunks_to_send():
            raise AssertionError("the client answers a plain round trip")
    return time.process_time() - start


class ReadAllEcho(Dispatcher):
    """``benchmarks.jini_bench``'s echo."""

    async def dispatch(self, request: Any) -> None:
        body = await request.read_all()
        request.response.write(body)


@implementer(IStreamClientEndpoint)
class Loopback:
    """A client endpoint whose connections are in-memory pairs with a server factory."""

    def __init__(self, clock: Clock, config: JiniMuxConfig) -> None:
        self.clock = clock
        self.server_factory = JiniMuxServerFactory(ReadAllEcho, config, clock)
        self.pairs: list[tuple[Any, StringTransport, Any, StringTransport]] = []

    def connect(self, factory: Any) -> defer.Deferred[Any]:
        client = factory.buildProtocol(None)
        server = self.server_factory.buildProtocol(None)
        ct, st = StringTransport(), StringTransport()
        self.pairs.append((client, ct, server, st))
        client.makeConnection(ct)
        server.makeConnection(st)
        return defer.succeed(client)

    def pump(self) -> bool:
        """Move what each side wrote to the other; True if anything moved."""
        moved = False
        for client, ct, server, st in self.pairs:
            for src, dst in ((ct, server), (st, client)):
                data = src.value()
                if data:
                    src.clear()
                    dst.dataReceived(data)
                    moved = True
        return moved

    def run(self, d: defer.Deferred[Any]) -> Any:
        """Pump and run the clock's due calls until ``d`` fires; its result."""
        out: list[Any] = []
        d.addBoth(out.append)
        while not out:
            self.clock.advance(0)
            if not self.pump() and not out:
                self.clock.advance(0)
                if not self.pump() and not self.clock.getDelayedCalls():
                    raise AssertionError("stalled")
        result = out[0]
        if isinstance(result, Exception) or hasattr(result, "raiseException"):
            result.raiseException()
        return result


def stack(rounds: int, in_flight: int, size: int = 64) -> float:
    """CPU seconds of ``rounds`` echoes of ``size`` bytes, ``in_flight`` at a time."""
    clock = Clock()
    config = JiniMuxConfig()
    loop = Loopback(clock, config)
    client = JiniMuxClient(clock, loop, config)
    body = (bytes(range(256)) * (size // 256 + 1))[:size]

    async def run(n: int) -> None:
        left = [n]

        async def worker() -> None:
            while left[0] > 0:
                left[0] -= 1
                answer = await client.request(body)
                if len(answer) != size:
                    raise AssertionError(len(answer))

        await defer.gatherResults([defer.ensureDeferred(worker()) for _ in range(in_flight)],
                                  consumeErrors=True)

    loop.run(defer.ensureDeferred(run(min(rounds, 2 * in_flight))))  # connect, warm up
    start = time.process_time()
    loop.run(defer.ensureDeferred(run(rounds)))
    return time.process_time() - start


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.jini_cpu",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=20_000)
    p.add_argument("--transfers", type=int, default=5)
    p.add_argument("--only", default="sans-io,stack-1,stack-100,transfer")
    p.add_argument("--repeat", type=int, default=3, help="runs of each, the least shown")
    args = p.parse_args(argv)
    for name in args.only.split(","):
        if name == "sans-io":
            cpu = min(sans_io(args.rounds) for _ in range(args.repeat))
            print(f"sans-io    {cpu / args.rounds * 1e6:8.1f} us per round trip")
        elif name in ("stack-1", "stack-100"):
            cpu = min(stack(args.rounds, 1 if name == "stack-1" else 100)
                      for _ in range(args.repeat))
            print(f"{name:10} {cpu / args.rounds * 1e6:8.1f} us per round trip")
        elif name == "transfer":
            cpu = min(stack(args.transfers, 1, 10 * 1024 * 1024) for _ in range(args.repeat))
            print(f"transfer   {cpu / (args.transfers * 10) * 1e3:8.1f} ms per MiB echoed")
        else:
            raise SystemExit(f"unknown measurement {name!r}")


if __name__ == "__main__":
    main()
