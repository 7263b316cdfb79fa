#!/bin/bash
# Tensor-core products on the GPU host: each folder given (from build_modules.py, or each variant
# folder inside one from bench/cuda/forced_tiles.py) through run_suite.py against PyTorch eager
# (cuBLAS), in order. A folder's suite is named in its path: ..._llm or ..._gemm. On the CPU machine:
#   python3 bench/kernels/build_modules.py .gpubuild/g_new_gemm --target sm_90a --suite gemm
#   python3 bench/cuda/forced_tiles.py wgmma .gpubuild/g_f_gemm . gemm
# then, carrying those folders and .whl: bash bench/kernels/gemm_on_device.sh .gpubuild/g_new_gemm ...
set -o pipefail
OUT=${OUT:-/tmp/pyree-gemm}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  .whl/*.whl ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
for F in "$@"; do
  if [ -f "$F/manifest.json" ]; then folders=$F; else folders=$(ls -d "$F"/*/); fi
  for V in $folders; do
    V=${V%/}; suite=gemm; [[ $V == *_llm* ]] && suite=llm
    label=$(echo "$V" | tr '/' '_')
    echo "== $V"
    timeout ${SUITE_S:-150} python3 bench/kernels/run_suite.py "$V" --suite $suite --reps ${REPS:-60} $SUITE_ARGS \
      --json "$OUT/$label.json" 2>&1 | grep "^|\|geomean\|WRONG\|FAIL\|rror" | grep -v "^| case\|^|--\|not in the manifest"
  done
done
