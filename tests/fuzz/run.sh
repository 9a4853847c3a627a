#!/usr/bin/env bash
# Runs service_fuzzer (built in BUILD by `make fuzz`): first every input in
# tests/fuzz/regressions (each must run clean), then SECONDS of fuzzing that
# starts from the seed corpus tests/fuzz/corpus. New inputs go to
# BUILD/fuzz/corpus, crashes to BUILD/fuzz/artifacts; the source tree is only
# read.
#
#   tests/fuzz/run.sh [BUILD] [SECONDS]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build-fuzz}
seconds=${2:-60}
fuzzer=$build/bin/service_fuzzer
work=$build/fuzz
mkdir -p "$work/corpus" "$work/artifacts"

regressions=()
for f in "$here"/regressions/*; do
  [[ -f $f && $f != *.md ]] && regressions+=("$f")
done
if ((${#regressions[@]})); then
  echo "fuzz: replaying ${#regressions[@]} regression input(s)"
  "$fuzzer" -timeout=10 "${regressions[@]}"
else
  echo "fuzz: no regression inputs"
fi

echo "fuzz: ${seconds} s of service_fuzzer from $here/corpus"
if ! "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=4096 \
    -max_len=4096 -print_final_stats=1 -dict="$here/service.dict" \
    -artifact_prefix="$work/artifacts/" \
    "$work/corpus" "$here/corpus"; then
  echo "fuzz: FAILED; the input is in $work/artifacts/ (keep it in" \
       "tests/fuzz/regressions/ once reported)" >&2
  exit 1
fi
