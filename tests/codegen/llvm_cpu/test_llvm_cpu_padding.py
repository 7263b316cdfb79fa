"""Select arms may load out of range where they are not chosen (tensor.pad): only the chosen
arm is evaluated, by branching in scalar code and by masked loads in vector code."""

from dataclasses import replace

import numpy as np
from llvmcpu_harness import affine, identity, matmul, random_array, run
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Binding,
    Compare,
    Const,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    evaluate,
)


def within(dim, lo, hi):
    """lo <= loop[dim] < hi, as an i1 expression."""
    return Binary("and", Compare("ge", LoopIndex(dim), Const(lo, "index")),
                  Compare("lt", LoopIndex(dim), Const(hi, "index")), "i1")


def test_elementwise_pad():
    M, N = 37, 53
    x = random_array("f32", (M, N), np.random.default_rng(60))
    inside = Binary("and", within(0, 1, M + 1), within(1, 2, N + 2), "i1")
    shifted = Load(0, (affine(1, 0, const=-1), affine(0, 1, const=-2)), "f32")
    shape = (M + 2, N + 4)
    k = Kernel("pad", shape, 2, (Binding("f32", (M, N), "read"), Binding("f32", shape, "write")),
               (Result(1, identity(2), Select(inside, shifted, Const(-1.0, "f32"), "f32")),))
    got = run(k, {0: x})[1]
    np.testing.assert_array_equal(got, np.pad(x, ((1, 1), (2, 2)), constant_values=-1.0))
    ref = np.zeros(shape, np.float32)
    evaluate(k, [x, ref])
    np.testing.assert_array_equal(got, ref)


def test_padded_window_reduction():
    """out[i] = sum_k pad(x)[i + k] * w[k]: a 1-D convolution with zero padding 1."""
    N, K = 301, 3
    rng = np.random.default_rng(61)
    x, w = random_array("f32", (N,), rng), random_array("f32", (K,), rng)
    tap = Binary("add", LoopIndex(0), LoopIndex(1), "index")
    inside = Binary("and", Compare("ge", tap, Const(1, "index")), Compare("lt", tap, Const(N + 1, "index")), "i1")
    xs = Select(inside, Load(0, (affine(1, 1, const=-1),), "f32"), Const(0.0, "f32"), "f32")
    value = Binary("add", Acc(0, "f32"), Binary("mul", xs, Load(1, (affine(0, 1),), "f32"), "f32"), "f32")
    k = Kernel("conv1d", (N, K), 1, (Binding("f32", (N,), "read"), Binding("f32", (K,), "read"),
                                     Binding("f32", (N,), "write")),
               (Result(2, (affine(1, 0),), value, init=Const(0.0, "f32")),))
    got = run(k, {0: x, 1: w})[2]
    np.testing.assert_allclose(got, np.convolve(np.pad(x, 1), w[::-1], mode="valid"), rtol=1e-5, atol=1e-6)


def test_guarded_load_in_a_vectorized_epilogue():
    """matmul + (n < 10 ? extra[n + 5] : 0): the micro-kernel's vector epilogue masks the load."""
    kernel = matmul(37, 29, 53)
    acc = Acc(0, "f32")
    n = kernel.num_parallel - 1
    extra = Load(2, (affine(*[int(d == n) for d in range(3)], const=5),), "f32")
    epilogue = Binary("add", acc, Select(Compare("lt", LoopIndex(n), Const(10, "index")), extra,
                                         Const(0.0, "f32"), "f32"), "f32")
    result = replace(kernel.results[0], binding=3, epilogue=epilogue)
    kernel = replace(kernel, bindings=kernel.bindings[:2] + (Binding("f32", (15,), "read"),) + kernel.bindings[2:],
                     results=(result,))
    rng = np.random.default_rng(62)
    a, b, e = random_array("f32", (37, 53), rng), random_array("f32", (53, 29), rng), random_array("f32", (15,), rng)
    got = run(kernel, {0: a, 1: b, 2: e})[3]
    ref = a.astype(np.float64) @ b
    ref[:, :10] += e[5:15]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
