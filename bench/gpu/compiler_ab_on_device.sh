#!/bin/bash
# One device call that weighs a compiler change on the GPU host: the change's builds against a
# base's, in one process each, and the GPU tests of the change. Every step runs only where its
# variable is set. On the CPU build machine, from each tree (a worktree of the base, and the
# change's tree or worktree):
#   python3 bench/gpu/llm_decode.py build .gpubuild/A --target sm_90a [--match M]
#   python3 bench/gpu/attention.py build .gpubuild/att --target sm_90a
#   python3 tests/drivers/cuda/test_cuda_attention_on_gpu.py .gpubuild/attention_mlir
#   python3 tests/drivers/cuda/build_modules.py .gpubuild/cuda90 sm_90
#   cp -r packages/base-compiler .altpkg/   (ALT: the change's compiler, where the GPU tests
#                                            compile there and the working tree is the base)
# then, carrying those folders, .whl and .gl:
#   COMPARE=".gpubuild/A .gpubuild/B" MODELS="gpt2_small_f16 ..." ALT=.altpkg/base-compiler \
#   MLIR=.gpubuild/attention_mlir ATT=.gpubuild/att ATT_BASE=.gpubuild/attbase \
#   RUN=.gpubuild/B TESTS=.gpubuild/cuda90 GPU_TESTS="tests/drivers/cuda/test_X.py ..." \
#   bash bench/gpu/compiler_ab_on_device.sh
# Logs go to $OUT.
OUT=${OUT:-/tmp/pyree-ab-out}; mkdir -p "$OUT"
EXTRA_PACKAGES=./packages/hal-cuda source tests/drivers/vulkan/device_setup.sh >/dev/null 2>&1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
quiet() { grep -v "Warning\|cls.__new__"; }
# the change's compiler ahead of the installed one (pyree is a namespace package)
ALT_PATH=${ALT:+$PWD/$ALT/src:}/tmp/site
if [ -n "$MLIR" ]; then
  echo "== attention GPU tests (compiler: ${ALT:-installed})" | tee -a "$OUT/log"
  PYTHONPATH=$ALT_PATH PYREE_TEST_ATTENTION_MLIR=$MLIR timeout ${MLIR_S:-200} python3 -m pytest \
    -q -p no:cacheprovider -n 8 -rfs tests/drivers/cuda/test_cuda_attention_on_gpu.py 2>&1 \
    | tail -8 | tee -a "$OUT/log"
fi
if [ -n "$ATT" ]; then
  echo "== attention kernels: $ATT against ${ATT_BASE:-nothing}" | tee -a "$OUT/log"
  timeout ${ATT_S:-150} python3 bench/gpu/attention.py run "$ATT" ${ATT_BASE:+--base "$ATT_BASE"} \
    2>&1 | quiet | tee -a "$OUT/log"
fi
for m in $MODELS; do
  echo "== decode compare $m: $COMPARE" | tee -a "$OUT/log"
  timeout ${COMPARE_S:-200} python3 bench/gpu/llm_decode.py compare $COMPARE --match "$m" \
    --json "$OUT/compare_$m.json" 2>&1 | quiet | tee -a "$OUT/log" | tail -30
done
if [ -n "$TESTS" ]; then
  echo "== GPU tests of $TESTS (numerics table, gather, reductions)" | tee -a "$OUT/log"
  PYREE_CUDA_MODULE_DIR=$PWD/$TESTS timeout ${TESTS_S:-200} python3 -m pytest -q -n 8 \
    -p no:cacheprovider -rfs tests/drivers/cuda/test_cuda_gpu.py \
    tests/drivers/cuda/test_cuda_gather.py 2>&1 | tee -a "$OUT/log" | tail -8
fi
if [ -n "$GPU_TESTS" ]; then
  echo "== GPU tests compiled here: $GPU_TESTS" | tee -a "$OUT/log"
  timeout ${GPU_TESTS_S:-200} python3 -m pytest -q -p no:cacheprovider -rfs $GPU_TESTS 2>&1 \
    | tee -a "$OUT/log" | tail -8
fi
if [ -n "$RUN" ]; then
  echo "== every model of $RUN: tokens against PyTorch, decode and prefill times" | tee -a "$OUT/log"
  timeout ${RUN_S:-400} python3 -X faulthandler bench/gpu/llm_decode.py run "$RUN" --no-kernels \
    --json "$OUT/run.json" --match "${RUN_MATCH:-}" 2>&1 | quiet | tee -a "$OUT/log" | tail -80
fi
exit 0
