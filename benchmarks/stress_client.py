"""The Twisted side of the stress benchmark: well-behaved rsocket_tx clients in a child process.

Run by :mod:`benchmarks.stress` (one process per job, apart from the server under test so that
the server's memory is measured alone)::

    python -m benchmarks.stress_client probe PORT
    python -m benchmarks.stress_client connections PORT COUNT CONCURRENCY
    python -m benchmarks.stress_client streams PORT COUNT
    python -m benchmarks.stress_client soak PORT SECONDS SESSIONS CUT_EVERY SEED

Everything goes through rsocket_tx's public client API (:func:`rsocket_tx.connect`,
:class:`rsocket_tx.RSocket`). Lines on stdout speak to the harness:

* ``probe``: a good client, to tell whether the server stays responsive. One connection makes a
  request-response every 200 ms (``RTT persist <ms>``), and every second a fresh connection
  connects, sends SETUP and one request-response (``RTT fresh <ms>``); a failure or a reply
  slower than 10 s prints ``FAIL persist|fresh <reason>``.
* ``connections``: COUNT connections (at most CONCURRENCY connecting at once), each makes one
  request-response; prints ``OPEN <json>`` with them all open, waits for ``close`` on stdin,
  closes them all and prints ``CLOSED <json>``.
* ``streams``: one connection, COUNT request-streams to the demo responder, each with
  request-n 1 and not consumed, so they all stay open on the server; ``OPEN`` / ``close`` /
  ``CLOSED`` as above (the streams are cancelled).
* ``soak``: SESSIONS resumable sessions run every interaction for SECONDS (see
  :func:`soak`), while the transport of a random session is aborted about every CUT_EVERY
  seconds; prints ``PROGRESS <json>`` every 10 s and ``RESULT <json>`` at the end.

The process exits when its stdin closes (the harness went away).
"""

from __future__ import annotations

import json
import os
import random
import resource
import sys
import threading
import time

from twisted.internet import defer, task
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.interfaces import IStreamClientEndpoint
from zope.interface import implementer

from rsocket_tx import LocalProtocolError, Payload, connect

HOST = "127.0.0.1"


def raise_file_limit() -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; return (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def emit(tag: str, body) -> None:
    sys.stdout.write(f"{tag} {json.dumps(body) if not isinstance(body, str) else body}\n")
    sys.stdout.flush()


def percentiles(values: list[float]) -> dict:
    """p50/p90/p99/max of ``values`` (milliseconds in, milliseconds out)."""
    if not values:
        return {}
    s = sorted(values)

    def at(q: float) -> float:
        return round(s[min(len(s) - 1, int(q * len(s)))], 2)

    return {"n": len(s), "p50": at(0.5), "p90": at(0.9), "p99": at(0.99), "max": round(s[-1], 2)}


class Commands:
    """Lines from stdin, handed to the reactor thread; the process exits when stdin closes."""

    def __init__(self, reactor) -> None:
        self.reactor = reactor
        self.waiting: dict[str, defer.Deferred] = {}
        threading.Thread(target=self._read, name="stdin", daemon=True).start()

    def _read(self) -> None:
        try:
            for line in sys.stdin:
                self.reactor.callFromThread(self._got, line.strip())
        finally:
            os._exit(0)

    def _got(self, line: str) -> None:
        d = self.waiting.pop(line, None)
        if d is not None:
            d.callback(line)

    def wait(self, line: str) -> defer.Deferred:
        d = self.waiting[line] = defer.Deferred()
        return d


def short(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:200]


# ----------------------------------------------------------------------------- probe


async def probe(reactor, port: int) -> None:
    endpoint = TCP4ClientEndpoint(reactor, HOST, port, timeout=10)
    persistent = None

    async def once_persistent() -> None:
        nonlocal persistent
        start = time.monotonic()
        try:
            if persistent is None or not persistent.is_open:
                persistent = await connect(endpoint, reactor=reactor)
            d = persistent.request_response(Payload(b"probe"))
            d.addTimeout(10, reactor)
            await d
            emit("RTT", f"persist {(time.monotonic() - start) * 1000:.2f}")
        except Exception as exc:
            persistent = None
            emit("FAIL", f"persist {short(exc)}")

    async def once_fresh() -> None:
        start = time.monotonic()
        try:
            d = connect(endpoint, reactor=reactor)
            d.addTimeout(10, reactor)
            rs = await d
            d = rs.request_response(Payload(b"probe"))
            d.addTimeout(10, reactor)
            await d
            emit("RTT", f"fresh {(time.monotonic() - start) * 1000:.2f}")
            rs.close(drain_timeout=0)
        except Exception as exc:
            emit("FAIL", f"fresh {short(exc)}")

    busy = {"persist": False, "fresh": False}

    def fire(kind: str, job) -> None:
        if busy[kind]:
            return  # the previous one is still waiting: its time will show how long

        async def run() -> None:
            busy[kind] = True
            try:
                await job()
            finally:
                busy[kind] = False

        defer.ensureDeferred(run())

    task.LoopingCall(fire, "persist", once_persistent).start(0.2)
    task.LoopingCall(fire, "fresh", once_fresh).start(1.0)
    emit("READY", "probe")
    await defer.Deferred()  # until stdin closes


# ----------------------------------------------------------------------------- connections


async def connections(reactor, port: int, count: int, concurrency: int,
                      commands: Commands) -> None:
    endpoint = TCP4ClientEndpoint(reactor, HOST, port, timeout=60)
    sem = defer.DeferredSemaphore(concurrency)
    open_: list = []
    times: list[float] = []
    errors: dict[str, int] = {}

    async def one() -> None:
        start = time.monotonic()
        try:
            rs = await connect(endpoint, reactor=reactor)
            open_.append(rs)
            await rs.request_response(Payload(b"hello"))
            times.append((time.monotonic() - start) * 1000)
        except Exception as exc:
            key = short(exc)[:80]
            errors[key] = errors.get(key, 0) + 1

    started = time.monotonic()
    await defer.DeferredList([sem.run(lambda: defer.ensureDeferred(one()))
                              for _ in range(count)])
    elapsed = time.monotonic() - started
    alive = sum(1 for rs in open_ if rs.is_open)
    emit("OPEN", {"ok": len(times), "open": alive, "seconds": round(elapsed, 3),
                  "rate": round(len(times) / elapsed, 1) if elapsed else None,
                  "latency_ms": percentiles(times), "errors": errors})
    await commands.wait("close")
    started = time.monotonic()
    await defer.DeferredList([rs.close(drain_timeout=0) for rs in open_ if rs.is_open])
    emit("CLOSED", {"seconds": round(time.monotonic() - started, 3)})
    await commands.wait("exit")


# ----------------------------------------------------------------------------- streams


async def streams(reactor, port: int, count: int, commands: Commands) -> None:
    endpoint = TCP4ClientEndpoint(reactor, HOST, port, timeout=60)
    rs = await connect(endpoint, reactor=reactor)
    started = time.monotonic()
    opened = []
    for i in range(count):
        # the demo responder counts to 10^9; request-n 1 and never consumed: the stream stays
        # open on the server after its first item
        opened.append(rs.request_stream(Payload(b"1000000000"), prefetch=1))
        if i % 500 == 499:
            await task.deferLater(reactor, 0)  # let the writes go out
    results = await defer.DeferredList([s.when_ready() for s in opened], consumeErrors=True)
    elapsed = time.monotonic() - started
    failed = [s for s in opened if s.ended]
    reasons: dict[str, int] = {}
    for s in failed:
        key = short(s.error)[:100] if s.error is not None else "ended"
        reasons[key] = reasons.get(key, 0) + 1
    emit("OPEN", {"open": count - len(failed), "failed": len(failed), "reasons": reasons,
                  "seconds": round(elapsed, 3), "all_ready": all(ok for ok, _ in results)})
    await commands.wait("close")
    started = time.monotonic()
    for s in opened:
        s.cancel()
    d = rs.request_response(Payload(b"after"))  # the cancels have been processed when it returns
    await d
    emit("CLOSED", {"seconds": round(time.monotonic() - started, 3)})
    await commands.wait("exit")
    await rs.close(drain_timeout=0)


# ----------------------------------------------------------------------------- soak


@implementer(IStreamClientEndpoint)
class CuttableEndpoint:
    """A client endpoint that remembers the protocol of its latest connection, so that the
    soak can abort that TCP connection as a network failure would (the resumable client then
    reconnects through this same endpoint)."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.protocol = None
        self.connects = 0

    def connect(self, factory):
        d = self.inner.connect(factory)

        def got(protocol):
            self.protocol = protocol
            self.connects += 1
            return protocol

        return d.addCallback(got)

    def cut(self) -> bool:
        """Abort the current TCP connection (RST); False if there is none open."""
        protocol = self.protocol
        transport = getattr(protocol, "transport", None)
        if transport is None or not getattr(transport, "connected", False):
            return False
        self.protocol = None
        transport.abortConnection()
        return True


class Session:
    """One resumable client session of the soak and its tallies."""

    def __init__(self, name: str, endpoint: CuttableEndpoint) -> None:
        self.name = name
        self.endpoint = endpoint
        self.rs = None
        self.counts = dict.fromkeys(
            ("rr", "rr_bad", "fnf", "streams", "stream_items", "streams_bad", "channels",
             "channel_items", "channels_bad", "push_sent", "push_skipped", "push_failed",
             "errors"), 0)
        self.error_samples: list[str] = []

    def error(self, exc: BaseException) -> None:
        self.counts["errors"] += 1
        if len(self.error_samples) < 5:
            self.error_samples.append(short(exc))


async def soak(reactor, port: int, seconds: float, sessions: int, cut_every: float,
               seed: int) -> None:
    """Run ``sessions`` resumable sessions against a ``--resume`` server for ``seconds``.

    Each session runs five loops at once, each checking every answer exactly:

    * request-response: data ``<session>:<seq>``, the echo must be identical;
    * fire-and-forget: ``<session>:<seq>`` in batches of 10 every 10 ms; at the end the responder
      (:mod:`benchmarks.stress_responder`) reports how many it got, how many were skipped and
      how many came twice or out of order;
    * request-stream: N items (N random, 1..1000, request-n window 32), which must be
      ``b"0"`` … ``b"N-1"`` exactly;
    * request-channel: N items (1..500) out, the echo must be the same N items in order;
    * metadata-push every 50 ms. METADATA_PUSH has no resume position (RSocket 1.0 §Resuming
      Operation: only stream frames are resent), so one written just before a cut may be lost
      and none can be sent while the session is detached; those are counted apart.

    Meanwhile the TCP connection of a random session is aborted every ``cut_every`` seconds on
    average (uniform in [0.5, 1.5] times it); the session resumes by itself.
    """
    rng = random.Random(seed)
    stop = False
    all_sessions: list[Session] = []
    lost_sessions = 0
    cuts = 0
    started = time.monotonic()

    async def pace(seconds_: float) -> None:
        await task.deferLater(reactor, seconds_)

    async def rr_loop(s: Session) -> None:
        seq = 0
        while not stop:
            data = b"%s:%d" % (s.name.encode(), seq)
            seq += 1
            reply = await s.rs.request_response(Payload(data))
            s.counts["rr"] += 1
            if reply is None or reply.data != data:
                s.counts["rr_bad"] += 1
            await pace(0.002)

    async def fnf_loop(s: Session) -> None:
        name = s.name.encode()
        while not stop:
            last = None
            for _ in range(10):
                last = s.rs.fire_and_forget(Payload(b"%s:%d" % (name, s.counts["fnf"])))
                s.counts["fnf"] += 1
            await last
            await pace(0.01)

    async def stream_loop(s: Session) -> None:
        while not stop:
            n = rng.randint(1, 1000)
            items = await s.rs.request_stream(Payload(b"%d" % n), prefetch=32).collect()
            s.counts["streams"] += 1
            s.counts["stream_items"] += len(items)
            if [p.data for p in items] != [b"%d" % i for i in range(n)]:
                s.counts["streams_bad"] += 1
            await pace(0.005)

    async def channel_loop(s: Session) -> None:
        while not stop:
            n = rng.randint(1, 500)
            sent = [b"c%d" % i for i in range(n)]
            stream = s.rs.request_channel(Payload(sent[0]), (Payload(d) for d in sent[1:]),
                                          prefetch=32)
            items = await stream.collect()
            s.counts["channels"] += 1
            s.counts["channel_items"] += len(items)
            if [p.data for p in items] != sent:
                s.counts["channels_bad"] += 1
            await pace(0.005)

    async def push_loop(s: Session) -> None:
        name = s.name.encode()
        while not stop:
            try:
                d = s.rs.metadata_push(b"%s:%d" % (name, s.counts["push_sent"]))
                s.counts["push_sent"] += 1
                d.addErrback(lambda _f: s.counts.__setitem__("push_failed",
                                                             s.counts["push_failed"] + 1))
            except LocalProtocolError:
                s.counts["push_skipped"] += 1  # detached: METADATA_PUSH cannot wait
            await pace(0.05)

    async def guarded(s: Session, loop) -> None:
        while not stop:
            try:
                await loop(s)
            except Exception as exc:
                s.error(exc)
                if s.rs is not None and not s.rs.is_open:
                    return  # the session ended; the supervisor replaces it
                await pace(0.1)

    async def run_session(index: int, generation: int) -> None:
        nonlocal lost_sessions
        s = Session(f"s{index}g{generation}", CuttableEndpoint(
            TCP4ClientEndpoint(reactor, HOST, port, timeout=10)))
        all_sessions.append(s)
        s.rs = await connect(s.endpoint, reactor=reactor, resume=True,
                             keepalive_interval=5_000)
        active[index] = s
        loops = [defer.ensureDeferred(guarded(s, loop))
                 for loop in (rr_loop, fnf_loop, stream_loop, channel_loop, push_loop)]
        await defer.DeferredList(loops)
        if not stop:  # the session ended under us: count it and start another
            lost_sessions += 1
            await run_session(index, generation + 1)

    active: dict[int, Session] = {}

    def cut() -> None:
        nonlocal cuts
        if stop:
            return
        candidates = [s for s in active.values() if s.endpoint.protocol is not None]
        if candidates and rng.choice(candidates).endpoint.cut():
            cuts += 1
        reactor.callLater(cut_every * rng.uniform(0.5, 1.5), cut)

    def totals() -> dict:
        out: dict = {}
        for s in all_sessions:
            for k, v in s.counts.items():
                out[k] = out.get(k, 0) + v
        out["cuts"] = cuts
        out["resumes"] = sum(s.rs.resumes for s in all_sessions if s.rs is not None)
        out["sessions_lost"] = lost_sessions
        out["elapsed"] = round(time.monotonic() - started, 1)
        return out

    runners = [defer.ensureDeferred(run_session(i, 0)) for i in range(sessions)]
    if cut_every > 0:
        reactor.callLater(cut_every * rng.uniform(0.5, 1.5), cut)
    progress = task.LoopingCall(lambda: emit("PROGRESS", totals()))
    progress.start(10.0, now=False)
    await task.deferLater(reactor, seconds)
    stop = True
    progress.stop()
    # let the loops finish the operation each is in (a stream or channel in flight completes)
    done = defer.DeferredList(runners)
    done.addTimeout(120, reactor)
    try:
        await done
    except defer.TimeoutError:
        pass
    # fire-and-forget and metadata-push, as the responder counted them: asked on each live
    # session after its own messages (frames are handled in order on a connection)
    fnf_check = {"received": 0, "gaps": 0, "duplicates": 0, "push_received": 0}
    for s in all_sessions:
        asker = s if s.rs is not None and s.rs.is_open else next(
            (a for a in active.values() if a.rs.is_open), None)
        if asker is None:
            continue
        reply = await asker.rs.request_response(Payload(b"fnf?" + s.name.encode()))
        received, gaps, dups, pushes = (int(x) for x in reply.data.split())
        fnf_check["received"] += received
        fnf_check["gaps"] += gaps
        fnf_check["duplicates"] += dups
        fnf_check["push_received"] += pushes
    result = totals()
    result.update(fnf_check)
    result["error_samples"] = [e for s in all_sessions for e in s.error_samples][:10]
    await defer.DeferredList([s.rs.close(drain_timeout=0) for s in all_sessions
                              if s.rs is not None and s.rs.is_open])
    emit("RESULT", result)


# ----------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    raise_file_limit()
    mode, args = argv[0], argv[1:]

    async def run(reactor) -> None:
        commands = Commands(reactor)
        try:
            if mode == "probe":
                await probe(reactor, int(args[0]))
            elif mode == "connections":
                await connections(reactor, int(args[0]), int(args[1]), int(args[2]), commands)
            elif mode == "streams":
                await streams(reactor, int(args[0]), int(args[1]), commands)
            elif mode == "soak":
                await soak(reactor, int(args[0]), float(args[1]), int(args[2]), float(args[3]),
                           int(args[4]))
            else:
                raise SystemExit(f"unknown mode {mode!r}")
        except Exception as exc:
            emit("ERROR", short(exc))

    task.react(lambda reactor: defer.ensureDeferred(run(reactor)))


if __name__ == "__main__":
    main()
