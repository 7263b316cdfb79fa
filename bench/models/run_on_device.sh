#!/bin/bash
# Whole-model correctness and timing on a GPU host (the H100 of the device tool):
#   bash bench/models/run_on_device.sh BUILD_DIR [DRIVERS]      (DRIVERS default cuda,vulkan)
# Carry BUILD_DIR (bench/models/build_modules.py), .gl (Vulkan loader debs, as
# tests/drivers/vulkan/prepare_device_run.sh fetches them), .whl (cffi, pycparser) and, for IREE's
# modules, .irwhl (the iree-base-runtime wheel). Only the runtime and the drivers are installed: the
# modules were compiled on the CPU-only build machine. Logs and JSON go to $OUT.
set -o pipefail
BUILD=$1; DRIVERS=${2:-cuda,vulkan}
OUT=${OUT:-/tmp/pyree-models-out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl $(ls .irwhl/*.whl 2>/dev/null) || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-runtime ./packages/hal-cuda ./packages/hal-vulkan 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -m pyree.runtime.tools.run_module --list_devices 2>&1 | tee -a "$OUT/gpu.txt"
# The deployment guides' command, as written, on every driver that has a module for it.
if [ -f "$BUILD/mobilenet_v2_nhwc.vmfb" ]; then
  for d in ${DRIVERS//,/ }; do
    python3 -m pyree.runtime.tools.run_module --device=$d --module="$BUILD/mobilenet_v2_nhwc.vmfb" \
      --function=predict --input="1x224x224x3xf32=0" 2>&1 | cut -c1-200 | tee -a "$OUT/guide.txt"
  done
fi
python3 bench/models/bench_gpu.py "$BUILD" --drivers "$DRIVERS" --json "$OUT/models.json" 2>&1 \
  | tee "$OUT/models.log"
