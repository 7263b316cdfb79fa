"""A line's ranks by sorting it (``kernel.LineSort``): one thread a line, in place, no scratch.

The counting form the kernel states (every element compared with every other, O(n^2)) is what
a GPU spreads over its threads; a CPU core sorts. Each line's places are sorted by ``before``
(the kernel's strict total order: ties by place, so any sort gives the stable order) with an
introsort in the rank buffer itself (quicksort, insertion for short ranges, heap sort where
partitions go too deep), and the sorted places are then inverted in place into ranks
(``rank[place[p]] = p``, each cycle followed once, visited entries marked by their sign). A
top-k (``k`` up to ``TOP_K_HEAP`` and below the line's length) keeps instead a heap of the best
``k`` places on the stack while it reads the line once, an element replacing the heap's worst
only when it goes before it: O(n) comparisons on most data, O(n log k) at worst; the heap is
then sorted, every rank set to ``k`` (past the scatter's range) and the best ``k`` ranked.
Neither needs a buffer beside the ranks, which the kernel has, nor recursion.
"""

from __future__ import annotations

from collections.abc import Callable

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.line_walk import LineWalk
from pyree.compiler.codegen.llvm_cpu.loops import entry_alloca, for_range, i64
from pyree.compiler.codegen.llvm_cpu.scalar import ExprEmitter, Point
from pyree.compiler.kernel import Kernel, LineSort, line_before

I32 = ir.IntType(32)
I64 = ir.IntType(64)
TOP_K_HEAP = 4096  # places of a top-k's heap on a worker's stack (16 KiB)
SMALL = 16  # quicksort's ranges of up to this many places are sorted by insertion
STACK = 64  # quicksort's pending ranges: at most log2 of a line's length (< 2**31)

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
                b.store(ir.Constant(I32, self.k), rank(p))
            with for_range(b, i64(0), i64(self.k), name="ranked") as p:
                b.store(b.trunc(p, I32), rank(_place(b, at(p))))
            return
        with for_range(b, i64(0), i64(self.n), name="fill") as p:
            b.store(b.trunc(p, I32), rank(p))
        _quicksort(b, rank, self.n, goes_before)
        _invert(b, rank, self.n)


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


def _insertion_sort(b: ir.IRBuilder, at: Place, lo: ir.Value, hi: ir.Value, goes_before) -> None:
    """[lo, hi] sorted by insertion (a short range)."""
    j_s = entry_alloca(b, I64)
    with for_range(b, b.add(lo, i64(1)), b.add(hi, i64(1)), name="insert", unroll=False) as i:
        moving = b.load(at(i), typ=I32)
        x = b.zext(moving, I64)
        b.store(i, j_s)
        blocks = _Blocks(b, "insert", "head", "test", "shift", "done")
        b.branch(blocks.head)
        b.position_at_end(blocks.head)
        j = b.load(j_s)
        b.cbranch(b.icmp_signed(">", j, lo), blocks.test, blocks.done)
        b.position_at_end(blocks.test)
        previous = b.load(at(b.sub(j, i64(1))), typ=I32)
        b.cbranch(goes_before(x, b.zext(previous, I64)), blocks.shift, blocks.done)
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
    """``at`` holding sorted places becomes each place's rank: every cycle of the permutation
    followed once from its first entry, each entry set to the bitwise not of its rank (negative:
    visited), then all flipped back."""
    prev_slot, j_slot = entry_alloca(b, I64), entry_alloca(b, I64)
    with for_range(b, i64(0), i64(n), name="cycle", unroll=False) as i:
        first = b.load(at(i), typ=I32)
        with b.if_then(b.icmp_signed(">=", first, ir.Constant(I32, 0))):
            b.store(i, prev_slot)
            b.store(b.zext(first, I64), j_slot)
            blocks = _Blocks(b, "cycle", "head", "body", "done")
            b.branch(blocks.head)
            b.position_at_end(blocks.head)
            j = b.load(j_slot)
            b.cbranch(b.icmp_signed("!=", j, i), blocks.body, blocks.done)
            b.position_at_end(blocks.body)
            following = b.load(at(j), typ=I32)
            b.store(b.not_(b.trunc(b.load(prev_slot), I32)), at(j))
            b.store(j, prev_slot)
            b.store(b.zext(following, I64), j_slot)
            b.branch(blocks.head)
            b.position_at_end(blocks.done)
            b.store(b.not_(b.trunc(b.load(prev_slot), I32)), at(i))
    with for_range(b, i64(0), i64(n), name="unmark") as i:
        b.store(b.not_(b.load(at(i), typ=I32)), at(i))

