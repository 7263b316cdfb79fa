#!/bin/bash
# Run once here, on the CPU build machine, in the repository root, before sending
# tests/drivers/vulkan/run_on_device.sh or bench/vulkan/run_on_device.sh to a GPU host (the H100 of the
# device tool). It fetches what that host lacks and ignores it in git:
#   .gl/       the Vulkan loader and libglvnd (.debs): NVIDIA's ICD is libGLX_nvidia, which needs them
#   .whl/      wheels the host's Python lacks: cffi, pycparser, xdsl and its deps, llvmlite 0.50
#   .vkbuild/  the benchmark modules, compiled here
# Then run, with carry [".gl", ".whl", ".vkbuild"]:  bash tests/drivers/vulkan/run_on_device.sh
# and/or bash bench/vulkan/run_on_device.sh
set -euo pipefail
for d in /.gl/ /.whl/ /.vkbuild/; do
  grep -qxF "$d" .git/info/exclude || echo "$d" >> .git/info/exclude
done
mkdir -p .gl .whl /tmp/amd64/partial
o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
apt-get $o update -qq
(cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl cffi==2.0.0 pycparser==3.0 xdsl==0.74.0 immutabledict==4.3.1 ordered-set==4.1.0 \
  llvmlite==0.50.0
python3 bench/vulkan/build_modules.py .vkbuild
du -sh .gl .whl .vkbuild
