"""erf for f32, on |x| and then given x's sign (which keeps -0 and NaN as they are).

Below 1: an odd polynomial whose leading coefficient 2/sqrt(pi) is split in two f32 parts
(rounding it alone would cost an ulp). From 1: 1 - e^{-x^2} * R(x), where R = erfc * e^{x^2}
is smooth and fitted for absolute error in erfc, which is all that 1 - erfc needs; above 4
the result rounds to 1. Coefficients: ``tests/codegen/llvm_cpu/fit_math_polynomials.py``.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common.vecmath.builder import MathBuilder
from pyree.compiler.codegen.common.vecmath.exponential import exp

TWO_OVER_SQRT_PI_HI = 1.128379225730896
TWO_OVER_SQRT_PI_LO = -5.8635382771399236e-08
# erf(a) = (2/sqrt(pi)) * a + a^3 * ERF_P(a^2) on [0, 1]: relative error 1.5e-9
ERF_P = (-0.3761262893676758, 0.11283604055643082, -0.026854272931814194, 0.005188812967389822,
         -0.0008011997560970485, 7.85347874625586e-05)
# erfc(a) * e^{a^2} = ERFC_R(a - 2.5) on [1, 4]: absolute error in erfc 2.4e-9
ERFC_R = (0.21080760657787323, -0.07434217631816864, 0.024914653971791267, -0.008132237941026688,
          0.0023024403490126133, -0.0006612510187551379, 0.0005432096077129245,
          0.00022501785133499652, 0.00010683596337912604)
ERFC_CENTER = 2.5
SATURATION = 4.0


def erf(m: MathBuilder, x) -> ir.Value:
    a = m.abs(x)
    z = m.mul(a, a)
    small = m.fma(a, m.f(TWO_OVER_SQRT_PI_HI),
                  m.fma(m.mul(a, z), m.poly(z, ERF_P), m.mul(a, m.f(TWO_OVER_SQRT_PI_LO))))
    c = m.select(m.gt(a, m.f(SATURATION)), m.f(SATURATION), a)  # NaN stays NaN
    erfc = m.mul(exp(m, m.mul(m.sub(m.f(0.0), c), c)), m.poly(m.sub(c, m.f(ERFC_CENTER)), ERFC_R))
    large = m.sub(m.f(1.0), erfc)
    return m.copysign(m.select(m.lt(a, m.f(1.0)), small, large), x)
