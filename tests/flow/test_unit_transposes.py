"""A transpose that moves only dims of size 1 is a view (flow/views.py): a decode step's query
``[1, 1, heads, d]`` turned ``[1, heads, 1, d]`` and read by two ops is no kernel of its own, while a
transpose that reorders dims of more than one element, or a slice that reads part of its source,
stays a copy. Each program through the public API on local-task (and lavapipe) against numpy,
special values included; the flow's kernels counted."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.flow.passes import flow_passes, run_flow
from pyree.compiler.input import parse_mlir
from pyree.compiler.input.lowering import lower_to_tensor_program
from pyree.compiler.tensor_program import Generic

BACKENDS = [
    pytest.param(("llvm-cpu", "local-task"), id="llvm-cpu"),
    pytest.param(("vulkan-spirv", "vulkan"), id="vulkan", marks=pytest.mark.vulkan),
]


def _program(t: str, x: tuple, perm: tuple, keys: int) -> str:
    """``y = transpose(2 * x, perm)`` read by a product with ``k`` over the last dim (scores
    ``[.., keys]``) and by ``y + 1``."""
    rank = len(x)
    y = tuple(x[p] for p in perm)
    xs, ys = "x".join(map(str, x)), "x".join(map(str, y))
    ks = "x".join(map(str, (*y[:-2], keys, y[-1])))
    ss = "x".join(map(str, (*y[:-1], keys)))
    d = [f"d{i}" for i in range(rank + 1)]
    ident = ", ".join(d[:rank])
    lead = ", ".join(d[:rank - 2])
    # product loops: the y dims but the last, then keys (d{rank-1}), then the reduction (d{rank})
    y_map = f"({', '.join(d)}) -> ({lead}, {d[rank - 2]}, {d[rank]})"
    k_map = f"({', '.join(d)}) -> ({lead}, {d[rank - 1]}, {d[rank]})"
    s_map = f"({', '.join(d)}) -> ({lead}, {d[rank - 2]}, {d[rank - 1]})"
    par = ", ".join(['"parallel"'] * rank)
    return f"""
func.func @main(%x: tensor<{xs}x{t}>, %k: tensor<{ks}x{t}>) -> (tensor<{ss}x{t}>, tensor<{ys}x{t}>) {{
  %ex = tensor.empty() : tensor<{xs}x{t}>
  %x2 = linalg.generic {{indexing_maps = [affine_map<({ident}) -> ({ident})>, affine_map<({ident}) -> ({ident})>],
      iterator_types = [{par}]}} ins(%x : tensor<{xs}x{t}>) outs(%ex : tensor<{xs}x{t}>) {{
  ^bb0(%a: {t}, %o: {t}):
    %b = arith.addf %a, %a : {t}
    linalg.yield %b : {t}
  }} -> tensor<{xs}x{t}>
  %ey = tensor.empty() : tensor<{ys}x{t}>
  %y = linalg.transpose ins(%x2 : tensor<{xs}x{t}>) outs(%ey : tensor<{ys}x{t}>) permutation = [{", ".join(map(str, perm))}]
  %z = arith.constant 0.0 : {t}
  %es = tensor.empty() : tensor<{ss}x{t}>
  %fs = linalg.fill ins(%z : {t}) outs(%es : tensor<{ss}x{t}>) -> tensor<{ss}x{t}>
  %s = linalg.generic {{indexing_maps = [affine_map<{y_map}>, affine_map<{k_map}>, affine_map<{s_map}>],
      iterator_types = [{par}, "reduction"]}} ins(%y, %k : tensor<{ys}x{t}>, tensor<{ks}x{t}>) outs(%fs : tensor<{ss}x{t}>) {{
  ^bb0(%a: {t}, %b: {t}, %o: {t}):
    %m = arith.mulf %a, %b : {t}
    %r = arith.addf %o, %m : {t}
    linalg.yield %r : {t}
  }} -> tensor<{ss}x{t}>
  %one = arith.constant 1.0 : {t}
  %e1 = tensor.empty() : tensor<{ys}x{t}>
  %y1 = linalg.generic {{indexing_maps = [affine_map<({ident}) -> ({ident})>, affine_map<({ident}) -> ({ident})>],
      iterator_types = [{par}]}} ins(%y : tensor<{ys}x{t}>) outs(%e1 : tensor<{ys}x{t}>) {{
  ^bb0(%a: {t}, %o: {t}):
    %b = arith.addf %a, %one : {t}
    linalg.yield %b : {t}
  }} -> tensor<{ys}x{t}>
  return %s, %y1 : tensor<{ss}x{t}>, tensor<{ys}x{t}>
}}
"""


def _reference(x: np.ndarray, k: np.ndarray, perm: tuple) -> list[np.ndarray]:
    y = np.transpose(x.astype(np.float64) * 2, perm)
    return [y @ k.astype(np.float64).swapaxes(-1, -2), y + 1]


def _kernels(text: str) -> list[str]:
    program = lower_to_tensor_program(parse_mlir(text, "program.mlir"))
    ops = run_flow(program, flow_passes(gpu=False, implicit_gemm=False)).functions[0].ops
    return [op.origin for op in ops if isinstance(op, Generic)]


CASES = {  # name: (x's shape, permutation, keys, whether the transpose is a view)
    "a decode step's query": ((1, 1, 5, 7), (0, 2, 1, 3), 9, True),
    "unit dims moved around a head dim": ((1, 3, 1, 1, 4), (3, 0, 2, 1, 4), 6, True),
    "heads and rows swapped": ((1, 3, 5, 7), (0, 2, 1, 3), 4, False),
    "units moved, two dims swapped": ((1, 5, 1, 7), (0, 3, 2, 1), 3, False),
}


@pytest.mark.parametrize("name", CASES)
def test_only_unit_transposes_become_views(name):
    x, perm, keys, view = CASES[name]
    origins = _kernels(_program("f32", x, perm, keys))
    assert ("linalg.transpose" not in " ".join(origins)) is view, origins


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("name", CASES)
def test_transposes_read_twice_match_numpy(name, dtype, backend):
    target, device = backend
    x_shape, perm, keys, _ = CASES[name]
    t = {np.float32: "f32", np.float16: "f16"}[dtype]
    y_shape = tuple(x_shape[p] for p in perm)
    rng = np.random.default_rng(len(name))
    x = rng.standard_normal(x_shape).astype(dtype)
    k = rng.standard_normal((*y_shape[:-2], keys, y_shape[-1])).astype(dtype)
    flat = x.reshape(-1)
    flat[0], flat[-1] = -0.0, np.inf
    if flat.size > 4:
        flat[2] = np.nan
    options = CompileOptions(target_backends=[target], vulkan_target="cpu-lavapipe-linux")
    module = rt.load_module(compile_str(_program(t, x_shape, perm, keys), options), device=device)
    got = module["main"](x, k)
    tol = 1e-5 if dtype == np.float32 else 2e-2
    for g, w in zip(got, _reference(x, k, perm)):
        g = np.asarray(g)
        assert g.shape == w.shape
        np.testing.assert_allclose(g.astype(np.float64), w, rtol=tol, atol=tol)
    # -0 doubled and transposed keeps its sign bit through the view
    y1 = np.asarray(got[1])
    assert np.signbit(np.transpose(x * 2, perm).reshape(-1)[0]) and y1.reshape(-1)[0] == 1


def test_a_slice_of_unit_dims_is_not_a_view():
    """``p[..., :8]`` of a ``[1, 3, 1, 9]`` value copies 3 rows of 8 out of rows of 9 (the bug
    the unit-transpose rule first had: its loads had the form of a transpose of unit dims)."""
    text = """
func.func @main(%p: tensor<1x3x1x9xf32>) -> (tensor<1x3x1x8xf32>, tensor<1x3x1x8xf32>) {
  %e = tensor.empty() : tensor<1x3x1x9xf32>
  %q = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%p : tensor<1x3x1x9xf32>) outs(%e : tensor<1x3x1x9xf32>) {
  ^bb0(%a: f32, %o: f32):
    %b = arith.mulf %a, %a : f32
    linalg.yield %b : f32
  } -> tensor<1x3x1x9xf32>
  %s = tensor.extract_slice %q[0, 0, 0, 0] [1, 3, 1, 8] [1, 1, 1, 1] : tensor<1x3x1x9xf32> to tensor<1x3x1x8xf32>
  %e2 = tensor.empty() : tensor<1x3x1x8xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(a, b, c, d) -> (a, b, c, d)>, affine_map<(a, b, c, d) -> (a, b, c, d)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]} ins(%s : tensor<1x3x1x8xf32>) outs(%e2 : tensor<1x3x1x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %b = arith.negf %a : f32
    linalg.yield %b : f32
  } -> tensor<1x3x1x8xf32>
  return %s, %n : tensor<1x3x1x8xf32>, tensor<1x3x1x8xf32>
}
"""
    p = np.arange(27, dtype=np.float32).reshape(1, 3, 1, 9) - 13
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    s, n = (np.asarray(v) for v in module["main"](p))
    np.testing.assert_array_equal(s, (p * p)[..., :8])
    np.testing.assert_array_equal(n, -(p * p)[..., :8])


def test_a_pad_read_through_a_unit_view_stays_in_the_window_fold():
    """PyTorch's local response norm pads the squares along a unit dim it unsqueezed (a copy
    that moves only that dim: a view now) and sums 5-wide windows of them: the pad's guarded
    moves still fold into the window's reduction through the view (they did through the copy),
    so no padded copy is written; the answer is PyTorch's."""
    import warnings

    import torch
    from pyree.compiler import import_torch

    x = torch.randn(2, 7, 5, 6, generator=torch.Generator().manual_seed(5))
    x[0, 1, 2, 3], x[1, 6, 4, 5] = -0.0, 1e20
    lrn = torch.nn.LocalResponseNorm(5)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        text = import_torch(lrn, x)
    origins = _kernels(text)
    assert "tensor.pad" not in origins and len(origins) == 3, origins
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    np.testing.assert_allclose(np.asarray(module["main"](x.numpy())), lrn(x.double()).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_a_unit_transpose_of_a_global_keeps_the_value_before_its_store():
    """A transpose of a mutable global's `[1, 5]` value (a view now) read after the global is
    stored over still reads the value as loaded, call after call, on both CPU drivers."""
    text = """
util.global private mutable @total = dense<[[1.5, -2.0, 0.25, 4.0, 7.0]]> : tensor<1x5xf32>
func.func @add(%x: tensor<1x5xf32>) -> tensor<5x1xf32> {
  %t = util.global.load @total : tensor<1x5xf32>
  %e = tensor.empty() : tensor<5x1xf32>
  %tt = linalg.transpose ins(%t : tensor<1x5xf32>) outs(%e : tensor<5x1xf32>) permutation = [1, 0]
  %t2 = arith.addf %t, %x : tensor<1x5xf32>
  util.global.store %t2, @total : tensor<1x5xf32>
  %e2 = tensor.empty() : tensor<5x1xf32>
  %n = linalg.generic {indexing_maps = [affine_map<(a, b) -> (a, b)>, affine_map<(a, b) -> (a, b)>],
      iterator_types = ["parallel", "parallel"]} ins(%tt : tensor<5x1xf32>) outs(%e2 : tensor<5x1xf32>) {
  ^bb0(%a: f32, %o: f32):
    %b = arith.negf %a : f32
    linalg.yield %b : f32
  } -> tensor<5x1xf32>
  return %n : tensor<5x1xf32>
}
"""
    vmfb = compile_str(text, CompileOptions(target_backends=["llvm-cpu"]))
    for device in ("local-sync", "local-task"):
        module = rt.load_module(vmfb, device=device)
        total = np.array([[1.5, -2.0, 0.25, 4.0, 7.0]], np.float32)
        rng = np.random.default_rng(7)
        for _ in range(3):
            x = rng.standard_normal((1, 5)).astype(np.float32)
            np.testing.assert_array_equal(np.asarray(module["add"](x)), -total.T)
            total = total + x
