#!/bin/bash
# bench/vulkan/first_load.py on the GPU host (NVIDIA's Vulkan driver): load to first result with
# pyree's pipeline cache empty and warm. Nothing is compiled there. On the build machine, once:
# bash tests/drivers/vulkan/prepare_device_run.sh (.gl, .whl); then run this in the repository
# root with carry [".gl", ".whl", "build/zoo/mobilenet_v3_small.vulkan-spirv.vmfb",
# "build/zoo/shufflenet_v2_x1_0.vulkan-spirv.vmfb"] (or any vulkan-spirv modules, named here):
#   bash bench/vulkan/first_load_on_device.sh [MODULE.vmfb ...]
# The table (each load phase apart: first_load_child.py) goes to $OUT/first_load.log, every
# sample to $OUT/first_load.json.
source tests/drivers/vulkan/device_setup.sh
MODULES=("$@")
[ ${#MODULES[@]} -gt 0 ] || MODULES=(build/zoo/*.vulkan-spirv.vmfb)
nproc | sed 's/^/CPUs: /' | tee -a "$OUT/gpu.txt"
timeout ${FIRST_LOAD_S:-540} python3 bench/vulkan/first_load.py "${MODULES[@]}" \
  --runs "${RUNS:-3}" --json "$OUT/first_load.json" 2>&1 | tee "$OUT/first_load.log"
