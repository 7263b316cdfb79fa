"""A product or quotient with a constant ±0.0 is IEEE's on Vulkan: Mesa's lavapipe (22.3) folded
``x * 0.0`` and ``x / 0.0`` to +0.0 whatever x was (NaN * 0 gave 0, 1 / 0 gave 0) though the
shader declares SignedZeroInfNanPreserve, so pyree emits them as selects (spirv/scalar.py)."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import DEVICE_TARGET, vulkan_vmfb

pytestmark = pytest.mark.vulkan
X = np.array([1, -1, 0, -0.0, np.nan, np.inf, -np.inf, 1e-45, 3e38], np.float32)


@pytest.mark.parametrize("op, zero, zero_first", [("mulf", 0.0, False), ("mulf", -0.0, False),
                                                  ("mulf", 0.0, True), ("mulf", -0.0, True),
                                                  ("divf", 0.0, False), ("divf", -0.0, False)])
def test_products_and_quotients_by_a_constant_zero(vulkan_device, op, zero, zero_first):
    t = f"tensor<{X.size}xf32>"
    operands = "%z, %x" if zero_first else "%x, %z"
    text = f"""func.func @main(%x: {t}) -> {t} {{
  %z = arith.constant dense<{zero!r}> : {t}
  %0 = arith.{op} {operands} : {t}
  return %0 : {t}
}}"""
    got = np.asarray(rt.load_module(vulkan_vmfb(text, DEVICE_TARGET), device=vulkan_device)["main"](
        X).to_host())
    z = np.float32(zero)
    with np.errstate(divide="ignore", invalid="ignore"):
        want = X * z if op == "mulf" else X / z
    np.testing.assert_array_equal(got, want)
    number = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))
