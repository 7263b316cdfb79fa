"""CPU-only: the vulkan-spirv target's sliding-window shaders (spirv/window.py: the window's
input footprint staged in workgroup memory) pass spirv-val for every case of
tests/window_cases.py on lavapipe's, the Vulkan baseline's and the H100's targets; which cases
each target stages (its shared memory bounds the footprint). tests/e2e/test_large_windows.py
runs them."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from spirv_modules import spirv_binaries, validate, vulkan_vmfb

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cuda"))
from window_cases import CASES  # noqa: E402

pytestmark = pytest.mark.vulkan
TRIPLES = ["cpu-lavapipe-linux", "unknown-unknown-linux", "hopper-h100-linux"]


@pytest.mark.parametrize("triple", TRIPLES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_window_shaders_pass_spirv_val(name, triple, tmp_path):
    (code, executable), = spirv_binaries(vulkan_vmfb(CASES[name].program, triple))
    assert len(executable.exports) == 1
    assert validate(code, tmp_path) == ""


def test_which_windows_each_target_stages():
    """A quarter of the target's shared memory bounds the footprint: the H100's 48 KB stages
    everything the template takes (not stride and dilation both 2, not a global pool, not a
    footprint of 32 KB); lavapipe's and the baseline's 16 KB fewer."""
    from pyree.compiler.codegen.spirv import resolve_target, window
    from test_cuda_large_windows import kernels_of

    def staged(triple):
        target = resolve_target(triple)
        return {n for n, c in CASES.items()
                if window.plan_flat(kernels_of(c.program)[0], target) is not None}

    h100 = staged("hopper-h100-linux")
    assert set(CASES) - h100 == {"depthwise_12x12_stride2_dilation2", "sum_pool_global_14x14",
                                 "sum_pool_16x16_stride8_nchw"}
    assert {"max_pool_12x11_nchw", "depthwise_13x11_nchw_odd"} <= staged("cpu-lavapipe-linux")
    assert "depthwise_31x31_nchw" not in staged("unknown-unknown-linux") < h100
