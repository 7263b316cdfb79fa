"""f64 sqrt and rsqrt on Vulkan are GLSL.std.450's own 64-bit Sqrt and InverseSqrt: computed
through f32 (as the f32 roots' exact_root does), sqrt(1e300) was inf and sqrt(1e-300) 0. Over
f64's whole exponent range with its special values, against numpy; the shader passes
spirv-val."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.spirv.spirv_modules import DEVICE_TARGET, spirv_binaries, validate, vulkan_vmfb

pytestmark = pytest.mark.vulkan
N = 4099
T = f"tensor<{N}xf64>"
TEXT = f"""func.func @main(%a: {T}) -> ({T}, {T}) {{
  %s = math.sqrt %a : {T}
  %r = math.rsqrt %a : {T}
  return %s, %r : {T}, {T}
}}"""


def test_f64_roots_pass_spirv_val(tmp_path):
    for code, _ in spirv_binaries(vulkan_vmfb(TEXT, DEVICE_TARGET)):
        assert validate(code, tmp_path) == ""


def test_f64_roots_keep_f64s_range(vulkan_device):
    rng = np.random.default_rng(0)
    x = np.exp(rng.uniform(-740, 709, N))
    x[:8] = [0.0, -0.0, np.inf, np.nan, -1.0, 5e-324, 1e300, 1e-300]
    module = rt.load_module(vulkan_vmfb(TEXT, DEVICE_TARGET), device=vulkan_device)
    got_sqrt, got_rsqrt = (np.asarray(v.to_host()) for v in module["main"](x))
    with np.errstate(divide="ignore", invalid="ignore"):
        want_sqrt, want_rsqrt = np.sqrt(x), 1 / np.sqrt(x)
    for got, want in ((got_sqrt, want_sqrt), (got_rsqrt, want_rsqrt)):
        special = ~np.isfinite(want) | (want == 0)
        np.testing.assert_array_equal(got[special], want[special])
        signed = special & ~np.isnan(want)  # (a NaN's sign is the driver's)
        np.testing.assert_array_equal(np.signbit(got[signed]), np.signbit(want[signed]))
        ulps = np.abs(got[~special] - want[~special]) / np.spacing(np.abs(want[~special]))
        assert ulps.max() <= 2, ulps.max()  # Vulkan leaves f64 precision to the driver
    assert got_sqrt[6] == 1e150 and got_sqrt[7] == 1e-150
