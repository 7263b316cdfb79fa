"""Sliding-window folds with large windows (depthwise convolutions and poolings of 5 x 5 taps and
more, which the GPU targets stage through shared memory: codegen/common/llvm_gpu/window.py),
shared by the CPU test (tests/e2e/test_large_windows.py) and the CUDA one
(tests/drivers/cuda/test_cuda_large_windows.py): each case is an MLIR program, its inputs and a
float64 numpy reference. Odd sizes, partial tiles, strides, dilations, padding through
tensor.pad (zeros, or -inf before a max pool), 1-D, 2-D and 3-D windows, channels first and
last, an epilogue, f16 and i32; NaN and infinities in the inputs."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from comparisons import same_special_values

NP = {"f32": np.float32, "f16": np.float16, "i32": np.int32}


@dataclass(frozen=True)
class Case:
    program: str
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]
    tol: float = 1e-5


def t(shape, dtype="f32") -> str:
    return f"tensor<{'x'.join(map(str, shape))}x{dtype}>"


def _attrs(strides, dilations) -> str:
    n = len(strides)
    return (f"{{dilations = dense<[{', '.join(map(str, dilations))}]> : tensor<{n}xi64>, "
            f"strides = dense<[{', '.join(map(str, strides))}]> : tensor<{n}xi64>}}")


def _windows(x, axes, kernel, strides, dilations, out):
    """Per kernel offset: the offset and the input elements every output reads there."""
    for offset in itertools.product(*map(range, kernel)):
        index = [slice(None)] * x.ndim
        for axis, k, s, d, n in zip(axes, offset, strides, dilations, out):
            index[axis] = slice(k * d, k * d + s * (n - 1) + 1, s)
        yield offset, x[tuple(index)]


def window_case(op: str, layout: str, x_shape, kernel, strides=None, dilations=None, pads=None,
                pad_value: float = 0.0, init: float = 0.0, dtype: str = "f32",
                bias_relu: bool = False, specials: bool = True, tol: float = 1e-5) -> Case:
    """``linalg.<op>`` over ``tensor.pad`` of x (``pads``: (low, high) per spatial dim). A
    depthwise op (``op`` starting so) reads a filter of the window's shape with the channels
    first (``C`` leads ``layout``'s spatial dims) or last, as linalg names it; a pool reads
    none. ``bias_relu``: ``max(r + b[c], 0)`` after it, in one linalg.generic."""
    ones = (1,) * len(kernel)
    strides, dilations = strides or ones, dilations or ones
    pads = pads or [(0, 0)] * len(kernel)
    axes = [i for i, c in enumerate(layout) if c in "DHW"]
    channel = layout.index("C")
    padded = list(x_shape)
    for axis, (lo, hi) in zip(axes, pads):
        padded[axis] += lo + hi
    out = list(padded)
    for axis, k, s, d in zip(axes, kernel, strides, dilations):
        out[axis] = (padded[axis] - d * (k - 1) - 1) // s + 1
    depthwise = op.startswith("depthwise")
    channels_first = layout.index("C") < axes[0]
    c = x_shape[channel]
    w_shape = ((c, *kernel) if channels_first else (*kernel, c)) if depthwise else tuple(kernel)
    rank = len(x_shape)
    lows = [0] * rank
    highs = [0] * rank
    for axis, (lo, hi) in zip(axes, pads):
        lows[axis], highs[axis] = lo, hi
    is_float = dtype != "i32"
    def constant(v) -> str:
        if not is_float:
            return str(int(v))
        if np.isfinite(v):
            return repr(float(v))
        return {("f16", True): "0xFC00", ("f16", False): "0x7C00", ("f32", True): "0xFF800000",
                ("f32", False): "0x7F800000"}[dtype, v < 0]

    xs, ps, os_ = t(x_shape, dtype), t(padded, dtype), t(out, dtype)
    index_args = ", ".join(f"%i{k}: index" for k in range(rank))
    w_arg = f", %w: {t(w_shape, dtype)}" if depthwise else ""
    b_arg = f", %b: {t((c,), dtype)}" if bias_relu else ""
    window = "%w" if depthwise else "%k"
    body = f"""
      %v = arith.constant {constant(pad_value)} : {dtype}
      %p = tensor.pad %x low[{', '.join(map(str, lows))}] high[{', '.join(map(str, highs))}] {{
      ^bb0({index_args}):
        tensor.yield %v : {dtype}
      }} : {xs} to {ps}
      %k = tensor.empty() : {t(kernel, dtype)}
      %c = arith.constant {constant(init)} : {dtype}
      %e = tensor.empty() : {os_}
      %acc = linalg.fill ins(%c : {dtype}) outs(%e : {os_}) -> {os_}
      %r = linalg.{op} {_attrs(strides, dilations)}
           ins(%p, {window} : {ps}, {t(w_shape if depthwise else kernel, dtype)}) outs(%acc : {os_}) -> {os_}"""
    result = "%r"
    if bias_relu:
        loops = ", ".join(f"d{k}" for k in range(rank))
        body += f"""
      %o = tensor.empty() : {os_}
      %y = linalg.generic {{indexing_maps = [affine_map<({loops}) -> ({loops})>,
             affine_map<({loops}) -> (d{channel})>, affine_map<({loops}) -> ({loops})>],
             iterator_types = [{', '.join(['"parallel"'] * rank)}]}}
           ins(%r, %b : {os_}, {t((c,), dtype)}) outs(%o : {os_}) {{
      ^bb0(%a: {dtype}, %bb: {dtype}, %_: {dtype}):
        %s = arith.addf %a, %bb : {dtype}
        %zero = arith.constant 0.0 : {dtype}
        %m = arith.maximumf %s, %zero : {dtype}
        linalg.yield %m : {dtype}
      }} -> {os_}"""
        result = "%y"
    program = f"""
    func.func @f(%x: {xs}{w_arg}{b_arg}) -> {os_} {{{body}
      return {result} : {os_}
    }}"""

    def inputs(rng: np.random.Generator) -> list[np.ndarray]:
        if is_float:
            x = rng.standard_normal(x_shape).astype(NP[dtype])
            if specials:
                flat = x.reshape(-1)
                picks = rng.choice(flat.size, size=6, replace=False)
                flat[picks] = [np.nan, np.inf, -np.inf, -0.0, np.nan, -np.inf]
        else:
            x = rng.integers(-1000, 1000, x_shape).astype(np.int32)
        args = [x]
        if depthwise:
            args.append(rng.standard_normal(w_shape).astype(NP[dtype]) if is_float
                        else rng.integers(-9, 10, w_shape).astype(np.int32))
        if bias_relu:
            args.append(rng.standard_normal((c,)).astype(NP[dtype]))
        return args

    def reference(x, w=None, b=None):
        wide = np.float64 if is_float else np.int64
        xp = np.pad(x.astype(wide), [(lows[k], highs[k]) for k in range(rank)],
                    constant_values=pad_value)
        acc = np.full(out, init, wide)
        with np.errstate(invalid="ignore"):
            for offset, patch in _windows(xp, axes, kernel, strides, dilations,
                                          [out[a] for a in axes]):
                if not depthwise:
                    acc = {"max": np.maximum, "min": np.minimum}.get(op.split("_")[-1], np.add)(
                        acc, patch)
                    continue
                tap = w[(slice(None), *offset)] if channels_first else w[(*offset, slice(None))]
                shape = [1] * rank
                shape[channel] = c
                acc = acc + patch * tap.astype(wide).reshape(shape)
            if bias_relu:
                shape = [1] * rank
                shape[channel] = c
                acc = np.maximum(acc + b.astype(wide).reshape(shape), 0)
        return acc

    return Case(program, inputs, reference, tol)


CASES = {
    # RepLKNet's 31 x 31 at its smallest stage, zero padding 15.
    "depthwise_31x31_nchw": window_case("depthwise_conv_2d_nchw_chw", "NCHW", (1, 16, 32, 32),
                                        (31, 31), pads=[(15, 15), (15, 15)]),
    # Odd everything: partial tiles along both windowed dims, asymmetric padding.
    "depthwise_13x11_nchw_odd": window_case("depthwise_conv_2d_nchw_chw", "NCHW", (2, 5, 23, 37),
                                            (13, 11), pads=[(6, 5), (5, 4)]),
    "depthwise_12x11_stride2_nchw": window_case("depthwise_conv_2d_nchw_chw", "NCHW",
                                                (1, 3, 40, 33), (12, 11), strides=(2, 2)),
    "depthwise_11x12_dilated_nchw": window_case("depthwise_conv_2d_nchw_chw", "NCHW",
                                                (1, 3, 41, 30), (11, 12), dilations=(2, 1),
                                                pads=[(3, 3), (0, 2)]),
    # Stride and dilation both 2: no stand-in loop values reach every input position, so the
    # reduction template keeps it.
    "depthwise_12x12_stride2_dilation2": window_case("depthwise_conv_2d_nchw_chw", "NCHW",
                                                     (1, 2, 34, 31), (12, 12), strides=(2, 2),
                                                     dilations=(2, 2)),
    "depthwise_12x12_nhwc": window_case("depthwise_conv_2d_nhwc_hwc", "NHWC", (2, 19, 21, 7),
                                        (12, 12), pads=[(6, 5), (5, 6)]),
    "depthwise_15x15_nchw_bias_relu": window_case("depthwise_conv_2d_nchw_chw", "NCHW",
                                                  (1, 6, 17, 45), (15, 15), pads=[(7, 7), (7, 7)],
                                                  bias_relu=True),
    "depthwise_1d_k131_ncw": window_case("depthwise_conv_1d_ncw_cw", "NCW", (2, 6, 300), (131,),
                                         pads=[(65, 65)]),
    "depthwise_1d_k129_nwc": window_case("depthwise_conv_1d_nwc_wc", "NWC", (1, 517, 9), (129,),
                                         strides=(3,), pads=[(64, 64)]),
    "depthwise_3d_5x6x5_ncdhw": window_case("depthwise_conv_3d_ncdhw_cdhw", "NCDHW",
                                            (1, 2, 9, 10, 11), (5, 6, 5), pads=[(2, 2)] * 3),
    "max_pool_12x11_nchw": window_case("pooling_nchw_max", "NCHW", (2, 3, 30, 29), (12, 11),
                                       pads=[(5, 6), (5, 5)], pad_value=-np.inf, init=-np.inf),
    "sum_pool_16x16_stride8_nchw": window_case("pooling_nchw_sum", "NCHW", (1, 3, 131, 67),
                                               (16, 16), strides=(8, 8)),
    "min_pool_12x12_nhwc": window_case("pooling_nhwc_min", "NHWC", (1, 25, 26, 3), (12, 12),
                                       init=np.inf),
    "sum_pool_12x12_i32_nhwc": window_case("pooling_nhwc_sum", "NHWC", (2, 20, 19, 3), (12, 12),
                                           dtype="i32"),
    # Medium windows (MobileNet's and EfficientNet's 5 x 5, stride 2; ConvNeXt's 7 x 7 channels
    # last; YOLO's 5 x 5 max pool).
    "depthwise_5x5_stride2_nchw": window_case("depthwise_conv_2d_nchw_chw", "NCHW", (2, 7, 29, 30),
                                              (5, 5), strides=(2, 2), pads=[(2, 2), (2, 2)]),
    "depthwise_7x7_nhwc": window_case("depthwise_conv_2d_nhwc_hwc", "NHWC", (1, 30, 33, 5), (7, 7),
                                      pads=[(3, 3), (3, 3)]),
    "max_pool_5x5_nchw": window_case("pooling_nchw_max", "NCHW", (1, 6, 20, 21), (5, 5),
                                     pads=[(2, 2), (2, 2)], pad_value=-np.inf, init=-np.inf),
    # One output per channel: the reduction template's block per output keeps it.
    "sum_pool_global_14x14": window_case("pooling_nchw_sum", "NCHW", (2, 8, 14, 14), (14, 14)),
    "depthwise_13x13_f16_nchw": window_case("depthwise_conv_2d_nchw_chw", "NCHW", (1, 4, 27, 30),
                                            (13, 13), pads=[(6, 6), (6, 6)], dtype="f16",
                                            specials=False, tol=2e-3),
}


def matches(got: np.ndarray, want: np.ndarray, tol: float) -> None:
    """NaN and infinities where the reference has them; the rest within ``tol`` of its norm
    (exact for integers)."""
    floats = same_special_values(got, want)
    if floats is None:
        return
    got, finite = floats
    error = np.linalg.norm(got[finite] - want[finite])
    assert error <= tol * max(np.linalg.norm(want[finite]), 1e-30), error
