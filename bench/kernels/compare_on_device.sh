#!/bin/bash
# Several builds of kernel suites timed in one device call, in turns (each against PyTorch in
# its own process), e.g. a change and its base:
#   bash bench/kernels/compare_on_device.sh .gpubuild/new:windows .gpubuild/base:windows:RE,RE ...
# (BUILD:SUITE[:the --cases regexes the build holds[:the device, cuda by default; vulkan after
# tests/drivers/vulkan/device_setup.sh]])
# (carry the build dirs and .whl as for run_on_device.sh). Per build: $OUT/<dir name>.log/.json.
set -o pipefail
OUT=${OUT:-/tmp/pyree-kernels-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
drivers=./packages/hal-cuda
[[ "$*" == *:vulkan* ]] && drivers="$drivers ./packages/hal-vulkan"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-runtime $drivers 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
for spec in "$@"; do
  IFS=: read -r build suite picks device <<< "$spec"; name=$(basename "$build")
  echo "== $build ($suite ${picks:-all} on ${device:-cuda})"
  timeout 300 python3 bench/kernels/run_suite.py "$build" --suite "$suite" --cases "$picks" \
    --device "${device:-cuda}" \
    --json "$OUT/$name.json" 2>&1 | tee "$OUT/$name.log" | grep -E "^\||geomean"
done
