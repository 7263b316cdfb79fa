#!/bin/bash
# One device call that re-checks the cuda backend after a codegen change: the GPU tests of the
# sm_90 test modules, the kernels with run-time sizes (direct, stream, graph), their speed against
# static modules and PyTorch, and ONNX node tests compiled for cuda. On the CPU build machine:
#   bash tests/drivers/vulkan/prepare_device_run.sh                    # .whl
#   python3 tests/drivers/cuda/build_modules.py .gpubuild/cuda90 sm_90
#   python3 tests/drivers/cuda/dynamic_modules.py .gpubuild/dynamic sm_90
#   python3 bench/gpu/dynamic_vs_static.py build .gpubuild/dynamic_bench --target sm_90
#   python dev/onnx_node_tests.py --data DIR --backend cuda --compile-only build/onnx-X ...
# then, with carry [".gpubuild", ".whl", "build/onnx-X", ...]:
#   ONNX_DIRS="build/onnx-X ..." bash bench/gpu/recheck_cuda.sh
# Logs and JSON go to $OUT.
set -o pipefail
OUT=${OUT:-/tmp/pyree-recheck-out}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site \
  .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  ./packages/base-compiler ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
T=tests/drivers/cuda
echo "== GPU tests, modules of .gpubuild/cuda90" | tee "$OUT/log"
PYREE_CUDA_MODULE_DIR=$PWD/.gpubuild/cuda90 timeout ${TESTS_S:-200} python3 -m pytest -q \
  -p no:cacheprovider $T/test_cuda_gpu.py $T/test_cuda_reduction_accuracy.py $T/test_cuda_gather.py \
  -rfs 2>&1 | tee -a "$OUT/log" | tail -6
echo "== run-time sizes: direct, stream, graph" | tee -a "$OUT/log"
PYREE_CUDA_DYNAMIC_MODULE_DIR=$PWD/.gpubuild/dynamic timeout ${DYNAMIC_S:-150} python3 -m pytest \
  -q -p no:cacheprovider -m cuda -rfs $T/test_cuda_dynamic.py 2>&1 | tee -a "$OUT/log" | tail -6
echo "== dynamic vs static vs torch (graph mode)" | tee -a "$OUT/log"
timeout ${BENCH_S:-150} python3 bench/gpu/dynamic_vs_static.py run .gpubuild/dynamic_bench \
  --mode graph --json "$OUT/dynamic_vs_static.json" 2>&1 | tee -a "$OUT/log" | tail -34
for d in $ONNX_DIRS; do
  echo "== ONNX node tests of $d on cuda" | tee -a "$OUT/log"
  timeout ${ONNX_S:-120} python3 dev/onnx_node_tests.py --run "$d" --device cuda --jobs 8 \
    --json "$OUT/$(basename "$d").json" 2>&1 | tee -a "$OUT/log" | tail -30
done
