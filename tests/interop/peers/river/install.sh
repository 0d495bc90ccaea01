#!/usr/bin/env bash
# Build the Apache River 2.2.3 Jini ERI mux peer (Server, ClientDaemon) into
# target/river-peer.jar (one fat jar: the programs + net.jini:jsk-platform:2.2.3), and the
# java.rmi.activation.ActivationID stand-in (stub/) into target/patch/ (git-ignored).
#
#   tests/interop/peers/river/install.sh            # build unless up to date
#   tests/interop/peers/river/install.sh --force    # rebuild
#
# Builds from the committed pom.xml (every version pinned) with Maven and Java 17; River's jar
# comes from the default Maven repository into ~/.m2 (cached between runs).  Skipped when
# .build-stamp holds the sha256 of pom.xml, src/ and stub/ and both outputs exist.  Fails
# (non-zero exit) when java, javac, mvn or the build fails.  Run the programs with the JVM
# flags of README.md (river_peer.py passes them).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
peer_init river "$@"
peer_require_java17
peer_require javac "the JDK 17 compiler, for the ActivationID stand-in"

build() {
    mvn -B -q -DskipTests package
    rm -rf target/patch
    # the stand-in belongs to module java.rmi: compile it as part of that module
    javac --release 17 --patch-module java.rmi=stub -d target/patch \
        stub/java/rmi/activation/ActivationID.java
}

peer_build "pom.xml src stub" \
    "target/river-peer.jar target/patch/java/rmi/activation/ActivationID.class" build
