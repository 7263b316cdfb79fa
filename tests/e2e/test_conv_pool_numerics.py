"""Convolution, pooling, softmax and the matmul variants of CNN/transformer models, end to end:
compiled for llvm-cpu, run on local-task, compared with numpy float64 references on fresh random
inputs at odd shapes (batch 2, odd channels, non-square windows, strides 2 and 3, dilation 2,
padding through tensor.pad). Each op also compiles for cuda and vulkan-spirv (no GPU needed)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileOptions, compile_str

GPU_TARGETS = ["cuda", "vulkan-spirv"]


def t(shape, dtype="f32"):
    return f"tensor<{''.join(f'{d}x' for d in shape)}{dtype}>"


def run(mlir: str, *args):
    out = rt.load_module(compile_str(mlir), device="local-task")["f"](*args)
    if isinstance(out, tuple):
        return tuple(np.asarray(o.to_host()) for o in out)
    return np.asarray(out.to_host())


def assert_close(actual, expected, tol=1e-5):
    assert actual.shape == expected.shape
    assert np.linalg.norm(actual - expected) <= tol * max(np.linalg.norm(expected), 1e-30)


# ---- windowed ops ----------------------------------------------------------------------------

def out_size(size: int, k: int, s: int, d: int) -> int:
    return (size - d * (k - 1) - 1) // s + 1


def patches(x, axes, kernel, strides, dilations, out):
    """For each kernel offset: the offset, and the elements of ``x`` that the window at every
    output position reads there (``axes`` of ``x`` shrink to the output's spatial sizes)."""
    for offset in itertools.product(*map(range, kernel)):
        index = [slice(None)] * x.ndim
        for axis, k, s, d, n in zip(axes, offset, strides, dilations, out):
            index[axis] = slice(k * d, k * d + s * (n - 1) + 1, s)
        yield offset, x[tuple(index)]


@dataclass
class Conv:
    op: str
    x_layout: str  # letters; D/H/W are the spatial dims
    w_layout: str  # letters; d/h/w are the kernel dims
    out_layout: str

    def shapes(self, sizes: dict, kernel, strides, dilations):
        spatial = [c for c in self.x_layout if c in "DHW"]
        out = [out_size(sizes[c], k, s, d) for c, k, s, d in zip(spatial, kernel, strides, dilations)]
        kernel_dims, out_dims = dict(zip("dhw"[3 - len(kernel):], kernel)), dict(zip(spatial, out))
        x = tuple(sizes[c] for c in self.x_layout)
        w = tuple(kernel_dims.get(c, sizes.get(c)) for c in self.w_layout)
        o = tuple(out_dims.get(c, sizes.get(c)) for c in self.out_layout)
        return x, w, o

    def reference(self, x, w, init, kernel, strides, dilations):
        axes = [i for i, c in enumerate(self.x_layout) if c in "DHW"]
        out_spatial = [init.shape[i] for i, c in enumerate(self.out_layout) if c in "DHW"]
        k_axes = [i for i, c in enumerate(self.w_layout) if c in "dhw"]
        spec = (self.x_layout.lower() + "," + "".join(c for c in self.w_layout if c not in "dhw")
                .lower() + "->" + self.out_layout.lower())
        out = init.astype(np.float64)
        for offset, patch in patches(x.astype(np.float64), axes, kernel, strides, dilations,
                                     out_spatial):
            w_at = w.astype(np.float64)
            for axis, k in sorted(zip(k_axes, offset), reverse=True):
                w_at = np.take(w_at, k, axis=axis)
            out = out + np.einsum(spec, patch, w_at)
        return out


CONVS = [
    Conv("conv_2d_nchw_fchw", "NCHW", "FChw", "NFHW"),
    Conv("conv_2d_nhwc_hwcf", "NHWC", "hwCF", "NHWF"),
    Conv("conv_2d_nhwc_fhwc", "NHWC", "FhwC", "NHWF"),
    Conv("conv_2d_ngchw_fgchw", "NGCHW", "FGChw", "NGFHW"),
    Conv("conv_2d_ngchw_gfchw", "NGCHW", "GFChw", "NGFHW"),
    Conv("conv_2d_nhwgc_gfhwc", "NHWGC", "GFhwC", "NHWGF"),
    Conv("depthwise_conv_2d_nchw_chw", "NCHW", "Chw", "NCHW"),
    Conv("depthwise_conv_2d_nhwc_hwc", "NHWC", "hwC", "NHWC"),
    Conv("conv_1d_ncw_fcw", "NCW", "FCw", "NFW"),
    Conv("conv_1d_nwc_wcf", "NWC", "wCF", "NWF"),
    Conv("conv_3d_ncdhw_fcdhw", "NCDHW", "FCdhw", "NFDHW"),
    Conv("conv_3d_ndhwc_dhwcf", "NDHWC", "dhwCF", "NDHWF"),
    Conv("depthwise_conv_2d_nhwc_hwcm", "NHWC", "hwCM", "NHWCM"),
    Conv("depthwise_conv_1d_nwc_wc", "NWC", "wC", "NWC"),
    Conv("depthwise_conv_1d_ncw_cw", "NCW", "Cw", "NCW"),
    Conv("depthwise_conv_1d_nwc_wcm", "NWC", "wCM", "NWCM"),
    Conv("depthwise_conv_3d_ndhwc_dhwc", "NDHWC", "dhwC", "NDHWC"),
    Conv("depthwise_conv_3d_ncdhw_cdhw", "NCDHW", "Cdhw", "NCDHW"),
    Conv("depthwise_conv_3d_ndhwc_dhwcm", "NDHWC", "dhwCM", "NDHWCM"),
    Conv("conv_1d", "W", "w", "W"),
    Conv("conv_2d", "HW", "hw", "HW"),
    Conv("conv_3d", "DHW", "dhw", "DHW"),
]
SIZES = {"N": 2, "C": 3, "F": 5, "G": 2, "M": 2, "D": 7, "H": 13, "W": 16}
# (kernel, strides, dilations); None: the attribute is left out (it defaults to 1).
WINDOWS_2D = [((3, 2), (2, 3), (1, 2)), ((1, 3), None, (2, 1)), ((2, 3), (3, 1), None)]
WINDOWS_1D = [((3,), (2,), (2,)), ((4,), None, None)]
WINDOWS_3D = [((2, 3, 2), (2, 1, 3), (2, 2, 1)), ((3, 1, 2), None, None)]


def attrs(strides, dilations) -> str:
    parts = []
    for name, values, ty in (("strides", strides, "vector"), ("dilations", dilations, "tensor")):
        if values is not None:
            parts.append(f"{name} = dense<[{', '.join(map(str, values))}]> : {ty}<{len(values)}xi64>")
    return "{" + ", ".join(parts) + "} " if parts else ""


def windows_of(conv: Conv) -> list:
    spatial = sum(c in "DHW" for c in conv.x_layout)
    windows = {1: WINDOWS_1D, 2: WINDOWS_2D, 3: WINDOWS_3D}[spatial]
    if conv.op in ("conv_1d", "conv_2d", "conv_3d"):  # no strides or dilations to give
        return [(kernel, None, None) for kernel, _, _ in windows]
    return windows


def conv_cases():
    for conv in CONVS:
        windows = windows_of(conv)
        for i, window in enumerate(windows):
            yield pytest.param(conv, *window, id=f"{conv.op}-{i}")


def conv_mlir(conv: Conv, kernel, strides, dilations, dtype="f32", acc="f32"):
    x, w, o = conv.shapes(SIZES, kernel, strides or (1,) * len(kernel),
                          dilations or (1,) * len(kernel))
    return x, w, o, f"""
    func.func @f(%x: {t(x, dtype)}, %w: {t(w, dtype)}, %init: {t(o, acc)}) -> {t(o, acc)} {{
      %r = linalg.{conv.op} {attrs(strides, dilations)}ins(%x, %w : {t(x, dtype)}, {t(w, dtype)})
           outs(%init : {t(o, acc)}) -> {t(o, acc)}
      return %r : {t(o, acc)}
    }}"""


@pytest.mark.parametrize("conv, kernel, strides, dilations", list(conv_cases()))
def test_convolution(conv, kernel, strides, dilations):
    rng = np.random.default_rng()
    xs, ws, os_, mlir = conv_mlir(conv, kernel, strides, dilations)
    x, w, init = (rng.standard_normal(s).astype(np.float32) for s in (xs, ws, os_))
    ones = (1,) * len(kernel)
    expected = conv.reference(x, w, init, kernel, strides or ones, dilations or ones)
    assert_close(run(mlir, x, w, init), expected)


def test_convolution_casts_i8_operands_to_the_i32_accumulator():
    rng = np.random.default_rng()
    conv = CONVS[1]
    xs, ws, os_, mlir = conv_mlir(conv, (3, 2), (2, 1), (1, 2), dtype="i8", acc="i32")
    x, w = (rng.integers(-128, 128, s).astype(np.int8) for s in (xs, ws))
    init = rng.integers(-1000, 1000, os_).astype(np.int32)
    expected = conv.reference(x, w, init, (3, 2), (2, 1), (1, 2))
    np.testing.assert_array_equal(run(mlir, x, w, init), expected.astype(np.int32))


def test_padded_strided_conv_as_pytorch_exports_it():
    """tensor.pad, then a strided conv accumulating into a broadcast bias."""
    rng = np.random.default_rng()
    mlir = f"""
    func.func @f(%x: {t((2, 3, 13, 10))}, %w: {t((5, 3, 3, 3))}, %b: {t((5,))}) -> {t((2, 5, 7, 5))} {{
      %zero = arith.constant 0.0 : f32
      %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {{
      ^bb0(%i: index, %j: index, %k: index, %l: index):
        tensor.yield %zero : f32
      }} : {t((2, 3, 13, 10))} to {t((2, 3, 15, 12))}
      %e = tensor.empty() : {t((2, 5, 7, 5))}
      %bias = linalg.broadcast ins(%b : {t((5,))}) outs(%e : {t((2, 5, 7, 5))}) dimensions = [0, 2, 3]
      %r = linalg.conv_2d_nchw_fchw {{dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}}
           ins(%p, %w : {t((2, 3, 15, 12))}, {t((5, 3, 3, 3))}) outs(%bias : {t((2, 5, 7, 5))}) -> {t((2, 5, 7, 5))}
      return %r : {t((2, 5, 7, 5))}
    }}"""
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3, 13, 10), (5, 3, 3, 3), (5,)))
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    init = np.broadcast_to(b[None, :, None, None], (2, 5, 7, 5))
    expected = CONVS[0].reference(padded, w, init, (3, 3), (2, 2), (1, 1))
    assert_close(run(mlir, x, w, b), expected)


def padded_window_mlir(op: str) -> str:
    """tensor.pad (zero, or -inf before a max pool: what PyTorch exports), then a strided 3x3
    window op that is no contraction: its reads of the pad become bounds-checked loads of x."""
    pad, init = ("0xFF800000", "0xFF800000") if "max" in op else ("0.0", "0.0")
    window, w_arg = ((", %w", f", %w: {t((5, 3, 3))}") if "depthwise" in op
                     else (", %k", ""))
    w_type = t((5, 3, 3)) if "depthwise" in op else t((3, 3))
    return f"""
    func.func @f(%x: {t((2, 5, 13, 10))}{w_arg}) -> {t((2, 5, 7, 5))} {{
      %v = arith.constant {pad} : f32
      %p = tensor.pad %x low[0, 0, 1, 1] high[0, 0, 1, 1] {{
      ^bb0(%i: index, %j: index, %a: index, %b: index):
        tensor.yield %v : f32
      }} : {t((2, 5, 13, 10))} to {t((2, 5, 15, 12))}
      %k = tensor.empty() : {t((3, 3))}
      %c = arith.constant {init} : f32
      %e = tensor.empty() : {t((2, 5, 7, 5))}
      %acc = linalg.fill ins(%c : f32) outs(%e : {t((2, 5, 7, 5))}) -> {t((2, 5, 7, 5))}
      %r = linalg.{op} {{dilations = dense<1> : vector<2xi64>, strides = dense<2> : vector<2xi64>}}
           ins(%p{window} : {t((2, 5, 15, 12))}, {w_type}) outs(%acc : {t((2, 5, 7, 5))}) -> {t((2, 5, 7, 5))}
      return %r : {t((2, 5, 7, 5))}
    }}"""


@pytest.mark.parametrize("op", ["depthwise_conv_2d_nchw_chw", "pooling_nchw_max"])
def test_padded_windows_read_the_input_in_place(op):
    """The pad is no dispatch of its own (flow/regions.py: a guarded load inlines into a window
    that is not a contraction), and NaN, +/-inf and -0 land where numpy puts them."""
    from pyree.compiler.flow.passes import form_dispatch_regions
    from pyree.compiler.input import import_mlir
    from pyree.compiler.tensor_program import Generic

    mlir = padded_window_mlir(op)
    function = form_dispatch_regions(import_mlir(mlir, "t.mlir").functions[0])
    assert sum(isinstance(o, Generic) for o in function.ops) == 1
    rng = np.random.default_rng()
    x = rng.standard_normal((2, 5, 13, 10)).astype(np.float32)
    x[0, 0, 0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    x[1, 4, 12, 9] = -np.inf
    if "max" in op:
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        expected = pool_reference("pooling_nchw_max", padded, (2, 5, 7, 5), (3, 3), (2, 2), (1, 1))
        got = run(mlir, x)
    else:
        w = rng.standard_normal((5, 3, 3)).astype(np.float32)
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        with np.errstate(invalid="ignore"):
            expected = CONVS[6].reference(padded, w, np.zeros((2, 5, 7, 5)), (3, 3), (2, 2), (1, 1))
        got = run(mlir, x, w)
    for test in (np.isnan, np.isposinf, np.isneginf):
        np.testing.assert_array_equal(test(got), test(expected))
    finite = np.isfinite(expected)
    assert_close(got[finite], expected[finite])


POOLS = {  # op -> (layout, init, numpy combine)
    "pooling_nchw_max": ("NCHW", "0xFF800000", np.maximum),
    "pooling_nchw_sum": ("NCHW", "0.0", np.add),
    "pooling_nhwc_max": ("NHWC", "0xFF800000", np.maximum),
    "pooling_nhwc_min": ("NHWC", "0x7F800000", np.minimum),
    "pooling_nhwc_sum": ("NHWC", "0.0", np.add),
    "pooling_nwc_sum": ("NWC", "0.0", np.add),
    "pooling_nwc_max": ("NWC", "0xFF800000", np.maximum),
    "pooling_nwc_min": ("NWC", "0x7F800000", np.minimum),
    "pooling_ncw_max": ("NCW", "0xFF800000", np.maximum),
    "pooling_ndhwc_max": ("NDHWC", "0xFF800000", np.maximum),
    "pooling_ndhwc_min": ("NDHWC", "0x7F800000", np.minimum),
}


def pool_mlir(op: str, kernel, strides, dilations, dtype="f32", acc="f32", init=None):
    layout, default_init, _ = POOLS.get(op, (None, None, None))
    layout = layout or ("NWC" if "_nwc_" in op else "NHWC")
    conv = Conv(op, layout, "dhw"[3 - len(kernel):], layout)
    ones = (1,) * len(kernel)
    xs, ks, os_ = conv.shapes(SIZES, kernel, strides or ones, dilations or ones)
    return xs, os_, f"""
    func.func @f(%x: {t(xs, dtype)}) -> {t(os_, acc)} {{
      %init = arith.constant {init or default_init} : {acc}
      %e = tensor.empty() : {t(os_, acc)}
      %acc = linalg.fill ins(%init : {acc}) outs(%e : {t(os_, acc)}) -> {t(os_, acc)}
      %window = tensor.empty() : {t(ks)}
      %r = linalg.{op} {attrs(strides, dilations)}ins(%x, %window : {t(xs, dtype)}, {t(ks)})
           outs(%acc : {t(os_, acc)}) -> {t(os_, acc)}
      return %r : {t(os_, acc)}
    }}"""


def pool_reference(op, x, out_shape, kernel, strides, dilations):
    layout, init, combine = POOLS[op]
    axes = [i for i, c in enumerate(layout) if c in "DHW"]
    out = np.full(out_shape, {"0xFF800000": -np.inf, "0x7F800000": np.inf}.get(init, 0.0))
    for _, patch in patches(x.astype(np.float64), axes, kernel, strides, dilations,
                            [out_shape[a] for a in axes]):
        out = combine(out, patch)
    return out


def pool_cases():
    for op, (layout, _, _) in sorted(POOLS.items()):
        spatial = sum(c in "DHW" for c in layout)
        for i, window in enumerate({1: WINDOWS_1D, 2: WINDOWS_2D, 3: WINDOWS_3D}[spatial]):
            yield pytest.param(op, *window, id=f"{op}-{i}")


@pytest.mark.parametrize("op, kernel, strides, dilations", list(pool_cases()))
def test_pooling(op, kernel, strides, dilations):
    rng = np.random.default_rng()
    xs, os_, mlir = pool_mlir(op, kernel, strides, dilations)
    x = rng.standard_normal(xs).astype(np.float32)
    ones = (1,) * len(kernel)
    expected = pool_reference(op, x, os_, kernel, strides or ones, dilations or ones)
    assert_close(run(mlir, x), expected)


@pytest.mark.parametrize("op", ["pooling_nhwc_max_unsigned", "pooling_nhwc_min_unsigned",
                                "pooling_nwc_max_unsigned", "pooling_nwc_min_unsigned"])
def test_unsigned_pooling_reads_bytes_as_unsigned(op):
    """OpDSL's ``*_unsigned`` pools: i8 read as 0..255 (extui into the i32 accumulator),
    compared unsigned; min starts from the largest unsigned value (-1)."""
    rng = np.random.default_rng()
    kernel = (3, 2) if "nhwc" in op else (3,)
    init = "0" if "max" in op else "-1"
    xs, os_, mlir = pool_mlir(op, kernel, None, None, dtype="i8", acc="i32", init=init)
    x = rng.integers(-128, 128, xs).astype(np.int8)
    axes = list(range(1, 1 + len(kernel)))
    combine = np.maximum if "max" in op else np.minimum
    expected = np.full(os_, 0 if "max" in op else 255, np.int64)
    for _, patch in patches(x.view(np.uint8).astype(np.int64), axes, kernel, (1,) * len(kernel),
                            (1,) * len(kernel), [os_[a] for a in axes]):
        expected = combine(expected, patch)
    np.testing.assert_array_equal(run(mlir, x), expected.astype(np.int32))


@pytest.mark.parametrize("op, x_shape, axes, kernel, strides, dilations", [
    ("pooling_ncw_sum", (2, 3, 17), [2], (3,), (2,), (2,)),
    ("pooling_ncw_sum", (2, 3, 17), [2], (4,), None, None),
    ("pooling_ndhwc_sum", (2, 7, 9, 8, 3), [1, 2, 3], (2, 3, 2), (2, 1, 3), (1, 2, 1)),
])
def test_sum_pooling_in_1d_and_3d(op, x_shape, axes, kernel, strides, dilations):
    """The 1-D and 3-D sum pools torch-mlir emits for ONNX's AveragePool (NCW, and NCDHW
    transposed to NDHWC)."""
    rng = np.random.default_rng()
    ones = (1,) * len(kernel)
    out_shape = list(x_shape)
    for axis, k, s, d in zip(axes, kernel, strides or ones, dilations or ones):
        out_shape[axis] = out_size(x_shape[axis], k, s, d)
    xs, os_ = tuple(x_shape), tuple(out_shape)
    mlir = f"""
    func.func @f(%x: {t(xs)}) -> {t(os_)} {{
      %zero = arith.constant 0.0 : f32
      %e = tensor.empty() : {t(os_)}
      %acc = linalg.fill ins(%zero : f32) outs(%e : {t(os_)}) -> {t(os_)}
      %window = tensor.empty() : {t(kernel)}
      %r = linalg.{op} {attrs(strides, dilations)}ins(%x, %window : {t(xs)}, {t(kernel)})
           outs(%acc : {t(os_)}) -> {t(os_)}
      return %r : {t(os_)}
    }}"""
    x = rng.standard_normal(xs).astype(np.float32)
    expected = np.zeros(os_)
    for _, patch in patches(x.astype(np.float64), axes, kernel, strides or ones,
                            dilations or ones, [os_[a] for a in axes]):
        expected = expected + patch
    assert_close(run(mlir, x), expected)


@pytest.mark.parametrize("op", ["pooling_nchw_max", "pooling_nhwc_max", "pooling_nhwc_min"])
def test_max_and_min_pooling_propagate_nan_and_keep_infinities(op):
    """arith.maximumf/minimumf: a NaN in the window gives NaN; -inf and +inf are values."""
    rng = np.random.default_rng()
    xs, os_, mlir = pool_mlir(op, (3, 2), (2, 1), None)
    x = rng.standard_normal(xs).astype(np.float32)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=3 * 12, replace=False)
    flat[picks[:12]], flat[picks[12:24]], flat[picks[24:]] = np.nan, -np.inf, np.inf
    expected = pool_reference(op, x, os_, (3, 2), (2, 1), (1, 1))
    out = run(mlir, x)
    assert np.isnan(expected).any()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    np.testing.assert_array_equal(out[~np.isnan(out)], expected[~np.isnan(expected)])


# ---- softmax ---------------------------------------------------------------------------------

def softmax_mlir(shape, dim):
    return f"""
    func.func @f(%x: {t(shape)}) -> {t(shape)} {{
      %e = tensor.empty() : {t(shape)}
      %r = linalg.softmax dimension({dim}) ins(%x : {t(shape)}) outs(%e : {t(shape)}) -> {t(shape)}
      return %r : {t(shape)}
    }}"""


def softmax_reference(x, dim):
    """MLIR's decomposition in float64: max with maxnumf from -FLT_MAX, exp, sum, divide."""
    x = x.astype(np.float64)
    with np.errstate(all="ignore"):
        top = np.fmax(np.nanmax(np.where(np.isnan(x), -np.inf, x), axis=dim, keepdims=True),
                      -np.finfo(np.float32).max)
        e = np.exp(x - top)
        return e / e.sum(axis=dim, keepdims=True)


@pytest.mark.parametrize("shape, dim", [((2, 5, 37), 2), ((2, 5, 37), 1), ((7, 3), 0), ((129,), 0)])
def test_softmax(shape, dim):
    rng = np.random.default_rng()
    x = (rng.standard_normal(shape) * 20).astype(np.float32)  # large: exp overflows unless stable
    assert_close(run(softmax_mlir(shape, dim), x), softmax_reference(x, dim))


def test_softmax_rows_with_nan_and_infinities_behave_as_mlir_decomposes_them():
    rng = np.random.default_rng()
    x = rng.standard_normal((6, 9)).astype(np.float32)
    x[0, 3] = np.nan           # a NaN row: all NaN
    x[1, :] = -np.inf          # all -inf: 0 / 0, all NaN
    x[2, 4] = np.inf           # +inf: inf - inf, all NaN
    x[3, [1, 5]] = -np.inf     # -inf beside finite values: exactly 0 there
    out, expected = run(softmax_mlir((6, 9), 1), x), softmax_reference(x, 1)
    np.testing.assert_array_equal(np.isnan(out), np.isnan(expected))
    assert np.isnan(out[:3]).all() and (out[3, [1, 5]] == 0).all()
    assert_close(out[3:], expected[3:])


# ---- matmul variants -------------------------------------------------------------------------

MATMULS = {  # op -> (lhs, rhs, out shapes over b=3, m=5, n=7, k=11; einsum)
    "matmul_transpose_a": ("km", "kn", "mn"),
    "matmul_transpose_b": ("mk", "nk", "mn"),
    "batch_matmul_transpose_a": ("bkm", "bkn", "bmn"),
    "batch_matmul_transpose_b": ("bmk", "bnk", "bmn"),
    "batch_reduce_matmul": ("bmk", "bkn", "mn"),
    "batch_vecmat": ("bk", "bkn", "bn"),
    "mmt4d": ("MKmk", "NKnk", "MNmn"),  # tiles: outer M, N, K, inner m, n, k
    "batch_mmt4d": ("bMKmk", "bNKnk", "bMNmn"),
}
DIMS = {"b": 3, "m": 5, "n": 7, "k": 11, "M": 2, "N": 3, "K": 4}


def matmul_mlir(op: str, lhs: str, rhs: str, out: str, maps: str = "") -> str:
    a, b, c = (t([DIMS[d] for d in s]) for s in (lhs, rhs, out))
    return f"""
    func.func @f(%a: {a}, %b: {b}, %c: {c}) -> {c} {{
      %r = linalg.{op} {maps}ins(%a, %b : {a}, {b}) outs(%c : {c}) -> {c}
      return %r : {c}
    }}"""


def matmul_inputs(lhs, rhs, out):
    rng = np.random.default_rng()
    return [rng.standard_normal([DIMS[d] for d in s]).astype(np.float32) for s in (lhs, rhs, out)]


@pytest.mark.parametrize("op", sorted(MATMULS))
def test_matmul_variants(op):
    lhs, rhs, out = MATMULS[op]
    a, b, c = matmul_inputs(lhs, rhs, out)
    expected = c + np.einsum(f"{lhs},{rhs}->{out}", a.astype(np.float64), b)
    assert_close(run(matmul_mlir(op, lhs, rhs, out), a, b, c), expected)


def test_batch_matmul_with_explicit_indexing_maps():
    """MLIR's form for a transposed (and here batch-broadcast) operand."""
    maps = ("indexing_maps = [affine_map<(b, m, n, k) -> (b, k, m)>, "
            "affine_map<(b, m, n, k) -> (n, k)>, affine_map<(b, m, n, k) -> (b, m, n)>] ")
    a, b, c = matmul_inputs("bkm", "nk", "bmn")
    expected = c + np.einsum("bkm,nk->bmn", a.astype(np.float64), b)
    assert_close(run(matmul_mlir("batch_matmul", "bkm", "nk", "bmn", maps), a, b, c), expected)


@pytest.mark.parametrize("lhs, rhs, out", [("mk", "kn", "mn"), ("km", "nk", "nm"),
                                           ("bmk", "kn", "bnm"), ("mk", "k", "m")])
def test_contract(lhs, rhs, out):
    """linalg.contract: the maps say everything; a loop its output leaves out is summed."""
    letters = sorted(set(lhs + rhs + out), key=(lhs + rhs + out).index)
    dims = ", ".join(letters)
    maps = "indexing_maps = [" + ", ".join(
        f"affine_map<({dims}) -> ({', '.join(s)})>" for s in (lhs, rhs, out)) + "] "
    a, b, c = matmul_inputs(lhs, rhs, out)
    expected = c + np.einsum(f"{lhs},{rhs}->{out}", a.astype(np.float64), b)
    assert_close(run(matmul_mlir("contract", lhs, rhs, out, maps), a, b, c), expected)


def test_quantized_matmuls_subtract_their_zero_points():
    rng = np.random.default_rng()
    for op, (lhs, rhs, out) in [("quantized_matmul", ("mk", "kn", "mn")),
                                ("quantized_batch_matmul", ("bmk", "bkn", "bmn"))]:
        a_t, b_t, c_t = (t([DIMS[d] for d in s], ty) for s, ty in
                         ((lhs, "i8"), (rhs, "i8"), (out, "i32")))
        mlir = f"""
        func.func @f(%a: {a_t}, %b: {b_t}, %az: i32, %bz: i32, %c: {c_t}) -> {c_t} {{
          %r = linalg.{op} ins(%a, %b, %az, %bz : {a_t}, {b_t}, i32, i32) outs(%c : {c_t}) -> {c_t}
          return %r : {c_t}
        }}"""
        a, b = (rng.integers(-128, 128, [DIMS[d] for d in s]).astype(np.int8) for s in (lhs, rhs))
        c = rng.integers(-1000, 1000, [DIMS[d] for d in out]).astype(np.int32)
        az, bz = np.int32(3), np.int32(-7)
        expected = c + np.einsum(f"{lhs},{rhs}->{out}", a.astype(np.int64) - 3, b.astype(np.int64) + 7)
        np.testing.assert_array_equal(run(mlir, a, b, az, bz, c), expected.astype(np.int32), op)


@pytest.mark.parametrize("conv", [c for c in CONVS if c.op in (
    "conv_2d_nchw_fchw", "conv_2d_nhwc_hwcf", "conv_2d_nhwc_fhwc", "depthwise_conv_2d_nhwc_hwc",
    "depthwise_conv_2d_nhwc_hwcm")], ids=lambda c: c.op)
def test_quantized_convolutions_subtract_their_zero_points(conv):
    rng = np.random.default_rng()
    kernel, strides, dilations = (3, 2), (2, 1), (1, 2)
    xs, ws, os_, _ = conv_mlir(conv, kernel, strides, dilations)
    x_t, w_t, o_t = t(xs, "i8"), t(ws, "i8"), t(os_, "i32")
    mlir = f"""
    func.func @f(%x: {x_t}, %w: {w_t}, %xz: i32, %wz: i32, %init: {o_t}) -> {o_t} {{
      %r = linalg.{conv.op}_q {attrs(strides, dilations)}ins(%x, %w, %xz, %wz : {x_t}, {w_t}, i32, i32)
           outs(%init : {o_t}) -> {o_t}
      return %r : {o_t}
    }}"""
    x, w = (rng.integers(-128, 128, s).astype(np.int8) for s in (xs, ws))
    init = rng.integers(-1000, 1000, os_).astype(np.int32)
    expected = conv.reference(x.astype(np.int64) + 5, w.astype(np.int64) - 2, init, kernel,
                              strides, dilations)
    got = run(mlir, x, w, np.int32(-5), np.int32(2), init)
    np.testing.assert_array_equal(got, np.round(expected).astype(np.int32))


# ---- calls and extracts ----------------------------------------------------------------------

CALLS = f"""
func.func private @scale(%x: {t((5, 7))}, %s: f32) -> {t((5, 7))} {{
  %e = tensor.empty() : {t((5, 7))}
  %r = linalg.generic {{indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}} ins(%x : {t((5, 7))}) outs(%e : {t((5, 7))}) {{
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %s : f32
    linalg.yield %m : f32
  }} -> {t((5, 7))}
  return %r : {t((5, 7))}
}}
func.func private @affine(%x: {t((5, 7))}) -> ({t((5, 7))}, {t((5, 7))}) {{
  %two = arith.constant 2.0 : f32
  %y = func.call @scale(%x, %two) : ({t((5, 7))}, f32) -> {t((5, 7))}
  %z = arith.addf %y, %x : {t((5, 7))}
  return %y, %z : {t((5, 7))}, {t((5, 7))}
}}
func.func @f(%x: {t((5, 7))}) -> ({t((5, 7))}, {t((5, 7))}) {{
  %y, %z = func.call @affine(%x) : ({t((5, 7))}) -> ({t((5, 7))}, {t((5, 7))})
  %w, %v = func.call @affine(%z) : ({t((5, 7))}) -> ({t((5, 7))}, {t((5, 7))})
  return %y, %v : {t((5, 7))}, {t((5, 7))}
}}"""


def test_private_functions_are_inlined_at_each_call():
    x = np.random.default_rng().standard_normal((5, 7)).astype(np.float32)
    y, v = run(CALLS, x)
    assert_close(y, 2.0 * x.astype(np.float64))
    assert_close(v, 9.0 * x.astype(np.float64))


EXTRACT = f"""
func.func @f(%t: {t((6, 20))}) -> {t((2, 5, 4))} {{
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : i64
  %c4 = arith.constant 4 : i64
  %e = tensor.empty() : {t((2, 5, 4))}
  %r = linalg.generic {{indexing_maps = [affine_map<(b, i, j) -> (b, i, j)>],
                       iterator_types = ["parallel", "parallel", "parallel"]}} outs(%e : {t((2, 5, 4))}) {{
  ^bb0(%o: f32):
    %b = linalg.index 0 : index
    %i = linalg.index 1 : index
    %j = linalg.index 2 : index
    %row = arith.addi %b, %c1 : index
    %ji = arith.index_cast %j : index to i64
    %j3 = arith.muli %ji, %c3 : i64
    %col64 = arith.addi %j3, %c4 : i64
    %col0 = arith.index_cast %col64 : i64 to index
    %col = arith.subi %col0, %i : index
    %v = tensor.extract %t[%row, %col] : {t((6, 20))}
    linalg.yield %v : f32
  }} -> {t((2, 5, 4))}
  return %r : {t((2, 5, 4))}
}}"""


def test_extract_with_affine_indices_in_a_generic_body():
    x = np.random.default_rng().standard_normal((6, 20)).astype(np.float32)
    expected = np.array([[[x[b + 1, 3 * j + 4 - i] for j in range(4)] for i in range(5)]
                         for b in range(2)])
    np.testing.assert_array_equal(run(EXTRACT, x), expected)


# ---- every op compiles for the GPU targets ---------------------------------------------------

def gpu_cases():
    for conv in CONVS:
        yield conv.op, conv_mlir(conv, *windows_of(conv)[0])[3]
    for param in pool_cases():
        if param.id.endswith("-0"):
            yield param.values[0], pool_mlir(*param.values)[2]
    for op, (lhs, rhs, out) in sorted(MATMULS.items()):
        yield op, matmul_mlir(op, lhs, rhs, out)
    yield "softmax", softmax_mlir((2, 5, 37), 2)
    yield "call", CALLS
    yield "extract", EXTRACT


@pytest.mark.parametrize("target", GPU_TARGETS)
@pytest.mark.parametrize("name, mlir", list(gpu_cases()), ids=[n for n, _ in gpu_cases()])
def test_compiles_for_gpu_targets(name, mlir, target):
    assert compile_str(mlir, CompileOptions(target_backends=[target]))
