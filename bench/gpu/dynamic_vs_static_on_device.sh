#!/bin/bash
# bench/gpu/dynamic_vs_static.py on the GPU host, on cuda and on NVIDIA's Vulkan driver. Built on
# the CPU machine (bash tests/drivers/vulkan/prepare_device_run.sh once, for .gl and .whl):
#   python3 bench/gpu/dynamic_vs_static.py build .gpubuild/dvs --target sm_90a --ops conv
#   python3 bench/gpu/dynamic_vs_static.py build .gpubuild/vk --backend vulkan-spirv --ops ...
#   python3 tests/drivers/cuda/dynamic_modules.py .gpubuild/dyn sm_90         (DYN, optional)
# (BASE: another compiler's dynamic modules alone; the static ones are DVS's), then, carrying
# .gl, .whl and those folders:
#   DVS=.gpubuild/dvs BASE=... OPS=conv VK=.gpubuild/vk VK_OPS=... DYN=... bash $0
OUT=${OUT:-/tmp/pyree-dynamic-vs-static}
EXTRA_PACKAGES=./packages/hal-cuda
source tests/drivers/vulkan/device_setup.sh  # the loader, pyree into /tmp/site, PYTHONPATH
quiet() { grep -v "Warning\|cls.__new__"; }
if [ -n "$DYN" ]; then
  PYREE_CUDA_DYNAMIC_MODULE_DIR=$DYN PYTHONPATH=tests:/tmp/site timeout 300 python3 -m pytest -q \
    -p no:cacheprovider tests/drivers/cuda/test_cuda_dynamic.py tests/drivers/cuda/test_cuda_dynamic_soak.py \
    2>&1 | tail -8 | tee "$OUT/dynamic_tests.log"
fi
[ -n "$BASE" ] && cp --update=none "$DVS"/*.vmfb "$BASE"/
for D in $DVS $BASE; do
  echo "== cuda $D"
  timeout 200 python3 bench/gpu/dynamic_vs_static.py run "$D" --ops "$OPS" $DVS_ARGS \
    --json "$OUT/$(basename $D).json" 2>&1 | quiet | tail -12
done
if [ -n "$VK" ]; then
  grep -q "^vulkan://" "$OUT/devices.txt" || { echo "no Vulkan device on this host"; exit 1; }
  echo "== vulkan $VK"
  timeout 420 python3 bench/gpu/dynamic_vs_static.py run "$VK" --backend vulkan-spirv \
    --ops "$VK_OPS" --json "$OUT/vulkan.json" 2>&1 | quiet | tail -45
fi
