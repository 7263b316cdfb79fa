"""One compute entry point under construction: its storage-buffer bindings, built-ins, typed
loads and stores, affine addressing, and the launch it is written for.

Bindings are descriptor set 0, binding = position (schemas/executables.fbs), each a runtime array
of the binding's storage type: i1 as one byte, f16 as half (16-bit storage). Arithmetic happens
in each dtype's compute type (see ``compute_type``).
"""

from __future__ import annotations

import math

from pyree.compiler import kernel as K
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.sizes import MAX_ELEMENTS, SizeValues
from pyree.compiler.codegen.spirv.targets import VulkanTarget
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import has_run_time_sizes
from pyree.compiler.sizes import is_static, opaque

MAX_GROUPS_PER_DIM = 65535   # maxComputeWorkGroupCount's guaranteed minimum


def grid_for(groups) -> tuple:
    """``groups`` workgroups as an x*y grid within the per-dimension limit, with as few
    workgroups past ``groups`` as the rows allow (65536 -> 32768x2, not 65535x2). A run-time
    count gives run-time sizes, x 0 where it is 0 (the driver launches nothing)."""
    if not is_static(groups):
        gy = opaque("max", 1, opaque("ceildiv", groups, MAX_GROUPS_PER_DIM))
        return (opaque("ceildiv", groups, gy), gy, 1)
    if groups == 0:
        return (0, 1, 1)
    gy = -(-groups // MAX_GROUPS_PER_DIM)
    return (-(-groups // gy), gy, 1)


class Shader:
    def __init__(self, asm: S.Assembler, kernel: K.Kernel, target: VulkanTarget):
        self.asm, self.kernel, self.target = asm, kernel, target
        asm.begin_kernel()
        self.where = f"kernel '{kernel.name}'" + (f" ({kernel.location})" if kernel.location else "")
        self.fn = S.Function(asm)
        self.u32 = asm.t_int(32)
        self.bool = asm.t_bool()
        self.interface: list[int] = []
        self.buffers = []
        for i, b in enumerate(kernel.bindings):
            if is_static(b.shape[0]) and b.shape[0] > MAX_ELEMENTS:  # else: SizeValues.guard
                raise CompileError(f"binding {i} of {self.where} has {b.shape[0]} elements; the "
                                   f"vulkan-spirv target addresses at most {MAX_ELEMENTS}")
            self.buffers.append((self.storage_type(b.dtype), b.dtype))
        self._views: dict[tuple[int, int], int] = {}
        self.sizes = SizeValues(self) if has_run_time_sizes(kernel) else None

    def size(self, value) -> int:
        """A size the code uses (an int, or a run-time size: ``sizes.py``) as a u32 id."""
        return self.asm.u32(value) if self.sizes is None or is_static(value) else self.sizes(value)

    def view(self, binding: int, width: int = 1, raw16: bool = False) -> int:
        """The buffer variable of ``binding`` as a runtime array of ``width``-vectors (1: scalars),
        or with ``raw16`` of 16-byte u32 4-vectors whatever its type, declared on first use so
        that each entry point statically uses one view per binding and kind."""
        key = (binding, "raw16" if raw16 else width)
        if key not in self._views:
            element, dtype = self.buffers[binding]
            if raw16:
                element, stride = self.asm.t_vector(self.u32, 4), 16
            else:
                if width > 1:
                    element = self.asm.t_vector(element, width)
                stride = K.itemsize(dtype) * width
            var = self.asm.variable(S.STORAGE_BUFFER, self.asm.t_buffer_block(element, stride))
            self.asm.decorate(var, S.DEC_DESCRIPTOR_SET, 0)
            self.asm.decorate(var, S.DEC_BINDING, binding)
            if self.kernel.bindings[binding].access == "read":
                self.asm.decorate(var, S.DEC_NON_WRITABLE)
            self._views[key] = var
        return self._views[key]

    # -- types -----------------------------------------------------------------------------------
    def storage_type(self, dtype: str) -> int:
        """bf16, which Vulkan 1.2 has no type for, is stored as its 16 bits."""
        asm, bits = self.asm, 8 * K.itemsize(dtype)
        if bits in (8, 16):
            if not self.target.storage_8_16_bit:
                raise CompileError(f"{self.where} uses {dtype} buffers, which target "
                                   f"'{self.target.triple}' lacks (8/16-bit storage)")
            asm.require("StorageBuffer8BitAccess" if bits == 8 else "StorageBuffer16BitAccess")
        self._check_64(dtype)
        return asm.t_float(bits) if K.is_float(dtype) and dtype != "bf16" else asm.t_int(bits)

    def compute_type(self, dtype: str) -> int:
        """f16 computes in half only where the target has float16 arithmetic, else in f32;
        bf16 computes in f32 (scalar.py rounds each bf16 result)."""
        asm = self.asm
        if dtype == "i1":
            return self.bool
        bits = self.compute_bits(dtype)
        self._check_64(dtype)
        if bits in (8, 16):
            asm.require({8: "Int8", 16: "Float16" if K.is_float(dtype) else "Int16"}[bits])
        return asm.t_float(bits) if K.is_float(dtype) else asm.t_int(bits)

    def compute_bits(self, dtype: str) -> int:
        if dtype == "bf16" or (dtype == "f16" and not self.target.float16):
            return 32
        return 8 * K.itemsize(dtype)

    def _check_64(self, dtype: str) -> None:
        if dtype == "f64" and not self.target.float64:
            raise CompileError(f"{self.where} uses f64, which target '{self.target.triple}' "
                               "lacks (shaderFloat64); --iree-input-demote-f64-to-f32 runs it "
                               "in f32")
        if K.itemsize(dtype) == 8 and not K.is_float(dtype) and not self.target.int64:
            raise CompileError(f"{self.where} uses {dtype}, which target "
                               f"'{self.target.triple}' lacks (shaderInt64)")

    # -- memory ----------------------------------------------------------------------------------
    def element(self, binding: int, index: int, width: int = 1) -> int:
        """A pointer to element (or ``width``-vector) ``index`` (u32 id) of ``binding``."""
        element = self.buffers[binding][0]
        if width > 1:
            element = self.asm.t_vector(element, width)
        ptr = self.asm.t_pointer(S.STORAGE_BUFFER, element)
        return self.fn.op(S.OpAccessChain, ptr, self.view(binding, width), self.asm.u32(0), index)

    def load(self, binding: int, index: int) -> int:
        """Element ``index`` (u32 id) of ``binding``, converted to its compute type."""
        element, dtype = self.buffers[binding]
        return self.widen(dtype, self.fn.op(S.OpLoad, element, self.element(binding, index)))

    def load_vector(self, binding: int, index: int, width: int) -> int:
        """The ``width``-vector ``index`` of ``binding`` in storage type (one wide access)."""
        element = self.asm.t_vector(self.buffers[binding][0], width)
        return self.fn.op(S.OpLoad, element, self.element(binding, index, width))

    def load_raw16(self, binding: int, index: int) -> int:
        """The 16 bytes at 16-byte index ``index`` (u32 id) of ``binding``, as a u32 4-vector."""
        vec = self.asm.t_vector(self.u32, 4)
        ptr = self.fn.op(S.OpAccessChain, self.asm.t_pointer(S.STORAGE_BUFFER, vec),
                         self.view(binding, raw16=True), self.asm.u32(0), index)
        return self.fn.op(S.OpLoad, vec, ptr)

    def store_vector(self, binding: int, index: int, width: int, value: int) -> None:
        self.fn.do(S.OpStore, self.element(binding, index, width), value)

    def widen(self, dtype: str, raw: int) -> int:
        """A value in ``dtype``'s storage type -> its compute type."""
        fn, asm = self.fn, self.asm
        if dtype == "i1":
            wide = fn.op(S.OpUConvert, self.u32, raw)
            return fn.op(171, self.bool, wide, asm.u32(0))  # OpINotEqual
        if dtype == "bf16":
            return self.from_bf16_bits(fn.op(S.OpUConvert, self.u32, raw))
        if self.compute_bits(dtype) != 8 * K.itemsize(dtype):
            return fn.op(115, self.compute_type(dtype), raw)  # OpFConvert
        return raw

    def store(self, binding: int, index: int, value: int) -> None:
        dtype = self.buffers[binding][1]
        self.fn.do(S.OpStore, self.element(binding, index), self.narrow(dtype, value))

    def narrow(self, dtype: str, value: int) -> int:
        """A value in ``dtype``'s compute type -> its storage type."""
        fn, asm = self.fn, self.asm
        element = self.storage_type(dtype)
        if dtype == "i1":  # through u32: an 8-bit constant needs Int8, not just 8-bit storage
            return fn.op(S.OpUConvert, element, fn.op(S.OpSelect, self.u32, value, asm.u32(1), asm.u32(0)))
        if dtype == "bf16":
            return fn.op(S.OpUConvert, element, self.to_bf16_bits(value))
        if self.compute_bits(dtype) != 8 * K.itemsize(dtype):
            return fn.op(115, element, value)  # OpFConvert
        return value

    def from_bf16_bits(self, bits: int) -> int:
        """A u32 holding bf16 bits in its low half -> the f32 of the same value (exact)."""
        fn = self.fn
        shifted = fn.op(S.OpShiftLeftLogical, self.u32, bits, self.asm.u32(16))
        return fn.op(S.OpBitcast, self.asm.t_float(32), shifted)

    def to_bf16_bits(self, x: int) -> int:
        """An f32 -> its bf16 bits (in a u32), rounded to nearest even; a NaN stays a quiet NaN."""
        fn, asm, u32 = self.fn, self.asm, self.u32
        u = fn.op(S.OpBitcast, u32, x)
        high = fn.op(S.OpShiftRightLogical, u32, u, asm.u32(16))
        bias = fn.op(S.OpIAdd, u32, asm.u32(0x7FFF), fn.op(S.OpBitwiseAnd, u32, high, asm.u32(1)))
        rounded = fn.op(S.OpShiftRightLogical, u32, fn.op(S.OpIAdd, u32, u, bias), asm.u32(16))
        quiet = fn.op(S.OpBitwiseOr, u32, high, asm.u32(0x40))
        return fn.op(S.OpSelect, u32, fn.op(S.OpIsNan, self.bool, x), quiet, rounded)

    def round_bf16(self, x: int) -> int:
        """An f32 rounded to the nearest bf16 value (still an f32)."""
        return self.from_bf16_bits(self.to_bf16_bits(x))

    def round_f16(self, x: int) -> int:
        """An f32 rounded to the nearest f16 value, still an f32 (f16 computes in f32 where the
        target has no 16-bit float arithmetic): nearest even on the bits in the normal range,
        to a multiple of 2^-24 below it (f16's subnormals), ±inf from 65520 on; NaN stays."""
        fn, asm, u32, bool_ = self.fn, self.asm, self.u32, self.bool
        f32 = asm.t_float(32)
        u = fn.op(S.OpBitcast, u32, x)
        sign = fn.op(S.OpBitwiseAnd, u32, u, asm.u32(0x80000000))
        a = fn.op(S.OpBitwiseAnd, u32, u, asm.u32(0x7FFFFFFF))
        odd = fn.op(S.OpBitwiseAnd, u32, fn.op(S.OpShiftRightLogical, u32, a, asm.u32(13)),
                    asm.u32(1))
        bias = fn.op(S.OpIAdd, u32, asm.u32(0xFFF), odd)
        normal = fn.op(S.OpBitwiseAnd, u32, fn.op(S.OpIAdd, u32, a, bias), asm.u32(0xFFFFE000))
        magnitude = fn.op(S.OpBitcast, f32, a)
        scaled = fn.ext(f32, 2, fn.op(133, f32, magnitude, asm.const_float(32, 2.0 ** 24)))  # RoundEven
        tiny = fn.op(S.OpBitcast, u32, fn.op(133, f32, scaled, asm.const_float(32, 2.0 ** -24)))
        below = fn.op(S.OpULessThan, bool_, a, asm.u32(0x38800000))  # 2^-14
        over = fn.op(174, bool_, a, asm.u32(0x477FF000))  # OpUGreaterThanEqual 65520
        bits = fn.op(S.OpSelect, u32, below, tiny, normal)
        bits = fn.op(S.OpSelect, u32, over, asm.u32(0x7F800000), bits)
        rounded = fn.op(S.OpBitcast, f32, fn.op(S.OpBitwiseOr, u32, sign, bits))
        return fn.op(S.OpSelect, f32, fn.op(S.OpIsNan, bool_, x), x, rounded)

    def address(self, ix: K.AffineExpr, point: list[int | None]) -> int:
        """``ix`` at the loop indices ``point`` (u32 ids), wrapping mod 2**32 like the hardware."""
        fn = self.fn
        acc = None
        for d, c in enumerate(ix.coeffs):
            if c == 0:
                continue
            term = point[d] if c == 1 else fn.op(S.OpIMul, self.u32, point[d], self.size(c))
            acc = term if acc is None else fn.op(S.OpIAdd, self.u32, acc, term)
        if acc is None:
            return self.size(ix.const)
        return acc if ix.const == 0 else fn.op(S.OpIAdd, self.u32, acc, self.size(ix.const))

    def delinearize(self, linear: int, ranges: tuple[int, ...]) -> list[int]:
        """Row-major loop indices of ``linear`` over ``ranges``."""
        fn = self.fn
        out = []
        stride = 1
        for n in reversed(ranges):
            q = linear if stride == 1 else fn.op(S.OpUDiv, self.u32, linear, self.size(stride))
            out.append(q if n * stride == math.prod(ranges) else fn.op(S.OpUMod, self.u32, q, self.size(n)))
            stride *= n
        return out[::-1]

    # -- built-ins -------------------------------------------------------------------------------
    def builtin(self, builtin: int, component: int) -> int:
        var = self.asm.builtin_input(builtin)
        if var not in self.interface:
            self.interface.append(var)
        vec = self.fn.op(S.OpLoad, self.asm.t_vector(self.u32, 3), var)
        return self.fn.op(S.OpCompositeExtract, self.u32, vec, component)

    def group_id(self, grid: tuple[int, int, int]) -> int:
        """The linear workgroup id over an x*y grid from ``grid_for``. A run-time grid's width
        is the dispatch's own (NumWorkgroups): computed from the sizes it took two 64-bit
        divisions an invocation, which ran a run-time-batch im2col (one element an invocation)
        at 2.4x the static kernel's time on NVIDIA's Vulkan driver (BENCHMARKS.md)."""
        x = self.builtin(S.BUILTIN_WORKGROUP_ID, 0)
        if is_static(grid[1]) and grid[1] == 1:
            return x
        y = self.builtin(S.BUILTIN_WORKGROUP_ID, 1)
        width = self.size(grid[0]) if is_static(grid[0]) else \
            self.builtin(S.BUILTIN_NUM_WORKGROUPS, 0)
        return self.fn.op(S.OpIAdd, self.u32, self.fn.op(S.OpIMul, self.u32, y, width), x)

    def local_id(self) -> int:
        return self.builtin(S.BUILTIN_LOCAL_INVOCATION_ID, 0)

    def finish(self, name: str, block: tuple[int, int, int]) -> None:
        self.fn.finish(None if self.sizes is None else self.sizes.guard())
        self.asm.entry_point(self.fn, name, block, self.interface, self.target.denorm_preserve)


