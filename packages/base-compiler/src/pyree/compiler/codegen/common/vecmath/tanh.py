"""tanh for f32, on |x| and then given x's sign (which keeps -0 and NaN as they are).

Below 0.625: |x| + |x|^3 * P(x^2). Above: 1 - 2 / (e^{2|x|} + 1), which has no cancellation
there (the result is above 0.55) and saturates to 1 by itself once e^{2|x|} is large or inf.
Coefficients: ``tests/codegen/llvm_cpu/fit_math_polynomials.py``.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common.vecmath.builder import MathBuilder
from pyree.compiler.codegen.common.vecmath.exponential import exp

# tanh(a) = a + a^3 * TANH_P(a^2) on [0, 0.625]: relative error 4.5e-9
TANH_P = (-0.3333328068256378, 0.13331405818462372, -0.05373651534318924, 0.02062816731631756,
          -0.005692296661436558)
SMALL = 0.625


def tanh(m: MathBuilder, x) -> ir.Value:
    a = m.abs(x)
    z = m.mul(a, a)
    small = m.fma(m.mul(a, z), m.poly(z, TANH_P), a)
    large = m.sub(m.f(1.0), m.div(m.f(2.0), m.add(exp(m, m.add(a, a)), m.f(1.0))))
    return m.copysign(m.select(m.lt(a, m.f(SMALL)), small, large), x)
