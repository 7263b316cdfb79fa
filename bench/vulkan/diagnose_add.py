"""Where a 64M f32 add's time goes on a Vulkan GPU (issue 4), in one process on the GPU host.

    python3 bench/vulkan/diagnose_add.py VARIANT_DIR [--sweep]   (from build_variants.py)

Drives the vulkan driver's own device, allocator and submit path, with GPU timestamp queries:
  - per shader variant: kernel time (timestamps right around the dispatch), time per repetition
    inside one command buffer (kernel + barrier), and per separate submission recorded like the
    driver's (leading barrier, dispatch) with the gap between submissions;
  - the leading barrier: full ALL_COMMANDS, compute->compute, none;
  - vkCmdCopyBuffer / vkCmdFillBuffer on the same buffers (what the Vulkan driver's own
    kernels reach), plain vs dedicated allocations (VkMemoryDedicatedAllocateInfo);
  - the whole pyree call per variant (VM, result allocation, queued back to back), with the
    interval of every call so an intermittent stall shows;
  - torch on CUDA in the same process (add with events, single and back to back; copy).
--sweep instead times the default variant on several fresh sets of buffers (does bandwidth
depend on the allocation?) and through the whole call, for runs in several processes.
$SMI_LOG (nvidia-smi --query-gpu=timestamp,pstate,clocks.sm,clocks.mem,power.draw --format=csv
-lms 50) gives each phase's clocks. Prints a table last; writes diagnose_add.json.
"""

from __future__ import annotations

import csv
import datetime
import gc
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pyree.runtime as rt
from pyree.hal.vulkan.allocator import (
    DEVICE_LOCAL,
    HOST_VISIBLE,
    STYPE_BUFFER_CREATE_INFO,
    USAGE_STORAGE,
    USAGE_TRANSFER_DST,
    USAGE_TRANSFER_SRC,
    Buffer,
    _pick_type,
)
from pyree.hal.vulkan.command_buffer import full_barrier
from pyree.hal.vulkan.instance import VulkanDriver
from pyree.hal.vulkan.symbols import check, ffi
from pyree.runtime.hal.python_driver import ExecutableParams, Export

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ffi.cdef("""
typedef uint64_t VkQueryPool;
typedef struct VkQueryPoolCreateInfo { VkStructureType sType; const void* pNext; VkFlags flags;
    int32_t queryType; uint32_t queryCount; VkFlags pipelineStatistics; } VkQueryPoolCreateInfo;
typedef struct VkMemoryDedicatedAllocateInfo { VkStructureType sType; const void* pNext;
    uint64_t image; VkBuffer buffer; } VkMemoryDedicatedAllocateInfo;
""")
EXTRA = {
    "vkCreateQueryPool": "VkResult (*)(VkDevice, const VkQueryPoolCreateInfo *, "
                         "const VkAllocationCallbacks *, VkQueryPool *)",
    "vkCmdResetQueryPool": "void (*)(VkCommandBuffer, VkQueryPool, uint32_t, uint32_t)",
    "vkCmdWriteTimestamp": "void (*)(VkCommandBuffer, uint32_t, VkQueryPool, uint32_t)",
    "vkGetQueryPoolResults": "VkResult (*)(VkDevice, VkQueryPool, uint32_t, uint32_t, size_t, "
                             "void *, VkDeviceSize, VkFlags)",
}
STAGE_BOTTOM, STAGE_COMPUTE_SHADER, STAGE_ALL = 0x2000, 0x800, 0x10000
ACCESS_SHADER_READ, ACCESS_SHADER_WRITE = 0x20, 0x40
QUERY_RESULT_64_WAIT = 0x1 | 0x2
QUERIES = 256
BASE = "b256"   # the default template among build_variants.py's variants
N = 8192 * 8192
NBYTES = 4 * N
PHASES: list[tuple[str, float, float]] = []


class Phase:
    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.t0 = time.time()
        print(f"[{datetime.datetime.now():%H:%M:%S}] {self.name}", flush=True)

    def __exit__(self, *exc):
        PHASES.append((self.name, self.t0, time.time()))


class Rig:
    """The driver's device plus timestamp queries and hand-recorded command buffers."""

    def __init__(self):
        self.driver = VulkanDriver()
        self.dev = self.driver.create_device("")
        self.vk, vki = self.dev.vk, self.driver.vki
        self.x = {name: ffi.cast(sig, vki.vkGetDeviceProcAddr(self.dev.device, name.encode()))
                  for name, sig in EXTRA.items()}
        props = ffi.new("VkPhysicalDeviceProperties2 *", {"sType": 1000059001})
        vki.vkGetPhysicalDeviceProperties2(self.dev.physical.handle, props)
        self.period_ns = props.properties.limits.timestampPeriod
        info = ffi.new("VkQueryPoolCreateInfo *", {"sType": 11, "queryType": 2,
                                                   "queryCount": QUERIES})
        pool = ffi.new("VkQueryPool *")
        check(self.x["vkCreateQueryPool"](self.dev.device, info, ffi.NULL, pool), "query pool")
        self.pool = pool[0]
        self.memory = memory_report(vki, self.dev.physical.handle)

    def record(self, body):
        cb = self.dev.allocate_command_buffer()
        begin = ffi.new("VkCommandBufferBeginInfo *", {"sType": 42, "flags": 0})
        check(self.vk.vkBeginCommandBuffer(cb, begin), "begin")
        body(cb)
        check(self.vk.vkEndCommandBuffer(cb), "end")
        return cb

    def run(self, cb) -> None:
        self.dev.wait_for(self.dev._submit(cb, [], []))
        self.dev.free_command_buffer(cb)

    def stamp(self, cb, index: int) -> None:
        self.x["vkCmdWriteTimestamp"](cb, STAGE_BOTTOM, self.pool, index)

    def reset_queries(self) -> None:
        self.run(self.record(lambda cb: self.x["vkCmdResetQueryPool"](cb, self.pool, 0, QUERIES)))

    def read(self, count: int) -> list[float]:
        """Timestamps 0..count-1 in ms."""
        out = ffi.new("uint64_t[]", count)
        check(self.x["vkGetQueryPoolResults"](self.dev.device, self.pool, 0, count, 8 * count, out,
                                              8, QUERY_RESULT_64_WAIT), "query results")
        return [out[i] * self.period_ns / 1e6 for i in range(count)]

    # -- buffers -----------------------------------------------------------------------------
    def buffer(self, dedicated: bool) -> Buffer:
        if not dedicated:
            return self.dev.allocate(NBYTES)
        vk, device = self.vk, self.dev.device
        info = ffi.new("VkBufferCreateInfo *", {
            "sType": STYPE_BUFFER_CREATE_INFO, "size": NBYTES,
            "usage": USAGE_STORAGE | USAGE_TRANSFER_SRC | USAGE_TRANSFER_DST})
        handle = ffi.new("VkBuffer *")
        check(vk.vkCreateBuffer(device, info, ffi.NULL, handle), "vkCreateBuffer")
        req = ffi.new("VkMemoryRequirements *")
        vk.vkGetBufferMemoryRequirements(device, handle[0], req)
        index = _pick_type(self.dev.allocator.types, req.memoryTypeBits, DEVICE_LOCAL,
                           avoid=HOST_VISIBLE)
        ded = ffi.new("VkMemoryDedicatedAllocateInfo *", {"sType": 1000127001, "buffer": handle[0]})
        alloc = ffi.new("VkMemoryAllocateInfo *", {"sType": 5, "pNext": ded,
                                                   "allocationSize": req.size,
                                                   "memoryTypeIndex": index})
        memory = ffi.new("VkDeviceMemory *")
        check(vk.vkAllocateMemory(device, alloc, ffi.NULL, memory), "vkAllocateMemory")
        check(vk.vkBindBufferMemory(device, handle[0], memory[0], 0), "vkBindBufferMemory")
        return Buffer(NBYTES, handle[0], memory[0], None)

    def fresh_allocation_ms(self, count: int = 3) -> list[float]:
        """vkCreateBuffer + vkAllocateMemory + bind of a new NBYTES buffer, as the driver's
        allocator does on a pool miss."""
        times = []
        for _ in range(count):
            t0 = time.perf_counter()
            buf = self.dev.allocator.create(NBYTES)
            times.append((time.perf_counter() - t0) * 1e3)
            self.dev.allocator.destroy_buffer(buf)
        return times

    def copy(self, src: Buffer, dst: Buffer) -> None:
        region = ffi.new("VkBufferCopy *", {"srcOffset": 0, "dstOffset": 0, "size": NBYTES})
        self.run(self.record(lambda cb: self.vk.vkCmdCopyBuffer(cb, src.handle, dst.handle, 1,
                                                                region)))

    def poison(self, buf: Buffer) -> None:
        self.run(self.record(lambda cb: self.vk.vkCmdFillBuffer(cb, buf.handle, 0, NBYTES,
                                                                0xFFFFFFFF)))

    def host(self, buf: Buffer) -> np.ndarray:
        out = np.empty(N, np.float32)
        self.dev.read_buffer(buf, 0, memoryview(out).cast("B"))
        return out

    # -- kernels -----------------------------------------------------------------------------
    def kernel(self, folder: Path, name: str, meta: dict):
        export = Export(meta["export"], tuple(meta["grid"]), tuple(meta["block"]), 0,
                        tuple(meta["binding_min_lengths"]))
        params = ExecutableParams("spirv", meta["target"], (folder / f"{name}.spv").read_bytes(),
                                  "", b"", (export,))
        return self.dev.load_executable(params).kernels[0]

    def descriptor_set(self, kernel, buffers: list[Buffer]):
        vk, device = self.vk, self.dev.device
        size = ffi.new("VkDescriptorPoolSize *", {"type": 7, "descriptorCount": len(buffers)})
        info = ffi.new("VkDescriptorPoolCreateInfo *", {"sType": 33, "maxSets": 1,
                                                        "poolSizeCount": 1, "pPoolSizes": size})
        pool = ffi.new("VkDescriptorPool *")
        check(vk.vkCreateDescriptorPool(device, info, ffi.NULL, pool), "descriptor pool")
        layouts = ffi.new("VkDescriptorSetLayout[]", [kernel.set_layout])
        out = ffi.new("VkDescriptorSet[]", 1)
        alloc = ffi.new("VkDescriptorSetAllocateInfo *", {"sType": 34, "descriptorPool": pool[0],
                                                          "descriptorSetCount": 1,
                                                          "pSetLayouts": layouts})
        check(vk.vkAllocateDescriptorSets(device, alloc, out), "descriptor set")
        infos = ffi.new("VkDescriptorBufferInfo[]", len(buffers))
        writes = ffi.new("VkWriteDescriptorSet[]", len(buffers))
        for j, b in enumerate(buffers):
            infos[j].buffer, infos[j].offset, infos[j].range = b.handle, 0, NBYTES
            w = writes[j]
            w.sType, w.dstSet, w.dstBinding, w.descriptorCount, w.descriptorType = 35, out[0], j, 1, 7
            w.pBufferInfo = infos + j
        vk.vkUpdateDescriptorSets(device, len(buffers), writes, 0, ffi.NULL)
        return out[0]

    def dispatch(self, cb, kernel, dset) -> None:
        vk = self.vk
        vk.vkCmdBindPipeline(cb, 1, kernel.pipeline)
        vk.vkCmdBindDescriptorSets(cb, 1, kernel.pipeline_layout, 0, 1,
                                   ffi.new("VkDescriptorSet *", dset), 0, ffi.NULL)
        vk.vkCmdDispatch(cb, *kernel.grid)

    def barrier(self, cb, kind: str) -> None:
        if kind == "full":
            full_barrier(self.vk, cb)
        elif kind == "compute":
            b = ffi.new("VkMemoryBarrier *", {"sType": 46, "srcAccessMask": ACCESS_SHADER_WRITE,
                                              "dstAccessMask": ACCESS_SHADER_READ | ACCESS_SHADER_WRITE})
            self.vk.vkCmdPipelineBarrier(cb, STAGE_COMPUTE_SHADER, STAGE_COMPUTE_SHADER, 0, 1, b, 0,
                                         ffi.NULL, 0, ffi.NULL)

    def in_one_buffer(self, work, reps: int, barrier: str = "full") -> dict:
        """``work(cb)`` ``reps`` times in one command buffer, each after ``barrier``, with
        timestamps right around it: work time and time per repetition (work + barrier)."""
        self.reset_queries()

        def body(cb):
            for r in range(reps):
                self.barrier(cb, barrier)
                self.stamp(cb, 2 * r)
                work(cb)
                self.stamp(cb, 2 * r + 1)
        self.run(self.record(body))
        t = self.read(2 * reps)
        work_ms = [t[2 * r + 1] - t[2 * r] for r in range(reps)]
        step_ms = [t[2 * r + 2] - t[2 * r] for r in range(reps - 1)]
        return {"work_ms": statistics.median(work_ms), "step_ms": statistics.median(step_ms),
                "work_min_ms": min(work_ms), "work_max_ms": max(work_ms)}

    def submissions(self, work, count: int) -> dict:
        """``count`` submissions recorded like the driver's (leading full barrier, then the
        work), queued back to back: GPU time per submission and the gap between them."""
        self.reset_queries()
        cbs = []
        for s in range(count):
            def body(cb, s=s):
                full_barrier(self.vk, cb)
                self.stamp(cb, 2 * s)
                work(cb)
                self.stamp(cb, 2 * s + 1)
            cbs.append(self.record(body))
        t0 = time.perf_counter()
        last = 0
        for cb in cbs:
            last = self.dev._submit(cb, [], [])
        host_ms = (time.perf_counter() - t0) * 1e3 / count
        self.dev.wait_for(last)
        for cb in cbs:
            self.dev.free_command_buffer(cb)
        t = self.read(2 * count)
        gaps = [t[2 * s + 2] - t[2 * s + 1] for s in range(count - 1)]
        periods = [t[2 * s + 2] - t[2 * s] for s in range(count - 1)]
        return {"work_ms": statistics.median(t[2 * s + 1] - t[2 * s] for s in range(count)),
                "gap_ms": statistics.median(gaps), "gap_max_ms": max(gaps),
                "period_ms": statistics.median(periods), "host_submit_ms": host_ms}


def memory_report(vki, handle) -> dict:
    mem = ffi.new("VkPhysicalDeviceMemoryProperties *")
    vki.vkGetPhysicalDeviceMemoryProperties(handle, mem)
    return {"types": [(mem.memoryTypes[i].propertyFlags, mem.memoryTypes[i].heapIndex)
                      for i in range(mem.memoryTypeCount)],
            "heaps": [(mem.memoryHeaps[i].size, mem.memoryHeaps[i].flags)
                      for i in range(mem.memoryHeapCount)]}


def kernel_phase(rig: Rig, folder: Path, variants: dict, a, b, reps: int, subs: int,
                 dedicated: bool) -> dict:
    ins = [rig.buffer(dedicated) for _ in range(3)]
    rig.copy(a, ins[0])
    rig.copy(b, ins[1])
    expect = rig.host(ins[0]) + rig.host(ins[1])
    out = {}
    for name, meta in variants.items():
        k = rig.kernel(folder, name, meta)
        dset = rig.descriptor_set(k, ins)
        rig.poison(ins[2])
        def work(cb, k=k, dset=dset):
            rig.dispatch(cb, k, dset)
        r = rig.in_one_buffer(work, reps)
        r["correct"] = bool(np.array_equal(rig.host(ins[2]), expect))
        r.update({f"sub_{key}": v for key, v in rig.submissions(work, subs).items()})
        r["GBps"] = 3 * NBYTES / r["work_ms"] / 1e6
        out[name] = r
        print(f"  {name:16s} kernel {r['work_ms']:.4f} ms ({r['GBps']:.0f} GB/s) step "
              f"{r['step_ms']:.4f} | submissions: period {r['sub_period_ms']:.4f} gap "
              f"{r['sub_gap_ms']:.4f} (max {r['sub_gap_max_ms']:.4f}) host "
              f"{r['sub_host_submit_ms']:.4f} ms | correct {r['correct']}", flush=True)
    base = rig.kernel(folder, BASE, variants[BASE])
    dset = rig.descriptor_set(base, ins)
    for barrier in ("compute", "none"):
        r = rig.in_one_buffer(lambda cb: rig.dispatch(cb, base, dset), reps, barrier)
        out[f"barrier_{barrier}"] = r
        print(f"  {BASE} with {barrier} barrier: kernel {r['work_ms']:.4f} step "
              f"{r['step_ms']:.4f} ms", flush=True)
    region = ffi.new("VkBufferCopy *", {"srcOffset": 0, "dstOffset": 0, "size": NBYTES})
    c = rig.in_one_buffer(lambda cb: rig.vk.vkCmdCopyBuffer(cb, ins[0].handle, ins[2].handle, 1,
                                                            region), reps)
    f = rig.in_one_buffer(lambda cb: rig.vk.vkCmdFillBuffer(cb, ins[2].handle, 0, NBYTES, 7), reps)
    out["copy"] = dict(c, GBps=2 * NBYTES / c["work_ms"] / 1e6)
    out["fill"] = dict(f, GBps=NBYTES / f["work_ms"] / 1e6)
    print(f"  vkCmdCopyBuffer {out['copy']['work_ms']:.4f} ms ({out['copy']['GBps']:.0f} GB/s r+w)"
          f"  vkCmdFillBuffer {out['fill']['work_ms']:.4f} ms ({out['fill']['GBps']:.0f} GB/s)",
          flush=True)
    return out


def sweep_phase(rig: Rig, folder: Path, variants: dict, a, b, sets: int, reps: int) -> list:
    """The default variant's kernel time on ``sets`` fresh triples of buffers (kept until the
    end, so each is new memory), with each triple's allocation time."""
    k = rig.kernel(folder, BASE, variants[BASE])
    out, kept = [], []
    for s in range(sets):
        t0 = time.perf_counter()
        ins = [rig.dev.allocator.create(NBYTES) for _ in range(3)]
        alloc_ms = (time.perf_counter() - t0) * 1e3
        kept += ins
        rig.copy(a, ins[0])
        rig.copy(b, ins[1])
        dset = rig.descriptor_set(k, ins)

        def work(cb, dset=dset):
            rig.dispatch(cb, k, dset)
        r = dict(rig.in_one_buffer(work, reps), alloc_ms=alloc_ms)
        out.append(r)
        print(f"  set {s}: 3 x 256 MiB allocated in {alloc_ms:.1f} ms, kernel {r['work_ms']:.4f} "
              f"(min {r['work_min_ms']:.4f}, max {r['work_max_ms']:.4f}) ms", flush=True)
    for buf in kept:
        rig.dev.allocator.destroy_buffer(buf)
    return out


def pyree_phase(folder: Path, variants: dict, a_host, b_host, reps: int, rounds: int) -> dict:
    """The whole call through the runtime, queued back to back, ``rounds`` times per variant;
    each call's interval kept so a stall shows."""
    first = rt.load_module(folder / f"{BASE}.vmfb", device="vulkan")
    device = first.device
    a_host, b_host = a_host.reshape(8192, 8192), b_host.reshape(8192, 8192)
    da, db = rt.asdevicearray(device, a_host), rt.asdevicearray(device, b_host)
    expect = a_host + b_host
    out = {}
    for name in variants:
        module = rt.load_module(folder / f"{name}.vmfb", device=device)
        fn = module[module.function_names[0]]
        correct = bool(np.array_equal(fn(da, db).to_host(), expect))
        for _ in range(5):
            fn(da, db).wait()
        lat = []
        for _ in range(reps):
            t0 = time.perf_counter()
            fn(da, db).wait()
            lat.append((time.perf_counter() - t0) * 1e3)
        per_call, intervals = [], []
        for _ in range(rounds):
            result = None
            stamps = [time.perf_counter()]
            for _ in range(reps):
                result = fn(da, db)
                stamps.append(time.perf_counter())
            result.wait()
            end = time.perf_counter()
            per_call.append((end - stamps[0]) * 1e3 / reps)
            intervals += [(y - x) * 1e3 for x, y in zip(stamps, stamps[1:])]
            del result
        out[name] = {"latency_ms": statistics.median(lat), "per_call_ms": per_call,
                     "call_interval_median_ms": statistics.median(intervals),
                     "call_interval_max_ms": max(intervals), "correct": correct}
        print(f"  {name:16s} latency {out[name]['latency_ms']:.4f} ms, queued per call "
              f"{' '.join(f'{x:.4f}' for x in per_call)} ms, host interval median "
              f"{out[name]['call_interval_median_ms']:.4f} max {out[name]['call_interval_max_ms']:.3f}"
              f" | correct {correct}", flush=True)
        del module, fn
    return out


def torch_phase(a_host, b_host) -> dict:
    try:
        import torch
        from gpu_timing import torch_ms
    except ImportError:
        return {"skipped": "torch is not installed"}
    ta, tb = torch.from_numpy(a_host).cuda(), torch.from_numpy(b_host).cuda()
    out_t = torch.empty_like(ta)
    assert torch.equal(torch.add(ta, tb, out=out_t).cpu(), torch.from_numpy(a_host + b_host))

    def queued(fn, reps=50):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(reps):
            fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / reps

    add = lambda: torch.add(ta, tb, out=out_t)  # noqa: E731
    r = {"add_ms": torch_ms(add), "add_queued_ms": queued(add),
         "add_alloc_queued_ms": queued(lambda: torch.add(ta, tb)),
         "copy_ms": torch_ms(lambda: out_t.copy_(ta))}
    r["copy_GBps"] = 2 * NBYTES / r["copy_ms"] / 1e6
    r["add_GBps"] = 3 * NBYTES / r["add_ms"] / 1e6
    print(f"  torch add {r['add_ms']:.4f} ms ({r['add_GBps']:.0f} GB/s), queued "
          f"{r['add_queued_ms']:.4f}, allocating {r['add_alloc_queued_ms']:.4f}; copy "
          f"{r['copy_ms']:.4f} ms ({r['copy_GBps']:.0f} GB/s)", flush=True)
    return r


def clocks_by_phase(log: str) -> dict:
    """Median SM / memory clock, power and the P-states seen in each phase, from nvidia-smi."""
    rows = []
    with open(log) as f:
        for row in csv.reader(f):
            try:
                stamp = datetime.datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp()
                sm, mem = float(row[2].split()[0]), float(row[3].split()[0])
            except (ValueError, IndexError):
                continue
            try:
                power = float(row[4].split()[0])
            except (ValueError, IndexError):
                power = float("nan")
            rows.append((stamp, row[1].strip(), sm, mem, power))
    out = {}
    for name, t0, t1 in PHASES:
        seen = [r for r in rows if t0 <= r[0] <= t1]
        if seen:
            out[name] = {"samples": len(seen), "pstates": sorted({r[1] for r in seen}),
                         "sm_MHz": statistics.median(r[2] for r in seen),
                         "sm_min_MHz": min(r[2] for r in seen),
                         "mem_MHz": statistics.median(r[3] for r in seen),
                         "mem_min_MHz": min(r[3] for r in seen),
                         "power_W": statistics.median(r[4] for r in seen)}
    return out


def sweep(folder: Path, reps: int, rounds: int) -> dict:
    variants = json.loads((folder / "variants.json").read_text())
    rng = np.random.default_rng()
    a_host = rng.standard_normal(N, dtype=np.float32)
    b_host = rng.standard_normal(N, dtype=np.float32)
    rig = Rig()
    a, b = rig.buffer(False), rig.buffer(False)
    rig.dev.write_buffer(a, 0, memoryview(a_host).cast("B"))
    rig.dev.write_buffer(b, 0, memoryview(b_host).cast("B"))
    sets = sweep_phase(rig, folder, variants, a, b, 8, reps)
    calls = pyree_phase(folder, {BASE: variants[BASE]}, a_host, b_host, reps, rounds)[BASE]
    kernels = [s["work_ms"] for s in sets]
    print(f"SWEEP kernel {min(kernels):.4f}..{max(kernels):.4f} ms over {len(sets)} sets; whole "
          f"call latency {calls['latency_ms']:.4f}, queued {' '.join(f'{x:.4f}' for x in calls['per_call_ms'])}"
          " ms/call")
    return {"sets": sets, "pyree": calls}


def main(folder: Path, reps: int, subs: int, rounds: int) -> dict:
    variants = json.loads((folder / "variants.json").read_text())
    rng = np.random.default_rng()
    a_host = rng.standard_normal(N, dtype=np.float32)
    b_host = rng.standard_normal(N, dtype=np.float32)
    results = {}
    with Phase("torch (first)"):
        results["torch_first"] = torch_phase(a_host, b_host)
    rig = Rig()
    results["device"] = rig.dev.name
    results["memory"] = rig.memory
    results["timestamp_period_ns"] = rig.period_ns
    print("memory types (flags, heap):", rig.memory["types"])
    print("memory heaps (bytes, flags):", rig.memory["heaps"])
    results["fresh_allocation_ms"] = rig.fresh_allocation_ms()
    print("fresh 256 MiB buffer (ms):", " ".join(f"{t:.2f}" for t in results["fresh_allocation_ms"]))
    a, b = rig.buffer(False), rig.buffer(False)
    rig.dev.write_buffer(a, 0, memoryview(a_host).cast("B"))
    rig.dev.write_buffer(b, 0, memoryview(b_host).cast("B"))
    for dedicated in (False, True):
        name = "kernels, " + ("dedicated" if dedicated else "plain") + " allocations"
        with Phase(name):
            results[name] = kernel_phase(rig, folder, variants, a, b, reps, subs, dedicated)
    with Phase("pyree calls"):
        results["pyree"] = pyree_phase(folder, variants, a_host, b_host, reps, rounds)
    gc.collect()
    with Phase("torch (last)"):
        results["torch_last"] = torch_phase(a_host, b_host)
    if os.environ.get("SMI_LOG"):
        time.sleep(0.2)
        results["clocks"] = clocks_by_phase(os.environ["SMI_LOG"])
    return results


def print_table(r: dict) -> None:
    plain, ded = r["kernels, plain allocations"], r["kernels, dedicated allocations"]
    print(f"\n== {r['device']}: 64M f32 add, GPU timestamps (period {r['timestamp_period_ns']} ns) ==")
    print(f"{'variant':16s} {'kernel':>8s} {'GB/s':>5s} {'step':>8s} {'sub per':>8s} {'gap':>7s} "
          f"{'dedic.':>8s} {'pyree/call (rounds)':>28s} {'lat':>7s}")
    for name in r["pyree"]:
        k, d, p = plain[name], ded[name], r["pyree"][name]
        ok = "" if k["correct"] and d["correct"] and p["correct"] else "  WRONG"
        print(f"{name:16s} {k['work_ms']:8.4f} {k['GBps']:5.0f} {k['step_ms']:8.4f} "
              f"{k['sub_period_ms']:8.4f} {k['sub_gap_ms']:7.4f} {d['work_ms']:8.4f} "
              f"{' '.join(f'{x:.3f}' for x in p['per_call_ms']):>28s} {p['latency_ms']:7.4f}{ok}")
    for which in ("copy", "fill"):
        print(f"vkCmd{which.title()}Buffer: plain {plain[which]['work_ms']:.4f} ms "
              f"({plain[which]['GBps']:.0f} GB/s), dedicated {ded[which]['work_ms']:.4f} ms "
              f"({ded[which]['GBps']:.0f} GB/s)")
    print("fresh 256 MiB buffer (ms):", " ".join(f"{t:.2f}" for t in r["fresh_allocation_ms"]))
    for barrier in ("compute", "none"):
        print(f"barrier {barrier}: step {plain['barrier_' + barrier]['step_ms']:.4f} ms (full: "
              f"{plain[BASE]['step_ms']:.4f})")
    for key in ("torch_first", "torch_last"):
        t = r[key]
        if "add_ms" in t:
            print(f"{key}: add {t['add_ms']:.4f} ms (queued {t['add_queued_ms']:.4f}, allocating "
                  f"{t['add_alloc_queued_ms']:.4f}), copy {t['copy_ms']:.4f} ms "
                  f"({t['copy_GBps']:.0f} GB/s)")
    for name, c in r.get("clocks", {}).items():
        print(f"clocks {name}: {c}")


if __name__ == "__main__":
    reps, subs, rounds = (int(x) for x in os.environ.get("DIAG_REPS", "20,30,3").split(","))
    if "--sweep" in sys.argv[2:]:
        sweep(Path(sys.argv[1]), reps, rounds)
    else:
        result = main(Path(sys.argv[1]), reps, subs, rounds)
        Path("diagnose_add.json").write_text(json.dumps(result, indent=1))
        print_table(result)
