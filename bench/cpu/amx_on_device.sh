#!/bin/bash
# The llvm-cpu AMX template (codegen/llvm_cpu/amx.py) on the GPU host's CPU (Sapphire Rapids
# class, AMX-BF16): its tests on the real instruction, then bf16 matmuls against PyTorch's CPU
# bf16 (oneDNN's AMX kernels), pyree's AMX variant and its AVX2 one. Carry .whl (cffi, xdsl and
# their dependencies, as the other device scripts do):
#   bash bench/cpu/amx_on_device.sh
# SHAPES and ROUNDS override the cases; AVX2=1 adds the AVX2 variant's times; CONFIGS="TM,TN,CHUNK
# ..." adds runs with other AMX tile sizes (bf16_matmul.py --amx); TESTS=0 skips the tests.
set -o pipefail
OUT=${OUT:-/tmp/pyree-amx}; mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-build-isolation --upgrade --target /tmp/site \
  .whl/*.whl ./packages/base-compiler ./packages/base-runtime 2>&1 | tail -3
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
lscpu | grep -E "Model name|^CPU\(s\)|Thread\(s\)|Core\(s\)|MHz" | tee "$OUT/cpu.txt"
grep -o -w "amx_[a-z0-9]*\|avx512_bf16" /proc/cpuinfo | sort -u | tr '\n' ' ' | tee -a "$OUT/cpu.txt"; echo
[ "${TESTS:-1}" = 1 ] && timeout 400 python3 -m pytest -q -p no:cacheprovider -rs tests/codegen/llvm_cpu/test_llvm_cpu_amx.py \
  tests/codegen/llvm_cpu/test_llvm_cpu_variants.py 2>&1 | tail -6 | tee "$OUT/tests.log"
ROUNDS=${ROUNDS:-7}
SHAPES=${SHAPES:-"3072,1024,4096 512,4096,4096:nk 128,4096,11008:nk 2048,4096,4096:nk"}
for case in $SHAPES; do
  shape=${case%%:*}; flag=""; [ "$case" != "$shape" ] && flag="--weight-nk"
  timeout 300 python3 bench/cpu/bf16_matmul.py --shape "$shape" $flag --rounds "$ROUNDS" 2>&1 | tail -3 | tee -a "$OUT/bench.log"
  for config in $CONFIGS; do
    timeout 300 python3 bench/cpu/bf16_matmul.py --shape "$shape" $flag --rounds "$ROUNDS" --amx "$config" 2>&1 | tail -1 | tee -a "$OUT/bench.log"
  done
  [ -n "$AVX2" ] && PYREE_LLVMCPU_VARIANT=x86-64-v3 timeout 300 python3 bench/cpu/bf16_matmul.py \
    --shape "$shape" $flag --rounds 3 2>&1 | tail -2 | tee -a "$OUT/bench.log"
done
