#!/bin/bash
# Issue 31's LLM kernel suite on the GPU host: the suite, an older build of its products to
# compare (BASE, optional) and the matrix-vector split sweep (SWEEP, optional), from modules
# compiled on the CPU machine:
#   python3 bench/kernels/build_modules.py .gpubuild/llm_kernels --target sm_90a --suite llm
#   python3 bench/kernels/gemv_split_sweep.py .gpubuild/gemv_sweep
# then, with carry [".gpubuild/llm_kernels", ".gpubuild/gemv_sweep", ".whl"]:
#   bash bench/kernels/llm_on_device.sh
set -o pipefail
BUILD=${BUILD:-.gpubuild/llm_kernels}; SWEEP=${SWEEP:-.gpubuild/gemv_sweep}; BASE=${BASE:-}
OUT=${OUT:-/tmp/pyree-llm-kernels}; mkdir -p "$OUT"
# one pip call for every package: --target replaces the pyree folder another call installed
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  .whl/*.whl ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
suite() {  # folder, label, run_suite options...
  local folder=$1 label=$2; shift 2
  timeout ${SUITE_S:-200} python3 bench/kernels/run_suite.py "$folder" --suite llm \
    --json "$OUT/$label.json" "$@" 2>&1 | grep -v "Warning\|cls.__new__" | tee "$OUT/$label.log" | tail -45
}
suite "$BUILD" llm
[ -n "$BASE" ] && suite "$BASE" base --cases "${BASE_CASES:-.}"
if [ -d "$SWEEP" ]; then
  for v in "$SWEEP"/blocks*; do
    echo "== sweep $(basename "$v")"
    suite "$v" "sweep_$(basename "$v")" --reps 50 | grep "^ok\|WRONG\|FAILED"
  done
fi
