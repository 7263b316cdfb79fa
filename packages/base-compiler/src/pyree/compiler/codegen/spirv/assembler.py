"""A small SPIR-V assembler: sections, deduplicated types and constants, functions with
structured control flow, and the binary encoding (little-endian words).

Only what compute shaders need. Ids are allocated on demand; ``words()`` lays the sections out in
the order the SPIR-V specification requires (2.4 "Logical Layout of a Module").
"""

from __future__ import annotations

import struct
from collections import Counter
from contextlib import contextmanager

import numpy as np

MAGIC = 0x07230203
VERSION_1_3 = 0x00010300

# Opcodes (SPIR-V 1.3 unified specification, section 3.49).
(OpExtension, OpExtInstImport, OpExtInst, OpMemoryModel, OpEntryPoint, OpExecutionMode,
 OpCapability) = 10, 11, 12, 14, 15, 16, 17
OpName = 5
(OpTypeVoid, OpTypeBool, OpTypeInt, OpTypeFloat, OpTypeVector, OpTypeArray, OpTypeRuntimeArray,
 OpTypeStruct, OpTypePointer, OpTypeFunction) = 19, 20, 21, 22, 23, 28, 29, 30, 32, 33
OpConstantTrue, OpConstantFalse, OpConstant = 41, 42, 43
OpFunction, OpFunctionEnd, OpVariable, OpLoad, OpStore, OpAccessChain = 54, 56, 59, 61, 62, 65
OpDecorate, OpMemberDecorate, OpCompositeConstruct, OpCompositeExtract = 71, 72, 80, 81
OpConstantComposite = 44
# SPV_KHR_cooperative_matrix.
(OpTypeCooperativeMatrixKHR, OpCooperativeMatrixLoadKHR, OpCooperativeMatrixStoreKHR,
 OpCooperativeMatrixMulAddKHR) = 4456, 4457, 4458, 4459
MATRIX_A, MATRIX_B, MATRIX_ACCUMULATOR = 0, 1, 2
ROW_MAJOR = 0
SCOPE_SUBGROUP = 3
OpControlBarrier = 224
OpLoopMerge, OpSelectionMerge, OpLabel, OpBranch, OpBranchConditional, OpReturn = (
    246, 247, 248, 249, 250, 253)
OpIAdd, OpISub, OpIMul, OpUDiv, OpUMod, OpULessThan, OpSelect = 128, 130, 132, 134, 137, 176, 169
OpUConvert, OpFConvert, OpLogicalAnd = 113, 115, 167
# bf16 <-> f32 (shader.py): bit operations on the f32's 32 bits.
OpBitcast, OpIsNan, OpShiftRightLogical, OpShiftLeftLogical, OpBitwiseOr, OpBitwiseAnd = (
    124, 156, 194, 196, 197, 199)

# Storage classes, decorations, built-ins.
INPUT, WORKGROUP, PUSH_CONSTANT, FUNCTION, STORAGE_BUFFER = 1, 4, 9, 7, 12
DEC_BLOCK, DEC_ARRAY_STRIDE, DEC_BUILTIN, DEC_NON_WRITABLE = 2, 6, 11, 24
DEC_OFFSET, DEC_BINDING, DEC_DESCRIPTOR_SET = 35, 33, 34
BUILTIN_NUM_WORKGROUPS, BUILTIN_WORKGROUP_ID, BUILTIN_LOCAL_INVOCATION_ID = 24, 26, 27
SCOPE_WORKGROUP = 2
SEMANTICS_WORKGROUP_ACQUIRE_RELEASE = 0x100 | 0x8

CAPABILITIES = {"Shader": 1, "Float16": 9, "Float64": 10, "Int64": 11, "Int16": 22, "Int8": 39,
                "StorageBuffer16BitAccess": 4433, "StorageBuffer8BitAccess": 4448,
                "CooperativeMatrixKHR": 6022, "VulkanMemoryModel": 5345,
                "BFloat16TypeKHR": 5116, "BFloat16CooperativeMatrixKHR": 5118,
                "DenormPreserve": 4464, "SignedZeroInfNanPreserve": 4466}
# Capabilities that need an extension under SPIR-V 1.3.
EXTENSIONS = {"StorageBuffer8BitAccess": "SPV_KHR_8bit_storage",
              "CooperativeMatrixKHR": "SPV_KHR_cooperative_matrix",
              "BFloat16TypeKHR": "SPV_KHR_bfloat16",
              "BFloat16CooperativeMatrixKHR": "SPV_KHR_bfloat16",
              "VulkanMemoryModel": "SPV_KHR_vulkan_memory_model",
              "DenormPreserve": "SPV_KHR_float_controls",
              "SignedZeroInfNanPreserve": "SPV_KHR_float_controls"}
MEMORY_MODEL_GLSL450, MEMORY_MODEL_VULKAN = 1, 3
EXECUTION_MODE_LOCAL_SIZE, EXECUTION_MODE_DENORM_PRESERVE = 17, 4459
EXECUTION_MODE_SIGNED_ZERO_INF_NAN_PRESERVE = 4461


def encode_string(text: str) -> list[int]:
    raw = text.encode() + b"\0"
    raw += b"\0" * (-len(raw) % 4)
    return list(struct.unpack(f"<{len(raw) // 4}I", raw))


def _instruction(opcode: int, operands) -> list[int]:
    words: list[int] = []
    for x in operands:
        if isinstance(x, str):
            words += encode_string(x)
        elif isinstance(x, (list, tuple)):
            words += list(x)
        else:
            words.append(x)
    return [((len(words) + 1) << 16) | opcode] + words


class Assembler:
    def __init__(self):
        self.bound = 1
        self.capabilities: list[str] = ["Shader"]
        self.entry_points: list[int] = []
        self.execution_modes: list[int] = []
        self.names: list[int] = []
        self.annotations: list[int] = []
        self.globals: list[int] = []       # types, constants, module-scope variables
        self.functions: list[int] = []
        self._interned: dict[tuple, int] = {}
        self._glsl: int | None = None
        self._shared: dict[int, list[list[int]]] = {}  # element type -> [[variable, count], ...]
        self._shared_taken: Counter = Counter()

    def new_id(self) -> int:
        self.bound += 1
        return self.bound - 1

    def require(self, capability: str) -> None:
        if capability not in self.capabilities:
            self.capabilities.append(capability)

    def _intern(self, key: tuple, opcode: int, *operands) -> int:
        """A type or constant: emitted once, looked up afterwards."""
        if key not in self._interned:
            rid = self.new_id()
            if opcode in (OpConstant, OpConstantTrue, OpConstantFalse, OpConstantComposite):
                self.globals += _instruction(opcode, [operands[0], rid, *operands[1:]])
            else:
                self.globals += _instruction(opcode, [rid, *operands])
            self._interned[key] = rid
        return self._interned[key]

    def decorate(self, target: int, decoration: int, *args) -> None:
        self.annotations += _instruction(OpDecorate, [target, decoration, *args])

    def glsl(self) -> int:
        if self._glsl is None:
            self._glsl = self.new_id()
        return self._glsl

    # -- types ---------------------------------------------------------------------------------
    def t_void(self) -> int:
        return self._intern(("void",), OpTypeVoid)

    def t_bool(self) -> int:
        return self._intern(("bool",), OpTypeBool)

    def t_int(self, width: int) -> int:
        """Signedness 0 throughout: the instruction, not the type, says how bits are read.
        8/16-bit widths need a capability the caller picks (storage only, or arithmetic)."""
        if width == 64:
            self.require("Int64")
        return self._intern(("int", width), OpTypeInt, width, 0)

    def t_float(self, width: int) -> int:
        if width == 64:
            self.require("Float64")
        return self._intern(("float", width), OpTypeFloat, width)

    def t_bfloat16(self) -> int:
        """SPV_KHR_bfloat16's type (FP encoding BFloat16KHR), for cooperative matrices only:
        elsewhere bf16 stays 16-bit integers widened to f32 (shader.py)."""
        self.require("BFloat16TypeKHR")
        return self._intern(("bfloat16",), OpTypeFloat, 16, 0)

    def t_vector(self, element: int, count: int) -> int:
        return self._intern(("vector", element, count), OpTypeVector, element, count)

    def t_cooperative_matrix(self, element: int, rows: int, columns: int, use: int) -> int:
        """A subgroup-scope ``rows x columns`` cooperative matrix for operand ``use``."""
        self.require("CooperativeMatrixKHR")
        self.require("VulkanMemoryModel")  # which cooperative matrices require in shaders
        return self._intern(("coopmat", element, rows, columns, use), OpTypeCooperativeMatrixKHR,
                            element, self.u32(SCOPE_SUBGROUP), self.u32(rows), self.u32(columns),
                            self.u32(use))

    def t_pointer(self, storage: int, pointee: int) -> int:
        return self._intern(("pointer", storage, pointee), OpTypePointer, storage, pointee)

    def t_function(self, result: int) -> int:
        return self._intern(("function", result), OpTypeFunction, result)

    def t_array(self, element: int, count: int) -> int:
        """A fixed-size array without explicit layout (Workgroup and Function storage)."""
        return self._intern(("array", element, count), OpTypeArray, element, self.u32(count))

    def t_buffer_block(self, element: int, stride: int) -> int:
        """``struct { element data[]; }`` decorated as a storage-buffer Block."""
        key = ("buffer", element, stride)
        if key not in self._interned:
            runtime = self.new_id()
            self.globals += _instruction(OpTypeRuntimeArray, [runtime, element])
            self.decorate(runtime, DEC_ARRAY_STRIDE, stride)
            block = self.new_id()
            self.globals += _instruction(OpTypeStruct, [block, runtime])
            self.decorate(block, DEC_BLOCK)
            self.annotations += _instruction(OpMemberDecorate, [block, 0, DEC_OFFSET, 0])
            self._interned[key] = block
        return self._interned[key]

    # -- constants -----------------------------------------------------------------------------
    def u32(self, value: int) -> int:
        return self.const_int(32, value)

    def const_int(self, width: int, value: int) -> int:
        t = self.t_int(width)
        value &= (1 << width) - 1
        words = [value & 0xFFFFFFFF, value >> 32] if width == 64 else [value]
        return self._intern(("const", t, tuple(words)), OpConstant, t, *words)

    def const_float(self, width: int, value: float) -> int:
        """The constant's bit pattern, so NaN, ±inf and -0.0 come through (beyond range: ±inf)."""
        t = self.t_float(width)
        with np.errstate(over="ignore"):
            bits = int(np.array(value, np.dtype(f"f{width // 8}")).view(np.dtype(f"u{width // 8}")))
        words = [bits & 0xFFFFFFFF, bits >> 32] if width == 64 else [bits]
        return self._intern(("const", t, tuple(words)), OpConstant, t, *words)

    def const_matrix_fill(self, matrix_type: int, scalar: int) -> int:
        """A constant cooperative matrix with every element ``scalar`` (its one constituent)."""
        return self._intern(("fill", matrix_type, scalar), OpConstantComposite, matrix_type, scalar)

    def const_vector(self, vector_type: int, *constituents: int) -> int:
        return self._intern(("const_vector", vector_type, constituents), OpConstantComposite,
                            vector_type, *constituents)

    def const_bool(self, value: bool) -> int:
        t = self.t_bool()
        return self._intern(("const", t, bool(value)),
                            OpConstantTrue if value else OpConstantFalse, t)

    # -- module-scope variables ----------------------------------------------------------------
    def variable(self, storage: int, pointee: int, name: str = "") -> int:
        vid = self.new_id()
        self.globals += _instruction(OpVariable, [self.t_pointer(storage, pointee), vid, storage])
        if name:
            self.names += _instruction(OpName, [vid, name])
        return vid

    def begin_kernel(self) -> None:
        """The next kernel's workgroup arrays start again at the first shared one."""
        self._shared_taken = Counter()
        self._kernel_asks: dict[tuple[int, int], int] = {}

    def shared_mark(self) -> Counter:
        """Where the kernel's workgroup arrays stand: ``shared_rewind`` to it lets a body that
        never runs in the same dispatch as the one after the mark take the same arrays."""
        return Counter(self._shared_taken)

    def shared_rewind(self, mark: Counter) -> None:
        self._shared_taken = Counter(mark)

    def shared_array(self, element: int, count: int) -> int:
        """A Workgroup array of at least ``count`` ``element``s, shared between kernels.

        A SPIR-V 1.3 entry point names no Workgroup variables in its interface, so a driver
        cannot tell which kernel uses which and may give every kernel all of them: NVIDIA's
        Vulkan driver hung on a module whose kernels' arrays added up past 48 KB, each kernel's
        own well under it. So the i-th array of an element type is one variable in every kernel,
        declared when the module is written, with the largest count any kernel asked for.
        """
        i = self._shared_taken[element]
        self._shared_taken[element] += 1
        self._kernel_asks[element, i] = max(self._kernel_asks.get((element, i), 0), count)
        slots = self._shared.setdefault(element, [])
        if i == len(slots):
            slots.append([self.new_id(), 0])
        slots[i][1] = max(slots[i][1], count)
        return slots[i][0]

    def kernel_shared_bytes(self) -> int:
        """The bytes of workgroup arrays the kernel being written has asked for, an array that
        bodies of it take in turn (``shared_rewind``) counted once at its largest."""
        size_of = self._element_sizes()
        return sum(count * size_of[element] for (element, _), count in self._kernel_asks.items())

    def shared_bytes(self) -> int:
        """The bytes of every workgroup array declared so far: what a driver that gives each
        kernel all of them (shared_array) reserves for every kernel of the module."""
        size_of = self._element_sizes()
        return sum(count * size_of[element] for element, slots in self._shared.items()
                   for _, count in slots)

    def _element_sizes(self) -> dict[int, int]:
        """Bytes of each scalar and vector type declared, by type id."""
        size_of = {}
        for key, tid in self._interned.items():
            if key[0] in ("float", "int"):
                size_of[tid] = key[1] // 8
            elif key[0] == "bool":
                size_of[tid] = 4
        for key, tid in self._interned.items():
            if key[0] == "vector" and key[1] in size_of and isinstance(key[2], int):
                size_of[tid] = size_of[key[1]] * key[2]
        return size_of

    def _declare_shared(self) -> None:
        for element, slots in self._shared.items():
            for vid, count in slots:
                pointer = self.t_pointer(WORKGROUP, self.t_array(element, count))
                self.globals += _instruction(OpVariable, [pointer, vid, WORKGROUP])
        self._shared = {}

    def builtin_input(self, builtin: int) -> int:
        """A ``uvec3`` Input built-in (one variable per built-in, shared by all entry points)."""
        key = ("builtin", builtin)
        if key not in self._interned:
            vid = self.variable(INPUT, self.t_vector(self.t_int(32), 3))
            self.decorate(vid, DEC_BUILTIN, builtin)
            self._interned[key] = vid
        return self._interned[key]

    def push_constants(self, count: int) -> int:
        """The PushConstant variable of a ``struct { uint32 p0, ..., p<count-1>; }`` Block at
        offset 0, as the Vulkan driver pushes a dispatch's constants; one per count, so each
        entry point uses exactly one."""
        key = ("push", count)
        if key not in self._interned:
            u32 = self.t_int(32)
            block = self.new_id()
            self.globals += _instruction(OpTypeStruct, [block] + [u32] * count)
            self.decorate(block, DEC_BLOCK)
            for k in range(count):
                self.annotations += _instruction(OpMemberDecorate, [block, k, DEC_OFFSET, 4 * k])
            self._interned[key] = self.variable(PUSH_CONSTANT, block)
        return self._interned[key]

    def entry_point(self, fn: Function, name: str, local_size: tuple[int, int, int],
                    interface: list[int], denorm_preserve: bool = False) -> None:
        """Also asks for IEEE NaN, ±inf and -0.0 in float arithmetic of every width the shader
        computes in: without SignedZeroInfNanPreserve a Vulkan driver may assume there are none
        (lavapipe makes -inf + NaN = -inf, so a -inf mask would swallow a NaN); and, where the
        target supports it, for subnormals (DenormPreserve)."""
        self.entry_points += _instruction(OpEntryPoint, [5, fn.id, name, *interface])
        self.execution_modes += _instruction(OpExecutionMode, [fn.id, EXECUTION_MODE_LOCAL_SIZE,
                                                               *local_size])
        self.require("SignedZeroInfNanPreserve")
        widths = [32] + [w for w, cap in ((16, "Float16"), (64, "Float64")) if cap in self.capabilities]
        modes = [EXECUTION_MODE_SIGNED_ZERO_INF_NAN_PRESERVE]
        if denorm_preserve:
            self.require("DenormPreserve")
            modes.append(EXECUTION_MODE_DENORM_PRESERVE)
        for mode in modes:
            for width in widths:
                self.execution_modes += _instruction(OpExecutionMode, [fn.id, mode, width])
        self.names += _instruction(OpName, [fn.id, name])

    # -- output --------------------------------------------------------------------------------
    def words(self) -> list[int]:
        self._declare_shared()
        head = [MAGIC, VERSION_1_3, 0, self.bound, 0]
        for cap in self.capabilities:
            head += _instruction(OpCapability, [CAPABILITIES[cap]])
        for cap in self.capabilities:
            if cap in EXTENSIONS:
                head += _instruction(OpExtension, [EXTENSIONS[cap]])
        if self._glsl is not None:
            head += _instruction(OpExtInstImport, [self._glsl, "GLSL.std.450"])
        vulkan = "VulkanMemoryModel" in self.capabilities
        head += _instruction(OpMemoryModel, [0, MEMORY_MODEL_VULKAN if vulkan else MEMORY_MODEL_GLSL450])
        return (head + self.entry_points + self.execution_modes + self.names + self.annotations
                + self.globals + self.functions)

    def binary(self) -> bytes:
        w = self.words()
        return struct.pack(f"<{len(w)}I", *w)


class Function:
    """A ``void()`` function under construction; blocks are emitted in order, Function-storage
    variables are hoisted into the entry block as SPIR-V requires."""

    def __init__(self, asm: Assembler):
        self.asm = asm
        self.id = asm.new_id()
        self._variables: list[int] = []
        self._prologue: list[int] = []
        self._body: list[int] = []

    def op(self, opcode: int, result_type: int, *operands) -> int:
        rid = self.asm.new_id()
        self._body += _instruction(opcode, [result_type, rid, *operands])
        return rid

    def do(self, opcode: int, *operands) -> None:
        self._body += _instruction(opcode, list(operands))

    def ext(self, result_type: int, instruction: int, *operands) -> int:
        return self.op(OpExtInst, result_type, self.asm.glsl(), instruction, *operands)

    def variable(self, pointee: int) -> int:
        vid = self.asm.new_id()
        self._variables += _instruction(OpVariable, [self.asm.t_pointer(FUNCTION, pointee), vid,
                                                     FUNCTION])
        return vid

    @contextmanager
    def prologue(self):
        """Emits into the entry block ahead of everything else, so the values dominate every
        block (run-time sizes, ``spirv/sizes.py``)."""
        body, self._body = self._body, self._prologue
        try:
            yield
        finally:
            self._prologue, self._body = self._body, body

    def label(self, lid: int) -> None:
        self._body += _instruction(OpLabel, [lid])

    def if_then(self, cond: int, then, otherwise=None) -> None:
        """Structured ``if``: ``then()`` / ``otherwise()`` emit the arms."""
        t, e, merge = self.asm.new_id(), self.asm.new_id(), self.asm.new_id()
        self.do(OpSelectionMerge, merge, 0)
        self.do(OpBranchConditional, cond, t, e if otherwise else merge)
        self.label(t)
        then()
        self.do(OpBranch, merge)
        if otherwise:
            self.label(e)
            otherwise()
            self.do(OpBranch, merge)
        self.label(merge)

    def for_range(self, start: int, stop: int, step: int, body) -> None:
        """``for (u32 i = start; i < stop; i += step) body(i)`` as a structured loop (all ids)."""
        u32 = self.asm.t_int(32)
        counter = self.variable(u32)
        self.do(OpStore, counter, start)
        header, check, inner, cont, merge = (self.asm.new_id() for _ in range(5))
        self.do(OpBranch, header)
        self.label(header)
        self.do(OpLoopMerge, merge, cont, 0)
        self.do(OpBranch, check)
        self.label(check)
        i = self.op(OpLoad, u32, counter)
        self.do(OpBranchConditional, self.op(OpULessThan, self.asm.t_bool(), i, stop), inner, merge)
        self.label(inner)
        body(i)
        self.do(OpBranch, cont)
        self.label(cont)
        i = self.op(OpLoad, u32, counter)
        self.do(OpStore, counter, self.op(OpIAdd, u32, i, step))
        self.do(OpBranch, header)
        self.label(merge)

    def barrier(self) -> None:
        scope = self.asm.u32(SCOPE_WORKGROUP)
        self.do(OpControlBarrier, scope, scope, self.asm.u32(SEMANTICS_WORKGROUP_ACQUIRE_RELEASE))

    def finish(self, guard: int | None = None) -> None:
        """Closes the function; with ``guard`` (a bool computed in the prologue) the body runs
        only where it holds."""
        asm = self.asm
        void = asm.t_void()
        entry = asm.new_id()
        asm.functions += _instruction(OpFunction, [void, self.id, 0, asm.t_function(void)])
        asm.functions += _instruction(OpLabel, [entry]) + self._variables + self._prologue
        if guard is None:
            asm.functions += self._body
        else:
            run, merge = asm.new_id(), asm.new_id()
            asm.functions += (_instruction(OpSelectionMerge, [merge, 0])
                              + _instruction(OpBranchConditional, [guard, run, merge])
                              + _instruction(OpLabel, [run]) + self._body
                              + _instruction(OpBranch, [merge]) + _instruction(OpLabel, [merge]))
        asm.functions += _instruction(OpReturn, []) + _instruction(OpFunctionEnd, [])
