"""The worker loop every llvm-cpu library carries (codegen/llvm_cpu/worker_loop.py), called
directly: the poster and worker threads together run each workgroup of a job exactly once, the
first nonzero status stays, an idle worker returns the generation it saw, a NULL job stops it."""

from __future__ import annotations

import ctypes
import threading
import time

import numpy as np
from llvmcpu_harness import Compiled, DispatchState, identity, random_array
from pyree.compiler.codegen.llvm_cpu import worker_loop as wl
from pyree.compiler.kernel import Binary, Binding, Kernel, Load, Result

SHAPE = (1031, 517)
U64 = ctypes.c_uint64


def add_kernel() -> Kernel:
    add = Binary("add", Load(0, identity(2), "f32"), Load(1, identity(2), "f32"), "f32")
    return Kernel("add", SHAPE, 2, (Binding("f32", SHAPE, "read"),) * 2 + (
        Binding("f32", SHAPE, "write"),), (Result(2, identity(2), add),))


class Loop:
    def __init__(self, compiled: Compiled):
        lib = compiled.lib
        self.post, self.run, self.worker = (getattr(lib, name) for name in (wl.POST, wl.RUN, wl.WORKER))
        self.post.argtypes = [ctypes.c_void_p] * 3 + [U64, U64]
        self.post.restype = None
        for fn in (self.run, self.worker):
            fn.argtypes, fn.restype = [ctypes.c_void_p, U64], U64
        self.job = (U64 * wl.JOB_FIELDS)()
        self.job[wl.IDLE_ROUNDS] = 200


def test_poster_and_worker_run_every_workgroup_once_and_keep_the_first_error():
    compiled = Compiled([add_kernel()])
    count = compiled.export(0).workgroupCount
    assert count >= 8
    loop = Loop(compiled)
    job = ctypes.addressof(loop.job)
    returns = []

    def work():   # as local-task's workers do, minus the sleep: back in after each idle return
        seen = 0
        while seen != wl.STOPPED:
            returns.append(seen := loop.worker(job, seen))

    worker = threading.Thread(target=work)
    worker.start()

    rng = np.random.default_rng(3)
    for trial, chunk in enumerate((1, 3, count // 8 + 1, count)):
        a, b = (random_array("f32", SHAPE, rng) for _ in range(2))
        a.flat[::997] = np.nan
        b.flat[5::1003] = np.inf
        out = np.full(SHAPE, -1.0, np.float32)
        buffers = [a, b, out]
        ptrs = (ctypes.c_void_p * 3)(*[x.ctypes.data for x in buffers])
        lens = (ctypes.c_uint64 * 3)(*[x.nbytes for x in buffers])
        state = DispatchState(ptrs, lens, 3 if trial != 2 else 2, 0, None)   # trial 2: bad bindings
        fn = ctypes.cast(compiled.function(0), ctypes.c_void_p)
        loop.post(job, fn, ctypes.addressof(state), count, chunk)
        while not loop.run(job, 100):
            pass
        assert loop.job[wl.FINISHED] == count and loop.job[wl.GENERATION] == trial + 1
        if trial == 2:
            assert loop.job[wl.STATUS] == 1 and np.all(out == -1.0)
        else:
            assert loop.job[wl.STATUS] == 0
            np.testing.assert_array_equal(out, a + b)

    time.sleep(0.05)   # longer than 200 idle rounds: the worker returns the generation it saw
    loop.post(job, None, None, 0, 1)
    worker.join(10)
    assert returns[-2:] == [4, wl.STOPPED] and returns == sorted(returns)
