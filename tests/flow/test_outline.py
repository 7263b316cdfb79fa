"""Outlining (flow/kernels.py), the step after the flow passes: each dispatch region becomes a
kernel whose bindings are its inputs (read) then its results (written), and a kernel equal to an
earlier one, in any function, reuses its ordinal. The kernels of a real compile, then the numbers
on local-task against numpy."""

from __future__ import annotations

import numpy as np
from pass_runs import after_pass, generics
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.flow.kernels import KernelTable, outline

MLIR = """
func.func @first(%x: tensor<7x5xf32>, %y: tensor<7x5xf32>) -> tensor<7x5xf32> {
  %s = arith.subf %x, %y : tensor<7x5xf32>
  return %s : tensor<7x5xf32>
}
func.func @second(%a: tensor<7x5xf32>, %b: tensor<7x5xf32>) -> tensor<7x5xf32> {
  %s = arith.subf %a, %b : tensor<7x5xf32>
  return %s : tensor<7x5xf32>
}
func.func @third(%a: tensor<7x5xf32>, %b: tensor<7x5xf32>) -> tensor<7x5xf32> {
  %s = arith.mulf %a, %b : tensor<7x5xf32>
  return %s : tensor<7x5xf32>
}
"""

MATMUL_BIAS = """
func.func @main(%a: tensor<3x9xf32>, %b: tensor<9x5xf32>, %c: tensor<3x5xf32>) -> tensor<3x5xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<3x9xf32>, tensor<9x5xf32>)
      outs(%c : tensor<3x5xf32>) -> tensor<3x5xf32>
  return %r : tensor<3x5xf32>
}
"""


def test_bindings_are_the_inputs_read_then_the_results_written():
    (region,) = generics(after_pass(MATMUL_BIAS, "widen-narrow-floats"))
    kernel = outline(region, "k")
    assert [(b.shape, b.access) for b in kernel.bindings] == [
        ((3, 9), "read"), ((9, 5), "read"), ((3, 5), "read"), ((3, 5), "write")]
    assert [r.binding for r in kernel.results] == [3]  # results renumbered past the inputs
    assert (kernel.loop_ranges, kernel.num_parallel) == ((3, 5, 9), 2)


def test_an_equal_kernel_reuses_its_ordinal_whatever_its_name():
    table = KernelTable()
    (region,) = generics(after_pass(MATMUL_BIAS, "widen-narrow-floats"))
    assert table.add(outline(region, "a")) == table.add(outline(region, "b")) == 0
    assert [k.name for k in table.kernels] == ["a"]


def test_identical_regions_of_two_functions_compile_to_one_kernel():
    text = compile_str(MLIR, extra_args=["--compile-to=executable-sources"]).decode()
    assert text.count("kernel @") == 2  # x - y in two functions, x * y in a third
    import pyree.runtime as rt

    module = rt.load_module(compile_str(MLIR, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    rng = np.random.default_rng(41)
    x, y = (rng.standard_normal((7, 5)).astype(np.float32) for _ in range(2))
    x[0, 0], y[0, 0], x[1, 1] = np.inf, np.inf, -0.0  # inf - inf is NaN, inf * inf is inf
    for name, want in (("first", x - y), ("second", x - y), ("third", x * y)):
        np.testing.assert_array_equal(module[name](x, y).to_host(), want)
