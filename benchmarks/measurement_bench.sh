#!/bin/bash
# AddMeasurement's time per call as a trial's curve grows (issue 48 item
# 10), through hypertuned over gRPC on a fresh SQLite database:
#
#   benchmarks/measurement_bench.sh [BIN_DIR=build/bin] [MEASUREMENTS=10000]
#
# runs hypertune_measurement_bench of BIN_DIR against BIN_DIR's hypertuned.
# HYPERTUNED_BIN_DIR=DIR serves with DIR's hypertuned instead (an older
# build, for a before/after in one run). HYPERTUNE_DB=postgresql://... serves
# on that PostgreSQL database instead of SQLite: it must exist and hold no
# study of the benchmark's name (use a fresh one per run). A benchmark: it
# never asserts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/bin}
measurements=${2:-10000}
server_bin=${HYPERTUNED_BIN_DIR:-$bin}
work=$(mktemp -d)
if [[ -n "${HYPERTUNE_DB:-}" ]]; then
  # start_hypertuned.sh serves SQLite only; the same steps on the URL.
  "$server_bin/hypertuned" --db "$HYPERTUNE_DB" --listen 127.0.0.1:0 \
    > "$work/hypertuned.log" 2>&1 &
  hypertuned_pid=$!
  trap 'kill "$hypertuned_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    grep -qs "listening on" "$work/hypertuned.log" && break
    sleep 0.1
  done
  HYPERTUNE_SERVER=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' \
    "$work/hypertuned.log")
  if [[ -z "$HYPERTUNE_SERVER" ]]; then
    cat "$work/hypertuned.log" >&2
    exit 1
  fi
else
  . "$here/start_hypertuned.sh"
  start_hypertuned "$server_bin" "$work"
fi
"$bin/hypertune_measurement_bench" "$HYPERTUNE_SERVER" "$measurements"
kill "$hypertuned_pid" 2>/dev/null || true
wait "$hypertuned_pid" 2>/dev/null || true
rm -rf "$work"
