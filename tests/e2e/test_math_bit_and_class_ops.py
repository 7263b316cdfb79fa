"""arith and math ops a hand-written MLIR program may use that pyree refused by name: bit counts
(``math.ctpop``, ``math.cttz``), integer powers (``math.ipowi``), double-width products and
carries (``arith.mulsi_extended``, ``arith.mului_extended``, ``arith.addui_extended``), float
classification (``math.isnan``, ``isinf``, ``isfinite``, ``isnormal``), ``math.clampf`` and
``math.sincos``. Each in a linalg body and on tensors, of every integer width or float type,
at the extremes and special values, against exact Python integers or numpy."""

from __future__ import annotations

import numpy as np
import pytest
from jax_runs import DEVICES, module_for, options_for
from pyree.compiler import compile_str

INTS = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64}
FLOATS = {"f16": np.float16, "f32": np.float32, "f64": np.float64}
# op -> (its text on %x, %y of type {t}, its number of results); the body yields them in order.
INT_OPS = {
    "ctpop": ("math.ctpop %x : {t}", 1),
    "cttz": ("math.cttz %x : {t}", 1),
    "ctlz": ("math.ctlz %x : {t}", 1),
    "ipowi": ("math.ipowi %x, %y : {t}", 1),
    "mulsi_extended": ("arith.mulsi_extended %x, %y : {t}", 2),
    "mului_extended": ("arith.mului_extended %x, %y : {t}", 2),
}


def _generic(t: str, result_types: list[str], lines: list[str], results: list[str],
             nargs: int = 2) -> str:
    """A 1-D linalg.generic over ``nargs`` tensors of ``t`` whose body is ``lines``."""
    ins = ", ".join(f"%a{i}" for i in range(nargs))
    in_types = ", ".join([f"tensor<?x{t}>"] * nargs)
    out_types = ", ".join(f"tensor<?x{r}>" for r in result_types)
    empties = "\n".join(f"  %e{i} = tensor.empty(%n) : tensor<?x{r}>"
                        for i, r in enumerate(result_types))
    block = ", ".join([f"%{v}: {t}" for v in "xyz"[:nargs]]
                      + [f"%o{i}: {r}" for i, r in enumerate(result_types)])
    maps = ", ".join(["#m"] * (nargs + len(result_types)))
    body = "\n".join(f"    {line}" for line in lines)
    rets = ", ".join(f"%r#{i}" for i in range(len(result_types)))
    return f"""
#m = affine_map<(d0) -> (d0)>
func.func @f({", ".join(f"%a{i}: tensor<?x{t}>" for i in range(nargs))}) -> ({out_types}) {{
  %c0 = arith.constant 0 : index
  %n = tensor.dim %a0, %c0 : tensor<?x{t}>
{empties}
  %r:{len(result_types)} = linalg.generic {{indexing_maps = [{maps}],
      iterator_types = ["parallel"]}} ins({ins} : {in_types})
      outs({", ".join(f"%e{i}" for i in range(len(result_types)))} : {out_types}) {{
  ^bb0({block}):
{body}
    linalg.yield {", ".join(results)} : {", ".join(result_types)}
  }} -> ({out_types})
  return {rets} : {out_types}
}}"""


def _int_program(t: str) -> str:
    lines, results, types = [], [], []
    for k, (form, count) in enumerate(INT_OPS.values()):
        name = f"%v{k}" + (f":{count}" if count > 1 else "")
        lines.append(f"{name} = {form.format(t=t)}")
        results += [f"%v{k}#{i}" for i in range(count)] if count > 1 else [f"%v{k}"]
        types += [t] * count
    lines.append(f"%s:2 = arith.addui_extended %x, %y : {t}, i1")
    results += ["%s#0", "%s#1"]
    types += [t, "i1"]
    return _generic(t, types, lines, results)


def _wrap(value: int, bits: int) -> int:
    value %= 1 << bits
    return value - (1 << bits) if value >= 1 << (bits - 1) else value


def _int_expected(x: int, y: int, bits: int) -> list[int]:
    ux, uy = x % (1 << bits), y % (1 << bits)
    if y < 0:  # MLIR's ipowi: 1 of 1, +-1 of -1, 0 of any other base but 0 (undefined)
        power = {1: 1, -1: -1 if y % 2 else 1}.get(x, 0 if x else None)
    else:
        power = _wrap(x ** y, bits) if y < 200 else None  # checked on small exponents only
    return [
        bin(ux).count("1"),
        (ux & -ux).bit_length() - 1 if ux else bits,
        bits - ux.bit_length(),
        power,
        _wrap(x * y, bits), _wrap((x * y) >> bits, bits),
        _wrap(ux * uy, bits), _wrap((ux * uy) >> bits, bits),
        _wrap(x + y, bits), int(ux + uy >= 1 << bits),
    ]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("t", list(INTS))
def test_bit_counts_powers_and_extended_arithmetic(t, device):
    info = np.iinfo(INTS[t])
    values = np.array([info.min, info.min + 1, -7, -3, -2, -1, 0, 1, 2, 3, 5, 7, 12, 100,
                       info.max - 1, info.max], INTS[t])
    a, b = np.repeat(values, len(values)), np.tile(values, len(values))
    got = module_for(_int_program(t), device)["f"](a, b)
    bits = info.bits
    names = ["ctpop", "cttz", "ctlz", "ipowi", "mulsi lo", "mulsi hi", "mului lo", "mului hi",
             "addui sum", "addui carry"]
    for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
        for name, want, out in zip(names, _int_expected(x, y, bits), got):
            if want is not None:
                assert int(out[i]) == want, (name, t, x, y, int(out[i]), want)


def test_ipowi_of_a_constant_exponent_and_on_tensors():
    """math.ipowi by constants (squared and multiplied, unrolled) and the ops on whole
    tensors (outside a linalg body), scalar results through the same lowering."""
    text = """
func.func @f(%x: tensor<7xi32>) -> (tensor<7xi32>, tensor<7xi32>, tensor<7xi32>, tensor<7xi32>) {
  %c3 = arith.constant dense<3> : tensor<7xi32>
  %c0 = arith.constant dense<0> : tensor<7xi32>
  %p = math.ipowi %x, %c3 : tensor<7xi32>
  %q = math.ipowi %x, %c0 : tensor<7xi32>
  %c = math.ctpop %x : tensor<7xi32>
  %lo, %hi = arith.mulsi_extended %x, %x : tensor<7xi32>
  return %p, %q, %c, %hi : tensor<7xi32>, tensor<7xi32>, tensor<7xi32>, tensor<7xi32>
}"""
    x = np.array([-2147483648, -5, -1, 0, 1, 3, 2147483647], np.int32)
    p, q, c, hi = module_for(text, "local-task")["f"](x)
    xs = x.astype(object)
    np.testing.assert_array_equal(p, [_wrap(v ** 3, 32) for v in xs])
    np.testing.assert_array_equal(q, np.ones(7, np.int32))
    np.testing.assert_array_equal(c, [bin(v % (1 << 32)).count("1") for v in xs])
    np.testing.assert_array_equal(hi, [_wrap((v * v) >> 32, 32) for v in xs])


def _float_program(t: str) -> str:
    lines = [f"%n0 = math.isnan %x : {t}", f"%n1 = math.isinf %x : {t}",
             f"%n2 = math.isfinite %x : {t}", f"%n3 = math.isnormal %x : {t}",
             f"%c = math.clampf %x to [%y, %z] : {t}", f"%s:2 = math.sincos %x : {t}"]
    return _generic(t, ["i1"] * 4 + [t] * 3, lines, ["%n0", "%n1", "%n2", "%n3", "%c", "%s#0",
                                                     "%s#1"], nargs=3)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("t", list(FLOATS))
def test_float_classification_clamp_and_sincos(t, device):
    if t == "f64" and device == "cuda":  # cuda's math expansions are f32's: refused by name
        from pyree.compiler import CompileError
        with pytest.raises(CompileError, match="'sin' on f64 is not supported by the cuda"):
            compile_str(_float_program(t), options_for(device))
        return
    f = FLOATS[t]
    info = np.finfo(f)
    subnormal = info.smallest_subnormal
    x = np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, info.tiny, -info.tiny,
                  subnormal, -subnormal, info.max, info.min, 1.0, -2.5, 0.75, 3.0, 100.0], f)
    low = np.full_like(x, -1.0)
    high = np.full_like(x, 2.0)
    got = module_for(_float_program(t), device)["f"](x, low, high)
    flushes = device != "local-task"  # GPUs may flush subnormals to zero
    normal = np.isfinite(x) & (np.abs(x) >= info.tiny)
    for name, want, out in [("isnan", np.isnan(x), got[0]), ("isinf", np.isinf(x), got[1]),
                            ("isfinite", np.isfinite(x), got[2]), ("isnormal", normal, got[3])]:
        np.testing.assert_array_equal(out, want, err_msg=f"{name} {t}")
    def clamp(v):
        return np.where(np.isnan(v), v, np.minimum(np.maximum(v, low), high))

    flushed = np.where(np.abs(x) < info.tiny, np.copysign(f(0), x), x)  # subnormals to +-0
    out = got[4]
    same = (out == clamp(x)) | (np.isnan(out) & np.isnan(x)) | (flushes & (out == clamp(flushed)))
    assert same.all(), f"clampf {t}: {out[~same]} where {x[~same]}"
    wide = x.astype(np.float64)
    # f64 sin and cos on the GPU targets are narrowed to f32 (common/math_expansion.py)
    tol = {"f16": 2e-3, "f32": 2e-6, "f64": 1e-12 if device == "local-task" else 2e-6}[t]
    finite = np.isfinite(x) & (np.abs(wide) < 1e4)
    for out, ref in [(got[5], np.sin(wide)), (got[6], np.cos(wide))]:
        assert np.all(np.isnan(out[~np.isfinite(x)]))
        np.testing.assert_allclose(out[finite].astype(np.float64), ref[finite],
                                   atol=tol * (10 if flushes else 1), rtol=tol)


def test_clampf_keeps_the_sign_of_zero_and_nan_bounds_order():
    """maximum(minimum(x, hi), lo): -0.0 stays -0.0 inside [-1, 2]; a NaN bound gives NaN."""
    text = _generic("f32", ["f32"], ["%c = math.clampf %x to [%y, %z] : f32"], ["%c"], nargs=3)
    x = np.array([-0.0, 0.0, 5.0, -5.0], np.float32)
    lo = np.array([-1.0, -1.0, np.nan, -1.0], np.float32)
    hi = np.array([2.0, 2.0, 2.0, np.nan], np.float32)
    out = module_for(text, "local-task")["f"](x, lo, hi)
    assert np.signbit(out[0]) and not np.signbit(out[1])
    assert np.isnan(out[2]) and np.isnan(out[3])


def test_extended_product_of_i1_is_refused_by_name():
    from pyree.compiler import CompileError
    text = _generic("i1", ["i1", "i1"], ["%v:2 = arith.mulsi_extended %x, %y : i1"],
                    ["%v#0", "%v#1"])
    with pytest.raises(CompileError, match="mulsi_extended.*i1"):
        compile_str(text, options_for("local-task"))


@pytest.mark.parametrize("form", ["%v = math.isnan %x : {t}", "%v = math.clampf %x to [%x, %y] : {t}",
                                  "%v:2 = math.sincos %x : {t}"])
def test_float_ops_on_integers_are_refused_at_their_line(form):
    from pyree.compiler import CompileError
    result = "%v#0" if ":2" in form else "%v"
    rt_type = "i1" if "isnan" in form else "i32"
    text = _generic("i32", [rt_type], [form.format(t="i32")], [result])
    with pytest.raises(CompileError) as info:
        compile_str(text, options_for("local-task"))
    assert "<string>:1" in str(info.value) and "i32" in str(info.value), str(info.value)
