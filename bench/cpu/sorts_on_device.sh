#!/bin/bash
# The CPU sort cases (kernel suites breadth, breadth2, breadth3) of two builds on the GPU host's
# CPU, PyTorch's CPU in the same process, in turns; then the line-walk and radix sort tests.
#   bash bench/cpu/sorts_on_device.sh BUILD_A BUILD_B   (each holding breadth/, breadth2/, breadth3/)
set -u
export OUT=${OUT:-/tmp/out}
EXTRA_PACKAGES="" source tests/drivers/vulkan/device_setup.sh > $OUT/setup.log 2>&1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nproc; lscpu | grep -m1 "Model name"
for round in 1 2; do
  for build in "$@"; do
    for suite in breadth breadth2 breadth3; do
      echo "== round $round $build $suite"
      python3 bench/kernels/run_suite.py $build/$suite --device local-task --suite $suite --reps 7 \
        2>&1 | grep -i "^| \(sort\|argsort\|median\|topk\|top-\|classifier\)"
    done
  done
done
cd tests && timeout 300 python3 -m pytest -q -p no:cacheprovider e2e/test_line_walks.py e2e/test_radix_sorts.py -n 8 2>&1 | tail -4
