#!/usr/bin/env bash
# Peak memory of `hypertune import` and of hypertuned while it imports an
# export of N trials with 20 measurements each (N=60000 writes ~86 MB),
# printed beside the file's size as ratios.
#   benchmarks/import_memory.sh [N] [BIN_DIR]
set -euo pipefail
n=${1:-60000}
bin=${2:-build/bin}
dir=$(mktemp -d)
trap 'kill "${server:-}" 2>/dev/null || true; rm -rf "$dir"' EXIT

python3 - "$n" "$dir/export.jsonl" <<'EOF'
import json, sys
n = int(sys.argv[1])
study = {"name": "big", "state": "ACTIVE", "spec": {
    "parameters": [{"name": "x", "doubleSpec": {"min": 0, "max": 1}},
                   {"name": "y", "doubleSpec": {"min": 0, "max": 1}}],
    "metrics": [{"name": "loss", "goal": "MINIMIZE"}], "algorithm": "RANDOM"}}
with open(sys.argv[2], "w") as f:
    f.write(json.dumps(study) + "\n")
    for i in range(1, n + 1):
        trial = {"id": str(i), "state": "COMPLETED",
                 "parameters": [{"name": "x", "doubleValue": i / (n + 1)},
                                {"name": "y", "doubleValue": 0.5}],
                 "measurements": [{"step": str(s), "metrics": {"loss": 1.0 / (s + i)}}
                                  for s in range(1, 21)],
                 "finalMeasurement": {"step": "20", "metrics": {"loss": 1.0 / i}}}
        f.write(json.dumps(trial) + "\n")
EOF
file_kb=$(( $(stat -c %s "$dir/export.jsonl") / 1024 ))

"$bin/hypertuned" --db "$dir/s.db" --listen 127.0.0.1:0 > "$dir/out" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q listening "$dir/out" && break; sleep 0.1; done
address=$(grep -o '127.0.0.1:[0-9]*' "$dir/out" | head -1)
/usr/bin/time -f "%M %e" -o "$dir/cli" \
  "$bin/hypertune" --server "$address" import "$dir/export.jsonl"
read -r cli_kb wall < "$dir/cli"
server_kb=$(awk '/VmHWM/ {print $2}' "/proc/$server/status")
awk -v f="$file_kb" -v c="$cli_kb" -v s="$server_kb" -v w="$wall" 'BEGIN {
  printf "file %.0f MB, import %.1f s\n", f / 1024, w
  printf "hypertune import peak %.0f MB (%.2fx the file)\n", c / 1024, c / f
  printf "hypertuned peak       %.0f MB (%.2fx the file)\n", s / 1024, s / f
}'
