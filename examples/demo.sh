#!/usr/bin/env bash
# The demo behind `make demo`: a real study end to end on an embedded SQLite
# file. Starts hypertuned, creates the quickstart study, runs it to completion
# with 4 parallel workers through the SDK, prints the best trial and stops the
# server.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
demo_dir=$(cd "$build" && pwd)/demo
db=$demo_dir/hypertune-demo.db
mkdir -p "$demo_dir"
rm -f "$db" "$db-wal" "$db-shm"

"$bin/hypertuned" --db "$db" --listen 127.0.0.1:0 --http 127.0.0.1:0 \
  >"$demo_dir/hypertuned.log" 2>&1 &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q "listening on" "$demo_dir/hypertuned.log" && break
  kill -0 "$server_pid" 2>/dev/null || { cat "$demo_dir/hypertuned.log"; exit 1; }
  sleep 0.1
done
address=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$demo_dir/hypertuned.log")
dashboard=$(sed -n 's/.*dashboard on \([^ ]*\).*/\1/p' "$demo_dir/hypertuned.log")
export HYPERTUNE_SERVER=$address
echo "== hypertuned is serving $address on $db"
echo "== the dashboard, live while the study runs: ${dashboard}#study=quickstart"

# One line per stage: each command's whole output goes to a log in
# $demo_dir, the worker's too (one line per trial start, report and end).
created=$("$bin/hypertune" study create --config examples/study.json --format table)
echo "$created" >"$demo_dir/study-create.log"
echo "== hypertune study create --config examples/study.json:" \
  "$(echo "$created" | awk '$1 == "name" || $1 == "algorithm" || $1 == "max_trials" {printf "%s%s %s", sep, $1, $2; sep=", "}')"

echo "== hypertune worker quickstart --parallel 4 -- hypertune-quickstart" \
  "(log: $demo_dir/worker.log)"
if ! "$bin/hypertune" worker quickstart --parallel 4 --log-dir "$demo_dir/logs" \
    -- "$bin/hypertune-quickstart" 2>&1 | tee "$demo_dir/worker.log" |
  awk '/^trial [0-9]+ COMPLETED/ && !first {print "== first trial: " $0; first=1; fflush()}
       /^worker done/ {print "== " $0; fflush()}'; then
  cat "$demo_dir/worker.log"
  exit 1
fi

echo "== hypertune study best quickstart"
"$bin/hypertune" study best quickstart

kill -TERM "$server_pid"
wait "$server_pid" || true
trap - EXIT
cat <<EOT

The study's history is in $db.
See it on the dashboard: start a server on that file with --http, then open
http://127.0.0.1:8080/#study=quickstart in a browser:
  $bin/hypertuned --db $db --http 127.0.0.1:8080 &
Or with the CLI, against that server:
  $bin/hypertune trials quickstart                # table
  $bin/hypertune trials quickstart --format csv   # or json
  $bin/hypertune study best quickstart
EOT
