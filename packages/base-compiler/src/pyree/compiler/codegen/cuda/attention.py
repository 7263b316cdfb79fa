"""Softmax attention (``kernel.Attention``, from flow/attention.py) as one SIMT kernel, in the
manner of FlashAttention: the scores and probabilities never reach memory.

One block computes one query row (a parallel point with O's column ``e`` left out): its
threads stride over the keys, each keeping an online softmax of the keys it saw (running
maximum m, running sum l of exp(s - m), and O's row accumulated with weights exp(s - m),
rescaled by exp(m_old - m_new) when m grows); the block then combines the threads' states
(weights exp(m_t - M) for the row's maximum M), and its threads store O's columns through the
result's epilogue. Every score is computed once per row, whatever O's width. A ``partial`` op
(flow/attention.py splits the keys of few long rows over blocks) stores the block's maximum,
sum and unnormalized O instead, and a row kernel combines the chunks.

Special values go where the chain's separate kernels put them: a score of NaN or +inf makes
the row's maximum or its sum NaN and so the whole row of O; a key whose probability is 0 still
adds 0 * v (NaN for an infinite v); a row whose every score is -inf gives NaN (0 / 0), or, where
torch's decomposition selects 0 for such rows (``masked_zero``), the sum of 0 * v alone.
Probabilities are rounded to ``p_dtype`` before the product as the chain rounds P, but unscaled
(exp(s - m) before the division by l), which is where FlashAttention rounds them too.
"""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import linearize
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, const
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.errors import CompileError
from pyree.compiler.sizes import num_elements

BLOCK = 128  # threads per query row, striding over the keys
COLUMNS = 32  # O's columns combined at a time (shared memory: BLOCK x COLUMNS floats)

# The online-softmax step as kernel-IR expressions over named states (Acc nodes), so that the
# exp and max lower exactly as the chain's own kernels lower them.
_S, _M_OLD, _M, _SCALE, _L = (K.Acc(k, "f32") for k in range(5))
_MINUS_INF = K.Const(float("-inf"), "f32")
_DEAD = K.Compare("eq", _M, _MINUS_INF)  # every score so far is -inf: nothing to weigh yet
_NEW_MAX = K.Binary("max", _M_OLD, _S, "f32")
_ALPHA = K.Select(_DEAD, K.Const(1.0, "f32"), K.Unary("exp", K.Binary("sub", _M_OLD, _M, "f32"),
                                                      "f32"), "f32")
_WEIGHT = K.Select(_DEAD, K.Const(0.0, "f32"), K.Unary("exp", K.Binary("sub", _S, _M, "f32"),
                                                       "f32"), "f32")
# A thread's weight in the block's combine (_M_OLD: its maximum, _M: the row's).
_THREAD_SCALE = K.Select(_DEAD, K.Const(1.0, "f32"), K.Select(
    K.Compare("eq", _M_OLD, _MINUS_INF), K.Const(0.0, "f32"),
    K.Unary("exp", K.Binary("sub", _M_OLD, _M, "f32"), "f32"), "f32"), "f32")


def plan(kernel: K.Kernel, target) -> K.Attention | None:
    return kernel.attention


def emit(module: Module, kernel: K.Kernel, name: str, plan: K.Attention) -> Launch:
    att, out = plan, kernel.results[0]
    par = kernel.parallel_ranges
    keys, depth = kernel.reduction_ranges
    width = par[att.e]
    row_ranges = tuple(1 if d == att.e else n for d, n in enumerate(par))
    rows = num_elements(row_ranges)
    if rows >= 2**31:
        raise CompileError(f"attention with {rows} query rows exceeds the GPU grid", kernel.location)
    fn = Function(module)
    n = len(kernel.loop_ranges)

    def lowering(loop: list, states: dict | None = None) -> ScalarLowering:
        def load(e: K.Load) -> str:
            lin = linearize(kernel.bindings[e.binding], e.index, n)
            ptr = A.element_ptr(fn, f"%b{e.binding}", e.dtype, A.offset(fn, lin, loop))
            return A.load(fn, ptr, e.dtype)
        return ScalarLowering(fn, load, lambda d: loop[d],
                              None if states is None else states.__getitem__, kernel.location, kernel)

    row = A.decompose(fn, fn.op(f"zext i32 {fn.special('ctaid.x')} to i64"), row_ranges)
    tid = fn.op(f"zext i32 {fn.special('tid.x')} to i64")
    m_slot, l_slot, acc_slot = fn.alloca("float"), fn.alloca("float"), fn.alloca("float")
    o_slots = [fn.alloca("float") for _ in range(width)]
    fn.raw(f"store float {const(float('-inf'), 'f32')}, ptr {m_slot}")
    for slot in (l_slot, *o_slots):
        fn.raw(f"store float {const(0.0, 'f32')}, ptr {slot}")

    def key(j: str) -> None:
        at_key = row + [j, "0"]
        fn.raw(f"store float {lowering(at_key)(att.score_init)}, ptr {acc_slot}")

        def step(c: str) -> None:
            acc = fn.op(f"load float, ptr {acc_slot}")
            fn.raw(f"store float {lowering(row + [j, c], {0: acc})(att.score_step)}, ptr {acc_slot}")

        fn.loop("0", str(depth), "1", step, unroll=8)
        s = lowering(at_key, {0: fn.op(f"load float, ptr {acc_slot}")})(att.score)
        m_old = fn.op(f"load float, ptr {m_slot}")
        m = lowering(at_key, {0: s, 1: m_old})(_NEW_MAX)
        update = lowering(at_key, {0: s, 1: m_old, 2: m})
        alpha, exact = update(_ALPHA), update(_WEIGHT)
        weight = exact
        if att.p_dtype != "f32":  # P rounded as the chain rounds it, its sum l not
            weight = update(K.Cast("fpext", K.Cast("fptrunc", _WEIGHT, att.p_dtype), "f32"))
        fn.raw(f"store float {m}, ptr {m_slot}")
        l_old = fn.op(f"load float, ptr {l_slot}")
        fn.raw(f"store float {_fma(fn, l_old, alpha, exact)}, ptr {l_slot}")
        for col, slot in enumerate(o_slots):
            at = row[:att.e] + [str(col)] + row[att.e + 1:] + [j, "0"]
            v = lowering(at)(out.value)
            o = fn.op(f"load float, ptr {slot}")
            fn.raw(f"store float {_fma(fn, o, alpha, fn.op(f'fmul float {weight}, {v}'))}, ptr {slot}")

    fn.loop(tid, str(keys), str(BLOCK), key)
    _combine(module, fn, kernel, name, att, row, tid, m_slot, l_slot, o_slots, lowering)
    module.add_kernel(name, A.kernel_params(kernel), fn, max_threads=BLOCK, block_size=BLOCK)
    return Launch((rows, 1, 1), (BLOCK, 1, 1))


def _fma(fn: Function, x: str, scale: str, add: str) -> str:
    """``x * scale + add``, rounded twice as the chain's separate operations are."""
    return fn.op(f"fadd float {fn.op(f'fmul float {x}, {scale}')}, {add}")


def _combine(module: Module, fn: Function, kernel: K.Kernel, name: str, att: K.Attention,
             row: list, tid: str, m_slot: str, l_slot: str, o_slots: list, lowering) -> None:
    """The block's threads' online-softmax states as the row's O, stored by column, through
    shared memory: each thread's maximum, then its weighted sum, then ``COLUMNS`` columns of
    its weighted O at a time, each summed by one thread."""
    out = kernel.results[0]
    width = len(o_slots)
    at_row = row + ["0", "0"]
    maxima = module.shared_array(f"{name}_max", "float", BLOCK, 16)
    sums = module.shared_array(f"{name}_sum", "float", BLOCK, 16)
    columns = module.shared_array(f"{name}_columns", "float", BLOCK * COLUMNS, 16)

    def cell(array: str, index: str) -> str:
        return fn.op(f"getelementptr float, ptr addrspace(3) {array}, i64 {index}")

    def fold(array: str, op: str, start: str = "0") -> str:
        """``op`` over ``BLOCK`` values of ``array`` from ``start`` on."""
        combine = lowering(at_row)._binary
        total = fn.alloca("float")
        fn.raw(f"store float {const(float('-inf') if op == 'max' else -0.0, 'f32')}, ptr {total}")

        def step(k: str) -> None:
            v = fn.op(f"load float, ptr addrspace(3) {cell(array, fn.op(f'add i64 {start}, {k}'))}")
            old = fn.op(f"load float, ptr {total}")
            fn.raw(f"store float {combine(op, old, v, 'f32')}, ptr {total}")

        fn.loop("0", str(BLOCK), "1", step, unroll=8)
        return fn.op(f"load float, ptr {total}")

    m_t = fn.op(f"load float, ptr {m_slot}")
    fn.raw(f"store float {m_t}, ptr addrspace(3) {cell(maxima, tid)}")
    fn.barrier()
    row_max = fold(maxima, "max")
    scale = lowering(at_row, {1: m_t, 2: row_max})(_THREAD_SCALE)
    l_t = fn.op(f"load float, ptr {l_slot}")
    fn.raw(f"store float {fn.op(f'fmul float {l_t}, {scale}')}, ptr addrspace(3) {cell(sums, tid)}")
    fn.barrier()
    total_l = fold(sums, "add")
    if att.partial:  # the chunk's state for the combine; every thread holds it
        def state() -> None:
            for r, v in zip(kernel.results[1:], (row_max, total_l)):
                lin = linearize(kernel.bindings[r.binding], r.index, len(kernel.loop_ranges))
                A.store(fn, A.element_ptr(fn, f"%b{r.binding}", "f32", A.offset(fn, lin, at_row)),
                        "f32", v)
        fn.if_then(fn.op(f"icmp eq i64 {tid}, 0"), state)
    dead = fn.op(f"fcmp oeq float {row_max}, {const(float('-inf'), 'f32')}")
    for first in range(0, width, COLUMNS):
        chunk = o_slots[first:first + COLUMNS]
        for k, slot in enumerate(chunk):
            value = fn.op(f"fmul float {fn.op(f'load float, ptr {slot}')}, {scale}")
            at = fn.op(f"add i64 {tid}, {k * BLOCK}")
            fn.raw(f"store float {value}, ptr addrspace(3) {cell(columns, at)}")
        fn.barrier()

        def column(first: int = first) -> None:
            total = fold(columns, "add", fn.op(f"mul i64 {tid}, {BLOCK}"))
            weighted = total if att.partial else fn.op(f"fdiv float {total}, {total_l}")
            if att.masked_zero and not att.partial:  # torch's 0 for a row all -inf
                weighted = fn.op(f"select i1 {dead}, float {total}, float {weighted}")
            col = fn.op(f"add i64 {tid}, {first}")
            loop = row[:att.e] + [col] + row[att.e + 1:] + ["0", "0"]
            acc = fn.op(f"fadd float {lowering(loop)(out.init)}, {weighted}")
            stored = lowering(loop, {0: acc})(out.epilogue) if out.epilogue is not None else acc
            dtype = kernel.bindings[out.binding].dtype
            lin = linearize(kernel.bindings[out.binding], out.index, len(kernel.loop_ranges))
            A.store(fn, A.element_ptr(fn, f"%b{out.binding}", dtype, A.offset(fn, lin, loop)),
                    dtype, stored)

        fn.if_then(fn.op(f"icmp ult i64 {tid}, {len(chunk)}"), column)
        fn.barrier()
