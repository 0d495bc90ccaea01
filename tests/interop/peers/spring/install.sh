#!/usr/bin/env bash
# Build the Spring Boot RSocket peer (server mode: @MessageMapping routes behind Spring Security
# RSocket; client mode: an RSocketRequester daemon) into target/rsocket-spring-peer.jar, one
# executable Spring Boot jar (git-ignored).
#
#   tests/interop/peers/spring/install.sh            # build unless up to date
#   tests/interop/peers/spring/install.sh --force    # rebuild
#
# Builds from the committed pom.xml (parent spring-boot-starter-parent 4.0.7: every version
# comes from its dependency management) with Maven and Java 17; the dependencies come from the
# default Maven repository into ~/.m2 (cached between runs).  Skipped when .build-stamp holds
# the sha256 of pom.xml and src/ and the jar exists.  Fails (non-zero exit) when java, mvn or
# the build fails.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
peer_init spring "$@"
peer_require_java17
peer_build "pom.xml src" "target/rsocket-spring-peer.jar" mvn -B -q -DskipTests package
