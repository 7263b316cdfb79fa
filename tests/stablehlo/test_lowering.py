"""The shape of what StableHLO lowers to, where it matters beyond the numbers: convolutions
must reach ``flow/convolution.py`` as the contraction it turns into im2col + GEMM, whatever
their dimension numbers and groups."""

from __future__ import annotations

import pytest
from pyree.compiler.errors import CompileError
from pyree.compiler.flow.convolution import rewrite_convolution
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Generic

CONV = """func.func @f(%x: tensor<{lhs}xf32>, %w: tensor<{rhs}xf32>) -> tensor<{out}xf32> {{
  %0 = stablehlo.convolution(%x, %w) dim_numbers = {dims}, window = {{stride = [2, 1],
    pad = [[1, 1], [0, 2]], rhs_dilate = [1, 2]}} {{batch_group_count = 1 : i64,
    feature_group_count = {groups} : i64}} : (tensor<{lhs}xf32>, tensor<{rhs}xf32>)
    -> tensor<{out}xf32>
  return %0 : tensor<{out}xf32>
}}"""


@pytest.mark.parametrize("dims,lhs,rhs,out,groups", [
    ("[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]", "2x4x9x8", "6x4x3x3", "2x6x5x6", 1),
    ("[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]", "2x9x8x4", "3x3x4x6", "2x5x6x6", 1),
    # Grouped, NCHW: the group loop is a batch loop of the GEMM. (Grouped NHWC is not
    # rewritten, as linalg's conv_2d_nhwgc_gfhwc is not: g sits between the m and n groups.)
    ("[b, f, 0, 1]x[o, i, 0, 1]->[b, f, 0, 1]", "2x4x9x8", "6x2x3x3", "2x6x5x6", 2),
])
def test_convolution_becomes_im2col_and_gemm(dims, lhs, rhs, out, groups):
    program = import_mlir(CONV.format(dims=dims, lhs=lhs, rhs=rhs, out=out, groups=groups))
    convs = [op for op in program.functions[0].ops
             if isinstance(op, Generic) and op.num_parallel < len(op.loop_ranges)]
    assert len(convs) == 1
    rewritten = rewrite_convolution(convs[0])
    assert len(rewritten) > 1, "not recognized as a contraction with a window"


def test_unknown_element_type_is_refused_with_location():
    text = """func.func @f(%x: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  %0 = stablehlo.negate %x : tensor<4xcomplex<f32>>
  return %0 : tensor<4xcomplex<f32>>
}"""
    with pytest.raises(CompileError, match="unsupported element type") as err:
        import_mlir(text, "c.mlir")
    assert "c.mlir:1:" in str(err.value)
