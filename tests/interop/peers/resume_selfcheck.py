"""Validate the rsocket-js 1.0.0-alpha.3 resume peers against each other, through the
fault-injecting proxy of the tests (``tests/faultproxy.py``), and print what they put on the
wire for resumption.

Usage (from the repository root, with the project venv)::

    .venv/bin/python tests/interop/peers/resume_selfcheck.py [--seed S] [--count N]
        [--cuts K] [--low BYTES] [--high BYTES] [--keepalive MS] [--reconnect-delay MS]
        [--session-timeout MS] [--frames]

It starts ``js-1.0.0-alpha.3/resume_server.js``, puts a :class:`faultproxy.FaultProxy` in front
of it that cuts K connections at random points (seeded; boundary and mid-frame alternately,
client-to-server or server-to-client), and runs ``resume_client.js`` request-stream and
request-channel of N items through it. For each run it prints the client's result, the cuts,
and every connection-level frame seen by the proxy (SETUP, RESUME, RESUME_OK, ERROR on stream
0, and a summary of the KEEPALIVE positions; ``--frames`` prints every KEEPALIVE). Exit code 0
when every item arrived exactly once and in order in both runs. README.md ("Resume") records
the results. Not a pytest test: ``tests/interop/test_resume_interop.py`` is.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
TESTS = HERE.parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS.parent))

from faultproxy import FaultProxy, RandomCuts  # noqa: E402
from twisted.internet import reactor, threads  # noqa: E402

from rsocket_tx.core.frames import (  # noqa: E402
    ErrorFrame,
    KeepaliveFrame,
    ResumeFrame,
    ResumeOkFrame,
    SetupFrame,
    decode,
)

JS = HERE / "js-1.0.0-alpha.3"


def describe(conn, direction: str, frame: bytes, log: list, show_keepalive: bool) -> None:
    if frame[:4] != b"\x00\x00\x00\x00":
        return
    f = decode(frame)
    where = f"conn {conn.index} {direction}"
    if isinstance(f, SetupFrame):
        log.append(f"{where} SETUP version {f.major_version}.{f.minor_version} R="
                   f"{f.resume_token is not None} token {len(f.resume_token or b'')} bytes")
    elif isinstance(f, ResumeFrame):
        log.append(f"{where} RESUME version {f.major_version}.{f.minor_version} "
                   f"last_received_server={f.last_received_server_position} "
                   f"first_available_client={f.first_available_client_position}")
    elif isinstance(f, ResumeOkFrame):
        log.append(f"{where} RESUME_OK last_received_client={f.last_received_client_position}")
    elif isinstance(f, ErrorFrame):
        log.append(f"{where} ERROR 0x{f.error_code:X} {f.data.decode('utf-8', 'replace')}")
    elif isinstance(f, KeepaliveFrame):
        if show_keepalive:
            log.append(f"{where} KEEPALIVE R={f.respond} position={f.last_received_position}")
        else:
            key = (conn.index, direction, f.respond)
            counts = describe.keepalives.setdefault(key, [0, None, None])
            counts[0] += 1
            counts[1] = f.last_received_position if counts[1] is None else counts[1]
            counts[2] = f.last_received_position


describe.keepalives = {}


def start_server(session_timeout: int) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen(["node", str(JS / "resume_server.js"), "--watch-stdin",
                             "--session-timeout", str(session_timeout),
                             "--timeout", "300"], cwd=HERE, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("LISTENING "):
        raise SystemExit(f"resume_server.js did not start: {line!r}")
    return proc, int(line.split()[1])


def run_client(port: int, interaction: str, count: int, keepalive: int,
               reconnect_delay: int) -> dict:
    out = subprocess.run(["node", str(JS / "resume_client.js"), interaction, "--port", str(port),
                          "--count", str(count), "--keepalive", str(keepalive),
                          "--reconnect-delay", str(reconnect_delay),
                          "--timeout", "60"], cwd=HERE,
                         capture_output=True, text=True, timeout=90)
    try:
        result = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        result = {"failure": out.stdout + out.stderr}
    result["exit_code"] = out.returncode
    return result


async def check(args) -> bool:
    server, port = start_server(args.session_timeout)
    ok = True
    try:
        for interaction in ("request-stream", "request-channel"):
            log: list[str] = []
            describe.keepalives = {}
            # a stream's client-to-server side carries only REQUEST_N: cut the other way
            directions = ("s2c",) if interaction == "request-stream" else ("c2s", "s2c")
            plan = RandomCuts(args.seed, args.cuts, args.low, args.high, directions=directions)
            proxy = FaultProxy(port, plan=plan,
                               observer=lambda c, d, f, log=log: describe(c, d, f, log,
                                                                          args.frames))
            proxy.listen()
            result = await threads.deferToThread(run_client, proxy.port, interaction, args.count,
                                                 args.keepalive, args.reconnect_delay)
            await proxy.close()
            good = result.get("exit_code") == 0 and result.get("received") == args.count \
                and result.get("in_order") is True
            ok = ok and good
            print(f"== {interaction} x {args.count}, seed {args.seed}: "
                  f"{'PASS' if good else 'FAIL'}")
            print("client:", json.dumps(result))
            for cut in proxy.cuts:
                print(f"cut: conn {cut.index} {cut.direction} at byte {cut.offset} "
                      f"({'frame boundary' if cut.boundary else 'inside a frame'})")
            for line in log:
                print(line)
            for (index, direction, respond), (n, first, last) in sorted(
                    describe.keepalives.items()):
                print(f"conn {index} {direction} KEEPALIVE R={respond}: {n} frames, positions "
                      f"{first} .. {last}")
    finally:
        server.stdin.close()
        server.wait(timeout=10)
    return ok


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=10000)
    parser.add_argument("--cuts", type=int, default=6)
    parser.add_argument("--low", type=int, default=2000)
    parser.add_argument("--high", type=int, default=30000)
    parser.add_argument("--keepalive", type=int, default=1000, help="client keepalive, ms")
    parser.add_argument("--reconnect-delay", type=int, default=50, help="client, ms")
    parser.add_argument("--session-timeout", type=int, default=60000, help="server, ms")
    parser.add_argument("--frames", action="store_true")
    args = parser.parse_args()
    outcome = []

    def done(ok):
        outcome.append(ok)
        reactor.stop()

    def failed(failure):
        failure.printTraceback()
        outcome.append(False)
        reactor.stop()

    from twisted.internet.defer import ensureDeferred
    reactor.callWhenRunning(lambda: ensureDeferred(check(args)).addCallbacks(done, failed))
    reactor.run()
    sys.exit(0 if outcome and outcome[0] else 1)


if __name__ == "__main__":
    main()
