#!/bin/bash
# Tensor-core kernels with run-time sizes (codegen/cuda/run_time_mma.py, attention_mma.py) on the GPU
# host: the GPU tests (and, with ATT, the attention tests, run-time lengths among them), then the
# f16 linear layers of bench/gpu/dynamic_vs_static.py (dynamic against static,
# and an older build's dynamic module, BASE), then GPT-2/LLaMA prefill (bench/gpu/llm_decode.py,
# LLM and LLM_BASE). Built on the CPU machine:
#   python3 tests/run_time_mma_cases.py .gpubuild/rtm
#   python3 tests/drivers/cuda/test_cuda_attention_on_gpu.py .gpubuild/att   (ATT)
#   python3 bench/gpu/dynamic_vs_static.py build .gpubuild/dvs --target sm_90a --ops linear_f16,linear_f16_wide
#   python3 bench/gpu/llm_decode.py build .gpubuild/llm --target sm_90a --match small_f16
# (BASE and LLM_BASE the same with another compiler), then, carrying those folders and .whl:
#   RTM=.gpubuild/rtm DVS=.gpubuild/dvs BASE=... LLM=... LLM_BASE=... bash $0
set -o pipefail
OUT=${OUT:-/tmp/pyree-run-time-mma}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  .whl/*.whl ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
quiet() { grep -v "Warning\|cls.__new__"; }
OPS=${OPS:-linear_f16,linear_f16_wide}
if [ -n "$RTM" ]; then
  PYREE_RUN_TIME_MMA_MODULE_DIR=$RTM PYTHONPATH=tests:/tmp/site timeout 300 python3 -m pytest -q \
    -p no:cacheprovider tests/drivers/cuda/test_cuda_run_time_mma_on_gpu.py 2>&1 | tail -8 | tee "$OUT/tests.log"
fi
if [ -n "$ATT" ]; then
  PYREE_TEST_ATTENTION_MLIR=$ATT PYTHONPATH=tests:/tmp/site timeout 400 python3 -m pytest -q \
    -p no:cacheprovider tests/drivers/cuda/test_cuda_attention_on_gpu.py 2>&1 | tail -8 | tee "$OUT/attention.log"
fi
[ -n "$DVS" ] && timeout 200 python3 bench/gpu/dynamic_vs_static.py run "$DVS" --ops $OPS $DVS_ARGS \
  --json "$OUT/dvs.json" 2>&1 | quiet | tee "$OUT/dvs.log" | tail -12
[ -n "$BASE" ] && timeout 200 python3 bench/gpu/dynamic_vs_static.py run "$BASE" --ops $OPS \
  --json "$OUT/dvs_base.json" 2>&1 | quiet | tee "$OUT/dvs_base.log" | tail -12
for L in $LLM $LLM_BASE; do
  echo "== $L"
  timeout ${LLM_S:-240} python3 -X faulthandler bench/gpu/llm_decode.py run "$L" --json "$OUT/$(basename $L).json" \
    --match "${LLM_MATCH:-}" $LLM_ARGS 2>&1 | quiet | tail -${LLM_TAIL:-30}
done
# PROFILE: modules whose prefill to profile kernel by kernel (bench/gpu/llm_prefill_profile.py)
for M in $PROFILE; do
  timeout 120 python3 bench/gpu/llm_prefill_profile.py "$M" 2>&1 | quiet
done
