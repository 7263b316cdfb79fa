"""Products with run-time sizes: linear layers whose row count is a run-time size (a prompt's
length) and attention's batched products over a run-time sequence, which the cuda target runs on
tensor cores with its tile chosen per dispatch (codegen/cuda/run_time_mma.py), shared by the
CPU-side codegen tests (tests/codegen/cuda/test_cuda_run_time_mma.py) and the GPU tests
(tests/drivers/cuda/test_cuda_run_time_mma_on_gpu.py), with their float64 reference."""

from __future__ import annotations

import numpy as np

# name: (K, N, operand type, weight layout, epilogue, --pyree-cuda-f32-matmul)
CASES = {
    "f16_kn_bias": (200, 328, "f16", "kn", "bias", "strict"),
    "bf16_nk_gelu": (72, 136, "bf16", "nk", "gelu", "strict"),
    "f16_nk_wide": (256, 1000, "f16", "nk", "bias", "strict"),
    "f32_tf32_kn": (96, 200, "f32", "kn", "bias", "tf32"),
    # few columns and a long K with a partial last k tile
    "f16_nk_long_k": (2600, 200, "f16", "nk", "bias", "strict"),
    "bf16_kn_long_k_gelu": (3000, 72, "bf16", "kn", "gelu", "strict"),
}
# attention's products over a run-time sequence (M, N or K at run time, batch strides sizes):
# name: (heads, head depth, operand type, kind); "scores": s[h, m, n] = q[h, m] . k[h, n] / 8,
# -inf past the diagonal; "mix": o[h, m, d] = sum_j p[h, m, j] v[h, j, d]; "outer": o[h, m, n] =
# sum_c a[h, m, c] b[h, c, n], b's rows of n elements (a run-time stride, checked per dispatch)
BATCHED = {"scores_f16": (3, 40, "f16", "scores"), "mix_bf16": (3, 24, "bf16", "mix"),
           "outer_f16": (2, 48, "f16", "outer")}
# rows per call: none, one, odd, around the tiles' edges, large
ROWS = (0, 1, 7, 64, 65, 129, 1000, 2047)


def program(name: str) -> str:
    """``y[m, n] = epilogue(sum_k x[m, k] w[k, n] + bias[n])`` with x ``?xK`` and the products
    summed in f32; y of x's type. A BATCHED case's product, f32 results."""
    if name in BATCHED:
        return _batched(name)
    k, n, ty, layout, epilogue, _ = CASES[name]
    w_shape, w_map = (f"{k}x{n}", "(d2, d1)") if layout == "kn" else (f"{n}x{k}", "(d1, d2)")
    ext = "" if ty == "f32" else f"""
    %xa = arith.extf %xv : {ty} to f32
    %wa = arith.extf %wv : {ty} to f32"""
    xa, wa = ("%xv", "%wv") if ty == "f32" else ("%xa", "%wa")
    tail = "" if epilogue == "bias" else """
    %h = arith.constant 0.5 : f32
    %c = arith.constant 0.7978845608 : f32
    %s2 = arith.mulf %s, %s : f32
    %s3 = arith.mulf %s2, %s : f32
    %k3 = arith.constant 0.044715 : f32
    %p = arith.mulf %k3, %s3 : f32
    %q = arith.addf %s, %p : f32
    %r = arith.mulf %c, %q : f32
    %t = math.tanh %r : f32
    %one = arith.constant 1.0 : f32
    %u = arith.addf %one, %t : f32
    %v = arith.mulf %h, %s : f32
    %g = arith.mulf %v, %u : f32"""
    out = "%s" if epilogue == "bias" else "%g"
    if ty != "f32":
        tail += f"""
    %y = arith.truncf {out} : f32 to {ty}"""
        out = "%y"
    return f"""
func.func @linear(%x: tensor<?x{k}x{ty}>, %w: tensor<{w_shape}x{ty}>, %bias: tensor<{n}xf32>)
    -> tensor<?x{n}x{ty}> {{
  %c0 = arith.constant 0 : index
  %m = tensor.dim %x, %c0 : tensor<?x{k}x{ty}>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty(%m) : tensor<?x{n}xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<?x{n}xf32>) -> tensor<?x{n}xf32>
  %acc = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>,
      affine_map<(d0, d1, d2) -> {w_map}>, affine_map<(d0, d1, d2) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel", "reduction"]}}
      ins(%x, %w : tensor<?x{k}x{ty}>, tensor<{w_shape}x{ty}>) outs(%f : tensor<?x{n}xf32>) {{
  ^bb0(%xv: {ty}, %wv: {ty}, %o: f32):{ext}
    %pr = arith.mulf {xa}, {wa} : f32
    %sum = arith.addf %o, %pr : f32
    linalg.yield %sum : f32
  }} -> tensor<?x{n}xf32>
  %e2 = tensor.empty(%m) : tensor<?x{n}x{ty}>
  %out = linalg.generic {{indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>,
      affine_map<(d0, d1) -> (d1)>, affine_map<(d0, d1) -> (d0, d1)>],
      iterator_types = ["parallel", "parallel"]}}
      ins(%acc, %bias : tensor<?x{n}xf32>, tensor<{n}xf32>) outs(%e2 : tensor<?x{n}x{ty}>) {{
  ^bb0(%a: f32, %b: f32, %z: {ty}):
    %s = arith.addf %a, %b : f32{tail}
    linalg.yield {out} : {ty}
  }} -> tensor<?x{n}x{ty}>
  return %out : tensor<?x{n}x{ty}>
}}
"""


def _dtype(ty: str):
    import ml_dtypes  # noqa: F401 - numpy's bfloat16, through jax's dependency
    return {"f16": np.float16, "bf16": np.dtype("bfloat16"), "f32": np.float32}[ty]


def _specials(x: np.ndarray) -> None:
    """A NaN, an inf and a -0 row in x's first rows (its second-to-last axis), where it has them."""
    if x.shape[-2] >= 3:
        cols = x.shape[-1]
        x[..., 0, 3 % cols], x[..., 1, 5 % cols], x[..., 2, :] = np.nan, np.inf, -0.0


def inputs(name: str, rows: int, seed: int) -> list[np.ndarray]:
    """The program's arguments at ``rows`` (the run-time size): values exactly representable in
    the operand type, with NaN, inf and -0 rows (``_specials``)."""
    rng = np.random.default_rng(seed)
    if name in BATCHED:
        heads, depth, ty, kind = BATCHED[name]
        dtype = _dtype(ty)
        if kind == "scores":
            q = rng.standard_normal((heads, rows, depth)).astype(dtype)
            _specials(q)
            return [q, rng.standard_normal((heads, rows, depth)).astype(dtype)]
        if kind == "outer":
            a = rng.standard_normal((heads, rows, depth)).astype(dtype)
            _specials(a)
            return [a, rng.standard_normal((heads, depth, rows)).astype(dtype)]
        p = rng.random((heads, rows, rows)).astype(dtype)
        _specials(p)
        return [p, rng.standard_normal((heads, rows, depth)).astype(dtype)]
    k, n, ty, layout, _, _ = CASES[name]
    x = rng.standard_normal((rows, k)).astype(_dtype(ty))
    _specials(x)
    w = (rng.standard_normal((k, n) if layout == "kn" else (n, k)) / np.sqrt(k)).astype(_dtype(ty))
    return [x, w, rng.standard_normal(n).astype(np.float32)]


def reference(name: str, args: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """(float64 of the program, sum of |terms| per output) from the same operand values; the
    caller rounds to the result's type."""
    a = args[0].astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        if name in BATCHED:
            b = args[1].astype(np.float64)
            if BATCHED[name][3] == "scores":
                b = b.transpose(0, 2, 1)
                s, scale = a @ b * 0.125, np.abs(a) @ np.abs(b) * 0.125
                n = s.shape[-1]
                later = np.arange(n)[None, :] > np.arange(n)[:, None]
                return np.where(later, -np.inf, s), np.where(later, 1.0, scale)
            return a @ b, np.abs(a) @ np.abs(b)
        _, _, _, layout, epilogue, _ = CASES[name]
        w, bias = args[1].astype(np.float64), args[2]
        w = w if layout == "kn" else w.T
        s = a @ w + bias
        if epilogue == "gelu":
            s = 0.5 * s * (1 + np.tanh(0.7978845608 * (s + 0.044715 * s ** 3)))
        return s, np.abs(a) @ np.abs(w) + np.abs(bias)


def check(name: str, got: np.ndarray, args: list[np.ndarray]) -> None:
    """Within the products' f32 sums (TF32's 2^-10 for tf32) and the result type's rounding of
    the float64 reference, relative to the sum of |terms|; NaN and inf exactly where it has them."""
    ty, mode = (BATCHED[name][2], "strict") if name in BATCHED else (CASES[name][2], CASES[name][5])
    out_ty = "f32" if name in BATCHED else ty
    ref, scale = reference(name, args)
    assert got.shape == ref.shape
    got64 = got.astype(np.float64)
    special = ~np.isfinite(ref) | ~np.isfinite(scale)
    np.testing.assert_array_equal(np.isnan(got64[special]), np.isnan(ref[special]))
    np.testing.assert_array_equal(got64[special & ~np.isnan(ref)], ref[special & ~np.isnan(ref)])
    rounding = 2.0 ** -9 if mode == "tf32" else {"f16": 2.0 ** -10, "bf16": 2.0 ** -7,
                                                 "f32": 2.0 ** -20}[out_ty]
    with np.errstate(invalid="ignore"):
        err = np.abs(got64 - ref)[~special] / (scale[~special] + 1e-30)
    assert err.size == 0 or err.max() <= rounding, err.max()


def _batched(name: str) -> str:
    heads, depth, ty, kind = BATCHED[name]
    a, b, out, dims, b_map = {
        "scores": (f"{heads}x?x{depth}x{ty}", f"{heads}x?x{depth}x{ty}", f"{heads}x?x?xf32",
                   "%m, %m", "(d0, d2, d3)"),
        "mix": (f"{heads}x?x?x{ty}", f"{heads}x?x{depth}x{ty}", f"{heads}x?x{depth}xf32", "%m",
                "(d0, d3, d2)"),
        "outer": (f"{heads}x?x{depth}x{ty}", f"{heads}x{depth}x?x{ty}", f"{heads}x?x?xf32",
                  "%m, %m", "(d0, d3, d2)")}[kind]
    mask = "" if kind != "scores" else f"""
  %e2 = tensor.empty({dims}) : tensor<{out}>
  %r = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>,
      affine_map<(d0, d1, d2) -> (d0, d1, d2)>],
      iterator_types = ["parallel", "parallel", "parallel"]}}
      ins(%acc : tensor<{out}>) outs(%e2 : tensor<{out}>) {{
  ^bb0(%v: f32, %o: f32):
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %later = arith.cmpi ugt, %j, %i : index
    %eighth = arith.constant 0.125 : f32
    %sv = arith.mulf %v, %eighth : f32
    %ninf = arith.constant 0xFF800000 : f32
    %y = arith.select %later, %ninf, %sv : f32
    linalg.yield %y : f32
  }} -> tensor<{out}>"""
    return f"""
func.func @{kind}(%a: tensor<{a}>, %b: tensor<{b}>) -> tensor<{out}> {{
  %c1 = arith.constant 1 : index
  %m = tensor.dim %a, %c1 : tensor<{a}>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty({dims}) : tensor<{out}>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<{out}>) -> tensor<{out}>
  %acc = linalg.generic {{indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>,
      affine_map<(d0, d1, d2, d3) -> {b_map}>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2)>],
      iterator_types = ["parallel", "parallel", "parallel", "reduction"]}}
      ins(%a, %b : tensor<{a}>, tensor<{b}>) outs(%f : tensor<{out}>) {{
  ^bb0(%x: {ty}, %w: {ty}, %o: f32):
    %xa = arith.extf %x : {ty} to f32
    %wa = arith.extf %w : {ty} to f32
    %p = arith.mulf %xa, %wa : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  }} -> tensor<{out}>{mask}
  return {"%r" if kind == "scores" else "%acc"} : tensor<{out}>
}}
"""


def function(name: str) -> str:
    return BATCHED[name][3] if name in BATCHED else "linear"


NAMES = (*CASES, *BATCHED)
ARCHS = ("sm_80", "sm_90a")  # mma.sync, wgmma


def module(name: str, arch: str) -> bytes:
    """The case's cuda module for ``arch``."""
    from pyree.compiler import CompileOptions, compile_str
    mode = CASES[name][5] if name in CASES else "strict"
    return compile_str(program(name), CompileOptions(target_backends=["cuda"], cuda_target=arch,
                                                     cuda_f32_matmul=mode))


def module_file(name: str, arch: str) -> str:
    return f"{name}.{arch}.vmfb"


if __name__ == "__main__":  # python3 tests/run_time_mma_cases.py OUT_DIR: the GPU tests' modules
    import sys
    from pathlib import Path
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for case in NAMES:
        for target in ARCHS:
            (out / module_file(case, target)).write_bytes(module(case, target))
