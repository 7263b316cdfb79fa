"""Bad input -> CompileError naming the problem and its file:line:col."""

import pytest
from pyree.compiler.errors import CompileError
from pyree.compiler.input import import_mlir


def _error(text: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        import_mlir(text, "model.mlir")
    return info.value


def test_malformed_text_keeps_line_column_and_snippet():
    err = _error("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = arith.addf %a, %b : tensor<4xf32>
  return %0 : tensor<4xf32>
}""")
    assert err.location == "model.mlir:2:23"
    assert err.message.startswith("use of undefined value %b")
    assert "%0 = arith.addf %a, %b" in err.message and "^" in err.message


def test_missing_bracket():
    err = _error("func.func @f(%a: tensor<4xf32) -> tensor<4xf32> {\n  return %a : tensor<4xf32>\n}")
    assert err.location.startswith("model.mlir:1:") and "'>'" in err.message


def test_unknown_dialect_op_is_named():
    err = _error("""func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  %0 = acme.frobnicate %a, %a : tensor<4xf32>
  return %0 : tensor<4xf32>
}""")
    assert err.location == "model.mlir:2:3"
    assert "unsupported op 'acme.frobnicate'" in str(err)


def test_known_but_unsupported_op_is_named():
    err = _error("""func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %c1 = arith.constant 1 : index
  %r = memref.alloc() : memref<4xf32>
  return %x : tensor<4xf32>
}""")
    assert err.location == "model.mlir:5:3"
    assert err.message.startswith("unsupported op 'memref.alloc'")
    assert str(err).startswith("model.mlir:5:3: error: unsupported op 'memref.alloc'")


def test_unsupported_op_in_a_linalg_body():
    err = _error("""func.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]} ins(%x : tensor<4xi32>) outs(%x : tensor<4xi32>) {
  ^bb0(%a: i32, %b: i32):
      %t = tensor.from_elements %a : tensor<1xi32>
      %c = arith.addi %a, %b : i32
      linalg.yield %c : i32
  } -> tensor<4xi32>
  return %r : tensor<4xi32>
}""")
    assert err.location == "model.mlir:5:7" and "'tensor.from_elements'" in err.message


def test_dynamic_shape_where_pyree_cannot_tell_it_yet():
    err = _error("""func.func @f(%a: tensor<?x4xf32>, %p: tensor<f32>) -> tensor<?x4xf32> {
  %r = stablehlo.pad %a, %p, low = [1, 0], high = [0, 0], interior = [0, 0] : (tensor<?x4xf32>, tensor<f32>) -> tensor<?x4xf32>
  return %r : tensor<?x4xf32>
}""")
    assert err.location == "model.mlir:2:3"
    assert "'stablehlo.pad' with dynamic dimensions is not supported yet" in err.message


@pytest.mark.parametrize("element", ["f8E4M3FN", "complex<f32>", "i4"])
def test_unsupported_element_type(element):
    err = _error(f"""func.func @f(%a: tensor<4x{element}>) -> tensor<4x{element}> {{
  return %a : tensor<4x{element}>
}}""")
    assert err.location == "model.mlir:1:1"
    assert f"unsupported element type {element}" in err.message


def test_non_linear_map():
    err = _error("""func.func @f(%x: tensor<8xf32>, %o: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> ((i + j) mod 8)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8xf32>) outs(%o : tensor<4x4xf32>) {
  ^bb0(%a: f32, %b: f32):
      linalg.yield %a : f32
  } -> tensor<4x4xf32>
  return %r : tensor<4x4xf32>
}""")
    assert err.location == "model.mlir:2:3" and "not linear in the loops" in err.message


def test_verifier_errors_point_at_the_op():
    err = _error("""func.func @f(%a: tensor<3x4xf32>, %b: tensor<3x4xf32>, %c: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<3x4xf32>, tensor<3x4xf32>) outs(%c : tensor<3x4xf32>) -> tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}""")
    assert err.location == "model.mlir:2:3" and "linalg.matmul" in err.message


def test_dense_resource_without_blob():
    err = _error("""func.func @f() -> tensor<2xf32> {
  %r = arith.constant dense_resource<missing> : tensor<2xf32>
  return %r : tensor<2xf32>
}""")
    assert err.location == "model.mlir:2:3" and "'missing'" in err.message


def test_pad_with_dynamic_widths():
    err = _error("""func.func @f(%x: tensor<4xf32>, %n: index) -> tensor<9xf32> {
  %pv = arith.constant 0.0 : f32
  %p = tensor.pad %x low[%n] high[5] {
  ^bb0(%i: index):
    tensor.yield %pv : f32
  } : tensor<4xf32> to tensor<9xf32>
  return %p : tensor<9xf32>
}""")
    assert err.location == "model.mlir:3:3" and "tensor.pad" in err.message


def test_pad_cropping_more_than_the_source():
    """Negative widths crop (torch-mlir's col2im); cropping past the source is an error at the op."""
    err = _error("""func.func @f(%x: tensor<4xf32>) -> tensor<0xf32> {
  %pv = arith.constant 0.0 : f32
  %p = tensor.pad %x low[-3] high[-2] {
  ^bb0(%i: index):
    tensor.yield %pv : f32
  } : tensor<4xf32> to tensor<0xf32>
  return %p : tensor<0xf32>
}""")
    assert err.location == "model.mlir:3:3" and "crops more than the source" in err.message


def test_an_empty_input_says_so():
    with pytest.raises(CompileError, match=r"empty\.mlir: error: the input is empty"):
        import_mlir("  \n", "empty.mlir")


def test_a_for_loop_that_would_never_end_is_refused():
    err = _error("""func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c0 = arith.constant 0 : index
  %c4 = arith.constant 4 : index
  %zero = arith.constant 0 : index
  %r = scf.for %i = %c0 to %c4 step %zero iter_args(%a = %x) -> (tensor<4xf32>) {
    scf.yield %a : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}""")
    assert err.location == "model.mlir:5:3" and "positive step" in err.message


@pytest.mark.parametrize("literal, message", [
    ("dense<1.0> : f32", "Expected memref, vector or tensor type"),
    ("dense<1.0> : tensor<?xf32>", "Dense literal attribute should have a static shape"),
])
def test_dense_literal_of_a_type_it_cannot_have(literal, message):
    err = _error(f"""func.func @f() -> tensor<4xf32> {{
  %c = arith.constant {literal}
  return %c : tensor<4xf32>
}}""")
    assert err.location.startswith("model.mlir:2:") and message in err.message
