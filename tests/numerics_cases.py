"""The numerics programs every device runs: MLIR text, fresh random inputs at odd shapes, a float64
numpy reference. One table for all of them: the CPU drivers (tests/e2e/test_numerics.py), Vulkan
(tests/drivers/vulkan/test_vulkan_driver.py, lavapipe in CI) and CUDA
(tests/drivers/cuda/test_cuda_gpu.py); a device that cannot run an entry says so in its own file.
The shapes include those that pick each GPU template (long fold reductions, 64- and 128-wide
matmul tiles, guarded pad loads). Shapes that exist only for one backend's templates stay with
that backend (tests/codegen/cuda/cases.py)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data"


@dataclass(frozen=True)
class Case:
    mlir: str
    function: str
    inputs: Callable[[np.random.Generator], list]
    reference: Callable[..., object]   # numpy results (one or a tuple), float64 where it matters
    tol: float = 1e-5
    exact: bool | tuple[int, ...] = False  # every result, or the results at these positions
    # results compared element by element (relative ``tol``) instead of by norm
    elementwise: tuple[int, ...] = ()


def t(shape, dtype="f32"):
    return f"tensor<{'x'.join(map(str, shape))}{'x' if shape else ''}{dtype}>"


def rand(rng, shape, dtype=np.float32):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-100, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def f64(x):
    return x.astype(np.float64)


def add(shape, dtype="f32", np_dtype=np.float32) -> Case:
    ty = t(shape, dtype)
    mlir = f"""
    func.func @add(%a: {ty}, %b: {ty}) -> {ty} {{
      %r = arith.addf %a, %b : {ty}
      return %r : {ty}
    }}"""
    return Case(mlir, "add", lambda rng: [rand(rng, shape, np_dtype), rand(rng, shape, np_dtype)],
                lambda a, b: f64(a) + b, tol=1e-3 if dtype == "f16" else 1e-6)


def fused_chain(shape) -> Case:
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
    return Case(mlir, "f", lambda rng: [rand(rng, shape) * 0.5 for _ in range(3)],
                lambda a, b, c: np.maximum(np.exp((f64(a) + b) * c) - a, 0))


def math_chain(shape) -> Case:
    ty = t(shape)
    mlir = f"""
    func.func @f(%a: {ty}, %b: {ty}) -> ({ty}, {ty}, {ty}) {{
      %0 = math.tanh %a : {ty}
      %1 = math.erf %b : {ty}
      %2 = arith.addf %0, %1 : {ty}
      %ab = math.absf %a : {ty}
      %3 = math.log1p %ab : {ty}
      %4 = math.powf %a, %b : {ty}
      %c = arith.cmpf olt, %a, %b : {ty}
      %5 = arith.select %c, %3, %2 : {t(shape, 'i1')}, {ty}
      return %2, %5, %4 : {ty}, {ty}, {ty}
    }}"""

    def reference(a, b):
        import math
        s = np.tanh(f64(a) + 0) + np.vectorize(math.erf)(f64(b))
        with np.errstate(invalid="ignore"):
            p = np.power(f64(a), f64(b))
        return s, np.where(a < b, np.log1p(np.abs(f64(a))), s), p
    return Case(mlir, "f", lambda rng: [rand(rng, shape) * 2, np.round(rand(rng, shape) * 2)],
                reference, tol=1e-5)


def reductions(shape, axis) -> Case:
    out = (shape[1 - axis],)
    kept = "d1" if axis == 0 else "d0"
    iters = '"reduction", "parallel"' if axis == 0 else '"parallel", "reduction"'
    mlir = f"""
    func.func @r(%x: {t(shape)}) -> ({t(out)}, {t(out)}) {{
      %zero = arith.constant 0.0 : f32
      %ninf = arith.constant -3.0e38 : f32
      %e = tensor.empty() : {t(out)}
      %z = linalg.fill ins(%zero : f32) outs(%e : {t(out)}) -> {t(out)}
      %m = linalg.fill ins(%ninf : f32) outs(%e : {t(out)}) -> {t(out)}
      %s = linalg.reduce ins(%x : {t(shape)}) outs(%z : {t(out)}) dimensions = [{axis}]
        (%in: f32, %acc: f32) {{
          %0 = arith.addf %in, %acc : f32
          linalg.yield %0 : f32
        }}
      %mx = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> ({kept})>],
                             iterator_types = [{iters}]}}
          ins(%x : {t(shape)}) outs(%m : {t(out)}) {{
        ^bb0(%in: f32, %acc: f32):
          %0 = arith.maximumf %in, %acc : f32
          linalg.yield %0 : f32
      }} -> {t(out)}
      return %s, %mx : {t(out)}, {t(out)}
    }}"""
    return Case(mlir, "r", lambda rng: [rand(rng, shape)],
                lambda x: (f64(x).sum(axis=axis), f64(x).max(axis=axis)), exact=(1,))


def matmul(m, k, n, dtype="f32", np_dtype=np.float32) -> Case:
    a_t, b_t, c_t = t((m, k), dtype), t((k, n), dtype), t((m, n), dtype)
    mlir = f"""
    func.func @mm(%a: {a_t}, %b: {b_t}) -> {c_t} {{
      %zero = arith.constant 0.0 : {dtype}
      %e = tensor.empty() : {c_t}
      %init = linalg.fill ins(%zero : {dtype}) outs(%e : {c_t}) -> {c_t}
      %r = linalg.matmul ins(%a, %b : {a_t}, {b_t}) outs(%init : {c_t}) -> {c_t}
      return %r : {c_t}
    }}"""
    return Case(mlir, "mm", lambda rng: [rand(rng, (m, k), np_dtype), rand(rng, (k, n), np_dtype)],
                lambda a, b: f64(a) @ b, tol=2e-3 if dtype == "f16" else 1e-5)


def batch_matmul_f16_inputs() -> Case:
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
    return Case(mlir, "bmm", lambda rng: [rand(rng, (B, M, K), np.float16),
                                          rand(rng, (B, K, N), np.float16)],
                lambda a, b: f64(a) @ b, tol=1e-3)


def transpose_broadcast_slices() -> Case:
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
    return Case(mlir, "f", lambda rng: [rand(rng, (5, 7)), rand(rng, (7,))],
                lambda x, v: (f64(x).T + v[:, None], x[1:5:2, 2:8:3],
                              np.pad(x, ((0, 0), (0, 1)), constant_values=1.5)),
                tol=1e-6, elementwise=(0,), exact=(1, 2))


def padded_windows() -> Case:
    """tensor.pad, then a strided depthwise conv and a max pool: the pads inline into the windows
    as bounds-checked loads (flow/regions.py), the SPIR-V reductions' guarded pad loads."""
    x_t, p_t, o_t, w_t, k_t = t((2, 5, 13, 10)), t((2, 5, 15, 12)), t((2, 5, 7, 5)), t((5, 3, 3)), t((3, 3))
    attrs = "{dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}"

    def pad(name, value):
        return f"""%{name}v = arith.constant {value} : f32
      %{name} = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {{
        ^bb0(%i: index, %j: index, %a: index, %b: index):
          tensor.yield %{name}v : f32
      }} : {x_t} to {p_t}"""
    mlir = f"""
    func.func @f(%x: {x_t}, %w: {w_t}) -> ({o_t}, {o_t}) {{
      {pad("pz", "0.0")}
      {pad("pm", "0xFF800000")}
      %zero = arith.constant 0.0 : f32
      %ninf = arith.constant 0xFF800000 : f32
      %e = tensor.empty() : {o_t}
      %z = linalg.fill ins(%zero : f32) outs(%e : {o_t}) -> {o_t}
      %m = linalg.fill ins(%ninf : f32) outs(%e : {o_t}) -> {o_t}
      %d = linalg.depthwise_conv_2d_nchw_chw {attrs} ins(%pz, %w : {p_t}, {w_t}) outs(%z : {o_t}) -> {o_t}
      %k = tensor.empty() : {k_t}
      %mp = linalg.pooling_nchw_max {attrs} ins(%pm, %k : {p_t}, {k_t}) outs(%m : {o_t}) -> {o_t}
      return %d, %mp : {o_t}, {o_t}
    }}"""

    def inputs(rng):
        x = rand(rng, (2, 5, 13, 10))
        x[0, 0, 0, :4] = [np.inf, -np.inf, -0.0, np.inf]
        return [x, rand(rng, (5, 3, 3))]

    def reference(x, w):
        conv, top = np.zeros((2, 5, 7, 5)), np.full((2, 5, 7, 5), -np.inf)
        zp = np.pad(f64(x), ((0, 0), (0, 0), (1, 1), (1, 1)))
        mp = np.pad(f64(x), ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        for i in range(3):
            for j in range(3):
                with np.errstate(invalid="ignore"):
                    conv = conv + zp[:, :, i:i + 13:2, j:j + 9:2] * f64(w)[None, :, i, j, None, None]
                top = np.maximum(top, mp[:, :, i:i + 13:2, j:j + 9:2])
        return conv, top
    return Case(mlir, "f", inputs, reference)


def integer_ops() -> Case:
    mlir = f"""
    func.func @f(%x: {t((6, 4), 'i32')}, %y: {t((24,), 'i32')}) -> {t((2, 3, 4), 'i32')} {{
      %c = tensor.collapse_shape %x [[0, 1]] : {t((6, 4), 'i32')} into {t((24,), 'i32')}
      %m = arith.muli %c, %y : {t((24,), 'i32')}
      %a = arith.andi %m, %y : {t((24,), 'i32')}
      %e = tensor.expand_shape %a [[0, 1, 2]] output_shape [2, 3, 4] : {t((24,), 'i32')} into {t((2, 3, 4), 'i32')}
      return %e : {t((2, 3, 4), 'i32')}
    }}"""
    return Case(mlir, "f", lambda rng: [rand(rng, (6, 4), np.int32), rand(rng, (24,), np.int32)],
                lambda x, y: ((x.reshape(24) * y) & y).reshape(2, 3, 4), exact=True)


def cache_rows(dtype: str, np_dtype) -> Case:
    """A KV cache's step: rows at a run-time position written into an argument that is returned
    (a scatter of those rows alone, tied to the argument: flow/argument_windows.py)."""
    cache, new = (2, 3, 37, 5), (2, 3, 2, 5)
    mlir = f"""
    func.func @rows(%c: {t(cache, dtype)}, %n: {t(new, dtype)}, %pos: tensor<i64>) -> {t(cache, dtype)} {{
      %p = tensor.extract %pos[] : tensor<i64>
      %i = arith.index_cast %p : i64 to index
      %r = tensor.insert_slice %n into %c[0, 0, %i, 0] [2, 3, 2, 5] [1, 1, 1, 1]
          : {t(new, dtype)} into {t(cache, dtype)}
      return %r : {t(cache, dtype)}
    }}"""

    def reference(c, n, pos):
        out = c.copy()
        for row in range(cache[2]):
            if 0 <= row - int(pos) < new[2]:
                out[:, :, row] = n[:, :, row - int(pos)]
        return out
    return Case(mlir, "rows", lambda rng: [rand(rng, cache, np_dtype), rand(rng, new, np_dtype),
                                           np.array(rng.integers(-1, 37), np.int64)],
                reference, exact=True)


def mlp() -> Case:
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import Constant
    path = DATA / "mlp.mlir"
    text = path.read_text()
    (function,) = import_mlir(text, str(path)).functions
    w = {op.result.name: op.data.astype(np.float64) for op in function.ops
         if isinstance(op, Constant) and op.data is not None}
    return Case(text, "mlp", lambda rng: [rand(rng, (37, 53))],
                lambda x: np.maximum(x @ w["w1"] + w["b1"], 0) @ w["w2"] + w["b2"])


CASES: dict[str, Callable[[], Case]] = {
    "add_37x53": lambda: add((37, 53)),
    "add_f16_1000": lambda: add((1000,), "f16", np.float16),
    **{f"fused_chain_{'x'.join(map(str, s))}": (lambda s=s: fused_chain(s))
       for s in [(1,), (7,), (37, 53), (3, 5, 17), (12, 53)]},
    "add_52x37": lambda: add((52, 37)),   # 4-vector grid-stride template
    "math_chain_37x53": lambda: math_chain((37, 53)),
    "reduce_axis0_37x53": lambda: reductions((37, 53), 0),
    "reduce_axis1_37x53": lambda: reductions((37, 53), 1),
    "reduce_long_5x1001": lambda: reductions((5, 1001), 1),
    "reduce_long_axis0_777x3": lambda: reductions((777, 3), 0),
    **{f"matmul_{m}x{k}x{n}": (lambda m=m, k=k, n=n: matmul(m, k, n))
       for m, k, n in [(37, 53, 29), (1, 1, 1), (64, 128, 96), (5, 300, 3), (130, 67, 259),
                       (517, 45, 530)]},
    "matmul_f16_67x129x45": lambda: matmul(67, 129, 45, "f16", np.float16),
    # Cooperative-matrix shape (M, N multiples of 64, K of 16) when the target has them.
    "matmul_f16_128x48x192": lambda: matmul(128, 48, 192, "f16", np.float16),
    "batch_matmul_f16_inputs": batch_matmul_f16_inputs,
    "transpose_broadcast_slices": transpose_broadcast_slices,
    "padded_windows": padded_windows,
    "integer_ops": integer_ops,
    "cache_rows_f32": lambda: cache_rows("f32", np.float32),
    "cache_rows_f16": lambda: cache_rows("f16", np.float16),
    "mlp": mlp,
}


# The module files of these programs, where a device host runs modules built elsewhere
# (tests/drivers/cuda/build_modules.py); the prefix keeps them apart from the names of
# tests/codegen/cuda/cases.py.
FILE_PREFIX = "numerics_"


def results(out) -> object:
    """A call's results on the host: one array, or a tuple of them."""
    if isinstance(out, tuple):
        return tuple(np.asarray(o.to_host()) for o in out)
    return np.asarray(out.to_host())


def check(case: Case, actual, inputs) -> None:
    expected = case.reference(*inputs)
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected)
    for i, (got, want) in enumerate(zip(actual, expected)):
        want = np.asarray(want)
        assert got.shape == want.shape
        if case.exact is True or (case.exact and i in case.exact):
            np.testing.assert_array_equal(got, want)
            continue
        if i in case.elementwise:
            np.testing.assert_allclose(got, want, rtol=case.tol)
            continue
        finite = np.isfinite(want)
        np.testing.assert_array_equal(np.isfinite(got), finite)
        denom = max(np.linalg.norm(want[finite]), 1e-30)
        assert np.linalg.norm(got[finite].astype(np.float64) - want[finite]) / denom < case.tol
