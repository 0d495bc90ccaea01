#!/usr/bin/env bash
# Build the rsocket-java 1.1.5 demo-contract peer (Server, Client, ClientDaemon) into
# target/rsocket-java-peer.jar (one fat jar; git-ignored).
#
#   tests/interop/peers/java/install.sh            # build unless up to date
#   tests/interop/peers/java/install.sh --force    # rebuild
#
# Builds from the committed pom.xml (every version pinned) with Maven and Java 17; the
# dependencies come from the default Maven repository into ~/.m2 (cached between runs).
# Skipped when .build-stamp holds the sha256 of pom.xml and src/ and the jar exists.
# Fails (non-zero exit) when java, mvn or the build fails.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
peer_init java "$@"
peer_require_java17
peer_build "pom.xml src" "target/rsocket-java-peer.jar" mvn -B -q -DskipTests package
