#!/bin/bash
# AddMeasurement's time per call as a trial's curve grows (issue 48 item
# 10), through hypertuned over gRPC on a fresh SQLite database:
#
#   benchmarks/measurement_bench.sh [BIN_DIR=build/bin] [MEASUREMENTS=10000]
#
# runs hypertune_measurement_bench of BIN_DIR against BIN_DIR's hypertuned.
# HYPERTUNED_BIN_DIR=DIR serves with DIR's hypertuned instead (an older
# build, for a before/after in one run). A benchmark: it never asserts.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${1:-build/bin}
measurements=${2:-10000}
server_bin=${HYPERTUNED_BIN_DIR:-$bin}
work=$(mktemp -d)
. "$here/start_hypertuned.sh"
start_hypertuned "$server_bin" "$work"
"$bin/hypertune_measurement_bench" "$HYPERTUNE_SERVER" "$measurements"
kill "$hypertuned_pid" 2>/dev/null || true
wait "$hypertuned_pid" 2>/dev/null || true
rm -rf "$work"
