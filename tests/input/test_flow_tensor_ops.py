"""IREE's flow tensor ops around dynamic shapes, through the public API on local-task, against
numpy at sizes 0, 1, a prime and large: ``flow.tensor.dynamic_constant`` (a constant whose
``?`` dims the kernels take as run-time sizes, and the host program knows), ``tie_shape``,
``bitcast``, and ``tensor.cast`` to and from ``?``."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, CompileOptions, compile_str

CPU = CompileOptions(target_backends=["llvm-cpu"])
SIZES = [0, 1, 7, 1031]
RNG = np.random.default_rng(29)


def run(text: str, name: str, *args):
    module = rt.load_module(compile_str(text, CPU), device="local-task")
    out = module[name](*args)
    return [np.asarray(o.to_host()) for o in (out if isinstance(out, tuple) else (out,))]


def dense(a: np.ndarray) -> str:
    """An f32 dense literal, each element by its bits (so -0, inf and NaN are exact)."""
    body = ", ".join(f"0x{int(b):08X}" for b in a.astype(np.float32).ravel().view(np.uint32))
    nested = body if a.ndim == 1 else ", ".join(
        "[" + ", ".join(body.split(", ")[r * a.shape[1]:(r + 1) * a.shape[1]]) + "]"
        for r in range(a.shape[0]))
    return f"dense<[{nested}]>" if a.size else "dense<>"


def dynamic_constant_program(a: np.ndarray) -> str:
    """exp(c) + 1 and its row sums, c a dynamic constant: every dim hidden from the kernels."""
    m, n = a.shape
    return f"""
#map = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @f() -> (tensor<{m}x{n}xf32>, tensor<?xf32>) {{
  %d = flow.tensor.dynamic_constant {dense(a)} : tensor<{m}x{n}xf32> -> tensor<?x?xf32>
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %dm = tensor.dim %d, %c0 : tensor<?x?xf32>
  %dn = tensor.dim %d, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%dm, %dn) : tensor<?x?xf32>
  %one = arith.constant 1.0 : f32
  %s = linalg.generic {{indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}}
      ins(%d : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %w = math.exp %x : f32
    %v = arith.addf %w, %one : f32
    linalg.yield %v : f32
  }} -> tensor<?x?xf32>
  %zero = arith.constant 0.0 : f32
  %r0 = tensor.empty(%dm) : tensor<?xf32>
  %r1 = linalg.fill ins(%zero : f32) outs(%r0 : tensor<?xf32>) -> tensor<?xf32>
  %r = linalg.generic {{indexing_maps = [#map, #row], iterator_types = ["parallel", "reduction"]}}
      ins(%s : tensor<?x?xf32>) outs(%r1 : tensor<?xf32>) {{
  ^bb0(%x: f32, %o: f32):
    %z = arith.addf %x, %o : f32
    linalg.yield %z : f32
  }} -> tensor<?xf32>
  %static = tensor.cast %s : tensor<?x?xf32> to tensor<{m}x{n}xf32>
  return %static, %r : tensor<{m}x{n}xf32>, tensor<?xf32>
}}
"""


@pytest.mark.parametrize("m", SIZES)
def test_dynamic_constant_against_numpy(m):
    a = RNG.standard_normal((m, 3)).astype(np.float32)
    a.ravel()[: min(a.size, 3)] = [-0.0, np.inf, -np.inf][: min(a.size, 3)]
    s, r = run(dynamic_constant_program(a), "f")
    expected = np.exp(a) + np.float32(1)
    np.testing.assert_allclose(s, expected, rtol=2e-6)
    np.testing.assert_allclose(r, expected.sum(axis=1), rtol=1e-5)
    assert r.shape == (m,)  # a hidden size: the caller sees the value's real shape


def test_dynamic_constant_sizes_are_run_time_sizes_of_the_kernels():
    """The kernels take the hidden dims as push constants (one kernel would serve any size);
    the function itself has none for the caller to give."""
    text = dynamic_constant_program(RNG.standard_normal((7, 3)).astype(np.float32))
    kernels = compile_str(text, CompileOptions(target_backends=["llvm-cpu"],
                                               compile_to="executable-sources")).decode()
    assert "p0" in kernels
    module = rt.load_module(compile_str(text, CPU), device="local-task")
    assert module["f"].argument_types == []


@pytest.mark.parametrize("n", SIZES)
def test_tie_shape_and_bitcast_against_numpy(n):
    text = """
func.func @g(%x: tensor<?x4xf32>) -> (tensor<?x4xi32>, tensor<?x8xf16>) {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?x4xf32>
  %t = flow.tensor.tie_shape %x : tensor<?x4xf32>{%n}
  %i = flow.tensor.bitcast %t : tensor<?x4xf32>{%n} -> tensor<?x4xi32>{%n}
  %h = flow.tensor.bitcast %t : tensor<?x4xf32>{%n} -> tensor<?x8xf16>{%n}
  return %i, %h : tensor<?x4xi32>, tensor<?x8xf16>
}
"""
    x = RNG.standard_normal((n, 4)).astype(np.float32)
    if n:
        x[0, :3] = [np.nan, -0.0, np.inf]
    i, h = run(text, "g", x)
    np.testing.assert_array_equal(i, x.view(np.int32))
    np.testing.assert_array_equal(h.view(np.uint16), x.view(np.uint16).reshape(n, 8))


def test_cast_to_and_from_dynamic_dims():
    text = """
func.func @c(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %d = tensor.cast %x : tensor<2x3xf32> to tensor<?x?xf32>
  %s = tensor.cast %d : tensor<?x?xf32> to tensor<2x3xf32>
  return %s : tensor<2x3xf32>
}
"""
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_array_equal(run(text, "c", x)[0], x)


def test_topk_with_a_hidden_k_against_numpy():
    values = RNG.permutation(97).astype(np.float32)
    text = f"""
func.func @t() -> (tensor<?xf32>, tensor<?xi32>) {{
  %x = flow.tensor.dynamic_constant {dense(values)} : tensor<97xf32> -> tensor<?xf32>
  %v0 = flow.tensor.dynamic_constant dense<0xFF800000> : tensor<5xf32> -> tensor<?xf32>
  %i0 = flow.tensor.dynamic_constant dense<0> : tensor<5xi32> -> tensor<?xi32>
  %r:2 = iree_linalg_ext.topk_v2 dimension(0) is_sorted ins(%x : tensor<?xf32>)
      outs(%v0, %i0 : tensor<?xf32>, tensor<?xi32>) {{
  ^bb0(%a: f32, %b: f32):
    %c = arith.cmpf ogt, %a, %b : f32
    iree_linalg_ext.yield %c : i1
  }} -> tensor<?xf32>, tensor<?xi32>
  return %r#0, %r#1 : tensor<?xf32>, tensor<?xi32>
}}
"""
    v, i = run(text, "t")
    order = np.argsort(-values, kind="stable")[:5]
    np.testing.assert_array_equal(v, values[order])
    np.testing.assert_array_equal(i, order)


def test_a_static_size_that_disagrees_with_a_hidden_one_is_refused():
    text = """
func.func @bad() -> tensor<5xf32> {
  %c = flow.tensor.dynamic_constant dense<1.0> : tensor<3xf32> -> tensor<?xf32>
  %s = tensor.cast %c : tensor<?xf32> to tensor<5xf32>
  return %s : tensor<5xf32>
}
"""
    with pytest.raises(CompileError, match=r":4:\d+: .*c0 and 5"):
        compile_str(text, CPU)


def test_a_dynamic_constant_whose_static_dims_disagree_is_refused():
    text = """
func.func @bad() -> tensor<?x4xf32> {
  %c = flow.tensor.dynamic_constant dense<1.0> : tensor<3x5xf32> -> tensor<?x4xf32>
  return %c : tensor<?x4xf32>
}
"""
    with pytest.raises(CompileError, match=r":3:\d+: .*only '\?' may differ"):
        compile_str(text, CPU)


@pytest.mark.parametrize("n", SIZES)
def test_assume_int_passes_its_operands_through(n):
    text = """
func.func @a(%x: tensor<?xf32>) -> tensor<?xf32> {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %m, %k = util.assume.int %n<umin = 0, umax = 4096>, %c0[<umin = 0>, <udiv = 8>] : index, index
  %e = tensor.empty(%m) : tensor<?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>],
      iterator_types = ["parallel"]} ins(%x : tensor<?xf32>) outs(%e : tensor<?xf32>) {
  ^bb0(%v: f32, %o: f32):
    %w = arith.mulf %v, %v : f32
    linalg.yield %w : f32
  } -> tensor<?xf32>
  return %r : tensor<?xf32>
}
"""
    x = RNG.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(run(text, "a", x)[0], x * x)


def test_assume_int_with_an_unknown_key_is_refused():
    text = """
func.func @a(%n: index) -> index {
  %m = util.assume.int %n<umin = 0, ubound = 9> : index
  return %m : index
}
"""
    with pytest.raises(CompileError, match=r":3:\d+: .*util.assume.int knows umin, umax, udiv"):
        compile_str(text, CPU)


SCATTER_OF_RUN_TIME_SIZED_UPDATES = """
func.func @s() -> tensor<6x3xi32> {
  %base = util.unfoldable_constant dense<1> : tensor<6x3xi32>
  %i = flow.tensor.dynamic_constant dense<[[2], [4]]> : tensor<2x1xi32> -> tensor<?x1xi32>
  %u = flow.tensor.dynamic_constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi32> -> tensor<?x3xi32>
  %0 = "stablehlo.scatter"(%base, %i, %u) ({
  ^bb0(%a: tensor<i32>, %b: tensor<i32>):
    %1 = stablehlo.add %a, %b : tensor<i32>
    "stablehlo.return"(%1) : (tensor<i32>) -> ()
  }) {indices_are_sorted = false, scatter_dimension_numbers = #stablehlo.scatter<
      update_window_dims = [1], inserted_window_dims = [0], scatter_dims_to_operand_dims = [0],
      index_vector_dim = 1>, unique_indices = false}
    : (tensor<6x3xi32>, tensor<?x1xi32>, tensor<?x3xi32>) -> tensor<6x3xi32>
  return %0 : tensor<6x3xi32>
}
"""


def test_a_scatter_of_run_time_sized_updates_against_numpy():
    """The updates' rows are a run-time size: the scatter gathers from a binding with a
    run-time dim (its index arithmetic reads the dim as a push constant)."""
    want = np.ones((6, 3), np.int32)
    want[[2, 4]] += np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    np.testing.assert_array_equal(run(SCATTER_OF_RUN_TIME_SIZED_UPDATES, "s")[0], want)
