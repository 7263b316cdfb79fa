#!/bin/bash
# The CUDA GPU tests on a GPU host (the H100 of the device tool), for modules built on the CPU
# build machine for both cubin targets:
#   python3 tests/drivers/cuda/build_modules.py .gpubuild/cuda90 sm_90      (mma.sync, SIMT)
#   python3 tests/drivers/cuda/build_modules.py .gpubuild/cuda90a sm_90a    (wgmma)
# then, with carry [".gpubuild", ".whl", ".gl"] (.whl: cffi, pycparser and flatbuffers for the
# host's Python, as tests/drivers/vulkan/prepare_device_run.sh fetches them; .gl: the Vulkan loader debs,
# for test_cuda_concurrency's Vulkan cases):
#   bash tests/drivers/cuda/run_on_device.sh
# Also measures device memory around an out-of-memory failure and a module unload
# (bench/cuda/memory_after_failure.py). Logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/pyree-cuda-tests-out}; mkdir -p "$OUT"
for f in .gl/*.deb; do [ -f "$f" ] && dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda ./packages/hal-vulkan \
  2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
# The driver's own tests (hostile modules, threads) once; the tests of compiled modules for both
# cubin targets.
T=tests/drivers/cuda
for build in cuda90 cuda90a; do
  echo "== $T on the GPU, modules of .gpubuild/$build" | tee -a "$OUT/cuda.log"
  driver_tests=""
  [ $build = cuda90 ] && driver_tests="$T/test_cuda_hostile_modules.py $T/test_cuda_concurrency.py $T/test_cuda_module_state.py $T/test_cuda_scatter_gpu.py"
  PYREE_CUDA_MODULE_DIR=$PWD/.gpubuild/$build timeout 270 python3 -m pytest -q -p no:cacheprovider \
    $T/test_cuda_gpu.py $T/test_cuda_control_flow.py $T/test_cuda_dlpack.py \
    $T/test_cuda_reduction_accuracy.py $T/test_cuda_trace.py \
    $T/test_cuda_gather.py $driver_tests -rfs 2>&1 | tee -a "$OUT/cuda.log" | tail -12
done
echo "== Ctrl-C in pyree-benchmark-module on cuda" | tee -a "$OUT/cuda.log"
timeout 240 python3 -m pytest -q -p no:cacheprovider $T/test_cuda_interrupt.py 2>&1 \
  | tee -a "$OUT/cuda.log" | tail -4
timeout 60 python3 bench/cuda/memory_after_failure.py .gpubuild/cuda90/mlp.vmfb 2>&1 | tee "$OUT/memory.log"
