"""--pyree-print-ir-after-all text: the tensor program and kernels, readable and complete."""

from program_interpreter import kernel_of
from pyree.compiler.input import import_mlir
from pyree.compiler.printing import format_kernels, format_program

TEXT = """func.func @f(%x: tensor<6x4xf32>, %w: tensor<4x3xf32>) -> (tensor<6x3xf32>, tensor<24xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x3xf32>
  %acc = linalg.fill ins(%zero : f32) outs(%e : tensor<6x3xf32>) -> tensor<6x3xf32>
  %mm = linalg.matmul ins(%x, %w : tensor<6x4xf32>, tensor<4x3xf32>) outs(%acc : tensor<6x3xf32>) -> tensor<6x3xf32>
  %r = arith.maximumf %mm, %acc : tensor<6x3xf32>
  %flat = tensor.collapse_shape %x [[0, 1]] : tensor<6x4xf32> into tensor<24xf32>
  check.expect_almost_eq(%r, %r) : tensor<6x3xf32>
  return %r, %flat : tensor<6x3xf32>, tensor<24xf32>
}"""


def test_format_program():
    text = format_program(import_mlir(TEXT, "p.mlir"))
    assert ("func @f(%x: tensor<6x4xf32>, %w: tensor<4x3xf32>) -> "
            "(tensor<6x3xf32>, tensor<24xf32>)") in text
    assert '%mm: tensor<6x3xf32> = generic "linalg.matmul" loops(6, 3 | 4) ins(%x, %w)' in text
    assert "init acc0 = 0.0:f32" in text
    assert "acc0 = (acc0 + (%x[d0, d2] * %w[d2, d1]))" in text
    assert "%acc: tensor<6x3xf32> = constant splat 0.0  // p.mlir:4:3" in text
    assert "%r[d0, d1] = max(%mm[d0, d1], %acc[d0, d1])" in text
    assert "%flat: tensor<24xf32> = view %x" in text
    assert "check.expect_almost_eq(%r, %r) atol=0.0001 rtol=0.0" in text
    assert text.rstrip().endswith("return %r, %flat\n}")


def test_format_kernels():
    fn = import_mlir(TEXT, "p.mlir").functions[0]
    text = format_kernels([kernel_of(fn.ops[1])])
    assert text.startswith("kernel @linalg.matmul loops(6, 3 | 4) {  // p.mlir:5:3")
    assert "binding b0: tensor<6x4xf32> read" in text
    assert "binding b2: tensor<6x3xf32> write" in text
    assert "b2[d0, d1]:" in text and "acc0 = (acc0 + (b0[d0, d2] * b1[d2, d1]))" in text


LAST_ROW = """
func.func @last(%a: tensor<?x8xf32>) -> tensor<1x8xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %n = tensor.dim %a, %c0 : tensor<?x8xf32>
  %m = arith.subi %n, %c1 : index
  %s = tensor.extract_slice %a[%m, 0] [1, 8] [1, 1] : tensor<?x8xf32> to tensor<1x8xf32>
  return %s : tensor<1x8xf32>
}
"""


def test_run_time_sizes_in_indices_print(capfd):
    """A read at a run-time offset (the last row of a dynamic batch) prints its size in the
    index; it was an internal compiler error under --pyree-print-ir-after-all."""
    from pyree.compiler import compile_str
    compile_str(LAST_ROW, target_backends=["llvm-cpu"], extra_args=["--pyree-print-ir-after-all"])
    err = capfd.readouterr().err
    assert "IR after tensor program" in err and "(-1 + s0)" in err, err[-2000:]


PLANE_VIEW = """
func.func @plane(%a: tensor<3x?x8xf32>) -> tensor<?x8xf32> {
  %c1 = arith.constant 1 : index
  %n = tensor.dim %a, %c1 : tensor<3x?x8xf32>
  %s = tensor.extract_slice %a[1, 0, 0] [1, %n, 8] [1, 1, 1] : tensor<3x?x8xf32> to tensor<?x8xf32>
  return %s : tensor<?x8xf32>
}
"""


def test_run_time_view_offsets_print(capfd):
    """A view at a run-time byte offset (k's plane of a packed q, k, v with a
    run-time length) prints it (it was an internal compiler error: the size
    was asked for a truth value)."""
    from pyree.compiler import compile_str
    compile_str(PLANE_VIEW, target_backends=["llvm-cpu"], extra_args=["--pyree-print-ir-after-all"])
    err = capfd.readouterr().err
    assert "= view %a + " in err and "bytes" in err, err[-2000:]
