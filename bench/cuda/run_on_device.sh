#!/bin/bash
# Runs the CUDA GPU tests and benchmarks on a GPU host (the H100 of the device tool).
# Needs, from the CPU build machine: .cudabuild/ (python3 tests/drivers/cuda/build_modules.py
# .cudabuild sm_90, then python3 bench/cuda/tile_sweep.py build .cudabuild), .cudabuild90a/ (the same
# build_modules.py for sm_90a: wgmma) and, when cffi is missing there, .whl/ with cffi and
# pycparser wheels for the host's Python. With BASELINE=DIR (a copy of packages/base-runtime and
# packages/hal-cuda as committed) it also times the 4-element invoke on that install.
set -o pipefail
OUT=${OUT:-/tmp/pyree-cuda-out}; mkdir -p "$OUT"
install() {  # install TARGET PACKAGE_DIRS...
  local target=$1; shift
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target "$target" .whl/*.whl || exit 1
  fi
  python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$target" "$@" 2>&1 | tail -3
}
install /tmp/site ./packages/base-runtime ./packages/hal-cuda
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PYREE_CUDA_MODULE_DIR=$PWD/.cudabuild
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/host.txt"
python3 -m pyree.runtime.tools.run_module --list_devices 2>&1 | tee -a "$OUT/host.txt"
python3 -m pyree.runtime.tools.run_module --device=cuda --module=.cudabuild/bench_add_4.vmfb \
  --input="1x4xf32=1 2 3 4" --input="1x4xf32=10 20 30 40" 2>&1 | tee -a "$OUT/host.txt"
for build in .cudabuild .cudabuild90a; do
  echo "== GPU tests, modules of $build"
  PYREE_CUDA_MODULE_DIR=$PWD/$build python3 -m pytest -q -p no:cacheprovider \
    tests/drivers/cuda/test_cuda_gpu.py 2>&1 | tee -a "$OUT/pytest.log" | tail -15
done
mkdir -p /tmp/sass && python3 bench/cuda/dump_sass.py /tmp/sass .cudabuild/bench_matmul_f16.vmfb .cudabuild90a/bench_matmul_f16.vmfb 2>&1 | tee "$OUT/sass.txt"
if [ -n "$BASELINE" ]; then
  (install /tmp/base "$BASELINE/base-runtime" "$BASELINE/hal-cuda"
   PYTHONPATH=/tmp/base python3 bench/cuda/invoke_latency.py "$PYREE_CUDA_MODULE_DIR" cuda | sed 's/^/committed driver: /') 2>&1 | tee "$OUT/baseline.txt"
fi
python3 bench/cuda/invoke_latency.py "$PYREE_CUDA_MODULE_DIR" cuda | sed 's/^/working tree: /' | tee -a "$OUT/baseline.txt"
(cd "$OUT" && python3 "$OLDPWD/bench/cuda/profile_invoke.py" "$PYREE_CUDA_MODULE_DIR" cuda) > "$OUT/profile.txt" 2>&1
if ls .cudabuild/sweep_*.vmfb >/dev/null 2>&1; then
  (cd /tmp && python3 "$OLDPWD/bench/cuda/tile_sweep.py" run "$PYREE_CUDA_MODULE_DIR") 2>&1 | tee "$OUT/sweep.log"
fi
(cd "$OUT" && PYREE_CUDA_F16_MODULE_DIR=$OLDPWD/.cudabuild90a python3 "$OLDPWD/bench/cuda/bench_cuda.py" "$PYREE_CUDA_MODULE_DIR" ${BENCH_MODES:-graph stream direct}) 2>&1 | tee "$OUT/bench.log" | tail -20
