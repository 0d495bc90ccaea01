"""Stress benchmark: many connections, many streams, a soak with cuts, and attacks on memory.

The server under test is ``twistd -n rsocket`` with its defaults, started as a process of its
own for every scenario, so that its memory (``VmRSS`` and ``VmHWM`` of ``/proc/PID/status``)
is measured apart from the clients. The clients are rsocket_tx's own client in child processes
(:mod:`benchmarks.stress_client`) for the normal load, and plain sockets with hand-built frames
(:mod:`benchmarks.stress_raw`) for the attacks. Run from the repository root::

    .venv/bin/python -m benchmarks.stress                    # everything, full sizes (~15 min)
    .venv/bin/python -m benchmarks.stress --quick            # small sizes (~3 min)
    .venv/bin/python -m benchmarks.stress --only soak --soak-seconds 120 --json out.json

Scenarios (``--only``, comma-separated):

``connections``
    For each size in ``--connections`` (1000,4000): that many connections, at most
    ``--connect-concurrency`` connecting at once, each sends SETUP and one request-response and
    stays open. Reports how long they took, the server's memory per open connection, and its
    memory once they closed.
``streams``
    One connection opens ``--streams`` request-streams (10,000) and leaves them open (request-n
    1, not consumed). The server runs with ``--max-concurrent-streams`` raised to that number
    (its only non-default setting). Reports the memory per open stream.
``soak``
    ``--soak-sessions`` resumable sessions (4) run request-response, fire-and-forget,
    request-stream, request-channel and metadata-push for ``--soak-seconds`` (600), every
    answer checked exactly, while the TCP connection of a random session is aborted every
    ``--cut-every`` seconds (5) on average and resumes. The server runs with ``--resume`` and
    :mod:`benchmarks.stress_responder`. The server's memory is sampled every
    ``--sample-every`` seconds (5): first, last, max and the slope of a least-squares line
    through the samples after the first fifth (warm-up).
``prefix``
    ``--prefix-connections`` (300) connections each send a length prefix of 16,777,215 bytes
    and all but the last byte of the frame, before any SETUP, and hold for ``--hold`` seconds.
``setup-limit``
    ``--setup-limit-connections`` (1000) connections each announce a first frame of
    ``--setup-frame-size`` bytes (131,072: the largest a server accepts by default) and send
    all of it but the last byte: the most a connection can make the server hold before SETUP.
``budget``
    The worst a server on defaults can be made to hold before SETUP: ``--budget-connections``
    (4,596: ``max_connections`` + 500) connections each announce a first frame of
    ``--setup-frame-size`` bytes and send all but its last byte, held ``--hold`` seconds.
    Needs the file limit for that many sockets in both processes.
``waves``
    ``--waves`` (5) waves of ``--wave-size`` (32) such connections, each wave closed before the
    next: the server's memory with each wave open and after it closed.
``waves-setup-limit``
    The same with ``--setup-limit-connections`` connections announcing ``--setup-frame-size``
    bytes, which a server holds until they close: is a closed connection's memory reused?
``reassembly``
    One connection sends SETUP, then opens streams whose requests arrive in fragments that
    never finish (REQUEST_RESPONSE with F, then PAYLOAD fragments with F), each just under the
    default max reassembled size (64 MiB, ``--reassembly-per-stream``), until
    ``--reassembly-total`` bytes are sent. Then a request-response on the same connection
    tells whether the connection survived.
``reassembly-closed``
    Memory after an attack: ``--reassembly-connections`` (16; quick 8) connections each
    send SETUP and one request whose fragments never finish, ``--small-fragment-size``
    (16,384 bytes: below glibc's mmap threshold, so they live in the heap) at a time, until
    it holds ``--reassembly-per-stream`` bytes (just under the 64 MiB
    ``max_reassembly_buffer_size``); a request-response on each then tells that the server
    has read it all. Then they all close: the row gives the server's RSS before, at the peak
    and 3 s after the close, and the outcome how far above *before* it stayed.
``lifetime``
    ``--idle-connections`` (1000) clients send a SETUP declaring max lifetime and keepalive
    interval 2^31-1 ms (24.9 days) and then nothing: does the server accept them?
``burst``
    ``--burst`` (1000) connects issued at once; each then sends SETUP and a request-response.
    Reports the connect time and the time to the answer (p50/p90/p99/max).
``oversize``
    With ``--max-frame-size 1024`` on the server (the one scenario not on defaults), each of
    ``--oversize-connections`` (100) connections writes, in one write, SETUP, a
    request-response and then a length prefix of 2,000 bytes: is the request-response
    answered before the connection error?

During every attack a good client (``stress_client probe``) makes a request-response every
200 ms on one connection, and connects afresh once a second (connect, SETUP, request-response):
the table shows their p50 and max round trip times during the attack, and failures. Every
attack stops early when the server's resident memory passes ``--rss-cap`` (2 GiB by default,
so that an unbounded server does not take the machine down); the table says so.

Nothing here asserts: a benchmark reports. ``--json FILE`` saves every number. The file limit
(RLIMIT_NOFILE) is raised to the hard limit in every process; a hard limit below what a
scenario needs is reported instead of run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # executed as a file
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import stress_raw as raw
from benchmarks.common import stop_child

REPO = Path(__file__).resolve().parent.parent
MiB = 1024 * 1024
HOST = "127.0.0.1"
SCENARIOS = ("connections", "streams", "soak", "prefix", "setup-limit", "budget", "waves",
             "waves-setup-limit", "reassembly", "reassembly-closed", "lifetime", "burst",
             "oversize")


def raise_file_limit() -> tuple[int, int]:
    """Raise RLIMIT_NOFILE's soft limit to the hard limit (inherited by the children)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def mib(n_bytes: float | None) -> str:
    return "-" if n_bytes is None else f"{n_bytes / MiB:,.0f}"


def pct(values: list[float]) -> dict:
    if not values:
        return {}
    s = sorted(values)
    return {"n": len(s), "p50": s[len(s) // 2], "p90": s[min(len(s) - 1, int(len(s) * .9))],
            "p99": s[min(len(s) - 1, int(len(s) * .99))], "max": s[-1]}


#: Where the rsocket_tx under test is imported from (``--code``; None: this repository).
CODE: Path | None = None


def child_env() -> dict:
    """The environment of the server and client processes: ``--code`` first on the path (its
    ``rsocket_tx`` and ``twisted/plugins`` win), then this repository (``benchmarks``)."""
    env = dict(os.environ)
    paths = (str(CODE) if CODE else None, str(REPO), env.get("PYTHONPATH"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


# ----------------------------------------------------------------------------- processes


def die_with_parent() -> None:
    """In a child before exec: SIGTERM it when the harness dies (Linux ``PR_SET_PDEATHSIG``),
    so that an interrupted run leaves no server behind."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


class Server:
    """``twistd -n rsocket`` on a free loopback port, in its own process."""

    def __init__(self, log_dir: Path, name: str, options: list[str]) -> None:
        self.log_path = log_dir / f"server-{name}.log"
        twistd = Path(sys.executable).with_name("twistd")
        argv = ([str(twistd)] if twistd.exists() else
                [sys.executable, "-c", "from twisted.scripts.twistd import run; run()"])
        argv += ["-n", "--pidfile=", "rsocket", "--listen",
                 f"tcp:port=0:interface={HOST}", *options]
        self.argv = argv
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.proc = subprocess.Popen(argv, cwd=REPO, env=child_env(), stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     preexec_fn=die_with_parent)
        self.pid = self.proc.pid
        self.port = self._wait_port(30.0)

    def _wait_port(self, timeout: float) -> int:
        end = time.monotonic() + timeout
        pattern = re.compile(r"listening on 127\.0\.0\.1:(\d+)")
        while time.monotonic() < end:
            m = pattern.search(self.log_path.read_text("utf-8", "replace"))
            if m:
                return int(m.group(1))
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server did not start: {self.log_tail()}")

    def status(self) -> dict:
        """VmRSS and VmHWM of the server process, in bytes (empty once it has exited)."""
        out = {}
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith(("VmRSS:", "VmHWM:")):
                        key, value = line.split(":", 1)
                        out[key] = int(value.split()[0]) * 1024
        except OSError:
            pass
        return out

    def rss(self) -> int:
        return self.status().get("VmRSS", 0)

    def reset_peak(self) -> bool:
        """Reset VmHWM to the current RSS (``/proc/PID/clear_refs``, Linux >= 4.0)."""
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, n: int = 5) -> str:
        try:
            lines = self.log_path.read_text("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()


class Sampler:
    """Samples the server's VmRSS every ``interval`` seconds in a thread; keeps the peak since
    the last :meth:`mark` and every sample (time, bytes)."""

    def __init__(self, server: Server, interval: float = 0.1) -> None:
        self.server = server
        self.interval = interval
        self.samples: list[tuple[float, int]] = []
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            rss = self.server.rss()
            if rss:
                self.samples.append((time.monotonic(), rss))
                self.peak = max(self.peak, rss)
            self._stop.wait(self.interval)

    def mark(self) -> None:
        self.server.reset_peak()
        self.peak = self.server.rss()

    def peak_since_mark(self) -> int:
        """The larger of the sampled peak and the kernel's VmHWM (reset by :meth:`mark`)."""
        return max(self.peak, self.server.status().get("VmHWM", 0))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Child:
    """A ``benchmarks.stress_client`` process; its stdout lines are queued by a thread."""

    def __init__(self, log_dir: Path, name: str, args: list[str]) -> None:
        self.log_path = log_dir / f"client-{name}.log"
        self._log = open(self.log_path, "wb")  # closed in stop()
        self.proc = subprocess.Popen([sys.executable, "-m", "benchmarks.stress_client", *args],
                                     cwd=REPO, env=child_env(), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self._log, text=True)
        self.lines: queue.Queue = queue.Queue()
        self.on_line = None
        threading.Thread(target=self._read, name=f"child-{name}", daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            stamped = (time.monotonic(), line.rstrip("\n"))
            if self.on_line is not None:
                self.on_line(*stamped)
            else:
                self.lines.put(stamped)
        self.lines.put((time.monotonic(), None))

    def expect(self, prefixes: tuple[str, ...], timeout: float) -> tuple[str, str]:
        """The next line starting with one of ``prefixes``: (prefix, rest). ``ERROR`` lines and
        the end of output raise RuntimeError, as does the timeout."""
        end = time.monotonic() + timeout
        while True:
            try:
                _, line = self.lines.get(timeout=max(0.0, end - time.monotonic()))
            except queue.Empty:
                raise RuntimeError(f"no {'/'.join(prefixes)} from the client within "
                                   f"{timeout:.0f} s") from None
            if line is None:
                raise RuntimeError(f"client exited: {self.stderr_tail()}")
            tag, _, rest = line.partition(" ")
            if tag == "ERROR":
                raise RuntimeError(f"client: {rest}")
            if tag in prefixes:
                return tag, rest

    def send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except OSError:
            pass

    def stderr_tail(self, n: int = 4) -> str:
        try:
            lines = self.log_path.read_text("utf-8", "replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(lines[-n:])

    def stop(self, grace: float = 10.0) -> None:
        stop_child(self.proc, grace)
        self._log.close()


class Probe:
    """The good client: collects its round trip times (``stress_client probe``)."""

    def __init__(self, log_dir: Path, name: str, port: int) -> None:
        self.events: list[tuple[float, str, float | None, str]] = []
        self.child = Child(log_dir, f"probe-{name}", ["probe", str(port)])
        self.child.expect(("READY",), 30)
        self.child.on_line = self._line

    def _line(self, t: float, line: str | None) -> None:
        if line is None:
            return
        tag, _, rest = line.partition(" ")
        kind, _, value = rest.partition(" ")
        if tag == "RTT":
            self.events.append((t, kind, float(value), ""))
        elif tag == "FAIL":
            self.events.append((t, kind, None, value))

    def settle(self, seconds: float = 1.5) -> None:
        """Wait until at least one fresh and a few persistent round trips went through."""
        time.sleep(seconds)

    def window(self, t0: float, t1: float) -> dict:
        """Round trip times of answers and failures that came between ``t0`` and ``t1``
        (seconds of ``time.monotonic()``)."""
        out: dict = {}
        for kind in ("persist", "fresh"):
            times = [v for t, k, v, _ in self.events if k == kind and t0 <= t <= t1 and v]
            fails = [why for t, k, v, why in self.events
                     if k == kind and t0 <= t <= t1 and v is None]
            out[kind] = {**pct(times), "failed": len(fails), "why": fails[:3]}
        return out

    def stop(self) -> None:
        self.child.stop(grace=3.0)


def probe_text(p: dict | None) -> str:
    """``persist p50/max, fresh p50/max`` in ms, with failures."""
    if not p:
        return "-"
    parts = []
    for kind in ("persist", "fresh"):
        d = p.get(kind, {})
        text = f"{d['p50']:.0f}/{d['max']:.0f}" if d.get("n") else "none"
        if d.get("failed"):
            text += f" ({d['failed']} failed)"
        parts.append(text)
    return "; ".join(parts)


# ----------------------------------------------------------------------------- scenarios


class Run:
    """State shared by the scenarios of one run: arguments, log directory, results."""

    def __init__(self, args) -> None:
        self.args = args
        self.log_dir = Path(args.logs) if args.logs else Path(
            tempfile.mkdtemp(prefix="rsocket-stress-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.rows: list[dict] = []
        self.started = time.monotonic()
        self.cap = args.rss_cap * MiB
        self.loads: list[float] = []  # 1-minute load average, every 10 s
        threading.Thread(target=self._watch_load, name="load", daemon=True).start()

    def _watch_load(self) -> None:
        while True:
            try:
                self.loads.append(float(loadavg().split()[0]))
            except ValueError:
                pass
            time.sleep(10)

    def progress(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:7.1f}s] {text}", file=sys.stderr, flush=True)

    def server(self, name: str, options: list[str] = ()) -> Server:
        server = Server(self.log_dir, name, [*options, *self.args.server_arg])
        time.sleep(0.5)
        return server

    def add(self, row: dict) -> None:
        self.rows.append(row)
        self.progress(f"{row['scenario']}: RSS {mib(row.get('before'))} -> peak "
                      f"{mib(row.get('peak'))} -> after {mib(row.get('after'))} MiB; "
                      f"{row.get('outcome', '')}")


def settle_rss(server: Server, seconds: float) -> int:
    time.sleep(seconds)
    return server.rss()


def scenario_connections(run: Run, count: int) -> None:
    args = run.args
    name = f"connections-{count}"
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 100:
        run.add({"scenario": name, "load": f"{count:,} connections",
                 "outcome": f"not run: the file limit is {soft} (ulimit -Hn), "
                            f"{count + 100} needed"})
        return
    server = run.server(name)
    sampler = Sampler(server)
    client = None
    try:
        before = server.rss()
        sampler.mark()
        client = Child(run.log_dir, name, ["connections", str(server.port), str(count),
                                           str(args.connect_concurrency)])
        _, body = client.expect(("OPEN",), args.timeout + count / 10)
        opened = json.loads(body)
        open_rss = settle_rss(server, 2.0)
        client.send("close")
        client.expect(("CLOSED",), 120)
        after = settle_rss(server, 3.0)
        client.send("exit")
        lat = opened["latency_ms"]
        ok = opened["ok"]
        per = (open_rss - before) / ok if ok else None
        outcome = (f"{ok:,}/{count:,} served in {opened['seconds']:.1f} s "
                   f"({opened['rate']:,.0f}/s); connect+SETUP+request-response p50 "
                   f"{lat.get('p50', 0):,.0f} ms, p99 {lat.get('p99', 0):,.0f} ms, max "
                   f"{lat.get('max', 0):,.0f} ms")
        if opened["errors"]:
            outcome += f"; errors: {opened['errors']}"
        run.add({"scenario": name, "load": f"{count:,} connections open at once",
                 "before": before, "peak": sampler.peak_since_mark(), "with": open_rss,
                 "after": after, "per": per, "per_unit": "connection", "outcome": outcome,
                 "details": opened, "good": ok == count})
    finally:
        if client is not None:
            client.stop()
        sampler.stop()
        server.stop()


def scenario_streams(run: Run) -> None:
    args = run.args
    count = args.streams
    name = f"streams-{count}"
    limit = max(count, 1024)
    server = run.server(name, ["--max-concurrent-streams", str(limit)])
    sampler = Sampler(server)
    client = None
    try:
        before = server.rss()
        sampler.mark()
        client = Child(run.log_dir, name, ["streams", str(server.port), str(count)])
        _, body = client.expect(("OPEN",), args.timeout + count / 100)
        opened = json.loads(body)
        open_rss = settle_rss(server, 2.0)
        client.send("close")
        client.expect(("CLOSED",), 120)
        after = settle_rss(server, 3.0)
        client.send("exit")
        per = (open_rss - before) / opened["open"] if opened["open"] else None
        outcome = f"{opened['open']:,}/{count:,} open after {opened['seconds']:.1f} s"
        if opened["failed"]:
            outcome += f"; {opened['failed']} failed: {opened['reasons']}"
        run.add({"scenario": name, "load": f"{count:,} streams open on one connection "
                                           f"(--max-concurrent-streams {limit})",
                 "before": before, "peak": sampler.peak_since_mark(), "with": open_rss,
                 "after": after, "per": per, "per_unit": "stream", "outcome": outcome,
                 "details": opened, "good": opened["open"] == count})
    finally:
        if client is not None:
            client.stop()
        sampler.stop()
        server.stop()


def slope_per_hour(samples: list[tuple[float, int]]) -> float | None:
    """Least-squares slope of (seconds, bytes) in bytes per hour."""
    if len(samples) < 3:
        return None
    n = len(samples)
    mt = sum(t for t, _ in samples) / n
    mr = sum(r for _, r in samples) / n
    var = sum((t - mt) ** 2 for t, _ in samples)
    if not var:
        return None
    return sum((t - mt) * (r - mr) for t, r in samples) / var * 3600


def scenario_soak(run: Run) -> None:
    args = run.args
    seconds = args.soak_seconds
    server = run.server("soak", ["--resume", "--responder",
                                 "benchmarks.stress_responder:SoakResponder"])
    sampler = Sampler(server, interval=args.sample_every)
    probe = client = None
    try:
        probe = Probe(run.log_dir, "soak", server.port)
        probe.settle()
        before = server.rss()
        sampler.mark()
        first_sample = len(sampler.samples)
        t0 = time.monotonic()
        client = Child(run.log_dir, "soak", ["soak", str(server.port), str(seconds),
                                             str(args.soak_sessions), str(args.cut_every),
                                             str(args.seed)])
        while True:
            tag, body = client.expect(("PROGRESS", "RESULT"), seconds + 300)
            if tag == "RESULT":
                break
            p = json.loads(body)
            run.progress(f"soak {p['elapsed']:.0f}/{seconds:.0f} s: rr {p['rr']:,}, fnf "
                         f"{p['fnf']:,}, streams {p['streams']:,}, channels "
                         f"{p['channels']:,}, cuts {p['cuts']}, resumes {p['resumes']}, "
                         f"errors {p['errors']}, server RSS {mib(server.rss())} MiB")
        t1 = time.monotonic()
        result = json.loads(body)
        after = settle_rss(server, 3.0)
        samples = [s for s in sampler.samples[first_sample:] if t0 <= s[0] <= t1]
        warm = samples[len(samples) // 5:]
        slope = slope_per_hour(warm)
        rss_first = samples[0][1] if samples else None
        rss_last = samples[-1][1] if samples else None
        rss_max = max((r for _, r in samples), default=None)
        r = result
        lost = (r["fnf"] - r["received"]) + r["gaps"]
        bad = r["rr_bad"] + r["streams_bad"] + r["channels_bad"]
        exact = (r["rr_bad"] == r["streams_bad"] == r["channels_bad"] == 0
                 and r["gaps"] == r["duplicates"] == 0 and r["received"] == r["fnf"]
                 and r["errors"] == 0 and r["sessions_lost"] == 0)
        outcome = (
            f"{'nothing lost or repeated' if exact else 'MISMATCH'}: "
            f"{r['rr']:,} request-responses, {r['fnf']:,} fire-and-forget ({r['received']:,} "
            f"received, {r['gaps']} skipped, {r['duplicates']} repeated), {r['streams']:,} "
            f"streams ({r['stream_items']:,} items), {r['channels']:,} channels "
            f"({r['channel_items']:,} items), bad answers {bad}"
            f"; {r['cuts']} cuts, {r['resumes']} resumes, {r['errors']} errors, "
            f"{r['sessions_lost']} sessions lost; metadata-push {r['push_sent']:,} sent, "
            f"{r['push_received']:,} received, {r['push_skipped']:,} not sent while detached"
            f"; server RSS first {mib(rss_first)}, last {mib(rss_last)}, max {mib(rss_max)} "
            f"MiB, slope {'-' if slope is None else f'{slope / MiB:+.1f}'} MiB/h")
        if r["error_samples"]:
            outcome += f"; first errors: {r['error_samples'][:3]}"
        run.add({"scenario": "soak", "load": f"{args.soak_sessions} resumable sessions x 5 "
                                              f"interactions, {seconds:.0f} s, a cut every "
                                              f"~{args.cut_every:g} s",
                 "before": before, "peak": sampler.peak_since_mark(), "after": after,
                 "outcome": outcome, "probe": probe.window(t0, t1), "good": exact,
                 "details": {**result, "lost": lost, "rss_first": rss_first,
                             "rss_last": rss_last, "rss_max": rss_max,
                             "slope_bytes_per_hour": slope,
                             "samples": [(round(t - t0, 1), rss) for t, rss in samples]}})
    finally:
        for child in (client, probe):
            if child is not None:
                child.stop()
        sampler.stop()
        server.stop()


class Attack:
    """Context for one attack: its own server, the probe, the sampler, a raw driver."""

    def __init__(self, run: Run, name: str, options: list[str] = ()) -> None:
        self.run = run
        self.name = name
        self.server = run.server(name, list(options))
        self.sampler = Sampler(self.server)
        self.probe = None
        self.driver = raw.RawDriver()
        self.capped = False
        try:
            self.probe = Probe(run.log_dir, name, self.server.port)
            self.probe.settle()
        except Exception:
            self.close()
            raise
        self.before = self.server.rss()
        self.sampler.mark()
        self.t0 = time.monotonic()

    def over_cap(self) -> bool:
        if self.server.rss() > self.run.cap:
            self.capped = True
        return self.capped

    def finish(self, outcome: str, load: str, after_wait: float = 3.0, **extra) -> None:
        # the good client's window lasts at least 2.5 s (a dozen round trips, two connects)
        time.sleep(max(0.0, self.t0 + 2.5 - time.monotonic()))
        t1 = time.monotonic()
        self.driver.close_all()
        after = settle_rss(self.server, after_wait)
        peak = self.sampler.peak_since_mark()  # what the server read after we stopped counts
        if self.capped:
            outcome = (f"STOPPED at the RSS cap of {self.run.args.rss_cap:,} MiB; "
                       + outcome)
        alive = self.server.alive()
        if not alive:
            outcome = "SERVER DIED; " + outcome
        self.run.add({"scenario": self.name, "load": load, "before": self.before,
                      "peak": peak, "after": after, "outcome": outcome,
                      "probe": self.probe.window(self.t0, t1) if self.probe else None,
                      **extra})

    def close(self) -> None:
        self.driver.close_all()
        if self.probe is not None:
            self.probe.stop()
        self.sampler.stop()
        self.server.stop()


#: One frame body of the largest size the length prefix allows, shared by every connection.
BIG_BODY = b"\0" * (raw.MAX_LENGTH - 1)


def open_prefix_attackers(attack: Attack, count: int, hold: float,
                          length: int = raw.MAX_LENGTH) -> list:
    """``count`` connections, each writing a length prefix of ``length`` bytes (default
    16,777,215) and all but the last byte of the frame; serve them until every byte is written
    (or refused) and ``hold`` has passed, or the RSS cap is hit."""
    conns = [attack.driver.open(HOST, attack.server.port) for _ in range(count)]
    body = memoryview(BIG_BODY)[:length - 1]
    for conn in conns:
        attack.driver.write(conn, raw.prefix(length), body)
    end = time.monotonic() + hold
    attack.driver.run(hold + 60, until=lambda: (
        attack.over_cap() or (time.monotonic() >= end and all(
            not c.out or c.closed is not None for c in conns))))
    return conns


def refused_text(conns: list) -> str:
    closed = [c for c in conns if c.closed is not None]
    sent = sum(c.sent for c in conns)
    text = f"{sum(c.sent for c in closed):,} bytes written by the attacker"
    text = f"{sent / MiB:,.0f} MiB written by the attackers"
    if closed:
        times = pct([c.closed * 1000 for c in closed])
        text += (f"; the server closed {len(closed)}/{len(conns)} (after p50 "
                 f"{times['p50']:,.0f} ms)")
        errors = sorted({e for c in closed for e in c.errors()})
        if errors:
            text += f" with {', '.join(f'ERROR[{e}]' for e in errors)}"
    else:
        text += f"; all {len(conns)} still open"
    return text


def scenario_prefix(run: Run) -> None:
    args = run.args
    attack = Attack(run, "prefix")
    try:
        conns = open_prefix_attackers(attack, args.prefix_connections, args.hold)
        attack.finish(refused_text(conns),
                      f"{args.prefix_connections} connections x 16 MiB prefix, all but 1 byte "
                      f"sent, no SETUP, held {args.hold:g} s",
                      details={"sent": sum(c.sent for c in conns),
                               "closed_by_server": sum(c.closed is not None for c in conns)})
    finally:
        attack.close()


def scenario_setup_limit(run: Run) -> None:
    args = run.args
    attack = Attack(run, "setup-limit")
    try:
        count, length = args.setup_limit_connections, args.setup_frame_size
        conns = open_prefix_attackers(attack, count, args.hold, length)
        with_rss = attack.server.rss()
        still = sum(c.closed is None for c in conns)
        per = (with_rss - attack.before) / still if still else None
        attack.finish(refused_text(conns),
                      f"{count:,} connections x {length:,}-byte prefix (the largest first frame "
                      f"accepted by default), all but 1 byte sent, no SETUP, held {args.hold:g} s",
                      per=per, per_unit="connection",
                      details={"sent": sum(c.sent for c in conns), "still_open": still})
    finally:
        attack.close()


def scenario_budget(run: Run) -> None:
    args = run.args
    count, length = args.budget_connections, args.setup_frame_size
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 100:
        run.add({"scenario": "budget", "load": f"{count:,} connections",
                 "outcome": f"not run: the file limit is {soft} (ulimit -Hn), "
                            f"{count + 100} needed"})
        return
    attack = Attack(run, "budget")
    try:
        conns = open_prefix_attackers(attack, count, args.hold, length)
        still = sum(c.closed is None for c in conns)
        closed = [c for c in conns if c.closed is not None]
        text = (f"{still:,} held open, {len(closed):,} closed by the server"
                + (f" (after p50 {pct([c.closed * 1000 for c in closed])['p50']:,.0f} ms)"
                   if closed else "")
                + f"; {sum(c.sent for c in conns) / MiB:,.0f} MiB written by the attackers")
        attack.finish(text, f"{count:,} connections x {length:,}-byte prefix, all but 1 byte "
                            f"sent, no SETUP, held {args.hold:g} s: past max_connections",
                      details={"still_open": still, "closed_by_server": len(closed)})
    finally:
        attack.close()


def scenario_waves(run: Run, name: str, size: int, length: int) -> None:
    """``--waves`` waves of ``size`` connections announcing ``length``-byte first frames."""
    args = run.args
    attack = Attack(run, name)
    try:
        open_each, after_each = [], []
        sent = 0
        for _ in range(args.waves):
            conns = open_prefix_attackers(attack, size, 1.0, length)
            sent += sum(c.sent for c in conns)
            open_each.append(attack.server.rss())
            attack.driver.close_all()
            after_each.append(settle_rss(attack.server, 1.5))
            if attack.capped:
                break
        waves = ", ".join(f"{mib(o)}/{mib(a)}" for o, a in zip(open_each, after_each))
        attack.finish(f"RSS with each wave open/after it closed: {waves} MiB; "
                      f"{sent / MiB:,.0f} MiB written in all",
                      f"{args.waves} waves x {size:,} connections x {length:,}-byte prefix, "
                      f"all but 1 byte sent, each wave closed before the next",
                      details={"open_each_wave": open_each, "after_each_wave": after_each,
                               "sent": sent})
    finally:
        attack.close()


def scenario_reassembly(run: Run) -> None:
    args = run.args
    attack = Attack(run, "reassembly")
    try:
        driver = attack.driver
        conn = driver.open(HOST, attack.server.port)
        driver.write(conn, raw.setup())
        chunk_size = args.fragment_size
        chunk = b"\0" * chunk_size
        per_stream = args.reassembly_per_stream
        total = args.reassembly_total
        sent_payload = 0
        stream_id = 1
        streams = 0
        while sent_payload < total and conn.closed is None and streams < args.max_streams:
            # first fragment: REQUEST_RESPONSE with F; then PAYLOAD fragments with F; never
            # the last one
            body_sent = 0
            first = True
            while body_sent < per_stream and sent_payload < total:
                n = min(chunk_size, per_stream - body_sent)
                if first:
                    driver.write(conn, raw.prefix(6 + n), raw.request_response(
                        stream_id, b"", follows=True)[3:], memoryview(chunk)[:n])
                    first = False
                else:
                    driver.write(conn, raw.payload_fragment_header(stream_id, n, True),
                                 memoryview(chunk)[:n])
                body_sent += n
                sent_payload += n
            streams += 1
            stream_id += 2
            driver.run(120, until=lambda: not conn.out or conn.closed is not None
                       or attack.over_cap())
            if attack.capped:
                break
        driver.run(2.0)
        # does the connection still serve a request?
        alive_id = stream_id
        if conn.closed is None:
            driver.write(conn, raw.request_response(alive_id, b"still there?"))
            driver.run(10, until=lambda: conn.closed is not None or conn.payloads(alive_id))
        served = bool(conn.payloads(alive_id))
        refused = {}
        for sid, ftype, _, body in conn.frames:
            if ftype == raw.ERROR and sid:
                name = raw.ERROR_NAMES.get(int.from_bytes(body[:4], "big"), "?")
                refused[name] = refused.get(name, 0) + 1
        conn_errors = [e for (sid, t, _, _), e in zip(
            [f for f in conn.frames if f[1] == raw.ERROR], conn.errors()) if sid == 0]
        outcome = (f"{streams} streams x {per_stream / MiB:g} MiB unfinished, "
                   f"{sent_payload / MiB:,.0f} MiB sent; streams refused: "
                   f"{', '.join(f'{n} ERROR[{k}]' for k, n in refused.items()) or 'none'}; "
                   f"connection {'closed' if conn.closed is not None else 'open'}"
                   f"{' (' + ', '.join(conn_errors) + ')' if conn_errors else ''}, "
                   f"a request-response on it {'answered' if served else 'NOT answered'}")
        attack.finish(outcome, f"1 connection, fragments of {chunk_size / MiB:g} MiB, up to "
                               f"{per_stream / MiB:g} MiB per stream, never finished",
                      details={"streams": streams, "sent": sent_payload, "refused": refused,
                               "served_after": served})
    finally:
        attack.close()


def scenario_reassembly_closed(run: Run) -> None:
    args = run.args
    attack = Attack(run, "reassembly-closed")
    try:
        driver = attack.driver
        size = args.small_fragment_size
        chunk = b"\0" * size
        # 64 PAYLOAD fragments with F in one shared buffer, written to every connection
        block = (raw.payload_fragment_header(1, size, True) + chunk) * 64
        blocks = max(0, args.reassembly_per_stream - size) // (64 * size)
        held = size + blocks * 64 * size
        conns = []
        for _ in range(args.reassembly_connections):
            conn = driver.open(HOST, attack.server.port)
            driver.write(conn, raw.setup(), raw.request_response(1, chunk, follows=True),
                         *[block] * blocks, raw.request_response(3, b"all read?"))
            conns.append(conn)
            driver.run(120, until=lambda c=conn: not c.out or c.closed is not None
                       or attack.over_cap())
            if attack.capped:
                break
        # answered once the server has read every fragment before the request
        driver.run(120, until=lambda: attack.over_cap() or all(
            c.payloads(3) or c.closed is not None for c in conns))
        with_rss = attack.server.rss()
        answered = sum(1 for c in conns if c.payloads(3))
        errors = sorted({e for c in conns for e in c.errors()})
        text = (f"{answered}/{len(conns)} connections held {held / MiB:,.0f} MiB each and "
                f"served a request-response"
                + (f"; errors {', '.join(f'ERROR[{e}]' for e in errors)}" if errors else "")
                + f"; RSS with them open {mib(with_rss)} MiB")
        attack.finish(text, f"{len(conns)} connections x {held / MiB:,.0f} MiB in "
                            f"{size:,}-byte fragments, never finished, then all closed",
                      details={"held_each": held, "answered": answered, "errors": errors,
                               "with_open": with_rss})
        row = run.rows[-1]
        above = row["after"] - row["before"]
        row["outcome"] += (f"; 3 s after they closed: {above / MiB:+,.0f} MiB from before "
                           f"({(row['peak'] - row['before']) / MiB:+,.0f} at the peak)")
        print(f"memory after the reassembly attack closed: before {mib(row['before'])}, peak "
              f"{mib(row['peak'])}, after close {mib(row['after'])} MiB", file=sys.stderr)
    finally:
        attack.close()


def scenario_lifetime(run: Run) -> None:
    args = run.args
    attack = Attack(run, "lifetime")
    try:
        conns = [attack.driver.open(HOST, attack.server.port)
                 for _ in range(args.idle_connections)]
        setup = raw.setup(keepalive=raw.MAX_INT31, lifetime=raw.MAX_INT31)
        for conn in conns:
            attack.driver.write(conn, setup)
        attack.driver.run(args.idle_wait, until=attack.over_cap)
        with_rss = attack.server.rss()
        still = sum(c.closed is None for c in conns)
        errors: dict[str, int] = {}
        for c in conns:
            for e in c.errors():
                errors[e] = errors.get(e, 0) + 1
        texts = sorted({t for c in conns for t in c.error_texts()})
        if errors:
            outcome = (f"refused: {', '.join(f'{n} ERROR[{k}]' for k, n in errors.items())}"
                       f"{' ' + repr(texts[0][:90]) if texts else ''}; {still} still open "
                       f"after {args.idle_wait:g} s")
        else:
            outcome = (f"accepted: {still}/{len(conns)} open after {args.idle_wait:g} s, "
                       f"kept for the declared 24.9 days")
        per = (with_rss - attack.before) / still if still and not errors else None
        attack.finish(outcome, f"{len(conns):,} idle connections, SETUP max lifetime and "
                               f"keepalive 2^31-1 ms",
                      per=per, per_unit="connection", details={"errors": errors,
                                                               "still_open": still})
    finally:
        attack.close()


def scenario_burst(run: Run) -> None:
    args = run.args
    attack = Attack(run, "burst")
    try:
        driver = attack.driver
        conns = [driver.open(HOST, attack.server.port) for _ in range(args.burst)]
        wire = raw.setup() + raw.request_response(1, b"burst")
        written = set()

        def tick() -> None:
            for c in conns:
                if c.connected is not None and id(c) not in written:
                    written.add(id(c))
                    driver.write(c, wire)

        driver.run(60, until=lambda: all(c.payloads(1) or c.closed is not None for c in conns),
                   tick=tick)
        connect_ms = pct([c.connected * 1000 for c in conns if c.connected is not None])
        answer_ms = pct([c.first_frame_at * 1000 for c in conns
                         if c.first_frame_at is not None and c.payloads(1)])
        failed = sum(1 for c in conns if not c.payloads(1))
        outcome = (f"connect p50 {connect_ms.get('p50', 0):,.0f}, p90 "
                   f"{connect_ms.get('p90', 0):,.0f}, p99 {connect_ms.get('p99', 0):,.0f}, max "
                   f"{connect_ms.get('max', 0):,.0f} ms; answer p50 "
                   f"{answer_ms.get('p50', 0):,.0f}, p99 {answer_ms.get('p99', 0):,.0f}, max "
                   f"{answer_ms.get('max', 0):,.0f} ms; {failed} not answered")
        attack.finish(outcome, f"{args.burst:,} connects at once, then SETUP + "
                               f"request-response each",
                      details={"connect_ms": connect_ms, "answer_ms": answer_ms,
                               "failed": failed})
    finally:
        attack.close()


def scenario_oversize(run: Run) -> None:
    args = run.args
    attack = Attack(run, "oversize", ["--max-frame-size", "1024"])
    try:
        driver = attack.driver
        wire = (raw.setup() + raw.request_response(1, b"before the oversize frame")
                + raw.prefix(2000) + b"\0" * 100)
        conns = []
        for _ in range(args.oversize_connections):
            conn = driver.open(HOST, attack.server.port)
            driver.run(5, until=lambda c=conn: c.connected is not None or c.closed is not None)
            driver.write(conn, wire)  # one write: one segment on loopback
            conns.append(conn)
        driver.run(10, until=lambda: all(c.closed is not None for c in conns))
        answered = sum(1 for c in conns if c.payloads(1))
        errors = sorted({e for c in conns for e in c.errors()})
        outcome = (f"request-response answered on {answered}/{len(conns)} connections; "
                   f"then {', '.join(f'ERROR[{e}]' for e in errors) or 'no ERROR'}, "
                   f"{sum(c.closed is not None for c in conns)} closed by the server")
        attack.finish(outcome, f"{len(conns)} x (SETUP, request-response, 2,000-byte prefix) "
                               f"in one write; --max-frame-size 1024",
                      details={"answered": answered, "errors": errors})
    finally:
        attack.close()


# ----------------------------------------------------------------------------- output


def machine() -> dict:
    out = {"cpus": os.cpu_count(), "python": platform.python_version(),
           "kernel": platform.release()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    out["cpu"] = " ".join(line.split(":", 1)[1].split())
                    break
        with open("/proc/meminfo") as f:
            out["memory_mib"] = int(f.readline().split()[1]) // 1024
    except OSError:
        pass
    try:
        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                                       capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               cwd=REPO, capture_output=True, text=True).stdout.strip()
        if dirty:
            out["commit"] += " + uncommitted changes"
    except OSError:
        pass
    return out


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def render(rows: list[dict]) -> str:
    header = ["scenario", "load", "server RSS MiB before / peak / after", "per unit",
              "good client RTT ms p50/max: open conn; new conn", "outcome"]
    table = [header]
    for r in rows:
        per = r.get("per")
        per_text = (f"{per / 1024:,.1f} KiB / {r['per_unit']}" if per is not None else "-")
        rss = (f"{mib(r.get('before'))} / {mib(r.get('peak'))} / {mib(r.get('after'))}"
               if r.get("before") is not None else "-")
        table.append([r["scenario"], r["load"], rss, per_text, probe_text(r.get("probe")),
                      r.get("outcome", "")])
    widths = [max(len(row[i]) for row in table) for i in range(len(header) - 1)]
    lines = []
    for n, row in enumerate(table):
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths)) + "  " + row[-1])
        if n == 0:
            lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 7)
    return "\n".join(lines)


def rst_text(text: str) -> str:
    """Plain text for a reST cell: options as literals, ``*`` escaped."""
    text = text.replace("*", "\\*")
    return re.sub(r"(--[a-z][a-z-]*(?: \d+)?)", r"``\1``", text)


def render_rst(rows: list[dict], footer: str) -> str:
    """The same table as a reST ``list-table`` (for docs/reliability.rst), then ``footer``."""
    out = [".. list-table::", "   :header-rows: 1", "   :widths: 12 22 14 14 38", "",
           "   * - scenario", "     - load", "     - server RSS, MiB: before / peak / after",
           "     - good client, ms (p50/max): open connection; new connection",
           "     - outcome"]
    for r in rows:
        rss = (f"{mib(r.get('before'))} / {mib(r.get('peak'))} / {mib(r.get('after'))}"
               if r.get("before") is not None else "-")
        per = r.get("per")
        if per is not None:
            rss += f" ({per / 1024:,.1f} KiB per {r['per_unit']})"
        cells = [r["scenario"], r["load"], rss, probe_text(r.get("probe")),
                 r.get("outcome", "")]
        out.append(f"   * - {cells[0]}")
        out.extend(f"     - {rst_text(c)}" for c in cells[1:])
    return "\n".join(out) + "\n\n" + footer + "\n"


# ----------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.stress",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(SCENARIOS),
                   help=f"comma-separated scenarios (default all: {','.join(SCENARIOS)})")
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of minutes")
    p.add_argument("--json", metavar="FILE", help="also write every number to FILE")
    p.add_argument("--rst", metavar="FILE", help="also write the table as a reST list-table")
    p.add_argument("--logs", metavar="DIR", help="keep the server and client logs in DIR")
    p.add_argument("--server-arg", action="append", default=[], metavar="OPTION",
                   help="an extra twistd rsocket option for every server (repeat)")
    p.add_argument("--rss-cap", type=int, default=2048, metavar="MIB",
                   help="stop an attack when the server's RSS passes this (default 2048)")
    p.add_argument("--code", metavar="DIR",
                   help="import rsocket_tx (and its twistd plugin) from DIR instead of this "
                        "repository, e.g. an older version made with `git archive REV "
                        "rsocket_tx twisted | tar -x -C DIR`")
    p.add_argument("--timeout", type=float, default=120.0,
                   help="seconds a client may take to set up its load (plus per-size slack)")
    g = p.add_argument_group("sizes")
    g.add_argument("--connections", default=None, metavar="N,N",
                   help="connection counts (default 1000,4000; quick 200,1000)")
    g.add_argument("--connect-concurrency", type=int, default=200)
    g.add_argument("--streams", type=int, default=None, help="default 10000; quick 1000")
    g.add_argument("--soak-seconds", type=float, default=None, help="default 600; quick 30")
    g.add_argument("--soak-sessions", type=int, default=4)
    g.add_argument("--cut-every", type=float, default=5.0, metavar="SECONDS")
    g.add_argument("--sample-every", type=float, default=5.0, metavar="SECONDS")
    g.add_argument("--seed", type=int, default=1)
    g.add_argument("--prefix-connections", type=int, default=None, help="default 300; quick 20")
    g.add_argument("--hold", type=float, default=None, help="seconds (default 10; quick 3)")
    g.add_argument("--setup-limit-connections", type=int, default=None,
                   help="default 1000; quick 100")
    g.add_argument("--setup-frame-size", type=int, default=128 * 1024, metavar="BYTES",
                   help="the length the setup-limit attack announces (default 131072, the "
                        "default max_setup_frame_size)")
    g.add_argument("--budget-connections", type=int, default=None,
                   help="default 4596 (the default max_connections + 500); quick 1100")
    g.add_argument("--waves", type=int, default=None, help="default 5; quick 3")
    g.add_argument("--wave-size", type=int, default=None, help="default 32; quick 8")
    g.add_argument("--reassembly-total", type=int, default=None, metavar="BYTES",
                   help="default 2 GiB; quick 256 MiB")
    g.add_argument("--reassembly-per-stream", type=int, default=63 * MiB, metavar="BYTES")
    g.add_argument("--fragment-size", type=int, default=4 * MiB, metavar="BYTES")
    g.add_argument("--max-streams", type=int, default=1024)
    g.add_argument("--reassembly-connections", type=int, default=None,
                   help="connections of reassembly-closed (default 16; quick 8)")
    g.add_argument("--small-fragment-size", type=int, default=16 * 1024, metavar="BYTES",
                   help="fragment size of reassembly-closed (default 16384)")
    g.add_argument("--idle-connections", type=int, default=None, help="default 1000; quick 100")
    g.add_argument("--idle-wait", type=float, default=3.0, metavar="SECONDS")
    g.add_argument("--burst", type=int, default=None, help="default 1000; quick 200")
    g.add_argument("--oversize-connections", type=int, default=None,
                   help="default 100; quick 20")
    args = p.parse_args(argv)
    full_quick = {
        "connections": ("1000,4000", "200,1000"), "streams": (10_000, 1_000),
        "soak_seconds": (600.0, 30.0), "prefix_connections": (300, 20),
        "setup_limit_connections": (1000, 100), "budget_connections": (4_596, 1_100),
        "hold": (10.0, 3.0),
        "waves": (5, 3), "wave_size": (32, 8), "reassembly_total": (2048 * MiB, 256 * MiB),
        "reassembly_connections": (16, 8),
        "idle_connections": (1000, 100), "burst": (1000, 200), "oversize_connections": (100, 20),
    }
    for key, (full, quick) in full_quick.items():
        if getattr(args, key) is None:
            setattr(args, key, quick if args.quick else full)
    args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = [s for s in args.only if s not in SCENARIOS]
    if unknown:
        p.error(f"unknown scenario(s) {unknown}; known: {', '.join(SCENARIOS)}")
    return args


def main(argv: list[str] | None = None) -> int:
    global CODE
    args = parse_args(argv)
    CODE = Path(args.code).resolve() if args.code else None
    soft, hard = raise_file_limit()
    run = Run(args)
    info = machine()
    if CODE is not None:
        info["code"] = str(CODE)
    info["load_start"] = loadavg()
    info["file_limit"] = [soft, hard]
    info["command"] = "python -m benchmarks.stress " + " ".join(
        sys.argv[1:] if argv is None else argv)
    run.progress(f"logs in {run.log_dir}; file limit {soft}/{hard}; load {info['load_start']}")
    scenarios = {
        "connections": lambda: [scenario_connections(run, int(n))
                                for n in str(args.connections).split(",") if n],
        "streams": lambda: scenario_streams(run),
        "soak": lambda: scenario_soak(run),
        "prefix": lambda: scenario_prefix(run),
        "setup-limit": lambda: scenario_setup_limit(run),
        "budget": lambda: scenario_budget(run),
        "waves": lambda: scenario_waves(run, "waves", args.wave_size, raw.MAX_LENGTH),
        "waves-setup-limit": lambda: scenario_waves(run, "waves-setup-limit",
                                                    args.setup_limit_connections,
                                                    args.setup_frame_size),
        "reassembly": lambda: scenario_reassembly(run),
        "reassembly-closed": lambda: scenario_reassembly_closed(run),
        "lifetime": lambda: scenario_lifetime(run),
        "burst": lambda: scenario_burst(run),
        "oversize": lambda: scenario_oversize(run),
    }
    try:
        for name in SCENARIOS:
            if name not in args.only:
                continue
            run.progress(f"{name} ...")
            try:
                scenarios[name]()
            except Exception as exc:
                run.add({"scenario": name, "load": "-", "outcome": f"error: {exc}"})
    except KeyboardInterrupt:
        run.progress("interrupted")
    info["load_end"] = loadavg()
    info["load_max"] = max(run.loads, default="?")
    info["minutes"] = round((time.monotonic() - run.started) / 60, 1)
    print(render(run.rows))
    footer = (f"({info['command']}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; "
          f"{info.get('cpus')} CPUs ({info.get('cpu', '?')}), {info.get('memory_mib', 0):,} MiB, "
          f"Python {info['python']}, Linux {info['kernel']}; load average "
          f"{info['load_start']} at the start, {info['load_end']} at the end, 1-minute "
          f"load up to {info['load_max']}; "
          f"{info['minutes']} min; "
          + (f"rsocket_tx from {info['code']})" if "code" in info
             else f"commit {info.get('commit', '?')})"))
    print("\n" + footer)
    if args.rst:
        with open(args.rst, "w") as f:
            f.write(render_rst(run.rows, footer))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": info, "rows": run.rows}, f, indent=1, default=str)
    if not args.logs:
        shutil.rmtree(run.log_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
