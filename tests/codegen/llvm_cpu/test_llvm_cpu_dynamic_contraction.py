"""The contraction micro-kernel with run-time extents (issue 29 item 5): one compiled kernel per
case, run at sizes 0, 1, primes, a K past one cascade leaf (256) and large, against numpy in
float64 and ``kernel.evaluate``; the ragged panels, the one-row strips and packing where K is
static; the kernels the micro-kernel does not take go to the dynamic template's loops."""

import numpy as np
import pytest
from llvmcpu_harness import Compiled, matmul, random_array
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.interface import choose
from pyree.compiler.codegen.llvm_cpu.dynamic import DynamicLowering
from pyree.compiler.codegen.llvm_cpu.lowering import TEMPLATES
from pyree.compiler.codegen.llvm_cpu.matmul import ContractionLowering
from pyree.compiler.codegen.llvm_cpu.targets import resolve_target
from pyree.compiler.sizes import Size
from test_llvm_cpu_dynamic import dispatch

P0, P1, P2, P3 = (Size.symbol(f"p{k}") for k in range(4))
SIZES = [(0, 5, 7), (5, 0, 7), (5, 7, 0), (1, 1, 1), (1, 257, 300), (2, 61, 13), (7, 13, 131),
         (13, 131, 7), (37, 61, 257), (131, 67, 600), (256, 200, 1000)]


def lowering(kernel, cpu="host"):
    return choose(TEMPLATES, normalize(kernel), resolve_target(cpu, "", ""))[1]


def reference(a, b, acc):
    want = a.astype(np.float64) @ b.astype(np.float64)
    return want.astype(np.int64).astype(np.int32) if acc == "i32" else want


@pytest.mark.parametrize("in_dtype, acc", [("f32", "f32"), ("f16", "f32"), ("bf16", "f32"),
                                           ("i32", "i32")])
def test_every_dim_at_run_time(in_dtype, acc):
    kernel = matmul(P0, P1, P2, in_dtype=in_dtype, acc=acc)
    assert isinstance(lowering(kernel), ContractionLowering)
    compiled = Compiled([kernel])
    rng = np.random.default_rng(29)
    for m, n, k in SIZES:
        a, b = random_array(in_dtype, (m, k), rng), random_array(in_dtype, (k, n), rng)
        got = dispatch(compiled, kernel, (m, n, k), {0: a, 1: b}, rtol=1e-5, atol=1e-5)[2]
        if acc == "i32":
            np.testing.assert_array_equal(got, reference(a, b, acc))
        else:
            np.testing.assert_allclose(got, reference(a, b, acc), rtol=2e-5, atol=2e-5 * np.sqrt(k))


def test_sse_vector_width():
    """SSE's 4 lanes (the other tests run the host's): another micro-tile and strip width."""
    kernel = matmul(P0, P1, P2)
    compiled = Compiled([kernel], cpu="generic")
    rng = np.random.default_rng(5)
    for m, n, k in [(1, 131, 300), (3, 17, 5), (29, 67, 257)]:
        a, b = random_array("f32", (m, k), rng), random_array("f32", (k, n), rng)
        got = dispatch(compiled, kernel, (m, n, k), {0: a, 1: b}, rtol=1e-5, atol=1e-5)[2]
        np.testing.assert_allclose(got, reference(a, b, "f32"), rtol=2e-5, atol=1e-4)


@pytest.mark.parametrize("in_dtype, acc", [("i8", "i32"), ("f64", "f64")])
def test_other_dtypes_with_an_init_and_epilogue(in_dtype, acc):
    """C = relu(C0 + bias + A @ B) with every dim at run time: init and epilogue per output,
    the ragged panel's masked vectors, i8 widened to i32, f64's 4-lane vectors."""
    kernel = matmul(P0, P1, P2, in_dtype=in_dtype, acc=acc, bias=True, relu=True, init_from=True)
    assert isinstance(lowering(kernel), ContractionLowering)
    compiled = Compiled([kernel])
    rng = np.random.default_rng(12)
    for m, n, k in [(0, 3, 2), (1, 1, 1), (3, 67, 301), (14, 9, 40)]:
        a, b = random_array(in_dtype, (m, k), rng), random_array(in_dtype, (k, n), rng)
        bias, c0 = random_array(acc, (n,), rng), random_array(acc, (m, n), rng)
        got = dispatch(compiled, kernel, (m, n, k), {0: a, 1: b, 2: bias, 3: c0},
                       rtol=1e-12, atol=1e-12)[4]
        want = np.maximum(c0.astype(np.float64) + bias + a.astype(np.float64) @ b.astype(np.float64), 0)
        if acc == "i32":
            np.testing.assert_array_equal(got, want.astype(np.int32))
        else:
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_run_time_batch_with_bias_and_relu():
    """A transformer's shape: batch at run time, M, N, K static, an epilogue."""
    kernel = matmul(24, 40, 33, batch=P0, bias=True, relu=True)
    assert isinstance(lowering(kernel), ContractionLowering)
    compiled = Compiled([kernel])
    rng = np.random.default_rng(3)
    for batch in (0, 1, 3, 17):
        a, b = random_array("f32", (batch, 24, 33), rng), random_array("f32", (batch, 33, 40), rng)
        bias = random_array("f32", (40,), rng)
        got = dispatch(compiled, kernel, (batch,), {0: a, 1: b, 2: bias}, rtol=1e-5, atol=1e-5)[3]
        want = np.maximum(np.einsum("bmk,bkn->bmn", a.astype(np.float64), b) + bias, 0)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-5)


def test_transposed_y_packed_where_k_is_static():
    """y = B[n, k]: packed per panel (K static), M and N at run time."""
    kernel = matmul(P0, P1, 70, b_transposed=True)
    plan = lowering(kernel)
    assert isinstance(plan, ContractionLowering) and plan.pack
    compiled = Compiled([kernel])
    rng = np.random.default_rng(4)
    for m, n in [(0, 3), (1, 1), (1, 131), (11, 17), (67, 130)]:
        a, b = random_array("f32", (m, 70), rng), random_array("f32", (n, 70), rng)
        got = dispatch(compiled, kernel, (m, n), {0: a, 1: b}, rtol=1e-5, atol=1e-5)[2]
        np.testing.assert_allclose(got, reference(a, b.T, "f32"), rtol=2e-5, atol=1e-4)


def test_transposed_y_with_run_time_k_takes_the_loops():
    """A column stride of K at run time: no vector loads of y, so the dynamic template's loops."""
    kernel = matmul(P0, 9, P1, b_transposed=True)
    assert isinstance(lowering(kernel), DynamicLowering)
    compiled = Compiled([kernel])
    rng = np.random.default_rng(8)
    for m, k in [(5, 0), (3, 300)]:
        a, b = random_array("f32", (m, k), rng), random_array("f32", (9, k), rng)
        got = dispatch(compiled, kernel, (m, k), {0: a, 1: b}, rtol=1e-5, atol=1e-5)[2]
        np.testing.assert_allclose(got, reference(a, b.T, "f32"), rtol=2e-5, atol=1e-4)


def test_special_values():
    """NaN and infinities reach the outputs they should, including a one-row strip's."""
    kernel = matmul(P0, P1, P2)
    compiled = Compiled([kernel])
    rng = np.random.default_rng(9)
    m, n, k = 7, 70, 300
    a, b = random_array("f32", (m, k), rng), random_array("f32", (k, n), rng)
    a[0, 5], a[6, 7], b[9, 69] = np.nan, np.inf, -np.inf
    got = dispatch(compiled, kernel, (m, n, k), {0: a, 1: b})[2]
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=1e-4)
    assert np.isnan(got[0]).all() and np.isinf(got[6]).any()
