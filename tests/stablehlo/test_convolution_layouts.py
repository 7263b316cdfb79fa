"""stablehlo.convolution in every layout its dimension numbers can name, in both spellings
(JAX's ``[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]`` and IREE's and XLA's ``raw
input_batch_dimension = ...``), with padding, strides, both dilations and feature groups,
against a float64 numpy convolution on random inputs: the forms of IREE's
tests/e2e/stablehlo_ops/convolution.mlir."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler import CompileError, compile_str

# (name, lhs layout, rhs layout, out layout): each a string of dim names, as in the compact form
LAYOUTS = [
    ("nhwc_hwio", "b01f", "01io", "b01f"),
    ("nchw_oihw", "bf01", "oi01", "bf01"),
    ("batch_and_feature_swapped", "f01b", "01io", "b01f"),
    ("input_spatial_reordered", "b10f", "01io", "b01f"),
    ("kernel_reordered", "b01f", "o0i1", "b01f"),
    ("output_reordered", "f1b0", "01io", "f1b0"),
]


def conv_reference(x, w, layouts, strides, padding, lhs_dil, rhs_dil, groups):
    """float64 convolution: operands moved to (batch, feature, 0, 1) and (out, in, 0, 1)."""
    lhs, rhs, out = layouts
    x = np.transpose(x, [lhs.index(c) for c in "bf01"]).astype(np.float64)
    w = np.transpose(w, [rhs.index(c) for c in "oi01"]).astype(np.float64)
    n, c, *size = x.shape
    dilated = np.zeros((n, c, *[(s - 1) * d + 1 for s, d in zip(size, lhs_dil)]))
    dilated[:, :, ::lhs_dil[0], ::lhs_dil[1]] = x
    x = np.pad(dilated, [(0, 0), (0, 0), *padding])
    o, ci, kh, kw = w.shape
    oh = (x.shape[2] - (kh - 1) * rhs_dil[0] - 1) // strides[0] + 1
    ow = (x.shape[3] - (kw - 1) * rhs_dil[1] - 1) // strides[1] + 1
    y = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for i in range(kh):
        for j in range(kw):
            patch = x[:, :, i * rhs_dil[0]:, j * rhs_dil[1]:][
                :, :, :(oh - 1) * strides[0] + 1:strides[0], :(ow - 1) * strides[1] + 1:strides[1]]
            for g in range(groups):
                y[:, g * per_group:(g + 1) * per_group] += np.einsum(
                    "nchw,oc->nohw", patch[:, g * ci:(g + 1) * ci],
                    w[g * per_group:(g + 1) * per_group, :, i, j])
    return np.transpose(y, ["bf01".index(ch) for ch in out])


def _dims_text(layouts, raw: bool) -> str:
    lhs, rhs, out = layouts
    if not raw:
        return "#stablehlo.conv<{}>".format("x".join(f"[{', '.join(layout)}]" for layout in (lhs, rhs))
                                            + f"->[{', '.join(out)}]")
    fields = []
    for prefix, layout, a, b in (("input", lhs, ("batch", "b"), ("feature", "f")),
                                 ("kernel", rhs, ("input_feature", "i"), ("output_feature", "o")),
                                 ("output", out, ("batch", "b"), ("feature", "f"))):
        fields += [f"{prefix}_{a[0]}_dimension = {layout.index(a[1])}",
                   f"{prefix}_{b[0]}_dimension = {layout.index(b[1])}",
                   f"{prefix}_spatial_dimensions = [{layout.index('0')}, {layout.index('1')}]"]
    return "#stablehlo.conv<raw " + ", ".join(fields) + ">"


def _shape(layout: str, sizes: dict) -> tuple[int, ...]:
    return tuple(sizes[c] for c in layout)


def _module(layouts, x_shape, w_shape, y_shape, strides, padding, lhs_dil, rhs_dil, groups,
            raw) -> str:
    t = lambda shape: f"tensor<{'x'.join(map(str, shape))}xf32>"  # noqa: E731
    pad = ", ".join(f"[{lo}, {hi}]" for lo, hi in padding)
    return f"""func.func @f(%x: {t(x_shape)}, %w: {t(w_shape)}) -> {t(y_shape)} {{
  %y = "stablehlo.convolution"(%x, %w) {{
    batch_group_count = 1 : i64, feature_group_count = {groups} : i64,
    dimension_numbers = {_dims_text(layouts, raw)},
    padding = dense<[{pad}]> : tensor<2x2xi64>,
    window_strides = array<i64: {strides[0]}, {strides[1]}>,
    lhs_dilation = array<i64: {lhs_dil[0]}, {lhs_dil[1]}>,
    rhs_dilation = array<i64: {rhs_dil[0]}, {rhs_dil[1]}>}} : ({t(x_shape)}, {t(w_shape)}) -> {t(y_shape)}
  return %y : {t(y_shape)}
}}"""


# (strides, padding, lhs dilation, rhs dilation, groups, in channels, out channels)
WINDOWS = [
    ((1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), 1, 3, 5),
    ((2, 1), ((1, 2), (0, 1)), (1, 1), (2, 1), 1, 3, 4),
    ((1, 2), ((2, 0), (1, 1)), (2, 1), (1, 2), 1, 2, 3),
    ((1, 1), ((1, 1), (1, 1)), (1, 1), (1, 1), 2, 4, 6),  # groups, 3 outputs per group
    ((2, 2), ((0, 1), (1, 0)), (1, 1), (1, 1), 3, 3, 3),  # depthwise
]


# Every layout in both spellings, each with two of the windows: every window meets both.
CASES = [(layout, WINDOWS[(k + shift) % len(WINDOWS)], raw)
         for k, layout in enumerate(LAYOUTS) for shift, raw in ((0, True), (2, False))]


@pytest.mark.parametrize("layout, window, raw", CASES, ids=[
    f"{layout[0]}-{'raw' if raw else 'compact'}-window{WINDOWS.index(window)}"
    for layout, window, raw in CASES])
def test_convolution_matches_numpy(layout, window, raw):
    strides, padding, lhs_dil, rhs_dil, groups, cin, cout = window
    _, lhs, rhs, out = layout
    layouts = (lhs, rhs, out)
    x_sizes = {"b": 2, "f": cin, "0": 7, "1": 6}
    w_sizes = {"o": cout, "i": cin // groups, "0": 3, "1": 2}
    rng = np.random.default_rng()
    x = rng.standard_normal(_shape(lhs, x_sizes)).astype(np.float32)
    w = rng.standard_normal(_shape(rhs, w_sizes)).astype(np.float32)
    want = conv_reference(x, w, layouts, strides, padding, lhs_dil, rhs_dil, groups)
    text = _module(layouts, x.shape, w.shape, want.shape, strides, padding, lhs_dil, rhs_dil,
                   groups, raw)
    module = rt.load_module(compile_str(text, target_backends=["llvm-cpu"]), device="local-task")
    got = module["f"](x, w).to_host()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace("input_batch_dimension = 0", "input_batch_dimension = 1"),
     "do not name each dim"),
    (lambda t: t.replace("feature_group_count = 1", "feature_group_count = 0"),
     "feature_group_count 0"),
    (lambda t: t.replace("window_strides = array<i64: 1, 1>", "window_strides = array<i64: 0, 1>"),
     "window_strides [0, 1]"),
    (lambda t: t.replace("-> tensor<2x5x5x5xf32>", "-> tensor<2x4x5x5xf32>")
     .replace("return %y : tensor<2x5x5x5xf32>", "return %y : tensor<2x4x5x5xf32>"),
     "the result should be 2x5x5x5"),
])
def test_inconsistent_attributes_are_refused_at_the_op(change, message):
    layouts = ("b01f", "01io", "b01f")
    text = _module(layouts, (2, 7, 6, 3), (3, 2, 3, 5), (2, 5, 5, 5), (1, 1), ((0, 0), (0, 0)),
                   (1, 1), (1, 1), 1, True)
    with pytest.raises(CompileError) as info:
        compile_str(change(text), source_name="conv.mlir", target_backends=["llvm-cpu"])
    assert info.value.location == "conv.mlir:2:3" and message in info.value.message, info.value
