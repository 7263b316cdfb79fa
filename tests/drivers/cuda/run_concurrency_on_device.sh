#!/bin/bash
# The concurrency stress test (tests/drivers/cuda/test_cuda_concurrency.py) on a GPU host, for this
# tree and optionally a base tree, in one run. On the CPU build machine first:
#   python3 -c "import sys; sys.path[:0]=['tests/drivers/cuda','tests']; from pathlib import Path; \
#     import build_modules as b; b.build_concurrency(Path('.gpubuild/stress'), 'sm_90')"
#   (.whl: cffi and pycparser for the host's Python; .gl: the Vulkan loader debs, as
#    tests/drivers/vulkan/prepare_device_run.sh fetches them; .base: optional, another tree's
#    packages/{base-runtime,hal-cuda,hal-vulkan}, e.g. from git archive)
# then, with carry [".gpubuild", ".whl", ".gl", ".base"]:
#   bash tests/drivers/cuda/run_concurrency_on_device.sh
set -o pipefail
OUT=${OUT:-/tmp/pyree-concurrency-out}; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
if [ -f /usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json ]; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/*.whl || exit 1
trees="new"; [ -d .base/packages ] && trees="base new"
for tree in $trees; do
  root=.; [ "$tree" = base ] && root=.base
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site-$tree \
    $root/packages/base-runtime $root/packages/hal-cuda $root/packages/hal-vulkan 2>&1 | tail -3
done
nvidia-smi --query-gpu=name,driver_version --format=csv | tee "$OUT/gpu.txt"
export PYTHONUNBUFFERED=1 PYREE_CUDA_MODULE_DIR=$PWD/.gpubuild/stress
for tree in $trees; do
  echo "== tree: $tree" | tee -a "$OUT/concurrency.log"
  PYTHONPATH=/tmp/site-$tree:/tmp/site timeout 500 python3 -m pytest -q -p no:cacheprovider \
    --tb=short -rfs --durations=6 tests/drivers/cuda/test_cuda_concurrency.py 2>&1 \
    | tee "$OUT/concurrency-$tree.log" | grep -E "passed|failed|^FAILED|differs from|Error|slowest|s call" | head -60
done
