"""Elementwise kernels: every scalar op, dtypes, casts, broadcast/transposed/strided loads."""

import math

import numpy as np
import pytest
from llvmcpu_harness import affine, identity, random_array, run
from pyree.compiler.kernel import (
    DTYPES,
    Binary,
    Binding,
    Cast,
    Compare,
    Const,
    Kernel,
    Load,
    LoopIndex,
    Result,
    Select,
    Unary,
)

SHAPE = (37, 53)
IX = identity(2)


def multi_op_kernel(name, in_dtypes, out_dtype, exprs):
    """One kernel, one output binding per expression over inputs 0..len(in_dtypes)-1."""
    n_in = len(in_dtypes)
    bindings = tuple(Binding(d, SHAPE, "read") for d in in_dtypes) + tuple(
        Binding(out_dtype, SHAPE, "write") for _ in exprs)
    results = tuple(Result(n_in + k, IX, e) for k, e in enumerate(exprs))
    return Kernel(name, SHAPE, 2, bindings, results)


def loads(*dtypes):
    return [Load(i, IX, d) for i, d in enumerate(dtypes)]


def _round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


FLOAT_UNARY = {  # op -> (reference on float64, positive domain?)
    "neg": (np.negative, False), "abs": (np.abs, False), "exp": (np.exp, False),
    "exp2": (np.exp2, False), "expm1": (np.expm1, False), "log": (np.log, True),
    "log2": (np.log2, True), "log1p": (np.log1p, True), "sqrt": (np.sqrt, True),
    "rsqrt": (lambda v: 1 / np.sqrt(v), True), "tanh": (np.tanh, False), "sin": (np.sin, False),
    "cos": (np.cos, False), "tan": (np.tan, False), "atan": (np.arctan, False),
    "erf": (np.vectorize(math.erf), False), "floor": (np.floor, False), "ceil": (np.ceil, False),
    "round": (_round_half_away, False), "roundeven": (np.rint, False), "trunc": (np.trunc, False),
    "sign": (np.sign, False),
}
FLOAT_BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "rem": np.fmod,
    "pow": np.power, "max": np.maximum, "min": np.minimum, "atan2": np.arctan2,
    "copysign": np.copysign,
}
TOLERANCE = {"f64": 1e-12, "f32": 2e-6, "f16": 2e-3}


@pytest.mark.parametrize("dtype", ["f32", "f64", "f16"])
def test_float_ops(dtype):
    rng = np.random.default_rng(1)
    a = random_array(dtype, SHAPE, rng)
    p = random_array(dtype, SHAPE, rng, 0.1, 2.0)
    a[0, :4] = [0.5, -0.5, 1.5, -2.5]  # rounding ties
    ld_a, ld_p = loads(dtype, dtype)
    unary = [Unary(op, ld_p if pos else ld_a, dtype) for op, (_, pos) in FLOAT_UNARY.items()]
    binary = [Binary(op, ld_p if op == "pow" else ld_a, ld_p, dtype) for op in FLOAT_BINARY]
    out = run(multi_op_kernel("float_ops", [dtype, dtype], dtype, unary + binary), {0: a, 1: p})
    a64, p64 = a.astype(np.float64), p.astype(np.float64)
    refs = [fn(p64 if pos else a64) for fn, pos in FLOAT_UNARY.values()]
    refs += [fn(p64 if op == "pow" else a64, p64) for op, fn in FLOAT_BINARY.items()]
    names = list(FLOAT_UNARY) + list(FLOAT_BINARY)
    for name, got, ref in zip(names, out[2:], refs):
        ref = ref.astype(dtype_np(dtype)).astype(np.float64)
        np.testing.assert_allclose(got.astype(np.float64), ref, rtol=TOLERANCE[dtype],
                                   atol=TOLERANCE[dtype], err_msg=f"{name} on {dtype}")


def dtype_np(dtype):
    return {"f16": np.float16, "f32": np.float32, "f64": np.float64}[dtype]


def wrap(values: list[int], np_dtype) -> np.ndarray:
    """Python ints -> 1-D np_dtype array with two's-complement wraparound."""
    bits = np.dtype(np_dtype).itemsize * 8
    out = [v % (1 << bits) for v in values]
    if np.issubdtype(np_dtype, np.signedinteger):
        out = [v - (1 << bits) if v >= 1 << (bits - 1) else v for v in out]
    return np.array(out, dtype=np_dtype)


def _tdiv(p, q):
    return 0 if q == 0 else (abs(p) // abs(q)) * (1 if (p >= 0) == (q >= 0) else -1)


def _shr(p, q, bits):
    return p >> min(q, bits - 1) if p < 0 else (p >> q if q < bits else 0)


def int_reference(op, a, b):
    bits = a.dtype.itemsize * 8
    fn = {"add": lambda p, q: p + q, "sub": lambda p, q: p - q, "mul": lambda p, q: p * q,
          "div": _tdiv, "rem": lambda p, q: 0 if q == 0 else p - q * _tdiv(p, q),
          "max": max, "min": min, "and": lambda p, q: p & q, "or": lambda p, q: p | q,
          "xor": lambda p, q: p ^ q, "shl": lambda p, q: p << q if q < bits else 0,
          "shr": lambda p, q: _shr(p, q, bits), "pow": lambda p, q: p ** q}[op]
    return wrap([fn(int(p), int(q)) for p, q in zip(a.ravel(), b.ravel())], a.dtype).reshape(a.shape)


INT_BINARY = ["add", "sub", "mul", "div", "rem", "max", "min", "and", "or", "xor", "shl",
              "shr", "pow"]
INT_UNARY = {"neg": lambda p: -p, "abs": abs, "not": lambda p: ~p,
             "sign": lambda p: (p > 0) - (p < 0)}


@pytest.mark.parametrize("dtype", ["i8", "i16", "i32", "i64", "ui8", "ui32"])
def test_int_ops(dtype):
    rng = np.random.default_rng(2)
    info = np.iinfo(DTYPES[dtype])
    a, b = (rng.integers(info.min, info.max, size=SHAPE, endpoint=True).astype(info.dtype)
            for _ in range(2))
    b[:, :5] = 0                                                  # division by zero gives 0
    a[0, 0], b[0, 0] = info.min, -1 if info.min < 0 else 3        # MIN / -1 wraps
    shift = rng.integers(0, info.bits + 4, size=SHAPE).astype(info.dtype)
    exponent = rng.integers(0, 6, size=SHAPE).astype(info.dtype)
    ld_a, ld_b, ld_s, ld_e = loads(dtype, dtype, dtype, dtype)
    second = {"shl": ld_s, "shr": ld_s, "pow": ld_e}
    exprs = [Binary(op, ld_a, second.get(op, ld_b), dtype) for op in INT_BINARY]
    exprs += [Unary(op, ld_a, dtype) for op in INT_UNARY]
    out = run(multi_op_kernel("int_ops", [dtype] * 4, dtype, exprs),
              {0: a, 1: b, 2: shift, 3: exponent})
    operand = {"shl": shift, "shr": shift, "pow": exponent}
    for op, got in zip(INT_BINARY, out[4:]):
        np.testing.assert_array_equal(got, int_reference(op, a, operand.get(op, b)),
                                      err_msg=f"{op} on {dtype}")
    unsigned = dtype.startswith("ui")
    for (op, fn), got in zip(INT_UNARY.items(), out[4 + len(INT_BINARY):]):
        if unsigned and op in ("abs", "sign"):
            fn = (lambda p: p) if op == "abs" else (lambda p: int(p != 0))
        ref = wrap([fn(int(p)) for p in a.ravel()], a.dtype).reshape(SHAPE)
        np.testing.assert_array_equal(got, ref, err_msg=f"{op} on {dtype}")


CASTS = [  # (op, src, dst, low, high)
    ("fptosi", "f32", "i32", -1e6, 1e6), ("fptoui", "f32", "ui8", 0, 255), ("sitofp", "i32", "f32", 0, 0),
    ("uitofp", "ui32", "f64", 0, 0), ("fpext", "f32", "f64", -3, 3), ("fptrunc", "f64", "f32", -3, 3),
    ("fptrunc", "f32", "f16", -3, 3), ("fpext", "f16", "f32", -3, 3), ("extsi", "i8", "i32", 0, 0),
    ("extui", "ui8", "i32", 0, 0), ("trunci", "i32", "i8", 0, 0), ("bitcast", "f32", "i32", -3, 3),
    ("extui", "i1", "i32", 0, 0), ("extsi", "i16", "i64", 0, 0),
]


@pytest.mark.parametrize("op,src,dst,low,high", CASTS)
def test_casts(op, src, dst, low, high):
    rng = np.random.default_rng(3)
    if src.startswith("f"):
        x = random_array(src, SHAPE, rng, low, high)
    elif src == "i1":
        x = random_array(src, SHAPE, rng)
    else:
        info = np.iinfo(DTYPES[src])
        x = rng.integers(info.min, info.max, size=SHAPE, endpoint=True).astype(info.dtype)
    k = multi_op_kernel("cast", [src], dst, [Cast(op, Load(0, IX, src), dst)])
    got = run(k, {0: x})[1]
    if op == "bitcast":
        ref = x.view(DTYPES[dst])
    elif op == "fptosi" or op == "fptoui":
        ref = np.trunc(x).astype(DTYPES[dst])
    else:
        ref = x.astype(DTYPES[dst])
    if op == "extsi" and src == "i1":
        ref = -ref
    np.testing.assert_array_equal(got, ref)


def test_compare_and_select():
    rng = np.random.default_rng(4)
    a = random_array("f32", SHAPE, rng)
    b = a.copy()
    b[::2] = random_array("f32", SHAPE, rng)[::2]  # half equal, half not
    a[3, :7] = np.nan
    b[5, :7] = np.nan
    preds = ["eq", "ne", "lt", "le", "gt", "ge", "ueq", "une", "ult", "ule", "ugt", "uge", "ord", "uno"]
    ld_a, ld_b = loads("f32", "f32")
    exprs = [Compare(p, ld_a, ld_b) for p in preds]
    k = multi_op_kernel("cmp", ["f32", "f32"], "i1", exprs)
    out = run(k, {0: a, 1: b})
    nan = np.isnan(a) | np.isnan(b)
    with np.errstate(invalid="ignore"):
        base = {"eq": a == b, "ne": a != b, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b}
    for p, got in zip(preds, out[2:]):
        if p == "ord":
            ref = ~nan
        elif p == "uno":
            ref = nan
        elif p.startswith("u"):
            ref = base[p[1:]] | nan
        else:
            ref = base[p] & ~nan
        np.testing.assert_array_equal(got, ref, err_msg=p)

    # integer compares use the operand's signedness; select picks per element
    x = rng.integers(-50, 50, size=SHAPE).astype(np.int32)
    y = rng.integers(-50, 50, size=SHAPE).astype(np.int32)
    ux = rng.integers(0, 2**32, size=SHAPE, dtype=np.uint64).astype(np.uint32)
    uy = rng.integers(0, 2**32, size=SHAPE, dtype=np.uint64).astype(np.uint32)
    lx, ly, lux, luy = loads("i32", "i32", "ui32", "ui32")
    k = Kernel("select", SHAPE, 2, tuple(Binding(d, SHAPE, "read") for d in ("i32", "i32", "ui32", "ui32"))
               + (Binding("i32", SHAPE, "write"), Binding("i1", SHAPE, "write")),
               (Result(4, IX, Select(Compare("lt", lx, ly), lx, ly, "i32")),
                Result(5, IX, Compare("gt", lux, luy))))
    out = run(k, {0: x, 1: y, 2: ux, 3: uy})
    np.testing.assert_array_equal(out[4], np.minimum(x, y))
    np.testing.assert_array_equal(out[5], ux > uy)


def test_bool_logic():
    rng = np.random.default_rng(5)
    p, q = random_array("i1", SHAPE, rng), random_array("i1", SHAPE, rng)
    lp, lq = loads("i1", "i1")
    exprs = [Binary("and", lp, lq, "i1"), Binary("or", lp, lq, "i1"), Binary("xor", lp, lq, "i1"),
             Unary("not", lp, "i1")]
    out = run(multi_op_kernel("bool", ["i1", "i1"], "i1", exprs), {0: p, 1: q})
    for got, ref in zip(out[2:], [p & q, p | q, p ^ q, ~p]):
        np.testing.assert_array_equal(got, ref)
        assert set(np.unique(got.view(np.uint8))) <= {0, 1}


def f32(op, x, y):
    return Binary(op, x, y, "f32")


def test_broadcast_transposed_strided_and_rank0_loads():
    """out[i,j] = a[i,j]*b[j] + c[j,i] - d[i] + s + e[2i+1, 52-j]"""
    M, N = SHAPE
    rng = np.random.default_rng(6)
    shapes = [SHAPE, (N,), (N, M), (M,), (), (80, N)]
    a, b, c, d, s, e = (random_array("f32", shape, rng) for shape in shapes)
    indices = [IX, (affine(0, 1),), (affine(0, 1), affine(1, 0)), (affine(1, 0),), (),
               (affine(2, 0, const=1), affine(0, -1, const=N - 1))]
    la, lb, lc, ld, ls, le = (Load(i, ix, "f32") for i, ix in enumerate(indices))
    expr = f32("add", f32("add", f32("sub", f32("add", f32("mul", la, lb), lc), ld), ls), le)
    bindings = tuple(Binding("f32", shape, "read") for shape in shapes)
    k = Kernel("bcast", SHAPE, 2, bindings + (Binding("f32", SHAPE, "write"),), (Result(6, IX, expr),))
    out = run(k, {0: a, 1: b, 2: c, 3: d, 4: s, 5: e})[6]
    ref = a * b + c.T - d[:, None] + s + e[1::2][:M, ::-1]
    np.testing.assert_allclose(out, ref, rtol=1e-6, atol=1e-6)


def test_transposed_store_and_large_odd_shape():
    """out[j, i] = exp(a[i, j]) over 301 x 1037 (several workgroups, vector tails)."""
    M, N = 301, 1037
    rng = np.random.default_rng(8)
    a = random_array("f32", (M, N), rng)
    k = Kernel("transpose", (M, N), 2, (Binding("f32", (M, N), "read"), Binding("f32", (N, M), "write")),
               (Result(1, (affine(0, 1), affine(1, 0)), Unary("exp", Load(0, identity(2), "f32"), "f32")),))
    out = run(k, {0: a})[1]
    np.testing.assert_allclose(out, np.exp(a.astype(np.float64)).T, rtol=2e-6)


def test_loop_index_and_multiple_results():
    M, N = SHAPE
    rng = np.random.default_rng(9)
    a = random_array("f32", SHAPE, rng)
    flat_index = Binary("add", Binary("mul", LoopIndex(0), Const(N, "index"), "index"), LoopIndex(1), "index")
    k = Kernel("iota", SHAPE, 2, (Binding("f32", SHAPE, "read"), Binding("i32", SHAPE, "write"),
                                  Binding("f32", SHAPE, "write"), Binding("f32", SHAPE, "read_write")),
               (Result(1, IX, Cast("trunci", flat_index, "i32")),
                Result(2, IX, Binary("add", Load(0, IX, "f32"), Cast("sitofp", LoopIndex(0), "f32"), "f32")),
                Result(3, IX, Binary("mul", Load(3, IX, "f32"), Const(2.0, "f32"), "f32"))))
    inout = random_array("f32", SHAPE, rng)
    out = run(k, {0: a, 3: inout.copy()})
    np.testing.assert_array_equal(out[1], np.arange(M * N, dtype=np.int32).reshape(SHAPE))
    np.testing.assert_allclose(out[2], a + np.arange(M, dtype=np.float32)[:, None])
    np.testing.assert_array_equal(out[3], inout * 2)


def test_rank0_kernel():
    k = Kernel("scalar", (), 0, (Binding("f64", (), "read"), Binding("f64", (), "write")),
               (Result(1, (), Unary("sqrt", Load(0, (), "f64"), "f64")),))
    x = np.array(2.25)
    assert run(k, {0: x})[1] == 1.5
