"""The inline f32 math functions (codegen/common/vecmath): ulp error over the whole f32 range,
IEEE special values, pow's special cases, f16, vector-mode use in a matmul epilogue, and vector
code in the assembly."""

import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest
from llvmcpu_harness import identity, matmul, run
from pyree.compiler.codegen.common.math_expansion import GPU_EXPANDED, expand
from pyree.compiler.codegen.llvm_cpu.lowering import lower_kernels
from pyree.compiler.codegen.llvm_cpu.object_file import optimize
from pyree.compiler.codegen.llvm_cpu.targets import resolve_target
from pyree.compiler.kernel import Acc, Binary, Binding, Const, Kernel, Load, Result, Unary

_erf = np.frompyfunc(math.erf, 1, 1)
REFERENCE = {  # op -> (float64 reference, the range where the function is not saturated)
    "exp": (np.exp, -105, 90), "exp2": (np.exp2, -152, 130), "expm1": (np.expm1, -20, 90),
    "log": (np.log, 0, 100), "log2": (np.log2, 0, 100), "log1p": (np.log1p, -1, 100),
    "tanh": (np.tanh, -10, 10), "erf": (lambda x: _erf(x).astype(np.float64), -4.5, 4.5),
}
MAX_ULP = 2  # measured: 1 for every function with FMA (host), 2 for log2 and erf without
EDGES = [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1.1754942e-38, 1.1754944e-38,
         -1.1754944e-38, 3.4028235e38, -3.4028235e38, 1.0, -1.0, 0.5, 2.0, 88.72283, 88.722839,
         89.0, -87.33654, -103.972084, -103.97209, -104.0, 128.0, 127.99999, -149.0, -150.0,
         0.625, -0.625, 0.62499994, 9.0, 9.1, -9.1, 4.0, 3.92, 0.99999994, -0.99999994,
         -0.9999999, 2.0 ** -24, -(2.0 ** -25), 1e-30, -1e-30]


def inputs(op: str, n: int, rng: np.random.Generator) -> np.ndarray:
    """Edge cases, then random bit patterns (every exponent, sign, subnormals, inf and NaN), values
    spread over the unsaturated range, and small magnitudes down to 1e-9."""
    _, lo, hi = REFERENCE[op]
    patterns = rng.integers(0, 2 ** 32, n // 2, dtype=np.uint64).astype(np.uint32).view(np.float32)
    spread = rng.uniform(lo, hi, n // 4).astype(np.float32)
    small = (rng.uniform(-1, 1, n // 4) * 10.0 ** rng.uniform(-9, 0, n // 4)).astype(np.float32)
    return np.concatenate([np.array(EDGES, np.float32), patterns, spread, small])


def ordered(x: np.ndarray) -> np.ndarray:
    """Float bits as integers that count ulps monotonically (+0 and -0 both map to 0)."""
    i = x.view(np.int32 if x.dtype == np.float32 else np.int16).astype(np.int64)
    return np.where(i < 0, -(i & 0x7FFFFFFF if x.dtype == np.float32 else i & 0x7FFF), i)


def ulp_errors(op: str, x: np.ndarray, got: np.ndarray, y: np.ndarray | None = None) -> np.ndarray:
    """ulps between ``got`` and the float64 reference (of x, or of x and y for pow) rounded to
    x's dtype; NaN where exactly one of them is NaN or where the sign of any value differs."""
    with np.errstate(all="ignore"):
        x64 = x.astype(np.float64)
        ref = (np.power(x64, y.astype(np.float64)) if op == "pow" else REFERENCE[op][0](x64)).astype(x.dtype)
    err = np.abs(ordered(got) - ordered(ref)).astype(np.float64)
    both_nan = np.isnan(got) & np.isnan(ref)
    err[both_nan] = 0
    err[(np.isnan(got) != np.isnan(ref)) | ((np.signbit(got) != np.signbit(ref)) & ~both_nan)] = np.nan
    return err


def math_kernel(ops: list[str], n: int, dtype: str) -> Kernel:
    """out_k[i] = op_k(in_k[i]): one input and one output binding per op."""
    ix = identity(1)
    bindings = tuple(Binding(dtype, (n,), "read") for _ in ops) + tuple(
        Binding(dtype, (n,), "write") for _ in ops)
    results = tuple(Result(len(ops) + k, ix, Unary(op, Load(k, ix, dtype), dtype))
                    for k, op in enumerate(ops))
    return Kernel("math", (n,), 1, bindings, results)


def worst(ops, xs, outs):
    return {op: float(np.max(ulp_errors(op, x, got))) for op, x, got in zip(ops, xs, outs)}


@pytest.mark.parametrize("cpu,n", [("host", 1 << 21), ("generic", 1 << 18)])
def test_f32_max_ulp_error(cpu, n):
    """2M points per function on this machine; the generic x86-64 build has no FMA."""
    ops = list(REFERENCE)
    rng = np.random.default_rng(70)
    xs = [inputs(op, n, rng) for op in ops]
    out = run(math_kernel(ops, len(xs[0]), "f32"), dict(enumerate(xs)), cpu=cpu)
    errors = worst(ops, xs, out[len(ops):])
    assert all(e <= MAX_ULP for e in errors.values()), f"max ulp error per function: {errors}"


def test_f16_every_value():
    """All 65536 f16 values, computed through f32: within 1 ulp of the rounded float64 result."""
    ops = list(REFERENCE)
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    out = run(math_kernel(ops, len(x), "f16"), {k: x for k in range(len(ops))})
    errors = worst(ops, [x] * len(ops), out[len(ops):])
    assert all(e <= 1 for e in errors.values()), f"max ulp error per function: {errors}"


def test_sigmoid_and_gelu_patterns():
    """1 / (1 + exp(-x)) and x/2 * (1 + erf(x / sqrt 2)) at an odd shape, against float64."""
    shape = (37, 53)
    ix = identity(2)
    x = Load(0, ix, "f32")
    f = lambda op, a, b: Binary(op, a, b, "f32")
    one = Const(1.0, "f32")
    sigmoid = f("div", one, f("add", one, Unary("exp", Unary("neg", x, "f32"), "f32")))
    gelu = f("mul", f("mul", x, Const(0.5, "f32")),
             f("add", one, Unary("erf", f("mul", x, Const(1 / math.sqrt(2), "f32")), "f32")))
    k = Kernel("act", shape, 2, (Binding("f32", shape, "read"),) + (Binding("f32", shape, "write"),) * 2,
               (Result(1, ix, sigmoid), Result(2, ix, gelu)))
    a = np.random.default_rng(71).uniform(-30, 30, shape).astype(np.float32)
    out = run(k, {0: a})
    a64 = a.astype(np.float64)
    np.testing.assert_allclose(out[1], 1 / (1 + np.exp(-a64)), rtol=3e-7, atol=1e-37)
    np.testing.assert_allclose(out[2], a64 / 2 * (1 + _erf(a64 / math.sqrt(2)).astype(np.float64)),
                               rtol=3e-7, atol=1e-7)


def test_matmul_epilogue_in_vector_mode():
    """tanh(A @ B) and exp(A @ B / 8): the contraction's epilogue is emitted on whole vectors."""
    rng = np.random.default_rng(72)
    a, b = rng.uniform(-1, 1, (37, 29)).astype(np.float32), rng.uniform(-1, 1, (29, 53)).astype(np.float32)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    base = matmul(37, 53, 29)
    for epilogue, fn in ((Unary("tanh", Acc(0, "f32"), "f32"), np.tanh),
                         (Unary("exp", Binary("mul", Acc(0, "f32"), Const(0.125, "f32"), "f32"), "f32"),
                          lambda v: np.exp(v / 8))):
        r = base.results[0]
        k = Kernel("mm_act", base.loop_ranges, base.num_parallel, base.bindings,
                   (Result(r.binding, r.index, r.value, init=r.init, epilogue=epilogue),))
        out = run(k, {0: a, 1: b})[2]
        np.testing.assert_allclose(out, fn(ref), rtol=2e-5, atol=2e-6)


POW_SPECIALS = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, 2.5, -2.5, np.inf, -np.inf,
                np.nan, 1e-45, -1e-45, 3.4e38, 16777216.0, 16777218.0, -8388609.0, 1e10]


@pytest.mark.parametrize("cpu,n", [("host", 1 << 20), ("generic", 1 << 17)])
def test_pow_max_ulp_error_and_special_cases(cpu, n):
    """Every pair of special values (C99 powf: signs of zeros, odd/even/non-integer y, inf,
    NaN), random bit patterns, x in [0, 10] with y in [-40, 40], and x < 0 with integer y."""
    rng = np.random.default_rng(73)
    sx, sy = np.meshgrid(np.array(POW_SPECIALS, np.float32), np.array(POW_SPECIALS, np.float32))
    patterns = lambda: rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    x = np.concatenate([sx.ravel(), patterns(), rng.uniform(0, 10, n).astype(np.float32),
                        -rng.uniform(0, 3, n).astype(np.float32)])
    y = np.concatenate([sy.ravel(), patterns(), rng.uniform(-40, 40, n).astype(np.float32),
                        np.round(rng.uniform(-60, 60, n)).astype(np.float32)])
    ix = identity(1)
    k = Kernel("pow", (len(x),), 1, (Binding("f32", x.shape, "read"),) * 2 + (Binding("f32", x.shape, "write"),),
               (Result(2, ix, Binary("pow", Load(0, ix, "f32"), Load(1, ix, "f32"), "f32")),))
    got = run(k, {0: x, 1: y}, cpu=cpu)[2]
    err = ulp_errors("pow", x, got, y)
    assert np.max(err) <= 1, [(x[i], y[i], got[i]) for i in np.nonzero(~(err <= 1))[0][:10]]


def tanh_assembly(cpu: str) -> str:
    n = 1000
    ix = identity(1)
    k = Kernel("tanh", (n,), 1, (Binding("f32", (n,), "read"), Binding("f32", (n,), "write")),
               (Result(1, ix, Unary("tanh", Load(0, ix, "f32"), "f32")),))
    target = resolve_target(cpu)
    module, _ = lower_kernels([k], target)
    return target.machine.emit_assembly(optimize(str(module), target))


@pytest.mark.parametrize("cpu,register", [("skylake-avx512", "[yz]mm"), ("haswell", "ymm"),
                                          ("generic", "xmm")])
def test_tanh_loop_is_vector_code_without_calls(cpu, register):
    asm = tanh_assembly(cpu)
    assert re.search(rf"\bv?fmadd\w*ps\s.*%{register}|\bv?mulps\s.*%{register}", asm), asm
    assert re.search(rf"\bv?divps\s.*%{register}", asm), asm
    assert "call" not in asm and "tanhf" not in asm and "expf" not in asm


@pytest.mark.parametrize("op", ["sin", "cos", "tan", "atan", "atan2"])
def test_trigonometry_is_vector_code_without_libm(op):
    """sin, cos, tan, atan and atan2 on f32 are math_expansion's formulas in vector code, not a
    libm call a lane; sin, cos and tan, in explicit vectors, branch around Payne-Hanek's
    reduction where no lane of a vector is huge (elementwise.py ``_rare_arms``)."""
    n = 1000
    ix = identity(1)
    x = Load(0, ix, "f32")
    e = Binary(op, x, Load(1, ix, "f32"), "f32") if op == "atan2" else Unary(op, x, "f32")
    reads = 2 if op == "atan2" else 1
    k = Kernel(op, (n,), 1, (Binding("f32", (n,), "read"),) * reads + (Binding("f32", (n,), "write"),),
               (Result(reads, ix, e),))
    target = resolve_target("haswell")
    module, _ = lower_kernels([k], target)
    optimized = optimize(str(module), target)
    asm = target.machine.emit_assembly(optimized)
    assert re.search(r"\bv?(fmadd\w*|mul)ps\s.*%ymm", asm), asm
    assert not re.search(r"call\w*\s+\w*(sin|cos|tan|atan)", asm)
    assert ("vector.reduce.or" in str(module)) is (op in ("sin", "cos", "tan"))


@pytest.mark.parametrize("float64", [True, False])
def test_gpu_math_expansions_on_cpu(float64):
    """The math the GPU targets compute (codegen/common/math_expansion, pow with and without f64
    inside), run here by llvm-cpu: within the GPU bounds of tests/e2e/test_math_ops.py, with
    exact special values. This checks the CUDA formulas without a GPU."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "e2e"))
    from test_math_ops import (
            GPU_ULP,
        binary_inputs,
        inputs,
        reference,
        special_mask,
        ulp_errors,
    )
    ix = identity(1)
    errors = {}
    for op in sorted(GPU_EXPANDED):
        if op in ("pow", "atan2"):
            args = binary_inputs(np.float32)
            e = Binary(op, Load(0, ix, "f32"), Load(1, ix, "f32"), "f32")
        else:
            args = (inputs(op, np.float32),)
            e = Unary(op, Load(0, ix, "f32"), "f32")
        n = len(args[0])
        bindings = tuple(Binding("f32", (n,), "read") for _ in args) + (Binding("f32", (n,), "write"),)
        k = Kernel("gpu_math", (n,), 1, bindings, (Result(len(args), ix, expand(e, float64)),))
        got = run(k, dict(enumerate(args)))[len(args)]
        errors[op] = float(np.max(ulp_errors(got, reference(op, *args), special_mask(*args))))
    bad = {op: v for op, v in errors.items() if not v <= GPU_ULP.get(op, 1)}
    assert not bad, f"over the bound: {bad}; all: {errors}"


RUN_TIME_TRIG = """func.func @main(%x: tensor<?x?xf32>) -> tensor<?x?xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %d0 = tensor.dim %x, %c0 : tensor<?x?xf32>
  %d1 = tensor.dim %x, %c1 : tensor<?x?xf32>
  %e = tensor.empty(%d0, %d1) : tensor<?x?xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<?x?xf32>) outs(%e : tensor<?x?xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = math.sin %a : f32
    %c = math.cos %a : f32
    %t = arith.addf %s, %c : f32
    linalg.yield %t : f32
  } -> tensor<?x?xf32>
  return %r : tensor<?x?xf32>
}"""


def test_trigonometry_with_run_time_sizes_and_huge_lanes():
    """sin + cos over run-time shapes whose rows are a vector's tail or several vectors, with a
    huge argument (Payne-Hanek's arm) in some vectors and none in others: numpy's answer."""
    import pyree.runtime as rt
    from pyree.compiler import CompileOptions, compile_str
    main = rt.load_module(compile_str(RUN_TIME_TRIG, CompileOptions(target_backends=["llvm-cpu"])),
                          device="local-task")["main"]
    rng = np.random.default_rng(5)
    for shape in [(1, 1), (3, 17), (7, 33), (2, 1000)]:
        x = (rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 3, shape)).astype(np.float32)
        x.flat[0], x.flat[-1] = np.float32(1e30), np.float32(-3e5)
        want = np.sin(x.astype(np.float64)) + np.cos(x.astype(np.float64))
        assert np.max(np.abs(main(x).to_host() - want)) <= 4e-7, shape
