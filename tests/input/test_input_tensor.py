"""tensor dialect ops -> Views and Generics, against numpy slicing/padding/reshaping."""

import numpy as np
import pytest
from program_interpreter import run
from pyree.compiler.errors import CompileError
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Constant, Generic, View


def _f32(rng, *shape):
    return rng.uniform(-2, 2, shape).astype(np.float32)


def test_extract_slice_strided_rank_reducing_and_contiguous(rng):
    text = """
func.func @f(%x: tensor<9x8x7xf32>) -> (tensor<3x4xf32>, tensor<2x8x7xf32>, tensor<5xf32>) {
  %a = tensor.extract_slice %x[1, 2, 3] [3, 1, 4] [2, 1, 1] : tensor<9x8x7xf32> to tensor<3x4xf32>
  %b = tensor.extract_slice %x[4, 0, 0] [2, 8, 7] [1, 1, 1] : tensor<9x8x7xf32> to tensor<2x8x7xf32>
  %c = tensor.extract_slice %x[6, 5, 1] [1, 1, 5] [1, 1, 1] : tensor<9x8x7xf32> to tensor<5xf32>
  return %a, %b, %c : tensor<3x4xf32>, tensor<2x8x7xf32>, tensor<5xf32>
}"""
    fn = import_mlir(text).functions[0]
    assert [type(op) for op in fn.ops] == [Generic, View, View]
    assert fn.ops[1].byte_offset == 4 * 8 * 7 * 4
    x = _f32(rng, 9, 8, 7)
    a, b, c = run(fn, x)
    np.testing.assert_array_equal(a, x[1:7:2, 2, 3:7])
    np.testing.assert_array_equal(b, x[4:6])
    np.testing.assert_array_equal(c, x[6, 5, 1:6])


def test_insert_slice_rank_expanding(rng):
    text = """
func.func @f(%d: tensor<6x5x4xf32>, %s: tensor<3x2xf32>) -> tensor<6x5x4xf32> {
  %r = tensor.insert_slice %s into %d[2, 1, 1] [3, 1, 2] [1, 1, 1] : tensor<3x2xf32> into tensor<6x5x4xf32>
  return %r : tensor<6x5x4xf32>
}"""
    d, s = _f32(rng, 6, 5, 4), _f32(rng, 3, 2)
    (out,) = run(import_mlir(text).functions[0], d, s)
    expected = d.copy()
    expected[2:5, 1, 1:3] = s
    np.testing.assert_array_equal(out, expected)


def test_insert_slice_with_strides(rng):
    """Every second/third element of a dim (a transposed convolution's dilated input), a dim
    of size 1 dropped by rank reduction; the elements between keep the destination's."""
    text = """
func.func @f(%d: tensor<2x9x11x4xf32>, %s: tensor<3x4x2xf32>) -> tensor<2x9x11x4xf32> {
  %r = tensor.insert_slice %s into %d[1, 2, 1, 0] [1, 3, 4, 2] [1, 3, 2, 3] : tensor<3x4x2xf32> into tensor<2x9x11x4xf32>
  return %r : tensor<2x9x11x4xf32>
}"""
    d, s = _f32(rng, 2, 9, 11, 4), _f32(rng, 3, 4, 2)
    (out,) = run(import_mlir(text).functions[0], d, s)
    expected = d.copy()
    expected[1, 2:9:3, 1:9:2, 0:4:3] = s
    np.testing.assert_array_equal(out, expected)


def test_pad_with_constant(rng):
    text = """
func.func @f(%x: tensor<5x3xf32>) -> tensor<8x7xf32> {
  %pv = arith.constant 1.5 : f32
  %p = tensor.pad %x low[1, 0] high[2, 4] {
  ^bb0(%i: index, %j: index):
    tensor.yield %pv : f32
  } : tensor<5x3xf32> to tensor<8x7xf32>
  return %p : tensor<8x7xf32>
}"""
    x = _f32(rng, 5, 3)
    (out,) = run(import_mlir(text).functions[0], x)
    np.testing.assert_array_equal(out, np.pad(x, ((1, 2), (0, 4)), constant_values=1.5))


def test_reshapes_are_views(rng):
    text = """
func.func @f(%x: tensor<6x10xf32>) -> (tensor<60xf32>, tensor<3x2x10xf32>, tensor<4x15xf32>) {
  %c = tensor.collapse_shape %x [[0, 1]] : tensor<6x10xf32> into tensor<60xf32>
  %e = tensor.expand_shape %x [[0, 1], [2]] output_shape [3, 2, 10] : tensor<6x10xf32> into tensor<3x2x10xf32>
  %shape = arith.constant dense<[4, 15]> : tensor<2xi64>
  %r = tensor.reshape %c(%shape) : (tensor<60xf32>, tensor<2xi64>) -> tensor<4x15xf32>
  return %c, %e, %r : tensor<60xf32>, tensor<3x2x10xf32>, tensor<4x15xf32>
}"""
    fn = import_mlir(text).functions[0]
    assert all(isinstance(op, View) for op in fn.ops)
    x = _f32(rng, 6, 10)
    c, e, r = run(fn, x)
    np.testing.assert_array_equal(c, x.reshape(60))
    np.testing.assert_array_equal(e, x.reshape(3, 2, 10))
    np.testing.assert_array_equal(r, x.reshape(4, 15))


def test_rank_0_expands_into_ones_without_groups():
    """MLIR takes ``[]`` groups from a rank-0 source (torch-mlir writes it for a 1-D
    ``amax(0, keepdim=True)``); into a dim other than 1 it is refused."""
    text = """
func.func @f(%x: tensor<i32>) -> (tensor<1xi32>, tensor<1x1xi32>) {
  %a = tensor.expand_shape %x [] output_shape [1] : tensor<i32> into tensor<1xi32>
  %b = tensor.expand_shape %x [] output_shape [1, 1] : tensor<i32> into tensor<1x1xi32>
  return %a, %b : tensor<1xi32>, tensor<1x1xi32>
}"""
    a, b = run(import_mlir(text).functions[0], np.array(-7, np.int32))
    np.testing.assert_array_equal(a, [-7])
    np.testing.assert_array_equal(b, [[-7]])
    with pytest.raises(CompileError, match="rank-0 tensor gives only dims of 1"):
        import_mlir(text.replace("[1, 1] : tensor<i32> into tensor<1x1xi32>",
                                 "[1, 2] : tensor<i32> into tensor<1x2xi32>")
                    .replace("tensor<1x1xi32>", "tensor<1x2xi32>"))


def test_extract_from_elements_splat_and_cast(rng):
    text = """
func.func @f(%x: tensor<4x3xf32>, %s: f32) -> (f32, tensor<2x2xf32>, tensor<3x2xf32>, tensor<4x3xf32>) {
  %i = arith.constant 2 : index
  %j = arith.constant 1 : index
  %v = tensor.extract %x[%i, %j] : tensor<4x3xf32>
  %c = arith.constant 0.25 : f32
  %fe = tensor.from_elements %v, %c, %s, %v : tensor<2x2xf32>
  %sp = tensor.splat %s : tensor<3x2xf32>
  %cast = tensor.cast %x : tensor<4x3xf32> to tensor<4x3xf32>
  return %v, %fe, %sp, %cast : f32, tensor<2x2xf32>, tensor<3x2xf32>, tensor<4x3xf32>
}"""
    x, s = _f32(rng, 4, 3), np.array(rng.uniform(-1, 1), np.float32)
    v, fe, sp, cast = run(import_mlir(text).functions[0], x, s)
    assert v == x[2, 1]
    np.testing.assert_array_equal(fe, np.array([[x[2, 1], 0.25], [s, x[2, 1]]], np.float32))
    np.testing.assert_array_equal(sp, np.full((3, 2), s))
    np.testing.assert_array_equal(cast, x)


def test_constant_from_elements_and_splat_fold():
    text = """
func.func @f() -> (tensor<3xi32>, tensor<2x2xf32>) {
  %a = arith.constant 4 : i32
  %b = arith.constant 9 : i32
  %t = tensor.from_elements %a, %b, %a : tensor<3xi32>
  %h = arith.constant 0.5 : f32
  %s = tensor.splat %h : tensor<2x2xf32>
  return %t, %s : tensor<3xi32>, tensor<2x2xf32>
}"""
    t, s = import_mlir(text).functions[0].ops
    assert isinstance(t, Constant) and t.data.tolist() == [4, 9, 4]
    assert isinstance(s, Constant) and s.splat == 0.5


def test_concat_and_optimization_barrier(rng):
    # As in IREE's tests/e2e/tensor_ops/concat.mlir.
    text = """
func.func @concat_dim1(%a: tensor<2x3xi32>, %b: tensor<2x1xi32>, %c: tensor<2x4xi32>) -> tensor<2x8xi32> {
  %a1, %b1 = util.optimization_barrier %a, %b : tensor<2x3xi32>, tensor<2x1xi32>
  %r = tensor.concat dim(1) %a1, %b1, %c : (tensor<2x3xi32>, tensor<2x1xi32>, tensor<2x4xi32>) -> tensor<2x8xi32>
  return %r : tensor<2x8xi32>
}"""
    a, b, c = (rng.integers(-99, 99, (2, n)).astype(np.int32) for n in (3, 1, 4))
    (out,) = run(import_mlir(text).functions[0], a, b, c)
    np.testing.assert_array_equal(out, np.concatenate([a, b, c], axis=1))
