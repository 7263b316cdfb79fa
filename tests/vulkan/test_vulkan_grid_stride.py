"""The vec4 grid-stride elementwise template past its first loop trip: sizes where every
invocation loops several times and the unrolled tail is ragged, against numpy in float64."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

pytestmark = pytest.mark.vulkan

# 2048 workgroups x 256 invocations x 4 lanes = 2,097,152 elements per grid-stride pass.
SIZES = [4 * (524288 * 5 + 37), 4 * (524288 * 2 - 3)]


@pytest.mark.parametrize("n", SIZES)
def test_chain_over_many_grid_strides(vulkan_device, n):
    ty = f"tensor<{n}xf32>"
    mlir = f"""
    func.func @f(%a: {ty}, %b: {ty}) -> {ty} {{
      %0 = arith.mulf %a, %b : {ty}
      %1 = arith.addf %0, %a : {ty}
      return %1 : {ty}
    }}"""
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["vulkan-spirv"])),
                            device=vulkan_device)
    rng = np.random.default_rng()
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = module["f"](a, b).to_host()
    np.testing.assert_allclose(out, a.astype(np.float64) * b + a, rtol=1e-6, atol=1e-6)
