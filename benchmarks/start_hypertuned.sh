# Sourced by the benchmark scripts: start_hypertuned BIN_DIR WORK_DIR starts
# hypertuned on WORK_DIR/studies.db at a free loopback port, stops it when
# the script exits, and exports HYPERTUNE_SERVER for the CLI and trainers.
start_hypertuned() {
  local bin=$1 work=$2
  "$bin/hypertuned" --db "$work/studies.db" --listen 127.0.0.1:0 \
    > "$work/hypertuned.log" 2>&1 &
  hypertuned_pid=$!
  trap 'kill "$hypertuned_pid" 2>/dev/null || true' EXIT
  for _ in $(seq 100); do
    grep -q "listening on" "$work/hypertuned.log" && break
    sleep 0.1
  done
  HYPERTUNE_SERVER=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$work/hypertuned.log")
  export HYPERTUNE_SERVER
}
