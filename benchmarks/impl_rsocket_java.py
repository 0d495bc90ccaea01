"""rsocket-java 1.1.5 (the reference implementation: Netty, Reactor) server and client for the
benchmark workloads.

The programs are Java (``benchmarks/java``, built into ``benchmarks/java/target/
rsocket-java-bench.jar`` by ``benchmarks/java/build.sh``); this module is the Python entry point
``run.py`` starts like every other implementation::

    python -m benchmarks.impl_rsocket_java server            # -> "PORT <n>" on stdout
    python -m benchmarks.impl_rsocket_java client PORT SPEC  # -> "RESULT <json>" on stdout

It pins the CPUs like ``common.child_main`` does, then replaces itself (``os.execv``) with
``java [JVM options] -cp JAR benchmark.Main <same arguments>``: the JVM inherits stdin, stdout,
stderr and the environment (``BENCH_TRANSPORT``, ``BENCH_TLS_CERT``/``BENCH_TLS_KEY``), speaks
the same line protocol and exits when stdin closes. When there is no ``java`` or no jar, the
server prints ``UNAVAILABLE not available: <reason>`` (and a client an error result) and the
harness shows ``n/a (...)`` in the rsocket-java cells.

Environment: ``JAVA`` (the java executable; default ``$JAVA_HOME/bin/java`` or ``java`` on
PATH), ``BENCH_JVM_OPTS`` (extra JVM options, split on white space), ``BENCH_JVM_WARMUP_S``
(client warm-up in seconds, default 2) and ``BENCH_JVM_SERVER_WARMUP_S`` (the server's self
warm-up before it prints its port, default 3).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

if __package__ in (None, ""):  # executed as a file
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.common import announce_unavailable, emit_result, pin_cpus

JAVA_DIR = Path(__file__).resolve().parent / "java"
#: The fat jar (rsocket-java, Reactor Netty and the benchmark classes) build.sh makes.
JAR = JAVA_DIR / "target" / "rsocket-java-bench.jar"
MAIN_CLASS = "benchmark.Main"
#: Prefix of every "cannot run here" reason; run.py shows such cells as "n/a (...)".
UNAVAILABLE_PREFIX = "not available: "


def find_java() -> str | None:
    """Path of the java executable: ``$JAVA``, ``$JAVA_HOME/bin/java`` or ``java`` on PATH."""
    if os.environ.get("JAVA"):
        return shutil.which(os.environ["JAVA"])
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return shutil.which("java")


def java_command() -> tuple[list[str] | None, str | None]:
    """(argv prefix ``[java, opts..., -cp, JAR, MAIN_CLASS]``, None) or (None, reason)."""
    java = find_java()
    if java is None:
        return None, UNAVAILABLE_PREFIX + "no java on PATH (Java 17; or set JAVA)"
    if not JAR.is_file():
        return None, UNAVAILABLE_PREFIX + "no jar (run benchmarks/java/build.sh)"
    opts = os.environ.get("BENCH_JVM_OPTS", "").split()
    return [java, *opts, "-cp", str(JAR), MAIN_CLASS], None


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] not in (["server"], ["client"]):
        sys.stderr.write("usage: server | client PORT SPEC_JSON\n")
        sys.exit(2)
    pin_cpus(os.environ.get("BENCH_CPUS_" + argv[0].upper(), ""))
    command, problem = java_command()
    if problem is not None:
        if argv[0] == "server":
            announce_unavailable(problem)
        else:
            emit_result(error=problem)
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(command[0], command + argv)


if __name__ == "__main__":
    main()
