#!/usr/bin/env bash
# Build the example browser page into examples/browser/dist/ (index.html + app.js).
#
#   examples/browser/build.sh            # npm ci when node_modules is missing or stale, then build
#   examples/browser/build.sh --force    # npm ci anyway
#
# `npm ci` installs exactly what package-lock.json pins (rsocket-core and
# rsocket-websocket-client 1.0.0-alpha.3, the `buffer` polyfill, esbuild); it is skipped when
# node_modules already matches the lock file (stamp node_modules/.rsocket-tx-lock.sha256).
# `npm run build` then bundles src/ with esbuild (build.mjs). Needs Node >= 18 + npm and the npm
# registry (for npm ci only).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FORCE=0
if [ "${1:-}" = "--force" ]; then
    FORCE=1
fi

command -v node >/dev/null 2>&1 || { echo "build.sh: node (>= 18) not found" >&2; exit 1; }
command -v npm >/dev/null 2>&1 || { echo "build.sh: npm not found" >&2; exit 1; }

cd "$HERE"
stamp="node_modules/.rsocket-tx-lock.sha256"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [ "$FORCE" = 0 ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "build.sh: node_modules up to date"
else
    echo "build.sh: npm ci in $HERE"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$want" > "$stamp"
fi
npm run --silent build
