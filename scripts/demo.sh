#!/usr/bin/env bash
# Start `twistd rsocket` (the demo responder) on 127.0.0.1, then run one rsocket-tx CLI request
# of every interaction model against it, printing each command and its output.  The server is
# always stopped at the end.  Run through `make demo` (which creates .venv first).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
BIN=$ROOT/.venv/bin
PORT=${DEMO_PORT:-7878}
HOST=127.0.0.1
URI=tcp://$HOST:$PORT
# twistd finds twisted/plugins/rsocket_tx_plugin.py through sys.path
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"

for tool in twistd rsocket-tx python; do
    if [ ! -x "$BIN/$tool" ]; then
        echo "demo: $BIN/$tool is missing; run 'make venv' (or just 'make demo')" >&2
        exit 1
    fi
done

# Refuse to talk to somebody else's server on the demo port.
if "$BIN/python" -c "import socket, sys; socket.create_connection(('$HOST', $PORT), timeout=1).close()" 2>/dev/null; then
    echo "demo: something is already listening on $HOST:$PORT; set DEMO_PORT=<free port>" >&2
    exit 1
fi

LOG=$(mktemp "${TMPDIR:-/tmp}/rsocket-tx-demo.XXXXXX")
SERVER_PID=

cleanup() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill "$SERVER_PID" 2>/dev/null || true
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    rm -f "$LOG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== starting: twistd -n --pidfile= rsocket --listen tcp:port=$PORT:interface=$HOST"
"$BIN/twistd" -n --pidfile= rsocket --listen "tcp:port=$PORT:interface=$HOST" >"$LOG" 2>&1 &
SERVER_PID=$!

# Wait (at most 10 s) until the port accepts connections, or the server has died.
if ! "$BIN/python" - "$HOST" "$PORT" "$SERVER_PID" <<'PY'
import os, socket, sys, time

host, port, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
deadline = time.monotonic() + 10
while True:
    try:
        socket.create_connection((host, port), timeout=1).close()
        sys.exit(0)
    except OSError:
        pass
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit("demo: twistd exited before listening")
    if time.monotonic() > deadline:
        sys.exit(f"demo: nothing listening on {host}:{port} after 10 s")
    time.sleep(0.1)
PY
then
    echo "---- twistd output ----" >&2
    cat "$LOG" >&2
    exit 1
fi
echo "== server is listening on $URI"

status=0
run() {
    # run DESCRIPTION RSOCKET-TX-ARGS...   (stdin is passed through)
    local what=$1
    shift
    echo
    echo "== $what"
    local shown="\$ rsocket-tx" arg
    for arg in "$@"; do
        if [[ $arg =~ ^[A-Za-z0-9_./:=@%+,-]+$ ]]; then
            shown+=" $arg"
        else
            shown+=" '${arg//\'/\'\\\'\'}'"
        fi
    done
    echo "$shown"
    if ! timeout 30 "$BIN/rsocket-tx" "$@"; then
        echo "demo: FAILED: $what" >&2
        status=1
    fi
}

run "request-response, data + metadata (the demo responder echoes both; JSON shows both)" \
    request "$URI" -d hello -m world --output json
run "fire-and-forget (the server logs it)" \
    fnf "$URI" -d "fire and forget"
run "request-stream: data is a count N, the responder streams 0 .. N-1" \
    stream "$URI" -d 5
run "request-channel, one payload per stdin line (stdin: one, two, three; echoed back)" \
    channel "$URI" -d - < <(printf 'one\ntwo\nthree\n')
run "metadata-push (the server logs it)" \
    metadata-push "$URI" -m "pushed metadata"

echo
echo "== twistd log"
cat "$LOG"
if [ "$status" -ne 0 ]; then
    echo "demo: some requests failed (see above)" >&2
fi
exit "$status"
