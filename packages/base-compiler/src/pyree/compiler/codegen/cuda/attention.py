"""Softmax attention (``kernel.Attention``, from flow/attention.py) as one SIMT kernel, in the
manner of FlashAttention: the scores and probabilities never reach memory.

One block computes one query row (a parallel point with O's column ``e`` left out). Its warps
take 32 keys at a time, a lane each: the score's product splits into q(row, c) * k(key, c)
(the one operand that reads no key is q), so q's row is staged once in shared memory and each
warp stages its 32 keys' k rows, read coalesced (lanes along c), then each lane sums its key's
score in c's order as the chain does. A warp keeps an online softmax of its keys (running
maximum m and sum l of exp(s - m), uniform across its lanes; O's row spread over the lanes by
column, rescaled by exp(m_old - m_new) when m grows, so each exp is computed once per key) and
adds the 32 keys' weighted value rows, read coalesced. The block then combines its warps'
states (weights exp(m_w - M) for the row's maximum M) and its threads store O's columns through
the result's epilogue. Where the product does not split, each lane computes its key's score
from the loads themselves. Every score is computed once per row, whatever O's width. A ``partial`` op
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

from dataclasses import dataclass

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import linearize
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.llvm_gpu import addressing as A
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function, Module, const
from pyree.compiler.codegen.common.llvm_gpu.reduction import shuffle_xor
from pyree.compiler.codegen.common.llvm_gpu.scalar import ScalarLowering
from pyree.compiler.errors import CompileError
from pyree.compiler.sizes import num_elements

WARP = 32
# Shared memory for the key rows a block's warps stage (32 keys x (d + 1) floats each): 4 warps
# where they fit, fewer for a long d.
STAGED_BYTES = 40 * 1024

# The online-softmax step as kernel-IR expressions over named states (Acc nodes), so that the
# exp and max lower exactly as the chain's own kernels lower them.
_S, _M_OLD, _M, _SCALE, _L = (K.Acc(k, "f32") for k in range(5))
_MINUS_INF = K.Const(float("-inf"), "f32")
_DEAD = K.Compare("eq", _M, _MINUS_INF)  # every score so far is -inf: nothing to weigh yet
NEW_MAX = K.Binary("max", _M_OLD, _S, "f32")
ALPHA = K.Select(_DEAD, K.Const(1.0, "f32"), K.Unary("exp", K.Binary("sub", _M_OLD, _M, "f32"),
                                                      "f32"), "f32")
WEIGHT = K.Select(_DEAD, K.Const(0.0, "f32"), K.Unary("exp", K.Binary("sub", _S, _M, "f32"),
                                                       "f32"), "f32")
# A thread's weight in the block's combine (_M_OLD: its maximum, _M: the row's).
_THREAD_SCALE = K.Select(_DEAD, K.Const(1.0, "f32"), K.Select(
    K.Compare("eq", _M_OLD, _MINUS_INF), K.Const(0.0, "f32"),
    K.Unary("exp", K.Binary("sub", _M_OLD, _M, "f32"), "f32"), "f32"), "f32")


def plan(kernel: K.Kernel, target) -> K.Attention | None:
    """Static sizes only: flow/attention.py forms an op with run-time sizes for
    attention_mma.py alone."""
    return None if K.has_run_time_sizes(kernel) else kernel.attention


def emit(module: Module, kernel: K.Kernel, name: str, plan: K.Attention) -> Launch:
    att, out = plan, kernel.results[0]
    par = kernel.parallel_ranges
    keys, depth = kernel.reduction_ranges
    width = par[att.e]
    row_ranges = tuple(1 if d == att.e else n for d, n in enumerate(par))
    rows = num_elements(row_ranges)
    if rows >= 2**31:
        raise CompileError(f"attention with {rows} query rows exceeds the GPU grid", kernel.location)
    ((fold, term),) = K.fold_pattern((K.Result(0, (), att.score_step),))
    assert fold == "add"  # flow/attention.py takes contractions only
    split = _split(K.fold_product((fold, term)), len(par))
    if WARP * (depth + 1) * 4 > STAGED_BYTES:
        split = None  # not even one warp's key rows fit: each lane reads its own
    warps = next(w for w in (4, 2, 1) if split is None or w * WARP * (depth + 1) * 4 <= STAGED_BYTES)
    fn = Function(module)
    n = len(kernel.loop_ranges)

    def lowering(loop: list, states: dict | None = None) -> ScalarLowering:
        def load(e: K.Load) -> str:
            lin = linearize(kernel.bindings[e.binding], e.index, n)
            ptr = A.element_ptr(fn, f"%b{e.binding}", e.dtype, A.offset(fn, lin, loop))
            return A.load(fn, ptr, e.dtype)
        return ScalarLowering(fn, load, lambda d: loop[d],
                              None if states is None else states.__getitem__, kernel.location, kernel)

    def shared(label: str, count: int):
        array = module.shared_array(f"{name}_{label}", "float", count, 16)
        return lambda index: fn.op(f"getelementptr float, ptr addrspace(3) {array}, i64 {index}")

    block = warps * WARP
    row = A.decompose(fn, fn.op(f"zext i32 {fn.special('ctaid.x')} to i64"), row_ranges)
    tid32 = fn.special("tid.x")
    tid = fn.op(f"zext i32 {tid32} to i64")
    lane = fn.op(f"zext i32 {fn.op(f'and i32 {tid32}, {WARP - 1}')} to i64")
    warp = fn.op(f"zext i32 {fn.op(f'lshr i32 {tid32}, 5')} to i64")
    columns = _strided(fn, lane, width)  # this lane's columns of O
    m_slot, l_slot, s_slot, acc_slot = (fn.alloca("float") for _ in range(4))
    o_slots = [fn.alloca("float") for _ in columns]
    fn.raw(f"store float {const(float('-inf'), 'f32')}, ptr {m_slot}")
    for slot in (l_slot, *o_slots):
        fn.raw(f"store float {const(0.0, 'f32')}, ptr {slot}")
    weights = shared("weights", warps * WARP)
    mine = fn.op(f"mul i64 {warp}, {WARP}")
    if split is not None:  # q's row once per block, a warp's 32 keys' k rows per step
        query, key_rows = shared("q", depth), shared("k", warps * WARP * (depth + 1))

        def stage_q(c: str) -> None:
            value = lowering(row + [str(0), c])(split.q)
            fn.raw(f"store float {value}, ptr addrspace(3) {query(c)}")
        fn.loop(tid, str(depth), str(block), stage_q)
        fn.barrier()

    def step(trip: str) -> None:
        group = fn.op(f"add i64 {fn.op(f'mul i64 {trip}, {warps}')}, {warp}")
        first = fn.op(f"mul i64 {group}, {WARP}")
        if split is not None:
            def stage(r: str) -> None:
                j = fn.op(f"add i64 {first}, {r}")
                base = fn.op(f"mul i64 {fn.op(f'add i64 {mine}, {r}')}, {depth + 1}")
                for c, inside in _strided(fn, lane, depth):
                    def put(c: str = c, j: str = j) -> None:
                        value = lowering(row + [j, c])(split.k)
                        cell = key_rows(fn.op(f"add i64 {base}, {c}"))
                        fn.raw(f"store float {value}, ptr addrspace(3) {cell}")
                    _guarded(fn, inside, put)
            fn.loop("0", str(WARP), "1", lambda r: _guarded(
                fn, fn.op(f"icmp ult i64 {fn.op(f'add i64 {first}, {r}')}, {keys}"),
                lambda: stage(r)))
            fn.barrier()
        j = fn.op(f"add i64 {first}, {lane}")
        fn.raw(f"store float {const(float('-inf'), 'f32')}, ptr {s_slot}")

        def score() -> None:  # this lane's key
            at_key = row + [j, "0"]
            fn.raw(f"store float {lowering(at_key)(att.score_init)}, ptr {acc_slot}")
            own = fn.op(f"mul i64 {fn.op(f'add i64 {mine}, {lane}')}, {depth + 1}")

            def add(c: str) -> None:
                acc = fn.op(f"load float, ptr {acc_slot}")
                if split is None:
                    value = lowering(row + [j, c], {0: acc})(att.score_step)
                else:
                    q = fn.op(f"load float, ptr addrspace(3) {query(c)}")
                    k = fn.op(f"load float, ptr addrspace(3) {key_rows(fn.op(f'add i64 {own}, {c}'))}")
                    product = fn.op(f"fmul float {q}, {k}" if split.q_first else f"fmul float {k}, {q}")
                    value = fn.op(f"fadd float {acc}, {product}")
                fn.raw(f"store float {value}, ptr {acc_slot}")

            fn.loop("0", str(depth), "1", add, unroll=8)
            acc = fn.op(f"load float, ptr {acc_slot}")
            fn.raw(f"store float {lowering(at_key, {0: acc})(att.score)}, ptr {s_slot}")

        fn.if_then(fn.op(f"icmp ult i64 {j}, {keys}"), score)
        s = fn.op(f"load float, ptr {s_slot}")
        at = row + [j, "0"]
        top = s
        for mask in (16, 8, 4, 2, 1):  # the 32 keys' maximum, in every lane
            top = lowering(at)._binary("max", top, shuffle_xor(fn, top, "float", mask), "f32")
        m_old = fn.op(f"load float, ptr {m_slot}")
        m = lowering(at, {0: top, 1: m_old})(NEW_MAX)
        update = lowering(at, {0: s, 1: m_old, 2: m})
        alpha, exact = update(ALPHA), update(WEIGHT)
        weight = exact
        if att.p_dtype != "f32":  # P rounded as the chain rounds it, its sum l not
            weight = update(K.Cast("fpext", K.Cast("fptrunc", WEIGHT, att.p_dtype), "f32"))
        total = exact
        for mask in (16, 8, 4, 2, 1):
            total = fn.op(f"fadd float {total}, {shuffle_xor(fn, total, 'float', mask)}")
        fn.raw(f"store float {m}, ptr {m_slot}")
        l_old = fn.op(f"load float, ptr {l_slot}")
        fn.raw(f"store float {_fma(fn, l_old, alpha, total)}, ptr {l_slot}")
        fn.raw(f"store float {weight}, ptr addrspace(3) {weights(fn.op(f'add i64 {mine}, {lane}'))}")
        for slot in o_slots:
            o = fn.op(f"load float, ptr {slot}")
            fn.raw(f"store float {fn.op(f'fmul float {o}, {alpha}')}, ptr {slot}")
        fn.barrier()

        def accumulate(r: str) -> None:  # every lane its columns, key by key
            jr = fn.op(f"add i64 {first}, {r}")
            w = fn.op(f"load float, ptr addrspace(3) {weights(fn.op(f'add i64 {mine}, {r}'))}")
            for (col, inside), slot in zip(columns, o_slots):
                def one(col: str = col, slot: str = slot) -> None:
                    at_column = row[:att.e] + [col] + row[att.e + 1:] + [jr, "0"]
                    v = lowering(at_column)(out.value)
                    o = fn.op(f"load float, ptr {slot}")
                    product = fn.op(f"fmul float {w}, {v}")
                    fn.raw(f"store float {fn.op(f'fadd float {o}, {product}')}, ptr {slot}")
                _guarded(fn, inside, one)

        fn.loop("0", str(WARP), "1", lambda r: _guarded(
            fn, fn.op(f"icmp ult i64 {fn.op(f'add i64 {first}, {r}')}, {keys}"),
            lambda: accumulate(r)))
        fn.barrier()

    fn.loop("0", str(-(-keys // (WARP * warps))), "1", step)
    _combine(module, fn, kernel, name, att, row, lane, warp, warps, m_slot, l_slot,
             list(zip(columns, o_slots)), lowering)
    module.add_kernel(name, A.kernel_params(kernel), fn, max_threads=block, block_size=block)
    return Launch((rows, 1, 1), (block, 1, 1))


@dataclass(frozen=True)
class _Split:
    q: K.Expr  # the product's operand that no key changes
    k: K.Expr
    q_first: bool


def _split(product: K.Binary | None, keys_loop: int) -> _Split | None:
    """The score's product as q(row, c) * k(key, c), where one operand reads no key."""
    if product is None:
        return None
    reads_key = [_reads_loop(x, keys_loop) for x in (product.a, product.b)]
    if reads_key == [False, True]:
        return _Split(product.a, product.b, True)
    if reads_key == [True, False]:
        return _Split(product.b, product.a, False)
    return None


def _reads_loop(e: K.Expr, loop: int) -> bool:
    return any((isinstance(x, K.Load) and any(ix.coeffs[loop] for ix in x.index))
               or (isinstance(x, K.LoopIndex) and x.dim == loop) or isinstance(x, K.Gather)
               for x in K.walk(e))


def _strided(fn: Function, lane: str, extent: int) -> list[tuple[str, str | None]]:
    """A lane's points lane, lane + 32, ... of ``extent``: (the point, an i1 that it lies
    inside, or None where every lane's does)."""
    points = []
    for k in range(-(-extent // WARP)):
        point = fn.op(f"add i64 {lane}, {k * WARP}")
        inside = fn.op(f"icmp ult i64 {point}, {extent}") if (k + 1) * WARP > extent else None
        points.append((point, inside))
    return points


def _guarded(fn: Function, inside: str | None, body) -> None:
    if inside is None:
        body()
    else:
        fn.if_then(inside, body)


def _fma(fn: Function, x: str, scale: str, add: str) -> str:
    """``x * scale + add``, rounded twice as the chain's separate operations are."""
    return fn.op(f"fadd float {fn.op(f'fmul float {x}, {scale}')}, {add}")


def _combine(module: Module, fn: Function, kernel: K.Kernel, name: str, att: K.Attention,
             row: list, lane: str, warp: str, warps: int, m_slot: str, l_slot: str, columns: list,
             lowering) -> None:
    """The block's warps' online-softmax states as the row's O, stored by column, through
    shared memory."""
    out = kernel.results[0]
    width = kernel.parallel_ranges[att.e]
    at_row = row + ["0", "0"]
    maxima = module.shared_array(f"{name}_max", "float", warps, 16)
    sums = module.shared_array(f"{name}_sum", "float", warps, 16)
    partial = module.shared_array(f"{name}_o", "float", warps * width, 16)

    def cell(array: str, index: str) -> str:
        return fn.op(f"getelementptr float, ptr addrspace(3) {array}, i64 {index}")

    def first_lane() -> None:
        for array, slot in ((maxima, m_slot), (sums, l_slot)):
            value = fn.op(f"load float, ptr {slot}")
            fn.raw(f"store float {value}, ptr addrspace(3) {cell(array, warp)}")

    fn.if_then(fn.op(f"icmp eq i64 {lane}, 0"), first_lane)
    for (col, inside), slot in columns:
        def keep(col: str = col, slot: str = slot) -> None:
            at = fn.op(f"add i64 {fn.op(f'mul i64 {warp}, {width}')}, {col}")
            fn.raw(f"store float {fn.op(f'load float, ptr {slot}')}, ptr addrspace(3) {cell(partial, at)}")
        _guarded(fn, inside, keep)
    fn.barrier()
    combine = lowering(at_row)._binary
    maxima_w = [fn.op(f"load float, ptr addrspace(3) {cell(maxima, str(w))}") for w in range(warps)]
    row_max = maxima_w[0]
    for v in maxima_w[1:]:
        row_max = combine("max", row_max, v, "f32")
    scales = [lowering(at_row, {1: m_w, 2: row_max})(_THREAD_SCALE) for m_w in maxima_w]
    total_l = None
    for w, scale in enumerate(scales):
        l_w = fn.op(f"load float, ptr addrspace(3) {cell(sums, str(w))}")
        term = fn.op(f"fmul float {l_w}, {scale}")
        total_l = term if total_l is None else fn.op(f"fadd float {total_l}, {term}")
    tid = fn.op(f"add i64 {fn.op(f'mul i64 {warp}, {WARP}')}, {lane}")
    if att.partial:  # the chunk's state for the combine
        def state() -> None:
            for r, v in zip(kernel.results[1:], (row_max, total_l)):
                lin = linearize(kernel.bindings[r.binding], r.index, len(kernel.loop_ranges))
                A.store(fn, A.element_ptr(fn, f"%b{r.binding}", "f32", A.offset(fn, lin, at_row)),
                        "f32", v)
        fn.if_then(fn.op(f"icmp eq i64 {tid}, 0"), state)
    dead = fn.op(f"fcmp oeq float {row_max}, {const(float('-inf'), 'f32')}")

    def column(col: str) -> None:
        total = None
        for w, scale in enumerate(scales):
            at = fn.op(f"add i64 {col}, {w * width}")
            term = fn.op(f"fmul float {fn.op(f'load float, ptr addrspace(3) {cell(partial, at)}')}, {scale}")
            total = term if total is None else fn.op(f"fadd float {total}, {term}")
        weighted = total if att.partial else fn.op(f"fdiv float {total}, {total_l}")
        if att.masked_zero and not att.partial:  # torch's 0 for a row all -inf
            weighted = fn.op(f"select i1 {dead}, float {total}, float {weighted}")
        loop = row[:att.e] + [col] + row[att.e + 1:] + ["0", "0"]
        acc = fn.op(f"fadd float {lowering(loop)(out.init)}, {weighted}")
        stored = lowering(loop, {0: acc})(out.epilogue) if out.epilogue is not None else acc
        dtype = kernel.bindings[out.binding].dtype
        lin = linearize(kernel.bindings[out.binding], out.index, len(kernel.loop_ranges))
        A.store(fn, A.element_ptr(fn, f"%b{out.binding}", dtype, A.offset(fn, lin, loop)),
                dtype, stored)

    fn.loop(tid, str(width), str(warps * WARP), column)
