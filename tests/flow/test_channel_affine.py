"""Inference batchnorm after a convolution folded into its weights and starting value
(flow/channel_affine.py): one kernel, equal to numpy's convolution then batchnorm on local-task,
special values included; a zero scale or a product with another reader is left alone."""

from __future__ import annotations

import numpy as np
import pytest
from pyree.compiler import CompileOptions, compile_str
from pyree.compiler.flow.channel_affine import fold_channel_affine
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Constant, Generic

C, F, H, W = 3, 5, 7, 9


def _dense(values: np.ndarray) -> str:
    if values.ndim == 1:
        return "[" + ", ".join(repr(float(v)) for v in values) + "]"
    return "[" + ", ".join(_dense(v) for v in values) + "]"


def _channel(name: str, op: str, src: str, dst: str, const: str, ty: str = "f32") -> str:
    t = f"tensor<1x{F}x{H}x{W}x{ty}>"
    maps = ("affine_map<(n, f, h, w) -> (n, f, h, w)>, affine_map<(n, f, h, w) -> (f)>, "
            "affine_map<(n, f, h, w) -> (n, f, h, w)>")
    return f"""  {dst} = linalg.generic {{indexing_maps = [{maps}], iterator_types = ["parallel",
      "parallel", "parallel", "parallel"]}} ins({src}, {const} : {t}, tensor<{F}x{ty}>) outs(%e : {t}) {{
  ^bb0(%a: {ty}, %b: {ty}, %o: {ty}):
    %r = arith.{op} %a, %b : {ty}
    linalg.yield %r : {ty}
  }} -> {t}"""


def batchnorm_mlir(weights, mean, invstd, gamma, beta, second_reader: bool = False,
                   ty: str = "f32") -> str:
    t = f"tensor<1x{F}x{H}x{W}x{ty}>"
    extra = ", %c" if second_reader else ""
    results = f"{t}, {t}" if second_reader else t
    lines = [f"func.func @f(%x: tensor<1x{C}x{H + 2}x{W + 2}x{ty}>) -> ({results}) {{",
             f"  %w = arith.constant dense<{_dense(weights)}> : tensor<{F}x{C}x3x3x{ty}>"]
    for name, v in (("mean", mean), ("invstd", invstd), ("gamma", gamma), ("beta", beta)):
        lines.append(f"  %{name} = arith.constant dense<{_dense(v)}> : tensor<{F}x{ty}>")
    lines += [f"  %z = arith.constant 0.0 : {ty}",
              f"  %e = tensor.empty() : {t}",
              f"  %i = linalg.fill ins(%z : {ty}) outs(%e : {t}) -> {t}",
              f"  %c = linalg.conv_2d_nchw_fchw ins(%x, %w : tensor<1x{C}x{H + 2}x{W + 2}x{ty}>, "
              f"tensor<{F}x{C}x3x3x{ty}>) outs(%i : {t}) -> {t}",
              _channel("sub", "subf", "%c", "%s", "%mean", ty),
              _channel("mul", "mulf", "%s", "%m", "%invstd", ty),
              _channel("mul", "mulf", "%m", "%g", "%gamma", ty),
              _channel("add", "addf", "%g", "%y", "%beta", ty),
              f"  return %y{extra} : {results}", "}"]
    return "\n".join(lines)


def reference(x, weights, mean, invstd, gamma, beta):
    x, w = x.astype(np.float64), weights.astype(np.float64)
    conv = np.zeros((1, F, H, W))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,fc->nfhw", x[:, :, i:i + H, j:j + W], w[:, :, i, j])
    per = (lambda v: v.astype(np.float64)[None, :, None, None])
    return conv, ((conv - per(mean)) * per(invstd)) * per(gamma) + per(beta)


def params(rng, gamma=None):
    return (rng.standard_normal((F, C, 3, 3)).astype(np.float32), rng.standard_normal(F).astype(np.float32),
            rng.uniform(0.5, 2, F).astype(np.float32),
            rng.standard_normal(F).astype(np.float32) if gamma is None else gamma,
            rng.standard_normal(F).astype(np.float32))


def test_batchnorm_folds_into_one_kernel_that_matches_numpy():
    rng = np.random.default_rng(3)
    p = params(rng)
    text = batchnorm_mlir(*p)
    folded = fold_channel_affine(import_mlir(text, "bn.mlir").functions[0])
    (conv,) = [op for op in folded.ops if isinstance(op, Generic)]
    assert conv.outputs[0].epilogue is None
    assert any(isinstance(op, Constant) and op.result.name.endswith("_init") for op in folded.ops)
    import pyree.runtime as rt
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    x = rng.standard_normal((1, C, H + 2, W + 2)).astype(np.float32)
    x[0, 0, 3, 4], x[0, 1, 6, 2], x[0, 2, 1, 1], x[0, 0, 8, 8] = np.nan, np.inf, -np.inf, -0.0
    got = module["f"](x).to_host().astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = reference(x, *p)[1]
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(got), test(want))
    finite = np.isfinite(want)
    assert finite.any()
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-5, atol=1e-5)


def test_f16_batchnorm_folds_in_f32_and_rounds_once():
    """f16 weights scaled by invstd then gamma round once (not after each scale), the starting
    value ((0 - mean) * invstd) * gamma + beta is computed in f32 and rounded once, and the
    convolution accumulates in f32 (flow/narrow_floats.py): the module's output is within an
    f16 rounding of float64 batchnorm(conv)."""
    rng = np.random.default_rng(5)
    p = [v.astype(np.float16) for v in params(rng)]
    text = batchnorm_mlir(*p, ty="f16")
    folded = fold_channel_affine(import_mlir(text, "bn.mlir").functions[0])
    constants = {op.result.name.rsplit("_", 1)[-1]: op.data for op in folded.ops
                 if isinstance(op, Constant) and op.data is not None and op.result.name.endswith(("_scaled", "_init"))}
    w, mean, invstd, gamma, beta = (v.astype(np.float64) for v in p)
    scale = (invstd * gamma)[:, None, None, None]
    np.testing.assert_array_equal(constants["scaled"], (w * scale).astype(np.float16))
    f32 = [v.astype(np.float32) for v in (mean, invstd, gamma, beta)]
    init = (((np.float32(0) - f32[0]) * f32[1]) * f32[2] + f32[3]).astype(np.float16)
    np.testing.assert_array_equal(constants["init"].reshape(-1), init)
    import pyree.runtime as rt
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    x = rng.standard_normal((1, C, H + 2, W + 2)).astype(np.float16)
    got = module["f"](x).to_host().astype(np.float64)
    want = reference(x, *p)[1]
    # the scaled weights and the init are rounded to f16 once each, the output once
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=4e-3 * np.abs(want).max())


@pytest.mark.parametrize("case", ["zero_gamma", "second_reader"])
def test_what_does_not_fold_keeps_its_ops_and_values(case):
    """A zero scale would turn an infinite product into 0 * inf = NaN inside the sum; a product
    read elsewhere must keep its own values."""
    rng = np.random.default_rng(4)
    gamma = rng.standard_normal(F).astype(np.float32)
    if case == "zero_gamma":
        gamma[2] = 0.0
    p = params(rng, gamma)
    text = batchnorm_mlir(*p, second_reader=case == "second_reader")
    folded = fold_channel_affine(import_mlir(text, "bn.mlir").functions[0])
    assert sum(isinstance(op, Generic) for op in folded.ops) > 1
    import pyree.runtime as rt
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    x = rng.standard_normal((1, C, H + 2, W + 2)).astype(np.float32)
    x[0, 1, 2, 3] = np.inf
    outs = module["f"](x)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    with np.errstate(invalid="ignore"):
        conv, want = reference(x, *p)
    for got, expected in zip(outs, (want, conv)):
        got = got.to_host().astype(np.float64)
        for test in (np.isnan, np.isposinf, np.isneginf):
            np.testing.assert_array_equal(test(got), test(expected))
        finite = np.isfinite(expected)
        np.testing.assert_allclose(got[finite], expected[finite], rtol=1e-5, atol=1e-5)


def test_a_shift_after_a_max_pool_stays_after_it():
    """max(window) + c is not max(window with c in its start): only sums take a shift."""
    text = f"""
func.func @f(%x: tensor<1x{F}x{H}x{W}xf32>) -> tensor<1x{F}x{H - 1}x{W - 1}xf32> {{
  %c = arith.constant dense<{_dense(np.arange(F, dtype=np.float32) - 2)}> : tensor<{F}xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %k = tensor.empty() : tensor<2x2xf32>
  %e = tensor.empty() : tensor<1x{F}x{H - 1}x{W - 1}xf32>
  %i = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x{F}x{H - 1}x{W - 1}xf32>) -> tensor<1x{F}x{H - 1}x{W - 1}xf32>
  %p = linalg.pooling_nchw_max {{dilations = dense<1> : vector<2xi64>, strides = dense<1> : vector<2xi64>}}
      ins(%x, %k : tensor<1x{F}x{H}x{W}xf32>, tensor<2x2xf32>) outs(%i : tensor<1x{F}x{H - 1}x{W - 1}xf32>)
      -> tensor<1x{F}x{H - 1}x{W - 1}xf32>
  %y = linalg.generic {{indexing_maps = [affine_map<(n, f, h, w) -> (n, f, h, w)>,
      affine_map<(n, f, h, w) -> (f)>, affine_map<(n, f, h, w) -> (n, f, h, w)>],
      iterator_types = ["parallel", "parallel", "parallel", "parallel"]}}
      ins(%p, %c : tensor<1x{F}x{H - 1}x{W - 1}xf32>, tensor<{F}xf32>) outs(%e : tensor<1x{F}x{H - 1}x{W - 1}xf32>) {{
  ^bb0(%a: f32, %b: f32, %o: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  }} -> tensor<1x{F}x{H - 1}x{W - 1}xf32>
  return %y : tensor<1x{F}x{H - 1}x{W - 1}xf32>
}}"""
    folded = fold_channel_affine(import_mlir(text, "pool.mlir").functions[0])
    assert sum(isinstance(op, Generic) for op in folded.ops) == 2
    import pyree.runtime as rt
    module = rt.load_module(compile_str(text, CompileOptions(target_backends=["llvm-cpu"])),
                            device="local-task")
    x = np.random.default_rng(6).standard_normal((1, F, H, W)).astype(np.float32)
    x[0, 1, 2, 2] = np.nan
    windows = np.stack([x[:, :, i:i + H - 1, j:j + W - 1] for i in (0, 1) for j in (0, 1)])
    want = windows.max(0) + (np.arange(F, dtype=np.float32) - 2)[None, :, None, None]
    got = module["f"](x).to_host()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got[~np.isnan(want)], want[~np.isnan(want)], rtol=1e-6)
