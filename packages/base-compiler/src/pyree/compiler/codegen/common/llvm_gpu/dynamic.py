"""Kernels with run-time sizes on the LLVM GPU targets (cuda, rocm): the kernels whose loop ranges,
binding dims or indices are sizes known per dispatch only (``pyree.compiler.sizes``; symbol pk is
push constant k), all but the contractions cuda runs on tensor cores (``cuda/run_time_mma.py``,
which uses ``check_sizes`` too); no other template sees a size, and static kernels come out as
before. Nothing is compiled per size.

The kernel is normalized first (``common/normalize.py``: flat bindings, loops merged wherever
the strides line up as polynomials, so an elementwise op of any rank is one loop). The sizes it
uses are computed once, in its entry block, from the push constants (``size_values.py``), and
the static templates run with those values where they had ints:

- elementwise (no reduction): ``elementwise.emit_strided``, one thread per element in a
  grid-stride loop;
- contractions (a matmul with M, N, K at run time; batch loops too): ``matmul.emit_chosen``,
  the SIMT template's tiles staged in shared memory, tails clamped and masked, with each of its
  tilings in one kernel and the one the static template would take chosen per dispatch;
- reductions along the rows' contiguous memory, and every row kernel (softmax, layernorm):
  ``reduction.emit_block``, one block per output point striding over its row;
- the rest (column sums, argmax-style folds): ``reduction.emit_serial``, one thread per output
  point.

The grid is a size (``Launch.grid``), evaluated per dispatch by the runtime from the export's
``grid_size_expr``; a zero extent gives a zero grid, which launches nothing. Before any access,
every thread checks what these sizes imply, as llvm-cpu's entry point does (``llvm_cpu/entry.py``):
each run-time loop range and binding dim is non-negative, and each access that is not proven in
range for every size (``normalize.run_time_checks``) stays inside its binding, or its loop box
is empty. Where that fails the kernel traps (the launch reports an error) rather than touch
memory outside a binding: a host program that passes wrong sizes gets an error, never a wrong
answer. The bindings' lengths are the runtime's to check, against ``min_length_expr``.
"""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.contraction import contraction_of
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import elementwise, matmul, reduction
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module
from pyree.compiler.codegen.common.llvm_gpu.size_values import SizeValues
from pyree.compiler.codegen.common.normalize import normalize, run_time_checks
from pyree.compiler.errors import CompileError
from pyree.compiler.sizes import is_static


def plan(kernel: K.Kernel, target) -> K.Kernel | None:
    """The normalized kernel, for a kernel with run-time sizes; None for a static one."""
    if not K.has_run_time_sizes(kernel):
        return None
    if kernel.attention is not None:  # flow/attention.py forms these for a target that takes them
        raise CompileError("softmax attention with run-time sizes has no kernel template on this "
                           "target (cuda's takes f16/bf16 q, k, v on sm_80 and newer)",
                           kernel.location)
    return normalize(kernel)


def emit(module: Module, kernel: K.Kernel, name: str, plan: K.Kernel) -> Launch:
    flat = plan
    fn = Function(module)
    # the dispatch's count: normalizing may drop a loop and its size, still a kernel parameter
    sizes = SizeValues(fn, K.push_constant_count(kernel))
    check_sizes(fn, flat, sizes)
    if not flat.reduction_ranges:
        return elementwise.emit_strided(module, flat, name, fn, sizes)
    contraction = contraction_of(kernel)
    if contraction is not None:
        return matmul.emit_chosen(module, kernel, name, contraction, fn, sizes)
    folds = K.fold_pattern(flat.reductions)
    if folds is not None and (K.is_row_kernel(flat.results) or not K.contiguous_along_parallel(flat)):
        return reduction.emit_block(module, flat, name, folds, fn, sizes)
    return reduction.emit_serial(module, flat, name, fn, sizes)


def loop_indices(kernel: K.Kernel) -> bool:
    """Whether every index of ``kernel`` (not normalized) is an int combination of its loops,
    as the tensor-core templates' operand staging reads them (its bindings' strides may be
    run-time sizes). The SIMT template addresses any index through its emitted offsets, a
    run-time coefficient too (a product's K split in run-time chunks, flow/split_reduction.py)."""
    indices = [ix for r in kernel.results
               for ix in (*r.index, *(i for e in K.result_nodes(r) if isinstance(e, K.Load)
                                      for i in e.index))]
    return all(is_static(v) for ix in indices for v in (*ix.coeffs, ix.const))


def check_sizes(fn: Function, kernel: K.Kernel, sizes: SizeValues) -> None:
    """Traps unless the dispatch's sizes keep every access of ``kernel`` inside its binding."""
    ok = "true"

    def both(cond: str) -> None:
        nonlocal ok
        ok = fn.op(f"and i1 {ok}, {cond}")

    dims = {d for d in (*kernel.loop_ranges, *(d for b in kernel.bindings for d in b.shape))
            if not is_static(d)}
    for d in sorted(dims, key=repr):
        both(fn.op(f"icmp sge i64 {sizes(d)}, 0"))
    for check in run_time_checks(kernel):
        above = fn.op(f"icmp sge i64 {sizes(check.lo)}, 0")
        below = fn.op(f"icmp slt i64 {sizes(check.hi)}, {sizes(check.length)}")
        inside = fn.op(f"and i1 {above}, {below}")
        empty = "false"
        for n in check.ranges:
            if not is_static(n):
                empty = fn.op(f"or i1 {empty}, {fn.op(f'icmp eq i64 {sizes(n)}, 0')}")
        both(fn.op(f"or i1 {empty}, {inside}"))
    if ok != "true":
        fn.if_then(fn.op(f"xor i1 {ok}, true"), lambda: fn.call("void", "llvm.trap", [],
                                                                   "cold noreturn nounwind"))
