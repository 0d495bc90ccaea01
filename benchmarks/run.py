"""Benchmark rsocket_tx against raw Twisted, rsocket-py and rsocket-java; see
benchmarks/README.md.

Run from the repository root::

    .venv/bin/python -m benchmarks.run [--quick]
                                       [--only raw,rsocket-py,rsocket_tx,rsocket-java,tx-java]
                                       [--workloads rr-seq,rr-100,stream-64,stream-1m,fnf]
                                       [--transports tcp,tls,ws,wss] [--json FILE]

Each (server implementation, transport) server runs in its own subprocess; every
(implementation, transport, workload) triple runs its client in a fresh subprocess with a fresh
connection. The ``rsocket_tx→java`` column is rsocket_tx's client against the rsocket-java
server (the same server process as the ``rsocket-java`` column).
Children are killed when they overrun their deadline, so the run always ends by itself.
Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import selectors
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

if __package__ in (None, ""):  # executed as a file: python benchmarks/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import impl_rsnet
from benchmarks.common import TRANSPORTS, Spec, make_tls_files, stop_child

REPO = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024


@dataclass(frozen=True)
class Impl:
    """A table column: ``module``'s client against ``server_module``'s server (default: the
    same module). ``key`` names the column in ``--only``, the JSON and the log files."""

    key: str
    title: str
    module: str
    server_module: str = ""
    #: workload kind -> (short cell text, why): workloads the protocol has no interaction
    #: for; their cells read ``n/a (short)`` and no client runs
    not_applicable: tuple = ()

    @property
    def server(self) -> str:
        """The module whose ``server`` mode this column's clients connect to."""
        return self.server_module or self.module


IMPLS = [
    Impl("raw", "raw twisted", "benchmarks.impl_raw"),
    Impl("rsocket-py", "rsocket-py", "benchmarks.impl_rsocket_py"),
    Impl("rsocket_tx", "rsocket_tx", "benchmarks.impl_rsocket_tx"),
    Impl("rsocket-java", "rsocket-java", "benchmarks.impl_rsocket_java"),
    Impl("tx-java", "rsocket_tx→java", "benchmarks.impl_rsocket_tx",
         server_module="benchmarks.impl_rsocket_java"),
    Impl("rsnet", "RS-network", "benchmarks.impl_rsnet",
         not_applicable=tuple(impl_rsnet.NOT_APPLICABLE.items())),
    Impl("rs2015", "2015 draft", "benchmarks.impl_rs2015"),
]
#: the columns that run rsocket_tx's code (their build is printed under the table)
TX_COLUMNS = ("rsocket_tx", "tx-java", "rsnet", "rs2015")
ALIASES = {"raw": "raw", "twisted": "raw", "raw-twisted": "raw", "py": "rsocket-py",
           "rsocket-py": "rsocket-py", "rsocket_py": "rsocket-py", "tx": "rsocket_tx",
           "rsocket_tx": "rsocket_tx", "rsocket-tx": "rsocket_tx", "java": "rsocket-java",
           "rsocket-java": "rsocket-java", "rsocket_java": "rsocket-java", "tx-java": "tx-java",
           "tx->java": "tx-java", "tx→java": "tx-java", "rsocket_tx->java": "tx-java",
           "rsocket_tx→java": "tx-java", "rsnet": "rsnet", "rs-network": "rsnet",
           "rs2015": "rs2015", "2015": "rs2015", "reactivesocket": "rs2015"}
#: Start of an UNAVAILABLE reason (or client error) meaning "cannot run on this machine": the
#: cells read "n/a (...)" instead of "error".
NOT_AVAILABLE = ("rsocket_tx not importable", "not available")


@dataclass(frozen=True)
class Workload:
    key: str
    label: str
    kind: str
    count: int
    quick_count: int
    size: int
    warmup: int
    quick_warmup: int
    inflight: int = 1
    prefetch: int = 256
    metric: str = "ops"  # "ops" -> ops/s is the compared number, "mb" -> MB/s
    unit: str = "req/s"
    show_mb: bool = False
    target_raw: float | None = None  # rsocket_tx / raw twisted must be >= this
    target_py: float = 5.0  # rsocket_tx / rsocket-py must be >= this


#: the targets are issue 14's (ratios to raw Twisted in the same run, over TCP)
WORKLOADS = [
    Workload("rr-seq", "req-resp sequential, 64 B", "rr", 20_000, 5_000, 64, 500, 200,
             inflight=1, unit="req/s", target_raw=0.85),
    Workload("rr-100", "req-resp 100 in flight, 64 B", "rr", 200_000, 50_000, 64, 5_000, 1_000,
             inflight=100, unit="req/s", target_raw=0.5),
    Workload("stream-64", "request-stream 64 B items", "stream", 200_000, 100_000, 64, 5_000,
             1_000, prefetch=256, unit="items/s", show_mb=True, target_raw=0.5),
    Workload("stream-1m", "request-stream 1 MiB items", "stream", 500, 100, MiB, 10, 4,
             prefetch=16, metric="mb", unit="MB/s", target_raw=0.9),
    Workload("fnf", "fire-and-forget 64 B", "fnf", 200_000, 100_000, 64, 5_000, 1_000,
             unit="msgs/s", target_raw=0.5),
]


# ----------------------------------------------------------------------------- children


def child_env(args, kind: str = "tcp") -> dict:
    env = dict(os.environ)
    env["BENCH_TRANSPORT"] = kind
    if args.tls_files:
        env["BENCH_TLS_CERT"], env["BENCH_TLS_KEY"] = args.tls_files
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    env["BENCH_PY_READ_BUFFER"] = str(args.py_read_buffer)
    server_cpus, client_cpus = pinning(args.pin)
    env["BENCH_CPUS_SERVER"] = server_cpus
    env["BENCH_CPUS_CLIENT"] = client_cpus
    env.setdefault("PYTHONHASHSEED", "0")
    return env


def pinning(mode: str) -> tuple[str, str]:
    """CPU lists (server, client) for ``--pin``: same, split or none."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return "", ""
    if mode == "same" and cpus:
        return str(cpus[0]), str(cpus[0])
    if mode == "split" and len(cpus) >= 2:
        return str(cpus[0]), str(cpus[1])
    return "", ""


class Child:
    """A child process with stdin kept open (it exits when stdin closes) and line-read stdout."""

    def __init__(self, argv: list[str], env: dict, log_name: str, log_dir: Path) -> None:
        self.log_path = log_dir / log_name
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.proc = subprocess.Popen(argv, cwd=REPO, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log)
        self._sel = selectors.DefaultSelector()
        self._sel.register(self.proc.stdout, selectors.EVENT_READ)
        self._pending = b""

    def read_line(self, prefixes: tuple[str, ...], timeout: float) -> str | None:
        """The first stdout line starting with one of ``prefixes``; None on EOF/timeout."""
        end = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while True:
            while b"\n" in self._pending:
                line, self._pending = self._pending.split(b"\n", 1)
                text = line.decode("utf-8", "replace").strip()
                if text.startswith(prefixes):
                    return text
            left = end - time.monotonic()
            if left <= 0 or not self._sel.select(left):
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self._pending += chunk

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, grace: float = 3.0) -> None:
        stop_child(self.proc, grace)
        self._sel.close()
        self.proc.stdout.close()
        self._log.close()

    def stderr_tail(self, n: int = 6) -> str:
        try:
            lines = self.log_path.read_text("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return "\n".join(lines[-n:])


def start_server(impl: Impl, kind: str, args,
                 log_dir: Path) -> tuple[Child | None, int | None, str | None]:
    """Start ``impl``'s server for ``kind``: (child, port, None) or (None, None, problem)."""
    name = impl.server.rsplit(".", 1)[-1]
    child = Child([sys.executable, "-m", impl.server, "server"], child_env(args, kind),
                  f"{name}-{kind}-server.log", log_dir)
    line = child.read_line(("PORT ", "UNAVAILABLE "), args.server_timeout)
    if line and line.startswith("PORT "):
        return child, int(line.split()[1]), None
    tail = child.stderr_tail()
    child.stop(grace=1.0)
    if line:
        reason = line[len("UNAVAILABLE "):]
        # "not importable"/"not available" is n/a; anything else (serve() failed) is a bug
        # worth an "error"
        return None, None, ("n/a" if reason.startswith(NOT_AVAILABLE) else "error") + f" ({reason})"
    return None, None, "error (server did not report a port" + (f": {tail.splitlines()[-1]}"
                                                                if tail else "") + ")"


def run_client(impl: Impl, kind: str, port: int, spec: Spec, args, log_dir: Path,
               rep: int = 0) -> dict:
    timeout = args.client_timeout or (20 + (spec.repeat + 1) * spec.budget * 3)
    child = Child([sys.executable, "-m", impl.module, "client", str(port), spec.to_json()],
                  child_env(args, kind), f"{impl.key}-{kind}-{spec.name}-{rep}-client.log",
                  log_dir)
    started = time.monotonic()
    line = child.read_line(("RESULT ",), timeout)
    wall = time.monotonic() - started
    child.stop(grace=3.0)
    if line is None:
        tail = child.stderr_tail()
        if wall >= timeout - 0.5:
            return {"status": "timeout", "detail": f"no result within {timeout:.0f} s",
                    "stderr": tail}
        return {"status": "error", "detail": "client exited without a result", "stderr": tail}
    body = json.loads(line[len("RESULT "):])
    if not body.get("ok"):
        detail = body.get("error", "?")
        if detail.startswith(NOT_AVAILABLE):
            return {"status": "n/a", "detail": detail}
        return {"status": "error", "detail": detail, "stderr": child.stderr_tail()}
    runs = body["runs"]
    for r in runs:
        secs = max(r["seconds"], 1e-9)
        r["ops_per_s"] = r["ops"] / secs
        r["mb_per_s"] = r["nbytes"] / secs / 1e6
    if not runs or all(r["ops"] == 0 for r in runs):
        return {"status": "error", "detail": "no operation completed", "runs": runs}
    best = max(runs, key=lambda r: r["ops_per_s"])
    return {"status": "ok", "best": best, "runs": runs}


def merge(attempts: list[dict]) -> dict:
    """One cell from the attempts of one implementation: the best of its successful runs."""
    runs = [r for a in attempts if a["status"] == "ok" for r in a["runs"]]
    if not runs:
        return dict(attempts[0]) if attempts else {"status": "error", "detail": "not run"}
    out = {"status": "ok", "best": max(runs, key=lambda r: r["ops_per_s"]), "runs": runs}
    failed = [a for a in attempts if a["status"] != "ok"]
    if failed:
        out["failed_attempts"] = failed
    return out


# ----------------------------------------------------------------------------- table


def fmt_num(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def metric(wl: Workload, res: dict | None) -> float | None:
    if not res or res.get("status") != "ok":
        return None
    return res["best"]["mb_per_s" if wl.metric == "mb" else "ops_per_s"]


def cell(wl: Workload, res: dict | None, width: int = 60) -> str:
    if res is None:
        return "-"
    status = res["status"]
    if status != "ok":
        if status == "n/a":
            detail = res["detail"]
            if not detail.startswith("n/a"):
                detail = f"n/a ({detail})"
            return detail if len(detail) <= width else detail[: width - 4] + "...)"
        return status
    best = res["best"]
    text = fmt_num(metric(wl, res))
    if wl.show_mb:
        text += f" ({best['mb_per_s']:.1f} MB/s)"
    if not best["complete"]:
        text += "*"
    return text


def ratio_text(a: float | None, b: float | None) -> str:
    if a is None or b is None or b <= 0:
        return "-"
    return f"{a / b:.2f}x"


def target_texts(wl: Workload, tx: float | None, raw: float | None,
                 py: float | None) -> tuple[str, str]:
    parts = []
    met = []
    if wl.target_raw is not None:
        parts.append(f">={wl.target_raw:g}x raw")
        if tx is not None and raw:
            met.append("raw " + ("yes" if tx / raw >= wl.target_raw else "NO"))
        else:
            met.append("raw -")
    parts.append(f">={wl.target_py:g}x py")
    if tx is not None and py:
        met.append("py " + ("yes" if tx / py >= wl.target_py else "NO"))
    else:
        met.append("py -")
    return ", ".join(parts), ", ".join(met)


def render_table(workloads: list[Workload], results: dict, transports: list[str],
                 impls: list[Impl] | None = None) -> str:
    """One table per transport (a title line ``transport: KIND``, then one row per workload);
    ``results[workload][transport][impl key]``.

    Columns: the implementations in ``IMPLS`` order (``impls``: those run), then rsocket_tx's
    number divided by raw twisted's, rsocket-py's, rsocket-java's (each against its own
    server) and by its own TCP number, RS-network's and the 2015 draft's divided by
    rsocket_tx's (RSocket 1.0), then the targets."""
    impls = impls or IMPLS
    tables = []
    for kind in transports:
        header = [f"workload [unit] ({kind})", *(i.title for i in impls), "tx/raw", "tx/py",
                  "tx/java", "tx/tx-tcp", "rsnet/tx", "2015/tx", "target", "met"]
        first_text = header.index("target")  # numbers are right-aligned before this column
        rows = [header]
        for wl in workloads:
            per = results.get(wl.key, {})
            tx_tcp = metric(wl, per.get("tcp", {}).get("rsocket_tx"))
            r = per.get(kind, {})
            raw, py, tx, java, rsnet, rs2015 = (
                metric(wl, r.get(k))
                for k in ("raw", "rsocket-py", "rsocket_tx", "rsocket-java", "rsnet", "rs2015"))
            target, met = target_texts(wl, tx, raw, py)
            unit = wl.unit + (" (MB/s)" if wl.show_mb else "")
            rows.append([f"{wl.label} [{unit}]", *(cell(wl, r.get(i.key)) for i in impls),
                         ratio_text(tx, raw), ratio_text(tx, py), ratio_text(tx, java),
                         "-" if kind == "tcp" else ratio_text(tx, tx_tcp),
                         ratio_text(rsnet, tx), ratio_text(rs2015, tx), target, met])
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        lines = [f"transport: {kind}"]
        for n, row in enumerate(rows):
            lines.append("  ".join(c.ljust(w) if i == 0 else c.rjust(w) if i < first_text
                                   else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(row, widths))).rstrip())
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run",
                                description="rsocket_tx vs raw Twisted, rsocket-py and "
                                "rsocket-java")
    p.add_argument("--quick", action="store_true",
                   help="smoke run: smaller counts, 1 s budget, best of 2 runs per cell")
    p.add_argument("--only", default=",".join(i.key for i in IMPLS),
                   help="implementations (table columns), comma separated: raw, rsocket-py, "
                   "rsocket_tx, rsocket-java (its client and server), tx-java (rsocket_tx's "
                   "client against rsocket-java's server), rsnet (rsocket_tx's RS-network "
                   "against itself), rs2015 (rsocket_tx's 2015 ReactiveSocket draft against "
                   "itself); aliases: twisted, py, tx, java, tx->java, rs-network, 2015; "
                   "default: all")
    p.add_argument("--workloads", default=",".join(w.key for w in WORKLOADS),
                   help="workloads, comma separated (%(default)s)")
    p.add_argument("--transports", default=",".join(TRANSPORTS),
                   help="transports, comma separated: tcp, tls (TLS over TCP), ws (WebSocket), "
                   "wss (WebSocket over TLS); default: %(default)s")
    p.add_argument("--json", metavar="FILE", help="also write all numbers to FILE")
    p.add_argument("--repeat", type=int, help="measured runs per cell, best is shown "
                   "(default 3, quick 2); implementations take turns")
    p.add_argument("--budget", type=float, help="seconds per measured run before it stops "
                   "issuing work and reports what completed (default 3, quick 1)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every count")
    p.add_argument("--py-read-buffer", type=int, default=1024, metavar="BYTES",
                   help="rsocket-py TransportTCP read_buffer_size (default 1024, its own "
                   "default)")
    p.add_argument("--pin", choices=("same", "split", "none"), default="none",
                   help="CPU placement of server and client: one shared CPU, one CPU each, or "
                   "left to the scheduler (default: %(default)s)")
    p.add_argument("--server-timeout", type=float, default=20.0,
                   help="seconds to wait for a server to print its port")
    p.add_argument("--client-timeout", type=float, default=0.0,
                   help="hard limit per client process in seconds (default: derived from "
                   "budget and repeat)")
    p.add_argument("--logs", metavar="DIR", help="keep children's stderr logs in DIR")
    p.add_argument("-v", "--verbose", action="store_true", help="print stderr of failed children")
    args = p.parse_args(argv)
    if args.repeat is None:
        args.repeat = 2 if args.quick else 3
    if args.budget is None:
        args.budget = 1.0 if args.quick else 3.0
    return args


def select(names: str, known: dict, what: str) -> list:
    out = []
    for name in (n.strip() for n in names.split(",")):
        if not name:
            continue
        if name not in known:
            raise SystemExit(f"unknown {what} {name!r}; choose from {', '.join(sorted(known))}")
        if known[name] not in out:
            out.append(known[name])
    return out


def spec_for(wl: Workload, args) -> Spec:
    count = wl.quick_count if args.quick else wl.count
    warmup = wl.quick_warmup if args.quick else wl.warmup
    return Spec(name=wl.key, kind=wl.kind, count=max(1, int(count * args.scale)), size=wl.size,
                inflight=wl.inflight, prefetch=wl.prefetch, budget=args.budget,
                warmup=max(0, int(warmup * args.scale)), repeat=1)


def rsocket_tx_build() -> str:
    """Which build of rsocket_tx the children import: ``"pure Python"``, or ``"compiled (N of
    M modules: ...)"`` when extension modules (``.so``/``.pyd``, e.g. a mypyc build) sit in
    the package beside the sources. Read from the files only: the package is not imported."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("rsocket_tx")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        return "not importable"
    root = Path(list(spec.submodule_search_locations)[0])
    sources = {p.relative_to(root).with_suffix("") for p in root.rglob("*.py")}
    compiled = sorted({p.relative_to(root).parent / p.name.split(".", 1)[0]
                       for p in (*root.rglob("*.so"), *root.rglob("*.pyd"))} & sources)
    if not compiled:
        return f"pure Python ({root})"
    names = ", ".join(str(p).replace("/", ".") for p in compiled[:6])
    more = f", ... ({len(compiled) - 6} more)" if len(compiled) > 6 else ""
    return f"compiled ({len(compiled)} of {len(sources)} modules: {names}{more}; {root})"


def versions() -> dict:
    out = {"python": platform.python_version(), "platform": platform.platform(),
           "cpus": os.cpu_count()}
    from importlib import metadata

    for dist in ("twisted", "rsocket", "rsocket_tx"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = None
    from benchmarks.impl_rsocket_java import JAR, find_java

    out["rsocket_java"] = "1.1.5" if JAR.is_file() else None  # pinned in benchmarks/java/pom.xml
    java = find_java()
    out["java"] = None
    if java:
        try:
            proc = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=20)
            out["java"] = (proc.stderr or proc.stdout).strip().splitlines()[0]
        except (OSError, subprocess.SubprocessError, IndexError):
            pass
    return out


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    impl_by_key = {i.key: i for i in IMPLS}
    impls = select(args.only, {a: impl_by_key[k] for a, k in ALIASES.items()}, "implementation")
    impls = [i for i in IMPLS if i in impls]  # table order
    workloads = select(args.workloads, {w.key: w for w in WORKLOADS}, "workload")
    workloads = [w for w in WORKLOADS if w in workloads]
    transports = select(args.transports, {t: t for t in TRANSPORTS}, "transport")
    transports = [t for t in TRANSPORTS if t in transports]

    log_dir = Path(args.logs) if args.logs else Path(tempfile.mkdtemp(prefix="rsocket-bench-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    tls_dir = None
    args.tls_files = None
    if any(t in ("tls", "wss") for t in transports):
        # a throwaway self-signed certificate, made now and deleted at the end
        tls_dir = tempfile.mkdtemp(prefix="rsocket-bench-tls-")
        args.tls_files = make_tls_files(tls_dir)
    results: dict = {w.key: {t: {} for t in transports} for w in workloads}
    notes: list[str] = []
    started = time.monotonic()

    def progress(text: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {text}", file=sys.stderr, flush=True)

    # one server per (server module, transport): rsocket-java's serves both of its columns
    servers: dict = {}
    for kind in transports:
        for impl in impls:
            if (impl.server, kind) in servers:
                continue
            server, port, problem = start_server(impl, kind, args, log_dir)
            servers[impl.server, kind] = (server, port, problem)
            if problem:
                progress(f"{impl.server.rsplit('.', 1)[-1]} ({kind}): {problem}")
                notes.append(f"{impl.title} ({kind}): {problem}")

    def server_port(impl: Impl, kind: str) -> tuple[int | None, str | None]:
        server, port, problem = servers[impl.server, kind]
        if problem is None and not server.alive():
            notes.append(f"{impl.title} ({kind}): server process died; restarted")
            server.stop(grace=0.5)
            server, port, problem = servers[impl.server, kind] = start_server(impl, kind, args,
                                                                              log_dir)
        return port, problem

    try:
        for wl in workloads:
            spec = spec_for(wl, args)
            for kind in transports:
                attempts: dict = {impl.key: [] for impl in impls}
                # Interleave the implementations (rotating order) so that background load
                # hits them alike; every attempt is a fresh client process and connection.
                for rep in range(args.repeat):
                    for impl in impls[rep % len(impls):] + impls[: rep % len(impls)]:
                        done = attempts[impl.key]
                        if done and done[-1]["status"] != "ok":
                            continue  # failed or timed out once: do not spend more time on it
                        why = dict(impl.not_applicable).get(wl.kind)
                        if why is not None:  # the protocol has no such interaction
                            done.append({"status": "n/a", "detail": f"n/a ({why[0]})",
                                         "why": why[1]})
                            continue
                        port, problem = server_port(impl, kind)
                        if problem is not None:
                            res = {"status": "n/a" if problem.startswith("n/a") else "error",
                                   "detail": problem}
                        else:
                            res = run_client(impl, kind, port, spec, args, log_dir, rep)
                            if res["status"] in ("timeout", "error"):
                                # the server may be wedged: give the next workload a fresh one
                                server = servers[impl.server, kind][0]
                                server.stop(grace=0.5)
                                servers[impl.server, kind] = start_server(impl, kind, args,
                                                                          log_dir)
                        done.append(res)
                for impl in impls:
                    res = merge(attempts[impl.key])
                    res["spec"] = json.loads(spec.to_json())
                    results[wl.key][kind][impl.key] = res
                    if res["status"] == "ok":
                        progress(f"{impl.key:12s} {kind:3s} {wl.key:9s} {cell(wl, res)} "
                                 f"{wl.unit}  (best of {len(res['runs'])})")
                        continue
                    detail = res.get("detail", "")
                    if not detail.startswith(res["status"]):
                        detail = f"{res['status']}: {detail}"
                    progress(f"{impl.key:12s} {kind:3s} {wl.key:9s} {detail}")
                    if "why" in res:
                        note = f"{impl.title}: {res['detail']}: {res['why']}"
                        if note not in notes:
                            notes.append(note)
                        continue
                    if not servers[impl.server, kind][2]:
                        notes.append(f"{impl.title} ({kind}) / {wl.key}: {res['status']}: "
                                     f"{res.get('detail', '')}")
                    if args.verbose and res.get("stderr"):
                        print(res["stderr"], file=sys.stderr)
    finally:
        for server, _, _ in servers.values():
            if server is not None:
                server.stop()
        if tls_dir is not None:
            shutil.rmtree(tls_dir, ignore_errors=True)

    table = render_table(workloads, results, transports, impls)
    build = rsocket_tx_build()
    print()
    print(table)
    print()
    if any(i.key in TX_COLUMNS for i in impls):
        columns = ", ".join(i.title for i in impls if i.key in TX_COLUMNS)
        print(f"rsocket_tx build (columns {columns}): {build}")
    mode = "quick" if args.quick else "full"
    cells = [r for per in results.values() for by_impl in per.values()
             for r in by_impl.values()]
    failed = any(r.get("status") in ("timeout", "error") or r.get("failed_attempts")
                 for r in cells)
    keep_logs = bool(args.logs) or failed
    if not keep_logs:
        shutil.rmtree(log_dir, ignore_errors=True)
    print(f"{mode} run, best of {args.repeat} run(s) per cell, {args.budget:g} s budget per run, "
          f"{time.monotonic() - started:.0f} s total"
          + (f"; children's stderr in {log_dir}" if keep_logs else ""))
    print("Ratios compare rsocket_tx with the other column (MB/s for 1 MiB streams, "
          "operations/s otherwise); MB = 10^6 payload bytes. rsocket_tx→java: rsocket_tx's "
          "client against rsocket-java's server.")
    if any(r.get("status") == "ok" and not r["best"]["complete"] for r in cells):
        print("* stopped by the time budget before its count: the rate covers the part done.")
    for note in notes:
        print("note: " + note)

    if args.json:
        doc = {"meta": {"when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "mode": mode,
                        "repeat": args.repeat, "budget_s": args.budget, "scale": args.scale,
                        "transports": transports,
                        "py_read_buffer": args.py_read_buffer, "rsocket_tx_build": build,
                        **versions()},
               "workloads": {w.key: {"label": w.label, "unit": w.unit, "metric":
                                     "mb_per_s" if w.metric == "mb" else "ops_per_s",
                                     "target_vs_raw": w.target_raw,
                                     "target_vs_rsocket_py": w.target_py} for w in workloads},
               "results": results, "notes": notes, "table": table.splitlines()}
        for w in workloads:
            for kind in transports:
                r = results[w.key][kind]
                raw, py, tx, java, tx_java, rsnet, rs2015 = (
                    metric(w, r.get(k))
                    for k in ("raw", "rsocket-py", "rsocket_tx", "rsocket-java", "tx-java",
                              "rsnet", "rs2015"))
                doc["workloads"][w.key].setdefault("ratios", {})[kind] = {
                    "tx_over_raw": tx / raw if tx and raw else None,
                    "tx_over_py": tx / py if tx and py else None,
                    "tx_over_java": tx / java if tx and java else None,
                    "tx_client_over_java_client": tx_java / java if tx_java and java else None,
                    "rsnet_over_tx": rsnet / tx if rsnet and tx else None,
                    "rs2015_over_tx": rs2015 / tx if rs2015 and tx else None}
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
        print(f"numbers written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
