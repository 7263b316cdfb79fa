"""The vec4 elementwise template at large sizes: many workgroups with a partial last one, and
more workgroups than one grid dimension holds (a 2D grid), against numpy in float64."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.spirv import vectorized

pytestmark = pytest.mark.vulkan

# 256 invocations x 4 lanes = 1024 elements per workgroup; neither size fills its last one.
SIZES = [4 * (524288 * 5 + 37), 4 * (524288 * 2 - 3)]


def check_chain(device: str, n: int) -> None:
    ty = f"tensor<{n}xf32>"
    mlir = f"""
    func.func @f(%a: {ty}, %b: {ty}) -> {ty} {{
      %0 = arith.mulf %a, %b : {ty}
      %1 = arith.addf %0, %a : {ty}
      return %1 : {ty}
    }}"""
    module = rt.load_module(compile_str(mlir, CompileOptions(target_backends=["vulkan-spirv"])),
                            device=device)
    rng = np.random.default_rng()
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    out = module["f"](a, b).to_host()
    np.testing.assert_allclose(out, a.astype(np.float64) * b + a, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_chain_over_many_workgroups(vulkan_device, n):
    check_chain(vulkan_device, n)


def test_chain_over_a_two_dimensional_grid(vulkan_device, monkeypatch):
    # 4-invocation workgroups: 65,545 of them, past the 65,535 of one grid dimension.
    monkeypatch.setattr(vectorized, "BLOCK", 4)
    check_chain(vulkan_device, 4 * (4 * 65535 + 37))
