#!/bin/bash
# The Vulkan driver's test suite on a GPU host's own Vulkan driver (NVIDIA's on the H100 of the
# device tool). Prepare on the build machine first: bash tests/drivers/vulkan/prepare_device_run.sh;
# then run this in the repository root with .gl, .whl and .vkbuild carried. Logs go to $OUT.
# Arguments name other test files to run instead (e.g. tests/e2e/test_dynamic_shapes.py);
# MARKERS selects other tests of them (e.g. "cuda or vulkan", with EXTRA_PACKAGES=./packages/hal-cuda).
source tests/drivers/vulkan/device_setup.sh
grep -q "^vulkan://" "$OUT/devices.txt" || { echo "no Vulkan device on this host"; exit 1; }
python3 -m pytest -q -p no:cacheprovider -m "${MARKERS:-vulkan}" "${@:-tests/drivers/vulkan}" 2>&1 | tee "$OUT/pytest.log" \
  | tail -40
