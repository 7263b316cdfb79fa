"""Times llvm-cpu kernels called straight through ctypes on a 2-thread pool against numpy.

    python3 tests/codegen/llvm_cpu/bench_kernels.py

Prints best-of-N times and the ratio to numpy (OpenBLAS for the matmul) for: 1024^3 f32 matmul,
a fused chain of 4 elementwise ops over 16M f32, and each inline math function (plus a sigmoid)
over 16M f32. Not collected by pytest.

The math functions alternate one pyree call and one numpy call with 0.2 s idle in between:
back to back, numpy's and OpenBLAS's worker threads and this VM's noise skew the timings.
erf has no numpy ufunc; it is timed against scipy.special.erf where scipy is installed.
"""

import ctypes
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from llvmcpu_harness import Compiled, DispatchState, identity, matmul
from pyree.compiler.kernel import Binary, Binding, Const, Kernel, Load, Result, Unary

THREADS = 2
SIZE = 16 * 1024 * 1024


def best_time(fn, repeats=10):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def interleaved_best(ours, reference, repeats=7, idle=0.2):
    """Best times of ``ours`` and ``reference``, called alternately with ``idle`` s between."""
    ours(), reference()
    best = [float("inf"), float("inf")]
    for _ in range(repeats):
        for k, fn in enumerate((ours, reference)):
            time.sleep(idle)
            t = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t)
    return best


def math_references():
    """op -> (numpy f32 function with out=, input range)."""
    refs = {"exp": (np.exp, -80, 80), "exp2": (np.exp2, -120, 120), "expm1": (np.expm1, -10, 10),
            "log": (np.log, 1e-3, 1e3), "log2": (np.log2, 1e-3, 1e3), "log1p": (np.log1p, -0.9, 1e3),
            "tanh": (np.tanh, -6, 6)}
    try:
        from scipy.special import erf
        refs["erf"] = (erf, -4, 4)
    except ImportError:
        print("erf: skipped, scipy is not installed (numpy has no erf)")
    return refs


POW_EXPONENTS = np.random.default_rng(1).uniform(-8, 8, SIZE).astype(np.float32)


def math_kernel(name, expr_of):
    """out = expr_of(load of x); binding 1 holds the exponents of pow, unused otherwise."""
    ix = identity(1)
    bindings = (Binding("f32", (SIZE,), "read"),) * 2 + (Binding("f32", (SIZE,), "write"),)
    return Kernel(name, (SIZE,), 1, bindings, (Result(2, ix, expr_of(Load(0, ix, "f32"))),))


def bench_math(rng):
    y, ref = np.empty(SIZE, np.float32), np.empty(SIZE, np.float32)
    cases = [(op, lambda v, op=op: Unary(op, v, "f32"), lambda x, out, f=fn: f(x, out=out), lo, hi)
             for op, (fn, lo, hi) in math_references().items()]
    cases.append(("pow(x, y) with x in [0.01, 4], y in [-8, 8]",
                  lambda v: Binary("pow", v, Load(1, identity(1), "f32"), "f32"),
                  lambda x, out: np.power(x, POW_EXPONENTS, out=out), 0.01, 4))
    cases.append(("sigmoid 1/(1+exp(-x))",
                  lambda v: Binary("div", Const(1.0, "f32"), Binary("add", Const(1.0, "f32"),
                                   Unary("exp", Unary("neg", v, "f32"), "f32"), "f32"), "f32"),
                  _numpy_sigmoid, -20, 20))
    for name, expr_of, reference, lo, hi in cases:
        x = rng.uniform(lo, hi, SIZE).astype(np.float32)
        compiled = Compiled([math_kernel("math", expr_of)])
        ours, theirs = interleaved_best(pool_call(compiled, [x, POW_EXPONENTS, y]),
                                        lambda x=x, reference=reference: reference(x, ref))
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-30)
        report(f"{name}, 16M f32", ours, theirs)


def _numpy_sigmoid(x, out):
    np.negative(x, out=out)
    np.exp(out, out=out)
    out += 1
    np.reciprocal(out, out=out)


def pool_call(compiled, buffers):
    """One dispatch: workgroups split into THREADS contiguous chunks, one thread each."""
    fn = compiled.function(0)
    count = compiled.export(0).workgroupCount
    ptrs = (ctypes.c_void_p * len(buffers))(*[b.ctypes.data for b in buffers])
    lens = (ctypes.c_uint64 * len(buffers))(*[b.nbytes for b in buffers])
    state = DispatchState(ptrs, lens, len(buffers), 0, None)
    chunk = -(-count // THREADS)

    def dispatch():
        threads = [threading.Thread(target=fn, args=(ctypes.byref(state), s, min(count, s + chunk)))
                   for s in range(0, count, chunk)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    return dispatch


def report(name, ours, reference):
    print(f"{name}: pyree {ours * 1e3:.2f} ms, numpy {reference * 1e3:.2f} ms, "
          f"numpy/pyree = {reference / ours:.2f}")


def main():
    rng = np.random.default_rng(0)
    n = 1024
    a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
    c = np.empty((n, n), np.float32)
    compiled = Compiled([matmul(n, n, n)])
    ours = best_time(pool_call(compiled, [a, b, c]))
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    report(f"matmul {n}^3 f32 ({compiled.export(0).workgroupCount} workgroups)", ours, best_time(lambda: a @ b))

    x, y = rng.random(SIZE, dtype=np.float32), np.empty(SIZE, np.float32)
    ix = identity(1)
    ld = Load(0, ix, "f32")
    chain = Binary("max", Binary("mul", Binary("add", Binary("mul", ld, Const(2.0, "f32"), "f32"),
                                               Const(1.0, "f32"), "f32"), ld, "f32"), Const(0.5, "f32"), "f32")
    kernel = Kernel("chain", (SIZE,), 1, (Binding("f32", (SIZE,), "read"), Binding("f32", (SIZE,), "write")),
                    (Result(1, ix, chain),))
    compiled = Compiled([kernel])
    ours = best_time(pool_call(compiled, [x, y]))
    np.testing.assert_allclose(y, np.maximum((x * 2 + 1) * x, 0.5), rtol=1e-6)
    report("4 fused elementwise ops, 16M f32", ours, best_time(lambda: np.maximum((x * 2 + 1) * x, 0.5)))
    bench_math(rng)


if __name__ == "__main__":
    main()
