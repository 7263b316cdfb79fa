"""Convolution, pooling, softmax and matmul variants -> Generics: maps from strides/dilations,
bodies that cast like OpDSL, pooling windows that are never loaded; errors that name the op."""

import numpy as np
import pytest
from program_interpreter import run
from pyree.compiler.errors import CompileError
from pyree.compiler.input import import_mlir
from pyree.compiler.kernel import AffineExpr, Cast, Const, Load, walk
from pyree.compiler.tensor_program import Generic


def t(shape, dtype="f32"):
    return f"tensor<{''.join(f'{d}x' for d in shape)}{dtype}>"


def conv(attrs: str, x=(2, 3, 9, 10), w=(5, 3, 3, 2), out=(2, 5, 4, 3), dtype="f32", acc="f32"):
    return f"""
func.func @f(%x: {t(x, dtype)}, %w: {t(w, dtype)}, %o: {t(out, acc)}) -> {t(out, acc)} {{
  %r = linalg.conv_2d_nchw_fchw {attrs} ins(%x, %w : {t(x, dtype)}, {t(w, dtype)})
       outs(%o : {t(out, acc)}) -> {t(out, acc)}
  return %r : {t(out, acc)}
}}"""


def _loads(generic: Generic) -> list[Load]:
    return [e for e in walk(generic.outputs[0].value) if isinstance(e, Load)]


def test_conv_maps_come_from_strides_and_dilations():
    text = conv("{strides = dense<[2, 3]> : vector<2xi64>, dilations = dense<[1, 2]> : tensor<2xi64>}")
    (op,) = import_mlir(text).functions[0].ops
    assert op.loop_ranges == (2, 5, 4, 3, 3, 3, 2) and op.num_parallel == 4
    x_load = next(load for load in _loads(op) if load.binding == 0)
    # loops (n, f, oh, ow, c, kh, kw): x[n, c, 2 * oh + kh, 3 * ow + 2 * kw]
    assert x_load.index[2] == AffineExpr((0, 0, 2, 0, 0, 1, 0))
    assert x_load.index[3] == AffineExpr((0, 0, 0, 3, 0, 0, 2))


def test_absent_strides_and_dilations_are_one():
    (op,) = import_mlir(conv("", out=(2, 5, 7, 9))).functions[0].ops
    x_load = next(load for load in _loads(op) if load.binding == 0)
    assert x_load.index[2] == AffineExpr((0, 0, 1, 0, 0, 1, 0))


@pytest.mark.parametrize("dtype, acc, cast", [("i8", "i32", "extsi"), ("f16", "f32", "fpext")])
def test_conv_casts_operands_to_the_accumulator(rng, dtype, acc, cast):
    text = conv("{strides = dense<2> : vector<2xi64>}", x=(1, 2, 7, 6), w=(3, 2, 3, 2),
                out=(1, 3, 3, 3), dtype=dtype, acc=acc)
    fn = import_mlir(text).functions[0]
    assert sum(isinstance(e, Cast) and e.op == cast for e in walk(fn.ops[0].outputs[0].value)) == 2
    if dtype == "i8":
        x, w = (rng.integers(-128, 128, s).astype(np.int8) for s in ((1, 2, 7, 6), (3, 2, 3, 2)))
        o = rng.integers(-99, 99, (1, 3, 3, 3)).astype(np.int32)
    else:
        x, w = (rng.standard_normal(s).astype(np.float16) for s in ((1, 2, 7, 6), (3, 2, 3, 2)))
        o = rng.standard_normal((1, 3, 3, 3)).astype(np.float32)
    expected = o.astype(np.float64)
    for kh in range(3):
        for kw in range(2):
            patch = x[:, :, kh:kh + 5:2, kw:kw + 5:2].astype(np.float64)
            expected = expected + np.einsum("nchw,fc->nfhw", patch, w[:, :, kh, kw])
    (out,) = run(fn, x, w, o)
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-4)


def test_pooling_window_is_a_shape_not_an_input(rng):
    text = f"""
func.func @f(%x: {t((2, 3, 9, 8))}) -> {t((2, 3, 4, 7))} {{
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : {t((2, 3, 4, 7))}
  %init = linalg.fill ins(%ninf : f32) outs(%e : {t((2, 3, 4, 7))}) -> {t((2, 3, 4, 7))}
  %window = tensor.empty() : tensor<3x2xf32>
  %r = linalg.pooling_nchw_max {{strides = dense<[2, 1]> : vector<2xi64>}}
       ins(%x, %window : {t((2, 3, 9, 8))}, tensor<3x2xf32>) outs(%init : {t((2, 3, 4, 7))}) -> {t((2, 3, 4, 7))}
  return %r : {t((2, 3, 4, 7))}
}}"""
    fn = import_mlir(text).functions[0]
    (op,) = fn.ops
    assert [v.shape for v in op.inputs] == [(2, 3, 9, 8)]
    assert op.outputs[0].init == Const(-np.inf, "f32") and op.loop_ranges[4:] == (3, 2)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    expected = np.full((2, 3, 4, 7), -np.inf, np.float32)
    for kh in range(3):
        for kw in range(2):
            expected = np.maximum(expected, x[:, :, kh:kh + 7:2, kw:kw + 7])
    np.testing.assert_array_equal(run(fn, x)[0], expected)


def test_softmax_is_a_max_and_a_sum_reduction_then_a_division(rng):
    text = f"""
func.func @f(%x: {t((3, 4, 5))}) -> {t((3, 4, 5))} {{
  %e = tensor.empty() : {t((3, 4, 5))}
  %r = linalg.softmax dimension(1) ins(%x : {t((3, 4, 5))}) outs(%e : {t((3, 4, 5))}) -> {t((3, 4, 5))}
  return %r : {t((3, 4, 5))}
}}"""
    fn = import_mlir(text).functions[0]
    max_, sum_, div = fn.ops
    assert max_.loop_ranges == sum_.loop_ranges == (3, 5, 4) and max_.num_parallel == 2
    assert max_.outputs[0].init == Const(-float(np.finfo(np.float32).max), "f32")
    assert sum_.outputs[0].init == Const(0.0, "f32") and div.num_parallel == 3
    x = (rng.standard_normal((3, 4, 5)) * 30).astype(np.float32)
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(run(fn, x)[0], e / e.sum(axis=1, keepdims=True), rtol=1e-5,
                               atol=1e-7)


@pytest.mark.parametrize("op, lhs, rhs, out, spec", [
    ("linalg.matmul_transpose_a", (7, 3), (7, 4), (3, 4), "km,kn->mn"),
    ("linalg.matmul_transpose_b", (3, 7), (4, 7), (3, 4), "mk,nk->mn"),
    ("linalg.batch_matmul_transpose_a", (2, 7, 3), (2, 7, 4), (2, 3, 4), "bkm,bkn->bmn"),
    ("linalg.batch_matmul_transpose_b", (2, 3, 7), (2, 4, 7), (2, 3, 4), "bmk,bnk->bmn"),
    ("linalg.batch_reduce_matmul", (2, 3, 7), (2, 7, 4), (3, 4), "bmk,bkn->mn"),
])
def test_matmul_variants(rng, op, lhs, rhs, out, spec):
    text = f"""
func.func @f(%a: {t(lhs)}, %b: {t(rhs)}, %c: {t(out)}) -> {t(out)} {{
  %r = {op} ins(%a, %b : {t(lhs)}, {t(rhs)}) outs(%c : {t(out)}) -> {t(out)}
  return %r : {t(out)}
}}"""
    fn = import_mlir(text).functions[0]
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in (lhs, rhs, out))
    np.testing.assert_allclose(run(fn, a, b, c)[0], c + np.einsum(spec, a.astype(np.float64), b),
                               rtol=1e-5, atol=1e-5)


# ---- errors --------------------------------------------------------------------------------

def _error(text: str) -> CompileError:
    with pytest.raises(CompileError) as info:
        import_mlir(text, "model.mlir")
    return info.value


def test_an_unsupported_convolution_is_named_at_its_line():
    err = _error(f"""func.func @f(%x: {t((1, 4, 4, 4, 2))}, %w: {t((2, 2, 2, 2, 2))}, %z: i32, %o: {t((1, 3, 3, 3, 2))}) -> {t((1, 3, 3, 3, 2))} {{
  %r = linalg.conv_3d_ndhwc_dhwcf_q {{strides = dense<1> : tensor<3xi64>}} ins(%x, %w, %z, %z : {t((1, 4, 4, 4, 2))}, {t((2, 2, 2, 2, 2))}, i32, i32) outs(%o : {t((1, 3, 3, 3, 2))}) -> {t((1, 3, 3, 3, 2))}
  return %r : {t((1, 3, 3, 3, 2))}
}}""")
    assert err.location == "model.mlir:2:3"
    assert err.message.startswith("unsupported op 'linalg.conv_3d_ndhwc_dhwcf_q'")


def test_strides_of_the_wrong_rank():
    err = _error(conv("{strides = dense<1> : tensor<3xi64>}", out=(2, 5, 7, 9)))
    assert err.location == "model.mlir:3:3"
    assert "linalg.conv_2d_nchw_fchw" in err.message and "strides must be 2" in err.message


def test_a_window_that_reads_past_the_input():
    err = _error(conv("{strides = dense<3> : vector<2xi64>}", out=(2, 5, 4, 3)))
    assert err.location == "model.mlir:3:3" and "linalg.conv_2d_nchw_fchw" in err.message
