"""Memory benchmark: the server's resident memory per idle connection, per open request-stream
and per Jini ERI mux session, beside rsocket-java's and Apache River's servers.

Every server runs in a process of its own; its resident memory is ``VmRSS`` of
``/proc/PID/status``, read after a full garbage collection in the server (Python:
``gc.collect()`` and glibc's ``malloc_trim(0)``, asked for on the server's stdin; a JVM:
``jcmd PID GC.run``). Each shape is measured as::

    warm-up client (a few of the same items, then closed)  ->  baseline = RSS after GC
    client opens N items and holds them                    ->  with     = RSS after GC
    client exits (its sockets close)                       ->  after    = RSS after GC
    per item = (with - baseline) / N

The clients are rsocket_tx's own (``python -m benchmarks.memory client ...``, one process per
shape), the same for every server, so that only the server differs. Shapes (``--shapes``):

``rsocket-connections``
    ``--connections`` (1,000) RSocket connections, each SETUP and one request-response, then
    idle. Servers: rsocket_tx (``serve()`` with the defaults), rsocket-java 1.1.5
    (``benchmarks/java``'s ``BenchServer``, the JVM's default options).
``rsocket-streams``
    ``--streams`` (10,000) request-streams on one connection, each asks for 1,000,000 items of
    64 bytes with request-n 1: the server sends one item and holds the stream open. rsocket_tx
    runs with ``max_concurrent_streams`` raised to that number (its only non-default
    setting); rsocket-java has no such limit.
``rsocket-requests``
    ``--streams`` request-responses outstanding on one connection: rsocket_tx's server
    answers them from a coroutine that awaits a Deferred that never fires (an application
    waiting on a back end), with the same raised ``max_concurrent_streams``. rsocket_tx only
    (rsocket-java's benchmark server answers at once).
``jini-connections``
    ``--connections`` Jini ERI mux connections, each one *Ping* round trip, then idle.
    Servers: rsocket_tx's Jini mux (``rsocket_tx.jini.serve`` with the echo dispatcher) and
    River 2.2.3's ``TcpServerEndpoint`` (``tests/interop/peers/river``, the interop JVM options).
``jini-sessions``
    ``--sessions`` (1,000) sessions, each a request whose body is started (one byte) and never
    finished, so both servers hold the session open; the client opens as many connections as
    that takes (at most 128 sessions per connection, the protocol's limit: 8 for 1,000).
    ``per item`` includes those connections' share; ``net`` subtracts the per-connection
    figure of ``jini-connections`` when that shape ran for the same server.

Run from the repository root (``make bench-memory``)::

    .venv/bin/python -m benchmarks.memory                      # everything (~3 minutes)
    .venv/bin/python -m benchmarks.memory --servers rsocket_tx --shapes rsocket-streams
    .venv/bin/python -m benchmarks.memory --json memory.json

The file limit (RLIMIT_NOFILE) is raised to its hard limit in every process; a shape that needs
more descriptors than that is reported, not run. A server that cannot run here (no ``java``,
no jar: ``bash benchmarks/java/build.sh``, ``tests/interop/peers/river/install.sh``) reads
``n/a`` with the reason. Nothing here asserts: a benchmark reports.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # executed as a file
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import stop_child  # noqa: E402 - after the path when run as a file

REPO = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
SHAPES = ("rsocket-connections", "rsocket-streams", "rsocket-requests", "jini-connections",
          "jini-sessions")
#: server name -> the shapes it can serve
SERVERS = {
    "rsocket_tx": ("rsocket-connections", "rsocket-streams", "rsocket-requests"),
    "rsocket-java": ("rsocket-connections", "rsocket-streams"),
    "rsocket_tx-jini": ("jini-connections", "jini-sessions"),
    "river": ("jini-connections", "jini-sessions"),
}
#: what the client of a shape is told to open (client mode names)
CLIENT_MODE = {"rsocket-connections": "rs-connections", "rsocket-streams": "rs-streams",
               "rsocket-requests": "rs-requests",
               "jini-connections": "jini-connections", "jini-sessions": "jini-sessions"}
UNIT = {"rsocket-connections": "connection", "rsocket-streams": "stream",
        "rsocket-requests": "request",
        "jini-connections": "connection", "jini-sessions": "session"}
#: items the warm-up client opens (and closes) before the baseline
WARMUP = 20
RIVER_DIR = REPO / "tests" / "interop" / "peers" / "river"
RIVER_JAR = RIVER_DIR / "target" / "river-peer.jar"
RIVER_PATCH = RIVER_DIR / "target" / "patch"
#: the interop tests' JVM options for River (tests/interop/river_peer.py JVM_OPTIONS)
RIVER_JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k", "-Xmx512m",
                     f"--patch-module=java.rmi={RIVER_PATCH}",
                     "--add-exports=java.rmi/java.rmi.activation=ALL-UNNAMED")
#: a stream request the servers answer with 1,000,000 items of 64 bytes
STREAM_REQUEST = b"1000000:64"
#: a request-response rsocket_tx's memory server answers only when the connection closes
HOLD_REQUEST = b"hold"


def raise_file_limit() -> int:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; return the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY:
        hard = 1 << 20
    if soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def trim_memory() -> None:
    """Full collection, then give freed heap pages back to the kernel (glibc)."""
    import gc

    gc.collect()
    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def die_with_parent() -> None:
    """In a child before exec: SIGTERM when the harness dies (Linux ``PR_SET_PDEATHSIG``)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["BENCH_TRANSPORT"] = "tcp"
    env.setdefault("BENCH_JVM_SERVER_WARMUP_S", "1")
    return env


# ----------------------------------------------------------------------------- server children


def _watch_stdin(reactor) -> None:
    """``gc`` lines on stdin: collect and answer ``GC``; EOF: stop the reactor."""
    def answer() -> None:
        trim_memory()
        sys.stdout.write("GC\n")
        sys.stdout.flush()

    def read() -> None:
        for line in sys.stdin:
            if line.strip() == "gc":
                reactor.callFromThread(answer)
        reactor.callFromThread(reactor.stop)

    threading.Thread(target=read, daemon=True).start()


def _announce(port) -> None:
    sys.stdout.write(f"PORT {port.getHost().port}\n")
    sys.stdout.flush()


def serve_rsocket_tx(max_concurrent_streams: int) -> None:
    """rsocket_tx's RSocket server with the defaults (``max_concurrent_streams`` aside)."""
    import itertools

    from twisted.internet import reactor
    from twisted.internet.defer import Deferred

    from rsocket_tx import Payload, Responder, serve

    class MemoryResponder(Responder):
        def request_response(self, payload):
            if payload.data == HOLD_REQUEST:
                return self._held()
            return Payload(payload.data)

        async def _held(self):
            await Deferred()  # an application waiting for something that never comes

        def request_stream(self, payload):
            n, size = (int(x) for x in payload.data.split(b":"))
            return itertools.repeat(Payload(b"x" * size), n)

    raise_file_limit()
    d = serve(f"tcp:port=0:interface={HOST}", MemoryResponder, reactor=reactor,
              max_concurrent_streams=max_concurrent_streams)
    d.addCallback(_announce)
    d.addErrback(lambda f: (sys.stderr.write(f.getTraceback()), reactor.stop()))
    _watch_stdin(reactor)
    reactor.run()


def serve_jini() -> None:
    """rsocket_tx's Jini ERI mux server with the defaults and the echo dispatcher."""
    from twisted.internet import reactor

    from rsocket_tx.jini import EchoDispatcher, serve

    raise_file_limit()
    d = serve(reactor, f"tcp:port=0:interface={HOST}", EchoDispatcher)
    d.addCallback(_announce)
    d.addErrback(lambda f: (sys.stderr.write(f.getTraceback()), reactor.stop()))
    _watch_stdin(reactor)
    reactor.run()


# ----------------------------------------------------------------------------- client child


def client(mode: str, port: int, count: int) -> None:
    """Open ``count`` items of ``mode`` against ``port``, print ``OPEN {json}``, hold them
    until stdin closes, then exit (the kernel closes the sockets)."""
    from twisted.internet import defer, reactor, task

    raise_file_limit()
    held: list = []  # everything opened stays referenced until exit

    async def rs_connections() -> dict:
        from rsocket_tx import Payload, connect

        sem = defer.DeferredSemaphore(100)

        async def one() -> None:
            rs = await connect(f"tcp:host={HOST}:port={port}", reactor=reactor)
            held.append(rs)
            await rs.request_response(Payload(b"hello"))

        results = await defer.DeferredList(
            [sem.run(lambda: defer.ensureDeferred(one())) for _ in range(count)],
            consumeErrors=True)
        return {"open": sum(1 for ok, _ in results if ok)}

    async def rs_streams() -> dict:
        from rsocket_tx import Payload, connect

        rs = await connect(f"tcp:host={HOST}:port={port}", reactor=reactor)
        held.append(rs)
        for i in range(count):
            held.append(rs.request_stream(Payload(STREAM_REQUEST), prefetch=1))
            if i % 500 == 499:
                await task.deferLater(reactor, 0, lambda: None)
        streams = held[1:]
        await defer.DeferredList([s.when_ready() for s in streams], consumeErrors=True)
        await rs.request_response(Payload(b"sync"))  # every request has been handled
        return {"open": sum(1 for s in streams if not s.ended)}

    async def rs_requests() -> dict:
        from rsocket_tx import Payload, connect

        rs = await connect(f"tcp:host={HOST}:port={port}", reactor=reactor)
        held.append(rs)
        for i in range(count):
            d = rs.request_response(Payload(HOLD_REQUEST))
            d.addErrback(lambda f: None)
            held.append(d)
            if i % 500 == 499:
                await task.deferLater(reactor, 0, lambda: None)
        await rs.request_response(Payload(b"sync"))  # every request has been handled
        return {"open": sum(1 for d in held[1:] if not d.called)}

    async def jini_connections() -> dict:
        from rsocket_tx.jini import JiniMuxClient

        sem = defer.DeferredSemaphore(100)

        async def one() -> None:
            c = JiniMuxClient(reactor, f"tcp:host={HOST}:port={port}")
            held.append(c)
            await c.ping()

        results = await defer.DeferredList(
            [sem.run(lambda: defer.ensureDeferred(one())) for _ in range(count)],
            consumeErrors=True)
        return {"open": sum(1 for ok, _ in results if ok)}

    async def jini_sessions() -> dict:
        from rsocket_tx.jini import JiniMuxClient

        c = JiniMuxClient(reactor, f"tcp:host={HOST}:port={port}")
        held.append(c)
        for _ in range(count):
            request = await c.new_request()
            request.write(b"x")  # the session opens; the body never ends
            held.append(request)
        # a Ping round trip on each connection: the server has read every session's Data
        await defer.gatherResults([p.ping() for p in c.protocols])
        open_ = sum(1 for r in held[1:] if r.error is None)
        return {"open": open_, "connections": len(c.protocols)}

    work = {"rs-connections": rs_connections, "rs-streams": rs_streams,
            "rs-requests": rs_requests,
            "jini-connections": jini_connections, "jini-sessions": jini_sessions}[mode]

    async def main() -> None:
        started = time.monotonic()
        try:
            result = await work()
        except Exception as exc:  # reported, not raised: the harness shows it
            result = {"open": 0, "error": f"{type(exc).__name__}: {exc}"}
        result["seconds"] = round(time.monotonic() - started, 3)
        sys.stdout.write("OPEN " + json.dumps(result) + "\n")
        sys.stdout.flush()

    def hold() -> None:
        sys.stdin.read()
        os._exit(0)

    threading.Thread(target=hold, daemon=True).start()
    reactor.callWhenRunning(lambda: defer.ensureDeferred(main()))
    reactor.run()


# ----------------------------------------------------------------------------- harness


class Unavailable(Exception):
    """This server cannot run here (the message says why)."""


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


class Server:
    """One server process; :meth:`rss` is its ``VmRSS`` in bytes after a collection."""

    def __init__(self, name: str, shape: str, args: argparse.Namespace) -> None:
        self.name = name
        self.jvm = name in ("rsocket-java", "river")
        py = [sys.executable, "-m", "benchmarks.memory"]
        if name == "rsocket_tx":
            limit = (max(args.streams + WARMUP, 1024)
                     if shape in ("rsocket-streams", "rsocket-requests") else 0)
            argv = py + ["serve-rsocket_tx", str(limit)]
        elif name == "rsocket_tx-jini":
            argv = py + ["serve-jini"]
        elif name == "rsocket-java":
            from benchmarks.impl_rsocket_java import java_command

            command, problem = java_command()
            if problem:
                raise Unavailable(problem)
            argv = command + ["server"]
        else:
            java = _java()
            if java is None:
                raise Unavailable("no java on PATH")
            if not RIVER_JAR.is_file():
                raise Unavailable("no River peer jar (tests/interop/peers/river/install.sh)")
            argv = [java, *RIVER_JVM_OPTIONS, "-cp", str(RIVER_JAR),
                    "rsocket_tx.interop.river.Server", "--port", "0", "--timeout", "3600",
                    "--watch-stdin"]
        if self.jvm and shutil.which("jcmd") is None:
            raise Unavailable("no jcmd on PATH (to collect the JVM's garbage)")
        self.argv = argv
        self.proc = subprocess.Popen(argv, cwd=REPO, env=child_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     preexec_fn=self._preexec)
        self.port = self._read_port(120.0)

    @staticmethod
    def _preexec() -> None:
        die_with_parent()
        raise_file_limit()

    def _read_port(self, timeout: float) -> int:
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for raw in iter(self.proc.stdout.readline, b""):
                words = raw.decode("utf-8", "replace").split()
                if words[:1] in (["PORT"], ["LISTENING"]) and len(words) == 2:
                    return int(words[1])
                if words[:1] == ["UNAVAILABLE"]:
                    raise Unavailable(" ".join(words[1:]))
        finally:
            timer.cancel()
        raise RuntimeError(f"{self.name} server did not start (exit {self.proc.poll()})")

    def collect(self) -> None:
        if self.jvm:
            subprocess.run(["jcmd", str(self.proc.pid), "GC.run"], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=60, check=False)
            return
        self.proc.stdin.write(b"gc\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line or line.strip() == b"GC":
                return

    def vm_rss(self) -> int:
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
        return 0

    def rss(self, settle: float) -> int:
        time.sleep(settle)
        self.collect()
        time.sleep(0.3)
        return self.vm_rss()

    def stop(self) -> None:
        stop_child(self.proc)


class Client:
    def __init__(self, shape: str, port: int, count: int) -> None:
        argv = [sys.executable, "-m", "benchmarks.memory", "client", CLIENT_MODE[shape],
                str(port), str(count)]
        self.proc = subprocess.Popen(argv, cwd=REPO, env=child_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=Server._preexec)

    def opened(self, timeout: float) -> dict:
        timer = threading.Timer(timeout, self.proc.kill)
        timer.start()
        try:
            for raw in iter(self.proc.stdout.readline, b""):
                if raw.startswith(b"OPEN "):
                    return json.loads(raw[5:])
        finally:
            timer.cancel()
        err = self.proc.stderr.read().decode("utf-8", "replace").strip().splitlines()
        return {"open": 0, "error": f"client exited {self.proc.poll()}: {err[-1:] or ''}"}

    def close(self) -> None:
        stop_child(self.proc, 30)


def measure(server_name: str, shape: str, count: int, args: argparse.Namespace) -> dict:
    row = {"server": server_name, "shape": shape, "count": count, "unit": UNIT[shape]}
    need = count + 200
    if shape.endswith("connections") and args.file_limit < need:
        row["error"] = f"not run: the file limit is {args.file_limit}, {need} needed"
        return row
    try:
        server = Server(server_name, shape, args)
    except Unavailable as exc:
        row["error"] = f"n/a ({exc})"
        return row
    try:
        warm = Client(shape, server.port, min(WARMUP, count))
        warm.opened(60 + count / 50)
        warm.close()
        row["baseline"] = server.rss(1.0)
        started = time.monotonic()
        c = Client(shape, server.port, count)
        opened = c.opened(120 + count / 20)
        row.update(opened)
        row["open_seconds"] = round(time.monotonic() - started, 2)
        row["with"] = server.rss(1.0)
        c.close()
        row["after"] = server.rss(2.0)
        if opened.get("open"):
            row["per_item"] = (row["with"] - row["baseline"]) / opened["open"]
    except Exception as exc:
        row["error"] = f"{type(exc).__name__}: {exc}"
    finally:
        server.stop()
    return row


def kib(n: float | None) -> str:
    return "-" if n is None else f"{n / 1024:,.1f}"


def mib(n: float | None) -> str:
    return "-" if n is None else f"{n / (1024 * 1024):,.1f}"


def add_net(rows: list[dict]) -> None:
    """``net`` per Jini session: the sessions' connections' share subtracted."""
    per_conn = {r["server"]: r.get("per_item") for r in rows if r["shape"] == "jini-connections"}
    for r in rows:
        if r["shape"] == "jini-sessions" and r.get("per_item") is not None:
            pc = per_conn.get(r["server"])
            if pc is not None and r.get("open"):
                r["net_per_item"] = ((r["with"] - r["baseline"]) - pc * r.get("connections", 0)
                                     ) / r["open"]


def render(rows: list[dict]) -> str:
    header = ("shape", "server", "open", "baseline MiB", "with MiB", "after MiB",
              "per item KiB", "net KiB")
    lines = []
    for r in rows:
        if "error" in r and r.get("per_item") is None:
            lines.append((r["shape"], r["server"], f"{r['count']:,}", r["error"], "", "", "",
                          ""))
            continue
        what = f"{r.get('open', 0):,} {r['unit']}s"
        if r.get("connections"):
            what += f" / {r['connections']} conns"
        lines.append((r["shape"], r["server"], what, mib(r.get("baseline")),
                      mib(r.get("with")), mib(r.get("after")), kib(r.get("per_item")),
                      kib(r.get("net_per_item"))))
    widths = [max(len(str(x)) for x in col) for col in zip(header, *lines)]
    out = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths)),
           "  ".join("-" * w for w in widths)]
    out += ["  ".join(str(x).ljust(w) for x, w in zip(line, widths)) for line in lines]
    return "\n".join(out)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.memory",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--servers", default=",".join(SERVERS),
                   help="comma-separated: " + ", ".join(SERVERS))
    p.add_argument("--shapes", default=",".join(SHAPES), help="comma-separated: "
                   + ", ".join(SHAPES))
    p.add_argument("--connections", type=int, default=1000)
    p.add_argument("--streams", type=int, default=10_000)
    p.add_argument("--sessions", type=int, default=1000)
    p.add_argument("--json", metavar="FILE", help="save every number")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve-rsocket_tx"]:
        serve_rsocket_tx(int(argv[1]) or 1024)
        return 0
    if argv[:1] == ["serve-jini"]:
        serve_jini()
        return 0
    if argv[:1] == ["client"]:
        client(argv[1], int(argv[2]), int(argv[3]))
        return 0
    args = parse_args(argv)
    args.file_limit = raise_file_limit()
    shapes = [s for s in args.shapes.split(",") if s]
    servers = [s for s in args.servers.split(",") if s]
    for name in [*shapes, *servers]:
        if name not in SHAPES and name not in SERVERS:
            sys.exit(f"unknown shape or server: {name}")
    counts = {"rsocket-connections": args.connections, "rsocket-streams": args.streams,
              "rsocket-requests": args.streams,
              "jini-connections": args.connections, "jini-sessions": args.sessions}
    started = time.time()
    rows = []
    for shape in shapes:
        for server in servers:
            if shape not in SERVERS[server]:
                continue
            sys.stderr.write(f"memory: {shape} on {server} ...\n")
            row = measure(server, shape, counts[shape], args)
            sys.stderr.write(f"memory:   {json.dumps(row)}\n")
            rows.append(row)
    add_net(rows)
    table = render(rows)
    print(table)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    print(f"\n({stamp}, {time.time() - started:.0f} s, {os.cpu_count()} CPUs, load "
          f"{os.getloadavg()[0]:.1f}; python {platform.python_version()}; per item = (with - "
          f"baseline) / open; net = per session less its connections' share)")
    if args.json:
        Path(args.json).write_text(json.dumps({"started": stamp, "rows": rows, "table": table},
                                              indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
