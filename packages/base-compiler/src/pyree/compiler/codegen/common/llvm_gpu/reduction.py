"""Reduction kernels.

When every result folds with one associative operator (``acc = acc <op> f(loads)``, op in add,
mul, max, min, and, or, xor) and the reduction is long, one block computes one output: threads
stride over the reduction (coalesced along the innermost reduced dim), fold in registers, then
across the warp with shuffles and across warps through shared memory. Otherwise (argmax-style
multi-result updates, short reductions) one thread computes one output serially, which is always
correct. Float folds are reassociated, as every GPU compiler does; a thread's float sum over more
than ``LEAF`` points cascades (codegen/common/cascade.py).
"""

from __future__ import annotations

import numpy as np
from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import Linear, ceil_div, linearize
from pyree.compiler.codegen.common.cascade import block_sizes, cascade, float_folds
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, const, llvm_type
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.codegen.common.llvm_gpu.size_values import STATIC
from pyree.compiler.errors import CompileError
from pyree.compiler.sizes import is_static, num_elements, opaque

PARALLEL_MIN_REDUCTION = 128
MANY_OUTPUTS = 4096
# Reduced elements a block template thread keeps in registers (a resident row), and the strided
# elements per trip of a longer row's loop (loads in flight together).
RESIDENT = 8
UNROLL = 4
# A thread's points per block of its cascaded float sums (codegen/common/cascade.py), and blocks per
# level above.
LEAF = 16
FAN_IN = 16
# With run-time sizes: a block template's threads per block, and the extent a cascade is sized for.
RUN_TIME_BLOCK = 256
RUN_TIME_EXTENT = 1 << 32


def identity(op: str, dtype: str) -> str:
    """``K.fold_identity`` as an LLVM constant (integers are sign-agnostic there: an unsigned
    maximum is all ones, -1)."""
    v = K.fold_identity(op, dtype)
    if dtype == "i1":
        return "true" if v else "false"
    if K.is_unsigned(dtype) and v == np.iinfo(K.DTYPES[dtype]).max:
        v = -1
    return const(v, dtype)


def plan(kernel: K.Kernel, target) -> tuple[int, ...] | None:
    """The reduction ranges folded, for any kernel that has them."""
    return kernel.reduction_ranges or None


def emit(module: Module, kernel: K.Kernel, name: str, plan: tuple[int, ...]) -> Launch:
    folds = K.fold_pattern(kernel.reductions)
    if folds is not None and int(np.prod(kernel.reduction_ranges)) >= PARALLEL_MIN_REDUCTION \
            and not _columns(kernel, folds):
        return emit_block(module, kernel, name, folds, Function(module), STATIC)
    return emit_serial(module, kernel, name, Function(module), STATIC)


def _columns(kernel: K.Kernel, folds) -> bool:
    """A column fold with outputs enough to fill the GPU a thread each (``MANY_OUTPUTS``): a
    block per output would read its column one element a row (a mean over the middle dim of
    1x4096x4096 ran 0.28x PyTorch on the H200); a thread per output reads rows across its
    neighbours. flow/split_reduction.py splits such folds with fewer outputs."""
    return (int(np.prod(kernel.parallel_ranges)) >= MANY_OUTPUTS and K.reads_along_outputs(
        kernel.num_parallel, len(kernel.loop_ranges), folds, lambda b: kernel.bindings[b].shape))


def offsets(kernel: K.Kernel, sizes):
    n = len(kernel.loop_ranges)
    cache = {}

    def get(binding: int, index) -> Linear:
        if (binding, index) not in cache:
            cache[(binding, index)] = A.emitted(linearize(kernel.bindings[binding], index, n), sizes)
        return cache[(binding, index)]
    return get


def lowering(fn: Function, kernel: K.Kernel, loop: list, lin, values: dict | None = None) -> ScalarLowering:
    """``values``: Acc(k) of the phase being folded and Final(j) of the phases before it (a
    result is one or the other, never both, so one map serves)."""
    def load(e: K.Load):
        ptr = A.element_ptr(fn, f"%b{e.binding}", e.dtype, A.offset(fn, lin(e.binding, e.index), loop))
        return A.load(fn, ptr, e.dtype)
    return ScalarLowering(fn, load, lambda d: loop[d], None if values is None else values.__getitem__,
                          kernel.location, kernel)


def phase_finals(fn: Function, kernel: K.Kernel, p: list, lin, values: dict, phase: list[int]) -> dict:
    """The values the results of ``phase`` store: their epilogues of their accumulators."""
    lower = lowering(fn, kernel, p + [0] * len(kernel.reduction_ranges), lin, values)
    return {k: lower(kernel.results[k].epilogue) if kernel.results[k].epilogue is not None
            else values[k] for k in phase}


def store_results(fn: Function, kernel: K.Kernel, loop: list, lin, stored: dict) -> None:
    """Stores ``stored[k]`` (a value of result k's binding dtype) at result k's index at ``loop``."""
    for k, value in stored.items():
        r = kernel.results[k]
        dtype = kernel.bindings[r.binding].dtype
        ptr = A.element_ptr(fn, f"%b{r.binding}", dtype, A.offset(fn, lin(r.binding, r.index), loop))
        A.store(fn, ptr, dtype, value)


def _row_results(fn: Function, kernel: K.Kernel, p: list, lin, values: dict, start: str, step: str,
                 sizes, unroll: int = 1):
    """Stores the row results at reduction points start, start + step, ..."""
    rows = {k: r for k, r in enumerate(kernel.results) if r.row}
    red = [sizes(n) for n in kernel.reduction_ranges]

    def body(i):
        loop = p + A.decompose(fn, i, red)
        lower = lowering(fn, kernel, loop, lin, values)
        store_results(fn, kernel, loop, lin, {k: lower(r.value) for k, r in rows.items()})

    if rows:
        fn.loop(start, str(sizes(num_elements(kernel.reduction_ranges))), step, body, unroll=unroll)


def _trips(total, by: int) -> int:
    """A thread's steps over ``total`` points strided by ``by``, what its cascade is sized for;
    for a run-time total, the steps of a uint32 extent (a longer one is still folded whole, its
    top level taking more terms)."""
    return -(-total // by) if is_static(total) else -(-RUN_TIME_EXTENT // by)


def emit_serial(module: Module, kernel: K.Kernel, name: str, fn: Function, sizes) -> Launch:
    """One thread per output point: each phase folds serially, then the row results. ``fn``: the
    kernel's body so far; ``sizes``: its ``size_values.SizeValues`` (``STATIC`` without)."""
    par, red = [sizes(n) for n in kernel.parallel_ranges], [sizes(n) for n in kernel.reduction_ranges]
    outputs = num_elements(kernel.parallel_ranges)
    lin = offsets(kernel, sizes)
    g = A.global_thread_id(fn)
    results = kernel.results

    def body():
        p = A.decompose(fn, g, par) if par else []
        zeros = [0] * len(red)
        values: dict = {}  # the finals of the phases done
        for phase in K.phases(results):
            init = lowering(fn, kernel, p + zeros, lin, values)
            slots = {}
            for k in phase:
                ty = llvm_type(results[k].value.dtype)
                slots[k] = (ty, fn.alloca(ty))
                fn.raw(f"store {ty} {init(results[k].init)}, ptr {slots[k][1]}")

            def step(i, level):
                loop = p + (A.decompose(fn, i, red) if red else [])
                olds = {k: fn.op(f"load {ty}, ptr {slot}") for k, (ty, slot) in level.items()}
                lower = lowering(fn, kernel, loop, lin, {**values, **olds})
                news = {k: lower(results[k].value) for k in level}
                for k, (ty, slot) in level.items():
                    fn.raw(f"store {ty} {news[k]}, ptr {slot}")

            length = num_elements(kernel.reduction_ranges)
            _cascaded(fn, kernel, phase, slots, "0", str(sizes(length)), 1, _trips(length, 1), step)
            accs = {k: fn.op(f"load {ty}, ptr {slot}") for k, (ty, slot) in slots.items()}
            finals = phase_finals(fn, kernel, p, lin, {**values, **accs}, phase)
            store_results(fn, kernel, p + zeros, lin, finals)
            values.update(finals)
        _row_results(fn, kernel, p, lin, values, "0", "1", sizes)

    fn.if_then(fn.op(f"icmp ult i64 {g}, {sizes(outputs)}"), body)
    block = min(128, ceil_div(outputs, 32) * 32) if is_static(outputs) else 128
    module.add_kernel(name, A.kernel_params(kernel, sizes), fn, block_size=block)
    return Launch((opaque("ceildiv", outputs, block), 1, 1), (block, 1, 1))


def shuffle_xor(fn: Function, value: str, ty: str, lane_mask: int) -> str:
    """``value`` from lane ``laneid ^ lane_mask`` (any scalar type up to 64 bits)."""
    def shfl32(v: str, t: str) -> str:
        return fn.module.target.shuffle_xor32(fn, v, t, lane_mask)
    if ty in ("float", "i32"):
        return shfl32(value, ty)
    if ty in ("double", "i64"):
        pair = fn.op(f"bitcast {ty} {value} to <2 x i32>")
        out = "undef"
        for i in range(2):
            part = shfl32(fn.op(f"extractelement <2 x i32> {pair}, i32 {i}"), "i32")
            out = fn.op(f"insertelement <2 x i32> {out}, i32 {part}, i32 {i}")
        return fn.op(f"bitcast <2 x i32> {out} to {ty}")
    bits = {"half": 16, "bfloat": 16, "i16": 16, "i8": 8, "i1": 1}[ty]
    is_float = ty in ("half", "bfloat")
    as_int = fn.op(f"bitcast {ty} {value} to i16") if is_float else value
    wide = fn.op(f"zext i{bits} {as_int} to i32")
    back = fn.op(f"trunc i32 {shfl32(wide, 'i32')} to i{bits}")
    return fn.op(f"bitcast i16 {back} to {ty}") if is_float else back


def _block_size(total: int) -> int:
    """Threads per block for ``total`` reduced elements: enough that each thread keeps at most
    ``RESIDENT`` of them (up to 1024 threads), so that rows up to 8192 long are read once."""
    if total < 256:
        return 128
    return next((b for b in (256, 512) if total <= b * RESIDENT), 1024)


def emit_block(module: Module, kernel: K.Kernel, name: str, folds, fn: Function, sizes) -> Launch:
    """One block per output point. Per phase: threads fold strided elements, then the warp
    (shuffles) and the block (shared memory); every thread reads the phase's totals where a
    later phase or a row result needs them (thread 0 alone otherwise), thread 0 stores them.
    Row results are stored by every thread, strided like the folds.

    A row of at most ``RESIDENT`` elements per thread is *resident*: each thread loads its
    elements once, all loads issued together, and every phase and row result reuses them (a
    softmax reads its row once instead of three times). A longer row is streamed, ``UNROLL``
    strided elements per trip so that their loads are in flight together. With run-time sizes
    (``sizes``, as ``emit_serial``) every row is streamed by ``RUN_TIME_BLOCK`` threads."""
    par, red = [sizes(n) for n in kernel.parallel_ranges], kernel.reduction_ranges
    outputs = num_elements(kernel.parallel_ranges)
    if is_static(outputs) and outputs >= 2**31:
        raise CompileError(f"reduction with {outputs} outputs exceeds the GPU grid", kernel.location)
    total = num_elements(red)
    block = _block_size(total) if is_static(total) else RUN_TIME_BLOCK
    wave = module.target.warp_size  # 32, or 64 on AMD's gfx9 (CDNA)
    warps = block // wave
    lin = offsets(kernel, sizes)
    combine = ScalarLowering(fn, None, None, location=kernel.location)._binary
    results, phases = kernel.results, K.phases(kernel.results)

    p = A.decompose(fn, fn.op(f"zext i32 {fn.special('ctaid.x')} to i64"), par) if par else []
    tid32 = fn.special("tid.x")
    tid = fn.op(f"zext i32 {tid32} to i64")
    lane = fn.op(f"and i32 {tid32}, {wave - 1}")
    warp = fn.op(f"lshr i32 {tid32}, {wave.bit_length() - 1}")
    first_thread = fn.op(f"icmp eq i32 {tid32}, 0")
    zeros = p + [0] * len(red)
    values: dict = {}  # the finals of the phases done
    resident = _resident_points(fn, kernel, p, lin, values, tid, total, block) \
        if is_static(total) else None
    if resident is not None:  # the row results' own operands (a layernorm's weight and bias),
        for _, _, lower in resident:  # loaded with the row: in flight during the phases'
            for r in kernel.results:  # barriers instead of after them
                for load in _unguarded_loads(r.value) if r.row else ():
                    lower(load)
    for n, phase in enumerate(phases):
        if resident is not None:
            partial = _fold_resident(fn, resident, phase, folds, combine)
        else:
            partial = _fold_streamed(fn, kernel, p, lin, values, tid, total, block, phase, folds,
                                     combine, sizes)
        shared = {}
        for k in phase:
            (op, f), v = folds[k], partial[k]
            ty = llvm_type(f.dtype)
            for m in [wave >> s for s in range(1, wave.bit_length())]:
                v = combine(op, v, shuffle_xor(fn, v, ty, m), f.dtype)
            shared[k] = module.shared_array(f"{name}_partials{k}", ty, warps, 8)
            cell = fn.op(f"getelementptr {ty}, ptr addrspace(3) {shared[k]}, i32 {warp}")
            fn.if_then(fn.op(f"icmp eq i32 {lane}, 0"),
                       lambda cell=cell, v=v, ty=ty: fn.raw(f"store {ty} {v}, ptr addrspace(3) {cell}"))
        fn.barrier()

        def totals(phase=phase, shared=shared) -> dict:
            init = lowering(fn, kernel, zeros, lin, values)
            accs = {}
            for k in phase:
                op, f = folds[k]
                ty = llvm_type(f.dtype)
                total_v = None
                for w in range(warps):
                    cell = fn.op(f"getelementptr {ty}, ptr addrspace(3) {shared[k]}, i32 {w}")
                    v = fn.op(f"load {ty}, ptr addrspace(3) {cell}")
                    total_v = v if total_v is None else combine(op, total_v, v, f.dtype)
                accs[k] = combine(op, init(results[k].init), total_v, f.dtype)
            return phase_finals(fn, kernel, p, lin, {**values, **accs}, phase)

        if n == len(phases) - 1 and not kernel.row_results:
            fn.if_then(first_thread, lambda: store_results(fn, kernel, zeros, lin, totals()))
        else:
            finals = totals()
            fn.if_then(first_thread, lambda finals=finals: store_results(fn, kernel, zeros, lin, finals))
            values.update(finals)
    if resident is not None:
        _row_results_resident(fn, kernel, lin, resident)
    else:
        _row_results(fn, kernel, p, lin, values, tid, str(block), sizes, unroll=UNROLL)
    module.add_kernel(name, A.kernel_params(kernel, sizes), fn, block_size=block)
    return Launch((outputs, 1, 1), (block, 1, 1))


def _resident_points(fn: Function, kernel: K.Kernel, p: list, lin, values: dict, tid: str,
                     total: int, block: int):
    """The reduction points of this thread when the row is resident (else None): per strided
    point, its loop indices, whether it lies in the row (None: always) and one lowering whose
    cache keeps the point's loads and shared subexpressions for every phase. A point past the
    row's end reads the row's last element instead, so that every load is unconditional; its
    folds take the identity and its row results are not stored."""
    per_thread = -(-total // block)
    if per_thread > RESIDENT:
        return None
    points = []
    for j in range(per_thread):
        i = tid if j == 0 else fn.op(f"add i64 {tid}, {j * block}")
        inside = None
        if (j + 1) * block > total:
            inside = fn.op(f"icmp ult i64 {i}, {total}")
            i = fn.op(f"select i1 {inside}, i64 {i}, i64 {total - 1}")
        loop = p + A.decompose(fn, i, kernel.reduction_ranges)
        points.append((loop, inside, lowering(fn, kernel, loop, lin, values)))
    return points


def _unguarded_loads(expr: K.Expr) -> list[K.Load]:
    """The loads ``expr`` makes whatever its selects choose (a select's arms may read out of
    range where it does not choose them: ``kernel.Select``)."""
    out, seen, stack = [], set(), [expr]
    while stack:
        e = stack.pop()
        if e in seen:
            continue
        seen.add(e)
        if isinstance(e, K.Load):
            out.append(e)
        elif isinstance(e, K.Select):
            stack.append(e.cond)
        else:
            stack.extend(K.operands(e))
    return out


def _fold_resident(fn: Function, points, phase: list[int], folds, combine) -> dict:
    """Each result of ``phase`` folded over this thread's resident points."""
    partial = {}
    for k in phase:
        op, f = folds[k]
        acc = identity(op, f.dtype)
        for _, inside, lower in points:
            v = lower(f)
            if inside is not None:
                v = fn.op(f"select i1 {inside}, {llvm_type(f.dtype)} {v}, "
                          f"{llvm_type(f.dtype)} {identity(op, f.dtype)}")
            acc = combine(op, acc, v, f.dtype)
        partial[k] = acc
    return partial


def _fold_streamed(fn: Function, kernel: K.Kernel, p: list, lin, values: dict, tid: str,
                   total, block: int, phase: list[int], folds, combine, sizes) -> dict:
    """Each result of ``phase`` folded over this thread's strided points of the row."""
    top = {}
    for k in phase:
        op, f = folds[k]
        ty = llvm_type(f.dtype)
        top[k] = (ty, fn.alloca(ty))
        fn.raw(f"store {ty} {identity(op, f.dtype)}, ptr {top[k][1]}")

    red = [sizes(n) for n in kernel.reduction_ranges]

    def step(i, level):
        lower = lowering(fn, kernel, p + A.decompose(fn, i, red), lin, values)
        for k in phase:
            (op, f), (ty, slot) = folds[k], level[k]
            old = fn.op(f"load {ty}, ptr {slot}")
            fn.raw(f"store {ty} {combine(op, old, lower(f), f.dtype)}, ptr {slot}")

    _cascaded(fn, kernel, phase, top, tid, str(sizes(total)), block, _trips(total, block), step)
    return {k: fn.op(f"load {ty}, ptr {slot}") for k, (ty, slot) in top.items()}


def _cascaded(fn: Function, kernel: K.Kernel, phase: list[int], top: dict, start: str, stop: str,
              by: int, trips: int, step) -> None:
    """``step(i, level)`` folds point i into ``level``'s slots ({k: (type, slot)}), for i in
    [start, stop) by ``by``: into ``top``, or, for a phase of float sums or products of more
    than ``LEAF`` trips, into cascaded blocks (codegen/common/cascade.py) that end in ``top``, so
    that no accumulator takes more than about ``LEAF`` terms."""
    folds = float_folds(kernel.results, phase)
    sizes = block_sizes(trips, LEAF, FAN_IN) if folds else []
    levels = [{k: (ty, fn.alloca(ty)) for k, (ty, _) in top.items()} for _ in sizes] + [top]
    combine = ScalarLowering(fn, None, None, location=kernel.location)._binary

    def fresh(j):
        for k, (ty, slot) in levels[j].items():
            fn.raw(f"store {ty} {identity(folds[k][0], folds[k][1].dtype)}, ptr {slot}")

    def combine_into(j):
        for k, (ty, slot) in levels[j].items():
            (op, f), into = folds[k], levels[j + 1][k][1]
            total = combine(op, fn.op(f"load {ty}, ptr {into}"), fn.op(f"load {ty}, ptr {slot}"),
                            f.dtype)
            fn.raw(f"store {ty} {total}, ptr {into}")

    def loop(begin, end, step_by, body):
        fn.loop(begin, end, str(step_by), body, unroll=UNROLL if step_by == by and by > 1 else 1)

    def bound(begin, size, end):
        last = fn.op(f"add i64 {begin}, {size}")
        return fn.op(f"select i1 {fn.op(f'icmp ult i64 {last}, {end}')}, i64 {last}, i64 {end}")

    cascade(loop, bound, start, stop, sizes, lambda i: step(i, levels[0]), fresh, combine_into,
            step=by)


def _row_results_resident(fn: Function, kernel: K.Kernel, lin, points) -> None:
    """Stores the row results at this thread's resident points that lie in the row."""
    rows = {k: r for k, r in enumerate(kernel.results) if r.row}
    for loop, inside, lower in points:
        stored = {k: lower(r.value) for k, r in rows.items()}
        if inside is None:
            store_results(fn, kernel, loop, lin, stored)
        else:
            fn.if_then(inside, lambda loop=loop, stored=stored: store_results(fn, kernel, loop, lin, stored))
