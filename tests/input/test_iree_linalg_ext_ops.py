"""Ops as IREE's e2e tests write them -- iree_linalg_ext topk_v2, arg_compare, gather, softmax,
reverse and sort ins/outs; flow.dispatch.region; StableHLO broadcast and torch_index_select;
tensor.gather, linalg.init_tensor and linalg.batch_matvec -- compiled and run on local-task at
odd shapes, against numpy."""

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str

MLIR = """
func.func @topk_v2(%x: tensor<3x11xf32>) -> (tensor<3x4xf32>, tensor<3x4xi32>) {
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : i32
  %ev = tensor.empty() : tensor<3x4xf32>
  %ei = tensor.empty() : tensor<3x4xi32>
  %v = linalg.fill ins(%ninf : f32) outs(%ev : tensor<3x4xf32>) -> tensor<3x4xf32>
  %i = linalg.fill ins(%c0 : i32) outs(%ei : tensor<3x4xi32>) -> tensor<3x4xi32>
  %r:2 = iree_linalg_ext.topk_v2 dimension(1) is_sorted ins(%x : tensor<3x11xf32>)
      outs(%v, %i : tensor<3x4xf32>, tensor<3x4xi32>) {
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %c : i1
  } -> tensor<3x4xf32>, tensor<3x4xi32>
  return %r#0, %r#1 : tensor<3x4xf32>, tensor<3x4xi32>
}

func.func @arg_min(%x: tensor<5x7xf32>) -> (tensor<5xf32>, tensor<5xi32>) {
  %inf = arith.constant 0x7F800000 : f32
  %c0 = arith.constant 0 : i32
  %base = arith.constant 100 : index
  %ev = tensor.empty() : tensor<5xf32>
  %ei = tensor.empty() : tensor<5xi32>
  %v = linalg.fill ins(%inf : f32) outs(%ev : tensor<5xf32>) -> tensor<5xf32>
  %i = linalg.fill ins(%c0 : i32) outs(%ei : tensor<5xi32>) -> tensor<5xi32>
  %r:2 = iree_linalg_ext.arg_compare dimension(1) ins(%x : tensor<5x7xf32>)
      outs(%v, %i : tensor<5xf32>, tensor<5xi32>) index_base(%base : index) {
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf olt, %a, %b : f32
    iree_linalg_ext.yield %c : i1
  } -> tensor<5xf32>, tensor<5xi32>
  return %r#0, %r#1 : tensor<5xf32>, tensor<5xi32>
}

func.func @gather_rows(%src: tensor<6x5xf32>, %idx: tensor<4x1xi32>) -> tensor<4x5xf32> {
  %e = tensor.empty() : tensor<4x5xf32>
  %two = arith.constant 2.0 : f32
  %r = iree_linalg_ext.gather dimension_map = [0] ins(%src, %idx : tensor<6x5xf32>, tensor<4x1xi32>)
      outs(%e : tensor<4x5xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %two : f32
    iree_linalg_ext.yield %m : f32
  } -> tensor<4x5xf32>
  return %r : tensor<4x5xf32>
}

func.func @softmax(%x: tensor<3x7xf32>) -> tensor<3x7xf32> {
  %e = tensor.empty() : tensor<3x7xf32>
  %r = iree_linalg_ext.softmax dimension(1) ins(%x : tensor<3x7xf32>) outs(%e : tensor<3x7xf32>) -> tensor<3x7xf32>
  return %r : tensor<3x7xf32>
}

func.func @reverse(%x: tensor<3x5xi32>) -> tensor<3x5xi32> {
  %e = tensor.empty() : tensor<3x5xi32>
  %r = iree_linalg_ext.reverse dimensions(dense<[0, 1]> : tensor<2xi64>)
      ins(%x : tensor<3x5xi32>) outs(%e : tensor<3x5xi32>) : tensor<3x5xi32>
  return %r : tensor<3x5xi32>
}

func.func @sort_into(%x: tensor<9xi32>) -> tensor<9xi32> {
  %e = tensor.empty() : tensor<9xi32>
  %r = iree_linalg_ext.sort dimension(0) ins(%x : tensor<9xi32>) outs(%e : tensor<9xi32>) {
  ^bb0(%a: i32, %b: i32):
    %c = arith.cmpi slt, %a, %b : i32
    iree_linalg_ext.yield %c : i1
  } -> tensor<9xi32>
  return %r : tensor<9xi32>
}

func.func @region(%x: tensor<4xf32>) -> tensor<4xf32> {
  %r = flow.dispatch.region -> (tensor<4xf32>) {
    %y = arith.mulf %x, %x : tensor<4xf32>
    flow.return %y : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

func.func @broadcast(%x: tensor<2x3xi32>) -> tensor<4x2x3xi32> {
  %r = "stablehlo.broadcast"(%x) {broadcast_sizes = dense<4> : tensor<1xi64>} : (tensor<2x3xi32>) -> tensor<4x2x3xi32>
  return %r : tensor<4x2x3xi32>
}

func.func @tensor_gather(%x: tensor<4x5x3xf32>, %i: tensor<6x2xi32>) -> (tensor<6x3xf32>, tensor<6x1x1x3xf32>) {
  %r = tensor.gather %x[%i] gather_dims([0, 1]) : (tensor<4x5x3xf32>, tensor<6x2xi32>) -> tensor<6x3xf32>
  %k = tensor.gather %x[%i] gather_dims([0, 1]) unique : (tensor<4x5x3xf32>, tensor<6x2xi32>) -> tensor<6x1x1x3xf32>
  return %r, %k : tensor<6x3xf32>, tensor<6x1x1x3xf32>
}

func.func @init_tensor(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %e = linalg.init_tensor [2, 3] : tensor<2x3xf32>
  %r = linalg.add ins(%x, %x : tensor<2x3xf32>, tensor<2x3xf32>) outs(%e : tensor<2x3xf32>) -> tensor<2x3xf32>
  return %r : tensor<2x3xf32>
}

func.func @batch_matvec(%a: tensor<3x5x7xi8>, %x: tensor<3x7xi8>, %acc: tensor<3x5xi32>) -> tensor<3x5xi32> {
  %r = linalg.batch_matvec ins(%a, %x : tensor<3x5x7xi8>, tensor<3x7xi8>) outs(%acc : tensor<3x5xi32>) -> tensor<3x5xi32>
  return %r : tensor<3x5xi32>
}

func.func @index_select(%x: tensor<3x5x2xf32>, %i: tensor<4xi32>) -> tensor<3x4x2xf32> {
  %r = "stablehlo.torch_index_select"(%x, %i) {dim = 1 : i64, batch_dims = 0 : i64} : (tensor<3x5x2xf32>, tensor<4xi32>) -> tensor<3x4x2xf32>
  return %r : tensor<3x4x2xf32>
}
"""


@pytest.fixture(scope="module")
def module():
    return rt.load_module(compile_str(MLIR, target_backends=["llvm-cpu"]), device="local-task")


def test_topk_v2_without_input_indices(module, rng):
    x = rng.permutation(33).reshape(3, 11).astype(np.float32) - 16
    values, indices = (np.asarray(r) for r in module.topk_v2(x))
    order = np.argsort(-x, axis=1, kind="stable")[:, :4]
    np.testing.assert_array_equal(indices, order)
    np.testing.assert_array_equal(values, np.take_along_axis(x, order, 1))


def test_arg_compare_takes_the_first_best_and_adds_its_index_base(module, rng):
    x = rng.integers(-3, 3, (5, 7)).astype(np.float32)  # ties: the first one wins
    values, indices = (np.asarray(r) for r in module.arg_min(x))
    np.testing.assert_array_equal(values, x.min(1))
    np.testing.assert_array_equal(indices, x.argmin(1) + 100)


def test_gather_reads_the_indexed_rows_through_its_body(module, rng):
    src = rng.standard_normal((6, 5)).astype(np.float32)
    idx = np.array([[4], [0], [5], [4]], np.int32)
    np.testing.assert_array_equal(np.asarray(module.gather_rows(src, idx)), 2 * src[idx[:, 0]])


def test_softmax_and_reverse(module, rng):
    x = rng.standard_normal((3, 7)).astype(np.float32) * 5
    e = np.exp(x.astype(np.float64) - x.max(1, keepdims=True))
    np.testing.assert_allclose(np.asarray(module.softmax(x)), e / e.sum(1, keepdims=True),
                               rtol=1e-5)
    y = rng.integers(-50, 50, (3, 5)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(module.reverse(y)), y[::-1, ::-1])


def test_sort_ins_into_outs_and_a_dispatch_region(module, rng):
    x = rng.integers(-9, 9, 9).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(module.sort_into(x)), np.sort(x))
    v = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(module.region(v)), v * v)


def test_stablehlo_broadcast_and_torch_index_select(module, rng):
    x = rng.integers(-9, 9, (2, 3)).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(module.broadcast(x)), np.broadcast_to(x, (4, 2, 3)))
    s = rng.standard_normal((3, 5, 2)).astype(np.float32)
    i = np.array([4, 0, 0, 2], np.int32)
    np.testing.assert_array_equal(np.asarray(module.index_select(s, i)), s[:, i, :])


def test_tensor_gather_dropping_or_keeping_the_gathered_dims_and_init_tensor(module, rng):
    x = rng.standard_normal((4, 5, 3)).astype(np.float32)
    i = np.stack([rng.integers(0, 4, 6), rng.integers(0, 5, 6)], 1).astype(np.int32)
    dropped, kept = (np.asarray(r) for r in module.tensor_gather(x, i))
    np.testing.assert_array_equal(dropped, x[i[:, 0], i[:, 1]])
    np.testing.assert_array_equal(kept, x[i[:, 0], i[:, 1]][:, None, None, :])
    y = rng.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(module.init_tensor(y)), y + y)


def test_batch_matvec_widens_and_accumulates(module, rng):
    a = rng.integers(-128, 128, (3, 5, 7)).astype(np.int8)
    x = rng.integers(-128, 128, (3, 7)).astype(np.int8)
    acc = rng.integers(-1000, 1000, (3, 5)).astype(np.int32)
    want = acc + np.einsum("bik,bk->bi", a.astype(np.int32), x.astype(np.int32))
    np.testing.assert_array_equal(np.asarray(module.batch_matvec(a, x, acc)), want)
