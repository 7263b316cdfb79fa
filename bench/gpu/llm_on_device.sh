#!/bin/bash
# bench/gpu/llm_decode.py's run on the GPU host, cuda and NVIDIA's Vulkan. On the CPU build
# machine first: bash tests/drivers/vulkan/prepare_device_run.sh (.whl, .gl) and
#   python3 bench/gpu/llm_decode.py build .gpubuild/llm --target sm_90
# then, with carry [".gpubuild/llm", ".whl", ".gl"]: bash bench/gpu/llm_on_device.sh
OUT=${OUT:-/tmp/pyree-llm-out}; mkdir -p "$OUT"
source tests/drivers/vulkan/device_setup.sh
# one pip call for every package: --target replaces the pyree folder another call installed
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-vulkan ./packages/hal-cuda \
  2>&1 | tail -3
timeout ${LLM_S:-500} python3 -X faulthandler bench/gpu/llm_decode.py run .gpubuild/llm --json "$OUT/llm.json" \
  --match "${LLM_MATCH:-}" 2>&1 \
  | grep -v "Warning\|cls.__new__" | tee "$OUT/llm.log" | tail -60
