#!/bin/bash
# Where the process-to-process spread of the 4-element invoke comes from: invoke_latency.py in
# many processes, unpinned, pinned to each CPU (taskset), and with gc.freeze(), after the
# host's CPU/NUMA layout and the GPU's CPU affinity. Needs what run_on_device.sh installs
# (PYTHONPATH, PYREE_CUDA_MODULE_DIR). ``bash bench/cuda/invoke_spread.sh [PYTHONPATH_OF_BASELINE]``
dir=${PYREE_CUDA_MODULE_DIR:-.cudabuild}
lat() { python3 bench/cuda/invoke_latency.py "$dir" cuda "$@"; }
echo "== host"; nproc; lscpu | grep -Ei "model name|numa|socket|mhz" ; nvidia-smi topo -m
cat /sys/devices/system/cpu/cpu0/cpufreq/scaling_governor 2>/dev/null
nvidia-smi --query-gpu=clocks.sm,clocks.mem,pstate --format=csv -lms 500 > "${OUT:-/tmp}/clocks.csv" &
clocks=$!
if [ -n "$1" ]; then
  echo "== committed runtime, unpinned"; for i in 1 2 3; do PYTHONPATH=$1 lat; done
fi
echo "== working tree, unpinned"; for i in 1 2 3 4 5 6; do lat; done
echo "== working tree, gc.freeze()"; for i in 1 2 3; do lat gc-freeze; done
n=$(nproc)
echo "== working tree, pinned to each CPU in turn, twice"
for pass in 1 2; do
  for ((cpu = 0; cpu < n; cpu++)); do taskset -c "$cpu" python3 bench/cuda/invoke_latency.py "$dir" cuda; done
done
kill $clocks
