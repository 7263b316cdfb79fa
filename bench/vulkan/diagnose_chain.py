"""Chained calls on the vulkan driver (each call reads the previous call's result before it is
finished): which submission path gives wrong numbers. Prints, per variant, how many of N chains
of 12 calls end wrong. Run on a GPU host (tests/drivers/vulkan/device_setup.sh first)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import numerics_cases as C  # noqa: E402
import pyree.runtime as rt  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402

SHAPE = (37, 53)
VMFB = compile_str(C.add(SHAPE).mlir, CompileOptions(target_backends=["vulkan-spirv"]))


def chain(functions, sync: bool, calls: int = 12) -> bool:
    rng = np.random.default_rng()
    a, b = C.rand(rng, SHAPE), C.rand(rng, SHAPE)
    dev = MODULES[0].device
    result, db = rt.asdevicearray(dev, a), rt.asdevicearray(dev, b)
    for i in range(calls):
        result = functions[i % len(functions)](result, db)
        if sync:
            result.to_host()
    got = result.to_host()
    return np.allclose(got, a.astype(np.float64) + calls * b.astype(np.float64), rtol=1e-5, atol=1e-5)


MODULES = [rt.load_module(VMFB, device="vulkan") for _ in range(2)]
FUNCS = [m[m.function_names[0]] for m in MODULES]


def run(name, functions, sync=False, n=20):
    wrong = sum(not chain(functions, sync) for _ in range(n))
    print(f"{name:48s} wrong {wrong}/{n}", flush=True)


run("one function", FUNCS[:1])
run("two modules alternating", FUNCS)
run("two modules alternating, to_host after each", FUNCS, sync=True)
from pyree.hal.vulkan import command_buffer, semaphore  # noqa: E402

command_buffer.RECORDINGS_PER_FUNCTION = 1
run("two modules, one recording per function", FUNCS)
command_buffer.RECORDINGS_PER_FUNCTION = 4
semaphore.VulkanSemaphore.queued_value = property(lambda self: 0, lambda self, v: None)
run("two modules, every wait kept on the device", FUNCS)
