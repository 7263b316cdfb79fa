"""The worker loop every llvm-cpu library carries (codegen/llvm_cpu/worker_loop.py), called
directly: the poster and worker threads together run each workgroup of a job exactly once, the
first nonzero status stays, an idle worker returns the generation it saw (not while BUSY), a NULL
job stops it; execute runs a list of dispatches in order and stops at the first that fails."""

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
        self.post, self.run, self.worker, self.execute = (getattr(lib, name) for name in (
            wl.POST, wl.RUN, wl.WORKER, wl.EXECUTE))
        self.post.argtypes = [ctypes.c_void_p] * 3 + [U64, U64]
        self.post.restype = None
        for fn in (self.run, self.worker):
            fn.argtypes, fn.restype = [ctypes.c_void_p, U64], U64
        self.execute.argtypes, self.execute.restype = [ctypes.c_void_p, ctypes.c_void_p, U64], U64
        self.job = (U64 * wl.JOB_FIELDS)()
        self.job[wl.IDLE_ROUNDS] = 200
        self.returns: list[int] = []

    def start_worker(self) -> threading.Thread:
        """A worker as local-task runs one, minus the sleep: back in after each idle return."""
        def work():
            seen = 0
            while seen != wl.STOPPED:
                self.returns.append(seen := self.worker(ctypes.addressof(self.job), seen))

        thread = threading.Thread(target=work, daemon=True)  # a failed test must not hang the exit
        thread.start()
        return thread

    def stop(self, thread: threading.Thread) -> None:
        self.post(ctypes.addressof(self.job), None, None, 0, 1)
        thread.join(10)
        assert not thread.is_alive()


def test_poster_and_worker_run_every_workgroup_once_and_keep_the_first_error():
    compiled = Compiled([add_kernel()])
    count = compiled.export(0).workgroupCount
    assert count >= 8
    loop = Loop(compiled)
    job = ctypes.addressof(loop.job)
    worker = loop.start_worker()

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

    deadline = time.monotonic() + 10  # 200 idle rounds: the worker returns the generation it
    while 4 not in loop.returns and time.monotonic() < deadline:  # saw (a loaded machine may
        time.sleep(0.01)                                           # take a while to get there)
    loop.stop(worker)
    assert loop.returns[-2:] == [4, wl.STOPPED] and loop.returns == sorted(loop.returns)


def test_execute_runs_dispatches_in_order_and_stops_at_the_first_failure():
    """Five adds, each reading the one before (x1 = x0 + b, x2 = x1 + b, ...), as posted jobs
    and one-chunk ones run on the calling thread: every result right, so each started after the
    one before finished; with the fourth's bindings wrong, execute returns 3 with its status
    and the fifth has not run. While BUSY is set an idle worker stays in the loop."""
    compiled = Compiled([add_kernel()])
    count = compiled.export(0).workgroupCount
    loop = Loop(compiled)
    job = ctypes.addressof(loop.job)
    worker = loop.start_worker()
    fn = ctypes.cast(compiled.function(0), ctypes.c_void_p).value
    rng = np.random.default_rng(4)
    b = random_array("f32", SHAPE, rng)
    b.flat[::991] = np.nan
    xs = [random_array("f32", SHAPE, rng)] + [np.empty(SHAPE, np.float32) for _ in range(5)]
    xs[0].flat[7::1013] = -np.inf
    keep = []

    def state(i: int, bindings: int = 3) -> int:
        buffers = [xs[i], b, xs[i + 1]]
        ptrs = (ctypes.c_void_p * 3)(*[x.ctypes.data for x in buffers])
        lens = (U64 * 3)(*[x.nbytes for x in buffers])
        keep.append(s := DispatchState(ptrs, lens, bindings, 0, None))
        return ctypes.addressof(s)

    for bad in (None, 3, 1):   # 1 runs on the calling thread
        for x in xs[1:]:
            x.fill(-1.0)
        chunks = [1, count, 3, count // 2, 2]   # count: one chunk, on this thread
        records = (U64 * (wl.DISPATCH_FIELDS * 5))(*[v for i, chunk in enumerate(chunks) for v in (
            fn, state(i, 2 if i == bad else 3), count, chunk)])
        done = loop.execute(job, ctypes.addressof(records), 5)
        expected = xs[0]
        for i in range(1, 6):
            expected = expected + b
            if bad is None or i <= bad:
                np.testing.assert_array_equal(xs[i], expected)
            else:
                assert np.all(xs[i] == -1.0)
        assert (done, loop.job[wl.STATUS]) == ((5, 0) if bad is None else (bad, 1))

    loop.job[wl.BUSY] = 1
    time.sleep(0.01)   # a worker that read BUSY as 0 just before may still return once
    returned = len(loop.returns)
    time.sleep(0.05)   # longer than 200 idle rounds
    assert len(loop.returns) == returned
    loop.job[wl.BUSY] = 0
    deadline = time.monotonic() + 10   # 200 idle rounds, however long a loaded machine takes
    while len(loop.returns) == returned and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(loop.returns) > returned
    loop.stop(worker)
