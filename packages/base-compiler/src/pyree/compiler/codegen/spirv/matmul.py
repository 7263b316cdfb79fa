"""Contractions (``acc += X(m, k) * Y(k, n)``, any leading batch loops): a tiled shared-memory
kernel. Each workgroup computes a BM x BN tile of the output, staging BK-deep slices of X and Y in
shared memory; each invocation accumulates a TM x TN register tile made of 4x4 blocks strided
across the workgroup, read from shared memory as 4-vectors (one wide load for four values).

X and Y are arbitrary expressions (casts, fused producers) evaluated once per staged element at
clamped indices and replaced by 0 past K (a row or column past the side keeps its clamped value:
it feeds only outputs that are not stored), so odd shapes need no branches in the inner loop.
The epilogue adds ``init``, applies the fused epilogue and stores with bounds checks.
"""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.addressing import linearize
from pyree.compiler.codegen.common.contraction import Contraction, Tiling, contraction_of
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.normalize import unsafe_loads
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.elementwise import store_results
from pyree.compiler.codegen.spirv.scalar import ScalarLowering
from pyree.compiler.codegen.spirv.shader import Shader, grid_for
from pyree.compiler.codegen.spirv.targets import VulkanTarget
from pyree.compiler.sizes import compare, is_static, num_elements, opaque, select

G_UMIN = 38
# X's tile is stored k-major with rows padded so that invocations storing one row's k values hit
# distinct shared-memory banks.
A_PAD = 4



SMALL = Tiling(64, 64, 16, 4, 4)     # 256 invocations, any M and N
LARGE = Tiling(128, 128, 8, 8, 8)    # 256 invocations, where M and N are both LARGE_FROM or more
NARROW = Tiling(64, 64, 16, 8, 4)    # 128 invocations, for targets with fewer than 256
LARGE_FROM = 512


def plan(kernel: K.Kernel, target: VulkanTarget) -> tuple[Contraction, Tiling] | None:
    """The contraction and its tiling; a run-time M or N takes SMALL here, and LARGE per
    dispatch where ``large`` holds (``dynamic.py``)."""
    contraction = contraction_of(kernel)
    if contraction is None or kernel.results[0].init is None:
        return None
    if target.max_workgroup_invocations < SMALL.threads:
        tiling = NARROW
    else:
        tiling = LARGE if large(kernel) is True else SMALL
    if shared_bytes(contraction, tiling, target) > target.max_shared_memory_bytes:
        return None
    (k,) = kernel.reduction_ranges
    if is_static(k) and not target.runs(-(-k // tiling.bk) + 1):
        return None  # lavapipe would cut the K loop short; the fold templates spread it
    return contraction, tiling


def large(kernel: K.Kernel):
    """Whether the LARGE tiling suits the kernel: a bool, or a 0/1 Size where M or N is a
    run-time size."""
    m, n = (compare("ge", side, LARGE_FROM) for side in kernel.parallel_ranges[-2:])
    if m is False or n is False:
        return False
    return n if m is True else m if n is True else select(m, n, 0)


def shared_bytes(contraction: Contraction, tiling: Tiling, target: VulkanTarget) -> int:
    bits = 16 if contraction.dtype == "f16" and target.float16 else 32
    return (tiling.bm + A_PAD + tiling.bn) * tiling.bk * bits // 8


def emit(sh: Shader, plan: tuple[Contraction, Tiling]) -> Launch:
    contraction, tiling = plan
    unsafe = frozenset(unsafe_loads(sh.kernel))
    kernel, fn, asm = sh.kernel, sh.fn, sh.asm
    u32, bool_ = sh.u32, sh.bool
    batch = kernel.parallel_ranges[:-2]
    M, N = kernel.parallel_ranges[-2:]
    (Kdim,) = kernel.reduction_ranges
    bm, bn, bk, tm, tn = tiling.bm, tiling.bn, tiling.bk, tiling.tm, tiling.tn
    T, tx_count, ty_count = tiling.threads, bn // tn, bm // tm
    tiles_m, tiles_n = opaque("ceildiv", M, bm), opaque("ceildiv", N, bn)
    groups = num_elements(batch) * tiles_m * tiles_n
    grid = grid_for(groups)
    dtype = contraction.dtype
    t = sh.compute_type(dtype)
    zero = asm.const_float(sh.compute_bits(dtype), 0.0)
    a_stride = bm + A_PAD
    vec4 = asm.t_vector(t, 4)
    a_tile = asm.shared_array(vec4, a_stride * bk // 4)
    b_tile = asm.shared_array(vec4, bn * bk // 4)
    group, lid = sh.group_id(grid), sh.local_id()
    m_loop, n_loop, k_loop = kernel.num_parallel - 2, kernel.num_parallel - 1, kernel.num_parallel
    walk_k_x = _walk_k(kernel, contraction.x, k_loop, m_loop, default=True)
    walk_k_y = _walk_k(kernel, contraction.y, k_loop, n_loop, default=False)

    def c(v: int) -> int:
        return asm.u32(v)

    def op(code: int, *args) -> int:
        return fn.op(code, u32, *args)

    def shared(var: int, index: int) -> int:
        """Element ``index`` of a tile of 4-vectors."""
        return fn.op(S.OpAccessChain, asm.t_pointer(S.WORKGROUP, t), var,
                     op(S.OpUDiv, index, c(4)), op(S.OpUMod, index, c(4)))

    def quad(var: int, index: int) -> list[int]:
        """The 4-vector ``index`` of a tile, as its four components."""
        v = fn.op(S.OpLoad, vec4, fn.op(S.OpAccessChain, asm.t_pointer(S.WORKGROUP, vec4), var, index))
        return [fn.op(S.OpCompositeExtract, t, v, q) for q in range(4)]

    def offset(i: int, count: int) -> int:
        """Row (column) of register ``i`` inside the tile, relative to 4 * ty (4 * tx)."""
        return (i // 4) * count * 4 + i % 4

    def body():
        n_tile = op(S.OpUMod, group, sh.size(tiles_n))
        rest = op(S.OpUDiv, group, sh.size(tiles_n))
        m_tile = op(S.OpUMod, rest, sh.size(tiles_m))
        batch_point = sh.delinearize(op(S.OpUDiv, rest, sh.size(tiles_m)), batch) if batch else []
        m0, n0 = op(S.OpIMul, m_tile, c(bm)), op(S.OpIMul, n_tile, c(bn))
        tx, ty = op(S.OpUMod, lid, c(tx_count)), op(S.OpUDiv, lid, c(tx_count))
        accs = [[fn.variable(t) for _ in range(tn)] for _ in range(tm)]
        for row in accs:
            for acc in row:
                fn.do(S.OpStore, acc, zero)

        def stage(k0: int, expr: K.Expr, tile: int, width: int, stride: int, rows_first: bool,
                  walk_k: bool):
            """tile[kk * stride + w] = expr at (w, k0 + kk), 0 outside the matrix; consecutive
            invocations walk k (``walk_k``) or the tile's rows (m for X, n for Y)."""
            for step in range(width * bk // T):
                e = op(S.OpIAdd, lid, c(step * T))
                if walk_k:
                    w, kk = op(S.OpUDiv, e, c(bk)), op(S.OpUMod, e, c(bk))
                else:
                    kk, w = op(S.OpUDiv, e, c(width)), op(S.OpUMod, e, c(width))
                base, limit = (m0, M) if rows_first else (n0, N)
                g, k = op(S.OpIAdd, base, w), op(S.OpIAdd, k0, kk)
                gc = fn.ext(u32, G_UMIN, g, sh.size(last(limit)))
                kc = fn.ext(u32, G_UMIN, k, sh.size(last(Kdim)))
                mn = [gc, c(0)] if rows_first else [c(0), gc]
                value = ScalarLowering(sh, batch_point + mn + [kc], unsafe=unsafe)(expr)
                inside = fn.op(S.OpULessThan, bool_, k, sh.size(Kdim))  # (rows: coopmat.py)
                value = fn.op(S.OpSelect, t, inside, value, zero)
                fn.do(S.OpStore, shared(tile, op(S.OpIAdd, op(S.OpIMul, kk, c(stride)), w)), value)

        def k_step(k0: int) -> None:
            stage(k0, contraction.x, a_tile, bm, a_stride, True, walk_k_x)
            stage(k0, contraction.y, b_tile, bn, bn, False, walk_k_y)
            fn.barrier()
            for kk in range(bk):
                a = [x for g in range(tm // 4)
                     for x in quad(a_tile, op(S.OpIAdd, ty, c((kk * a_stride) // 4 + ty_count * g)))]
                b = [x for g in range(tn // 4)
                     for x in quad(b_tile, op(S.OpIAdd, tx, c((kk * bn) // 4 + tx_count * g)))]
                for i in range(tm):
                    for j in range(tn):
                        product = fn.op(133, t, a[i], b[j])  # OpFMul
                        total = fn.op(129, t, fn.op(S.OpLoad, t, accs[i][j]), product)  # OpFAdd
                        fn.do(S.OpStore, accs[i][j], total)
            fn.barrier()

        fn.for_range(c(0), sh.size(Kdim), c(bk), k_step)
        final = fn.variable(t)
        for i in range(tm):
            for j in range(tn):
                m = op(S.OpIAdd, m0, op(S.OpIAdd, op(S.OpIMul, ty, c(4)), c(offset(i, ty_count))))
                n = op(S.OpIAdd, n0, op(S.OpIAdd, op(S.OpIMul, tx, c(4)), c(offset(j, tx_count))))
                inside = fn.op(167, bool_, fn.op(S.OpULessThan, bool_, m, sh.size(M)),
                               fn.op(S.OpULessThan, bool_, n, sh.size(N)))

                def store(i=i, j=j, m=m, n=n):
                    point = batch_point + [m, n, c(0)]
                    init = ScalarLowering(sh, point, unsafe=unsafe)(kernel.results[0].init)
                    fn.do(S.OpStore, final, fn.op(129, t, init, fn.op(S.OpLoad, t, accs[i][j])))
                    store_results(sh, point, [final], unsafe)
                fn.if_then(inside, store)

    fn.if_then(fn.op(S.OpULessThan, bool_, group, sh.size(groups)), body)
    return Launch(grid, (T, 1, 1), shared_bytes(contraction, tiling, sh.target))


def last(extent, width: int = 1):
    """The last start of a ``width``-long run inside a loop of ``extent`` (1: its last index), a
    clamp's bound: 0 for a run-time extent shorter than ``width`` (whose loop runs no step)."""
    return extent - width if is_static(extent) else opaque("max", extent, width) - width


def _walk_k(kernel: K.Kernel, expr: K.Expr, k_loop: int, row_loop: int, default: bool) -> bool:
    """Whether staging an operand should give consecutive invocations consecutive k: where its
    reads are contiguous along k and not along its row loop (a K-major Y: GPT-2's q @ k^T reads
    k^T from the projection in place), so each wavefront's loads coalesce; the other way round
    where contiguous along the row loop; else ``default`` (X row-major, Y n-major)."""
    reads = [e for e in K.walk(expr) if isinstance(e, K.Load)]
    lins = [linearize(kernel.bindings[e.binding], e.index, len(kernel.loop_ranges)) for e in reads]
    along_k = bool(lins) and all(lin.coeffs[k_loop] == 1 for lin in lins)
    along_row = bool(lins) and all(lin.coeffs[row_loop] == 1 for lin in lins)
    return along_k if along_k != along_row else default
