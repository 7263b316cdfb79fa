#!/bin/bash
# On a GPU host: the GPU tests of the working tree, then the 4-element invoke A/B, committed
# runtime + CUDA driver (BASELINE=DIR holding copies of packages/base-runtime and
# packages/hal-cuda) against the working tree, alternating, in ROUNDS rounds of processes; the
# working tree once per device URI in URIS (default "cuda"). Same preparation as run_on_device.sh
# (.cudabuild, .cudabuild90a, cffi wheels in .whl).
set -o pipefail
OUT=${OUT:-/tmp/pyree-cuda-out}; mkdir -p "$OUT"
install() {  # install TARGET PACKAGE_DIRS...
  local target=$1; shift
  rm -rf "$target"  # a warm machine may hold another install there (pip --target would keep it)
  python3 -m pip install -q --no-index --no-deps --no-compile --target "$target" .whl/*.whl || exit 1
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$target" "$@" 2>&1 | tail -3
}
install /tmp/site ./packages/base-runtime ./packages/hal-cuda
[ -n "$BASELINE" ] && install /tmp/base "$BASELINE/base-runtime" "$BASELINE/hal-cuda"
export PYTHONUNBUFFERED=1
for build in .cudabuild .cudabuild90a; do
  echo "== GPU tests, modules of $build"
  PYTHONPATH=/tmp/site PYREE_CUDA_MODULE_DIR=$PWD/$build python3 -m pytest -q -p no:cacheprovider \
    tests/drivers/cuda/test_cuda_gpu.py 2>&1 | tee -a "$OUT/pytest.log" | tail -8
done
for ((i = 0; i < ${ROUNDS:-4}; i++)); do
  [ -n "$BASELINE" ] && PYTHONPATH=/tmp/base python3 bench/cuda/invoke_latency.py .cudabuild cuda \
    | sed 's/^/committed:    /'
  for uri in ${URIS:-cuda}; do
    PYTHONPATH=/tmp/site python3 bench/cuda/invoke_latency.py .cudabuild "$uri" | sed 's/^/working tree: /'
  done
done 2>&1 | tee "$OUT/invoke_ab.txt"
(cd "$OUT" && PYTHONPATH=/tmp/site python3 "$OLDPWD/bench/cuda/profile_invoke.py" "$OLDPWD/.cudabuild" cuda) \
  > "$OUT/profile.txt" 2>&1
