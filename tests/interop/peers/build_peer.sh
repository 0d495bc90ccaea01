# Shared by the compiled peers' install.sh scripts (sourced, not run): build a peer from its
# committed, pinned build files into git-ignored outputs, skipping the build while nothing
# changed.
#
#   source "$(dirname "${BASH_SOURCE[0]}")/../build_peer.sh"
#   peer_init NAME "$@"                       # NAME in messages; "$@" may hold --force
#   peer_require_java17                       # or: peer_require TOOL "why"
#   peer_build "INPUTS" "OUTPUTS" COMMAND...  # in the peer's folder
#
# INPUTS are files and folders (relative to the peer's folder) whose every file goes into a
# sha256 stamp kept in .build-stamp; OUTPUTS the files the build must produce.  The build is
# skipped when the stamp matches and every output exists, unless --force.  Any failure (a
# missing tool, a failed build, a missing output) exits non-zero with "NAME: FAILED: why".

peer_init() {
    PEER_NAME="$1"
    PEER_DIR="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
    PEER_FORCE=0
    if [ "${2:-}" = "--force" ]; then
        PEER_FORCE=1
    fi
}

peer_fail() {
    echo "$PEER_NAME/install.sh: FAILED: $*" >&2
    exit 1
}

peer_require() {
    command -v "$1" >/dev/null 2>&1 || peer_fail "$1 not found ($2)"
}

peer_require_java17() {
    peer_require java "Java 17"
    peer_require mvn "Maven 3.8"
    local major
    major="$(java -XshowSettings:properties -version 2>&1 \
        | sed -n 's/^ *java.specification.version = //p')"
    [ "${major:-0}" -ge 17 ] 2>/dev/null || peer_fail "Java 17 or later needed, found ${major:-none}"
}

peer_build() {
    local inputs="$1" outputs="$2" want output
    shift 2
    cd "$PEER_DIR"
    # shellcheck disable=SC2086  # INPUTS and OUTPUTS are word lists
    want="$(find $inputs -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -d' ' -f1)"
    if [ "$PEER_FORCE" = 0 ] && [ -f .build-stamp ] && [ "$(cat .build-stamp)" = "$want" ]; then
        local missing=0
        for output in $outputs; do
            [ -e "$output" ] || missing=1
        done
        if [ "$missing" = 0 ]; then
            echo "$PEER_NAME/install.sh: up to date ($outputs)"
            return 0
        fi
    fi
    echo "$PEER_NAME/install.sh: $* (in $PEER_DIR)"
    rm -f .build-stamp
    "$@" || peer_fail "the build failed: $*"
    for output in $outputs; do
        [ -e "$output" ] || peer_fail "the build did not produce $output"
    done
    echo "$want" > .build-stamp
    echo "$PEER_NAME/install.sh: built $outputs"
}
