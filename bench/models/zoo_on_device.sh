#!/bin/bash
# The zoo on a GPU host (the H200 of the device tool), after bench/models/zoo_prepare.sh here;
# carry ["build/zoo-gpu.tar.xz", "build/zoo-whl", ".gl"]:
#   bash bench/models/zoo_on_device.sh [DEVICES]          (DEVICES default cuda,vulkan)
# Installs only the runtime, the drivers and the compiler's pure-Python parameter writer (not its
# xDSL/llvmlite pipeline): the modules were compiled on the build machine. The table goes to
# $OUT/zoo.log, the results to $OUT/zoo.json; each model's line is printed as it finishes.
set -o pipefail
DEVICES=${1:-cuda,vulkan}
OUT=${OUT:-/tmp/pyree-zoo-out}; mkdir -p "$OUT"
python3 -m tarfile -e build/zoo-gpu.tar.xz build/ || exit 1
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  build/zoo-whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda ./packages/hal-vulkan \
  2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision',
torchvision.__version__)" | tee -a "$OUT/gpu.txt"
python3 -m pyree.runtime.tools.run_module --list_devices 2>&1 | tee -a "$OUT/gpu.txt"
python3 bench/models/zoo.py build/zoo --device="$DEVICES" --params=/tmp/zoo-params --limit=90 \
  --json "$OUT/zoo.json" 2>&1 | grep -v Warning | tee "$OUT/zoo.log"
