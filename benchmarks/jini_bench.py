"""The Jini ERI mux benchmark: rsocket_tx's Jini mux against itself and against Apache River
2.2.3, both ways, in one run.

Servers (one process each for the whole run, on 127.0.0.1): **rsocket_tx**
(``rsocket_tx.jini.serve`` with the defaults and a dispatcher that awaits ``read_all()`` and
writes the body back) and **River** (the interop peer's ``Server``: River's
``TcpServerEndpoint`` with a dispatcher that reads the request body to eof and writes it back,
``tests/interop/peers/river``). Both echo only once the body is complete: River's client
writes the whole body before it reads, so a streaming echo would stall on a 10 MiB body.
Clients (a fresh process per measured run): **rsocket_tx**
(:class:`~rsocket_tx.jini.JiniMuxClient`, coroutines awaiting ``request(body)``) and **River**
(``benchmarks/jini/JiniBench.java``: ``TcpEndpoint.newRequest(...).next()``, write the body,
close it, read the response to eof; one thread per request in flight, as River's API works).
Each client runs against each server: rsocket_tx→rsocket_tx, rsocket_tx→River,
River→rsocket_tx, River→River; and rsocket_tx→rsocket_tx once more with River's default
ration (``tx-tx:river``: both rsocket_tx ends announce River's 32 KiB,
``JiniMuxConfig(initial_ration=RIVER_INITIAL_RATION)``, instead of our 128 KiB; the
fragment size stays ours, 16 KiB). For scale, the same run measures **raw Twisted** on the
round trips (``raw``: ``benchmarks.impl_raw``'s 4-byte-header echo over TCP, no mux, no
sessions, the yardstick of ``benchmarks.run``): what CPython and Twisted cost for a round
trip before any protocol work.

Workloads (every request's body is echoed whole; a request is one session):

``rr-1``
    request/response round trips of 64 bytes, one at a time (``--count`` 20,000) [req/s];
``rr-100``
    the same with 100 in flight (200,000) [req/s];
``transfer``
    10 MiB bodies echoed, one at a time (``--transfers`` 30) [MiB/s of body, each way].

Every measured run has a time budget (``--budget``, 3 s): the rate covers what was done (a
``*`` marks such cells). Each cell is the best of ``--repeat`` (3) runs, the pairs taking
turns. The River client first runs the workload for ``--jvm-warmup`` seconds (2: the JIT),
and the River server is warmed by the first runs against it. Run from the repository root::

    .venv/bin/python -m benchmarks.jini_bench                 # about 4 minutes
    .venv/bin/python -m benchmarks.jini_bench --quick --json jini.json

It needs the River peer (``tests/interop/peers/river/install.sh``: Maven fetches River's jar)
and a JDK 17 (``javac`` compiles ``JiniBench.java`` against that jar into
``benchmarks/jini/target/``); without them the River cells read ``n/a``. Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
HERE = Path(__file__).resolve().parent / "jini"
SOURCE = HERE / "JiniBench.java"
CLASSES = HERE / "target" / "classes"
RIVER_DIR = REPO / "tests" / "interop" / "peers" / "river"
RIVER_JAR = RIVER_DIR / "target" / "river-peer.jar"
RIVER_PATCH = RIVER_DIR / "target" / "patch"
#: River on Java 17: the ActivationID stand-in the interop install builds, and a heap for
#: 10 MiB bodies; otherwise the JVM's defaults (C2, G1)
RIVER_JVM_OPTIONS = ("-Xmx1g", f"--patch-module=java.rmi={RIVER_PATCH}",
                     "--add-exports=java.rmi/java.rmi.activation=ALL-UNNAMED")
WORKLOADS = ("rr-1", "rr-100", "transfer")
LABELS = {"rr-1": "round trips, 1 in flight, 64 B [req/s]",
          "rr-100": "round trips, 100 in flight, 64 B [req/s]",
          "transfer": "10 MiB echoed, 1 at a time [MiB/s]"}
SIZES = {"rr-1": 64, "rr-100": 64, "transfer": 10 * 1024 * 1024}
#: (client, server, ration of the rsocket_tx ends: "ours" = JiniMuxConfig's default 128 KiB,
#: "river" = River's 32 KiB)
PAIRS = (("rsocket_tx", "rsocket_tx", "ours"), ("rsocket_tx", "rsocket_tx", "river"),
         ("rsocket_tx", "river", "ours"), ("river", "rsocket_tx", "ours"),
         ("river", "river", "ours"), ("raw", "raw", "ours"))
DEFAULT_PAIRS = "tx-tx,tx-tx:river,tx-River,River-tx,River-River,raw"
#: the raw echo's transfer cell (it echoes 64-byte frames only)
RAW_NA = "n/a (round trips only)"
RATIONS = ("ours", "river")
MiB = 1024 * 1024


def die_with_parent() -> None:
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def child_env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    return env


# ----------------------------------------------------------------------------- our children


def config_for(ration: str):
    """The :class:`~rsocket_tx.jini.config.JiniMuxConfig` of an rsocket_tx end: the defaults
    (``"ours"``), or with River's initial ration (``"river"``)."""
    from rsocket_tx.jini.config import RIVER_INITIAL_RATION, JiniMuxConfig

    if ration == "river":
        return JiniMuxConfig(initial_ration=RIVER_INITIAL_RATION)
    return JiniMuxConfig()


def serve(ration: str = "ours") -> None:
    """rsocket_tx's Jini mux server with the echo dispatcher; ``PORT n``; exits at stdin EOF."""
    from twisted.internet import reactor

    from rsocket_tx.jini import Dispatcher
    from rsocket_tx.jini import serve as jini_serve

    class ReadAllEcho(Dispatcher):
        """River's echo: the whole body, then the response (a River client writes its whole
        body before it reads: a streaming echo would wait for it on a 10 MiB body)."""

        async def dispatch(self, request):
            body = await request.read_all()
            request.response.write(body)

    d = jini_serve(reactor, f"tcp:port=0:interface={HOST}", ReadAllEcho,
                   config=config_for(ration))
    d.addCallback(lambda port: print(f"PORT {port.getHost().port}", flush=True))
    d.addErrback(lambda f: (sys.stderr.write(f.getTraceback()), reactor.stop()))

    def watch() -> None:
        sys.stdin.read()
        reactor.callFromThread(reactor.stop)

    threading.Thread(target=watch, daemon=True).start()
    reactor.run()


def client(port: int, kind: str, count: int, size: int, budget: float,
           ration: str = "ours") -> None:
    """rsocket_tx's Jini mux client: ``RESULT {json}``."""
    from twisted.internet import defer, reactor

    from rsocket_tx.jini import JiniMuxClient

    body = bytes(i % 256 for i in range(min(size, 256))) * (size // 256 or 1)
    body = body[:size].ljust(size, b"x")

    async def run(c, n: int, seconds: float) -> dict:
        deadline = time.monotonic() + seconds
        state = {"issued": 0, "ops": 0, "nbytes": 0}

        async def worker() -> None:
            while state["issued"] < n and time.monotonic() < deadline:
                state["issued"] += 1
                answer = await c.request(body)
                if len(answer) != size:
                    raise RuntimeError(f"echo of {size} bytes returned {len(answer)}")
                state["ops"] += 1
                state["nbytes"] += len(answer)

        started = time.perf_counter()
        cpu = time.process_time()
        workers = 100 if kind == "rr-100" else 1
        await defer.gatherResults([defer.ensureDeferred(worker()) for _ in range(workers)],
                                  consumeErrors=True)
        state["seconds"] = time.perf_counter() - started
        state["client_cpu"] = time.process_time() - cpu
        return state

    async def main() -> None:
        c = JiniMuxClient(reactor, f"tcp:host={HOST}:port={port}", config_for(ration))
        try:
            warm = await run(c, max(count // 20, 2), 1.0)  # warm-up, not reported
            result = await run(c, count, budget)
            result.pop("issued")
            result["warmup_ops"] = warm["ops"]
        except Exception as exc:
            result = {"error": f"{type(exc).__name__}: {exc}"}
        print("RESULT " + json.dumps(result), flush=True)
        reactor.stop()

    reactor.callWhenRunning(lambda: defer.ensureDeferred(main()))
    reactor.run()


# ----------------------------------------------------------------------------- harness


def java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def river_problem() -> str | None:
    """Why the River side cannot run here, or None (compiles JiniBench.java when needed)."""
    if java() is None:
        return "no java on PATH (Java 17)"
    if not RIVER_JAR.is_file():
        return "no River peer jar (run tests/interop/peers/river/install.sh)"
    target = CLASSES / "jinibench" / "JiniBench.class"
    if not target.is_file() or target.stat().st_mtime < SOURCE.stat().st_mtime:
        javac = shutil.which("javac")
        if javac is None:
            return "no javac on PATH (JDK 17) to compile benchmarks/jini/JiniBench.java"
        CLASSES.mkdir(parents=True, exist_ok=True)
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", str(RIVER_JAR),
                               "-d", str(CLASSES), str(SOURCE)], capture_output=True, text=True)
        if done.returncode:
            return "javac failed: " + done.stderr.strip()[-300:]
    return None


def river_argv(main: str) -> list[str]:
    return [java(), *RIVER_JVM_OPTIONS, "-cp", f"{RIVER_JAR}{os.pathsep}{CLASSES}", main]


class Server:
    def __init__(self, name: str, ration: str = "ours") -> None:
        self.name = name
        if name == "raw":
            argv = [sys.executable, "-m", "benchmarks.impl_raw", "server"]
        elif name == "rsocket_tx":
            argv = [sys.executable, "-m", "benchmarks.jini_bench", "serve", ration]
        else:
            argv = river_argv("rsocket_tx.interop.river.Server") + [
                "--port", "0", "--timeout", "3600", "--watch-stdin"]
        self.proc = subprocess.Popen(argv, cwd=REPO, env=child_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     preexec_fn=die_with_parent)
        timer = threading.Timer(120, self.proc.kill)
        timer.start()
        self.port = None
        try:
            for raw in iter(self.proc.stdout.readline, b""):
                words = raw.split()
                if words[:1] in ([b"PORT"], [b"LISTENING"]) and len(words) == 2:
                    self.port = int(words[1])
                    break
        finally:
            timer.cancel()
        if self.port is None:
            raise RuntimeError(f"{name} server did not start")
        # River's server prints JSON events: drain them so that it never blocks
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    def cpu(self) -> float | None:
        """CPU seconds the server process has used (Linux ``/proc``), or None."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, ValueError, IndexError):
            return None

    def stop(self) -> None:
        stop_child(self.proc)


def run_raw_client(port: int, kind: str, count: int, args: argparse.Namespace) -> dict:
    """``benchmarks.impl_raw``'s echo client (its stdin must stay open while it runs)."""
    from benchmarks.common import Spec

    spec = Spec(name=kind, kind="rr", count=count, size=SIZES[kind],
                inflight=100 if kind == "rr-100" else 1, budget=args.budget,
                warmup=max(count // 20, 2), repeat=1)
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks.impl_raw", "client", str(port),
                             spec.to_json()], cwd=REPO, env=child_env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=die_with_parent)
    timer = threading.Timer(60 + 10 * args.budget, proc.kill)
    timer.start()
    try:
        for line in proc.stdout:
            if line.startswith("RESULT "):
                body = json.loads(line[7:])
                if not body.get("ok"):
                    return {"error": body.get("error", "?")}
                run = body["runs"][0]
                return {"ops": run["ops"], "nbytes": run["nbytes"], "seconds": run["seconds"]}
        return {"error": "timeout" if proc.poll() == -signal.SIGKILL else "no result"}
    finally:
        timer.cancel()
        stop_child(proc)


def run_client(name: str, port: int, kind: str, args: argparse.Namespace,
               ration: str = "ours") -> dict:
    count = {"rr-1": args.count, "rr-100": args.count * 10, "transfer": args.transfers}[kind]
    if name == "raw":
        result = run_raw_client(port, kind, count, args) if kind != "transfer" else {
            "error": RAW_NA}
        return finish_result(result, kind, count)
    if name == "rsocket_tx":
        argv = [sys.executable, "-m", "benchmarks.jini_bench", "client", str(port), kind,
                str(count), str(SIZES[kind]), str(args.budget), ration]
    else:
        argv = river_argv("jinibench.JiniBench") + [
            str(port), kind, str(count), str(SIZES[kind]), str(args.budget),
            str(args.jvm_warmup)]
    try:
        done = subprocess.run(argv, cwd=REPO, env=child_env(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, preexec_fn=die_with_parent,
                              timeout=60 + 10 * args.budget + args.jvm_warmup)
    except subprocess.TimeoutExpired:
        return {"error": "timeout"}
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            return finish_result(json.loads(line[7:]), kind, count)
    tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return {"error": f"exit {done.returncode}: {tail[:200]}"}


def finish_result(result: dict, kind: str, count: int) -> dict:
    """A client's result with ``complete`` and ``rate`` (req/s; MiB/s for transfers)."""
    if "ops" in result:
        result["complete"] = result["ops"] >= count
        unit = MiB if kind == "transfer" else 1
        amount = result["nbytes"] / unit if kind == "transfer" else result["ops"]
        result["rate"] = amount / result["seconds"] if result["seconds"] else 0.0
    return result


def cell_text(best: dict | None) -> str:
    if best is None:
        return "-"
    if "error" in best:
        return best["error"] if best["error"].startswith("n/a") else "error"
    text = f"{best['rate']:,.0f}" if best["rate"] >= 100 else f"{best['rate']:,.1f}"
    return text + ("" if best.get("complete") else "*")


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """A text table: the first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(h.rjust(w) if i else h.ljust(w) for i, (h, w) in
                       enumerate(zip(header, widths)))]
    lines.append("  ".join("-" * w for w in widths))
    for r in rows:
        lines.append("  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                               enumerate(zip(r, widths))))
    return "\n".join(lines)


def label(pair: tuple[str, str, str]) -> str:
    """``tx→River``; ``tx→tx (River ration)`` for the River-ration variant."""
    if pair[0] == "raw":
        return "raw Twisted echo"
    names = {"rsocket_tx": "tx", "river": "River"}
    text = names[pair[0]] + "→" + names[pair[1]]
    return text + (" (River ration)" if pair[2] == "river" else "")


def render(results: dict, workloads: list[str], pairs: list[tuple[str, str, str]]) -> str:
    ours_pairs = [p for p in pairs if p[:2] == ("rsocket_tx", "rsocket_tx")]
    header = ["workload", *(label(p) for p in pairs),
              *(f"{label(p)} / River→River" for p in ours_pairs)]
    rows = []
    for kind in workloads:
        cells = [cell_text(results[kind].get(p)) for p in pairs]
        theirs = results[kind].get(("river", "river", "ours"))
        ratios = []
        for pair in ours_pairs:
            ours = results[kind].get(pair)
            ratio = "-"
            if ours and theirs and "rate" in ours and "rate" in theirs and theirs["rate"]:
                ratio = f"{ours['rate'] / theirs['rate']:.2f}x"
            ratios.append(ratio)
        rows.append([LABELS[kind], *cells, *ratios])
    return format_table(header, rows)


def render_cpu(runs: list[dict], workloads: list[str],
               pairs: list[tuple[str, str, str]]) -> str:
    """CPU per operation, client + server in µs (per MiB echoed for ``transfer``): the median
    over a cell's runs. Unlike the rates, these hardly move with the other load on the
    machine (a process is charged only while it runs)."""
    import statistics

    header = ["CPU per op, client + server [µs]", *(label(p) for p in pairs)]
    rows = []
    for kind in workloads:
        cells = []
        for pair in pairs:
            per = [r["cpu_us_per_op"] for r in runs
                   if r["workload"] == kind and (r["client"], r["server"], r["ration"]) == pair
                   and r.get("cpu_us_per_op") and r["cpu_us_per_op"]["client"] is not None]
            if not per:
                cells.append("-")
                continue
            client = statistics.median(p["client"] for p in per)
            server = statistics.median(p["server"] for p in per)
            cells.append(f"{client:,.0f} + {server:,.0f}")
        rows.append([LABELS[kind].replace(" [req/s]", " [per op]").replace(
            " [MiB/s]", " [per MiB]"), *cells])
    return format_table(header, rows)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.jini_bench",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--workloads", default=",".join(WORKLOADS))
    p.add_argument("--pairs", default=DEFAULT_PAIRS,
                   help="client-server pairs to run (tx, River), a pair with ':river' runs "
                   "the rsocket_tx ends with River's initial ration; raw: raw Twisted's echo "
                   "(round trips only) (default %(default)s)")
    p.add_argument("--count", type=int, default=20_000,
                   help="round trips of rr-1 (rr-100: 10 times as many)")
    p.add_argument("--transfers", type=int, default=30, help="10 MiB transfers per run")
    p.add_argument("--budget", type=float, default=3.0, help="seconds per measured run")
    p.add_argument("--repeat", type=int, default=3, help="runs per cell, best shown")
    p.add_argument("--jvm-warmup", type=float, default=2.0, help="River client warm-up, s")
    p.add_argument("--quick", action="store_true", help="budget 1 s, 2 runs per cell")
    p.add_argument("--json", metavar="FILE")
    args = p.parse_args(argv)
    if args.quick:
        args.budget, args.repeat = 1.0, 2
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        serve(*argv[1:2])
        return 0
    if argv[:1] == ["client"]:
        client(int(argv[1]), argv[2], int(argv[3]), int(argv[4]), float(argv[5]), *argv[6:7])
        return 0
    args = parse_args(argv)
    workloads = [w for w in args.workloads.split(",") if w]
    names = {"tx": "rsocket_tx", "river": "river"}
    pairs = []
    for text in (p.strip() for p in args.pairs.split(",")):
        if not text:
            continue
        if text.lower() == "raw":
            pairs.append(("raw", "raw", "ours"))
            continue
        who, _, ration = text.partition(":")
        ration = ration.lower() or "ours"
        client_name, _, server_name = who.partition("-")
        if client_name.lower() not in names or server_name.lower() not in names \
                or ration not in RATIONS:
            raise SystemExit(f"bad pair {text!r}: write CLIENT-SERVER[:river] with tx or River "
                             f"(e.g. tx-tx:river), or raw")
        pairs.append((names[client_name.lower()], names[server_name.lower()], ration))
    started = time.time()
    problem = river_problem()
    servers: dict[tuple[str, str], Server] = {}
    notes = []
    try:
        for ration in RATIONS:
            if any(server == "rsocket_tx" and r == ration for _, server, r in pairs):
                servers["rsocket_tx", ration] = Server("rsocket_tx", ration)
        if ("raw", "raw", "ours") in pairs:
            servers["raw", "ours"] = Server("raw")
        if problem is not None:
            notes.append(f"River: n/a ({problem})")
        elif any(server == "river" for _, server, _ in pairs):
            servers["river", "ours"] = Server("river")
        results: dict = {kind: {} for kind in workloads}
        runs: list = []
        for kind in workloads:
            for rep in range(args.repeat):
                order = pairs[rep % len(pairs):] + pairs[:rep % len(pairs)]
                for pair in order:
                    client_name, server_name, ration = pair
                    if kind == "transfer" and client_name == "raw":
                        results[kind][pair] = {"error": RAW_NA}
                        continue
                    if "river" in pair[:2] and problem is not None:
                        results[kind][pair] = {"error": f"n/a ({problem})"}
                        continue
                    server = servers[server_name, ration]
                    cpu_before = server.cpu()
                    result = run_client(client_name, server.port, kind, args, ration)
                    cpu_after = server.cpu()
                    if cpu_before is not None and cpu_after is not None:
                        # (the client's warm-up included)
                        result["server_cpu"] = round(cpu_after - cpu_before, 3)
                        served = result.get("ops", 0) + result.get("warmup_ops", 0)
                        if served and "client_cpu" in result:
                            # CPU per operation: the client's over the measured run, the
                            # server's over the warm-up and the measured run
                            unit = SIZES[kind] / MiB if kind == "transfer" else 1
                            result["cpu_us_per_op"] = {
                                "client": round(result["client_cpu"] / result["ops"] / unit
                                                * 1e6, 1) if result["ops"] else None,
                                "server": round(result["server_cpu"] / served / unit * 1e6, 1)}
                    runs.append({"workload": kind, "client": client_name,
                                 "server": server_name, "ration": ration, **result})
                    sys.stderr.write(f"jini_bench: {kind} {label(pair)}: "
                                     f"{json.dumps(result)}\n")
                    best = results[kind].get(pair)
                    if "rate" in result and (best is None or "rate" not in best
                                             or result["rate"] > best["rate"]):
                        results[kind][pair] = result
                    elif best is None:
                        results[kind][pair] = result
    finally:
        for server in servers.values():
            server.stop()
    table = render(results, workloads, pairs)
    print(table)
    cpu_table = render_cpu(runs, workloads, pairs)
    print()
    print(cpu_table)
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started))
    print(f"\n({stamp}, {time.time() - started:.0f} s, best of {args.repeat}, budget "
          f"{args.budget:g} s, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; python "
          f"{platform.python_version()}; client→server; *: the budget ended the run)")
    for note in notes:
        print(note)
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"started": stamp, "table": table, "cpu_table": cpu_table, "runs": runs,
             "best": {k: {f"{c}->{s}" + (":river" if ration == "river" else ""): v
                          for (c, s, ration), v in r.items()}
                      for k, r in results.items()}}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
