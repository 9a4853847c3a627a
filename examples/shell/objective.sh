#!/usr/bin/env bash
# A training program in plain bash, for `hypertune worker`.
#
#   hypertune study create --config examples/shell/study.json
#   hypertune worker quickstart-shell --parallel 2 -- \
#       examples/shell/objective.sh {lr} {layers}
#
# The worker replaces {lr} and {layers} by the trial's values; the same values
# are in $HYPERTUNE_PARAMS as JSON ({"lr":0.0031,"layers":4}). The program
# reports by printing lines the worker reads:
#   hypertune: loss=0.52 step=2    an intermediate measurement at step 2
#   hypertune: loss=0.31           the final metrics
#   hypertune: infeasible=REASON   these parameters cannot work (steer away)
# Exiting non-zero makes the trial FAILED (the program's fault, left out of
# the model), not infeasible. The optimum is loss 0 at
# lr = 10^-2.5 and 4 layers.
set -euo pipefail

if [[ $# -ne 2 ]]; then
  echo "usage: $0 LR LAYERS" >&2
  exit 2
fi
lr=$1
layers=$2

echo "trial ${HYPERTUNE_TRIAL_ID:-?}: lr=$lr layers=$layers"
for step in 1 2 3; do
  loss=$(awk -v lr="$lr" -v layers="$layers" -v step="$step" 'BEGIN {
    x = log(lr) / log(10) + 2.5
    y = layers - 4
    printf "%.6g", x * x + 0.05 * y * y + 0.1 * (3 - step)
  }')
  echo "hypertune: loss=$loss step=$step"
done
echo "hypertune: loss=$loss"
