"""A module of functions with a dynamic batch (``?`` leading dims, llvm-cpu), shared by the
serving tests: ``rows`` (per-row: a product and a row sum), ``guarded`` (a check op refuses
negative values), ``center`` (x minus its column sums: mixes rows), and three that stacking
refuses: ``mixed`` (a ``?`` leading dim beside a static one), ``two`` (two batch sizes),
``wide`` (a run-time size past the leading dim)."""

from __future__ import annotations

import numpy as np

SOURCE = """
#rows = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @rows(%x: tensor<?x7xf32>, %y: tensor<?x7xi32>) -> (tensor<?x7xf32>, tensor<?xf32>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x7xf32>
  %e = tensor.empty(%n) : tensor<?x7xf32>
  %p = linalg.generic {indexing_maps = [#rows, #rows, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<?x7xf32>, tensor<?x7xi32>) outs(%e : tensor<?x7xf32>) {
  ^bb0(%a: f32, %b: i32, %o: f32):
    %bf = arith.sitofp %b : i32 to f32
    %m = arith.mulf %a, %bf : f32
    linalg.yield %m : f32
  } -> tensor<?x7xf32>
  %zero = arith.constant 0.0 : f32
  %e1 = tensor.empty(%n) : tensor<?xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e1 : tensor<?xf32>) -> tensor<?xf32>
  %s = linalg.reduce ins(%x : tensor<?x7xf32>) outs(%init : tensor<?xf32>) dimensions = [1]
    (%in: f32, %acc: f32) {
      %0 = arith.addf %in, %acc : f32
      linalg.yield %0 : f32
    }
  return %p, %s : tensor<?x7xf32>, tensor<?xf32>
}
func.func @guarded(%x: tensor<?x2xf32>) -> tensor<?x2xf32> {
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x2xf32>
  %e = tensor.empty(%n) : tensor<?x2xf32>
  %zeros = linalg.fill ins(%zero : f32) outs(%e : tensor<?x2xf32>) -> tensor<?x2xf32>
  %ok = arith.cmpf oge, %x, %zeros : tensor<?x2xf32>
  check.expect_all_true(%ok) : tensor<?x2xi1>
  %r = math.sqrt %x : tensor<?x2xf32>
  return %r : tensor<?x2xf32>
}
func.func @center(%x: tensor<?x3xf32>) -> tensor<?x3xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x3xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<3xf32>) -> tensor<3xf32>
  %s = linalg.reduce ins(%x : tensor<?x3xf32>) outs(%init : tensor<3xf32>) dimensions = [0]
    (%in: f32, %acc: f32) {
      %0 = arith.addf %in, %acc : f32
      linalg.yield %0 : f32
    }
  %e2 = tensor.empty(%n) : tensor<?x3xf32>
  %r = linalg.generic {indexing_maps = [#rows, #col, #rows], iterator_types = ["parallel", "parallel"]}
      ins(%x, %s : tensor<?x3xf32>, tensor<3xf32>) outs(%e2 : tensor<?x3xf32>) {
  ^bb0(%a: f32, %t: f32, %o: f32):
    %d = arith.subf %a, %t : f32
    linalg.yield %d : f32
  } -> tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}
func.func @mixed(%x: tensor<?x3xf32>, %y: tensor<3x3xf32>) -> tensor<?x3xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x3xf32>
  %e = tensor.empty(%n) : tensor<?x3xf32>
  %zero = arith.constant 0.0 : f32
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x3xf32>) -> tensor<?x3xf32>
  %r = linalg.matmul ins(%x, %y : tensor<?x3xf32>, tensor<3x3xf32>) outs(%f : tensor<?x3xf32>) -> tensor<?x3xf32>
  return %r : tensor<?x3xf32>
}
func.func @two(%x: tensor<?x3xf32>, %y: tensor<?x3xf32>) -> (tensor<?x3xf32>, tensor<?x3xf32>) {
  %a = arith.negf %x : tensor<?x3xf32>
  %b = arith.negf %y : tensor<?x3xf32>
  return %a, %b : tensor<?x3xf32>, tensor<?x3xf32>
}
func.func @wide(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %a = arith.negf %x : tensor<?x?xf32>
  return %a : tensor<?x?xf32>
}
"""


def compile_module() -> bytes:
    import pyree.compiler as pc
    return pc.compile_str(SOURCE, pc.CompileOptions(target_backends=["llvm-cpu"],
                                                    llvmcpu_target_cpu="generic"))


def rows_inputs(rng: np.random.Generator, k: int) -> tuple[np.ndarray, np.ndarray]:
    """k fresh rows of each argument of ``rows`` (both modules' ``rows`` take kx7xf32 and
    kx7xi32), with NaN, +-inf and -0 where the values pass through."""
    x = rng.standard_normal((k, 7)).astype(np.float32)
    x.flat[rng.choice(x.size, 4, replace=False)] = [np.nan, np.inf, -np.inf, -0.0]
    y = rng.integers(1, 6, (k, 7)).astype(np.int32)  # positive: -0 * y stays -0
    return x, y


def check_rows(x, y, product, sums) -> None:
    """``rows``' results against numpy, -0 included."""
    want = x * y.astype(np.float32)
    np.testing.assert_array_equal(product, want)
    assert np.array_equal(np.signbit(product), np.signbit(want))
    with np.errstate(invalid="ignore"):  # inf + -inf in a row: NaN, as pyree computes it
        expected = x.sum(axis=1, dtype=np.float64).astype(np.float32)
    np.testing.assert_allclose(sums, expected, rtol=2e-6, atol=4e-6)  # float32 sums of 7 values
