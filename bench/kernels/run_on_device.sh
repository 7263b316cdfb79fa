#!/bin/bash
# Issue 11's kernel suite on a GPU host (the H100 of the device tool), from modules compiled on the
# CPU build machine:
#   python3 bench/kernels/build_modules.py .gpubuild/kernels --target sm_90a
# then, with carry [".gpubuild/kernels", ".whl"] (.whl: cffi and pycparser for the host's Python,
# tests/drivers/vulkan/prepare_device_run.sh; add an ml_dtypes wheel there if the host lacks it):
#   bash bench/kernels/run_on_device.sh [run_suite.py options, e.g. --cases gpt2,bert]
# Only the runtime and the cuda driver are installed; PyTorch with CUDA and numpy are the host's.
# The table, log and JSON go to $OUT.
set -o pipefail
BUILD=${BUILD:-.gpubuild/kernels}
OUT=${OUT:-/tmp/pyree-kernels-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
python3 -m pyree.runtime.tools.run_module --list_devices 2>&1 | tee -a "$OUT/gpu.txt"
python3 -c "import torch, ml_dtypes; print('torch', torch.__version__, 'cuda', torch.version.cuda)" \
  2>&1 | tee -a "$OUT/gpu.txt"  # without ml_dtypes the bf16 cases fail (and say so)
timeout 540 python3 bench/kernels/run_suite.py "$BUILD" --json "$OUT/kernels.json" "$@" 2>&1 \
  | tee "$OUT/kernels.log"
