"""End to end through the public APIs: compile MLIR text, run it on both CPU drivers, compare with
numpy (float64 references) on fresh random inputs at odd shapes."""

from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import compile_str
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Constant

DRIVERS = ["local-sync", "local-task"]


def t(shape, dtype="f32"):
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{dtype}>"


def run(mlir: str, function: str, *args, device: str):
    module = rt.load_module(compile_str(mlir), device=device)
    out = module[function](*args)
    if isinstance(out, tuple):
        return tuple(np.asarray(o.to_host()) for o in out)
    return np.asarray(out.to_host())


def rand(rng, shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-100, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def assert_close(actual, expected, tol=1e-5):
    assert actual.shape == expected.shape
    denom = max(np.linalg.norm(expected), 1e-30)
    assert np.linalg.norm(actual.astype(np.float64) - expected) / denom < tol


@pytest.fixture(params=DRIVERS)
def device(request):
    return request.param


@pytest.mark.parametrize("shape", [(1,), (7,), (37, 53), (3, 5, 17)])
def test_fused_elementwise_chain(device, shape):
    rng = np.random.default_rng()
    ty = t(shape)
    mlir = f"""
    func.func @f(%a: {ty}, %b: {ty}, %c: {ty}) -> {ty} {{
      %zero = arith.constant dense<0.0> : {ty}
      %0 = arith.addf %a, %b : {ty}
      %1 = arith.mulf %0, %c : {ty}
      %2 = math.exp %1 : {ty}
      %3 = arith.subf %2, %a : {ty}
      %4 = arith.maximumf %3, %zero : {ty}
      return %4 : {ty}
    }}"""
    a, b, c = (rand(rng, shape) * 0.5 for _ in range(3))
    expected = np.maximum(np.exp((a.astype(np.float64) + b) * c) - a, 0)
    assert_close(run(mlir, "f", a, b, c, device=device), expected)


@pytest.mark.parametrize("m,k,n", [(37, 53, 29), (1, 1, 1), (64, 128, 96), (5, 300, 3)])
def test_matmul(device, m, k, n):
    rng = np.random.default_rng()
    mlir = f"""
    func.func @mm(%a: {t((m, k))}, %b: {t((k, n))}) -> {t((m, n))} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {t((m, n))}
      %init = linalg.fill ins(%zero : f32) outs(%e : {t((m, n))}) -> {t((m, n))}
      %r = linalg.matmul ins(%a, %b : {t((m, k))}, {t((k, n))}) outs(%init : {t((m, n))}) -> {t((m, n))}
      return %r : {t((m, n))}
    }}"""
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    assert_close(run(mlir, "mm", a, b, device=device), a.astype(np.float64) @ b)


def test_batch_matmul_f16_inputs_accumulate_in_f32(device):
    rng = np.random.default_rng()
    B, M, K, N = 3, 9, 31, 7
    mlir = f"""
    func.func @bmm(%a: {t((B, M, K), 'f16')}, %b: {t((B, K, N), 'f16')}) -> {t((B, M, N))} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {t((B, M, N))}
      %init = linalg.fill ins(%zero : f32) outs(%e : {t((B, M, N))}) -> {t((B, M, N))}
      %r = linalg.batch_matmul ins(%a, %b : {t((B, M, K), 'f16')}, {t((B, K, N), 'f16')})
                               outs(%init : {t((B, M, N))}) -> {t((B, M, N))}
      return %r : {t((B, M, N))}
    }}"""
    a, b = rand(rng, (B, M, K), np.float16), rand(rng, (B, K, N), np.float16)
    assert_close(run(mlir, "bmm", a, b, device=device), a.astype(np.float64) @ b, tol=1e-3)


@pytest.mark.parametrize("axis", [0, 1])
def test_reductions_sum_and_max(device, axis):
    rng = np.random.default_rng()
    shape = (37, 53)
    out_shape = (shape[1 - axis],)
    kept = "d1" if axis == 0 else "d0"
    mlir = f"""
    func.func @r(%x: {t(shape)}) -> ({t(out_shape)}, {t(out_shape)}) {{
      %zero = arith.constant 0.0 : f32
      %ninf = arith.constant -3.0e38 : f32
      %e = tensor.empty() : {t(out_shape)}
      %z = linalg.fill ins(%zero : f32) outs(%e : {t(out_shape)}) -> {t(out_shape)}
      %m = linalg.fill ins(%ninf : f32) outs(%e : {t(out_shape)}) -> {t(out_shape)}
      %s = linalg.reduce ins(%x : {t(shape)}) outs(%z : {t(out_shape)}) dimensions = [{axis}]
        (%in: f32, %acc: f32) {{
          %0 = arith.addf %in, %acc : f32
          linalg.yield %0 : f32
        }}
      %mx = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ({kept})>],
                             iterator_types = [{'"reduction", "parallel"' if axis == 0 else '"parallel", "reduction"'}]}}
          ins(%x : {t(shape)}) outs(%m : {t(out_shape)}) {{
        ^bb0(%in: f32, %acc: f32):
          %0 = arith.maximumf %in, %acc : f32
          linalg.yield %0 : f32
      }} -> {t(out_shape)}
      return %s, %mx : {t(out_shape)}, {t(out_shape)}
    }}"""
    x = rand(rng, shape)
    s, mx = run(mlir, "r", x, device=device)
    assert_close(s, x.astype(np.float64).sum(axis=axis))
    np.testing.assert_array_equal(mx, x.max(axis=axis))


def test_transpose_broadcast_and_slices(device):
    rng = np.random.default_rng()
    mlir = f"""
    func.func @f(%x: {t((5, 7))}, %v: {t((7,))}) -> ({t((7, 5))}, {t((2, 2))}, {t((5, 8))}) {{
      %e = tensor.empty() : {t((7, 5))}
      %tr = linalg.transpose ins(%x : {t((5, 7))}) outs(%e : {t((7, 5))}) permutation = [1, 0]
      %eb = tensor.empty() : {t((7, 5))}
      %b = linalg.broadcast ins(%v : {t((7,))}) outs(%eb : {t((7, 5))}) dimensions = [1]
      %s = arith.addf %tr, %b : {t((7, 5))}
      %sl = tensor.extract_slice %x[1, 2] [2, 2] [2, 3] : {t((5, 7))} to {t((2, 2))}
      %pad = arith.constant 1.5 : f32
      %p = tensor.pad %x low[0, 0] high[0, 1] {{
        ^bb0(%i: index, %j: index):
          tensor.yield %pad : f32
      }} : {t((5, 7))} to {t((5, 8))}
      return %s, %sl, %p : {t((7, 5))}, {t((2, 2))}, {t((5, 8))}
    }}"""
    x, v = rand(rng, (5, 7)), rand(rng, (7,))
    s, sl, p = run(mlir, "f", x, v, device=device)
    np.testing.assert_allclose(s, x.T + v[:, None], rtol=1e-6)
    np.testing.assert_array_equal(sl, x[1:5:2, 2:8:3])
    np.testing.assert_array_equal(p, np.pad(x, ((0, 0), (0, 1)), constant_values=1.5))


def test_reshape_views_and_integer_ops(device):
    rng = np.random.default_rng()
    mlir = f"""
    func.func @f(%x: {t((6, 4), 'i32')}, %y: {t((24,), 'i32')}) -> {t((2, 3, 4), 'i32')} {{
      %c = tensor.collapse_shape %x [[0, 1]] : {t((6, 4), 'i32')} into {t((24,), 'i32')}
      %m = arith.muli %c, %y : {t((24,), 'i32')}
      %a = arith.andi %m, %y : {t((24,), 'i32')}
      %e = tensor.expand_shape %a [[0, 1, 2]] output_shape [2, 3, 4] : {t((24,), 'i32')} into {t((2, 3, 4), 'i32')}
      return %e : {t((2, 3, 4), 'i32')}
    }}"""
    x, y = rand(rng, (6, 4), np.int32), rand(rng, (24,), np.int32)
    out = run(mlir, "f", x, y, device=device)
    np.testing.assert_array_equal(out, ((x.reshape(24) * y) & y).reshape(2, 3, 4))


def test_mlp_example_matches_numpy(device):
    path = Path(__file__).resolve().parents[1] / "data/mlp.mlir"
    text = path.read_text()
    module = rt.load_module(compile_str(text), device=device)
    x = np.random.default_rng().standard_normal((37, 53)).astype(np.float32)
    out = np.asarray(module["mlp"](x).to_host())
    # The reference takes the weights from the same MLIR, through the front end's constants.
    (function,) = import_mlir(text, str(path)).functions
    w = {op.result.name: op.data.astype(np.float64) for op in function.ops
         if isinstance(op, Constant) and op.data is not None}
    assert_close(out, np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"] + w["b2"])


def test_both_local_drivers_agree_bit_for_bit():
    rng = np.random.default_rng()
    mlir = f"""
    func.func @f(%a: {t((37, 53))}, %b: {t((53, 29))}) -> {t((37, 29))} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {t((37, 29))}
      %init = linalg.fill ins(%zero : f32) outs(%e : {t((37, 29))}) -> {t((37, 29))}
      %r = linalg.matmul ins(%a, %b : {t((37, 53))}, {t((53, 29))}) outs(%init : {t((37, 29))}) -> {t((37, 29))}
      %s = math.tanh %r : {t((37, 29))}
      return %s : {t((37, 29))}
    }}"""
    a, b = rand(rng, (37, 53)), rand(rng, (53, 29))
    results = [run(mlir, "f", a, b, device=d) for d in DRIVERS]
    np.testing.assert_array_equal(results[0], results[1])
    assert_close(results[0], np.tanh(a.astype(np.float64) @ b), tol=1e-5)


def test_zero_size_tensor(device):
    mlir = f"""
    func.func @f(%a: {t((0, 3))}, %b: {t((0, 3))}) -> {t((0, 3))} {{
      %r = arith.addf %a, %b : {t((0, 3))}
      return %r : {t((0, 3))}
    }}"""
    a = np.zeros((0, 3), np.float32)
    assert run(mlir, "f", a, a, device=device).shape == (0, 3)


def test_device_arrays_go_in_and_results_chain_without_host_copies(device):
    rng = np.random.default_rng()
    ty = t((37, 53))
    mlir = f"""
    func.func @f(%a: {ty}, %b: {ty}) -> {ty} {{
      %r = arith.mulf %a, %b : {ty}
      return %r : {ty}
    }}"""
    module = rt.load_module(compile_str(mlir), device=device)
    a, b = rand(rng, (37, 53)), rand(rng, (37, 53))
    da = rt.asdevicearray(module.device, a)
    assert da.shape == (37, 53) and da.dtype == np.float32
    once = module["f"](da, rt.asdevicearray(module.device, b))
    twice = module["f"](once, da)  # a result fed back in as an argument
    np.testing.assert_allclose(twice.to_host(), a * b * a, rtol=1e-6)
    with pytest.raises(rt.InvocationError, match="argument 1: expected 37x53xf32, got 37x53xf64"):
        module["f"](da, rt.asdevicearray(module.device, b.astype(np.float64)))
