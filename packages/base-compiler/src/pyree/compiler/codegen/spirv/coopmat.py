"""f16 matrix multiplies on the tensor cores, through cooperative matrices
(SPV_KHR_cooperative_matrix, VK_KHR_cooperative_matrix): 16x16x16 subgroup fragments, f16
operands, f32 accumulators, rounded to f16 once at the store.

Shader arithmetic peaks far below the matrix units on current GPUs, which do an order of
magnitude more f16 work per clock. Each subgroup owns a (bm/2) x (bn/2) block of the workgroup's
bm x bn tile and loads its fragments straight from the storage buffers (the L1 cache shares them
between the subgroups). Only the plain case is taken: X and Y are f16 buffers read row-major,
M and N multiples of the tile, K of 16, a zero init and no fused epilogue; anything else uses
the shared-memory template. Targets opt in with ``cooperative_matrix``; the driver refuses the
module on a device without the extension or this fragment shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.contraction import Contraction
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv import matmul
from pyree.compiler.codegen.spirv.shader import Shader, grid_for
from pyree.compiler.codegen.spirv.targets import VulkanTarget

FRAGMENT = 16            # M = N = K of one cooperative matrix multiply-add
SUBGROUPS = (2, 2)       # subgroups per workgroup, along m and n


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int


def _strides(ix: K.AffineExpr, m: int, n: int, k: int) -> tuple[int, int, int]:
    return ix.coeffs[m], ix.coeffs[n], ix.coeffs[k]


def operands(contraction: Contraction) -> tuple[K.Load, K.Load] | None:
    """X and Y as f16 loads: read as f16 products (an f16 accumulator), or extended to f32 (an
    f32 one, as flow/narrow_floats.py makes every f16 accumulator), else None."""
    loads = []
    for e in (contraction.x, contraction.y):
        if contraction.dtype == "f32" and isinstance(e, K.Cast) and e.op == "fpext":
            e = e.x
        if not (isinstance(e, K.Load) and e.dtype == "f16"):
            return None
        loads.append(e)
    return loads[0], loads[1]


def plan(kernel: K.Kernel, target: VulkanTarget) -> tuple[Contraction, Tile] | None:
    """(contraction, tile) when the cooperative-matrix template takes a contraction the tiled
    matmul would, else None."""
    tiled = matmul.plan(kernel, target)
    tile = None if tiled is None else tile_plan(kernel, tiled[0], target)
    return None if tile is None else (tiled[0], tile)


def tile_plan(kernel: K.Kernel, contraction: Contraction, target: VulkanTarget) -> Tile | None:
    acc = contraction.dtype
    if not (target.cooperative_matrix and target.float16 and acc in ("f16", "f32")):
        return None
    result = kernel.results[0]
    if result.init != K.Const(0.0, acc) and result.init != K.Const(0, acc):
        return None
    if result.epilogue not in (None, K.Acc(0, "f16"), K.Cast("fptrunc", K.Acc(0, acc), "f16")):
        return None
    if operands(contraction) is None:
        return None
    x, y = operands(contraction)
    M, N = kernel.parallel_ranges[-2:]
    (Kdim,) = kernel.reduction_ranges
    m, n, k = kernel.num_parallel - 2, kernel.num_parallel - 1, kernel.num_parallel
    if _strides(x.index[0], m, n, k) != (Kdim, 0, 1) or _strides(y.index[0], m, n, k) != (0, 1, N):
        return None
    if _strides(result.index[0], m, n, k) != (N, 1, 0) or Kdim % FRAGMENT:
        return None
    if kernel.bindings[result.binding].dtype != "f16":
        return None
    for size in (128, 64):
        if M % size == 0 and N % size == 0:
            return Tile(size, size)
    return None


def emit(sh: Shader, plan: tuple[Contraction, Tile]) -> Launch:
    contraction, tile = plan
    kernel, fn, asm, u32 = sh.kernel, sh.fn, sh.asm, sh.u32
    batch = kernel.parallel_ranges[:-2]
    M, N = kernel.parallel_ranges[-2:]
    (Kdim,) = kernel.reduction_ranges
    sm, sn = tile.bm // SUBGROUPS[0], tile.bn // SUBGROUPS[1]
    fm, fn_count = sm // FRAGMENT, sn // FRAGMENT
    tiles_m, tiles_n = M // tile.bm, N // tile.bn
    groups = math.prod(batch) * tiles_m * tiles_n
    grid = grid_for(groups)
    subgroup = sh.target.subgroup_size
    threads = subgroup * SUBGROUPS[0] * SUBGROUPS[1]

    asm.require("Float16")
    f16, f32 = asm.t_float(16), asm.t_float(32)
    a_t = asm.t_cooperative_matrix(f16, FRAGMENT, FRAGMENT, S.MATRIX_A)
    b_t = asm.t_cooperative_matrix(f16, FRAGMENT, FRAGMENT, S.MATRIX_B)
    acc_t = asm.t_cooperative_matrix(f32, FRAGMENT, FRAGMENT, S.MATRIX_ACCUMULATOR)
    out_t = asm.t_cooperative_matrix(f16, FRAGMENT, FRAGMENT, S.MATRIX_ACCUMULATOR)
    row_major = asm.u32(S.ROW_MAJOR)
    (x, y), result = operands(contraction), kernel.results[0]
    group, lid = sh.group_id(grid), sh.local_id()

    def c(v: int) -> int:
        return asm.u32(v)

    def op(code: int, *args) -> int:
        return fn.op(code, u32, *args)

    def element(binding: int, index: int) -> int:
        ptr = asm.t_pointer(S.STORAGE_BUFFER, sh.storage_type("f16"))
        return fn.op(S.OpAccessChain, ptr, sh.view(binding), c(0), index)

    def body():
        n_tile = op(S.OpUMod, group, c(tiles_n))
        rest = op(S.OpUDiv, group, c(tiles_n))
        m_tile = op(S.OpUMod, rest, c(tiles_m))
        batch_point = sh.delinearize(op(S.OpUDiv, rest, c(tiles_m)), batch) if batch else []
        sg = op(S.OpUDiv, lid, c(subgroup))
        m0 = op(S.OpIAdd, op(S.OpIMul, m_tile, c(tile.bm)),
                op(S.OpIMul, op(S.OpUDiv, sg, c(SUBGROUPS[1])), c(sm)))
        n0 = op(S.OpIAdd, op(S.OpIMul, n_tile, c(tile.bn)),
                op(S.OpIMul, op(S.OpUMod, sg, c(SUBGROUPS[1])), c(sn)))
        accs = [[fn.variable(acc_t) for _ in range(fn_count)] for _ in range(fm)]
        zero = asm.const_matrix_fill(acc_t, asm.const_float(32, 0.0))
        for row in accs:
            for acc in row:
                fn.do(S.OpStore, acc, zero)

        def k_step(k0: int) -> None:
            a = [fn.op(S.OpCooperativeMatrixLoadKHR, a_t, element(x.binding, sh.address(
                x.index[0], batch_point + [op(S.OpIAdd, m0, c(i * FRAGMENT)), c(0), k0])),
                row_major, c(Kdim)) for i in range(fm)]
            b = [fn.op(S.OpCooperativeMatrixLoadKHR, b_t, element(y.binding, sh.address(
                y.index[0], batch_point + [c(0), op(S.OpIAdd, n0, c(j * FRAGMENT)), k0])),
                row_major, c(N)) for j in range(fn_count)]
            for i in range(fm):
                for j in range(fn_count):
                    total = fn.op(S.OpCooperativeMatrixMulAddKHR, acc_t, a[i], b[j],
                                  fn.op(S.OpLoad, acc_t, accs[i][j]))
                    fn.do(S.OpStore, accs[i][j], total)

        fn.for_range(c(0), c(Kdim), c(FRAGMENT), k_step)
        for i in range(fm):
            for j in range(fn_count):
                point = batch_point + [op(S.OpIAdd, m0, c(i * FRAGMENT)),
                                       op(S.OpIAdd, n0, c(j * FRAGMENT)), c(0)]
                rounded = fn.op(115, out_t, fn.op(S.OpLoad, acc_t, accs[i][j]))  # OpFConvert
                fn.do(S.OpCooperativeMatrixStoreKHR,
                      element(result.binding, sh.address(result.index[0], point)), rounded,
                      row_major, c(N))

    fn.if_then(fn.op(S.OpULessThan, sh.bool, group, c(groups)), body)
    return Launch(grid, (threads, 1, 1))
