"""Pieces shared by the orchestrator (``run.py``) and the per-implementation children.

Every implementation module (``impl_raw``, ``impl_rsocket_py``, ``impl_rsocket_tx``) is a small
program with two modes::

    python -m benchmarks.impl_X server          # prints "PORT <n>" (or "UNAVAILABLE <reason>")
    python -m benchmarks.impl_X client PORT SPEC  # SPEC: JSON workload spec, prints "RESULT <json>"

The application contract, identical for the three implementations:

* request-response: data ``b"count"`` -> reply with the decimal number of fire-and-forget
  messages this connection's server side has received so far; any other data -> echoed back.
* request-stream: data ``b"<n>:<size>"`` -> ``n`` items of ``size`` bytes each, then complete.
* fire-and-forget: the server counts it (per connection).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

COUNT_QUERY = b"count"


def stream_request(n: int, size: int) -> bytes:
    """Request data of the stream workloads: ``b"<n>:<size>"``."""
    return b"%d:%d" % (n, size)


def parse_stream_request(data: bytes) -> tuple[int, int]:
    n, _, size = bytes(data).partition(b":")
    return int(n), int(size)


@dataclass
class Spec:
    """One workload as handed to a client child (JSON on the command line)."""

    name: str
    kind: str  # "rr" | "stream" | "fnf"
    count: int  # upper bound of operations (requests, items, messages) per measured run
    size: int  # payload bytes per operation
    inflight: int = 1  # rr: outstanding requests
    prefetch: int = 256  # stream: request-n window
    budget: float = 5.0  # seconds: stop issuing new work after this, report what completed
    warmup: int = 0  # operations before the measured runs (not reported)
    repeat: int = 1  # measured runs on the same connection

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Spec:
        return cls(**json.loads(text))


@dataclass
class RunResult:
    ops: int = 0  # completed operations (responses, stream items, fnf acknowledged by server)
    nbytes: int = 0  # payload bytes moved (responses / items / messages)
    seconds: float = 0.0
    complete: bool = True  # False: stopped by the time budget before ``count``
    extra: dict = field(default_factory=dict)


class Deadline:
    """Soft time budget of a measured run."""

    __slots__ = ("start", "end")

    def __init__(self, budget: float):
        self.start = time.perf_counter()
        self.end = self.start + budget

    def passed(self) -> bool:
        return time.perf_counter() >= self.end

    def elapsed(self) -> float:
        return time.perf_counter() - self.start


class RequestResponseLoad:
    """The "rr" workload's shared counters: ``worker(request_response, request)`` coroutines
    (``spec.inflight`` of them) issue requests until ``count`` are issued or the deadline
    passes (checked every 64 replies); ``result()`` is the measured run."""

    def __init__(self, count: int, deadline: Deadline):
        self.count = count
        self.deadline = deadline
        self.issued = 0
        self.got = 0
        self.nbytes = 0
        self.stop = False

    async def worker(self, request_response, request) -> None:
        while self.issued < self.count and not self.stop:
            self.issued += 1
            reply = await request_response(request)
            self.got += 1
            self.nbytes += len(reply.data)
            if (self.got & 63) == 0 and self.deadline.passed():
                self.stop = True

    def result(self) -> RunResult:
        return RunResult(self.got, self.nbytes, self.deadline.elapsed(), self.got == self.count)


async def fire_and_forget_run(fire_and_forget, request_response, payload_class, spec: Spec,
                              count: int, deadline: Deadline, state: dict,
                              pause=None) -> RunResult:
    """The "fnf" workload: ``count`` messages in batches of 1000 (each batch awaited until
    written, which keeps the send queue bounded; ``await pause()`` after each batch when
    given), then COUNT_QUERY request-responses until the server has received them all
    (``state["fnf_expected"]`` counts this connection's messages across runs)."""
    message = payload_class(b"x" * spec.size)
    query = payload_class(COUNT_QUERY)
    sent = 0
    batch = 1000
    while sent < count:
        k = min(batch, count - sent)
        last = None
        for _ in range(k):
            last = fire_and_forget(message)
        sent += k
        await last
        if deadline.passed():
            break
        if pause is not None:
            await pause()
    state["fnf_expected"] += sent
    while True:
        reply = await request_response(query)
        if int(reply.data) >= state["fnf_expected"]:
            break
    return RunResult(sent, sent * spec.size, deadline.elapsed(), sent == count)


def die_with_parent() -> None:
    """Exit this child as soon as its stdin (a pipe from the orchestrator) closes."""

    def watch() -> None:
        try:
            while os.read(0, 65536):
                pass
        finally:
            os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def announce_port(port: int) -> None:
    sys.stdout.write(f"PORT {port}\n")
    sys.stdout.flush()


def announce_unavailable(reason: str) -> None:
    sys.stdout.write("UNAVAILABLE " + " ".join(reason.split()) + "\n")
    sys.stdout.flush()


def emit_result(runs: list[RunResult] | None = None, error: str | None = None) -> None:
    if error is not None:
        body = {"ok": False, "error": error}
    else:
        body = {"ok": True, "runs": [asdict(r) for r in runs or []]}
    sys.stdout.write("RESULT " + json.dumps(body) + "\n")
    sys.stdout.flush()


def describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:300]


def pin_cpus(spec: str) -> None:
    """Restrict this process to the CPUs listed in ``spec`` ("0", "0,1"); "" leaves it alone."""
    cpus = {int(c) for c in spec.split(",") if c.strip()}
    if cpus and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, cpus)
        except OSError:
            pass


def child_main(server, client, argv: list[str] | None = None) -> None:
    """Dispatch ``server`` / ``client PORT SPEC`` for an implementation module."""
    argv = sys.argv[1:] if argv is None else argv
    die_with_parent()
    pin_cpus(os.environ.get("BENCH_CPUS_" + (argv[0].upper() if argv else "NONE"), ""))
    if argv[:1] == ["server"]:
        server()
    elif argv[:1] == ["client"] and len(argv) == 3:
        client(int(argv[1]), Spec.from_json(argv[2]))
    else:
        sys.stderr.write("usage: server | client PORT SPEC_JSON\n")
        sys.exit(2)


def run_twisted_client(run, port: int, spec: Spec) -> None:
    """Run ``await run(reactor, port, spec)`` under ``task.react``; report a failure as the
    child's result instead of crashing the harness."""
    from twisted.internet import defer, task

    async def main(reactor) -> None:
        try:
            await run(reactor, port, spec)
        except Exception as exc:  # report, never crash the harness
            emit_result(error=describe(exc))

    task.react(lambda reactor: defer.ensureDeferred(main(reactor)))
