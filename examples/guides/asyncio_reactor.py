"""rsocket_tx on Twisted's asyncio reactor, in one process with asyncio code.

Run it with ``python asyncio_reactor.py``. It installs the asyncio reactor (before anything
imports ``twisted.internet.reactor``), serves a responder whose handler awaits an asyncio
coroutine, and requests it from an asyncio coroutine while an asyncio task runs beside it.
The bridges are Twisted's: ``Deferred.fromFuture`` (asyncio into Twisted) and
``Deferred.asFuture`` (Twisted into asyncio).
"""

import asyncio
import sys

from twisted.internet import asyncioreactor

loop = asyncio.new_event_loop()
asyncio.set_event_loop(loop)
asyncioreactor.install(loop)  # first: before anything imports twisted.internet.reactor

from twisted.internet import defer, reactor  # noqa: E402
from twisted.python.failure import Failure  # noqa: E402

from rsocket_tx import Payload, Responder, connect, serve  # noqa: E402


async def lookup(name: str) -> str:
    """Some asyncio code (an asyncio database driver, an HTTP client...)."""
    await asyncio.sleep(0)
    return name.upper()


class Upper(Responder):
    async def request_response(self, payload):
        # a Twisted coroutine: asyncio work is awaited through a Deferred
        future = asyncio.ensure_future(lookup(payload.data.decode()))
        result = await defer.Deferred.fromFuture(future)
        return Payload(result.encode())


async def ticker(ticks: list) -> None:
    """An asyncio task running beside the RSocket traffic."""
    for n in range(3):
        ticks.append(n)
        await asyncio.sleep(0)


async def asyncio_client(rsocket) -> list[str]:
    """asyncio code using an RSocket: each Deferred becomes an asyncio future."""
    answers = []
    for word in ("hello", "asyncio"):
        response = await rsocket.request_response(Payload(word.encode())).asFuture(loop)
        answers.append(response.data.decode())
    return answers


async def main() -> None:
    port = await serve("tcp:0:interface=127.0.0.1", Upper)
    rsocket = await connect(f"tcp:host=127.0.0.1:port={port.getHost().port}")
    ticks: list[int] = []
    task = asyncio.ensure_future(ticker(ticks))
    answers = await defer.Deferred.fromFuture(asyncio.ensure_future(asyncio_client(rsocket)))
    await defer.Deferred.fromFuture(task)
    await rsocket.close()
    await port.stopListening()
    print(f"reactor: {type(reactor).__name__}")
    print(f"answers: {' '.join(answers)}")
    print(f"ticks: {ticks}")


def run() -> int:
    """Run :func:`main` on the reactor; 0 if it succeeded, else 1 (traceback printed)."""
    failures = []

    def done(result):
        if isinstance(result, Failure):
            failures.append(result)
        reactor.stop()

    reactor.callWhenRunning(lambda: defer.ensureDeferred(main()).addBoth(done))
    reactor.run()
    for failure in failures:
        failure.printTraceback()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(run())
