#!/usr/bin/env bash
# The Fashion-MNIST example study with and without early stopping
# (BENCHMARKS.md section 5, the reference-trainer half): the same study, the
# same seed and budget, once with every trial trained to the end and once
# with ASHA in pause mode (trials paused at their rungs and resumed from
# their checkpoints when promoted), and with STUDIES=...,model once more with
# ASHA's promotions decided by the learning-curve model (promote_by_model).
# Prints the epochs each spent and the best validation accuracy it found.
#
#   benchmarks/fashion_asha.sh [BUILD_DIR] [TRIALS] [EPOCHS]
#
# Small by default so that it fits 2 CPU cores in about a quarter of an
# hour: TRIALS=12, EPOCHS=9, 4000 training and 2000 validation images
# (TRAIN_SUBSET, VAL_SIZE in the environment change them). ASHA_TRIALS gives
# the ASHA study more trials (default TRIALS), to compare at equal epochs;
# STUDIES=asha or STUDIES=full runs one of the two; STUDIES=asha,model
# compares ASHA's ranking with the model's.
set -euo pipefail
build=${1:-build}
trials=${2:-12}
epochs=${3:-9}
train_subset=${TRAIN_SUBSET:-4000}
val_size=${VAL_SIZE:-2000}
bin=$(cd "$build/bin" && pwd)
work=$(mktemp -d /tmp/fashion-asha.XXXXXX)
source "$(dirname "$0")/start_hypertuned.sh"
start_hypertuned "$bin" "$work"

# The example's search space, one trial at a time, with or without ASHA.
make_config() {  # NAME RULE_JSON TRIALS
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
name, rule, trials = sys.argv[1], sys.argv[2], int(sys.argv[3])
study = json.load(open("examples/fashion_mnist/study.json"))
study["name"] = name
study["spec"]["max_trials"] = trials
study["spec"]["max_parallel_trials"] = 1
if rule:
    study["spec"]["early_stopping"] = json.loads(rule)
print(json.dumps(study))
PY
}

run_study() {  # NAME RULE_JSON TRIALS
  make_config "$1" "$2" "$3" > "$work/$1.json"
  "$bin/hypertune" study create --config "$work/$1.json" >/dev/null
  local start=$SECONDS
  "$bin/hypertune" worker "$1" --log-dir "$work/logs-$1" -- \
    "$bin/hypertune-train" --data fashion-mnist --train-subset "$train_subset" \
      --val-size "$val_size" --epochs "$epochs" --threads 2 \
      --checkpoint-dir "$work/ckpt-$1" > "$work/worker-$1.log" 2>&1
  echo "$1 $((SECONDS - start))" >> "$work/seconds"
  "$bin/hypertune" trials "$1" --format json > "$work/$1.trials.json"
}

studies=${STUDIES:-full,asha}
names=()
if [[ $studies == *full* ]]; then
  run_study fashion-full "" "$trials"
  names+=(fashion-full)
fi
if [[ $studies == *asha* ]]; then
  run_study fashion-asha "{\"rule\": \"ASHA\", \"min_resource\": 1, \"max_resource\": $epochs, \"reduction_factor\": 3, \"pause_at_rungs\": true}" "${ASHA_TRIALS:-$trials}"
  names+=(fashion-asha)
fi
if [[ $studies == *model* ]]; then
  run_study fashion-model "{\"rule\": \"ASHA\", \"min_resource\": 1, \"max_resource\": $epochs, \"reduction_factor\": 3, \"pause_at_rungs\": true, \"promote_by_model\": true}" "${ASHA_TRIALS:-$trials}"
  names+=(fashion-model)
fi

python3 - "$work" "${names[@]}" <<'PY'
import json, sys
work, names = sys.argv[1], sys.argv[2:]
seconds = dict(line.split() for line in open(f"{work}/seconds"))
print(f"{'study':14} {'trials':>6} {'epochs':>7} {'best_val_acc':>13} {'full_budget':>11} {'seconds':>8}")
for name in names:
    trials = json.load(open(f"{work}/{name}.trials.json"))["trials"]
    epochs = sum(len(t.get("measurements", [])) for t in trials)
    def acc(t):
        m = t.get("final_measurement") or (t.get("measurements") or [{}])[-1]
        return m.get("metrics", {}).get("val_accuracy", float("nan"))
    done = [t for t in trials if t["state"] in ("COMPLETED", "STOPPED")]
    best = max(acc(t) for t in done)
    full = sum(1 for t in trials if t["state"] == "COMPLETED")
    print(f"{name:14} {len(trials):6d} {epochs:7d} {best:13.4f} {full:11d} {seconds[name]:>8}")
print(f"(work dir: {work})")
PY
kill -TERM "$hypertuned_pid"; wait "$hypertuned_pid" || true; trap - EXIT
