"""SPIR-V executables: one VkShaderModule per module, and per export a descriptor-set layout
(storage buffers at binding = position), a pipeline layout (that set plus push constants) and a
compute pipeline, all created once at load. Identical code loaded again reuses them.

The pipelines are created at load rather than at first dispatch: the first call of a function
needs all of its pipelines anyway, and at load they can be compiled all at once, on several
threads (each vkCreateComputePipelines call releases the GIL; a VkPipelineCache is internally
synchronized), seeded from and written back to the on-disk cache (pipeline_cache.py).
``PYREE_VULKAN_PIPELINE_THREADS`` caps the threads (default: the CPUs this process may use;
1: a single vkCreateComputePipelines call for all of an executable's pipelines).

Before creating anything the module is checked: its SPIR-V structure and each entry point's
descriptors against its export's bindings (hal/images/spirv.py in the runtime: a driver may hang
on a module cut short, or write through a descriptor the layout lacks), then against the device: capabilities
the device lacks (float16, 8-bit storage...), workgroup sizes, counts and shared memory within
the device's limits. A module built for another GPU is refused with the reason, never run.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
import threading

from pyree.hal.vulkan import pipeline_cache
from pyree.hal.vulkan.physical_device import CAPABILITY_FEATURES, PhysicalDevice
from pyree.hal.vulkan.pipeline_cache import PipelineCacheFiles
from pyree.hal.vulkan.symbols import Functions, VulkanError, check, ffi
from pyree.runtime.hal.images import ImageError
from pyree.runtime.hal.images.spirv import check_spirv
from pyree.runtime.hal.python_driver import ExecutableParams, HalError

STAGE_COMPUTE = 0x20
DESCRIPTOR_STORAGE_BUFFER = 7
STYPE_SHADER_MODULE, STYPE_SET_LAYOUT, STYPE_PIPELINE_LAYOUT = 16, 32, 30
STYPE_SHADER_STAGE, STYPE_COMPUTE_PIPELINE = 18, 29
STYPE_CREATION_FEEDBACK = 1000192000
FEEDBACK_VALID, FEEDBACK_HIT = 0x1, 0x2   # VkPipelineCreationFeedbackFlagBits
PUSH_CONSTANT_BYTES = 128
COOPERATIVE_MATRIX_CAPABILITY = 6022
OP_TYPE_COOPERATIVE_MATRIX = struct.pack("<I", 7 << 16 | 4456)   # its first word: 7 words, opcode
THREADS_VARIABLE = "PYREE_VULKAN_PIPELINE_THREADS"


class Kernel:
    __slots__ = ("name", "grid", "block", "min_lengths", "set_layout", "pipeline_layout",
                 "pipeline")

    def __init__(self, name: str, grid: tuple[int, int, int], block: tuple[int, int, int],
                 min_lengths: tuple[int, ...], set_layout: int, pipeline_layout: int,
                 pipeline: int):
        self.name, self.grid, self.block, self.min_lengths = name, grid, block, min_lengths
        self.set_layout, self.pipeline_layout, self.pipeline = set_layout, pipeline_layout, \
            pipeline


class Executable:
    def __init__(self, kernels: list[Kernel], module: int, key: bytes):
        self.kernels, self.module, self.key = kernels, module, key
        self.references = 1


def capabilities(code: bytes) -> set[int]:
    """The OpCapability operands; they come first, so only the module's first words are read."""
    out, i, end = set(), 5, len(code) // 4
    while i < end:
        (word,) = struct.unpack_from("<I", code, 4 * i)
        count, opcode = word >> 16, word & 0xFFFF
        if count == 0:
            break
        if opcode == 17 and i + 1 < end:      # OpCapability
            out.add(struct.unpack_from("<I", code, 4 * i + 4)[0])
        elif opcode not in (10, 11):  # capabilities come first, before extensions and imports
            break
        i += count
    return out


def cooperative_operands(code: bytes) -> set[tuple[str, int, int, str]]:
    """("A" | "B", rows, columns, float type) of each cooperative-matrix operand type declared.
    A module that neither declares the CooperativeMatrixKHR capability nor holds the word that
    begins an OpTypeCooperativeMatrixKHR declares none: one search of the bytes, not a walk of
    every instruction in Python."""
    if COOPERATIVE_MATRIX_CAPABILITY not in capabilities(code) and not any(
            at % 4 == 0 for at in _occurrences(code, OP_TYPE_COOPERATIVE_MATRIX)):
        return set()
    words = struct.unpack(f"<{len(code) // 4}I", code)
    floats, constants, out, i = {}, {}, set(), 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            break
        operands = words[i + 1:i + count]
        if opcode == 22:        # OpTypeFloat (an encoding operand: SPV_KHR_bfloat16's bf16)
            floats[operands[0]] = "bf16" if len(operands) > 2 else f"f{operands[1]}"
        elif opcode == 43:      # OpConstant (32-bit values are all a matrix type uses)
            constants[operands[1]] = operands[2]
        elif opcode == 4456:    # OpTypeCooperativeMatrixKHR
            _, component, _, rows, columns, use = operands
            use = constants.get(use)
            if use in (0, 1) and component in floats:
                out.add(("AB"[use], constants.get(rows), constants.get(columns), floats[component]))
        i += count
    return out


def _occurrences(data: bytes, needle: bytes):
    at = data.find(needle)
    while at >= 0:
        yield at
        at = data.find(needle, at + 1)


def pipeline_threads() -> int:
    """How many threads create an executable's pipelines: $PYREE_VULKAN_PIPELINE_THREADS, else
    the CPUs this process may use."""
    text = os.environ.get(THREADS_VARIABLE, "")
    if text.strip().isdigit() and int(text) > 0:
        return int(text)
    if text:
        raise HalError("INVALID_ARGUMENT", f"{THREADS_VARIABLE}={text!r}: give a positive "
                                           "number of threads")
    return len(os.sched_getaffinity(0))


class ExecutableCache:
    def __init__(self, vk: Functions, device, physical: PhysicalDevice,
                 files: PipelineCacheFiles | None = None, creation_feedback: bool = False):
        self.vk, self.device, self.physical = vk, device, physical
        self.files, self.creation_feedback = files, creation_feedback
        self._by_code: dict[bytes, Executable] = {}
        self._released: list[Executable] = []
        # guards the two above; reentrant, as a finalizer may release an executable while it is
        # held; never held while pipelines are created (_create_executable)
        self._lock = threading.RLock()
        # what the pipeline caches did: files whose data seeded a cache, files refused (damaged,
        # foreign), files written and writes the disk refused; pipelines created, and where the
        # driver reports it (creation feedback) those it found in the cache and the time it
        # spent creating them, summed over the threads
        self.stats = dict.fromkeys(("seeded", "refused", "written", "unwritable", "pipelines",
                                    "hits", "creation_ns"), 0)

    def load(self, params: ExecutableParams) -> Executable:
        if params.format != "spirv":
            raise HalError("INVALID_ARGUMENT", f"the vulkan device runs 'spirv' executables, not "
                                               f"'{params.format}'")
        key = hashlib.sha256(params.code + repr(params.exports).encode()).digest()
        with self._lock:
            cached = self._by_code.get(key)
            if cached is not None:
                cached.references += 1
                return cached
        executable = self._create_executable(params, key)
        with self._lock:
            cached = self._by_code.setdefault(key, executable)
            if cached is not executable:   # another thread loaded the same code meanwhile
                cached.references += 1
        if cached is not executable:
            self._destroy_executable(executable)
        return cached

    def _create_executable(self, params: ExecutableParams, key: bytes) -> Executable:
        """Checks and creates, holding no lock: the pipeline threads run Python, where the
        garbage collector may run a finalizer that releases buffers or executables of this
        device, which takes its locks."""
        self._check(params)
        vk, device = self.vk, self.device
        code = ffi.from_buffer(params.code)
        info = ffi.new("VkShaderModuleCreateInfo *", {"sType": STYPE_SHADER_MODULE,
                                                      "codeSize": len(params.code),
                                                      "pCode": ffi.cast("uint32_t *", code)})
        module = ffi.new("VkShaderModule *")
        check(vk.vkCreateShaderModule(device, info, ffi.NULL, module),
              f"vkCreateShaderModule (SPIR-V for target '{params.target}')")
        layouts: list[tuple[int, int]] = []
        pipelines: list[int] = []
        try:
            for export in params.exports:
                layouts.append(self._layouts(export))
            pipelines = self._cached_pipelines(module[0], params.exports, layouts, key)
        except BaseException:
            for pipeline in pipelines:
                vk.vkDestroyPipeline(device, pipeline, ffi.NULL)
            for set_layout, layout in layouts:
                vk.vkDestroyPipelineLayout(device, layout, ffi.NULL)
                vk.vkDestroyDescriptorSetLayout(device, set_layout, ffi.NULL)
            vk.vkDestroyShaderModule(device, module[0], ffi.NULL)
            raise
        kernels = [Kernel(e.name, tuple(e.grid_size), tuple(e.block_size),
                          tuple(e.binding_min_lengths), set_layout, layout, pipeline)
                   for e, (set_layout, layout), pipeline in zip(params.exports, layouts, pipelines)]
        return Executable(kernels, module[0], key)

    def _cached_pipelines(self, module: int, exports, layouts, key: bytes) -> list[int]:
        """The pipelines, through a VkPipelineCache seeded from the executable's file, which is
        written back when the driver's data changed."""
        if self.files is None:
            return self._pipelines(module, exports, layouts, 0)[0]
        seed = self.files.read(key)
        if seed is not None:
            self.stats["seeded"] += 1
        elif os.path.exists(self.files.path(key)):
            self.stats["refused"] += 1
        vk, device = self.vk, self.device
        cache = pipeline_cache.create(vk, device, seed)
        try:
            pipelines, hits = self._pipelines(module, exports, layouts, cache)
            if seed is not None and hits == len(exports):
                return pipelines  # all came from the seed: the file holds them already
            try:
                data = pipeline_cache.contents(vk, device, cache)
            except VulkanError:
                return pipelines  # a cache not saved costs time on the next load, nothing else
            if data != seed and self.files.valid(data):
                self.stats["written" if self.files.write(key, data) else "unwritable"] += 1
            return pipelines
        finally:
            vk.vkDestroyPipelineCache(device, cache, ffi.NULL)

    def _pipelines(self, module: int, exports, layouts, cache: int) -> tuple[list[int], int | None]:
        """Creates every export's pipeline: one vkCreateComputePipelines call for them all on
        one thread, or one call per pipeline on each of several threads taking the next
        pipeline not yet started. Failures name the first kernel that failed, after every
        pipeline created is destroyed. Returns the pipelines and how many the driver found in
        ``cache`` (None where it does not say: no creation feedback)."""
        vk, device, n = self.vk, self.device, len(exports)
        if n == 0:
            return [], None
        names = [ffi.new("char[]", e.name.encode()) for e in exports]
        infos = ffi.new("VkComputePipelineCreateInfo[]", n)
        feedback = ffi.new("VkPipelineCreationFeedback[]", 2 * n) if self.creation_feedback else None
        chained = ffi.new("VkPipelineCreationFeedbackCreateInfo[]", n) if feedback else None
        for i in range(n):
            info = infos[i]
            info.sType, info.layout = STYPE_COMPUTE_PIPELINE, layouts[i][1]
            info.stage.sType, info.stage.stage = STYPE_SHADER_STAGE, STAGE_COMPUTE
            info.stage.module, info.stage.pName = module, names[i]
            if chained is not None:
                chained[i].sType = STYPE_CREATION_FEEDBACK
                chained[i].pPipelineCreationFeedback = feedback + 2 * i
                chained[i].pipelineStageCreationFeedbackCount = 1
                chained[i].pPipelineStageCreationFeedbacks = feedback + 2 * i + 1
                info.pNext = chained + i
        out = ffi.new("VkPipeline[]", n)
        try:
            results = self._create(infos, out, n, cache)
        except BaseException:  # an interrupt: the threads have stopped, drop what they made
            for i in range(n):
                if out[i]:
                    vk.vkDestroyPipeline(device, out[i], ffi.NULL)
            raise
        pipelines = [out[i] for i in range(n)]
        errors = [i for i in range(n) if results[i] < 0]
        if errors:
            for pipeline in pipelines:
                if pipeline:
                    vk.vkDestroyPipeline(device, pipeline, ffi.NULL)
            first = next((i for i in errors if not pipelines[i]), errors[0])
            check(results[first], f"creating the compute pipeline of kernel '{exports[first].name}'")
        self.stats["pipelines"] += n
        if feedback is None:
            return pipelines, None
        hit = FEEDBACK_VALID | FEEDBACK_HIT
        hits = sum(feedback[2 * i].flags & hit == hit for i in range(n))
        self.stats["hits"] += hits
        self.stats["creation_ns"] += sum(feedback[2 * i].duration for i in range(n)
                                         if feedback[2 * i].flags & FEEDBACK_VALID)
        return pipelines, hits

    def _create(self, infos, out, n: int, cache: int) -> list[int]:
        """Fills ``out`` with the pipelines of ``infos``; returns each one's VkResult."""
        vk, device = self.vk, self.device
        workers = min(pipeline_threads(), n)
        if workers <= 1:
            return [vk.vkCreateComputePipelines(device, cache, n, infos, ffi.NULL, out)] * n
        results, following, stop = [0] * n, itertools.count(), []

        def work() -> None:
            for i in following:
                if i >= n or stop:
                    return
                results[i] = vk.vkCreateComputePipelines(device, cache, 1, infos + i, ffi.NULL,
                                                         out + i)
                if results[i] < 0:
                    stop.append(i)

        threads = [threading.Thread(target=work, daemon=True) for _ in range(workers - 1)]
        for thread in threads:
            thread.start()
        try:
            work()
        finally:
            stop.append(None)
            for thread in threads:
                thread.join()
        return results

    def _layouts(self, export) -> tuple[int, int]:
        """The export's descriptor-set layout and pipeline layout."""
        vk, device = self.vk, self.device
        n = len(export.binding_min_lengths)
        bindings = ffi.new("VkDescriptorSetLayoutBinding[]", max(n, 1))
        for i in range(n):
            bindings[i].binding = i
            bindings[i].descriptorType = DESCRIPTOR_STORAGE_BUFFER
            bindings[i].descriptorCount = 1
            bindings[i].stageFlags = STAGE_COMPUTE
        info = ffi.new("VkDescriptorSetLayoutCreateInfo *", {
            "sType": STYPE_SET_LAYOUT, "bindingCount": n, "pBindings": bindings})
        set_layout = ffi.new("VkDescriptorSetLayout *")
        check(vk.vkCreateDescriptorSetLayout(device, info, ffi.NULL, set_layout),
              "vkCreateDescriptorSetLayout")
        push = ffi.new("VkPushConstantRange *", {
            "stageFlags": STAGE_COMPUTE, "offset": 0,
            "size": min(PUSH_CONSTANT_BYTES, self.physical.limits["maxPushConstantsSize"])})
        layout_info = ffi.new("VkPipelineLayoutCreateInfo *", {
            "sType": STYPE_PIPELINE_LAYOUT, "setLayoutCount": 1, "pSetLayouts": set_layout,
            "pushConstantRangeCount": 1, "pPushConstantRanges": push})
        layout = ffi.new("VkPipelineLayout *")
        result = vk.vkCreatePipelineLayout(device, layout_info, ffi.NULL, layout)
        if result < 0:
            vk.vkDestroyDescriptorSetLayout(device, set_layout[0], ffi.NULL)
            check(result, "vkCreatePipelineLayout")
        return set_layout[0], layout[0]

    def _check(self, params: ExecutableParams) -> None:
        code, phys = params.code, self.physical
        try:
            check_spirv(code, [(e.name, len(e.binding_min_lengths)) for e in params.exports])
        except ImageError as e:
            raise HalError("INVALID_ARGUMENT", f"the executable's SPIR-V is refused: {e}") from None
        missing = sorted({CAPABILITY_FEATURES[c] for c in capabilities(code)
                          if c in CAPABILITY_FEATURES and not phys.features.get(CAPABILITY_FEATURES[c])})
        if missing:
            raise HalError("FAILED_PRECONDITION",
                           f"the module (vulkan target '{params.target}') needs {', '.join(missing)}, "
                           f"which {phys.name} lacks; compile it with a --pyree-vulkan-target "
                           "that matches this GPU")
        unsupported = [operand for operand in sorted(cooperative_operands(code)) if not any(
            (operand[1:3] == (m, k) and operand[3] == a) if operand[0] == "A" else
            (operand[1:3] == (k, n) and operand[3] == b)
            for m, n, k, a, b, _ in phys.cooperative_matrix_shapes)]
        if unsupported:
            shapes = ", ".join(f"{use} {r}x{c} {dtype}" for use, r, c, dtype in unsupported)
            raise HalError("FAILED_PRECONDITION",
                           f"the module (vulkan target '{params.target}') multiplies cooperative "
                           f"matrices of shape {shapes}, which {phys.name} does not list; compile "
                           "it with a --pyree-vulkan-target that matches this GPU")
        limits = phys.limits
        for e in params.exports:
            threads = e.block_size[0] * e.block_size[1] * e.block_size[2]
            problems = []
            if threads > limits["maxComputeWorkGroupInvocations"] or any(
                    b > m for b, m in zip(e.block_size, limits["maxComputeWorkGroupSize"])):
                problems.append(f"workgroup size {tuple(e.block_size)} exceeds the device's "
                                f"{limits['maxComputeWorkGroupInvocations']} invocations")
            if any(g > m for g, m in zip(e.grid_size, limits["maxComputeWorkGroupCount"])):
                problems.append(f"workgroup count {tuple(e.grid_size)} exceeds the device's "
                                f"{limits['maxComputeWorkGroupCount']}")
            bindings = len(e.binding_min_lengths)  # storage buffers, one set: past the limit
            most = min(limits[k] for k in ("maxPerStageDescriptorStorageBuffers",  # lavapipe's
                                           "maxDescriptorSetStorageBuffers",  # answered zeros
                                           "maxPerStageResources"))  # or crashed at 33 of 32
            if bindings > most:
                problems.append(f"{bindings} buffer bindings exceed the device's {most} "
                                "storage buffers a shader")
            if e.shared_memory_bytes > limits["maxComputeSharedMemorySize"]:
                problems.append(f"{e.shared_memory_bytes} bytes of shared memory exceed the "
                                f"device's {limits['maxComputeSharedMemorySize']}")
            if problems:
                raise HalError("FAILED_PRECONDITION", f"kernel '{e.name}' cannot run on "
                                                      f"{phys.name}: {'; '.join(problems)}")

    def _destroy_kernel(self, k: Kernel) -> None:
        self.vk.vkDestroyPipeline(self.device, k.pipeline, ffi.NULL)
        self.vk.vkDestroyPipelineLayout(self.device, k.pipeline_layout, ffi.NULL)
        self.vk.vkDestroyDescriptorSetLayout(self.device, k.set_layout, ffi.NULL)

    def release(self, executable: Executable) -> None:
        """Recorded command buffers may still use the pipelines, so a released executable is
        destroyed with the device, after the queue is idle."""
        with self._lock:
            executable.references -= 1
            if executable.references == 0:
                del self._by_code[executable.key]
                self._released.append(executable)

    def _destroy_executable(self, executable: Executable) -> None:
        for k in executable.kernels:
            self._destroy_kernel(k)
        self.vk.vkDestroyShaderModule(self.device, executable.module, ffi.NULL)

    def destroy_all(self) -> None:
        with self._lock:
            for executable in [*self._by_code.values(), *self._released]:
                self._destroy_executable(executable)
            self._by_code.clear()
            self._released.clear()
