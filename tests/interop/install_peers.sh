#!/usr/bin/env bash
# Install the third-party RSocket peers used by tests/interop (idempotent, safe to rerun).
#
#   tests/interop/install_peers.sh            # install what is missing
#   tests/interop/install_peers.sh --force    # reinstall the npm folders
#
# * rsocket-js 1.0.0-alpha.3 and 0.0.27: `npm ci` from the committed package-lock.json into
#   tests/interop/peers/js-1.0.0-alpha.3/ and tests/interop/peers/js-0.0.27/ (separate folders:
#   same package names, different versions).  Skipped when node_modules already matches the
#   lock file (stamp file node_modules/.rsocket-tx-lock.sha256).
# * rsocket-py 0.4.20: pip-installed (with aiohttp, websockets) into $RSOCKET_TX_INTEROP_PYTHON,
#   default the project venv (.venv/bin/python) or python3, only if missing or another version.
# * every tests/interop/peers/*/install.sh (the JVM, Rust and Go peers): each builds its peer
#   from committed, pinned build files (pom.xml, Cargo.lock, go.sum) into a git-ignored folder
#   and skips the build when its sources are unchanged; --force is passed on.
# Needs Node 20 + npm, Java 17 + Maven, cargo, go and the package registries.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
FORCE=0
if [ "${1:-}" = "--force" ]; then
    FORCE=1
fi

if [ -n "${RSOCKET_TX_INTEROP_PYTHON:-}" ]; then
    PYTHON="$RSOCKET_TX_INTEROP_PYTHON"
elif [ -x "$ROOT/.venv/bin/python" ]; then
    PYTHON="$ROOT/.venv/bin/python"
else
    PYTHON="python3"
fi

command -v node >/dev/null 2>&1 || { echo "install_peers.sh: node (20.x) not found" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "install_peers.sh: npm not found" >&2; exit 1; }
NODE_MAJOR="$(node -p 'process.versions.node.split(".")[0]')"
if [ "$NODE_MAJOR" -lt 20 ]; then
    echo "install_peers.sh: warning: Node $NODE_MAJOR found, the peers were checked with Node 20" >&2
fi

for peer in js-1.0.0-alpha.3 js-0.0.27; do
    dir="$HERE/peers/$peer"
    stamp="$dir/node_modules/.rsocket-tx-lock.sha256"
    want="$(sha256sum "$dir/package-lock.json" | cut -d' ' -f1)"
    if [ "$FORCE" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
        echo "install_peers.sh: $peer up to date"
        continue
    fi
    echo "install_peers.sh: npm ci in $dir"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
    echo "$want" > "$stamp"
done

if "$PYTHON" -c "import importlib.metadata as m, sys; sys.exit(m.version('rsocket') != '0.4.20')" \
        >/dev/null 2>&1; then
    echo "install_peers.sh: rsocket-py 0.4.20 present in $PYTHON"
else
    echo "install_peers.sh: pip install rsocket==0.4.20 aiohttp websockets into $PYTHON"
    "$PYTHON" -m pip install "rsocket==0.4.20" aiohttp websockets
fi
for script in "$HERE"/peers/*/install.sh; do
    [ -f "$script" ] || continue
    echo "install_peers.sh: $script"
    bash "$script" ${1:-}
done
echo "install_peers.sh: done"
