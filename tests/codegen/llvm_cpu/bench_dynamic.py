"""Times llvm-cpu kernels with run-time sizes against the same kernels compiled for one size.

    python3 tests/codegen/llvm_cpu/bench_dynamic.py

One dynamic kernel (compiled once) and, per size, the static kernel of that size
(``kernel.bind_sizes``), each called straight through ctypes on one thread over all its
workgroups, best of many calls alternating the two; prints both times and their ratio for an f32
elementwise add and an f32 row sum. Not collected by pytest.
"""

import ctypes
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from llvmcpu_harness import Compiled, DispatchState, affine, identity, random_array
from pyree.compiler.kernel import Acc, Binary, Binding, Const, Kernel, Load, Result, bind_sizes
from pyree.compiler.sizes import Size

P0, P1 = Size.symbol("p0"), Size.symbol("p1")


def add_kernel() -> Kernel:
    ix = identity(1)
    return Kernel("add", (P0,), 1, tuple(Binding("f32", (P0,), a) for a in ("read", "read", "write")),
                  (Result(2, ix, Binary("add", Load(0, ix, "f32"), Load(1, ix, "f32"), "f32")),))


def row_sum_kernel() -> Kernel:
    return Kernel("row_sum", (P0, P1), 1, (Binding("f32", (P0, P1), "read"), Binding("f32", (P0,), "write")),
                  (Result(1, (affine(1, 0),), Binary("add", Acc(0, "f32"), Load(0, identity(2), "f32"), "f32"),
                          init=Const(0.0, "f32")),))


def caller(compiled: Compiled, buffers, push_constants):
    fn = compiled.function(0)
    n = len(buffers)
    ptrs = (ctypes.c_void_p * n)(*[b.ctypes.data for b in buffers])
    lens = (ctypes.c_uint64 * n)(*[b.nbytes for b in buffers])
    consts = (ctypes.c_uint32 * max(1, len(push_constants)))(*push_constants)
    state = DispatchState(ptrs, lens, n, len(push_constants), consts)
    count = compiled.workgroup_count(0, push_constants)
    return lambda: fn(ctypes.byref(state), 0, count)


def best_pair(a, b, seconds=3.0):
    """Best time per call of ``a`` and ``b``, alternating short batches for about ``seconds``:
    short, so that some run without being preempted on a shared machine."""
    a(), b()
    t = time.perf_counter()
    a()
    per = max(time.perf_counter() - t, 1e-7)
    batch = max(1, int(5e-4 / per))
    best = [float("inf")] * 2
    stop = time.perf_counter() + seconds
    while time.perf_counter() < stop:
        for k, fn in enumerate((a, b)):
            t = time.perf_counter()
            for _ in range(batch):
                fn()
            best[k] = min(best[k], (time.perf_counter() - t) / batch)
    return best


def main() -> None:
    rng = np.random.default_rng(0)
    for kernel, cases in ((add_kernel(), [(1000,), (100_003,), (4_000_037,)]),
                          (row_sum_kernel(), [(1000, 7), (256, 1000), (16, 100_003)])):
        dynamic = Compiled([kernel])
        for sizes in cases:
            params = {f"p{k}": n for k, n in enumerate(sizes)}
            static_kernel = bind_sizes(kernel, params)
            static = Compiled([static_kernel])
            buffers = [random_array(b.dtype, b.shape, rng) for b in static_kernel.bindings]
            t_dyn, t_static = best_pair(caller(dynamic, buffers, list(sizes)), caller(static, buffers, []))
            print(f"{kernel.name:8s} {str(sizes):16s} dynamic {t_dyn * 1e6:9.2f} us  "
                  f"static {t_static * 1e6:9.2f} us  ratio {t_dyn / t_static:5.2f}")


if __name__ == "__main__":
    main()
