#!/bin/bash
# The rocm driver on the device tool's H100, through the HIP-on-CUDA shim. On the CPU build
# machine, first:
#   python3 tests/drivers/rocm/hip_on_cuda/build_modules.py .gpubuild/rocm_on_cuda sm_90
#   bash tests/drivers/rocm/hip_on_cuda/build.sh .gpubuild  # the prebuilt shim, where gcc is missing
# then, with carry [".gpubuild", ".whl"] (.whl: cffi and pycparser, which the host's Python lacks;
# tests/drivers/vulkan/prepare_device_run.sh fetches them):
#   bash tests/drivers/rocm/hip_on_cuda/run_on_device.sh
# The runtime and the rocm driver are installed from this tree; the modules are the prebuilt ones,
# so the host needs no compiler. Logs go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/pyree-rocm-on-cuda-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-runtime ./packages/hal-rocm 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
if command -v gcc >/dev/null; then
  bash tests/drivers/rocm/hip_on_cuda/build.sh /tmp/hip_on_cuda || exit 1
  export PYREE_HIP_LIBRARY=/tmp/hip_on_cuda/libamdhip64.so
else
  echo "no gcc on this host: using the prebuilt .gpubuild/libamdhip64.so" | tee "$OUT/shim.txt"
  export PYREE_HIP_LIBRARY=$PWD/.gpubuild/libamdhip64.so
fi
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -m pyree.runtime.tools.run_module --list_drivers --list_devices 2>&1 | tee -a "$OUT/gpu.txt"
PYREE_ROCM_ON_CUDA_MODULE_DIR=$PWD/.gpubuild/rocm_on_cuda timeout 540 python3 -m pytest -q \
  -p no:cacheprovider -m cuda -rs tests/drivers/rocm/hip_on_cuda 2>&1 | tee "$OUT/rocm_on_cuda.log" \
  | tail -60
