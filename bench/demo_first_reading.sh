#!/usr/bin/env bash
# Time from a fresh clone to the demo's first live reading on screen (issue: "two commands from a fresh machine").
# Clones REPO (default: this repository) RUNS times (default 3) into a temporary folder, runs `make demo` with an empty
# uv/pip cache and DEMO_SECONDS=0, and prints one line a run: commit, load average, install time, first reading,
# venv size, episodes started. The demo's fixed ports (15020-15022, 18830) must be free; DEMO_PORT differs per run.
#
#   bash bench/demo_first_reading.sh [REPO] [RUNS]
set -euo pipefail
REPO=${1:-$(cd "$(dirname "$0")/.." && pwd)}
RUNS=${2:-3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for i in $(seq 1 "$RUNS"); do
  clone="$WORK/run$i"
  git clone -q "$REPO" "$clone"
  if [ -d "$REPO/../shared" ] && [ ! -e "$WORK/shared" ]; then ln -s "$(cd "$REPO/../shared" && pwd)" "$WORK/shared"; fi
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  start=$(date +%s.%N)
  (cd "$clone" && UV_NO_CACHE=1 PIP_NO_CACHE_DIR=1 DEMO_SECONDS=0 DEMO_PORT=$((8090 + i)) make demo 2>&1 </dev/null) |
    python3 -c "
import sys, time
t0 = float(sys.argv[1])
for line in sys.stdin:
    print(f'{time.time() - t0:7.1f} {line}', end='', flush=True)
" "$start" > "$WORK/run$i.log"
  first=$(grep -m1 -E '^ *[0-9.]+ [0-9]{2}:[0-9]{2}:[0-9.]+(Z| [A-Z]+)  [a-z]' "$WORK/run$i.log" | awk '{print $1}')
  installed=$(grep -m1 'checking the site file' "$WORK/run$i.log" | awk '{print $1}')
  echo "run $i commit $(git -C "$clone" rev-parse --short HEAD) $(date -u +%FT%TZ) load [$load]" \
       "install ${installed:-?} s, first reading ${first:-none} s, venv $(du -sh "$clone/.venv" | cut -f1)," \
       "episodes started $(grep -c 'episode started' "$WORK/run$i.log" || true)"
done
