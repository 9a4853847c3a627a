#!/usr/bin/env bash
# The example study of examples/fashion_mnist run as its README runs it
# (GP_BANDIT, 20 trials, two workers at a time), next to the trainer's
# default configuration trained alone on the same data and epochs. Prints
# the default's validation accuracy, the study's best and its parameters.
#
#   benchmarks/fashion_example.sh [BUILD_DIR]
#
# TRAIN_SUBSET (default 10000) and EPOCHS (default 3) as in the README;
# TRIALS (default the study's 20). Results do not depend on thread counts.
set -euo pipefail
build=${1:-build}
train_subset=${TRAIN_SUBSET:-10000}
epochs=${EPOCHS:-3}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d /tmp/fashion-example.XXXXXX)
train=("$bin/hypertune-train" --data fashion-mnist
       --train-subset "$train_subset" --epochs "$epochs")

start=$SECONDS
"${train[@]}" --threads 2 --checkpoint-dir "$work/ckpt-default" \
  > "$work/default.log" 2> "$work/default.err"
default_seconds=$((SECONDS - start))

source "$(dirname "$0")/start_hypertuned.sh"
start_hypertuned "$bin" "$work"

python3 - "${TRIALS:-}" > "$work/study.json" <<'PY'
import json, sys
study = json.load(open("examples/fashion_mnist/study.json"))
if sys.argv[1]:
    study["spec"]["max_trials"] = int(sys.argv[1])
print(json.dumps(study))
PY
"$bin/hypertune" study create --config "$work/study.json" > /dev/null
start=$SECONDS
"$bin/hypertune" worker fashion-mnist --parallel 2 --log-dir "$work/logs" -- \
  "${train[@]}" --threads 1 --checkpoint-dir "$work/ckpt" \
  > "$work/worker.log" 2>&1
study_seconds=$((SECONDS - start))
"$bin/hypertune" trials fashion-mnist --format json > "$work/trials.json"

python3 - "$work" "$default_seconds" "$study_seconds" <<'PY'
import json, re, sys
work, default_seconds, study_seconds = sys.argv[1], sys.argv[2], sys.argv[3]
last = [l for l in open(f"{work}/default.log") if "val_accuracy=" in l][-1]
default_acc = float(re.search(r"val_accuracy=([0-9.]+)", last).group(1))
trials = json.load(open(f"{work}/trials.json"))["trials"]
done = [t for t in trials if t["state"] == "COMPLETED"]
def acc(t):
    return t["final_measurement"]["metrics"]["val_accuracy"]
best = max(done, key=acc)
def value(p):
    for key in ("double_value", "int_value", "string_value"):
        if key in p:
            return p[key]
params = ", ".join(f"{p['name']}={value(p):.4g}" if isinstance(value(p), float)
                   else f"{p['name']}={value(p)}" for p in best["parameters"])
print(f"default configuration   val_accuracy {default_acc:.4f}   ({default_seconds} s)")
print(f"study best (trial {best['id']:>2})  val_accuracy {acc(best):.4f}   "
      f"({len(done)}/{len(trials)} trials completed, {study_seconds} s)")
print(f"  {params}")
print(f"work files: {work}")
PY
