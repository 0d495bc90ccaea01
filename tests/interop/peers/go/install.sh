#!/usr/bin/env bash
# Build the rsocket-go 0.8.12 interop peer (tests/interop/peers/go): bin/server and bin/client.
#
#   tests/interop/peers/go/install.sh            # build unless nothing changed
#   tests/interop/peers/go/install.sh --force    # rebuild
#
# Dependencies come from the committed go.mod + go.sum (go build -mod=readonly: a missing or
# mismatching checksum fails the build instead of changing the files) through the Go module
# proxy configured on the machine (GOPROXY; nothing is named here), into the user's module
# cache (~/go/pkg/mod).  The build is skipped when .build-stamp holds the sha256 of go.mod,
# go.sum and every .go file and both binaries exist.  Needs go >= 1.22 (checked with 1.26).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
peer_init go "$@"
peer_require go "go >= 1.22"
# GOTOOLCHAIN=local: build with the installed go, never download another toolchain
peer_build "go.mod go.sum cmd internal" "bin/server bin/client" \
    env GOTOOLCHAIN=local go build -mod=readonly -buildvcs=false -trimpath -o bin/ \
    ./cmd/server ./cmd/client
