"""Row kernels (softmax, log_softmax, layernorm, rmsnorm as one dispatch) on a Vulkan device
(lavapipe in CI): the results of both templates (the workgroup tree for rows of 128 or more, one
invocation per row below) match numpy in float64, with +inf, -inf, all -inf, NaN and -0.0 rows
(tests/codegen/spirv/test_spirv_row_kernels.py validates the shaders)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import spirv_binaries, validate, vulkan_vmfb

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "flow"))
import row_kernel_cases as C  # noqa: E402

pytestmark = pytest.mark.vulkan
SHAPES = ((1, 7), (37, 1), (37, 129), (3, 1000))


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("kind", C.KINDS)
def test_row_kernels_match_numpy(kind, dtype, vulkan_device):
    rng = np.random.default_rng(5)
    for m, n in SHAPES:
        module = rt.load_module(vulkan_vmfb(C.mlir(kind, m, n, dtype)), device=vulkan_device)
        args = C.inputs(kind, m, n, dtype, rng, specials=True)
        got = module[module.function_names[0]](*args)
        C.check(kind, got, args, dtype)


@pytest.mark.parametrize("then", ["scale", "entropy"])
def test_ops_reading_a_row_result_join_it(then, vulkan_device, tmp_path):
    """softmax * 3 (one more row result) and its entropy (a third phase whose ``sub`` fold only
    the one-invocation-per-row template takes), each one shader."""
    for m, n in ((37, 129), (5, 45)):
        vmfb = vulkan_vmfb(C.softmax_then(m, n, then))
        (code, executable), = spirv_binaries(vmfb)
        assert len(executable.exports) == 1 and validate(code, tmp_path) == ""
        module = rt.load_module(vmfb, device=vulkan_device)
        x = C.inputs("softmax", m, n, "f32", np.random.default_rng(2))[0]
        np.testing.assert_allclose(np.asarray(module["main"](x)), C.softmax_then_reference(then, x),
                                   rtol=2e-5, atol=1e-6)


@pytest.mark.parametrize("kind, shape", [("softmax_dim1", (3, 37, 5, 2)),
                                         ("softmax_dim1", (2, 300, 4, 3)),
                                         ("batch_stats", (2, 37, 5, 7))])
def test_chains_over_leading_dims_match_torch(kind, shape, vulkan_device):
    """The elementwise op permuted into the reductions' loop order (tests/flow/test_row_kernels.py)."""
    mlir, x, want = C.leading_dims(kind, shape)
    module = rt.load_module(vulkan_vmfb(mlir), device=vulkan_device)
    C.check_against(module["main"](x), want)
