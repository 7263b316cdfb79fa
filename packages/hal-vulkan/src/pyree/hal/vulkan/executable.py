"""SPIR-V executables: one VkShaderModule per module, and per export a descriptor-set layout
(storage buffers at binding = position), a pipeline layout (that set plus push constants) and a
compute pipeline, all created once at load. Identical code loaded again reuses them.

Before creating anything the module is checked: its SPIR-V structure and each entry point's
descriptors against its export's bindings (hal/images/spirv.py in the runtime: a driver may hang
on a module cut short, or write through a descriptor the layout lacks), then against the device: capabilities
the device lacks (float16, 8-bit storage...), workgroup sizes, counts and shared memory within
the device's limits. A module built for another GPU is refused with the reason, never run.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

from pyree.hal.vulkan.physical_device import CAPABILITY_FEATURES, PhysicalDevice
from pyree.hal.vulkan.symbols import Functions, check, ffi
from pyree.runtime.hal.images import ImageError
from pyree.runtime.hal.images.spirv import check_spirv
from pyree.runtime.hal.python_driver import ExecutableParams, HalError

STAGE_COMPUTE = 0x20
DESCRIPTOR_STORAGE_BUFFER = 7
STYPE_SHADER_MODULE, STYPE_SET_LAYOUT, STYPE_PIPELINE_LAYOUT = 16, 32, 30
STYPE_SHADER_STAGE, STYPE_COMPUTE_PIPELINE = 18, 29
PUSH_CONSTANT_BYTES = 128


@dataclass
class Kernel:
    name: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    min_lengths: tuple[int, ...]
    set_layout: int
    pipeline_layout: int
    pipeline: int


class Executable:
    def __init__(self, kernels: list[Kernel], module: int, key: bytes):
        self.kernels, self.module, self.key = kernels, module, key
        self.references = 1


def capabilities(code: bytes) -> set[int]:
    words = struct.unpack(f"<{len(code) // 4}I", code)
    out, i = set(), 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            break
        if opcode == 17:      # OpCapability
            out.add(words[i + 1])
        elif opcode not in (10, 11):  # capabilities come first, before extensions and imports
            break
        i += count
    return out


def cooperative_operands(code: bytes) -> set[tuple[str, int, int, int]]:
    """("A" | "B", rows, columns, float bits) of each cooperative-matrix operand type declared."""
    words = struct.unpack(f"<{len(code) // 4}I", code)
    floats, constants, out, i = {}, {}, set(), 5
    while i < len(words):
        count, opcode = words[i] >> 16, words[i] & 0xFFFF
        if count == 0:
            break
        operands = words[i + 1:i + count]
        if opcode == 22:        # OpTypeFloat
            floats[operands[0]] = operands[1]
        elif opcode == 43:      # OpConstant (32-bit values are all a matrix type uses)
            constants[operands[1]] = operands[2]
        elif opcode == 4456:    # OpTypeCooperativeMatrixKHR
            _, component, _, rows, columns, use = operands
            use = constants.get(use)
            if use in (0, 1) and component in floats:
                out.add(("AB"[use], constants.get(rows), constants.get(columns), floats[component]))
        i += count
    return out


class ExecutableCache:
    def __init__(self, vk: Functions, device, physical: PhysicalDevice):
        self.vk, self.device, self.physical = vk, device, physical
        self._by_code: dict[bytes, Executable] = {}
        self._released: list[Executable] = []

    def load(self, params: ExecutableParams) -> Executable:
        if params.format != "spirv":
            raise HalError("INVALID_ARGUMENT", f"the vulkan device runs 'spirv' executables, not "
                                               f"'{params.format}'")
        key = hashlib.sha256(params.code + repr(params.exports).encode()).digest()
        cached = self._by_code.get(key)
        if cached is not None:
            cached.references += 1
            return cached
        self._check(params)
        vk, device = self.vk, self.device
        code = ffi.from_buffer(params.code)
        info = ffi.new("VkShaderModuleCreateInfo *", {"sType": STYPE_SHADER_MODULE,
                                                      "codeSize": len(params.code),
                                                      "pCode": ffi.cast("uint32_t *", code)})
        module = ffi.new("VkShaderModule *")
        check(vk.vkCreateShaderModule(device, info, ffi.NULL, module),
              f"vkCreateShaderModule (SPIR-V for target '{params.target}')")
        kernels = []
        try:
            for export in params.exports:
                kernels.append(self._pipeline(module[0], export))
        except HalError:
            for k in kernels:
                self._destroy_kernel(k)
            vk.vkDestroyShaderModule(device, module[0], ffi.NULL)
            raise
        executable = Executable(kernels, module[0], key)
        self._by_code[key] = executable
        return executable

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
            shapes = ", ".join(f"{use} {r}x{c} f{bits}" for use, r, c, bits in unsupported)
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
            if e.shared_memory_bytes > limits["maxComputeSharedMemorySize"]:
                problems.append(f"{e.shared_memory_bytes} bytes of shared memory exceed the "
                                f"device's {limits['maxComputeSharedMemorySize']}")
            if problems:
                raise HalError("FAILED_PRECONDITION", f"kernel '{e.name}' cannot run on "
                                                      f"{phys.name}: {'; '.join(problems)}")

    def _pipeline(self, module: int, export) -> Kernel:
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
        check(vk.vkCreatePipelineLayout(device, layout_info, ffi.NULL, layout),
              "vkCreatePipelineLayout")
        name = ffi.new("char[]", export.name.encode())
        pipeline_info = ffi.new("VkComputePipelineCreateInfo *", {
            "sType": STYPE_COMPUTE_PIPELINE,
            "stage": {"sType": STYPE_SHADER_STAGE, "stage": STAGE_COMPUTE, "module": module,
                      "pName": name},
            "layout": layout[0]})
        pipeline = ffi.new("VkPipeline *")
        result = vk.vkCreateComputePipelines(device, 0, 1, pipeline_info, ffi.NULL, pipeline)
        if result < 0:
            vk.vkDestroyPipelineLayout(device, layout[0], ffi.NULL)
            vk.vkDestroyDescriptorSetLayout(device, set_layout[0], ffi.NULL)
            check(result, f"creating the compute pipeline of kernel '{export.name}'")
        return Kernel(export.name, tuple(export.grid_size), tuple(export.block_size),
                      tuple(export.binding_min_lengths), set_layout[0], layout[0], pipeline[0])

    def _destroy_kernel(self, k: Kernel) -> None:
        self.vk.vkDestroyPipeline(self.device, k.pipeline, ffi.NULL)
        self.vk.vkDestroyPipelineLayout(self.device, k.pipeline_layout, ffi.NULL)
        self.vk.vkDestroyDescriptorSetLayout(self.device, k.set_layout, ffi.NULL)

    def release(self, executable: Executable) -> None:
        """Recorded command buffers may still use the pipelines, so a released executable is
        destroyed with the device, after the queue is idle."""
        executable.references -= 1
        if executable.references == 0:
            del self._by_code[executable.key]
            self._released.append(executable)

    def destroy_all(self) -> None:
        for executable in [*self._by_code.values(), *self._released]:
            for k in executable.kernels:
                self._destroy_kernel(k)
            self.vk.vkDestroyShaderModule(self.device, executable.module, ffi.NULL)
        self._by_code.clear()
        self._released.clear()
