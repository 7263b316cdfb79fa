"""Scatter kernels (``kernel.Scatter``): one invocation per update element, combined into its
computed place by one atomic read-modify-write, as the LLVM GPU template does
(``codegen/common/llvm_gpu/scatter.py``).

Core Vulkan has integer atomics on 32-bit StorageBuffer elements only (float atomics need
SPV_EXT_shader_atomic_float_add and friends, which this template does not depend on), so it
takes f32, i32 and ui32 elements (``DTYPES``, the backend's ``scatter_atomic_dtypes``): an
``OpAtomicIAdd``/``And``/``Or``/``Xor``/``SMin``/``SMax``/``UMin``/``UMax`` where the op and
dtype have one (``ATOMIC``), else a compare-exchange loop on the element's 32 bits around the
kernel's own op (float sums, products, NaN-propagating float max/min, integer products). The
result binding is viewed as 32-bit integers for that. A plain set is a plain store, where its
condition holds (input/scatter.py: the one winner of a place stores), of any dtype the target
stores (8- and 16-bit ones with its 8/16-bit storage: each element its own bytes, so places
that never repeat never race). A place outside the binding is skipped. Device scope, relaxed
order: the kernel's end orders the writes.
"""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import ceil_div
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.normalize import unsafe_loads
from pyree.compiler.codegen.common.scatter import combine_of, dtype_kind
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.scalar import ScalarLowering
from pyree.compiler.codegen.spirv.shader import Shader, grid_for
from pyree.compiler.sizes import num_elements

DTYPES = frozenset({"f32", "i32", "ui32"})
OpAtomicLoad, OpAtomicCompareExchange = 227, 230
OpIEqual = 170
# (op, kind of dtype) -> the atomic instruction that computes ``Binary(op)`` exactly
ATOMIC = {
    **{("add", kind): 234 for kind in ("signed", "unsigned")},   # OpAtomicIAdd
    **{("and", kind): 240 for kind in ("signed", "unsigned")},   # OpAtomicAnd
    **{("or", kind): 241 for kind in ("signed", "unsigned")},    # OpAtomicOr
    **{("xor", kind): 242 for kind in ("signed", "unsigned")},   # OpAtomicXor
    ("min", "signed"): 236, ("min", "unsigned"): 237,           # OpAtomicSMin, OpAtomicUMin
    ("max", "signed"): 238, ("max", "unsigned"): 239,           # OpAtomicSMax, OpAtomicUMax
}
SCOPE_DEVICE, RELAXED = 1, 0


def plan(kernel: K.Kernel, target) -> int | None:
    """Takes exactly the kernels with a scatter result: the number of update elements."""
    if not kernel.results or kernel.results[0].scatter is None:
        return None
    return num_elements(kernel.loop_ranges)


def emit(sh: Shader, plan: int) -> Launch:
    kernel, fn, asm = sh.kernel, sh.fn, sh.asm
    r = kernel.results[0]
    dtype = kernel.bindings[r.binding].dtype
    plain = combine_of(r.value).op is None
    assert plain or dtype in DTYPES, \
        f"{sh.where}: no 32-bit atomics on {dtype} (scatter_atomic_dtypes)"
    assert not any(isinstance(e, (K.Load, K.Gather)) and e.binding == r.binding
                   for e in K.result_nodes(r)), "the update reads the scatter's own binding"
    if dtype in DTYPES:  # the atomics' view: integers (a float as its bits)
        sh.buffers[r.binding] = (sh.u32, dtype)
    block = min(256, sh.target.max_workgroup_invocations)
    grid = grid_for(ceil_div(plan, block))
    linear = fn.op(S.OpIAdd, sh.u32, fn.op(S.OpIMul, sh.u32, sh.group_id(grid), asm.u32(block)),
                   sh.local_id())
    acc = fn.variable(sh.compute_type(dtype))  # Acc(0): the element, in a compare-exchange loop

    def body():
        lower = ScalarLowering(sh, sh.delinearize(linear, kernel.loop_ranges), [acc],
                               frozenset(unsafe_loads(kernel)))
        place = K.scatter_offset(r.scatter.place, kernel.bindings[r.binding].shape)
        # -1 outside the binding: past every element as a u32 (bindings stay below 2**32)
        offset = lower(K.Cast("trunci", place, "i32"))
        inside = fn.op(S.OpULessThan, sh.bool, offset, asm.u32(kernel.bindings[r.binding].shape[0]))
        fn.if_then(inside, lambda: _update(sh, lower, acc, r, dtype, sh.element(r.binding, offset)))

    fn.if_then(fn.op(S.OpULessThan, sh.bool, linear, asm.u32(plan)), body)
    return Launch(grid, (block, 1, 1))


def _update(sh: Shader, lower: ScalarLowering, acc: int, r: K.Result, dtype: str,
            ptr: int) -> None:
    fn, asm, bits = sh.fn, sh.asm, sh.u32
    as_bits = (lambda v: fn.op(S.OpBitcast, bits, v)) if K.is_float(dtype) else (lambda v: v)
    op, update, _, cond = combine_of(r.value)
    scope, relaxed = asm.u32(SCOPE_DEVICE), asm.u32(RELAXED)
    if op is None:  # a store, where its condition holds: of its bits, or narrowed to storage
        def value(v: int) -> int:
            return as_bits(v) if dtype in DTYPES else sh.narrow(dtype, v)
        if cond is None:
            fn.do(S.OpStore, ptr, value(lower(update)))
        else:
            fn.if_then(lower(cond), lambda: fn.do(S.OpStore, ptr, value(lower.scoped(update))))
        return
    x = lower(update)  # once, before any loop: it dominates every trip
    atomic = ATOMIC.get((op, dtype_kind(dtype)))  # none for a float
    if atomic is not None:
        fn.op(atomic, bits, ptr, scope, relaxed, x)
        return
    # old = *ptr; do { got = compare-exchange(ptr, old, op(old)); done = got == old; old = got }
    # while (!done): on bits, not values (a NaN never compares equal to itself)
    expected = fn.variable(bits)
    fn.do(S.OpStore, expected, fn.op(OpAtomicLoad, bits, ptr, scope, relaxed))
    header, trip, latch, merge = (asm.new_id() for _ in range(4))
    fn.do(S.OpBranch, header)
    fn.label(header)
    fn.do(S.OpLoopMerge, merge, latch, 0)
    fn.do(S.OpBranch, trip)
    fn.label(trip)
    old = fn.op(S.OpLoad, bits, expected)
    fn.do(S.OpStore, acc, fn.op(S.OpBitcast, sh.compute_type(dtype), old)
          if K.is_float(dtype) else old)
    new = as_bits(lower.scoped(r.value))  # the combine is the loop's own: nothing after reuses it
    got = fn.op(OpAtomicCompareExchange, bits, ptr, scope, relaxed, relaxed, new, old)
    fn.do(S.OpStore, expected, got)
    done = fn.op(OpIEqual, sh.bool, got, old)
    fn.do(S.OpBranch, latch)
    fn.label(latch)
    fn.do(S.OpBranchConditional, done, merge, header)
    fn.label(merge)
