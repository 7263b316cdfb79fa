"""Vector loads whose lanes step 2-4 elements (strided depthwise convolutions, poolings, im2col,
strided slices): one masked load of the span plus a shuffle, reading exactly the elements a
gather would (masked row tails, Select-guarded padding), checked against numpy with NaN and
infinities, in the window order and in explicitly vectorized elementwise kernels."""

import numpy as np
import pytest
from llvmcpu_harness import affine, random_array, run
from pyree.compiler.codegen.common.normalize import normalize
from pyree.compiler.codegen.llvm_cpu.elementwise import ElementwiseLowering
from pyree.compiler.codegen.llvm_cpu.reduction import ReductionLowering
from pyree.compiler.codegen.llvm_cpu.scalar import span_stride
from pyree.compiler.codegen.llvm_cpu.targets import resolve_target
from pyree.compiler.kernel import (
    Acc,
    Binary,
    Binding,
    Cast,
    Compare,
    Const,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
)

SPAN = span_stride(resolve_target("host"))
pytestmark = pytest.mark.skipif(SPAN < 4, reason="the host has no masked vector loads (AVX)")


def window_kernel(C, OW, K, stride, op, dtype="f32", pad=0):
    """out[c, ow] = fold_k x[c, stride*ow + k - pad] (times w[c, k] for op "dw"), with loops
    (c, ow, k); taps outside x read 0 (or -inf for "max") through a Select, as a fused pad."""
    W = stride * (OW - 1) + K - 2 * pad
    loops = (C, OW, K)
    x = Load(0, (affine(1, 0, 0), affine(0, stride, 1, const=-pad)), dtype)
    fill = Const(-np.inf if op == "max" else 0, dtype)
    if pad:
        tap = Binary("add", Binary("mul", LoopIndex(1), Const(stride, "index"), "index"),
                     LoopIndex(2), "index")
        inside = Binary("and", Compare("ge", tap, Const(pad, "index")),
                        Compare("lt", tap, Const(W + pad, "index")), "i1")
        x = Select(inside, x, fill, dtype)
    bindings = [Binding(dtype, (C, W), "read")]
    if op == "dw":
        bindings.append(Binding(dtype, (C, K), "read"))
        term = Binary("mul", x, Load(1, (affine(1, 0, 0), affine(0, 0, 1)), dtype), dtype)
        value = Binary("add", Acc(0, dtype), term, dtype)
    else:
        value = Binary("max", Acc(0, dtype), x, dtype)
    bindings.append(Binding(dtype, (C, OW), "write"))
    result = Result(len(bindings) - 1, (affine(1, 0, 0), affine(0, 1, 0)), value, init=fill)
    return Kernel(f"{op}_s{stride}", loops, 2, tuple(bindings), (result,)), W


def reference(x, w, OW, K, stride, op, pad):
    fill = -np.inf if op == "max" else 0.0
    xp = np.pad(x.astype(np.float64), ((0, 0), (pad, pad)), constant_values=fill)
    out = np.full((x.shape[0], OW), fill)
    for k in range(K):
        tap = xp[:, k: k + stride * (OW - 1) + 1: stride]
        with np.errstate(invalid="ignore"):
            out = np.maximum(out, tap) if op == "max" else out + tap * w[:, k:k + 1]
    return out


@pytest.mark.parametrize("C, OW, K, stride, op, pad", [
    (3, 37, 3, 2, "dw", 0),     # two full vectors and a masked tail of 5
    (5, 7, 3, 2, "dw", 1),      # one short vector, padding through the Select guard
    (4, 29, 5, 3, "dw", 2),
    (2, 45, 4, 4, "max", 0),
    (6, 19, 3, 2, "max", 1),
])
def test_strided_windows_vectorize_and_match_numpy(C, OW, K, stride, op, pad):
    kernel, W = window_kernel(C, OW, K, stride, op, pad=pad)
    assert ReductionLowering(normalize(kernel), SPAN).lanes > 0   # the window order, not a gather
    rng = np.random.default_rng(stride * 100 + OW)
    x = random_array("f32", (C, W), rng)
    x[0, 1], x[-1, W // 2], x[C // 2, -1] = np.nan, np.inf, -np.inf
    inputs = {0: x}
    w = None
    if op == "dw":
        w = random_array("f32", (C, K), rng)
        inputs[1] = w
    got = run(kernel, inputs)[-1]
    np.testing.assert_allclose(got, reference(x, w, OW, K, stride, op, pad), rtol=1e-5, atol=1e-5)


def test_strided_integer_window_reads_narrow_elements():
    """An i8 input widened to i32: the span load of 1-byte elements, stride 3."""
    C, OW, K, stride = 3, 21, 3, 3
    W = stride * (OW - 1) + K
    x = Cast("extsi", Load(0, (affine(1, 0, 0), affine(0, stride, 1)), "i8"), "i32")
    value = Binary("add", Acc(0, "i32"), x, "i32")
    kernel = Kernel("isum", (C, OW, K), 2, (Binding("i8", (C, W), "read"),
                                             Binding("i32", (C, OW), "write")),
                    (Result(1, (affine(1, 0, 0), affine(0, 1, 0)), value, init=Const(0, "i32")),))
    assert ReductionLowering(normalize(kernel), SPAN).lanes > 0
    xs = random_array("i8", (C, W), np.random.default_rng(3))
    got = run(kernel, {0: xs})[1]
    ref = sum(xs[:, k: k + stride * (OW - 1) + 1: stride].astype(np.int32) for k in range(K))
    np.testing.assert_array_equal(got, ref)


def test_strided_elementwise_rows_match_numpy():
    """out[i, j] = x[i, 2j + 1] * y[i, 3j] + z[i, 4j + 3] (i8 widened) - w[i, j] over rows of 53:
    three full vectors and a masked tail of 5, spans of three strides and a contiguous load."""
    R, C = 7, 53
    rng = np.random.default_rng(41)
    x, y = random_array("f32", (R, 2 * C + 1), rng), random_array("f32", (R, 3 * C), rng)
    z, w = random_array("i8", (R, 4 * C + 3), rng), random_array("f32", (R, C), rng)
    x[2, 5], y[4, 3 * 52], w[6, 0] = np.nan, np.inf, -np.inf
    def at(step, const=0):
        return (affine(1, 0), affine(0, step, const=const))
    value = Binary("sub", Binary("add", Binary("mul", Load(0, at(2, 1), "f32"), Load(1, at(3), "f32"),
                                               "f32"),
                                 Cast("sitofp", Load(2, at(4, 3), "i8"), "f32"), "f32"),
                   Load(3, at(1), "f32"), "f32")
    kernel = Kernel("strided", (R, C), 2, (Binding("f32", x.shape, "read"), Binding("f32", y.shape, "read"),
                                           Binding("i8", z.shape, "read"), Binding("f32", w.shape, "read"),
                                           Binding("f32", (R, C), "write")),
                    (Result(4, at(1), value),))
    assert ElementwiseLowering(normalize(kernel), SPAN).lanes == 16
    got = run(kernel, {0: x, 1: y, 2: z, 3: w})[4]
    with np.errstate(invalid="ignore"):
        ref = x[:, 1::2] * y[:, ::3] + z[:, 3::4].astype(np.float32) - w
    np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("OW, stride, pad", [(37, 2, 3), (6, 2, 1), (23, 3, 2)])
def test_strided_im2col_with_padding(OW, stride, pad):
    """out[k, ow] = pad(x)[stride * ow + k - pad], 0 outside: an im2col row whose first and
    last lanes fall in the padding (the Select guards the span load's lanes)."""
    K = 7
    W = stride * (OW - 1) + K - 2 * pad
    tap = Binary("add", Binary("mul", LoopIndex(1), Const(stride, "index"), "index"), LoopIndex(0), "index")
    inside = Binary("and", Compare("ge", tap, Const(pad, "index")),
                    Compare("lt", tap, Const(W + pad, "index")), "i1")
    x = Select(inside, Load(0, (affine(1, stride, const=-pad),), "f32"), Const(0.0, "f32"), "f32")
    kernel = Kernel("im2col", (K, OW), 2, (Binding("f32", (W,), "read"), Binding("f32", (K, OW), "write")),
                    (Result(1, (affine(1, 0), affine(0, 1)), x),))
    assert ElementwiseLowering(normalize(kernel), SPAN).lanes > 0
    xs = random_array("f32", (W,), np.random.default_rng(OW))
    xs[0], xs[-1] = np.nan, -np.inf
    got = run(kernel, {0: xs})[1]
    xp = np.pad(xs, pad)
    ref = np.stack([xp[k: k + stride * (OW - 1) + 1: stride] for k in range(K)])
    np.testing.assert_array_equal(got, ref)


@pytest.mark.parametrize("cpu", ["generic", "haswell"])
def test_span_loads_follow_the_target(cpu):
    """Without AVX a strided window keeps the scalar orders (its masked loads would be scalar
    too); with AVX2 it runs as vectors. Both agree with numpy."""
    kernel, W = window_kernel(5, 19, 3, 2, "dw", pad=1)
    span = span_stride(resolve_target(cpu))
    assert (ReductionLowering(normalize(kernel), span).lanes > 0) == (cpu == "haswell")
    rng = np.random.default_rng(9)
    x, w = random_array("f32", (5, W), rng), random_array("f32", (5, 3), rng)
    got = run(kernel, {0: x, 1: w}, cpu=cpu)[-1]
    np.testing.assert_allclose(got, reference(x, w, 19, 3, 2, "dw", 1), rtol=1e-5, atol=1e-5)
