# On the GPU host (carry .gl, .whl): bench/vulkan/chain_diag.py's variants, each in many processes.
source tests/drivers/vulkan/device_setup.sh >/dev/null 2>&1
for v in ${VARIANTS:-plain waits-kept end-barrier compute-barrier}; do
  for p in $(seq ${PROCESSES:-20}); do
    timeout 60 python3 bench/vulkan/chain_diag.py $v ${TRIALS:-40} $([ $p = 1 ] && echo types) 2>&1 | tail -3
  done > "$OUT/$v.txt"
  echo "== $v: processes with a wrong chain: $(grep -c ': [1-9][0-9]* of' "$OUT/$v.txt") of ${PROCESSES:-20}"
  grep "^  " "$OUT/$v.txt" | head -4
done
