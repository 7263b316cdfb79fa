"""How a loop box is cut into workgroups, and how a workgroup id finds its tile.

local-task's threads claim chunks of consecutive workgroup ids, so balance comes from having
many tiles of similar cost: enough of them for every core to get several, none so small
that the per-tile overhead shows. Tiles are cut from the outermost loop inwards; the innermost
loop is only cut in multiples of ``align`` elements so vectorized inner loops stay whole.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from llvmlite import ir
from pyree.compiler.codegen.llvm_cpu.loops import i64, umin

MIN_WORK_PER_GROUP = 1 << 15   # loads + stores
MAX_GROUPS = 256
# Below this much work (loads + stores, ~25 us on one core) a dispatch is one workgroup. Handing
# workgroups to local-task's worker loop (worker_loop.py) costs ~3 us per dispatch (an empty
# kernel: 4.4 us split, 1.1 us not), and a worker that starts late leaves its chunks to the
# others: 2^17 made MobileNet v2 1.03-1.04x and ResNet-18 1.0-1.02x faster than 2^19 (paired,
# 2-core VM). (With Python workers, whose hand-off waited on the GIL, 2^16 had been ~5% slower.
# With a command buffer's dispatches in one native call, 2^16 and 2^15, contractions from 2^20
# and 2^19 flops, were no better on MobileNet v2 either.)
MIN_WORK_TO_SPLIT = 1 << 17


@dataclass(frozen=True)
class Tiling:
    ranges: tuple[int, ...]
    tile: tuple[int, ...]

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(-(-r // t) for r, t in zip(self.ranges, self.tile))

    @property
    def count(self) -> int:
        return math.prod(self.grid)

    def emit_bounds(self, b: ir.IRBuilder, wg: ir.Value) -> list[tuple[ir.Value, ir.Value]]:
        """[lo, hi) per loop of workgroup ``wg`` (row-major over the grid)."""
        coords: list[ir.Value] = []
        rest = wg
        for g in reversed(self.grid):
            if g == 1:
                coords.append(i64(0))
            else:
                coords.append(b.urem(rest, i64(g)))
                rest = b.udiv(rest, i64(g))
        bounds = []
        for c, t, r in zip(reversed(coords), self.tile, self.ranges):
            if t == r:
                bounds.append((i64(0), i64(r)))
            else:
                lo = b.mul(c, i64(t))
                bounds.append((lo, umin(b, b.add(lo, i64(t)), i64(r))))
        return bounds


def choose_tiling(ranges: tuple[int, ...], work_per_point: int, align: int = 64,
                  min_work: int = MIN_WORK_PER_GROUP) -> Tiling:
    total = math.prod(ranges) * max(1, work_per_point)
    want = 1 if total < MIN_WORK_TO_SPLIT else max(1, min(MAX_GROUPS, total // min_work))
    tile = [max(1, r) for r in ranges]
    for d, r in enumerate(ranges):
        if want <= 1 or r <= 1:
            continue
        if d == len(ranges) - 1:
            t = -(-r // want)
            tile[d] = min(r, -(-t // align) * align)
            break
        if r >= want:
            tile[d] = -(-r // want)
            break
        tile[d] = 1
        want = -(-want // r)
    return Tiling(tuple(ranges), tuple(tile))
