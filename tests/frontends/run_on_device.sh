#!/bin/bash
# Issue 9's GPU run on the device tool's H100: the frontend programs (JAX, TOSA), every op file of
# tests/e2e/ops and the control-flow cases on cuda and vulkan, plus the loop-overhead benchmark,
# from modules compiled on the CPU build machine:
#   python3 tests/frontends/build_modules.py .gpubuild/frontends sm_90
#   python3 tests/drivers/cuda/build_modules.py .gpubuild/cuda sm_90
#   python3 bench/control_flow.py --devices cuda,vulkan --build .gpubuild/loops
# then, with carry [".gpubuild", ".gl", ".whl"] (.gl, .whl: tests/drivers/vulkan/prepare_device_run.sh,
# less llvmlite, which the host has):  bash tests/frontends/run_on_device.sh
# The runtime and the two drivers run the prebuilt modules; the compiler is installed too, for
# the Vulkan device tests that compile in-process (the host's own llvmlite). Logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/pyree-frontends-out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda ./packages/hal-vulkan 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -m pyree.runtime.tools.run_module --list_devices 2>&1 | tee -a "$OUT/gpu.txt"
PYREE_FRONTEND_MODULE_DIR=$PWD/.gpubuild/frontends timeout 400 python3 -m pytest -q \
  -p no:cacheprovider -m "cuda or vulkan" tests/frontends 2>&1 | tee "$OUT/frontends.log" | tail -25
PYREE_CUDA_MODULE_DIR=$PWD/.gpubuild/cuda timeout 400 python3 -m pytest -q -p no:cacheprovider \
  tests/drivers/cuda/test_cuda_control_flow.py tests/drivers/cuda/test_cuda_gpu.py 2>&1 \
  | tee "$OUT/cuda.log" | tail -25
PYREE_VULKAN_TARGET=hopper-h100-linux timeout 300 python3 -m pytest -q -p no:cacheprovider -m vulkan \
  tests/drivers/vulkan/test_vulkan_math.py tests/drivers/vulkan/test_vulkan_control_flow.py \
  tests/drivers/vulkan/test_vulkan_dtypes.py 2>&1 | tee "$OUT/vulkan.log" | tail -25
timeout 120 python3 bench/control_flow.py --devices cuda,vulkan --module-dir .gpubuild/loops 2>&1 \
  | tee "$OUT/loops.log"
