#!/bin/bash
# The runtime's host cost per call on cuda, another tree's runtime and drivers against this one's,
# alternating processes (bench/host_per_call.py --baseline-src), for the modules of a build folder:
#   bash bench/cuda/per_call_ab.sh BUILD BASE_SITE NEW_SITE
# BASE_SITE / NEW_SITE: folders each tree's base-runtime and hal-cuda were pip-installed into
# (--target); /tmp/site holds the wheels both need (cffi, pycparser). Run after
# tests/drivers/cuda/run_on_device.sh's installs, e.g. BUILD=.gpubuild/cuda90.
set -o pipefail
BUILD=$1; BASE=$2; NEW=$3
for mode in graph stream; do
  for case in "bench_add_4 main" "mlp mlp"; do
    set -- $case
    echo "== $1 ($2), cuda command_buffer=$mode: $BASE vs $NEW"
    PYTHONPATH=$NEW:/tmp/site timeout 120 python3 bench/host_per_call.py \
      --devices "cuda://0?command_buffer=$mode" --module "$BUILD/$1.vmfb" --function "$2" \
      --baseline-src "$BASE" --repeats 3 --calls 1000 --rounds 5
  done
done
