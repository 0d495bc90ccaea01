#!/usr/bin/env bash
# Build the Rust yamux 0.13.10 interop peer (tests/interop/peers/yamux-rust):
# target/release/yamuxpeer.
#
#   tests/interop/peers/yamux-rust/install.sh            # build unless nothing changed
#   tests/interop/peers/yamux-rust/install.sh --force    # rebuild
#
# Dependencies come from the committed Cargo.lock (cargo build --locked: a lock file that does
# not match Cargo.toml fails the build) through the crate registry configured on the machine
# (nothing is named here), into the user's cargo cache; the build goes to ./target
# (git-ignored).  Skipped while .build-stamp holds the sha256 of Cargo.toml, Cargo.lock and
# src/ and the binary exists.  Needs cargo >= 1.75 (checked with 1.95).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
peer_init yamux-rust "$@"
peer_require cargo "cargo >= 1.75"
peer_build "Cargo.toml Cargo.lock src" "target/release/yamuxpeer" \
    cargo build --release --locked --quiet --target-dir target
