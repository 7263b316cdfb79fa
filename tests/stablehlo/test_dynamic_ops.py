"""StableHLO's dynamic ops as written by hand (not by JAX), through the public API on
local-task, against numpy at sizes 0, 1, a prime and large: ``get_dimension_size``, size
arithmetic, shape tensors (``reshape``, ``concatenate``), ``dynamic_reshape``,
``real_dynamic_slice``, ``dynamic_iota`` and ``dynamic_broadcast_in_dim``; and a callee with
``?`` dims refined to static ones by its call site."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

TEXT = """
func.func @main(%x: tensor<?x6xf32>, %v: tensor<3xf32>) -> (tensor<?x3xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?x3xf32>) {
  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x6xf32>) -> tensor<i32>
  %c2 = stablehlo.constant dense<2> : tensor<i32>
  %m = stablehlo.multiply %n, %c2 : tensor<i32>
  %m1 = stablehlo.reshape %m : (tensor<i32>) -> tensor<1xi32>
  %c3 = stablehlo.constant dense<3> : tensor<1xi32>
  %s = stablehlo.concatenate %m1, %c3, dim = 0 : (tensor<1xi32>, tensor<1xi32>) -> tensor<2xi32>
  %r = stablehlo.dynamic_reshape %x, %s : (tensor<?x6xf32>, tensor<2xi32>) -> tensor<?x3xf32>
  %start = stablehlo.constant dense<[0, 1]> : tensor<2xi32>
  %step = stablehlo.constant dense<1> : tensor<2xi32>
  %sl = stablehlo.real_dynamic_slice %r, %start, %s, %step : (tensor<?x3xf32>, tensor<2xi32>, tensor<2xi32>, tensor<2xi32>) -> tensor<?x2xf32>
  %io = stablehlo.dynamic_iota %m1, dim = 0 : (tensor<1xi32>) -> tensor<?xi32>
  %b = stablehlo.dynamic_broadcast_in_dim %v, %s, dims = [1] : (tensor<3xf32>, tensor<2xi32>) -> tensor<?x3xf32>
  %sum = stablehlo.add %r, %b : tensor<?x3xf32>
  return %r, %sl, %io, %sum : tensor<?x3xf32>, tensor<?x2xf32>, tensor<?xi32>, tensor<?x3xf32>
}
"""


@pytest.fixture(scope="module")
def module():
    vmfb = compile_str(TEXT, CompileOptions(target_backends=["llvm-cpu"]))
    return rt.load_module(vmfb, device="local-task")


@pytest.mark.parametrize("n", [0, 1, 7, 1031])
def test_dynamic_ops_against_numpy(module, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    v = np.array([np.inf, -0.0, 2.5], np.float32)
    r, sl, io, total = (np.asarray(o.to_host()) for o in module["main"](x, v))
    np.testing.assert_array_equal(r, x.reshape(2 * n, 3))
    np.testing.assert_array_equal(sl, x.reshape(2 * n, 3)[:, 1:])
    np.testing.assert_array_equal(io, np.arange(2 * n, dtype=np.int32))
    np.testing.assert_array_equal(total, x.reshape(2 * n, 3) + v)


REFINED = """
func.func private @f(%x: tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?xf32>) {
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %y = stablehlo.multiply %x, %x : tensor<?x4xf32>
  %s = stablehlo.reduce(%y init: %z) applies stablehlo.add across dimensions = [1] : (tensor<?x4xf32>, tensor<f32>) -> tensor<?xf32>
  %n = stablehlo.get_dimension_size %x, dim = 0 : (tensor<?x4xf32>) -> tensor<i32>
  %n1 = stablehlo.reshape %n : (tensor<i32>) -> tensor<1xi32>
  %i = stablehlo.dynamic_iota %n1, dim = 0 : (tensor<1xi32>) -> tensor<?xf32>
  %t = stablehlo.add %s, %i : tensor<?xf32>
  return %y, %t : tensor<?x4xf32>, tensor<?xf32>
}
func.func @main(%x: tensor<NNx4xf32>) -> (tensor<NNx4xf32>, tensor<NNxf32>) {
  %xc = tensor.cast %x : tensor<NNx4xf32> to tensor<?x4xf32>
  %y, %t = call @f(%xc) : (tensor<?x4xf32>) -> (tensor<?x4xf32>, tensor<?xf32>)
  %a = stablehlo.convert %y : (tensor<?x4xf32>) -> tensor<NNx4xf32>
  %b = stablehlo.convert %t : (tensor<?xf32>) -> tensor<NNxf32>
  return %a, %b : tensor<NNx4xf32>, tensor<NNxf32>
}
"""


@pytest.mark.parametrize("n", [0, 1, 7, 1031])
def test_a_call_site_with_static_sizes_refines_the_callee(n):
    """The callee's ``?`` dims are the caller's static sizes: its kernels are static ones (no
    push constants), and the answers are numpy's."""
    text = REFINED.replace("NN", str(n))
    kernels = compile_str(text, CompileOptions(target_backends=["llvm-cpu"],
                                               compile_to="executable-sources")).decode()
    assert "p0" not in kernels
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    x = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
    a, b = (np.asarray(o.to_host()) for o in module["main"](x))
    np.testing.assert_array_equal(a, x * x)
    np.testing.assert_allclose(b, (x * x).sum(1) + np.arange(n), rtol=1e-5)


def test_dynamic_gather_with_constant_slice_sizes_against_numpy():
    text = """
func.func @g(%a: tensor<5x8xi32>, %i: tensor<3x1xi64>) -> tensor<3x2x8xi32> {
  %s = stablehlo.constant dense<[2, 8]> : tensor<2xi64>
  %r = "stablehlo.dynamic_gather"(%a, %i, %s) {
    dimension_numbers = #stablehlo.gather<offset_dims = [1, 2], start_index_map = [0], index_vector_dim = 1>,
    indices_are_sorted = false
  } : (tensor<5x8xi32>, tensor<3x1xi64>, tensor<2xi64>) -> tensor<3x2x8xi32>
  return %r : tensor<3x2x8xi32>
}
"""
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    a = np.arange(40, dtype=np.int32).reshape(5, 8)
    i = np.array([[0], [3], [9]], np.int32)  # i64 arguments are i32 (demoted); 9 is clamped to the last start, 3
    expected = np.stack([a[min(max(int(s), 0), 3):min(max(int(s), 0), 3) + 2] for s in i[:, 0]])
    np.testing.assert_array_equal(np.asarray(module["g"](a, i).to_host()), expected)


WINDOWS = """
func.func @main(%c: tensor<?x6xf32>, %u: tensor<?x2xf32>, %j: tensor<i32>, %g: tensor<?x6xf32>,
                %k: tensor<i32>) -> (tensor<?x6xf32>, tensor<?x2xf32>) {
  %z = stablehlo.constant dense<0> : tensor<i32>
  %r = stablehlo.dynamic_update_slice %c, %u, %z, %j : (tensor<?x6xf32>, tensor<?x2xf32>, tensor<i32>, tensor<i32>) -> tensor<?x6xf32>
  %idx = stablehlo.reshape %k : (tensor<i32>) -> tensor<1xi32>
  %s = "stablehlo.gather"(%g, %idx) {dimension_numbers = #stablehlo.gather<offset_dims = [0, 1], start_index_map = [1]>, slice_sizes = array<i64: 2, 2>, indices_are_sorted = false} : (tensor<?x6xf32>, tensor<1xi32>) -> tensor<2x2xf32>
  %w = stablehlo.dynamic_update_slice %u, %s, %z, %z : (tensor<?x2xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<?x2xf32>
  return %r, %w : tensor<?x6xf32>, tensor<?x2xf32>
}
"""


@pytest.mark.parametrize("n", [2, 3, 17])
def test_windows_of_run_time_size_clamp_their_starts(n):
    """A dynamic_update_slice whose update, and a gather whose operand, has a ``?`` dim: each
    start is clamped into ``dim - window`` with the dim known per call (this had been a
    TypeError at compile time: a constant of a run-time size)."""
    module = rt.load_module(compile_str(WINDOWS, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    rng = np.random.default_rng(n)
    c = rng.standard_normal((n, 6)).astype(np.float32)
    u = rng.standard_normal((n, 2)).astype(np.float32)
    g = rng.standard_normal((n, 6)).astype(np.float32)
    for j, k in [(0, 0), (3, 5), (9, -4), (-2, 2)]:
        r, w = (np.asarray(o.to_host()) for o in module["main"](c, u, np.int32(j), g, np.int32(k)))
        want = c.copy()
        start = min(max(j, 0), 4)
        want[:, start:start + 2] = u
        np.testing.assert_array_equal(r, want)
        col = min(max(k, 0), 4)
        want_w = u.copy()
        want_w[:2] = g[:2, col:col + 2]
        np.testing.assert_array_equal(w, want_w)
