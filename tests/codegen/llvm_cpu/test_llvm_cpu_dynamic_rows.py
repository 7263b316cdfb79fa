"""Short rows of run-time length (issue 29 item 5): a float fold of at most SCALAR_LEAF steps
and a row kernel's elements run in masked vectors (dynamic.py ``_fold_short``, ``_rows``).
Every length around the vector width and the short/cascaded boundary, with NaN, infinities
and -0 placed in the masked vector, against numpy in float64."""

import numpy as np
import pytest
from llvmcpu_harness import Compiled, affine, identity, random_array
from pyree.compiler.codegen.llvm_cpu.reduction import SCALAR_LEAF
from pyree.compiler.kernel import Acc, Binary, Binding, Const, Final, Kernel, Load, Result, Unary
from pyree.compiler.sizes import Size
from test_llvm_cpu_dynamic import dispatch

P0, P1 = Size.symbol("p0"), Size.symbol("p1")
LENGTHS = [1, 2, 3, 7, 8, 9, 15, 16, 17, SCALAR_LEAF - 1, SCALAR_LEAF, SCALAR_LEAF + 1]


def softmax_with_max(dtype: str = "f32") -> Kernel:
    """out = softmax(x) along rows, and the row maxima and sums of exp(x - max)."""
    x = Load(0, identity(2), dtype)
    shifted = Unary("exp", Binary("sub", x, Final(0, dtype), dtype), dtype)
    row = (affine(1, 0),)
    return Kernel("softmax", (P0, P1), 1,
                  (Binding(dtype, (P0, P1), "read"), Binding(dtype, (P0,), "write"),
                   Binding(dtype, (P0,), "write"), Binding(dtype, (P0, P1), "write")),
                  (Result(1, row, Binary("max", Acc(0, dtype), x, dtype), init=Const(-np.inf, dtype)),
                   Result(2, row, Binary("add", Acc(1, dtype), shifted, dtype), init=Const(0.0, dtype)),
                   Result(3, identity(2), Binary("div", shifted, Final(1, dtype), dtype), row=True)))


@pytest.fixture(scope="module")
def compiled():
    return Compiled([softmax_with_max()])


@pytest.mark.parametrize("n", LENGTHS)
def test_softmax_rows_of_every_short_length(compiled, n):
    rng = np.random.default_rng(n)
    x = random_array("f32", (6, n), rng, -30, 30)
    x[1, -1] = np.nan          # the last element: in the masked vector
    x[2, n // 2] = np.inf
    x[3, :] = -np.inf          # a row of -inf: max -inf, exp(nan)
    x[4, 0] = -0.0
    kernel = softmax_with_max()
    _, maxima, sums, out = dispatch(compiled, kernel, (6, n), {0: x}, rtol=1e-5, atol=1e-6)
    x64 = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        m = np.max(x64, axis=1)
        e = np.exp(x64 - m[:, None])
        want_sums = e.sum(axis=1)
        want = e / want_sums[:, None]
    np.testing.assert_array_equal(maxima, m.astype(np.float32))
    np.testing.assert_allclose(sums, want_sums, rtol=1e-5)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-7)
