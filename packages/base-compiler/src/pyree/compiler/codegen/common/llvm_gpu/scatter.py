"""Scatter kernels (``kernel.Scatter``): one thread per update element, combined into its
computed place by one atomic read-modify-write (the operations ``codegen/common/scatter.py`` picks, as
llvm-cpu's template does, written as LLVM IR text).

``atomicrmw`` where LLVM has the op for the dtype: float add (NVPTX has f32 and f64 natively,
f16 from sm_70; AMDGPU's, or LLVM's compare-exchange expansion where a chip lacks one), integer
add, min, max, and, or, xor; else a compare-exchange loop on the element's bits around the
kernel's own op (products, NaN-propagating float max/min, bf16 and i1). A plain set is a plain
store, where its condition holds. A place outside the binding is skipped.
"""

from __future__ import annotations

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import ceil_div, linearize
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, storage_type
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.codegen.common.scatter import ATOMIC_RMW, combine_of, dtype_kind

BLOCK = 256


def plan(kernel: K.Kernel, target) -> int | None:
    """Takes exactly the kernels with a scatter result: the number of update elements."""
    if not kernel.results or kernel.results[0].scatter is None:
        return None
    return int(np.prod(kernel.loop_ranges, dtype=np.int64))


def emit(module: Module, kernel: K.Kernel, name: str, plan: int) -> Launch:
    r = kernel.results[0]
    n = len(kernel.loop_ranges)
    dtype = kernel.bindings[r.binding].dtype
    fn = Function(module)
    g = A.global_thread_id(fn)

    def body():
        idx = A.decompose(fn, g, kernel.loop_ranges) if n else []

        def load(e: K.Load) -> str:
            lin = linearize(kernel.bindings[e.binding], e.index, n)
            return A.load(fn, A.element_ptr(fn, f"%b{e.binding}", e.dtype, A.offset(fn, lin, idx)),
                          e.dtype)

        current: list[str] = []
        lower = ScalarLowering(fn, load, lambda d: idx[d], acc=lambda k: current[-1],
                               location=kernel.location, kernel=kernel)
        offset = lower(K.scatter_offset(r.scatter.place, kernel.bindings[r.binding].shape))
        elements = int(np.prod(kernel.bindings[r.binding].shape, dtype=np.int64))
        inside = fn.op(f"icmp ult i64 {offset}, {elements}")
        fn.if_then(inside, lambda: _update(fn, lower, current, r, dtype,
                                           A.element_ptr(fn, f"%b{r.binding}", dtype, offset)))

    fn.if_then(fn.op(f"icmp ult i64 {g}, {plan}"), body)
    block = min(BLOCK, max(32, ceil_div(plan, 32) * 32))
    module.add_kernel(name, A.kernel_params(kernel), fn, block_size=block)
    return Launch((max(1, ceil_div(plan, block)), 1, 1), (block, 1, 1))


def _update(fn: Function, lower: ScalarLowering, current: list[str], r: K.Result, dtype: str,
            ptr: str) -> None:
    op, update, _, cond = combine_of(r.value)
    if op is None:  # a store, where its condition holds
        if cond is None:
            A.store(fn, ptr, dtype, lower(update))
        else:
            saved = dict(lower.cache)
            fn.if_then(lower(cond), lambda: A.store(fn, ptr, dtype, lower(update)))
            lower.cache = saved  # what the branch computed does not dominate what follows
        return
    x = lower(update)  # once, before the loop: it dominates every trip
    rmw = ATOMIC_RMW.get((op, dtype_kind(dtype)))
    scope = _scope(fn)
    if rmw is not None:
        fn.op(f"atomicrmw {rmw} ptr addrspace(1) {ptr}, {storage_type(dtype)} {x}{scope} "
              f"monotonic, align {K.itemsize(dtype)}")
        return
    bits = f"i{8 * K.itemsize(dtype)}"
    st = storage_type(dtype)
    first = fn.op(f"load atomic {bits}, ptr addrspace(1) {ptr}{scope} monotonic, "
                  f"align {K.itemsize(dtype)}")
    slot = fn.alloca(bits)
    fn.raw(f"store {bits} {first}, ptr {slot}")
    loop, done = fn.new_label("cas"), fn.new_label("casdone")
    fn.br(loop)
    fn.label(loop)
    old_bits = fn.op(f"load {bits}, ptr {slot}")
    old = old_bits if st == bits else fn.op(f"bitcast {bits} {old_bits} to {st}")
    current.append(fn.op(f"icmp ne i8 {old}, 0") if dtype == "i1" else old)
    saved = dict(lower.cache)
    new = lower(r.value)
    lower.cache = saved  # the combine is the loop's own: nothing after may reuse it
    current.pop()
    if dtype == "i1":
        new = fn.op(f"zext i1 {new} to i8")
    new_bits = new if st == bits else fn.op(f"bitcast {st} {new} to {bits}")
    pair = fn.op(f"cmpxchg ptr addrspace(1) {ptr}, {bits} {old_bits}, {bits} {new_bits}{scope} "
                 f"monotonic monotonic, align {K.itemsize(dtype)}")
    fn.raw(f"store {bits} {fn.op(f'extractvalue {{ {bits}, i1 }} {pair}, 0')}, ptr {slot}")
    fn.cbr(fn.op(f"extractvalue {{ {bits}, i1 }} {pair}, 1"), done, loop)
    fn.label(done)


def _scope(fn: Function) -> str:
    """The atomics' synchronization scope: the device (AMDGPU's default, the system, can take
    slower paths or none for float atomics on device memory)."""
    return ' syncscope("agent")' if fn.module.target.backend == "rocm" else ""
