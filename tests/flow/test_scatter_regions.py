"""Region formation around a scatter at computed places (``kernel.Scatter``): producers of its
updates and indices fuse into it (an embedding bag's gathered rows, read through a view), its
original never does (the host copies it whole), and the scatter never fuses into its reader (its
result is read-modify-write); the kernel still computes what ``kernel.evaluate`` says."""

from __future__ import annotations

import numpy as np
from pyree.compiler.flow.kernels import outline
from pyree.compiler.flow.passes import flow_passes, run_flow
from pyree.compiler.input import parse_mlir
from pyree.compiler.input.lowering import lower_to_tensor_program
from pyree.compiler.kernel import Gather, evaluate, result_nodes
from pyree.compiler.tensor_program import Constant, Generic, is_scatter

MLIR = """func.func @main(%table: tensor<50x8xf32>, %ids: tensor<300xi64>, %bags: tensor<300x1xi64>, %w: tensor<300x8xf32>) -> tensor<20x8xf32> {
  %e = tensor.empty() : tensor<300x8xf32>
  %rows = linalg.generic {indexing_maps = [affine_map<(i, d) -> (i)>, affine_map<(i, d) -> (i, d)>, affine_map<(i, d) -> (i, d)>], iterator_types = ["parallel", "parallel"]} ins(%ids, %w : tensor<300xi64>, tensor<300x8xf32>) outs(%e : tensor<300x8xf32>) {
  ^bb0(%id: i64, %s: f32, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %d = linalg.index 1 : index
    %v = tensor.extract %table[%i, %d] : tensor<50x8xf32>
    %p = arith.mulf %v, %s : f32
    linalg.yield %p : f32
  } -> tensor<300x8xf32>
  %upd = tensor.expand_shape %rows [[0, 1], [2]] output_shape [300, 1, 8] : tensor<300x8xf32> into tensor<300x1x8xf32>
  %zero = arith.constant 0.0 : f32
  %z0 = tensor.empty() : tensor<20x8xf32>
  %z = linalg.fill ins(%zero : f32) outs(%z0 : tensor<20x8xf32>) -> tensor<20x8xf32>
  %sum = iree_linalg_ext.scatter dimension_map = [0] unique_indices(false) ins(%upd, %bags : tensor<300x1x8xf32>, tensor<300x1xi64>) outs(%z : tensor<20x8xf32>) {
  ^bb0(%u: f32, %c: f32):
    %a = arith.addf %c, %u : f32
    iree_linalg_ext.yield %a : f32
  } -> tensor<20x8xf32>
  %r = math.exp %sum : tensor<20x8xf32>
  return %r : tensor<20x8xf32>
}"""


def regions(scatter_atomics: bool = True):
    program = lower_to_tensor_program(parse_mlir(MLIR, "bag.mlir"), scatter_atomics=scatter_atomics)
    return run_flow(program, flow_passes(gpu=False, implicit_gemm=False)).functions[0]


def test_gathered_rows_fuse_into_the_scatter_and_its_reader_stays_apart():
    function = regions()
    generics = [op for op in function.ops if isinstance(op, Generic)]
    scatter = next(op for op in generics if is_scatter(op))
    assert len(generics) == 2  # the scatter (rows fused in) and the exp reading its result
    assert any(isinstance(e, Gather) for e in result_nodes(scatter.outputs[0]))
    original = scatter.inputs[scatter.outputs[0].scatter.start]
    assert any(isinstance(op, Constant) and op.result is original for op in function.ops)
    reader = next(op for op in generics if op is not scatter)
    assert scatter.results[0] in reader.inputs


def test_the_fused_scatter_kernel_computes_the_bag_sums():
    function = regions()
    scatter = next(op for op in function.ops if is_scatter(op))
    kernel = outline(scatter, "bag")
    assert kernel.bindings[len(scatter.inputs)].access == "read_write"
    rng = np.random.default_rng(3)
    arrays = {"table": rng.standard_normal((50, 8)).astype(np.float32),
              "ids": rng.integers(0, 50, 300).astype(np.int64),
              "bags": rng.integers(-1, 21, (300, 1)).astype(np.int64),
              "w": rng.standard_normal((300, 8)).astype(np.float32)}
    by_value = {v: arrays[v.name] for v in function.arguments}
    inputs = [by_value[v] if v in by_value else np.zeros(v.shape, np.float32)
              for v in scatter.inputs]
    out = np.zeros((20, 8), np.float32)
    evaluate(kernel, [*inputs, out])
    want = np.zeros((20, 8), np.float64)
    inside = (arrays["bags"][:, 0] >= 0) & (arrays["bags"][:, 0] < 20)
    rows = arrays["table"][arrays["ids"]] * arrays["w"]
    np.add.at(want, arrays["bags"][inside, 0], rows[inside].astype(np.float64))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_without_scatter_atomics_the_scatter_stays_a_fold():
    assert not any(is_scatter(op) for op in regions(scatter_atomics=False).ops)
