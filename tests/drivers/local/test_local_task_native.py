"""local-task's native worker loop, the one the llvm-cpu compiler emits into each kernel library:
split dispatches against numpy (NaN, inf), a command buffer's dispatches in one native call
(each reading the one before), a kernel's error status, libraries unloaded while workers still
poll inside their loop, and libraries without the loop (older compilers)."""

from __future__ import annotations

import gc
import os
import re
import threading
import time

import numpy as np
import pyree.runtime as rt
import pytest
from codegen.llvm_cpu.llvmcpu_harness import Compiled, identity, matmul, random_array
from pyree.compiler import compile_str
from pyree.compiler.codegen import llvm_cpu
from pyree.compiler.kernel import Binary, Binding, Load, Result
from pyree.compiler.kernel import Kernel as IrKernel
from pyree.runtime.drivers.local.allocator import HostBuffer
from pyree.runtime.drivers.local.command_buffer import DispatchRun
from pyree.runtime.drivers.local.executable import CpuLibrary
from pyree.runtime.drivers.local_task.device import LocalTaskDevice
from pyree.runtime.drivers.local_task.workers import IDLE_ROUNDS, NativeWorkers
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.hal.python_driver import Binding as HalBinding
from pyree.runtime.hal.python_driver import Command, ExecutableParams, Export, HalError

pytestmark = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores for workers")

M, N, K = 131, 301, 263     # a matmul of many workgroups with ragged edges
ROWS, COLS = 1031, 517      # an elementwise dispatch of many workgroups

PROGRAM = f"""
func.func @main(%a: tensor<{M}x{K}xf32>, %b: tensor<{K}x{N}xf32>, %x: tensor<{ROWS}x{COLS}xf32>,
                %y: tensor<{ROWS}x{COLS}xf32>) -> (tensor<{M}x{N}xf32>, tensor<{ROWS}x{COLS}xf32>) {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{M}x{N}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %mm = linalg.matmul ins(%a, %b : tensor<{M}x{K}xf32>, tensor<{K}x{N}xf32>)
                      outs(%f : tensor<{M}x{N}xf32>) -> tensor<{M}x{N}xf32>
  %s = arith.addf %x, %y : tensor<{ROWS}x{COLS}xf32>
  %p = arith.mulf %s, %x : tensor<{ROWS}x{COLS}xf32>
  return %mm, %p : tensor<{M}x{N}xf32>, tensor<{ROWS}x{COLS}xf32>
}}
"""


@pytest.fixture(scope="module")
def program() -> bytes:
    return compile_str(PROGRAM, target_backends=["llvm-cpu"],
                       extra_args=["--iree-llvmcpu-target-cpu=host"])


def inputs(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in ((M, K), (K, N)))
    x, y = (rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2))
    a[3, 7], b[11, 5], b[20, 300] = np.nan, np.inf, -np.inf
    x.flat[[0, 999, x.size - 1]] = [np.nan, np.inf, -0.0]
    y.flat[[5, 999, 77777]] = [-np.inf, -np.inf, np.inf]
    return [a, b, x, y]


def check(module, seed: int) -> None:
    a, b, x, y = inputs(seed)
    mm, p = module.main(a, b, x, y)
    with np.errstate(invalid="ignore", over="ignore"):
        np.testing.assert_allclose(mm.to_host(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-3)
        np.testing.assert_array_equal(p.to_host(), (x + y) * x)


@pytest.fixture
def native_runs(monkeypatch) -> list[list[int]]:
    """Per native execute from now on, the workgroup counts of its dispatches."""
    runs, original = [], NativeWorkers.execute

    def spy(self, loop, records, n):
        runs.append([records[i * 4 + 2] for i in range(n)])
        return original(self, loop, records, n)

    monkeypatch.setattr(NativeWorkers, "execute", spy)
    return runs


def test_split_dispatches_match_numpy_between_sleeps(program, native_runs):
    """Calls back to back and after the workers fell asleep, alternating inputs: every workgroup
    of every split dispatch runs once, with the right dispatch's buffers."""
    module = rt.load_module(program, device="local-task")
    for seed in range(40):
        if seed % 10 == 9:
            time.sleep(4 * IDLE_ROUNDS * 1e-6 + 0.01)   # past the workers' idle time
        check(module, seed % 3)
    assert len(native_runs) == 40   # one native call per call, both dispatches in it
    assert all(len(counts) == 2 and min(counts) > 1 for counts in native_runs)


CHAIN_ROWS, CHAIN_COLS = 67, 389   # a few workgroups each; the 1x7 steps are one workgroup

CHAIN = f"""
func.func @main(%a: tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>, %w: tensor<{CHAIN_COLS}x{CHAIN_COLS}xf32>,
                %v: tensor<1x7xf32>)
    -> (tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>, tensor<1x7xf32>) {{
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>)
       -> tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>
  %m1 = linalg.matmul ins(%a, %w : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>,
                                   tensor<{CHAIN_COLS}x{CHAIN_COLS}xf32>)
                      outs(%f : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>)
        -> tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>
  %t1 = math.tanh %m1 : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>
  %v1 = arith.mulf %v, %v : tensor<1x7xf32>
  %m2 = linalg.matmul ins(%t1, %w : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>,
                                    tensor<{CHAIN_COLS}x{CHAIN_COLS}xf32>)
                      outs(%f : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>)
        -> tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>
  %v2 = arith.addf %v1, %v : tensor<1x7xf32>
  %t2 = math.tanh %m2 : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>
  %s = arith.subf %t2, %t1 : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>
  return %s, %v2 : tensor<{CHAIN_ROWS}x{CHAIN_COLS}xf32>, tensor<1x7xf32>
}}
"""


def test_chained_dispatches_in_one_native_call_match_numpy(native_runs):
    """Dispatches that each read the one before, split ones and one-workgroup ones, run in one
    native call: each starts only once the one before has finished (else a matmul reads a
    half-written tanh), on local-task exactly as on local-sync."""
    data = compile_str(CHAIN, target_backends=["llvm-cpu"],
                       extra_args=["--iree-llvmcpu-target-cpu=host"])
    task = rt.load_module(data, device="local-task")
    sync = rt.load_module(data, device="local-sync")
    rng = np.random.default_rng(5)
    for seed in range(12):
        a = rng.standard_normal((CHAIN_ROWS, CHAIN_COLS)).astype(np.float32)
        w = (rng.standard_normal((CHAIN_COLS, CHAIN_COLS)) / 20).astype(np.float32)
        v = rng.standard_normal((1, 7)).astype(np.float32)
        a[seed, :3] = [np.nan, np.inf, -np.inf]
        v[0, :3] = [np.nan, -np.inf, -0.0]
        if seed % 4 == 3:
            time.sleep(4 * IDLE_ROUNDS * 1e-6 + 0.01)   # the workers asleep
        s, v2 = (x.to_host() for x in task.main(a, w, v))
        with np.errstate(invalid="ignore", over="ignore"):
            t1 = np.tanh(a.astype(np.float64) @ w)
            expected = np.tanh(t1 @ w) - t1
            np.testing.assert_allclose(s, expected, rtol=1e-4, atol=1e-5)
            np.testing.assert_array_equal(v2, v * v + v)
        for got, want in zip(task.main(a, w, v), sync.main(a, w, v)):
            np.testing.assert_array_equal(got.to_host(), want.to_host())
    assert native_runs and min(len(counts) for counts in native_runs) >= 3   # matmul+tanh twice
    assert all(1 in counts and max(counts) > 1 for counts in native_runs)


def library(kernels, with_loop: bool = True) -> CpuLibrary:
    """``kernels`` compiled by llvm-cpu and loaded as local-task loads them; without the worker
    loop, as an older compiler built them."""
    with pytest.MonkeyPatch.context() as patch:
        if not with_loop:
            patch.setattr(llvm_cpu, "emit_worker_loop", lambda module: None)
        compiled = Compiled(kernels)
    cpu = compiled.executable.cpu
    exports = tuple(Export(e.symbol, (e.workgroupCount, 1, 1), (1, 1, 1), 0,
                           tuple(b.num_bytes for b in kernel.bindings))
                    for e, kernel in zip(cpu.exports, kernels))
    return CpuLibrary(ExecutableParams("cpu", "elf-x86_64", compiled.so, "", b"", exports))


def add_kernel() -> IrKernel:
    shape = (ROWS, COLS)
    add = Binary("add", Load(0, identity(2), "f32"), Load(1, identity(2), "f32"), "f32")
    return IrKernel("add", shape, 2, (Binding("f32", shape, "read"),) * 2 + (
        Binding("f32", shape, "write"),), (Result(2, identity(2), add),))


def run_add(device, lib: CpuLibrary, seed: int, binding_count: int = 3) -> int:
    rng = np.random.default_rng(seed)
    a, b = (random_array("f32", (ROWS, COLS), rng) for _ in range(2))
    a.flat[::1001] = np.nan
    out = np.full((ROWS, COLS), np.nan, np.float32)
    buffers = [a, b, out]
    pointers = ffi.new("void *[]", [ffi.cast("void *", x.ctypes.data) for x in buffers])
    lengths = ffi.new("uint64_t[]", [x.nbytes for x in buffers])
    state = ffi.new("pyree_cpu_dispatch_state_t *")
    state.bindings, state.binding_lengths, state.binding_count = pointers, lengths, binding_count
    status = device.run_workgroups(lib.kernels[0], state)
    if status == 0:
        np.testing.assert_array_equal(out, a + b)
    return status


def test_kernel_error_status_reaches_the_caller():
    lib = library([add_kernel()])
    assert lib.kernels[0].loop is not None and lib.kernels[0].workgroup_count >= 8
    device = LocalTaskDevice()
    try:
        assert run_add(device, lib, 0) == 0
        assert run_add(device, lib, 1, binding_count=2) == 1   # every chunk: too few bindings
        assert run_add(device, lib, 2) == 0   # the next dispatch starts clean
        assert device._native is not None
    finally:
        device.release()


def test_failed_kernel_in_a_native_run_stops_the_run():
    """A run of four adds, out = x + y then out2 = out + y, ...: the third fails (too few
    bindings), so the error names it, the first two have run and the fourth has not."""
    lib = library([add_kernel()])
    nbytes = ROWS * COLS * 4
    arrays = [np.full((ROWS, COLS), np.nan, np.float32) for _ in range(5)]
    rng = np.random.default_rng(9)
    arrays[0][:] = random_array("f32", (ROWS, COLS), rng)
    arrays[0].flat[::1009] = np.inf
    table = [HostBuffer(nbytes, x.ctypes.data, alignment=4) for x in arrays]
    commands = [(i, Command("dispatch", lib, 0, (HalBinding(i, 0, nbytes), HalBinding(0, 0, nbytes),
                                                 HalBinding(i + 1, 0, nbytes)), (), 0, 0))
                for i in range(4)]
    device = LocalTaskDevice()
    try:
        run = DispatchRun(commands)
        states, _addresses = run.states(table)
        device.run_dispatches(run, states)
        assert run.native   # through the worker loop's execute
        for i in range(1, 5):
            np.testing.assert_array_equal(arrays[i], arrays[0] * (i + 1))
        for x in arrays[1:]:
            x[:] = np.nan
        states, _addresses = run.states(table)
        bad = ffi.new("pyree_cpu_dispatch_state_t[]", 4)   # kept states are not to be written
        ffi.memmove(bad, states, ffi.sizeof(bad))
        bad[2].binding_count = 2
        with pytest.raises(HalError, match="kernel 'pyree_k0_add' returned error status 1"):
            device.run_dispatches(run, bad)
        np.testing.assert_array_equal(arrays[2], arrays[0] * 3)
        assert np.isnan(arrays[3]).all() and np.isnan(arrays[4]).all()
        states, _addresses = run.states(table)
        device.run_dispatches(run, states)   # the next run starts clean
        np.testing.assert_array_equal(arrays[4], arrays[0] * 5)
    finally:
        device.release()


def test_run_states_are_kept_for_the_same_buffers_only():
    """A run's states come back for a table of the same buffers; another buffer in a slot gets
    states with its address, and one too small is refused even right after a good table."""
    lib = library([add_kernel()])
    nbytes = ROWS * COLS * 4
    arrays = [np.zeros((ROWS, COLS), np.float32) for _ in range(4)]
    table = [HostBuffer(nbytes, x.ctypes.data, alignment=4) for x in arrays[:3]]
    run = DispatchRun([(0, Command("dispatch", lib, 0, tuple(HalBinding(i, 0, nbytes)
                                                            for i in range(3)), (), 0, 0))])
    states, _addresses = run.states(table)   # the addresses must outlive the states
    assert run.states(list(table))[0] is states
    other = table[:2] + [HostBuffer(nbytes, arrays[3].ctypes.data, alignment=4)]
    fresh, _fresh_addresses = run.states(other)
    assert fresh is not states and fresh[0].bindings[2] == ffi.cast("void *", arrays[3].ctypes.data)
    assert states[0].bindings[2] == ffi.cast("void *", arrays[2].ctypes.data)
    small = table[:2] + [HostBuffer(nbytes - 4, arrays[3].ctypes.data, alignment=4)]
    with pytest.raises(HalError, match=re.escape(f"command 0 (dispatch) binding 2: bytes [0, "
                                                 f"+{nbytes}) lie outside a {nbytes - 4}-byte")):
        run.states(small)
    with pytest.raises(HalError, match=re.escape("command 0 (dispatch) binding 1: slot 1 has no")):
        run.states([table[0], None, table[2]])


def test_library_without_the_loop_runs_on_python_threads_then_through_another_loop():
    """A library from a compiler without the loop: Python workers until a library with one is
    loaded, then that library's loop (which runs any library's kernels)."""
    old = library([add_kernel()], with_loop=False)
    assert old.kernels[0].loop is None
    device = LocalTaskDevice()
    try:
        for seed in range(3):
            assert run_add(device, old, seed) == 0
        assert device._native is None and device._pool is not None
        new = library([matmul(M, N, K)])
        rng = np.random.default_rng(0)
        a, b = (random_array("f32", s, rng) for s in ((M, K), (K, N)))
        out = np.zeros((M, N), np.float32)
        pointers = ffi.new("void *[]", [ffi.cast("void *", x.ctypes.data) for x in (a, b, out)])
        lengths = ffi.new("uint64_t[]", [x.nbytes for x in (a, b, out)])
        state = ffi.new("pyree_cpu_dispatch_state_t *")
        state.bindings, state.binding_lengths, state.binding_count = pointers, lengths, 3
        assert device.run_workgroups(new.kernels[0], state) == 0
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
        assert device._native is not None
        for seed in range(3):
            assert run_add(device, old, seed) == 0   # through the new library's loop
    finally:
        device.release()


def mapped_libraries() -> set[str]:
    """The kernel libraries mapped into this process, by inode."""
    with open("/proc/self/maps") as maps:
        return {line.split()[4] for line in maps if "pyree-cpu-executable" in line}


def test_library_unloaded_while_workers_poll_inside_its_loop(program):
    """A module dropped right after its last call, while the workers still poll inside its
    library's loop, and another module's calls at once: the first library stays mapped until the
    workers leave its code, then unloads; nothing crashes and every answer is right. (Without
    the workers' hold on the library, two runs in three crashed.)"""
    second = rt.load_module(program, device="local-task")
    for attempt in range(4):
        before = mapped_libraries()
        first = rt.load_module(program, device="local-task")
        check(first, attempt)
        first_library = mapped_libraries() - before
        assert len(first_library) == 1
        check(second, 1)
        check(first, 2)    # the workers are inside the first library's loop now
        del first
        gc.collect()
        for seed in range(3):
            check(second, seed)   # the device moves to the second library's loop
        deadline = time.monotonic() + 5
        while first_library & mapped_libraries() and time.monotonic() < deadline:
            time.sleep(0.01)   # the workers go idle, leave the loop and sleep
            gc.collect()
        assert not first_library & mapped_libraries()
    check(second, 3)


def test_device_release_stops_native_workers():
    before = threading.active_count()
    lib = library([add_kernel()])
    device = LocalTaskDevice()
    assert run_add(device, lib, 0) == 0
    time.sleep(0.05)   # asleep
    device.release()
    deadline = time.monotonic() + 5
    while threading.active_count() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert threading.active_count() == before
