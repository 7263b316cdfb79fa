"""Implicit GEMM (flow/convolution.py channels-last, flow/implicit_gemm.py, codegen/cuda/gathered.py).

Each 16-bit convolution below, formed into regions for cuda, must have no patches copy, equal the
float64 numpy convolution under the kernel IR's reference semantics (``kernel.evaluate``), special
values included, and be taken by the tensor-core templates with the image gathered 16 bytes at a
time. The patch digits are checked against numpy's unravel_index. The GPU runs the same kind of
cases in tests/codegen/cuda (cases.py CONV_CASES).
"""

from __future__ import annotations

import operator
import sys
from pathlib import Path

import numpy as np
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.codegen.common import contraction
from pyree.compiler.codegen.cuda import matmul_mma, matmul_wgmma
from pyree.compiler.codegen.cuda.gathered import Gathered
from pyree.compiler.codegen.cuda.targets import resolve_target
from pyree.compiler.flow.convolution import rewrite_convolutions
from pyree.compiler.flow.implicit_gemm import inline_patches, patch_digits
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import AffineExpr, Binary, Cast, Const, LoopIndex
from pyree.compiler.tensor_program import Generic

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conv_cases import Conv  # noqa: E402
from test_convolution import run, tolerance  # noqa: E402

# 16-bit convolutions whose channels fill 8-element chunks: pads, strides, dilation, groups, batch,
# NCHW (image and filter transposed channels-last) and NHWC (already so).
CASES = {
    "nchw_pad": Conv(dtype="f16", n=2, c=8, h=7, w=6, f=5, kh=3, kw=3, pad=(1, 1)),
    "nchw_s2_dil_relu": Conv(dtype="f16", c=16, h=9, w=10, f=3, kh=3, kw=3, stride=(2, 2),
                             dilation=(1, 2), pad=(1, 2), bias_relu=True),
    "nchw_1x1_s2": Conv(dtype="f16", n=2, c=8, h=7, w=5, f=3, kh=1, kw=1, stride=(2, 2)),
    "nhwc_s2": Conv(layout="nhwc", dtype="f16", c=8, h=7, w=9, f=4, kh=3, kw=3, stride=(2, 2),
                    pad=(1, 1)),
    "grouped": Conv(layout="ngchw", dtype="f16", groups=2, c=8, h=5, w=6, f=3, kh=3, kw=3,
                    pad=(1, 1)),
}


def implicit(conv: Conv):
    function = import_mlir(conv.mlir(), "conv.mlir").functions[0]
    return inline_patches(form_dispatch_regions(rewrite_convolutions(function, implicit=True)))


def gemm_kernel(conv: Conv):
    (gemm,) = [op for op in implicit(conv).ops
               if isinstance(op, Generic) and op.num_parallel < len(op.loop_ranges)]
    return outline(gemm, "k")


@pytest.mark.parametrize("name", list(CASES))
def test_patches_are_gathered_not_copied(name):
    function = implicit(CASES[name])
    origins = [op.origin for op in function.ops if isinstance(op, Generic)]
    assert not any("im2col" in o for o in origins)
    # NCHW images are transposed channels-last (and 3x3 filters; a 1x1 one already is)
    assert ("channels_last" in origins) == (CASES[name].layout != "nhwc")
    assert contraction.match(gemm_kernel(CASES[name])) is not None


@pytest.mark.parametrize("name", list(CASES))
def test_matches_numpy_with_special_values(name):
    conv = CASES[name]
    rng = np.random.default_rng(13)
    x, w, b = conv.inputs(rng)
    x.flat[rng.choice(x.size, 6, replace=False)] = [np.nan, np.inf, -np.inf, -0.0, np.inf, np.nan]
    (got,) = run(implicit(conv), [x, w, b])
    with np.errstate(invalid="ignore"):
        want = conv.reference(x, w, b)
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(got), test(want))
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=tolerance(conv), atol=tolerance(conv))


@pytest.mark.parametrize("name", list(CASES))
def test_tensor_core_templates_gather_whole_chunks(name):
    """The pad's checks on unpadded dims fold away, so one condition and one address serve each
    8-channel chunk: both tensor-core templates take the gathered operand."""
    kernel = gemm_kernel(CASES[name])
    for template, arch in ((matmul_wgmma, "sm_90a"), (matmul_mma, "sm_80")):
        _, (ops, _) = template.plan(kernel, resolve_target(arch))
        assert isinstance(ops.b if CASES[name].layout != "nhwc" else ops.a, Gathered)


def test_odd_channels_and_f32_keep_the_copy():
    """Channels that do not fill chunks, and f32 (no tensor cores), keep the im2col copy."""
    for conv in (Conv(dtype="f16", c=5, pad=(1, 1)), Conv(c=8, pad=(1, 1))):
        origins = [op.origin for op in implicit(conv).ops if isinstance(op, Generic)]
        assert "im2col" in origins and "channels_last" not in origins


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_compiles_implicit_gemms(arch):
    for conv in CASES.values():
        assert compile_str(conv.mlir(), CompileOptions(target_backends=["cuda"], cuda_target=arch))


def test_vulkan_and_cpu_keep_the_patches_copy():
    """Only targets whose templates gather operand tiles inline the copy: a module for cuda and
    vulkan together keeps it for both (one tensor program)."""
    text = CASES["nchw_pad"].mlir()
    for targets, copied in ((["cuda", "vulkan-spirv"], True), (["llvm-cpu"], True), (["cuda"], False)):
        kernels = compile_str(text, CompileOptions(target_backends=targets,
                                                   compile_to="executable-sources")).decode()
        assert ("im2col" in kernels) == copied, targets


@pytest.mark.parametrize("view_shape, index, ranges, offset, shape", [
    # a conv's [K, N] patches view over (c, kh, kw, oh, ow): terms stay in their digits
    ((6, 35), ((0, 1), (1, 0)), (35, 6), 0, (2, 3, 5, 7)),
    # a batch and an offset (a slice of the buffer)
    ((3, 6, 35), ((1, 0, 0), (0, 0, 1), (0, 1, 0)), (2, 35, 6), 35, (4, 2, 3, 5, 7)),
    # split K: a chunk loop (3 k each) and the walk inside it are one walk over K's digits
    ((6, 35), ((3, 1, 0), (0, 0, 1)), (2, 3, 35), 0, (2, 3, 5, 7)),
    # a term that straddles digits another term uses: the divided fallback
    ((10, 7), ((1, 0), (0, 1)), (10, 7), 3, (7, 11)),
    # a stride-2 walk
    ((4, 6), ((2, 0), (0, 1)), (2, 6), 0, (8, 3)),
])
def test_patch_digits_are_the_row_major_index(view_shape, index, ranges, offset, shape):
    exprs = tuple(AffineExpr(row) for row in index)
    digits = patch_digits(exprs, view_shape, offset, shape, ranges)
    strides = [int(np.prod(view_shape[i + 1:])) for i in range(len(view_shape))]
    for point in np.ndindex(*ranges):
        flat = offset + sum(s * sum(c * p for c, p in zip(row, point)) for s, row in zip(strides, index))
        assert [_value(d, point) for d in digits] == [int(i) for i in np.unravel_index(flat, shape)]


def _value(e, point) -> int:
    """An unsigned 32-bit digit expression at a loop point."""
    if isinstance(e, Const):
        return int(e.value)
    if isinstance(e, LoopIndex):
        return point[e.dim]
    if isinstance(e, Cast):
        return _value(e.x, point)
    assert isinstance(e, Binary), e
    a, b = _value(e.a, point), _value(e.b, point)
    ops = {"add": operator.add, "mul": operator.mul, "div": operator.floordiv, "rem": operator.mod}
    return ops[e.op](a, b) % 2**32


def _chunked_gather(last, k_range: int) -> Gathered | None:
    """An f16 (m, k) operand of a 16 x 8 x ``k_range`` product read at (m, ``last``)."""
    from pyree.compiler.codegen.cuda.gathered import gathered
    from pyree.compiler.kernel import Binding, Gather, Kernel, Load, Result
    m, n = 16, 8
    value = Binary("mul", Cast("fpext", Gather(0, (LoopIndex(0), last), "f16"), "f32"),
                   Cast("fpext", Load(1, (AffineExpr((0, 0, 1)), AffineExpr((0, 1, 0))), "f16"),
                        "f32"), "f32")
    kernel = Kernel("k", (m, n, k_range), 2,
                    (Binding("f16", (m, k_range), "read"), Binding("f16", (k_range, n), "read"),
                     Binding("f32", (m, n), "write")),
                    (Result(2, (AffineExpr((1, 0, 0)), AffineExpr((0, 1, 0))), value,
                            Const(0.0, "f32")),))
    return gathered(kernel, value.a.x, is_b=False)


def test_chunks_are_not_taken_where_the_index_wraps_or_divides_through_zero():
    """A chunk is 8 consecutive elements only where the k index steps by one through it: i8
    arithmetic that wraps inside a chunk (3k - 2k, 3k past 127 at k = 43) or a truncating
    remainder of negative values (k - 16 for k < 16) does not."""
    k = LoopIndex(2)

    def i8(c):
        return Cast("trunci", Binary("mul", k, Const(c, "index"), "index"), "i8")
    walk = Cast("extsi", Binary("sub", i8(3), i8(2), "i8"), "i32")
    assert _chunked_gather(walk, 40) is not None  # 3k <= 117: no wrap
    assert _chunked_gather(walk, 64) is None
    shifted = Binary("rem", Binary("add", Cast("trunci", k, "i32"), Const(16, "i32"), "i32"),
                     Const(64, "i32"), "i32")
    assert _chunked_gather(shifted, 64) is not None
    below = Binary("rem", Binary("sub", Cast("trunci", k, "i32"), Const(16, "i32"), "i32"),
                   Const(64, "i32"), "i32")
    assert _chunked_gather(below, 64) is None
