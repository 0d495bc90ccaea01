"""Run the fuzz targets for a bounded time, one at a time, and report inputs run and crashes.

Usage (from the repository root)::

    python -m fuzz.run [--seconds 60] [--workdir build/fuzz] [TARGET ...]
    python -m fuzz.run --report [--rst] [--workdir build/fuzz]

Each target runs under atheris (:mod:`fuzz.atheris_main`) for ``--seconds`` with its seeds
(``fuzz/corpus/<target>``) and the corpus the fuzzer grew in earlier runs
(``<workdir>/corpus/<target>``, where new inputs go). A crash (an unexpected exception, a
broken invariant, a timeout of ``--timeout`` seconds on one input, or more than
``--rss-limit-mb`` of memory) is saved under ``<workdir>/crashes/<target>/`` and the target is
started again for the time left, at most ``--max-crashes`` times. Every run is appended to
``<workdir>/stats.jsonl``; ``--report`` sums them per target, and per protocol and kind
(whole-conversation targets apart from codec targets).

The exit status is 1 when a target crashed (so CI fails), else 0.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from . import targets

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

_UNITS = re.compile(rb"stat::number_of_executed_units:\s*(\d+)")
_ARTIFACT = re.compile(rb"Test unit written to (\S+)")
_ERROR = re.compile(rb"ERROR: libFuzzer: ([a-z -]+)")
_PY_EXC = b"=== Uncaught Python exception: ==="


def _signature(log: bytes) -> str:
    """What crashed: the Python exception and where it was raised, or libFuzzer's reason."""
    if _PY_EXC in log:
        lines = log.split(_PY_EXC, 1)[1].decode("utf-8", "replace").strip().splitlines()
        exc = lines[0] if lines else "?"
        where = [ln.strip() for ln in lines if ln.strip().startswith("File ")]
        return f"{exc} at {where[-1] if where else '?'}"
    m = _ERROR.search(log)
    return m.group(1).decode().strip() if m else "unknown failure"


def run_target(name: str, seconds: int, workdir: Path, args: argparse.Namespace) -> dict:
    """Fuzz ``name`` for ``seconds``; return its stats (inputs, seconds, crashes)."""
    corpus = workdir / "corpus" / name
    crashes = workdir / "crashes" / name
    logs = workdir / "logs"
    for d in (corpus, crashes, logs):
        d.mkdir(parents=True, exist_ok=True)
    seeds = HERE / "corpus" / name
    inputs = 0
    found: list[dict] = []
    start = time.monotonic()
    runs = 0
    while True:
        left = seconds - int(time.monotonic() - start)
        if left < 1 or len(found) >= args.max_crashes:
            break
        command = [sys.executable, "-m", "fuzz.atheris_main", name,
                   f"-max_total_time={left}", "-print_final_stats=1",
                   f"-artifact_prefix={crashes}/", f"-max_len={args.max_len}",
                   f"-timeout={args.timeout}", f"-rss_limit_mb={args.rss_limit_mb}",
                   str(corpus)]
        if seeds.is_dir():
            command.append(str(seeds))
        log_path = logs / f"{name}.{runs}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                                  check=False)
        runs += 1
        output = log_path.read_bytes()
        units = [int(u) for u in _UNITS.findall(output)]
        inputs += units[-1] if units else 0
        if proc.returncode == 0:
            break
        artifact = _ARTIFACT.search(output)
        found.append({"signature": _signature(output),
                      "input": artifact.group(1).decode() if artifact else None,
                      "log": str(log_path)})
        if not artifact:  # not a crash of one input (e.g. the target failed to start)
            break
    elapsed = time.monotonic() - start
    return {"target": name, "protocol": targets.load(name).PROTOCOL,
            "kind": targets.kind(name), "inputs": inputs,
            "seconds": round(elapsed, 1), "crashes": found, "time": time.time()}


def totals(rows: list[dict]) -> dict[tuple[str, str], dict]:
    """Inputs, seconds and crashes summed per ``(protocol, kind)``: a whole-conversation
    target (``KIND = "conversation"``, a few hundred inputs a second) is summed apart from the
    codec targets (``"codec"``, tens of thousands), so that neither hides the other."""
    sums: dict[tuple[str, str], dict] = defaultdict(
        lambda: {"inputs": 0, "seconds": 0.0, "crashes": 0})
    for r in rows:
        t = sums[(r["protocol"], r["kind"])]
        t["inputs"] += r["inputs"]
        t["seconds"] += r["seconds"]
        t["crashes"] += len(r["crashes"])
    return dict(sorted(sums.items()))


def _print_table(rows: list[dict], title: str) -> None:
    print(f"\n{title}")
    print(f"{'target':<22} {'protocol':<14} {'kind':<12} {'inputs':>12} {'seconds':>9} "
          f"{'inputs/s':>9} {'crashes':>7}")
    for r in rows:
        rate = r["inputs"] / r["seconds"] if r["seconds"] else 0
        print(f"{r['target']:<22} {r['protocol']:<14} {r['kind']:<12} {r['inputs']:>12,} "
              f"{r['seconds']:>9,.0f} {rate:>9,.0f} {len(r['crashes']):>7}")
    for (protocol, kind), t in totals(rows).items():
        print(f"{'total':<22} {protocol:<14} {kind:<12} {t['inputs']:>12,} "
              f"{t['seconds']:>9,.0f} {'':>9} {t['crashes']:>7}")


def _rst_table(rows: list[dict]) -> None:
    """The rows as a reStructuredText list-table (for docs/reliability.rst)."""
    print(".. list-table::\n   :header-rows: 1\n")
    print("   * - target\n     - protocol\n     - kind\n     - inputs\n     - inputs/s\n"
          "     - crashes")
    for r in rows:
        rate = r["inputs"] / r["seconds"] if r["seconds"] else 0
        print(f"   * - ``{r['target']}``\n     - {r['protocol']}\n     - {r['kind']}\n"
              f"     - {r['inputs']:,}\n     - {rate:,.0f}\n     - {len(r['crashes'])}")
    for (protocol, kind), t in totals(rows).items():
        print(f"   * - **total**\n     - {protocol}\n     - {kind}\n     - **{t['inputs']:,}**"
              f"\n     -\n     - {t['crashes']}")


def _report(workdir: Path, rst: bool = False) -> int:
    stats = workdir / "stats.jsonl"
    if not stats.exists():
        print(f"no runs recorded in {stats}")
        return 0
    merged: dict[str, dict] = {}
    for line in stats.read_text().splitlines():
        r = json.loads(line)
        m = merged.setdefault(r["target"], {"target": r["target"], "protocol": r["protocol"],
                                            "inputs": 0, "seconds": 0.0, "crashes": []})
        m["inputs"] += r["inputs"]
        m["seconds"] += r["seconds"]
        m["crashes"] += r["crashes"]
    for m in merged.values():
        m["kind"] = targets.kind(m["target"])
    rows = sorted(merged.values(), key=lambda r: (r["protocol"], r["kind"], r["target"]))
    if rst:
        _rst_table(rows)
        return 0
    _print_table(rows, f"all runs recorded in {stats}")
    for r in merged.values():
        for c in r["crashes"]:
            print(f"crash {r['target']}: {c['signature']}  input: {c['input']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fuzz.run", description=__doc__.split("\n")[0])
    parser.add_argument("targets", nargs="*", help="targets to run (default: all)")
    parser.add_argument("--seconds", type=int, default=60, help="per target (default 60)")
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "fuzz")
    parser.add_argument("--max-len", type=int, default=4096, help="largest input, in bytes")
    parser.add_argument("--timeout", type=int, default=30,
                        help="seconds one input may take before it counts as a crash")
    parser.add_argument("--rss-limit-mb", type=int, default=1024)
    parser.add_argument("--max-crashes", type=int, default=3,
                        help="crashes per target before moving on to the next")
    parser.add_argument("--report", action="store_true",
                        help="sum every recorded run instead of running")
    parser.add_argument("--rst", action="store_true",
                        help="with --report: print a reStructuredText table")
    args = parser.parse_args(argv)
    workdir = args.workdir.resolve()
    if args.report:
        return _report(workdir, args.rst)
    names = args.targets or targets.names()
    for name in names:
        targets.load(name)  # unknown names fail before anything runs
    if os.environ.get("FUZZ_NICE", "10") != "0":
        os.nice(int(os.environ.get("FUZZ_NICE", "10")))
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in names:
        print(f"fuzzing {name} for {args.seconds} s ...", flush=True)
        row = run_target(name, args.seconds, workdir, args)
        rows.append(row)
        with open(workdir / "stats.jsonl", "a") as stats:
            stats.write(json.dumps(row) + "\n")
        for c in row["crashes"]:
            print(f"  CRASH {c['signature']}\n    input: {c['input']}\n    log: {c['log']}",
                  flush=True)
    _print_table(rows, f"this run ({args.seconds} s per target)")
    crashed = [r["target"] for r in rows if r["crashes"]]
    if crashed:
        print(f"\ncrashes in: {', '.join(crashed)} (inputs under {workdir}/crashes)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
