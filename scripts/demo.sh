#!/usr/bin/env bash
# `make demo`: the simulated control manhole of config/sites/demo.toml, the daemon polling it into the
# embedded SQLite historian, and the readings as they arrive. Everything runs on loopback and stops by itself
# after DEMO_SECONDS (default 45); Ctrl-C stops it early. Nothing here needs a real instrument.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=.venv/bin
SITE=config/sites/demo.toml
RUN=var/demo
SECONDS_TO_RUN=${DEMO_SECONDS:-45}
SCENARIO=${DEMO_SCENARIO:-demo}
mkdir -p "$RUN"
rm -f "$RUN"/pretreat.sqlite*

pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

# The MQTT broker the explosion-hazard (LEL) meter publishes to.
MOSQUITTO=$(command -v mosquitto || echo /usr/sbin/mosquitto)
cat > "$RUN/mosquitto.conf" <<EOF
listener 18830 127.0.0.1
allow_anonymous true
persistence false
user root
log_dest file $PWD/$RUN/mosquitto.log
EOF
"$MOSQUITTO" -c "$RUN/mosquitto.conf" & pids+=($!)

echo "== starting the simulated instruments (scenario: $SCENARIO)"
"$BIN/pretreat" --log-level WARNING sim --config "$SITE" --scenario "$SCENARIO" & pids+=($!)
sleep 2

echo "== checking the site file"
"$BIN/pretreat" check-config "$SITE"

echo "== starting the daemon; readings follow for ${SECONDS_TO_RUN}s (bad readings show their reason)"
"$BIN/pretreat" --log-level WARNING run --config "$SITE" 2> >(sed -u 's/^/[daemon] /' >&2) & daemon=$!
pids=("$daemon" "${pids[@]}")
"$BIN/pretreat" tail --config "$SITE" --duration "$SECONDS_TO_RUN" || true

echo "== stopping the daemon (SIGTERM flushes every reading)"
kill -TERM "$daemon"; wait "$daemon" || true
pids=("${pids[@]:1}")

echo "== recorded pH readings, last 5 (pretreat readings --format csv)"
"$BIN/pretreat" readings --config "$SITE" --site acme-plating --channel ph --format csv | tail -n 5
echo "== exceedance history (pretreat exceedances): what enforcement staff pull, with the ordinance cited"
"$BIN/pretreat" exceedances --config "$SITE" || true
echo "== the tamper-evident journal (pretreat journal verify)"
"$BIN/pretreat" journal verify --config "$SITE" || true
echo "== health snapshot: $RUN/pretreat.sqlite.health.json"
