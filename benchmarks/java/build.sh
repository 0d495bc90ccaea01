#!/usr/bin/env bash
# Build rsocket-java's side of the benchmarks: target/rsocket-java-bench.jar, one jar holding
# the classes in src/ and every dependency pinned in pom.xml (rsocket-java 1.1.5, Reactor
# Netty), from Maven's default repository into the user's Maven cache (~/.m2).
#
#   bash benchmarks/java/build.sh [--force]
#
# The build is skipped when .build-stamp holds the sha256 of pom.xml, src/ and this script and
# the jar exists (--force rebuilds anyway). Without java or mvn it prints why and exits 0: the
# benchmark then shows "n/a (...)" in the rsocket-java cells. A failed build exits non-zero and
# leaves no jar behind (so no stale jar is measured).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
jar=target/rsocket-java-bench.jar
stamp=.build-stamp
force=0
for arg in "$@"; do
  case "$arg" in
    --force) force=1 ;;
    *) echo "usage: $0 [--force]" >&2; exit 2 ;;
  esac
done

for tool in java mvn; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "benchmarks/java: no $tool on PATH (Java 17 and Maven 3.8 are needed): not built;" \
         "the rsocket-java benchmark columns will read n/a" >&2
    exit 0
  fi
done

digest="$( (sha256sum pom.xml build.sh; find src -type f -print0 | sort -z | xargs -0 sha256sum) \
           | sha256sum | cut -d' ' -f1)"
if [[ $force == 0 && -f $jar && -f $stamp && "$(cat "$stamp")" == "$digest" ]]; then
  echo "benchmarks/java: $jar is up to date"
  exit 0
fi

rm -f "$stamp" "$jar"
echo "benchmarks/java: building $jar (mvn package)"
if ! mvn -B -q -Dstyle.color=never package; then
  rm -f "$jar"
  echo "benchmarks/java: mvn package FAILED" >&2
  exit 1
fi
if [[ ! -f $jar ]]; then
  echo "benchmarks/java: mvn package did not produce $jar" >&2
  exit 1
fi
echo "$digest" > "$stamp"
echo "benchmarks/java: built $jar"
