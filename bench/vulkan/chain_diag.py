"""The chained-call wrong answer on NVIDIA's Vulkan driver (GPU host). Chains of 12 adds
``r = r + b`` from ``r = a`` alternate between two modules; each call reads the last call's
unfinished result. ``python3 chain_diag.py VARIANT TRIALS`` runs TRIALS chains in this process
and prints how many ended wrong, and for the first wrong ones k = (got - a) / b where wrong
(a is about 100, b about t % 5 + 1: k about 11 - 100 / b means a chunk restarted from zero).
chain_diag_run.sh runs each variant in many processes (the failure is about once per process)."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))
import numerics_cases as C  # noqa: E402
import pyree.runtime as rt  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402

SHAPE = (37, 53)
LOG: list = []      # fill variants: per new buffer, what the first mapped results held then
MAPPED: list = []


def patch(variant: str, device) -> None:
    """The driver change a variant tries (device: the driver's VulkanDevice)."""
    from pyree.hal.vulkan import command_buffer, semaphore
    if variant == "waits-kept":  # every semaphore wait passed to vkQueueSubmit
        semaphore.VulkanSemaphore.queued_value = property(lambda self: 0, lambda self, v: None)
    elif variant in ("sleep-after-alloc", "idle-after-alloc"):  # fresh memory left to settle
        import time
        create = device.allocator.create

        def settled(size, host_visible=False):
            buffer = create(size, host_visible)
            if variant == "sleep-after-alloc":
                time.sleep(0.2)
            else:
                device.vk.vkDeviceWaitIdle(device.device)
            return buffer
        device.allocator.create = settled
    elif variant == "uncached-host":  # mapped buffers from a host-visible type without caching
        from pyree.hal.vulkan import allocator
        pick = allocator._pick_type

        def no_cached(types, allowed, want, avoid=0):
            if want & allocator.HOST_CACHED:
                return None
            return pick(types, allowed, want, avoid | allocator.HOST_CACHED)
        allocator._pick_type = no_cached
    elif variant == "idle-after-record":  # a new recording waits for the queue to drain
        record = command_buffer.CommandBuffer._record

        def record_then_idle(self, table, query_pool=0):
            recording = record(self, table, query_pool)
            device.vk.vkDeviceWaitIdle(device.device)
            return recording
        command_buffer.CommandBuffer._record = record_then_idle
    elif variant in ("fill-new", "fill-ones"):  # each new buffer filled on the queue, waited
        create = device.allocator.create
        pattern = 0 if variant == "fill-new" else 0x3F800000  # 1.0f
        LOG.append([])

        def filled(size, host_visible=False):
            buffer = create(size, host_visible)
            from pyree.hal.vulkan.device import STYPE_COMMAND_BUFFER_BEGIN, USAGE_ONE_TIME
            from pyree.hal.vulkan.symbols import ffi
            if device._transfer is None:
                device._transfer = device.allocate_command_buffer()
            cb = device._transfer
            begin = ffi.new("VkCommandBufferBeginInfo *", {"sType": STYPE_COMMAND_BUFFER_BEGIN,
                                                           "flags": USAGE_ONE_TIME})
            device.vk.vkBeginCommandBuffer(cb, begin)
            command_buffer.full_barrier(device.vk, cb)
            device.vk.vkCmdFillBuffer(cb, buffer.handle, 0, (1 << 64) - 1, pattern)
            command_buffer.full_barrier(device.vk, cb)
            device.vk.vkEndCommandBuffer(cb)
            device.wait_for(device._submit(cb, [], []))
            if buffer.mapped is not None and size == 7844:
                MAPPED.append(buffer)
            # what the first mapped results hold now (the queue is idle): zeros, ones, other
            view = [np.frombuffer(ffi.buffer(m.mapped, 7844), np.float32) for m in MAPPED[:3]]
            LOG[-1].append((buffer.serial, size, host_visible,
                            [(int((v == 0).sum()), int((v == 1).sum())) for v in view]))
            return buffer
        device.allocator.create = filled
    elif variant == "big-blocks":  # every allocation at least 64 KiB
        from pyree.hal.vulkan import allocator
        create = allocator.Allocator.create

        def big(self, size, host_visible=False):
            buffer = create(self, max(size, 64 << 10), host_visible)
            buffer.size = size
            return buffer
        allocator.Allocator.create = big
    elif variant == "unmapped":  # results in device-local memory, read through staging
        from pyree.runtime.vm import buffer_pool
        buffer_pool.MAPPED_MAX_BYTES = 0
    elif variant == "rebar-mapped":  # mapped buffers from device-local, host-visible memory
        from pyree.hal.vulkan import allocator
        pick = allocator._pick_type

        def device_local_first(types, allowed, want, avoid=0):
            if want & allocator.HOST_VISIBLE:
                found = pick(types, allowed, want & ~allocator.HOST_CACHED | allocator.DEVICE_LOCAL)
                if found is not None:
                    return found
            return pick(types, allowed, want, avoid)
        allocator._pick_type = device_local_first
    elif variant == "no-simultaneous":
        command_buffer.USAGE_SIMULTANEOUS = 0
    elif variant == "end-barrier":  # a full barrier closes every recording too
        end = device.vk.vkEndCommandBuffer

        def end_with_barrier(cb):
            command_buffer.full_barrier(device.vk, cb)
            return end(cb)
        device.vk.vkEndCommandBuffer = end_with_barrier
    elif variant == "compute-barrier":  # the opening barrier names the compute stage too
        def barrier(vk, cb, dst_stage=command_buffer.STAGE_ALL_COMMANDS,
                    dst_access=command_buffer.ACCESS_MEMORY_READ | command_buffer.ACCESS_MEMORY_WRITE):
            from pyree.hal.vulkan.symbols import ffi
            b = ffi.new("VkMemoryBarrier *", {"sType": command_buffer.STYPE_MEMORY_BARRIER,
                                              "srcAccessMask": command_buffer.ACCESS_MEMORY_WRITE
                                              | command_buffer.ACCESS_MEMORY_READ,
                                              "dstAccessMask": dst_access})
            vk.vkCmdPipelineBarrier(cb, command_buffer.STAGE_ALL_COMMANDS, dst_stage, 0, 1, b, 0,
                                    ffi.NULL, 0, ffi.NULL)
        command_buffer.full_barrier = barrier


def main(variant: str, trials: int) -> None:
    from pyree.runtime.hal.ffi import ffi
    vmfb = compile_str(C.add(SHAPE).mlir, CompileOptions(target_backends=["vulkan-spirv"]))
    m1, m2 = (rt.load_module(vmfb, device="vulkan") for _ in range(2))
    device = ffi.from_handle(m1.device._vt.self)
    if variant == "plain" and len(sys.argv) > 3:
        print("  memory types", [hex(t) for t in device.allocator.types])
    patch(variant, device)
    f1, f2 = m1[m1.function_names[0]], m2[m2.function_names[0]]
    wrong = 0
    for t in range(trials):
        rng = np.random.default_rng(t)
        a = (100 + rng.standard_normal(SHAPE)).astype(np.float32)
        b = (t % 5 + 1 + 0.01 * rng.standard_normal(SHAPE)).astype(np.float32)
        result, db = rt.asdevicearray(m1.device, a), rt.asdevicearray(m1.device, b)
        kept = []
        for i in range(12):
            result = (f1 if i % 2 else f2)(result, db)
            if variant == "keep-all":
                kept.append(result)
        if kept:  # the first step whose result is wrong, read after the chain
            for i, r in enumerate(kept):
                step = r.to_host().astype(np.float64)
                off = ~np.isclose(step, a + (i + 1) * b.astype(np.float64), rtol=1e-5, atol=1e-4)
                if off.any():
                    where = np.nonzero(off.ravel())[0]
                    print(f"  keep-all trial {t}: result {i + 1} has {off.sum()} wrong "
                          f"({where.min()}..{where.max()}), got/b "
                          f"{Counter(np.round(step[off] / b[off], 1).tolist()).most_common(2)}")
                    break
        got = result.to_host().astype(np.float64)
        bad = ~np.isclose(got, a.astype(np.float64) + 12 * b.astype(np.float64), rtol=1e-5,
                          atol=1e-4)
        if bad.any():
            wrong += 1
            if wrong <= 2:
                k = np.round((got - a) / b, 1)
                where = np.nonzero(bad.ravel())[0]
                steps = np.round(got[bad] / b[bad], 1)  # 12: a read as 0; 11: a chunk of call 1's result
                print(f"  {variant} trial {t}: {bad.sum()} wrong, elements {where.min()}.."
                      f"{where.max()}; got/b {Counter(steps.tolist()).most_common(3)}; "
                      f"k {Counter(k[bad].ravel().tolist()).most_common(3)}")
                if LOG:
                    print("  new buffers (serial, bytes, mapped, [(zeros, ones) of the first "
                          "mapped results]):", LOG[-1][:16])
    print(f"{variant}: {wrong} of {trials} wrong")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
