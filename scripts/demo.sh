#!/usr/bin/env bash
# `make demo`: an industry's control manhole and the treatment plant's influent (config/sites/demo.toml), simulated
# on loopback, monitored by the daemon into the embedded SQLite historian, with the operator console.
#
# 1. `pretreat seed` records a day and a half of normal operation (the simulators' models, through the daemon's own
#    ingest path), so the slug rule has days of normal operation to take its baseline from.
# 2. The live part plays simulators/scenarios/demo.toml: half an hour of the manhole's life in about 90 s. Every
#    process runs on the demonstration clock (monitor/clock.py): readings are stamped in simulated time, 20 times
#    faster than the wall clock until it catches up with the present, so a 15-minute slug is 15 minutes in the record.
# 3. The exceedance history, the rules in force and the journal check; the console stays up until Ctrl-C or until
#    DEMO_SECONDS (default: at once when not on a terminal) have passed since the live part started.
# Everything started here is stopped on exit. Nothing here needs a real instrument.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=.venv/bin
SITE=config/sites/demo.toml
RUN=var/demo
SPEED=20                      # simulated seconds per wall second while the scenario plays
SCENARIO_SECONDS=1800         # simulated length of simulators/scenarios/demo.toml
SETTLE=30                     # wall seconds at real pace while the simulator, daemon and console start
PORT=${DEMO_PORT:-8080}
USERS=$RUN/users.toml
# The demo's servers listen on fixed loopback ports (the site file's, and the console's). A port already taken (a
# demo still running, another service) would leave the daemon polling nothing while the failure sat in a log file,
# and a second demo would delete the first one's record: stop here instead, before touching anything, saying which
# port and what it is for.
busy=()
for entry in "18830:the MQTT broker" "15020:the flow meter's simulator" "15021:the sampler's simulator" \
             "15022:the plant's temperature simulator" "$PORT:the console (DEMO_PORT)"; do
  port=${entry%%:*}
  if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then busy+=("$port (${entry#*:})"); fi
done
if [ ${#busy[@]} -gt 0 ]; then
  echo "make demo: cannot start, these loopback ports are in use: ${busy[*]}." >&2
  echo "Is another demo running? Stop it (Ctrl-C in its terminal), or free the port(s), and run make demo again." >&2
  exit 1
fi

mkdir -p "$RUN"
rm -f "$RUN"/pretreat.sqlite* "$RUN"/*.log "$USERS"
rm -rf "$RUN"/notify

pids=()
cleanup() {  # the daemon first (it flushes and says goodbye to the broker), then what it talks to
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The MQTT broker of the explosion-hazard meter and of the plant's SCADA alarm feed. As root, mosquitto drops to the
# unprivileged user named here (Debian's package creates it); its log goes through our stderr redirection, so it
# needs no writable file of its own.
MOSQUITTO=$(command -v mosquitto || echo /usr/sbin/mosquitto)
BROKER_USER=mosquitto; id -u "$BROKER_USER" >/dev/null 2>&1 || BROKER_USER=nobody
cat > "$RUN/mosquitto.conf" <<EOF
listener 18830 127.0.0.1
allow_anonymous true
persistence false
user $BROKER_USER
log_dest stderr
EOF
"$MOSQUITTO" -c "$RUN/mosquitto.conf" 2>"$RUN/mosquitto.log" & pids+=($!)
broker=$!

# Until a server listens on its port; one that exits first (a port taken since the check above, say) stops the
# demo with its log shown.
listening() {  # pid name log port
  local waited=0
  until (exec 3<>"/dev/tcp/127.0.0.1/$4") 2>/dev/null; do
    if ! kill -0 "$1" 2>/dev/null; then
      echo "make demo: $2 stopped at its start; the end of its log ($3):" >&2
      tail -n 5 "$3" >&2
      exit 1
    fi
    if [ "$waited" -ge 600 ]; then echo "make demo: $2 is not listening on port $4 after 60 s" >&2; exit 1; fi
    sleep 0.1; waited=$(( waited + 1 ))
  done
}
listening "$broker" "the MQTT broker (mosquitto)" "$RUN/mosquitto.log" 18830

echo "== checking the site file"
"$BIN/pretreat" check-config "$SITE"

# The console's users, one per role (the console itself starts with the daemon).
add_user() {  # name role password [--company C]
  echo "$3" | "$BIN/pretreat" --log-level WARNING user add --config "$SITE" --users "$USERS" --name "$1" \
    --role "$2" "${@:4}" --password-stdin >/dev/null
}
add_user operator operator demo-operator-pass
add_user enforcement enforcement demo-enforcement-pass
add_user industry industry demo-industry-pass --company "ACME Plating Co."

# The seeded history ends half an hour ago (simulated time); the live part goes on from there: at the wall's pace for
# $SETTLE s while every process starts, then $SPEED times faster until it meets the present (monitor/clock.py).
now0=$(date +%s)
seed_end=$(( now0 - SCENARIO_SECONDS ))
echo "== recording the history the slug baseline needs: simulated normal operation up to $(date -d "@$seed_end" +%H:%M)"
"$BIN/pretreat" seed --config "$SITE" --days 1 --interval 15 --scenario demo --until "$seed_end"
now1=$(date +%s)
export PRETREAT_DEMO_CLOCK="$(( now1 + SETTLE )),$(( seed_end + SETTLE )),$SPEED"
live_wall=$(( SETTLE + (SCENARIO_SECONDS - SETTLE) / SPEED + 3 ))
echo "== the live part (~${live_wall} s): simulated time from $(date -d "@$seed_end" +%H:%M:%S), ${SPEED}x after" \
     "${SETTLE} s, until it meets the present. Readings are stamped in simulated time."
"$BIN/pretreat" --log-level WARNING sim --config "$SITE" --scenario demo --no-broker --tick 0.04 >"$RUN/sim.log" 2>&1 & pids+=($!)
listening "$!" "the simulators (pretreat sim)" "$RUN/sim.log" 15022
"$BIN/pretreat" --log-level WARNING run --config "$SITE" 2> >(sed -u 's/^/[daemon] /' >&2) & daemon=$!
pids=("$daemon" "${pids[@]}")  # stopped first
"$BIN/pretreat" --log-level WARNING console --config "$SITE" --users "$USERS" --port "$PORT" \
  >"$RUN/console.log" 2>&1 & pids+=($!)
started=$(date +%s)
until [ -s "$RUN/pretreat.sqlite.health.json" ] || [ $(( $(date +%s) - now1 )) -ge $SETTLE ]; do sleep 0.5; done
if [ -s "$RUN/pretreat.sqlite.health.json" ]; then
  echo "== the daemon is polling ($(( $(date +%s) - now1 )) s after the start; the scenario begins at ${SETTLE} s)"
else
  echo "== the daemon took longer than ${SETTLE} s to start (a busy machine?): the first events may be missed"
fi

cat <<EOF
== the operator console: http://127.0.0.1:$PORT/
   users (name / password):  operator / demo-operator-pass    industry / demo-industry-pass (ACME Plating Co.)
                             enforcement / demo-enforcement-pass
== readings as they are recorded (each channel every 2 simulated minutes, and every change of quality);
   episodes and alarms from the daemon are marked [daemon]
EOF
"$BIN/pretreat" tail --config "$SITE" --duration "$(( live_wall - ($(date +%s) - now1) ))" --every 120 || true

echo
echo "== exceedance history (pretreat exceedances): what enforcement staff pull, with the ordinance cited"
"$BIN/pretreat" exceedances --config "$SITE" || true
echo "== data-quality episodes of the silent flow meter (instrument faults, kept apart from exceedances)"
"$BIN/pretreat" exceedances --config "$SITE" --data-quality --rule stale --channel flow || true
if "$BIN/pretreat" rules --help >/dev/null 2>&1; then
  echo "== the rules in force at each channel, and why a channel has none (pretreat rules)"
  "$BIN/pretreat" rules --config "$SITE" || true
fi
echo "== the tamper-evident journal (pretreat journal verify)"
"$BIN/pretreat" journal verify --config "$SITE" || true

if [ -n "${DEMO_SECONDS:-}" ]; then
  left=$(( DEMO_SECONDS - ($(date +%s) - started) ))
  if [ "$left" -gt 0 ]; then
    echo "== the daemon and the console keep running for ${left} s more (DEMO_SECONDS=$DEMO_SECONDS); Ctrl-C stops"
    sleep "$left" || true
  fi
elif [ -t 0 ]; then
  echo "== the daemon and the console keep running: open http://127.0.0.1:$PORT/ ; Ctrl-C stops everything"
  while kill -0 "$daemon" 2>/dev/null; do sleep 1; done
fi
echo "== stopping (SIGTERM: the daemon flushes every reading)"
