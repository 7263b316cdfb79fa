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
from pyree.compiler.sizes import is_static, opaque

MIN_WORK_PER_GROUP = 1 << 15   # loads + stores
MAX_GROUPS = 256
# Below this much work (loads + stores) a dispatch is one workgroup: handing workgroups to
# local-task's worker loop (worker_loop.py) has a fixed cost per dispatch, and a worker that
# starts late leaves its chunks to the others. The threshold was measured on whole models against
# larger and smaller ones (BENCHMARKS.md, issue 11).
MIN_WORK_TO_SPLIT = 1 << 17


@dataclass(frozen=True)
class Tiling:
    """Ranges and tiles are ints, or run-time sizes (``pyree.compiler.sizes``) in a kernel that
    has them: then the grid and count are sizes too."""
    ranges: tuple[int, ...]
    tile: tuple[int, ...]

    @property
    def grid(self) -> tuple[int, ...]:
        return tuple(opaque("ceildiv", r, t) for r, t in zip(self.ranges, self.tile))

    @property
    def count(self) -> int:
        return math.prod(self.grid)

    def emit_bounds(self, b: ir.IRBuilder, wg: ir.Value, sizes=i64) -> list[tuple[ir.Value, ir.Value]]:
        """[lo, hi) per loop of workgroup ``wg`` (row-major over the grid); ``sizes``: the i64
        value of a range or tile (``size_values.SizeValues`` where some are run-time)."""
        coords: list[ir.Value] = []
        rest = wg
        for g in reversed(self.grid):
            if is_static(g) and g == 1:
                coords.append(i64(0))
            else:
                coords.append(b.urem(rest, sizes(g)))
                rest = b.udiv(rest, sizes(g))
        bounds = []
        for c, t, r in zip(reversed(coords), self.tile, self.ranges):
            if t == r:
                bounds.append((i64(0), sizes(r)))
            else:
                lo = b.mul(c, sizes(t))
                bounds.append((lo, umin(b, b.add(lo, sizes(t)), sizes(r))))
        return bounds


def choose_tiling(ranges: tuple[int, ...], work_per_point: int, align: int = 64,
                  min_work: int = MIN_WORK_PER_GROUP, outer_align: tuple[int, int] | None = None) -> Tiling:
    """``outer_align``: (loop, elements): that outer loop, too, is cut only in multiples of
    its elements (a transposed kernel's strips, transpose.py)."""
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
        step = outer_align[1] if outer_align and outer_align[0] == d else 1
        if r >= want * step:
            per_group = -(-r // want)
            tile[d] = -(-per_group // step) * step
            break
        tile[d] = min(r, step)
        want = -(-want // -(-r // tile[d]))
    return Tiling(tuple(ranges), tuple(tile))
