#!/bin/bash
# The cooperative-matrix matmul on NVIDIA's Vulkan driver: what the device offers
# (coopmat_probe.py), the correctness tests, then the f16 GEMMs of the kernel suites against
# PyTorch's CUDA in the same process, for this tree's modules and (optionally) an older tree's.
# Build on the CPU machine first, for each tree:
#   python3 bench/kernels/build_modules.py .gpubuild/gemm_new --backend vulkan-spirv \
#       --target hopper-h100-linux --suite gemm --cases _f16_
#   python3 bench/kernels/build_modules.py .gpubuild/llm_new ... --suite llm --cases prefill_f16
# then with carry [".gl", ".whl", ".gpubuild"]: OUT=$OUT bash bench/vulkan/coopmat_on_device.sh
# (SUITES: "folder:suite ..." to time; default the four folders above and their _old twins).
# Results in $OUT: probe.txt, tests.log, suites.log and json.tgz (run_suite.py's JSON per folder).
EXTRA_PACKAGES="./packages/hal-cuda" source tests/drivers/vulkan/device_setup.sh > "$OUT/setup.log" 2>&1
mkdir -p "$OUT/json"; rm -f "$OUT/gpu.txt" "$OUT/devices.txt"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
python3 bench/vulkan/coopmat_probe.py 2>&1 | tee "$OUT/probe.txt"
(cd tests && timeout ${TEST_S:-200} python3 -m pytest -q -p no:cacheprovider \
  drivers/vulkan/test_vulkan_cooperative_matmul.py drivers/vulkan/test_vulkan_row_kernels.py \
  codegen/spirv/test_spirv_contraction.py 2>&1 \
  | tail -15) | tee "$OUT/tests.log"
for spec in ${SUITES:-.gpubuild/gemm_new:gemm .gpubuild/gemm_old:gemm .gpubuild/llm_new:llm .gpubuild/llm_old:llm}; do
  folder=${spec%%:*}; suite=${spec##*:}
  [ -d "$folder" ] || continue
  echo "== $folder"
  timeout ${SUITE_S:-150} python3 bench/kernels/run_suite.py "$folder" --device vulkan \
    --suite "$suite" --json "$OUT/json/$(echo "$folder" | tr / _)_$suite.json" 2>&1 \
    | grep -v "Warning\|cls.__new__\|not in the manifest" | tail -24
done 2>&1 | tee "$OUT/suites.log"
tar czf "$OUT/json.tgz" -C "$OUT" json && rm -r "$OUT/json"
