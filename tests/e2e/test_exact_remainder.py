"""``arith.remf`` is C's fmod, which is exact: on the GPU targets too (codegen/common/
math_expansion.exact_fmod), where the drivers' own remainder is ``a - b * trunc(a / b)``,
rounded (fmod(1e9, 1.5) was 0, not 1). Against numpy's fmod on local-task, lavapipe and cuda,
over the whole exponent range: quotients up to 2^277, subnormal operands and results, +-0,
+-inf, NaN and zero divisors, in f32, f16 and bf16 (each an exact result of its format)."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from jax_runs import DEVICES, options_for
from pyree.compiler import compile_str
from tooling import require_module

ml_dtypes = require_module("ml_dtypes")
NP = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}
N = 4099


def operands(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Pairs of every magnitude (bit patterns drawn over the format's finite range), then the
    special pairs."""
    rng = np.random.default_rng(17)
    bits = {"f32": (np.uint32, 0x7F800000), "f16": (np.uint16, 0x7C00), "bf16": (np.uint16, 0x7F80)}
    unsigned, limit = bits[dtype]
    draw = lambda: rng.integers(0, limit, N).astype(unsigned).view(NP[dtype])  # noqa: E731
    a, b = draw(), draw()
    a *= np.where(rng.random(N) < 0.5, -1, 1).astype(NP[dtype])
    b *= np.where(rng.random(N) < 0.5, -1, 1).astype(NP[dtype])
    tiny = np.array(2.0 ** {"f32": -149, "f16": -24, "bf16": -133}[dtype], np.float32)
    special = [(1e9, 1.5), (-1e9, 1.5), (3e38, 7.0), (1.0, tiny), (tiny * 3, tiny * 2),
               (5.5, -2.0), (-5.5, 2.0), (0.0, 3.0), (-0.0, 3.0), (7.0, np.inf), (-7.0, -np.inf),
               (np.inf, 2.0), (np.nan, 2.0), (2.0, np.nan), (2.0, 0.0), (2.0, -0.0),
               (0.30000001, 0.1), (1.0, 0.1), (16777217.0, 3.0), (33554436.0, 3.0)]
    with np.errstate(over="ignore"):
        a[:len(special)] = np.array([s[0] for s in special], np.float32).astype(NP[dtype])
        b[:len(special)] = np.array([s[1] for s in special], np.float32).astype(NP[dtype])
    return a, b


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
def test_remf_is_exact(device, dtype):
    a, b = operands(dtype)
    t = f"tensor<{N}x{dtype}>"
    text = f"""func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %r = arith.remf %a, %b : {t}
  return %r : {t}
}}"""
    module = rt.load_module(compile_str(text, options_for(device)), device=device)
    got = np.asarray(module["main"](a, b).to_host()).astype(np.float32)
    with np.errstate(invalid="ignore"):
        want = np.fmod(a.astype(np.float32), b.astype(np.float32))  # exact in f32, so in each
    np.testing.assert_array_equal(got, want)
    finite = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[finite]), np.signbit(want[finite]))
