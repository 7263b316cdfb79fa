#!/bin/bash
# The wgmma template's GPU checks and timings in one call on the GPU host: the static GPU tests of
# an sm_90a build (CUDA90A), the TF32 GPU tests (TF32_TESTS) and models (TF32, TF32_BASE), the
# run-time tensor-core tests (RTM), then bench/kernels/gemm_on_device.sh over the folders named in
# GEMM. Built on the CPU machine:
#   python3 tests/drivers/cuda/build_modules.py .gpubuild/cuda90a sm_90a
#   python3 tests/drivers/cuda/build_tf32_modules.py .gpubuild/tf32t sm_90a
#   python3 bench/gpu/tf32.py build .gpubuild/tf32 --target sm_90a
#   python3 tests/run_time_mma_cases.py .gpubuild/rtm
#   python3 bench/kernels/build_modules.py .gpubuild/g_new_llm --target sm_90a --suite llm
# The JSON results come back as one archive, $OUT/results.tgz.
set -o pipefail
OUT=${OUT:-/tmp/pyree-wgmma}; mkdir -p "$OUT"; R=/tmp/pyree-wgmma-results; mkdir -p $R
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  .whl/*.whl ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
T=tests/drivers/cuda
if [ -n "$CUDA90A" ]; then
  echo "== static GPU tests, $CUDA90A"
  PYREE_CUDA_MODULE_DIR=$PWD/$CUDA90A timeout ${TESTS_S:-240} python3 -m pytest -q -p no:cacheprovider \
    $T/test_cuda_gpu.py -rfs 2>&1 | tail -6
fi
if [ -n "$TF32_TESTS" ]; then
  echo "== TF32 GPU tests"
  PYREE_CUDA_MODULE_DIR=$PWD/$TF32_TESTS timeout 240 python3 -m pytest -q -p no:cacheprovider \
    $T/test_cuda_tf32_on_gpu.py -rfs 2>&1 | tail -6
fi
if [ -n "$RTM" ]; then
  echo "== run-time tensor-core GPU tests"
  PYREE_RUN_TIME_MMA_MODULE_DIR=$RTM PYTHONPATH=tests:/tmp/site timeout 240 python3 -m pytest -q \
    -p no:cacheprovider $T/test_cuda_run_time_mma_on_gpu.py 2>&1 | tail -6
fi
for M in $TF32 $TF32_BASE; do
  echo "== bench/gpu/tf32.py $M"
  timeout 240 python3 bench/gpu/tf32.py run $M --json "$R/$(basename $M).json" 2>&1 \
    | grep -v "Warning\|cls.__new__" | tail -16
done
[ -n "$GEMM" ] && OUT=$R bash bench/kernels/gemm_on_device.sh $GEMM
tar -czf "$OUT/results.tgz" -C $R .
