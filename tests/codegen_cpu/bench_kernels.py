"""Times llvm-cpu kernels called straight through ctypes on a 2-thread pool against numpy.

    python3 tests/codegen_cpu/bench_kernels.py

Prints best-of-N times and the ratio to numpy (OpenBLAS for the matmul) for: 1024^3 f32 matmul
and a fused chain of 4 elementwise ops over 16M f32. Not collected by pytest.
"""

import ctypes
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from llvmcpu_harness import Compiled, DispatchState, identity, matmul
from pyree.compiler.kernel import Binary, Binding, Const, Kernel, Load, Result

THREADS = 2


def best_time(fn, repeats=10):
    fn()
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


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

    size = 16 * 1024 * 1024
    x, y = rng.random(size, dtype=np.float32), np.empty(size, np.float32)
    ix = identity(1)
    ld = Load(0, ix, "f32")
    chain = Binary("max", Binary("mul", Binary("add", Binary("mul", ld, Const(2.0, "f32"), "f32"),
                                               Const(1.0, "f32"), "f32"), ld, "f32"), Const(0.5, "f32"), "f32")
    kernel = Kernel("chain", (size,), 1, (Binding("f32", (size,), "read"), Binding("f32", (size,), "write")),
                    (Result(1, ix, chain),))
    compiled = Compiled([kernel])
    ours = best_time(pool_call(compiled, [x, y]))
    np.testing.assert_allclose(y, np.maximum((x * 2 + 1) * x, 0.5), rtol=1e-6)
    report("4 fused elementwise ops, 16M f32", ours, best_time(lambda: np.maximum((x * 2 + 1) * x, 0.5)))


if __name__ == "__main__":
    main()
