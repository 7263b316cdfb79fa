#!/bin/bash
# The Vulkan benchmarks (bench_vulkan.py) on a GPU host, PyTorch on CUDA timed in the same run.
# Prepare on the build machine first: bash tests/drivers/vulkan/prepare_device_run.sh; then run
# this in the repository root with .gl, .whl and .vkbuild carried. Results: $OUT/bench.log and .json.
source tests/drivers/vulkan/device_setup.sh
(cd "$OUT" && python3 "$OLDPWD/bench/vulkan/bench_vulkan.py" "$OLDPWD/.vkbuild") 2>&1 \
  | tee "$OUT/bench.log" | tail -30
