"""Fits the polynomial coefficients of the llvm-cpu inline math functions (codegen/common/vecmath).

    python3 tests/codegen/llvm_cpu/fit_math_polynomials.py

For each function: a weighted minimax fit (Lawson's iteration over weighted least squares, on
Chebyshev points, in float64) whose coefficients are rounded to f32 one at a time, lowest power
first, refitting the rest after each rounding so that the rounding errors are absorbed. Prints the
coefficient tuples and the max weighted error measured on a fine grid. Needs scipy (for erf).
Not collected by pytest.
"""

import math

import numpy as np
from scipy.special import erf, erfc


def lawson(g, w, basis, iters=200):
    """Coefficients minimizing max |w * (basis @ c - g)|."""
    u = np.full(len(g), 1.0 / len(g))
    best = (np.inf, None)
    for _ in range(iters):
        sw = np.sqrt(u) * w
        c = np.linalg.lstsq(basis * sw[:, None], g * sw, rcond=None)[0]
        err = np.abs((basis @ c - g) * w)
        best = min(best, (err.max(), c), key=lambda e: e[0])
        u = u * err / np.sum(u * err)
    return best[1]


def fit_f32(target, powers, lo, hi, weight, shift=0.0, points=6000):
    """(max weighted error, f32 coefficients) of sum c_k (t - shift)^powers[k] ~ target(t)."""
    t = (lo + hi) / 2 + (hi - lo) / 2 * np.cos(np.linspace(0, np.pi, points))
    t = t[t != 0]
    basis = np.stack([(t - shift) ** p for p in powers], 1)
    g, w = target(t), weight(t)
    fixed = []
    for k in range(len(powers)):
        rest = g - basis[:, :k] @ np.array(fixed) if k else g
        fixed.append(float(np.float32(lawson(rest, w, basis[:, k:])[0])))
    grid = np.linspace(lo, hi, 400001)
    grid = grid[grid != 0]
    approx = sum(c * (grid - shift) ** p for c, p in zip(fixed, powers))
    return np.max(np.abs((approx - target(grid)) * weight(grid))), tuple(fixed)


def main():
    half_ln2 = math.log(2) / 2 + 1e-3
    log_lo, log_hi = math.sqrt(0.5) - 1 - 1e-3, math.sqrt(2) - 1 + 1e-3
    two_over_sqrt_pi = 2 / math.sqrt(math.pi)
    erfcx = lambda a: erfc(a) * np.exp(a * a)
    fits = {
        "EXP_P: e^r = 1 + r + r^2 P(r)": (
            lambda r: np.expm1(r) - r, range(2, 7), -half_ln2, half_ln2, lambda r: np.exp(-r)),
        "EXP2_P: 2^r = 1 + r P(r)": (
            lambda r: np.exp2(r) - 1, range(1, 8), -0.5, 0.5, lambda r: np.exp2(-r)),
        "EXPM1_P: e^r - 1 = r + r^2 P(r)": (
            lambda r: np.expm1(r) - r, range(2, 8), -half_ln2, half_ln2,
            lambda r: 1 / np.abs(np.expm1(r))),
        "LOG1P_P: log1p(f) = f - f^2/2 + f^3 P(f)": (
            lambda f: np.log1p(f) - f + f * f / 2, range(3, 11), log_lo, log_hi,
            lambda f: 1 / np.abs(np.log1p(f))),
        "TANH_P: tanh(a) = a + a^3 P(a^2)": (
            lambda a: np.tanh(a) - a, range(3, 12, 2), 1e-6, 0.625, lambda a: 1 / np.tanh(a)),
        "ERF_P: erf(a) = (2/sqrt(pi)) a + a^3 P(a^2)": (
            lambda a: erf(a) - two_over_sqrt_pi * a, range(3, 14, 2), 1e-6, 1.0,
            lambda a: 1 / erf(a)),
        "ERFC_R: erfc(a) e^{a^2} = R(a - 2.5), absolute error in erfc": (
            erfcx, range(9), 1.0, 4.0, lambda a: np.exp(-a * a), 2.5),
    }
    for name, args in fits.items():
        target, powers, lo, hi, weight, *shift = args
        error, coeffs = fit_f32(target, list(powers), lo, hi, weight, *shift)
        print(f"{name}\n  error {error:.2g}\n  {coeffs}")


if __name__ == "__main__":
    main()
