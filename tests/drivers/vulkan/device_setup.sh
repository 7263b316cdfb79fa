# Sourced by tests/drivers/vulkan/run_on_device.sh and bench/vulkan/run_on_device.sh on the GPU host:
# the Vulkan loader (carried .gl/*.deb when the host has none), NVIDIA's ICD, and pyree's
# compiler, runtime and vulkan driver (and EXTRA_PACKAGES: one pip run, which --target needs, as
# each replaces the pyree folder) installed into /tmp/site with the carried wheels.
set -o pipefail
OUT=${OUT:-/tmp/pyree-vulkan-out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done  # loader + libglvnd, which NVIDIA's ICD needs
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
fi
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-vulkan $EXTRA_PACKAGES 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -m pyree.runtime.tools.run_module --list_devices 2>&1 | tee "$OUT/devices.txt"
