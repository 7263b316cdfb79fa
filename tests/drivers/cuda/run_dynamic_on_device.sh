#!/bin/bash
# Kernels with run-time sizes on a GPU host (the H200 of the device tool): the cuda driver's three
# modes, the rocm driver through the HIP-on-CUDA shim, and the speed of dynamic against static
# modules and PyTorch. On the CPU build machine, first:
#   bash tests/drivers/vulkan/prepare_device_run.sh             # .whl: cffi, pycparser, xdsl, llvmlite
#   python3 tests/drivers/cuda/dynamic_modules.py .gpubuild/dynamic sm_90
#   python3 bench/gpu/dynamic_vs_static.py build .gpubuild/dynamic_bench --target sm_90
# then, with carry [".gpubuild", ".whl"]:
#   bash tests/drivers/cuda/run_dynamic_on_device.sh
# Logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/pyree-dynamic-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda ./packages/hal-rocm \
  2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
export PYREE_CUDA_DYNAMIC_MODULE_DIR=$PWD/.gpubuild/dynamic
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
echo "== cuda: direct, stream, graph" | tee "$OUT/dynamic.log"
timeout 240 python3 -m pytest -q -p no:cacheprovider -m cuda -rfs \
  tests/drivers/cuda/test_cuda_dynamic.py 2>&1 | tee -a "$OUT/dynamic.log" | tail -15
echo "== rocm on the HIP-on-CUDA shim" | tee -a "$OUT/dynamic.log"
if command -v gcc >/dev/null; then
  bash tests/drivers/rocm/hip_on_cuda/build.sh /tmp/hip_on_cuda && \
    export PYREE_HIP_LIBRARY=/tmp/hip_on_cuda/libamdhip64.so
elif [ -f .gpubuild/libamdhip64.so ]; then
  export PYREE_HIP_LIBRARY=$PWD/.gpubuild/libamdhip64.so
fi
timeout 180 python3 -m pytest -q -p no:cacheprovider -m cuda -rfs \
  tests/drivers/rocm/hip_on_cuda/test_rocm_on_cuda_dynamic.py 2>&1 | tee -a "$OUT/dynamic.log" | tail -15
echo "== dynamic vs static vs torch (graph mode)" | tee -a "$OUT/dynamic.log"
timeout 150 python3 bench/gpu/dynamic_vs_static.py run .gpubuild/dynamic_bench --mode graph \
  --json "$OUT/dynamic_vs_static.json" 2>&1 | tee -a "$OUT/dynamic.log" | tail -25
