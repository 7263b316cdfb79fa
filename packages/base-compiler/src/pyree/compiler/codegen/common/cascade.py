"""Cascaded accumulation: a long fold runs in nested blocks, each level into fresh accumulators.

A float sum folded serially over n terms has an error bound proportional to n: 10M values of
0.1 summed one after another in f32 are off by 1.7e-4 relative. numpy's pairwise sum grows with
log n instead. Here a fold's steps run in blocks of ``leaf`` steps, each block into level-0
accumulators that start at the fold's identity and are then combined into level 1's; level 1
takes ``fan_in`` blocks before it is combined into level 2, and so on up to the caller's total.
No accumulator then takes more than about ``max(leaf, fan_in)`` terms, so the bound is about
``leaf + fan_in * (levels - 1)`` roundings instead of n, for one extra combine per accumulator per
block. Only folds (``acc = acc <op> f``, op associative) may be cascaded: the blocks reassociate.
Every backend emits its loops its own way: ``cascade`` nests them where a thread's extent is known
only at run time (a GPU thread's strided points); llvm-cpu, which knows every extent, emits whole
blocks with constant trip counts (``llvm_cpu/loops.cascaded``).
"""

from __future__ import annotations

from pyree.compiler.kernel import Acc, Binary, Result, is_float, walk

# Folds whose reassociation is harmless: float sums and products (which cascading makes more
# accurate) and max/min (exact in any order) of the same kernel phase go along.
FLOAT_FOLDS = ("add", "mul", "max", "min")


def block_sizes(extent: int, leaf: int, fan_in: int) -> list[int]:
    """Steps per block at each level under the top one: ``[leaf, leaf * fan_in, ...]``, while a
    block is shorter than ``extent`` (none for a fold of at most ``leaf`` steps)."""
    sizes = []
    size = leaf
    while size < extent:
        sizes.append(size)
        size *= fan_in
    return sizes


def cascade(loop, bound, lo, hi, sizes: list[int], body, fresh, combine, step: int = 1) -> None:
    """``body(i)`` for i in [lo, hi) by ``step``, folding into the level-0 accumulators, in blocks
    of ``sizes[j] * step`` at level j. Around each level-j block: ``fresh(j)`` before it sets
    level j's accumulators to the identity, ``combine(j)`` after it folds them into level j + 1's.
    The top level, ``len(sizes)``, is the caller's: it starts at whatever the caller stored.

    The backend's emitters: ``loop(start, stop, step, body)`` emits ``for (i = start; i < stop;
    i += step) body(i)``, ``bound(start, size, stop)`` the value ``min(start + size, stop)``."""
    def level(j: int, start, stop) -> None:
        if j == 0:
            loop(start, stop, step, body)
            return
        size = sizes[j - 1] * step

        def block(s) -> None:
            fresh(j - 1)
            level(j - 1, s, bound(s, size, stop))
            combine(j - 1)
        loop(start, stop, size, block)
    level(len(sizes), lo, hi)


def loop_passes(extent: int, sizes: list[int]) -> int:
    """The loop passes a cascade of ``extent`` steps in blocks of ``sizes`` runs: every loop's
    trips and its exit, which Mesa's lavapipe counts against its limit (spirv/targets.py)."""
    passes, trips = 0, extent
    for size in sizes:
        loops = -(-extent // size)
        passes += trips + loops  # the level below's trips, and each of its loops' exit
        trips = loops
    return passes + trips + 1


def float_folds(results: tuple[Result, ...], which) -> dict[int, tuple[str, object]] | None:
    """``{k: (op, f)}`` when every result k in ``which`` is a float fold ``acc <op> f`` (op in
    ``FLOAT_FOLDS``, f free of accumulators) and one of them a sum or product: a phase worth
    cascading. Else None."""
    folds = {}
    for k in which:
        v = results[k].value
        if results[k].row or not isinstance(v, Binary) or v.op not in FLOAT_FOLDS \
                or not is_float(v.dtype):
            return None
        f = v.b if v.a == Acc(k, v.dtype) else v.a if v.b == Acc(k, v.dtype) else None
        if f is None or any(isinstance(e, Acc) for e in walk(f)):
            return None
        folds[k] = (v.op, f)
    return folds if any(op in ("add", "mul") for op, _ in folds.values()) else None
