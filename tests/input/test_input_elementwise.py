"""arith/math ops on tensors and scalars: lowered to Generics, checked against numpy."""

import math

import numpy as np
import pytest
from program_interpreter import run
from pyree.compiler.input import import_mlir
from pyree.compiler.tensor_program import Generic


def _binary(op: str, t: str = "f32", shape: str = "37x53") -> str:
    ty = f"tensor<{shape}x{t}>"
    return f"""
func.func @f(%a: {ty}, %b: {ty}) -> {ty} {{
  %r = {op} %a, %b : {ty}
  return %r : {ty}
}}"""


def _unary(op: str, t: str = "f32", shape: str = "37x53") -> str:
    ty = f"tensor<{shape}x{t}>"
    return f"""
func.func @f(%a: {ty}) -> {ty} {{
  %r = {op} %a : {ty}
  return %r : {ty}
}}"""


def _floats(rng, shape=(37, 53), dtype=np.float32, low=-3.0, high=3.0):
    return rng.uniform(low, high, shape).astype(dtype)


def _ints(rng, shape=(37, 53), dtype=np.int32, low=-1000, high=1000):
    return rng.integers(low, high, shape).astype(dtype)


@pytest.mark.parametrize("op, ref", [
    ("arith.addf", np.add), ("arith.subf", np.subtract), ("arith.mulf", np.multiply),
    ("arith.divf", np.divide), ("arith.maximumf", np.maximum), ("arith.minimumf", np.minimum),
    ("math.powf", lambda a, b: np.power(np.abs(a), b)), ("math.atan2", np.arctan2),
    ("math.copysign", np.copysign),
])
def test_float_binary(op, ref, rng):
    a, b = _floats(rng), _floats(rng)
    if op == "math.powf":
        a = np.abs(a)
    fn = import_mlir(_binary(op)).functions[0]
    (out,) = run(fn, a, b)
    assert len(fn.ops) == 1 and isinstance(fn.ops[0], Generic)
    np.testing.assert_allclose(out, ref(a.astype(np.float64), b.astype(np.float64)), rtol=2e-6,
                               atol=1e-6)


@pytest.mark.parametrize("op, ref", [
    ("arith.addi", np.add), ("arith.subi", np.subtract), ("arith.muli", np.multiply),
    ("arith.divsi", lambda a, b: np.trunc(a / b)), ("arith.remsi", np.fmod),
    ("arith.floordivsi", np.floor_divide), ("arith.ceildivsi", lambda a, b: -(-a // b)),
    ("arith.maxsi", np.maximum), ("arith.minsi", np.minimum), ("arith.andi", np.bitwise_and),
    ("arith.ori", np.bitwise_or), ("arith.xori", np.bitwise_xor),
])
def test_int_binary(op, ref, rng):
    a, b = _ints(rng, (7, 13)), _ints(rng, (7, 13))
    b[b == 0] = 7
    (out,) = run(import_mlir(_binary(op, "i32", "7x13")).functions[0], a, b)
    np.testing.assert_array_equal(out, ref(a.astype(np.int64), b.astype(np.int64)))


@pytest.mark.parametrize("op, ref", [
    ("arith.floordivsi", np.floor_divide), ("arith.ceildivsi", lambda a, b: -(-a // b))])
def test_rounded_division_at_every_sign(op, ref):
    """Exact and inexact quotients of either sign (random operands are seldom exact)."""
    a, b = np.meshgrid(np.arange(-7, 8, dtype=np.int32), np.array([-3, -2, -1, 1, 2, 3], np.int32))
    (out,) = run(import_mlir(_binary(op, "i32", "6x15")).functions[0], a, b)
    np.testing.assert_array_equal(out, ref(a.astype(np.int64), b.astype(np.int64)))


@pytest.mark.parametrize("op, ref", [
    ("arith.divui", np.floor_divide), ("arith.remui", np.remainder), ("arith.maxui", np.maximum),
    ("arith.minui", np.minimum), ("arith.shrui", np.right_shift),
])
def test_unsigned_ops_on_signless_ints(op, ref, rng):
    a, b = _ints(rng, (7, 13), low=-100, high=100), _ints(rng, (7, 13), low=1, high=30)
    (out,) = run(import_mlir(_binary(op, "i32", "7x13")).functions[0], a, b)
    expected = ref(a.view(np.uint32), b.view(np.uint32)).view(np.int32)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize("op, ref, positive", [
    ("math.exp", np.exp, False), ("math.log", np.log, True), ("math.sqrt", np.sqrt, True),
    ("math.rsqrt", lambda x: 1 / np.sqrt(x), True), ("math.tanh", np.tanh, False),
    ("math.absf", np.abs, False), ("arith.negf", np.negative, False),
    ("math.floor", np.floor, False), ("math.ceil", np.ceil, False),
    ("math.erf", np.vectorize(math.erf), False), ("math.sin", np.sin, False),
    ("math.log1p", np.log1p, True), ("math.exp2", np.exp2, False),
    ("math.log10", np.log10, True), ("math.roundeven", np.rint, False),
])
def test_float_unary(op, ref, positive, rng):
    a = _floats(rng, (11, 13), low=0.1 if positive else -3.0)
    (out,) = run(import_mlir(_unary(op, "f32", "11x13")).functions[0], a)
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_maxnumf_ignores_nan_but_maximumf_propagates_it(rng):
    a, b = _floats(rng, (5, 7)), _floats(rng, (5, 7))
    a[0, 0] = b[1, 1] = np.nan
    (num,) = run(import_mlir(_binary("arith.maxnumf", "f32", "5x7")).functions[0], a, b)
    (imum,) = run(import_mlir(_binary("arith.maximumf", "f32", "5x7")).functions[0], a, b)
    np.testing.assert_array_equal(num, np.fmax(a, b))
    np.testing.assert_array_equal(imum, np.maximum(a, b))


@pytest.mark.parametrize("pred, ref", [
    ("oeq", np.equal), ("olt", np.less), ("oge", np.greater_equal), ("one", np.not_equal),
    ("ult", lambda a, b: ~(a >= b)), ("uno", lambda a, b: np.isnan(a) | np.isnan(b)),
])
def test_cmpf_and_select(pred, ref, rng):
    a, b = _floats(rng, (9, 7)), _floats(rng, (9, 7))
    b[::2] = a[::2]
    a[3, 3] = np.nan
    text = f"""
func.func @f(%a: tensor<9x7xf32>, %b: tensor<9x7xf32>) -> tensor<9x7xf32> {{
  %c = arith.cmpf {pred}, %a, %b : tensor<9x7xf32>
  %r = arith.select %c, %a, %b : tensor<9x7xi1>, tensor<9x7xf32>
  return %r : tensor<9x7xf32>
}}"""
    (out,) = run(import_mlir(text).functions[0], a, b)
    np.testing.assert_array_equal(out, np.where(ref(a, b), a, b))


@pytest.mark.parametrize("pred, ref", [
    ("slt", lambda a, b: a < b), ("sge", lambda a, b: a >= b), ("ne", np.not_equal),
    ("ult", lambda a, b: a.view(np.uint32) < b.view(np.uint32)),
    ("uge", lambda a, b: a.view(np.uint32) >= b.view(np.uint32)),
])
def test_cmpi(pred, ref, rng):
    a, b = _ints(rng, (9, 7)), _ints(rng, (9, 7))
    b[::3] = a[::3]
    text = f"""
func.func @f(%a: tensor<9x7xi32>, %b: tensor<9x7xi32>) -> tensor<9x7xi1> {{
  %c = arith.cmpi {pred}, %a, %b : tensor<9x7xi32>
  return %c : tensor<9x7xi1>
}}"""
    (out,) = run(import_mlir(text).functions[0], a, b)
    np.testing.assert_array_equal(out, ref(a, b))


def _f16(r):
    return _floats(r, dtype=np.float16)


def _f64(r):
    return _floats(r, dtype=np.float64)


def _i8(r):
    return _ints(r, dtype=np.int8, low=-128, high=127)


def _to(dtype):
    return lambda a: a.astype(dtype)


@pytest.mark.parametrize("op, src, dst, make, ref", [
    ("arith.extf", "f16", "f32", _f16, _to(np.float32)),
    ("arith.truncf", "f64", "f32", _f64, _to(np.float32)),
    ("arith.sitofp", "i32", "f32", _ints, _to(np.float32)),
    ("arith.uitofp", "i8", "f32", _i8, lambda a: a.view(np.uint8).astype(np.float32)),
    ("arith.fptosi", "f32", "i32", lambda r: _floats(r, low=-1e4, high=1e4), _to(np.int32)),
    ("arith.extsi", "i8", "i32", _i8, _to(np.int32)),
    ("arith.extui", "i8", "i32", _i8, lambda a: a.view(np.uint8).astype(np.int32)),
    ("arith.trunci", "i32", "i8", _ints, _to(np.int8)),
    ("arith.bitcast", "f32", "i32", _floats, lambda a: a.view(np.int32)),
    ("arith.index_cast", "i32", "index", _ints, _to(np.int64)),
])
def test_casts(op, src, dst, make, ref, rng):
    a = make(rng)[:5, :9]
    text = f"""
func.func @f(%a: tensor<5x9x{src}>) -> tensor<5x9x{dst}> {{
  %r = {op} %a : tensor<5x9x{src}> to tensor<5x9x{dst}>
  return %r : tensor<5x9x{dst}>
}}"""
    (out,) = run(import_mlir(text).functions[0], np.ascontiguousarray(a))
    np.testing.assert_array_equal(out, ref(a))


def test_scalar_args_are_rank0_and_constants_fold(rng):
    text = """
func.func @f(%x: f32, %t: tensor<6x5xf32>) -> (f32, tensor<6x5xf32>) {
  %two = arith.constant 2.0 : f32
  %four = arith.mulf %two, %two : f32
  %y = arith.mulf %x, %four : f32
  %e = tensor.empty() : tensor<6x5xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<6x5xf32>) outs(%e : tensor<6x5xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.addf %in, %y : f32
    %p = arith.mulf %s, %four : f32
    linalg.yield %p : f32
  } -> tensor<6x5xf32>
  return %y, %r : f32, tensor<6x5xf32>
}"""
    fn = import_mlir(text).functions[0]
    assert fn.arguments[0].shape == () and fn.results[0].shape == ()
    # %two and %four fold away: only the rank-0 multiply and the generic remain.
    assert [type(op).__name__ for op in fn.ops] == ["Generic", "Generic"]
    x, t = np.float32(rng.uniform(-2, 2)), _floats(rng, (6, 5))
    y, r = run(fn, np.array(x), t)
    np.testing.assert_allclose(y, x * 4, rtol=1e-6)
    np.testing.assert_allclose(r, (t + x * 4) * 4, rtol=1e-5)


def test_select_on_tensors_with_a_scalar_condition(rng):
    text = """
func.func @f(%c: i1, %a: tensor<3x4xf32>, %b: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %r = arith.select %c, %a, %b : tensor<3x4xf32>
  return %r : tensor<3x4xf32>
}"""
    fn = import_mlir(text).functions[0]
    a, b = _floats(rng, (3, 4)), _floats(rng, (3, 4))
    for c in (True, False):
        (out,) = run(fn, np.array(c), a, b)
        np.testing.assert_array_equal(out, a if c else b)
