#!/bin/bash
# One device call that re-checks a release on the GPU host: the GPU test files one by one (each test
# under a time limit, as diagnose_on_device.sh), the f16 accuracy of a model against PyTorch's on
# the GPU, and the model zoo on cuda and vulkan. Each stage has a wall-time cap so the call ends
# inside the device tool's limit. Carry [".gpubuild", ".whl", ".gl", "build/zoo-gpu.tar.xz",
# "build/f16b"] (.whl: cffi, pycparser, xdsl and its two dependencies, for the tests that compile):
#   bash tests/drivers/cuda/verify_on_device.sh [FILES...]
set -o pipefail
OUT=${OUT:-/tmp/pyree-verify-out}; mkdir -p "$OUT"
export OUT
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda ./packages/hal-vulkan \
  2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
start=$SECONDS
T=tests/drivers/cuda
timeout 300 bash $T/diagnose_on_device.sh cuda90 25 "${@:-$T/test_cuda_gpu.py}" \
  | tee "$OUT/tests.txt"
echo "== tests: $((SECONDS - start)) s"
start=$SECONDS
[ -d build/f16b ] && timeout 60 python3 bench/models/f16_accuracy.py run build/f16b --device cuda \
  2>&1 | grep -v Warning | tee "$OUT/f16.txt"
echo "== f16: $((SECONDS - start)) s"
start=$SECONDS
python3 -m tarfile -e build/zoo-gpu.tar.xz build/ || exit 1
timeout "${ZOO_SECONDS:-200}" python3 bench/models/zoo.py build/zoo --device=cuda,vulkan \
  --params=/tmp/zoo-params --limit=90 --json "$OUT/zoo.json" 2>&1 | grep -v Warning \
  | tee "$OUT/zoo.log"
echo "== zoo: $((SECONDS - start)) s"
