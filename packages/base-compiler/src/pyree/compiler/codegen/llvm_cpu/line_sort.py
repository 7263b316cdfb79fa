"""A line's ranks by sorting it (``kernel.LineSort``): one thread a line, in place, no scratch.

The counting form the kernel states (every element compared with every other, O(n^2)) is what
a GPU spreads over its threads; a CPU core sorts. Each line's places are sorted by ``before``
(the kernel's strict total order: ties by place, so any sort gives the stable order) in the
rank buffer itself, whose i64 entries (``LineSort.rank_dtype``) have room for a key beside
each place. An order by one key (``radix_key``) of a line of ``RADIX_MIN`` or more is sorted
by the key's bytes, most significant first, then the place's (``_radix_sort``: an in-place MSD
radix sort of entries that pack the key above the place; a byte every element shares costs one
counting pass and no move; ranges of up to ``RADIX_SMALL`` by insertion): O(n) passes over
sequential memory, as PyTorch sorts integers. Other orders take an introsort of the places
(quicksort, insertion for short ranges, heap sort where partitions go too deep). The sorted
places become ranks by writing each rank into the high half of its place's entry, then moving
the halves down (``_invert``). A top-k (``k`` up to ``TOP_K_HEAP`` and below the line's length,
i32 ranks) keeps instead a heap of the best ``k`` places on the stack while it reads the line
once, an element replacing the heap's worst only when it goes before it: O(n) comparisons on
most data, O(n log k) at worst; the heap is then sorted, every rank set to ``k`` (past the
scatter's range) and the best ``k`` ranked. None needs a buffer beside the ranks, nor
recursion.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.line_walk import LineWalk
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, for_range, i64
from pyree.compiler.codegen.llvm_cpu.scalar import ExprEmitter, Point, bits
from pyree.compiler.kernel import (
    Binary,
    Compare,
    Expr,
    Kernel,
    LineSort,
    Load,
    LoopIndex,
    Unary,
    is_float,
    is_unsigned,
    itemsize,
    line_before,
    transform,
    walk,
)

I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
TOP_K_HEAP = LineSort.HEAP  # places of a top-k's heap on a worker's stack (16 KiB)
SMALL = 16  # quicksort's ranges of up to this many places are sorted by insertion
STACK = 64  # quicksort's pending ranges: at most log2 of a line's length (< 2**31)
RADIX_MIN = 512  # lines this long or longer, ordered by one key, are radix sorted
RADIX_SMALL = 24  # the radix sort's ranges of up to this many places are sorted by insertion
BUCKETS = 256  # a byte's values

Place = Callable[[ir.Value], ir.Value]  # i64 index into a heap -> pointer to its i32 place


def plan(kernel: Kernel, target) -> LineSortLowering | None:
    """Takes exactly the kernels holding a ``LineSort``."""
    return LineSortLowering(kernel) if isinstance(kernel.line, LineSort) else None


class LineSortLowering(LineWalk):
    def __init__(self, kernel: Kernel):
        n = kernel.parallel_ranges[kernel.line.d]
        super().__init__(kernel, max(1, n.bit_length()))
        self.k = kernel.line.k
        self.before = line_before(self.result)
        self.key = radix_key(kernel) if self.n >= RADIX_MIN else None
        self.entry = ir.IntType(8 * itemsize(kernel.bindings[self.result.binding].dtype))
        assert kernel.bindings[self.result.binding].dtype == kernel.line.rank_dtype(self.n)

    def _line(self, em: ExprEmitter, line: list[ir.Value]) -> None:
        b, d = em.b, self.d

        def point(place: ir.Value, other: ir.Value) -> Point:
            return Point([*line[:d], place, *line[d + 1:], other])

        def goes_before(y: ir.Value, x: ir.Value) -> ir.Value:
            """i1: the element at place ``y`` (i64) goes before the one at ``x``."""
            return em.emit(self.before, point(x, y))

        def rank(p: ir.Value) -> ir.Value:
            return em.address(self.result.binding, self.result.index[0], point(p, i64(0)))[0]

        if self.k < self.n and self.k <= TOP_K_HEAP:
            heap = entry_alloca(b, I32, self.k, align=16)
            at = lambda p: b.gep(heap, [p], source_etype=I32)  # noqa: E731
            with for_range(b, i64(0), i64(self.k), name="fill") as p:
                b.store(b.trunc(p, I32), at(p))
            _heapify(b, at, i64(self.k), goes_before)
            with for_range(b, i64(self.k), i64(self.n), name="scan", unroll=False) as i:
                with b.if_then(goes_before(i, _place(b, at(i64(0))))):
                    b.store(b.trunc(i, I32), at(i64(0)))
                    _sift(b, at, i64(0), i64(self.k), goes_before)
            _sort_heap(b, at, i64(self.k), goes_before)
            with for_range(b, i64(0), i64(self.n), name="unranked") as p:
                b.store(ir.Constant(self.entry, self.k), rank(p))
            with for_range(b, i64(0), i64(self.k), name="ranked") as p:
                b.store(b.trunc(p, self.entry), rank(_place(b, at(p))))
            return
        if self.key is not None:
            key, ascending = self.key
            width, ordinal = _ordinal(b, key.dtype, ascending)
            _radix_sort(b, rank, self.n, width,
                        lambda place: ordinal(em.emit(key, point(place, i64(0)))), goes_before)
        else:  # the places in the entries' low halves (x86-64 is little-endian)
            with for_range(b, i64(0), i64(self.n), name="fill") as p:
                b.store(b.trunc(p, I32), rank(p))
            _quicksort(b, rank, self.n, goes_before)
        _invert(b, rank, self.n)


def radix_key(kernel: Kernel) -> tuple[Expr, bool] | None:
    """``(key, ascending)`` where the kernel's ``before`` is an order by one key as
    input/sort_order.py builds it: ``less(j, i) or (not less(i, j) and j < i)``, ``less(a, b)``
    the key's ``<`` (a float's with NaN above every number), its sides swapped for a descending
    key; ``key`` reads the line at the element's own place ``i`` (loop ``d``), its twin at
    ``j`` (the reduction loop) the same places. None for any other form (an order by several
    keys), which the comparisons sort."""
    before = line_before(kernel.results[0])
    d, j = kernel.line.d, kernel.num_parallel
    if not (isinstance(before, Binary) and before.op == "or" and isinstance(before.b, Binary)
            and before.b.op == "and" and isinstance(before.b.a, Unary) and before.b.a.op == "not"
            and before.b.b == Compare("lt", LoopIndex(j, "index"), LoopIndex(d, "index"))):
        return None
    sides = _less_sides(before.a)
    if sides is None or _less_sides(before.b.a.x) != sides[::-1]:
        return None

    def reads(e: Expr, loop: int) -> bool:
        loads = [x for x in walk(e) if isinstance(x, Load)]
        return bool(loads) and all(any(ix.coeffs[loop] for ix in x.index) for x in loads)

    def moved(e: Expr) -> Expr:  # the key read at j instead of i
        def at_j(x):
            if not isinstance(x, Load):
                return None
            index = tuple(dataclasses.replace(ix, coeffs=tuple(
                ix.coeffs[d] if q == j else 0 if q == d else c for q, c in enumerate(ix.coeffs)))
                for ix in x.index)
            return dataclasses.replace(x, index=index)
        return transform(e, at_j)

    there, here = sides
    ascending = not reads(here, j)
    if not ascending:
        there, here = here, there
    if reads(here, j) or not reads(there, j) or moved(here) != there:
        return None
    return here, ascending


def _less_sides(e: Expr) -> tuple[Expr, Expr] | None:
    """``(a, b)`` where ``e`` is input/sort_order.py's ``a < b``: a Compare of integers, or of
    floats or-ed with ``isnan(b) and not isnan(a)``."""
    if isinstance(e, Compare) and e.predicate == "lt" and not is_float(e.a.dtype):
        return e.a, e.b
    if isinstance(e, Binary) and e.op == "or" and isinstance(e.a, Compare) and \
            e.a.predicate == "lt" and is_float(e.a.a.dtype):
        a, b = e.a.a, e.a.b
        if e.b == Binary("and", Compare("uno", b, b), Compare("ord", a, a), "i1"):
            return a, b
    return None


def _ordinal(b: ir.IRBuilder, dtype: str, ascending: bool):
    """``(width, of)``: ``of(x)`` the unsigned integer of ``width`` bits that orders a key
    ``x`` of ``dtype`` as input/sort_order.py's order does: a float with -0.0 as 0.0 and every
    NaN as one NaN above +inf, its bits with the magnitude flipped for negatives and the sign
    flipped for the rest; a signed integer's sign bit flipped; descending, all bits flipped."""
    width = 16 if dtype == "bf16" else 8 if dtype == "i1" else bits(dtype)

    def of(x: ir.Value) -> ir.Value:
        if is_float(dtype):
            ft, t = x.type, ir.IntType(bits(dtype) if dtype != "bf16" else 32)
            x = b.select(b.fcmp_ordered("==", x, ir.Constant(ft, 0.0)), ir.Constant(ft, 0.0), x)
            x = b.select(b.fcmp_unordered("uno", x, x), ir.Constant(ft, float("nan")), x)
            u = b.bitcast(x, t)
            top = ir.Constant(t, 1 << (t.width - 1))
            u = b.xor(u, b.or_(b.ashr(u, ir.Constant(t, t.width - 1)), top))
            if dtype == "bf16":  # the f32 of a bf16: its low 16 bits are zero
                u = b.trunc(b.lshr(u, ir.Constant(t, 16)), ir.IntType(16))
        elif dtype == "i1":
            u = b.zext(x, I8)
        elif is_unsigned(dtype):
            u = x
        else:
            u = b.xor(x, ir.Constant(x.type, 1 << (width - 1)))
        return u if ascending else b.not_(u)
    return width, of


def _place(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
    return b.zext(b.load(ptr, typ=I32), I64)


class _Blocks:
    """Named basic blocks of one loop, appended where the builder is."""

    def __init__(self, b: ir.IRBuilder, name: str, *parts: str):
        self.__dict__.update({part: b.append_basic_block(f"{name}.{part}") for part in parts})


def _quicksort(b: ir.IRBuilder, at: Place, n: int, goes_before) -> None:
    """The ``n`` places at ``at`` sorted: quicksort (median of three, Hoare's partition) whose
    pending ranges sit on a stack (the larger pushed, the smaller sorted next: at most log2 n
    of them), ranges of up to ``SMALL`` by insertion, and a range still left after
    ``2 log2 n`` partitions by heap sort (introsort: O(n log n) whatever the data)."""
    stack = entry_alloca(b, I64, 3 * STACK)
    sp, lo_s, hi_s, depth_s = (entry_alloca(b, I64) for _ in range(4))

    def slot(k: ir.Value, field: int) -> ir.Value:
        return b.gep(stack, [b.add(b.mul(k, i64(3)), i64(field))], source_etype=I64)

    def push(lo: ir.Value, hi: ir.Value, depth: ir.Value) -> None:
        top = b.load(sp)
        for field, v in enumerate((lo, hi, depth)):
            b.store(v, slot(top, field))
        b.store(b.add(top, i64(1)), sp)

    b.store(i64(0), sp)
    push(i64(0), i64(n - 1), i64(2 * n.bit_length()))
    blocks = _Blocks(b, "qsort", "pop", "range", "small", "deep", "split", "done")
    b.branch(blocks.pop)
    b.position_at_end(blocks.pop)
    top = b.load(sp)
    popped = b.append_basic_block("qsort.popped")
    b.cbranch(b.icmp_signed(">", top, i64(0)), popped, blocks.done)
    b.position_at_end(popped)
    top = b.sub(top, i64(1))
    b.store(top, sp)
    for field, target in enumerate((lo_s, hi_s, depth_s)):
        b.store(b.load(slot(top, field)), target)
    b.branch(blocks.range)

    b.position_at_end(blocks.range)  # sort [lo, hi], pushing what waits
    lo, hi, depth = b.load(lo_s), b.load(hi_s), b.load(depth_s)
    partition = b.append_basic_block("qsort.partition")
    b.cbranch(b.icmp_signed("<", b.sub(hi, lo), i64(SMALL)), blocks.small, blocks.deep)
    b.position_at_end(blocks.small)
    _insertion_sort(b, at, lo, hi, goes_before)
    b.branch(blocks.pop)
    b.position_at_end(blocks.deep)
    heap = b.append_basic_block("qsort.heap")
    b.cbranch(b.icmp_signed("==", depth, i64(0)), heap, partition)
    b.position_at_end(heap)
    sub = lambda p: at(b.add(lo, p))  # noqa: E731
    size = b.add(b.sub(hi, lo), i64(1))
    _heapify(b, sub, size, goes_before)
    _sort_heap(b, sub, size, goes_before)
    b.branch(blocks.pop)

    b.position_at_end(partition)
    b.store(b.sub(depth, i64(1)), depth_s)
    mid = b.add(lo, b.lshr(b.sub(hi, lo), i64(1)))
    for p, q in ((lo, mid), (mid, hi), (lo, mid)):  # A[lo] <= A[mid] <= A[hi]
        _order_two(b, at, p, q, goes_before)
    j = _partition(b, at, lo, hi, _place(b, at(mid)), goes_before)
    b.branch(blocks.split)

    b.position_at_end(blocks.split)  # [lo, j] and [j + 1, hi]: push the larger
    lo, hi, depth = b.load(lo_s), b.load(hi_s), b.load(depth_s)
    after = b.add(j, i64(1))
    left_larger = b.icmp_signed(">", b.sub(j, lo), b.sub(hi, after))
    with b.if_else(left_larger) as (then, otherwise):
        with then:
            push(lo, j, depth)
            b.store(after, lo_s)
        with otherwise:
            push(after, hi, depth)
            b.store(j, hi_s)
    b.branch(blocks.range)
    b.position_at_end(blocks.done)


def _radix_sort(b: ir.IRBuilder, at: Place, n: int, width: int, key_of, goes_before) -> None:
    """The ``n`` i64 entries at ``at`` (each holding its place) sorted by ``(key_of(place),
    place)`` (``key_of``: i64 place -> unsigned key of ``width`` bits). Each entry packs a key
    above its place (a key of up to 32 bits whole, at the top; a wider one's high half, its low
    half put in where the high halves tie), so that the sort moves and compares entries alone,
    byte by byte from the most significant: a range whose entries share the byte is passed on
    to the next, one of up to ``RADIX_SMALL`` is sorted by insertion, and any other is split
    into its 256 buckets in place (American flag sort), each bucket then sorted from the next
    byte. The pending buckets sit in one frame per byte (their ends, the next one to take)."""
    wide = width > 32
    key_levels = 8 if wide else 4  # bytes of the key: a wide key's halves in turn at the top
    levels = key_levels + 4        # then the place's
    st = _RadixState(b, levels)
    ends, frame_lo, frame_next, frame_level = st.ends, st.frame_lo, st.frame_next, st.frame_level
    depth, lo_s, hi_s, level_s, cell = st.depth, st.lo, st.hi, st.level, st.cell
    low = i64(2**32 - 1)

    def entry(i: ir.Value) -> ir.Value:
        return b.load(at(i), typ=I64)

    def packed(key: ir.Value, place: ir.Value) -> ir.Value:  # key: up to 32 bits
        return b.or_(b.shl(b.zext(key, I64), i64(64 - key.type.width)), place)

    with for_range(b, i64(0), i64(n), name="pack") as p:
        key = key_of(p)
        b.store(b.or_(b.and_(key, i64(~(2**32 - 1))), p) if wide else packed(key, p), at(p))
    b.store(i64(0), depth)
    b.store(i64(0), lo_s)
    b.store(i64(n), hi_s)
    b.store(i64(0), level_s)
    blocks = _Blocks(b, "radix", "enter", "small", "split", "next", "frame", "pop", "take",
                     "descend", "done")
    b.branch(blocks.enter)

    b.position_at_end(blocks.enter)  # sort [lo, hi) from byte ``level``
    lo, hi, level = b.load(lo_s), b.load(hi_s), b.load(level_s)
    if wide:  # the high halves tie: the key's low half in their place
        with b.if_then(b.icmp_signed("==", level, i64(4))):
            with for_range(b, lo, hi, name="unpack", unroll=False) as i:
                place = b.and_(entry(i), low)
                b.store(packed(b.trunc(key_of(place), I32), place), at(i))
    b.cbranch(b.icmp_signed("<=", b.sub(hi, lo), i64(RADIX_SMALL)), blocks.small, blocks.split)

    b.position_at_end(blocks.small)
    with b.if_then(b.icmp_signed(">", hi, lo)):
        last = b.sub(hi, i64(1))
        by_entries = lambda x, y: b.icmp_unsigned("<", x, y)  # noqa: E731
        if wide:  # above byte 4 an entry holds only the key's high half: compare the elements
            with b.if_else(b.icmp_signed("<", level, i64(4))) as (high, rest):
                with high:
                    _insertion_sort(b, at, lo, last, lambda x, y: goes_before(
                        b.and_(x, low), b.and_(y, low)), I64)
                with rest:
                    _insertion_sort(b, at, lo, last, by_entries, I64)
        else:
            _insertion_sort(b, at, lo, last, by_entries, I64)
    b.branch(blocks.next)

    b.position_at_end(blocks.split)
    byte = b.select(b.icmp_signed("<", level, i64(key_levels)),
                    b.sub(i64(7), b.and_(level, i64(3))), b.sub(i64(key_levels + 3), level))
    shift = b.mul(byte, i64(8))
    digit = lambda v: b.and_(b.lshr(v, shift), i64(BUCKETS - 1))  # noqa: E731
    _radix_split(b, at, lo, hi, level, digit, st, blocks)

    b.position_at_end(blocks.next)  # the deepest frame's next bucket
    top = b.load(depth)
    b.cbranch(b.icmp_signed(">", top, i64(0)), blocks.frame, blocks.done)
    b.position_at_end(blocks.frame)
    f = b.sub(top, i64(1))
    bucket = b.load(cell(frame_next, f))
    b.cbranch(b.icmp_signed("==", bucket, i64(BUCKETS)), blocks.pop, blocks.take)
    b.position_at_end(blocks.pop)
    b.store(f, depth)
    b.branch(blocks.next)
    b.position_at_end(blocks.take)
    b.store(b.add(bucket, i64(1)), cell(frame_next, f))
    row = b.mul(f, i64(BUCKETS))
    first = b.icmp_signed("==", bucket, i64(0))
    before_end = b.load(cell(ends, b.add(row, b.select(first, i64(0), b.sub(bucket, i64(1))))))
    start = b.select(first, b.load(cell(frame_lo, f)), b.sext(before_end, I64))
    end = b.sext(b.load(cell(ends, b.add(row, bucket))), I64)
    b.cbranch(b.icmp_signed(">", b.sub(end, start), i64(1)), blocks.descend, blocks.next)
    b.position_at_end(blocks.descend)
    b.store(start, lo_s)
    b.store(end, hi_s)
    b.store(b.add(b.load(cell(frame_level, f)), i64(1)), level_s)
    b.branch(blocks.enter)
    b.position_at_end(blocks.done)


class _RadixState:
    """The radix sort's state on the stack: the range being sorted (``lo``, ``hi``, ``level``:
    its byte), the frames of pending buckets (``depth`` of them; each frame's ``BUCKETS`` ends,
    its start, its next bucket and its byte), and one split's ``counts`` and ``heads``."""

    def __init__(self, b: ir.IRBuilder, levels: int):
        self.b = b
        self.ends = entry_alloca(b, I32, levels * BUCKETS, align=16)
        self.heads, self.counts = (entry_alloca(b, I32, BUCKETS, align=16) for _ in range(2))
        self.frame_lo, self.frame_next, self.frame_level = (entry_alloca(b, I64, levels)
                                                            for _ in range(3))
        self.depth, self.lo, self.hi, self.level = (entry_alloca(b, I64) for _ in range(4))

    def cell(self, array: ir.Value, k: ir.Value) -> ir.Value:
        return self.b.gep(array, [k], source_etype=array.type.pointee)


def _radix_split(b: ir.IRBuilder, at: Place, lo, hi, level, digit, st: _RadixState,
                 blocks) -> None:
    """[lo, hi) counted by ``digit`` (i64 entry -> i64 byte); then passed on to the next byte
    if one bucket holds it all, else split into its buckets in place and pushed as a frame.
    Ends in a branch to ``blocks.enter`` or ``blocks.next``."""
    cell, ends, heads, counts, depth = st.cell, st.ends, st.heads, st.counts, st.depth
    frame_lo, frame_next, frame_level, level_s = st.frame_lo, st.frame_next, st.frame_level, st.level
    with for_range(b, i64(0), i64(BUCKETS), name="clear") as q:
        b.store(ir.Constant(I32, 0), cell(counts, q))
    with for_range(b, lo, hi, name="count", unroll=False) as i:
        slot = cell(counts, digit(b.load(at(i), typ=I64)))
        b.store(b.add(b.load(slot), ir.Constant(I32, 1)), slot)
    whole = b.icmp_signed("==", b.sext(b.load(cell(counts, digit(b.load(at(lo), typ=I64)))), I64),
                          b.sub(hi, lo))
    shared, split = b.append_basic_block("radix.shared"), b.append_basic_block("radix.buckets")
    b.cbranch(whole, shared, split)
    b.position_at_end(shared)
    b.store(b.add(level, i64(1)), level_s)
    b.branch(blocks.enter)

    b.position_at_end(split)
    f = b.load(depth)
    row = b.mul(f, i64(BUCKETS))
    b.store(lo, cell(frame_lo, f))
    b.store(i64(0), cell(frame_next, f))
    b.store(level, cell(frame_level, f))
    running = entry_alloca(b, I32)
    b.store(b.trunc(lo, I32), running)
    with for_range(b, i64(0), i64(BUCKETS), name="offsets") as q:
        head = b.load(running)
        b.store(head, cell(heads, q))
        b.store(b.add(head, b.load(cell(counts, q))), running)
        b.store(b.load(running), cell(ends, b.add(row, q)))
    moving_s = entry_alloca(b, I64)
    with for_range(b, i64(0), i64(BUCKETS), name="buckets", unroll=False) as q:
        end = b.load(cell(ends, b.add(row, q)))
        loop = _Blocks(b, "flag", "head", "cycle", "swap", "home", "done")
        b.branch(loop.head)
        b.position_at_end(loop.head)  # bucket q's next unplaced slot
        take = b.append_basic_block("flag.take")
        b.cbranch(b.icmp_signed("<", b.load(cell(heads, q)), end), take, loop.done)
        b.position_at_end(take)
        b.store(b.load(at(b.sext(b.load(cell(heads, q)), I64)), typ=I64), moving_s)
        b.branch(loop.cycle)
        b.position_at_end(loop.cycle)  # carry the moving entry to its bucket until one is q's
        moving = b.load(moving_s)
        to = digit(moving)
        b.cbranch(b.icmp_signed("==", to, q), loop.home, loop.swap)
        b.position_at_end(loop.swap)
        head_slot = cell(heads, to)
        head = b.load(head_slot)
        target = at(b.sext(head, I64))
        b.store(b.load(target, typ=I64), moving_s)
        b.store(moving, target)
        b.store(b.add(head, ir.Constant(I32, 1)), head_slot)
        b.branch(loop.cycle)
        b.position_at_end(loop.home)
        head_slot = cell(heads, q)
        head = b.load(head_slot)
        b.store(moving, at(b.sext(head, I64)))
        b.store(b.add(head, ir.Constant(I32, 1)), head_slot)
        b.branch(loop.head)
        b.position_at_end(loop.done)
    b.store(b.add(f, i64(1)), depth)
    b.branch(blocks.next)


def _order_two(b: ir.IRBuilder, at: Place, p: ir.Value, q: ir.Value, goes_before) -> None:
    """The places at ``p`` and ``q`` swapped where the one at ``q`` goes before."""
    x, y = b.load(at(p), typ=I32), b.load(at(q), typ=I32)
    swap = goes_before(b.zext(y, I64), b.zext(x, I64))
    b.store(b.select(swap, y, x), at(p))
    b.store(b.select(swap, x, y), at(q))


def _partition(b: ir.IRBuilder, at: Place, lo: ir.Value, hi: ir.Value, pivot: ir.Value,
               goes_before) -> ir.Value:
    """Hoare's partition of [lo, hi] around the place ``pivot`` (held in the range): ``j`` with
    every place of [lo, j] not after the pivot's and every one of [j + 1, hi] not before it,
    both ranges non-empty (the pivot taken from the range's lower middle)."""
    i_s, j_s = entry_alloca(b, I64), entry_alloca(b, I64)
    b.store(b.sub(lo, i64(1)), i_s)
    b.store(b.add(hi, i64(1)), j_s)
    blocks = _Blocks(b, "part", "up", "down", "meet", "swap", "done")
    b.branch(blocks.up)
    b.position_at_end(blocks.up)
    i = b.add(b.load(i_s), i64(1))
    b.store(i, i_s)
    b.cbranch(goes_before(_place(b, at(i)), pivot), blocks.up, blocks.down)
    b.position_at_end(blocks.down)
    j = b.sub(b.load(j_s), i64(1))
    b.store(j, j_s)
    b.cbranch(goes_before(pivot, _place(b, at(j))), blocks.down, blocks.meet)
    b.position_at_end(blocks.meet)
    i, j = b.load(i_s), b.load(j_s)
    b.cbranch(b.icmp_signed(">=", i, j), blocks.done, blocks.swap)
    b.position_at_end(blocks.swap)
    x, y = b.load(at(i), typ=I32), b.load(at(j), typ=I32)
    b.store(y, at(i))
    b.store(x, at(j))
    b.branch(blocks.up)
    b.position_at_end(blocks.done)
    return b.load(j_s)


def _insertion_sort(b: ir.IRBuilder, at: Place, lo: ir.Value, hi: ir.Value, goes_before,
                    t: ir.IntType = I32) -> None:
    """[lo, hi] sorted by insertion (a short range) of entries of type ``t`` (``goes_before``
    takes two as i64)."""
    j_s = entry_alloca(b, I64)
    wide = lambda v: v if t == I64 else b.zext(v, I64)  # noqa: E731
    with for_range(b, b.add(lo, i64(1)), b.add(hi, i64(1)), name="insert", unroll=False) as i:
        moving = b.load(at(i), typ=t)
        x = wide(moving)
        b.store(i, j_s)
        blocks = _Blocks(b, "insert", "head", "test", "shift", "done")
        b.branch(blocks.head)
        b.position_at_end(blocks.head)
        j = b.load(j_s)
        b.cbranch(b.icmp_signed(">", j, lo), blocks.test, blocks.done)
        b.position_at_end(blocks.test)
        previous = b.load(at(b.sub(j, i64(1))), typ=t)
        b.cbranch(goes_before(x, wide(previous)), blocks.shift, blocks.done)
        b.position_at_end(blocks.shift)
        b.store(previous, at(j))
        b.store(b.sub(j, i64(1)), j_s)
        b.branch(blocks.head)
        b.position_at_end(blocks.done)
        b.store(moving, at(b.load(j_s)))


def _heapify(b: ir.IRBuilder, at: Place, size: ir.Value, goes_before) -> None:
    """A heap whose root goes last (each parent goes after its children)."""
    half = b.lshr(size, i64(1))
    with for_range(b, i64(0), half, name="heapify", unroll=False) as s:
        _sift(b, at, b.sub(b.sub(half, i64(1)), s), size, goes_before)


def _sort_heap(b: ir.IRBuilder, at: Place, size: ir.Value, goes_before) -> None:
    """The heap's places in sorted order: the root (the last) swapped to the end, repeatedly."""
    with for_range(b, i64(1), size, name="pop", unroll=False) as s:
        end = b.sub(size, s)
        last, root = at(end), at(i64(0))
        top = b.load(root, typ=I32)
        b.store(b.load(last, typ=I32), root)
        b.store(top, last)
        _sift(b, at, i64(0), end, goes_before)


def _sift(b: ir.IRBuilder, at: Place, start: ir.Value, size: ir.Value, goes_before) -> None:
    """Moves the place at ``start`` down the heap of ``size`` until no child goes after it."""
    moving = b.load(at(start), typ=I32)
    x = b.zext(moving, I64)
    slot = entry_alloca(b, I64)
    b.store(start, slot)
    blocks = _Blocks(b, "sift", "head", "body", "down", "done")
    b.branch(blocks.head)
    b.position_at_end(blocks.head)
    i = b.load(slot)
    left = b.add(b.mul(i, i64(2)), i64(1))
    b.cbranch(b.icmp_signed("<", left, size), blocks.body, blocks.done)
    b.position_at_end(blocks.body)
    right = b.add(left, i64(1))
    left_place = _place(b, at(left))
    with b.if_else(b.icmp_signed("<", right, size)) as (then, otherwise):
        with then:  # the later child
            later = b.select(goes_before(left_place, _place(b, at(right))), right, left)
            then_block = b.block
        with otherwise:
            otherwise_block = b.block
    child = b.phi(I64)
    child.add_incoming(later, then_block)
    child.add_incoming(left, otherwise_block)
    child_place = _place(b, at(child))
    b.cbranch(goes_before(x, child_place), blocks.down, blocks.done)  # the child goes after x
    b.position_at_end(blocks.down)
    b.store(b.trunc(child_place, I32), at(i))
    b.store(child, slot)
    b.branch(blocks.head)
    b.position_at_end(blocks.done)
    b.store(moving, at(b.load(slot)))


def _invert(b: ir.IRBuilder, at: Place, n: int) -> None:
    """i64 entries at ``at`` whose low halves hold sorted places become each place's rank: the
    rank written into the high half of its place's entry (stores independent of each other,
    where following the permutation's cycles waits on every load), then moved down."""
    with for_range(b, i64(0), i64(n), name="scatter_ranks") as p:
        place = b.zext(b.load(at(p), typ=I32), I64)
        high = b.gep(at(place), [i64(4)], source_etype=ir.IntType(8))  # little-endian
        b.store(b.trunc(p, I32), high)
    with for_range(b, i64(0), i64(n), name="ranks_down") as p:
        b.store(b.lshr(b.load(at(p), typ=I64), i64(32)), at(p))
