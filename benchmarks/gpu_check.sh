#!/usr/bin/env bash
# gpu_check.sh: the trainer's GPU check, in one go, from the repository root
# of a GPU machine (CUDA, CMake, Ninja, Python with PyTorch; no gRPC, no
# network), within 5 minutes:
#   1. configures and builds only the trainer's compute core with its CUDA
#      backend, the throughput driver and the CPU/CUDA parity test, from the
#      sources in place, with Eigen's headers and googletest's sources
#      carried alongside;
#   2. runs the parity tests (ctest label `gpu`: every CUDA op against its
#      CPU twin, and the first 10 training losses);
#   3. measures training images/s of the ResNet-18-like network on 224x224
#      synthetic data with mixed precision: hypertune-train-bench, then the
#      same network in PyTorch (bf16 autocast, channels_last) on the same GPU;
#   4. prints ours, PyTorch's and the ratio (target: >= 0.5).
# Every step has its own timeout; a failed step does not stop later ones,
# and the exit status is non-zero when any failed.
#
# Environment (defaults in brackets):
#   EIGEN_DIR   Eigen 3.4 headers, the folder holding Eigen/  [build-carry/eigen3]
#   GTEST_DIR   googletest sources, the folder holding googletest/ and
#               googlemock/ (Debian: /usr/src/googletest)  [build-carry/googletest]
#   BUILD_DIR   [build-gpu]    NVCC  [nvcc on PATH, else /usr/local/cuda/bin/nvcc]
#   PYTHON      [python3]      BATCH [256]   WARMUP [5]   STEPS [30]
#   CUDA_ARCH   [the GPU's compute capability, else 90]   JOBS  [nproc]
#   BUDGET      seconds for everything [300]
#   CUDNN_ROOT  a cuDNN with include/ and lib/  [the toolkit's, the system's, or PyTorch's]
#   OUT         when set, logs and the summary are copied there too
#   BUILD_ONLY  =1: stop after the build (for machines without a GPU)
set -u
cd "$(dirname "$0")/.." || exit 2
REPO=$(pwd)
START=$(date +%s)

EIGEN_DIR=${EIGEN_DIR:-build-carry/eigen3}
GTEST_DIR=${GTEST_DIR:-build-carry/googletest}
BUILD_DIR=${BUILD_DIR:-build-gpu}
PYTHON=${PYTHON:-python3}
BATCH=${BATCH:-256}
WARMUP=${WARMUP:-5}
STEPS=${STEPS:-30}
if [ -z "${CUDA_ARCH:-}" ] && command -v nvidia-smi >/dev/null; then
  # The first GPU's compute capability, e.g. 9.0 -> 90.
  CUDA_ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
    head -n 1 | tr -d ' .')
fi
[[ "${CUDA_ARCH:-}" =~ ^[0-9]+[a-z]?$ ]] || CUDA_ARCH=90
JOBS=${JOBS:-$(nproc)}
BUDGET=${BUDGET:-300}
if [ -z "${NVCC:-}" ]; then
  NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
fi

die() { echo "gpu_check: $*" >&2; exit 2; }
[ -f "$EIGEN_DIR/Eigen/Core" ] ||
  die "EIGEN_DIR=$EIGEN_DIR: no Eigen/Core there (set EIGEN_DIR to Eigen's include folder, e.g. /usr/include/eigen3)"
if [ ! -f "$GTEST_DIR/CMakeLists.txt" ] || [ ! -d "$GTEST_DIR/googletest" ]; then
  die "GTEST_DIR=$GTEST_DIR: no googletest sources there (set GTEST_DIR, e.g. /usr/src/googletest)"
fi
[ -x "$NVCC" ] || die "NVCC=$NVCC: nvcc not found (set NVCC or put it on PATH)"
command -v cmake >/dev/null || die "cmake not found"
command -v ninja >/dev/null || die "ninja not found"
EIGEN_DIR=$(cd "$EIGEN_DIR" && pwd)
GTEST_DIR=$(cd "$GTEST_DIR" && pwd)

mkdir -p "$BUILD_DIR/wrapper" "$BUILD_DIR/logs" || die "cannot create $BUILD_DIR"
BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
LOGS=$BUILD_DIR/logs
FAILED=()

# step NAME SECONDS COMMAND...: runs COMMAND under a timeout of SECONDS, or
# of what is left of the BUDGET if less, logging to $LOGS/NAME.log and
# echoing its tail; records a failure.
step() {
  local name=$1 seconds=$2
  shift 2
  local left=$(( START + BUDGET - $(date +%s) ))
  if [ "$left" -lt "$seconds" ]; then seconds=$left; fi
  if [ "$seconds" -lt 5 ]; then
    echo "=== $name: SKIPPED, the ${BUDGET}s budget is spent"
    : > "$LOGS/$name.log"
    FAILED+=("$name")
    return 1
  fi
  echo "=== $name (timeout ${seconds}s, at +$(( $(date +%s) - START ))s)"
  timeout --kill-after=10 "$seconds" "$@" > "$LOGS/$name.log" 2>&1
  local rc=$?
  tail -n 40 "$LOGS/$name.log"
  if [ $rc -ne 0 ]; then
    [ $rc -eq 124 ] && echo "--- $name: timed out after ${seconds}s"
    echo "--- $name: FAILED (exit $rc)"
    FAILED+=("$name")
  fi
  return $rc
}

# A throwaway top-level project around the sources in place: the core's own
# CMakeLists (trainer_sdk/trainer, with cuda/), googletest from sources, and
# tests/trainer_sdk/trainer's CMakeLists with the hypertune_test() helper it
# expects.
cat > "$BUILD_DIR/wrapper/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.18)
project(hypertune_gpu_check LANGUAGES C CXX)
include(CheckLanguage)
check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
endif()
set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY \${CMAKE_BINARY_DIR}/bin)
find_package(Threads REQUIRED)
set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
add_subdirectory("$GTEST_DIR" googletest EXCLUDE_FROM_ALL)
foreach(lib gtest gtest_main gmock gmock_main)
  if(NOT TARGET GTest::\${lib})
    add_library(GTest::\${lib} ALIAS \${lib})
  endif()
  target_compile_options(\${lib} PRIVATE -w)  # not our code: no warnings
endforeach()
add_compile_options(\$<\$<COMPILE_LANGUAGE:CXX>:-Wall> \$<\$<COMPILE_LANGUAGE:CXX>:-Wextra>)
set(EIGEN3_INCLUDE_DIR "$EIGEN_DIR")
add_subdirectory("$REPO/trainer_sdk/trainer" trainer)
enable_testing()
include(GoogleTest)
function(hypertune_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS;LABELS" \${ARGN})
  add_executable(\${name} \${ARG_SOURCES})
  target_link_libraries(\${name} PRIVATE \${ARG_LIBS} GTest::gtest GTest::gmock GTest::gtest_main)
  set(properties TIMEOUT 300)
  if(ARG_LABELS)
    list(APPEND properties LABELS "\${ARG_LABELS}")
  endif()
  gtest_discover_tests(\${name} DISCOVERY_MODE PRE_TEST PROPERTIES \${properties})
endfunction()
add_subdirectory("$REPO/tests/trainer_sdk/trainer" tests_trainer)
EOF

echo "gpu_check: repo $REPO, build $BUILD_DIR, nvcc $NVCC, Eigen $EIGEN_DIR, googletest $GTEST_DIR"
if command -v nvidia-smi >/dev/null; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
fi

# cuDNN: next to the toolkit or in the system include path, else (CUDNN_ROOT
# unset) the copy PyTorch's wheels bring (nvidia.cudnn: include/, lib/).
CUDNN_ARGS=()
CUDA_ROOT=$(dirname "$(dirname "$NVCC")")
if [ -z "${CUDNN_ROOT:-}" ] && [ ! -f "$CUDA_ROOT/include/cudnn.h" ] &&
   [ ! -f /usr/include/cudnn.h ] && [ ! -f /usr/include/x86_64-linux-gnu/cudnn.h ]; then
  CUDNN_ROOT=$("$PYTHON" -c 'import nvidia.cudnn as m; print(list(m.__path__)[0])' 2>/dev/null || true)
fi
if [ -n "${CUDNN_ROOT:-}" ] && [ -f "$CUDNN_ROOT/include/cudnn.h" ]; then
  CUDNN_LIB=$(find "$CUDNN_ROOT/lib" "$CUDNN_ROOT/lib64" -maxdepth 1 -name 'libcudnn.so*' \
    2>/dev/null | sort | head -n 1)
  if [ -n "$CUDNN_LIB" ]; then
    CUDNN_ARGS=(-DHYPERTUNE_CUDNN_INCLUDE_DIR="$CUDNN_ROOT/include"
                -DHYPERTUNE_CUDNN_LIBRARY="$CUDNN_LIB")
    echo "gpu_check: cuDNN from $CUDNN_ROOT ($CUDNN_LIB)"
  fi
fi

step configure 60 cmake -S "$BUILD_DIR/wrapper" -B "$BUILD_DIR/cmake" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$NVCC" \
  -DHYPERTUNE_CUDA_ARCHITECTURES="$CUDA_ARCH" ${CUDNN_ARGS[@]+"${CUDNN_ARGS[@]}"}
if ! grep -q "CUDA backend enabled" "$LOGS/configure.log"; then
  echo "gpu_check: the CUDA backend was not configured (see $LOGS/configure.log)"
  FAILED+=("cuda-configure")
fi
step build 150 cmake --build "$BUILD_DIR/cmake" -j "$JOBS" \
  --target hypertune-train-bench cuda_parity_test
if [ "${BUILD_ONLY:-0}" = 1 ]; then
  echo "gpu_check: BUILD_ONLY=1, done in $(( $(date +%s) - START ))s; failed: ${FAILED[*]:-none}"
  [ ${#FAILED[@]} -eq 0 ]
  exit $?
fi

BIN=$BUILD_DIR/cmake/bin
# The parity test binary holds only `gpu`-labelled tests; run directly, its
# "[parity]" lines (worst mismatch of each comparison) go to the log.
step parity 60 "$BIN/cuda_parity_test" --gtest_color=no
grep -E "^\[parity\]|SKIPPED|FAILED|PASSED" "$LOGS/parity.log" > "$LOGS/parity_summary.txt"
if grep -q "no CUDA device" "$LOGS/parity.log"; then
  echo "gpu_check: parity tests were skipped: no CUDA device"
  FAILED+=("parity-skipped")
fi

BENCH_ARGS=(--imagenet --batch "$BATCH" --warmup "$WARMUP" --steps "$STEPS" --mixed-precision)
step ours 90 env HYPERTUNE_CUDA_VERBOSE=1 "$BIN/hypertune-train-bench" --device cuda "${BENCH_ARGS[@]}"
step pytorch 90 "$PYTHON" benchmarks/peers_torch_resnet.py --device cuda --channels-last \
  "${BENCH_ARGS[@]}"

# images_per_second from the last JSON line of a log, or "n/a".
ips() {
  "$PYTHON" - "$1" <<'PY' 2>/dev/null || echo n/a
import json, sys
lines = [l for l in open(sys.argv[1]) if l.lstrip().startswith("{")]
print(json.loads(lines[-1])["images_per_second"] if lines else "n/a")
PY
}
OURS=$(ips "$LOGS/ours.log")
TORCH=$(ips "$LOGS/pytorch.log")
RATIO=$("$PYTHON" -c "print('%.2f' % ($OURS / $TORCH))" 2>/dev/null || echo n/a)
VERDICT=$("$PYTHON" -c "print('meets' if $OURS / $TORCH >= 0.5 else 'BELOW')" 2>/dev/null || echo n/a)
{
  echo "=== gpu_check summary (ResNet-18-like, 3x224x224, 1000 classes, batch $BATCH, mixed precision, $STEPS timed steps)"
  grep -h "hypertune cuda:" "$LOGS/ours.log" || true
  printf "%-34s %s\n" "hypertune (CUDA) images/s:" "$OURS"
  printf "%-34s %s\n" "PyTorch (bf16, channels_last):" "$TORCH"
  printf "%-34s %s (target >= 0.5: %s)\n" "ratio ours/PyTorch:" "$RATIO" "$VERDICT"
  echo "note: ours copies each batch host->device inside the step; PyTorch's batch stays on the GPU"
  printf "%-34s %s\n" "parity:" "$(grep -E '^\[  (PASSED|FAILED) ' "$LOGS/parity.log" | tr '\n' ' ')"
  echo "failed steps: ${FAILED[*]:-none}; total $(( $(date +%s) - START ))s"
} | tee "$LOGS/summary.txt"
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then
  cp "$LOGS"/*.log "$LOGS"/*.txt "$OUT"/ 2>/dev/null
fi
[ ${#FAILED[@]} -eq 0 ]
