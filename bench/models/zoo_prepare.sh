#!/bin/bash
# Run here, on the CPU build machine, in the repository root, before bench/models/zoo_on_device.sh
# goes to the GPU host (the H200 of the device tool). It builds and fetches (build/ and .gl/ are
# ignored in git, so nothing here travels unless carried):
#   build/zoo/         every zoo model's modules for llvm-cpu, cuda (sm_90) and vulkan-spirv
#                      (hopper-h100-linux) and manifest.json, without weights (the GPU host writes
#                      them again from the seeded torch models: bench/models/zoo_weights.py); the
#                      local-task table goes to build/zoo/local-task.log and .json
#   build/zoo-gpu.tar.xz  the cuda and vulkan-spirv modules and the manifest, packed with xz: PTX,
#                      cubins and SPIR-V compress about tenfold, far inside the 64 MiB carry
#   build/zoo-params/  the weights archives the build exported (not carried: ~0.7 GB)
#   build/zoo-whl/     the wheels the host's Python 3.12 lacks for the runtime: cffi, pycparser
#   .gl/               the Vulkan loader and libglvnd (.debs): NVIDIA's ICD needs them
# Then run, with carry ["build/zoo-gpu.tar.xz", "build/zoo-whl", ".gl"]:
#   bash bench/models/zoo_on_device.sh
# MODELS=a,b limits the build to those models.
set -euo pipefail
if ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update -qq
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
fi
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d build/zoo-whl cffi==2.0.0 pycparser==3.0
mkdir -p build/zoo
python3 bench/models/zoo.py build/zoo ${MODELS:+--models=$MODELS} --json build/zoo/local-task.json \
  2>&1 | grep -v Warning | tee build/zoo/local-task.log || true
tar -C build -cJf build/zoo-gpu.tar.xz --exclude='*.llvm-cpu.vmfb' zoo
du -sh build/zoo build/zoo-gpu.tar.xz build/zoo-whl .gl
