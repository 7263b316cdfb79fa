#!/bin/bash
# Runs the CUDA GPU tests and benchmarks on a GPU host (the H100 of the device tool).
# Needs, from the CPU build machine: .cudabuild/ (python3 tests/cuda/build_modules.py .cudabuild
# sm_90) and, when cffi is missing there, .whl/ with a cffi wheel for the host's Python.
set -o pipefail
OUT=${OUT:-/tmp/pyree-cuda-out}; mkdir -p "$OUT"
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-index --no-deps --no-build-isolation --target /tmp/site \
  ./packages/base-runtime ./packages/hal-cuda 2>&1 | tail -3 || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PYREE_CUDA_MODULE_DIR=$PWD/.cudabuild
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
cd /tmp && python3 -c "import pyree.runtime as rt; print([(d.name, d.available, d.reason) for d in rt.list_drivers()]); print(rt.list_devices('cuda'))"
cd - >/dev/null
python3 -m pyree.runtime.tools.run_module --list_devices 2>&1 | tee "$OUT/cli.txt"
python3 -m pyree.runtime.tools.run_module --device=cuda --module=.cudabuild/bench_add_4.vmfb \
  --input="1x4xf32=1 2 3 4" --input="1x4xf32=10 20 30 40" 2>&1 | tee -a "$OUT/cli.txt"
python3 -m pytest -q -p no:cacheprovider tests/cuda/test_cuda_gpu.py 2>&1 | tee "$OUT/pytest.log" | tail -40
(cd "$OUT" && python3 "$OLDPWD/bench/cuda/profile_invoke.py" "$PYREE_CUDA_MODULE_DIR" cuda && python3 "$OLDPWD/bench/cuda/bench_cuda.py" "$PYREE_CUDA_MODULE_DIR" ${BENCH_MODES:-graph stream direct}) 2>&1 | tee "$OUT/bench.log" | tail -30
if ls .cudabuild/sweep_*.vmfb >/dev/null 2>&1; then
  (cd "$OUT" && python3 "$OLDPWD/bench/cuda/tile_sweep.py" run "$PYREE_CUDA_MODULE_DIR") 2>&1 | tee "$OUT/sweep.log"
fi
