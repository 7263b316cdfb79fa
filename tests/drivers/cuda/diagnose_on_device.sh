#!/bin/bash
# Each GPU test file on its own, verbose, every test under a time limit: a test that hangs dumps
# every thread's stack (pytest-timeout, thread method) and ends only its own file's run. For a
# suite run that stalls (tests/drivers/cuda/run_on_device.sh). Same carry and installs as that script;
#   bash tests/drivers/cuda/diagnose_on_device.sh BUILD [SECONDS_PER_TEST] [FILES...]
set -o pipefail
BUILD=$1; LIMIT=${2:-20}; shift 2
OUT=${OUT:-/tmp/pyree-cuda-diagnose-out}; mkdir -p "$OUT"
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 PYREE_CUDA_MODULE_DIR=$PWD/.gpubuild/$BUILD
for file in "${@:-tests/drivers/cuda/test_cuda_gpu.py}"; do
  name=$(basename "$file" .py)
  timeout $((LIMIT * 20)) python3 -m pytest -v -p no:cacheprovider --timeout="$LIMIT" \
    --timeout_method=thread "$file" > "$OUT/$name.log" 2>&1
  echo "== $name: exit $? | $(grep -cE 'PASSED' "$OUT/$name.log") passed, $(grep -cE 'FAILED|ERROR' "$OUT/$name.log") failed"
  grep -E "Timeout|FAILED|Error" "$OUT/$name.log" | head -5 | cut -c1-240
done
