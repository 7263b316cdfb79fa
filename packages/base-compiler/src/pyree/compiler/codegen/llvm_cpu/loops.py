"""Counted loops and loop-carried variables for llvmlite builders.

Loop-carried values live in entry-block allocas; LLVM's SROA turns them into SSA registers, which
keeps the emitters free of phi bookkeeping.
"""

from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir
from pyree.compiler.codegen.common.cascade import cascade

I64 = ir.IntType(64)


def i64(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


@contextmanager
def for_range(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: int = 1, name: str = "i",
              unroll: bool = True):
    """``for (i = start; i < stop; i += step)``: yields ``i``; code after the block follows the loop.
    ``unroll=False`` keeps LLVM from unrolling it (a loop around a large body)."""
    pre = b.block
    header = b.append_basic_block(f"{name}.header")
    body = b.append_basic_block(f"{name}.body")
    done = b.append_basic_block(f"{name}.done")
    b.branch(header)
    b.position_at_end(header)
    i = b.phi(I64, name=name)
    i.add_incoming(start, pre)
    b.cbranch(b.icmp_signed("<", i, stop), body, done)
    b.position_at_end(body)
    yield i
    nxt = b.add(i, i64(step))
    i.add_incoming(nxt, b.block)
    back = b.branch(header)
    if not unroll:
        back.set_metadata("llvm.loop", _no_unroll(b.module))
    b.position_at_end(done)


def _no_unroll(module: ir.Module) -> ir.Value:
    """A loop ID saying "do not unroll". A loop ID is a node whose first operand is itself, which
    llvmlite cannot build, so its operands are set once it exists (a unique string first keeps
    each loop's ID distinct)."""
    disable = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    node = module.add_metadata([disable, ir.MetaDataString(module, f"pyree.loop.{len(module.metadata)}")])
    node.operands = (node, disable)
    return node


def nest(b: ir.IRBuilder, bounds: list[tuple[ir.Value, ir.Value]], body) -> None:
    """Loops over the box ``bounds`` (outermost first) around ``body(indices)``."""
    def level(d: int, indices: list[ir.Value]) -> None:
        if d == len(bounds):
            body(indices)
            return
        with for_range(b, *bounds[d], name=f"d{d}") as i:
            level(d + 1, indices + [i])
    level(0, [])


def entry_alloca(b: ir.IRBuilder, t: ir.Type, count: int = 1, align: int = 0) -> ir.Value:
    """An alloca in the function's entry block, where SROA can promote it."""
    with b.goto_entry_block():
        if b.block.instructions:
            b.position_before(b.block.instructions[0])
        slot = b.alloca(t, size=i64(count) if count != 1 else None)
        if align:
            slot.align = align
    return slot


def umin(b: ir.IRBuilder, x: ir.Value, y: ir.Value) -> ir.Value:
    return b.select(b.icmp_unsigned("<", x, y), x, y)


def cascaded(b: ir.IRBuilder, lo: int, hi: int, sizes: list[int], body, fresh, combine,
             step: int = 1) -> None:
    """``body(i)`` for i in [lo, hi) by ``step`` in the cascaded blocks of ``codegen/common/cascade.py``
    (``sizes[j]`` steps a level-j block; ``fresh(j)``, ``combine(j)`` around each). The extent is
    known here, so every block but the last of each level is whole and its loop has a constant
    trip count, which LLVM unrolls (a bound of min(start + size, stop) kept a matmul's K loop
    rolled: 3 FMA rows an iteration became 1). The loops over blocks stay rolled: LLVM unrolled
    their few trips around whole unrolled blocks, which made a long row sum several times slower
    to compile for nothing."""
    def level(j: int, start: ir.Value, count: int) -> None:
        if j == 0:
            with for_range(b, start, b.add(start, i64(count)), step=step, name="step") as i:
                body(i)
            return
        size = sizes[j - 1] * step
        whole = count - count % size

        def block(s: ir.Value, steps: int) -> None:
            fresh(j - 1)
            level(j - 1, s, steps)
            combine(j - 1)
        if whole:
            with for_range(b, start, b.add(start, i64(whole)), step=size, name="block",
                           unroll=False) as s:
                block(s, size)
        if count > whole:
            block(b.add(start, i64(whole)), count - whole)
    level(len(sizes), i64(lo), hi - lo)


def cascaded_run_time(b: ir.IRBuilder, stop: ir.Value, sizes: list[int], body, fresh,
                      combine, step: int = 1, whole_leaves: bool = True) -> None:
    """``cascaded`` over [0, stop) by ``step`` where ``stop`` is known per dispatch only,
    ``sizes`` the levels for any extent it may take. The loops over blocks have run-time bounds
    and stay rolled. With ``whole_leaves``, a whole leaf block (``sizes[0]`` steps: all but the
    last) branches to a loop of constant trip count, which LLVM unrolls as it does the static
    one's (a contraction's K loop); the last runs to ``stop``. A fold of at most one leaf skips
    the block loops, whose bounds and trips cost as much as a short row: its levels start at the
    identity and are combined upwards once (a sum's chain of -0.0 adds LLVM folds away)."""
    if not sizes:
        with for_range(b, i64(0), stop, step=step, name="step") as i:
            body(i)
        return
    leaf = sizes[0] * step

    def loop(start, end, by, fn):
        if by != step:
            with for_range(b, start, end, step=by, name="block", unroll=False) as s:
                fn(s)
        elif not whole_leaves:
            with for_range(b, start, end, step=step, name="step") as i:
                fn(i)
        else:
            with b.if_else(b.icmp_unsigned("==", b.sub(end, start), i64(leaf))) as (whole, tail):
                with whole:
                    with for_range(b, start, b.add(start, i64(leaf)), step=step, name="step") as i:
                        fn(i)
                with tail:
                    with for_range(b, start, end, step=step, name="step") as i:
                        fn(i)

    with b.if_else(b.icmp_unsigned("<=", stop, i64(leaf))) as (short, long):
        with short:
            for j in range(len(sizes)):
                fresh(j)
            with for_range(b, i64(0), stop, step=step, name="step") as i:
                body(i)
            for j in range(len(sizes)):
                combine(j)
        with long:
            cascade(loop, lambda s, size, end: umin(b, b.add(s, i64(size)), end), i64(0), stop,
                    sizes, body, fresh, combine, step)
