#!/usr/bin/env bash
# Build the rsocket-rust 0.7.5 interop peer (tests/interop/peers/rust): target/release/server
# and target/release/client.
#
#   tests/interop/peers/rust/install.sh            # build unless nothing changed
#   tests/interop/peers/rust/install.sh --force    # rebuild
#
# Dependencies come from the committed Cargo.lock (cargo build --locked: a lock file that does
# not match Cargo.toml fails the build instead of being rewritten) through the crate registry
# configured on the machine (nothing is named here), into the user's cargo cache
# (~/.cargo/registry); the build goes to ./target (git-ignored), whatever CARGO_TARGET_DIR
# says.  The build is skipped when .build-stamp holds the sha256 of Cargo.toml, Cargo.lock and
# every file under src/ and both binaries exist.  Needs cargo >= 1.70 (checked with 1.95) and,
# for the WebSocket transport's native-tls, OpenSSL headers and pkg-config (libssl-dev).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
peer_init rust "$@"
peer_require cargo "cargo >= 1.70"

# native-tls (the WebSocket transport) builds against OpenSSL found through pkg-config: Debian's
# libssl-dev and pkg-config, installed with apt when missing (root, else sudo)
if ! pkg-config --exists openssl 2>/dev/null; then
    SUDO="$([ "$(id -u)" = 0 ] || echo sudo)"
    echo "peers/rust/install.sh: apt-get install libssl-dev pkg-config"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libssl-dev pkg-config
fi

peer_build "Cargo.toml Cargo.lock src" "target/release/server target/release/client" \
    cargo build --release --locked --quiet --target-dir target
