"""Elementwise Generics of constants become constants at compile time (flow/constant_folding.py)."""

import numpy as np
from pyree.compiler.flow.constant_folding import evaluate_elementwise, fold_constants
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.passes import form_dispatch_regions
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import DTYPES, evaluate
from pyree.compiler.tensor_program import Constant, Function, Generic, Value, View

BATCHNORM_PARAMS = """
func.func @f(%x: tensor<2x5xf32>) -> tensor<2x5xf32> {
  %var = arith.constant dense<[0.5, 1.5, 2.0, 0.25, 3.0]> : tensor<5xf32>
  %w = arith.constant dense<[[1.0, -2.0, 3.0, 0.5, -0.5], [2.0, 0.0, -1.0, 4.0, 1.0]]> : tensor<2x5xf32>
  %eps = arith.constant 1.0e-5 : f32
  %e5 = tensor.empty() : tensor<5xf32>
  %inv = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%var : tensor<5xf32>) outs(%e5 : tensor<5xf32>) {
  ^bb0(%v: f32, %o: f32):
    %a = arith.addf %v, %eps : f32
    %s = math.sqrt %a : f32
    %one = arith.constant 1.0 : f32
    %r = arith.divf %one, %s : f32
    linalg.yield %r : f32
  } -> tensor<5xf32>
  %e = tensor.empty() : tensor<5x2xf32>
  %wt = linalg.transpose ins(%w : tensor<2x5xf32>) outs(%e : tensor<5x2xf32>) permutation = [1, 0]
  %e2 = tensor.empty() : tensor<2x5xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d1)>,
      affine_map<(d0, d1) -> (d1, d0)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]} ins(%x, %inv, %wt : tensor<2x5xf32>, tensor<5xf32>, tensor<5x2xf32>)
      outs(%e2 : tensor<2x5xf32>) {
  ^bb0(%a: f32, %b: f32, %c: f32, %o: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %m, %c : f32
    linalg.yield %r : f32
  } -> tensor<2x5xf32>
  return %y : tensor<2x5xf32>
}"""


def test_constant_subgraphs_fold_and_equal_the_reference():
    function = import_mlir(BATCHNORM_PARAMS, "bn.mlir").functions[0]
    generics = [op for op in function.ops if isinstance(op, Generic)]
    folded = fold_constants(function)
    assert sum(isinstance(op, Generic) for op in folded.ops) == 1   # only the one reading %x
    for op in generics[:-1]:   # each folded value equals the kernel IR reference on the device
        inputs = [next(c.data for c in function.ops if isinstance(c, Constant) and c.result is v)
                  for v in op.inputs]
        out = np.zeros(op.results[0].shape, DTYPES[op.results[0].dtype])
        evaluate(outline(op, "k"), inputs + [out])
        got = next(c.data for c in folded.ops if isinstance(c, Constant) and c.result is op.results[0])
        np.testing.assert_array_equal(got, out)
    fused = form_dispatch_regions(function)
    assert [type(op) for op in fused.ops if not isinstance(op, (Constant, View))] == [Generic]


def test_select_with_out_of_range_arm_and_unsupported_ops():
    """A pad's unchosen arm reads out of range (clamped here, then discarded); exp is left alone."""
    from pyree.compiler.kernel import AffineExpr, Compare, Const, Load, LoopIndex, Result, Select, Unary

    src = Value("f32", (4,), "src")
    out = Value("f32", (6,), "out")
    i = AffineExpr((1,))
    inside = Compare("lt", LoopIndex(0), Const(5, "index"))
    cond = Select(Compare("ge", LoopIndex(0), Const(1, "index")), inside, Const(False, "i1"), "i1")
    pad = Select(cond, Load(0, (AffineExpr((1,), -1),), "f32"), Const(-1.0, "f32"), "f32")
    op = Generic([src], [out], (Result(0, (i,), pad),), (6,), 1)
    data = np.arange(4, dtype=np.float32) + 10
    np.testing.assert_array_equal(evaluate_elementwise(op, [data]), [-1, 10, 11, 12, 13, -1])
    exp = Generic([src], [Value("f32", (4,))], (Result(0, (i,), Unary("exp", Load(0, (i,), "f32"), "f32")),), (4,), 1)
    assert evaluate_elementwise(exp, [data]) is None
    function = Function("f", [], [Constant(src, data=data), exp], exp.results)
    assert any(isinstance(op, Generic) for op in fold_constants(function).ops)
