"""The yamux interop peers (``tests/interop/peers/yamux-go``, ``tests/interop/peers/yamux-rust``)
and the stream protocols our side runs against them.

* :func:`start_peer_server` runs a peer's ``server`` mode as a child process of the reactor
  and fires with a :class:`PeerProcess` once it printed ``listening PORT``;
  :func:`run_peer_client` runs its ``client ADDR SCENARIO...`` mode to its end.
  Every line a peer prints is kept; :meth:`PeerProcess.wait_line` waits (with a deadline,
  never a sleep) for one matching a pattern.
* :class:`CommandProtocol` answers the stream commands of the peers' README (``echo``,
  ``source N``, ``sink``, ``ping``, ``goaway``, ``reset``, ``open``), as the peers' servers
  do; :class:`Exchange` sends one command and collects the answer until the stream ends.

A peer that is not built makes the tests fail with the command that builds it (never skip).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from twisted.internet import defer, error, protocol, reactor
from twisted.internet.interfaces import IHalfCloseableProtocol
from zope.interface import implementer

from rsocket_tx.yamux.protocol import YamuxProtocol

PEERS = Path(__file__).resolve().parent / "peers"
PROGRAMS = {
    "go": PEERS / "yamux-go" / "bin" / "yamuxpeer",
    "rust": PEERS / "yamux-rust" / "target" / "release" / "yamuxpeer",
}
#: seconds any wait on a peer may take (a bug shows up as a failure)
WAIT = 60.0


def pattern(n: int) -> bytes:
    """The peers' pattern: byte i is i mod 251."""
    block = bytes(range(251))
    return (block * (n // 251 + 1))[:n]


def program(peer: str) -> Path:
    path = PROGRAMS[peer]
    if not path.exists():
        raise AssertionError(f"the yamux-{peer} peer is not built: run "
                             f"tests/interop/peers/yamux-{peer}/install.sh (or make peers)")
    return path


class PeerProcess(protocol.ProcessProtocol):
    """A peer's child process: its stdout lines, kept, and waited on."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.lines: list[str] = []
        self.stderr = b""
        self._partial = b""
        self._waiters: list[tuple[re.Pattern, defer.Deferred]] = []
        self.ended: defer.Deferred = defer.Deferred()
        self.exit_code: int | None = None

    def outReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self._partial += data
        *complete, self._partial = self._partial.split(b"\n")
        for raw in complete:
            line = raw.decode("utf-8", "replace")
            self.lines.append(line)
            for waiter in list(self._waiters):
                match = waiter[0].search(line)
                if match:
                    self._waiters.remove(waiter)
                    waiter[1].callback(match)

    def errReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.stderr += data

    def processEnded(self, reason) -> None:  # noqa: N802 - Twisted's name
        self.exit_code = reason.value.exitCode
        waiters, self._waiters = self._waiters, []
        for regex, d in waiters:
            d.errback(AssertionError(f"{self.label} ended before printing /{regex.pattern}/; "
                                     f"stdout {self.lines}, stderr {self.stderr[-2000:]!r}"))
        self.ended.callback(self.exit_code)

    def wait_line(self, regex: str, timeout: float = WAIT) -> defer.Deferred:
        """A Deferred firing with the ``re.Match`` of the first line (already printed, or to
        come) matching ``regex``."""
        compiled = re.compile(regex)
        for line in self.lines:
            match = compiled.search(line)
            if match:
                return defer.succeed(match)
        d: defer.Deferred = defer.Deferred()
        self._waiters.append((compiled, d))
        return d.addTimeout(timeout, reactor)

    def stop(self) -> defer.Deferred:
        """Terminate the process (if running); fires once it has ended."""
        if self.exit_code is None and self.transport is not None:
            try:
                self.transport.signalProcess("KILL")
            except error.ProcessExitedAlready:
                pass
        return self.ended


def spawn(peer: str, *args: str) -> PeerProcess:
    path = program(peer)
    process = PeerProcess(f"yamux-{peer} {' '.join(args)}")
    reactor.spawnProcess(process, str(path), [str(path), *args], env=None)
    return process


async def start_peer_server(peer: str, *args: str) -> tuple[PeerProcess, int]:
    """Run ``PEER server ARGS``; returns the process and its port once it listens."""
    process = spawn(peer, "server", *args)
    match = await process.wait_line(r"^listening (\d+)$")
    return process, int(match.group(1))


@implementer(IHalfCloseableProtocol)
class Exchange(protocol.Protocol):
    """Send ``command`` (a line) and ``body``, then FIN; collect what comes back until the
    stream ends. :attr:`done` fires with ``(bytes, reason Failure)``."""

    def __init__(self, command: str, body: bytes = b"", half_close: bool = True) -> None:
        self.command = command
        self.body = body
        self.half_close = half_close
        self.received: list[bytes] = []
        self.done: defer.Deferred = defer.Deferred()

    def connectionMade(self) -> None:  # noqa: N802 - Twisted's name
        self.transport.write(self.command.encode() + b"\n")
        if self.body:
            self.transport.write(self.body)
        if self.half_close:
            self.transport.loseConnection()

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.received.append(data)

    def readConnectionLost(self) -> None:  # noqa: N802 - Twisted's name
        self.transport.loseConnection()

    def writeConnectionLost(self) -> None:  # noqa: N802 - Twisted's name
        pass

    def connectionLost(self, reason) -> None:  # noqa: N802 - Twisted's name
        self.done.callback((b"".join(self.received), reason))


@implementer(IHalfCloseableProtocol)
class CommandProtocol(protocol.Protocol):
    """Our side of the stream commands (the server the peers' clients talk to, and the
    streams a peer's server opens to our client)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.command: list[str] | None = None
        self.sink = hashlib.sha256()
        self.sunk = 0

    def dataReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        if self.command is None:
            self.buffer += data
            line, newline, rest = self.buffer.partition(b"\n")
            if not newline:
                return
            self.buffer = b""
            self.command = line.decode().split()
            self.start()
            data = rest
        if data:
            self.more(data)

    @property
    def session(self) -> YamuxProtocol:
        return self.transport.session

    def start(self) -> None:
        name = self.command[0]
        transport = self.transport
        if name == "source":
            transport.write(pattern(int(self.command[1])))
            transport.loseConnection()
        elif name == "ping":
            answered = self.session.ping()
            answered.addCallbacks(lambda _: transport.write(b"pong\n"),
                                  lambda f: transport.write(b"ping failed\n"))
            answered.addBoth(lambda _: transport.loseConnection())
        elif name == "goaway":
            self.session.go_away()
            transport.write(b"ok\n")
            transport.loseConnection()
        elif name == "reset":
            transport.abortConnection()
        elif name == "open":
            data = pattern(100_000)
            exchange = Exchange("echo", data)
            self.session.open_stream(exchange)

            def check(result) -> None:
                got, _ = result
                transport.write(b"opened ok\n" if got == data else
                                b"opened FAIL echo of %d bytes differs\n" % len(got))
                transport.loseConnection()

            exchange.done.addCallback(check)

    def more(self, data: bytes) -> None:
        name = self.command[0]
        if name == "echo":
            self.transport.write(data)
        elif name == "sink":
            self.sink.update(data)
            self.sunk += len(data)

    def readConnectionLost(self) -> None:  # noqa: N802 - Twisted's name
        if self.command and self.command[0] == "sink":
            self.transport.write(b"got %d %s\n" % (self.sunk, self.sink.hexdigest().encode()))
        if self.command is None or self.command[0] in ("echo", "sink"):
            self.transport.loseConnection()

    def writeConnectionLost(self) -> None:  # noqa: N802 - Twisted's name
        pass
