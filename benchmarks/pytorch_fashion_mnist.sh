#!/usr/bin/env bash
# The figures of examples/pytorch_fashion_mnist/README.md: the example's study
# (GP_BANDIT, ASHA in pause mode) run by `hypertune worker`, the same study
# (same seed and budget) with every trial trained to the end, then the default
# configuration and the best trial's configuration each trained in full and
# measured on the test set. Prints the epochs each study spent, its minutes,
# and the accuracies.
#
#   benchmarks/pytorch_fashion_mnist.sh [BUILD_DIR]
#
# TRAIN_SIZE (default 20000 training images), PARALLEL (2 trials at a time),
# STUDIES=asha or STUDIES=full runs one of the two. Needs python3-torch.
set -euo pipefail
build=${1:-build}
bin=$(cd "$build/bin" && pwd)
export PYTHONPATH=$(cd "$build/python" && pwd)${PYTHONPATH:+:$PYTHONPATH}
python=/usr/bin/python3
example=examples/pytorch_fashion_mnist
train_size=${TRAIN_SIZE:-20000}
parallel=${PARALLEL:-2}
work=$(mktemp -d /tmp/pytorch-fashion-mnist.XXXXXX)
source "$(dirname "$0")/start_hypertuned.sh"
start_hypertuned "$bin" "$work"

run_study() {  # NAME WITH_ASHA(0|1)
  "$python" - "$1" "$2" "$example/study.json" > "$work/$1.json" <<'PY'
import json, sys
name, asha, path = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
study = json.load(open(path))
study["name"] = name
if not asha:
    del study["spec"]["early_stopping"]
print(json.dumps(study))
PY
  "$bin/hypertune" study create --config "$work/$1.json" > /dev/null
  local start=$SECONDS
  "$bin/hypertune" worker "$1" --parallel "$parallel" --log-dir "$work/logs-$1" -- \
    "$python" "$example/train.py" --train-size "$train_size" \
      --checkpoint-dir "$work/checkpoints-$1" > "$work/worker-$1.log" 2>&1
  echo "$1 $((SECONDS - start))" >> "$work/seconds"
}

studies=${STUDIES:-asha,full}
[[ $studies == *asha* ]] && run_study fashion-torch-asha 1
[[ $studies == *full* ]] && run_study fashion-torch-full 0

"$python" - "$work" <<'PY'
import sys
import hypertune
work = sys.argv[1]
seconds = dict(line.split() for line in open(f"{work}/seconds"))
client = hypertune.Client()
print(f"{'study':20} {'trials':>6} {'epochs':>6} {'minutes':>7} {'best_val_acc':>12} {'best_trial':>10}")
for name, took in seconds.items():
    study = client.get_study(name)
    trials = study.trials()
    epochs = sum(len(t.measurements) for t in trials)
    best = study.best()
    print(f"{name:20} {len(trials):6d} {epochs:6d} {int(took) / 60:7.1f} {best.value:12.4f} {best.id:10d}")
best = client.get_study(next(iter(seconds))).best()
with open(f"{work}/best-flags", "w") as out:
    out.write(" ".join(f"--{k} {v}" for k, v in best.params.items()))
PY

# The default configuration and the best one, trained in full, on the test set.
for config in default best; do
  flags=""
  [[ $config == best ]] && flags=$(cat "$work/best-flags")
  # shellcheck disable=SC2086
  "$python" "$example/train.py" --train-size "$train_size" --test $flags \
    --checkpoint-dir "$work/checkpoints-$config" > "$work/$config.log" 2>&1
  echo "$config ($flags): $(tail -1 "$work/$config.log")"
done
echo "(work dir: $work)"
