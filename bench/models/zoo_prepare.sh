#!/bin/bash
# Run here, on the CPU build machine, in the repository root, before bench/models/zoo_on_device.sh
# goes to the GPU host (the H200 of the device tool). It builds and fetches, all ignored in git:
#   .zoo/         every zoo model's modules for llvm-cpu, cuda (sm_90) and vulkan-spirv
#                 (hopper-h100-linux) and manifest.json, without weights (the host writes them
#                 again from the seeded torch models: bench/models/zoo_weights.py); the local-task
#                 table is printed as the build goes (.zoo/local-task.log)
#   .zoo-params/  the weights archives the build exported (not carried: ~0.7 GB)
#   .gl/          the Vulkan loader and libglvnd (.debs): NVIDIA's ICD needs them
#   .zoowhl/      the wheels the host's Python 3.12 lacks for the runtime: cffi, pycparser
# Then run, with carry [".zoo", ".gl", ".zoowhl"]:  bash bench/models/zoo_on_device.sh
# MODELS=a,b limits the build to those models.
set -euo pipefail
for d in /.zoo/ /.zoo-params/ /.gl/ /.zoowhl/; do
  grep -qxF "$d" .git/info/exclude 2>/dev/null || echo "$d" >> "$(git rev-parse --git-path info/exclude)"
done
if [ ! -f .gl/libvulkan1_*.deb ]; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .zoowhl cffi==2.0.0 pycparser==3.0
python3 bench/models/zoo.py .zoo ${MODELS:+--models=$MODELS} --json .zoo/local-task.json 2>&1 \
  | grep -v Warning | tee .zoo/local-task.log || true
du -sh .zoo .gl .zoowhl
