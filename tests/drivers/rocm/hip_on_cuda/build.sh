#!/bin/bash
# Builds the test-only HIP-on-CUDA library: bash tests/drivers/rocm/hip_on_cuda/build.sh OUT_DIR
# writes OUT_DIR/libamdhip64.so (needs only gcc: libcuda.so.1 is opened at run time).
set -euo pipefail
out=${1:?usage: build.sh OUT_DIR}
mkdir -p "$out"
gcc -O2 -Wall -Wextra -Werror -shared -fPIC -fvisibility=hidden -pthread \
  "$(dirname "$0")/hip_on_cuda.c" -ldl -o "$out/libamdhip64.so"
