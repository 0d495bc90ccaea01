#!/usr/bin/env bash
# Build the hashicorp/yamux v0.1.2 interop peer (tests/interop/peers/yamux-go): bin/yamuxpeer.
#
#   tests/interop/peers/yamux-go/install.sh            # build unless nothing changed
#   tests/interop/peers/yamux-go/install.sh --force    # rebuild
#
# The module comes from the committed go.mod + go.sum (go build -mod=readonly: a missing or
# mismatching checksum fails the build) through the Go module proxy configured on the machine
# (GOPROXY; nothing is named here), into the user's module cache.  Skipped while .build-stamp
# holds the sha256 of go.mod, go.sum and cmd/ and the binary exists.  Needs go >= 1.22.
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
peer_init yamux-go "$@"
peer_require go "go >= 1.22"
# GOTOOLCHAIN=local: build with the installed go, never download another toolchain
peer_build "go.mod go.sum cmd" "bin/yamuxpeer" \
    env GOTOOLCHAIN=local go build -mod=readonly -buildvcs=false -trimpath -o bin/ \
    ./cmd/yamuxpeer
