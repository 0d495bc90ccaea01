#!/usr/bin/env bash
# Build the rsocket-java 1.1.5 reliability peers (resume, lease, keepalive) into
# target/rsocket-java-reliability.jar (one fat jar; git-ignored).
#
#   tests/interop/peers/java-reliability/install.sh            # build unless up to date
#   tests/interop/peers/java-reliability/install.sh --force    # rebuild
#
# Builds from the committed pom.xml (every version pinned) with Maven and Java 17; the
# dependencies come from the default Maven repository into ~/.m2 (cached between runs).
# Skipped when .build-stamp holds the sha256 of pom.xml and src/ and the jar exists.
# Fails (non-zero exit) when java, mvn or the build fails.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
peer_init java-reliability "$@"
peer_require_java17
peer_build "pom.xml src" "target/rsocket-java-reliability.jar" mvn -B -q package
