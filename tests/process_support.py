"""Child processes for the tests that run ``twistd`` or ``rsocket-tx`` for real: a
:class:`ChildProcess` that collects the child's output and says when its servers listen, and
:func:`spawn` to start one from the repository root."""

from __future__ import annotations

import os
import re
import signal
import sys
from pathlib import Path

from twisted.internet import reactor
from twisted.internet.defer import Deferred
from twisted.internet.protocol import ProcessProtocol

REPO = Path(__file__).resolve().parent.parent
#: ``twistd`` itself, run with ``python -c`` from the repository root (so that its
#: ``twisted/plugins`` is found whatever the install mode).
TWISTD = "import sys; sys.argv[0] = 'twistd'; from twisted.scripts.twistd import run; run()"
#: the ``rsocket-tx`` command, run with ``python -c``.
CLI = "from rsocket_tx.faces.main import main; main()"


class ChildProcess(ProcessProtocol):
    """Collects a child's output (``output``, stdout and stderr); ``ended`` fires with how
    the child ended; ``ready`` fires once its servers listen, as ``pattern`` (bytes; group 1
    the port, group 2 the endpoint spec) finds in the output:

    * ``count`` None: with the first port (an int);
    * ``count`` N > 0: with ``{endpoint spec: port}`` once N endpoints listen;
    * ``count`` 0: never (a child that is not a server).

    If the child ends first, ``ready`` fails with its output. ``stdin`` is written to the
    child's standard input, which is then closed.
    """

    def __init__(self, pattern: re.Pattern[bytes], count: int | None = None,
                 stdin: bytes = b"") -> None:
        self.pattern = pattern
        self.count = count
        self.stdin = stdin
        self.output = b""
        self.ready: Deferred = Deferred()
        self.ended: Deferred = Deferred()

    def connectionMade(self) -> None:  # noqa: N802 - Twisted's name
        if self.stdin:
            self.transport.write(self.stdin)
        self.transport.closeStdin()

    def outReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.received(data)

    def errReceived(self, data: bytes) -> None:  # noqa: N802 - Twisted's name
        self.received(data)

    def received(self, data: bytes) -> None:
        self.output += data
        if self.count == 0 or self.ready.called:
            return
        if self.count is None:
            found = self.pattern.search(self.output)
            if found:
                self.ready.callback(int(found.group(1)))
            return
        ports = {m.group(2).decode(): int(m.group(1))
                 for m in self.pattern.finditer(self.output)}
        if len(ports) >= self.count:
            self.ready.callback(ports)

    def processEnded(self, reason) -> None:  # noqa: N802 - Twisted's name
        self.ended.callback(reason.value)
        if self.count != 0 and not self.ready.called:
            self.ready.errback(AssertionError(f"ended first:\n{self.output.decode()}"))

    def stop(self) -> Deferred:
        """SIGTERM the child unless it has ended; fires with how it ended."""
        if not self.ended.called:
            self.transport.signalProcess(signal.SIGTERM)
        return self.ended.addTimeout(60, reactor)


def spawn(argv: list[str], count: int | None = 0, pythonpath: Path | None = None,
          stdin: bytes = b"", *, pattern: re.Pattern[bytes]) -> ChildProcess:
    """Run ``python argv`` from the repository root (unbuffered output).

    :param argv: the arguments after ``python``.
    :param count: see :class:`ChildProcess`.
    :param pythonpath: a folder put first on the child's ``PYTHONPATH``.
    :param stdin: see :class:`ChildProcess`.
    :param pattern: see :class:`ChildProcess`.
    """
    process = ChildProcess(pattern, count, stdin)
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath),
                                                          env.get("PYTHONPATH")]))
    reactor.spawnProcess(process, sys.executable, [sys.executable, *argv], env=env,
                         path=str(REPO))
    return process


def assert_ended_cleanly(process: ChildProcess, reason, shut_down: bool = False,
                         expected_failure: bytes | None = None) -> None:
    """Assert that the child ended cleanly: twistd ends a clean SIGTERM shutdown by killing
    itself with the signal (else exit 0), having logged no traceback (and, ``shut_down``,
    having logged ``Server Shut Down.``).

    :param reason: what ``process.ended`` fired with.
    :param expected_failure: the last line of the one traceback the test provoked on purpose
        (e.g. a demo handler that raises): tracebacks ending with it are allowed, any other is
        not.
    """
    assert getattr(reason, "signal", None) == signal.SIGTERM or reason.exitCode == 0, \
        process.output.decode()
    output = process.output
    if expected_failure is not None:
        # a logged traceback is "Traceback ..." up to its last line, the exception
        output = re.sub(rb"Traceback \(most recent call last\):(?:\n\t[^\n]*)*?\n\t[^\n]*"
                        + re.escape(expected_failure), b"", output)
    assert b"Traceback" not in output, process.output.decode()
    if shut_down:
        assert b"Server Shut Down." in process.output, process.output.decode()
