#!/bin/bash
# --pyree-cuda-f32-matmul on the GPU host (the H200 of the device tool): the GPU tests of the TF32
# modes (tests/drivers/cuda/test_cuda_tf32_on_gpu.py), then bench/gpu/tf32.py's models and matmul
# against PyTorch with TF32 on and off. On the CPU build machine first:
#   .whl with cffi and pycparser for the host's Python 3.12 (tests/drivers/vulkan/prepare_device_run.sh
#   fetches them, among others)
#   python3 tests/drivers/cuda/build_tf32_modules.py .gpubuild/tf32_tests sm_90a
#   python3 bench/gpu/tf32.py build .gpubuild/tf32 --target sm_90a
# then, with carry [".gpubuild/tf32_tests", ".gpubuild/tf32", ".whl"]:
#   bash bench/gpu/tf32_on_device.sh
# (TF32_TESTS and TF32 name other folders; TF32_BASE, a build by another compiler, runs too;
# KERNELS=N prints each module's N longest kernels.)
# Logs and the JSON go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/pyree-tf32-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
# one pip call for every package: --target replaces the pyree folder another call installed
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
echo "== tests/drivers/cuda/test_cuda_tf32_on_gpu.py" | tee "$OUT/tests.log"
PYREE_CUDA_MODULE_DIR=$PWD/${TF32_TESTS:-.gpubuild/tf32_tests} timeout ${TESTS_S:-240} python3 -m pytest -q \
  -p no:cacheprovider tests/drivers/cuda/test_cuda_tf32_on_gpu.py -rfs 2>&1 | tee -a "$OUT/tests.log" | tail -15
echo "== bench/gpu/tf32.py" | tee "$OUT/bench.log"
timeout ${BENCH_S:-300} python3 bench/gpu/tf32.py run ${TF32:-.gpubuild/tf32} --json "$OUT/tf32.json" ${KERNELS:+--kernels $KERNELS} 2>&1 \
  | grep -v "Warning\|cls.__new__" | tee -a "$OUT/bench.log" | tail -20
if [ -n "$TF32_BASE" ]; then
  echo "== $TF32_BASE" | tee -a "$OUT/bench.log"
  timeout ${BENCH_S:-300} python3 bench/gpu/tf32.py run "$TF32_BASE" --json "$OUT/tf32_base.json" 2>&1 \
    | grep -v "Warning\|cls.__new__" | tee -a "$OUT/bench.log" | tail -20
fi
