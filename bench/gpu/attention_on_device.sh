#!/bin/bash
# Fused attention on the GPU host: the GPU tests of the tensor-core template, the timing against
# PyTorch's SDPA (and an older build, BASE, case by case), the LLM kernel suite, and a profile of
# the runtime's per-call path on cuda. Built on the CPU machine:
#   python3 bench/gpu/attention.py build .gpubuild/att            (and BASE with another compiler)
#   python3 tests/drivers/cuda/test_cuda_attention_on_gpu.py .gpubuild/attention_mlir
#   python3 bench/kernels/build_modules.py .gpubuild/llm --target sm_90a --suite llm
#   python3 bench/cuda/forced_tiles.py wgmma .gpubuild/ft CASES llm    (optional: FT)
# then, carrying those folders and .whl: ATT=... BASE=... MLIR=... LLM=... ADD=add.vmfb FT=... bash $0
set -o pipefail
OUT=${OUT:-/tmp/pyree-attention}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  .whl/*.whl ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
quiet() { grep -v "Warning\|cls.__new__"; }
if [ -n "$MLIR" ]; then
  PYREE_TEST_ATTENTION_MLIR=$MLIR timeout 300 python3 -m pytest -q -p no:cacheprovider -n 8 \
    tests/drivers/cuda/test_cuda_attention_on_gpu.py 2>&1 | tail -8 | tee "$OUT/tests.log"
fi
[ -n "$ATT" ] && timeout 200 python3 bench/gpu/attention.py run "$ATT" ${BASE:+--base "$BASE"} 2>&1 \
  | quiet | tee "$OUT/attention.log"
[ -n "$ADD" ] && timeout 120 python3 bench/host_per_call.py --devices cuda --module "$ADD" \
  --function add --profile 2>&1 | tail -40 | tee "$OUT/host.log"
[ -n "$LLM" ] && timeout ${SUITE_S:-240} python3 bench/kernels/run_suite.py "$LLM" --suite llm \
  --json "$OUT/llm.json" 2>&1 | quiet | tee "$OUT/llm.log" | tail -40
if [ -n "$FT" ]; then  # bench/cuda/forced_tiles.py's variants of the suite's cases
  for v in "$FT"/*/; do
    echo "== forced $(basename "$v")"
    timeout 120 python3 bench/kernels/run_suite.py "$v" --suite llm --reps 50 2>&1 | grep "^ok\|WRONG\|FAILED"
  done | tee "$OUT/forced.log"
fi
exit 0
