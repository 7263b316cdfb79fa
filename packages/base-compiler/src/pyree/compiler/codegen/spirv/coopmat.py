"""Matrix multiplies of f16 or bf16 operands on the tensor cores, through cooperative matrices
(SPV_KHR_cooperative_matrix, VK_KHR_cooperative_matrix; bf16 through SPV_KHR_bfloat16 where the
target has it): 16x16x16 subgroup fragments, f32 accumulators.

Shader arithmetic peaks far below the matrix units on current GPUs, which do an order of
magnitude more f16 work per clock. Each workgroup computes a bm x bn tile of the output, each of
its subgroups a block of that tile. The workgroup stages BK-deep slices of X and Y in shared
memory, 16 bytes (eight halves) an access, and the subgroups load their fragments from there:
fragments loaded straight from the storage buffers (the first version of this template) ran a
512x4096x11008 product at 25 TFLOP/s on an H200. The next slice's global loads are issued into
registers before the current slice's multiplies, so their latency hides behind them.

Any layout of X and Y is staged the same way: a slice is stored with its operand's contiguous
dimension innermost and the fragment read row- or column-major accordingly (F.linear's [n, k]
weight is a column-major B). An operand read in place with its contiguous extent and every
other stride a multiple of 8 is copied 16 bytes at a time; any other expression (a fused
producer, an odd stride) is evaluated eight elements an invocation. k past the matrix reads
zeros and a row past it the last row (which feeds only outputs that are not stored), so odd
sizes need no branch in the main loop. The epilogue passes each finished
fragment through a per-subgroup scratch tile in shared memory, so ``init``, fused epilogues and
the bounds checks at the edges are the scalar lowering's, as in the SIMT template.

Cooperative matrices need the Vulkan memory model, under which shared memory is only
synchronised for non-private accesses: every shared access here is NonPrivatePointer and every
barrier makes its writes available and visible. Targets opt in with ``cooperative_matrix``; the
driver refuses the module on a device without the extension or this fragment shape.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.contraction import Contraction
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.normalize import unsafe_loads
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv import matmul
from pyree.compiler.codegen.spirv.elementwise import store_results
from pyree.compiler.codegen.spirv.matmul import G_UMIN, last
from pyree.compiler.codegen.spirv.scalar import ScalarLowering
from pyree.compiler.codegen.spirv.shader import Shader, grid_for
from pyree.compiler.codegen.spirv.targets import VulkanTarget
from pyree.compiler.sizes import is_static, num_elements, opaque, static_shape

FRAGMENT = 16   # M = N = K of one cooperative matrix multiply-add
BK = 32         # k per staged slice
SKINNY_BK = 64  # ... where a side is one fragment (a product of few rows: its k runs longer)
SMALLEST_HALVED = 64  # the tile's sides are halved for a fuller grid down to this
VECTOR = 8      # halves per 16-byte shared element
PAD = 1         # 16-byte elements after each staged row, against shared-memory bank conflicts
SCRATCH = FRAGMENT * FRAGMENT  # f32s of one subgroup's epilogue tile
COLUMN_MAJOR = 1
MIN_GROUPS = 256  # smaller tiles below this many workgroups (an H100 has 132 SMs)
RUN_TIME_SIDE = 64      # a run-time M or N's tile side (a prompt's rows: 1 to thousands)
TILE = (128, 128)       # the largest workgroup tile, m x n
SUBGROUPS = (2, 2)      # the most subgroups along m and n

NON_PRIVATE = 0x20                      # NonPrivatePointer memory operand
MAKE_AVAILABLE_VISIBLE = 0x2000 | 0x4000


@dataclass(frozen=True)
class Tile:
    bm: int
    bn: int
    subgroups: tuple[int, int]   # along m and n
    bk: int = BK

    def threads(self, subgroup: int) -> int:
        return subgroup * self.subgroups[0] * self.subgroups[1]


@dataclass(frozen=True)
class Operand:
    """X (rows = m) or Y (rows = n) as staged: ``value`` an f16/bf16 expression; ``k_inner`` whether
    the slice is stored rows x k (k contiguous) rather than k x rows; ``vector`` the load copied
    16 bytes at a time, or None (``value`` evaluated per half)."""

    value: K.Expr
    k_inner: bool
    vector: K.Load | None


@dataclass(frozen=True)
class Plan:
    contraction: Contraction
    tile: Tile
    x: Operand
    y: Operand
    element: str   # f16 or bf16, both operands'


def plan(kernel: K.Kernel, target: VulkanTarget) -> Plan | None:
    """A Plan when the cooperative-matrix template takes a contraction the tiled matmul would
    (f16 operands, or bf16 on a target with bf16 fragments), else None. A side shorter than a
    fragment is zero-filled to one; a run-time size (``dynamic.py`` hands such kernels here
    first) is read from the push constants like every other template's."""
    if not (target.cooperative_matrix and target.float16):
        return None
    tiled = matmul.plan(kernel, target)
    if tiled is None or tiled[0].dtype not in ("f16", "bf16", "f32"):
        return None
    contraction = tiled[0]
    x, y = _narrow(contraction.x), _narrow(contraction.y)
    M, N = kernel.parallel_ranges[-2:]
    if x is None or y is None or x.dtype != y.dtype:
        return None
    if x.dtype == "bf16" and not target.bfloat16_cooperative_matrix:
        return None
    m, n, k = kernel.num_parallel - 2, kernel.num_parallel - 1, kernel.num_parallel
    tile = _tile(num_elements(kernel.parallel_ranges[:-2]), M, N, target.subgroup_size)
    while _shared_bytes(tile) > target.max_shared_memory_bytes and tile.bk > BK:
        tile = dataclasses.replace(tile, bk=tile.bk // 2)
    if _shared_bytes(tile) > target.max_shared_memory_bytes or \
            tile.threads(target.subgroup_size) > target.max_workgroup_invocations:
        return None
    return Plan(contraction, tile, _operand(kernel, x, m, k), _operand(kernel, y, n, k), x.dtype)


def _narrow(e: K.Expr) -> K.Expr | None:
    """The f16/bf16 value an operand multiplies (an f32 product's operands are fpext'ed)."""
    if isinstance(e, K.Cast) and e.op == "fpext":
        e = e.x
    return e if e.dtype in ("f16", "bf16") else None


def _tile(batch, M, N, subgroup: int) -> Tile:
    """128 x 128 where there are workgroups enough to fill the GPU, halved (the longer side
    first) down to 64 while there are not, and no wider than a side needs; two subgroups a
    side where the side and the staging (whole 16-byte vectors an invocation) allow. A run-time
    side takes RUN_TIME_SIDE, and the grid is not known to halve for."""
    def fit(size, cap: int) -> int:
        if not is_static(size):
            return min(RUN_TIME_SIDE, cap)
        return next(t for t in (256, 128, 64, 32, 16) if t <= cap and (t <= size or t == FRAGMENT))

    bm, bn = fit(M, TILE[0]), fit(N, TILE[1])
    while static_shape((batch, M, N)) and batch * -(-M // bm) * -(-N // bn) < MIN_GROUPS and \
            max(bm, bn) > SMALLEST_HALVED:
        if bm >= bn:
            bm //= 2
        else:
            bn //= 2
    sg = [min(SUBGROUPS[0], bm // FRAGMENT), min(SUBGROUPS[1], bn // FRAGMENT)]
    bk = SKINNY_BK if FRAGMENT in (bm, bn) else BK
    while any(side * bk // VECTOR % (subgroup * sg[0] * sg[1]) for side in (bm, bn)):
        sg[sg.index(max(sg))] //= 2
    return Tile(bm, bn, (sg[0], sg[1]), bk)


def _operand(kernel: K.Kernel, value: K.Expr, rows: int, k: int) -> Operand:
    k_inner = matmul._walk_k(kernel, value, k, rows, default=True)
    vector = None
    if isinstance(value, K.Load) and len(value.index) == 1:
        coeffs, const = value.index[0].coeffs, value.index[0].const
        inner = k if k_inner else rows
        extent = kernel.loop_ranges[inner]
        others = [c for d, c in enumerate(coeffs) if d != inner]
        if static_shape((extent, const, *coeffs)) and coeffs[inner] == 1 and \
                extent % VECTOR == 0 and const % VECTOR == 0 and all(c % VECTOR == 0 for c in others):
            vector = value
    return Operand(value, k_inner, vector)


def emit(sh: Shader, plan: Plan) -> Launch:
    kernel, fn, asm, u32, bool_ = sh.kernel, sh.fn, sh.asm, sh.u32, sh.bool
    tile, contraction = plan.tile, plan.contraction
    unsafe = frozenset(unsafe_loads(kernel))
    batch = kernel.parallel_ranges[:-2]
    M, N = kernel.parallel_ranges[-2:]
    (Kdim,) = kernel.reduction_ranges
    sg_m, sg_n = tile.subgroups
    sub_m, sub_n = tile.bm // sg_m, tile.bn // sg_n
    fm, fn_count = sub_m // FRAGMENT, sub_n // FRAGMENT
    tiles_m, tiles_n = opaque("ceildiv", M, tile.bm), opaque("ceildiv", N, tile.bn)
    groups = num_elements(batch) * tiles_m * tiles_n
    grid = grid_for(groups)
    subgroup = sh.target.subgroup_size
    threads = tile.threads(subgroup)
    m_loop, n_loop = kernel.num_parallel - 2, kernel.num_parallel - 1

    asm.require("Float16")
    f16, f32 = asm.t_float(16), asm.t_float(32)
    uvec4 = asm.t_vector(u32, 4)
    if plan.element == "bf16":
        asm.require("BFloat16CooperativeMatrixKHR")
        element = asm.t_bfloat16()
    else:
        element = f16
    a_t = asm.t_cooperative_matrix(element, FRAGMENT, FRAGMENT, S.MATRIX_A)
    b_t = asm.t_cooperative_matrix(element, FRAGMENT, FRAGMENT, S.MATRIX_B)
    acc_t = asm.t_cooperative_matrix(f32, FRAGMENT, FRAGMENT, S.MATRIX_ACCUMULATOR)
    t = sh.compute_type(contraction.dtype)
    zero4 = asm.const_vector(uvec4, *[asm.u32(0)] * 4)

    def c(v: int) -> int:
        return asm.u32(v)

    def op(code: int, *args) -> int:
        return fn.op(code, u32, *args)

    def barrier(scope: int) -> None:
        fn.do(S.OpControlBarrier, c(scope), c(scope),
              c(S.SEMANTICS_WORKGROUP_ACQUIRE_RELEASE | MAKE_AVAILABLE_VISIBLE))

    class Slice:
        """One operand's staged slice: its shared array, row stride (16-byte elements) and how
        its global reads are laid out over the invocations."""

        def __init__(self, operand: Operand, width: int, rows: int, limit: int):
            self.operand, self.width, self.rows, self.limit = operand, width, rows, limit
            inner = tile.bk if operand.k_inner else width
            self.stride = inner // VECTOR + PAD
            outer = width if operand.k_inner else tile.bk
            self.array = asm.shared_array(uvec4, outer * self.stride)
            self.count = outer * (inner // VECTOR) // threads
            assert self.count * threads == outer * (inner // VECTOR), (tile, operand)
            self.per_row = inner // VECTOR

        def places(self, slot: int):
            """(shared index, row offset, k offset) of this invocation's ``slot``-th vector: the
            row and k of its first half."""
            v = op(S.OpIAdd, lid, c(slot * threads))
            outer, inner = op(S.OpUDiv, v, c(self.per_row)), op(S.OpUMod, v, c(self.per_row))
            shared = op(S.OpIAdd, op(S.OpIMul, outer, c(self.stride)), inner)
            inner_h = op(S.OpIMul, inner, c(VECTOR))
            return (shared, outer, inner_h) if self.operand.k_inner else (shared, inner_h, outer)

        def fetch(self, r0: int, k0: int) -> list[int]:
            """This invocation's vectors of the slice at rows r0.., k k0.. (zeros outside)."""
            out = []
            for slot in range(self.count):
                _, dr, dk = self.places(slot)
                out.append(self._vector(op(S.OpIAdd, r0, dr), op(S.OpIAdd, k0, dk)))
            return out

        def store(self, values: list[int]) -> None:
            ptr_t = asm.t_pointer(S.WORKGROUP, uvec4)
            for slot, value in enumerate(values):
                shared = self.places(slot)[0]
                fn.do(S.OpStore, fn.op(S.OpAccessChain, ptr_t, self.array, shared), value,
                      NON_PRIVATE)

        def _vector(self, r: int, k: int) -> int:
            operand, k_inner = self.operand, self.operand.k_inner
            if operand.vector is not None:
                rc = fn.ext(u32, G_UMIN, r, sh.size(last(self.limit, 1 if k_inner else VECTOR)))
                kc = fn.ext(u32, G_UMIN, k, sh.size(last(Kdim, VECTOR if k_inner else 1)))
                index = sh.address(operand.vector.index[0], self._point(rc, kc))
                value = sh.load_raw16(operand.vector.binding,
                                      op(S.OpShiftRightLogical, index, c(3)))
                inside = self._inside(k)  # a vector select takes a vector condition (SPIR-V 1.3)
                inside4 = fn.op(S.OpCompositeConstruct, asm.t_vector(bool_, 4), *[inside] * 4)
                return fn.op(S.OpSelect, uvec4, inside4, value, zero4)
            values = []
            for q in range(VECTOR):
                rq, kq = (r, op(S.OpIAdd, k, c(q))) if k_inner else (op(S.OpIAdd, r, c(q)), k)
                rc = fn.ext(u32, G_UMIN, rq, sh.size(last(self.limit)))
                kc = fn.ext(u32, G_UMIN, kq, sh.size(last(Kdim)))
                value = ScalarLowering(sh, self._point(rc, kc), unsafe=unsafe)(operand.value)
                t_value = sh.compute_type(operand.value.dtype)
                values.append(fn.op(S.OpSelect, t_value, self._inside(kq), value,
                                    asm.const_float(sh.compute_bits(operand.value.dtype), 0.0)))
            return fn.op(S.OpCompositeConstruct, uvec4, *[
                self._word(values[i], values[i + 1]) for i in range(0, VECTOR, 2)])

        def _word(self, low: int, high: int) -> int:
            """Two elements (compute type) as the u32 of their 16-bit storage."""
            if plan.element == "f16":
                pair = fn.op(S.OpCompositeConstruct, asm.t_vector(f16, 2), low, high)
                return fn.op(S.OpBitcast, u32, pair)
            return op(S.OpBitwiseOr, sh.to_bf16_bits(low),
                      op(S.OpShiftLeftLogical, sh.to_bf16_bits(high), c(16)))

        def _point(self, r: int, k: int) -> list[int]:
            mn = [r, c(0)] if self.rows == m_loop else [c(0), r]
            return batch_point + mn + [k]

        def _inside(self, k: int) -> int:
            """Whether ``k`` is inside K: past it the slice holds zeros. A row past the side
            is read at the last row instead, not zeroed: it meets only output rows past the
            side, which the epilogue does not store, and a select on a run-time side ran
            NVIDIA's Vulkan driver's main loop at half speed (BENCHMARKS.md, twenty-ninth
            session)."""
            return fn.op(S.OpULessThan, bool_, k, sh.size(Kdim))

        def fragment(self, matrix_t: int, row: int, kk: int) -> int:
            """The 16x16 fragment at tile row ``row`` (a u32 id), slice k ``kk``."""
            if self.operand.k_inner:
                at = op(S.OpIAdd, op(S.OpIMul, row, c(self.stride)), c(kk // VECTOR))
            else:
                at = op(S.OpIAdd, c(kk * self.stride), op(S.OpUDiv, row, c(VECTOR)))
            ptr = fn.op(S.OpAccessChain, asm.t_pointer(S.WORKGROUP, uvec4), self.array, at)
            # A is rows x k, B is k x rows: stored k-inner, A is row-major and B column-major
            a = matrix_t == a_t
            layout = S.ROW_MAJOR if self.operand.k_inner == a else COLUMN_MAJOR
            return fn.op(S.OpCooperativeMatrixLoadKHR, matrix_t, ptr, c(layout), c(self.stride),
                         NON_PRIVATE)

    group, lid = sh.group_id(grid), sh.local_id()
    scratch = asm.shared_array(f32, sg_m * sg_n * SCRATCH)

    def body():
        nonlocal batch_point
        n_tile = op(S.OpUMod, group, sh.size(tiles_n))
        rest = op(S.OpUDiv, group, sh.size(tiles_n))
        m_tile = op(S.OpUMod, rest, sh.size(tiles_m))
        batch_point = sh.delinearize(op(S.OpUDiv, rest, sh.size(tiles_m)), batch) if batch else []
        m0, n0 = op(S.OpIMul, m_tile, c(tile.bm)), op(S.OpIMul, n_tile, c(tile.bn))
        sg, lane = op(S.OpUDiv, lid, c(subgroup)), op(S.OpUMod, lid, c(subgroup))
        sub_m0 = op(S.OpIMul, op(S.OpUDiv, sg, c(sg_n)), c(sub_m))   # within the tile
        sub_n0 = op(S.OpIMul, op(S.OpUMod, sg, c(sg_n)), c(sub_n))
        xs = Slice(plan.x, tile.bm, m_loop, M)
        ys = Slice(plan.y, tile.bn, n_loop, N)
        held = [fn.variable(uvec4) for _ in range(xs.count + ys.count)]

        def hold(values: list[int]) -> None:
            for var, v in zip(held, values):
                fn.do(S.OpStore, var, v)

        hold(xs.fetch(m0, c(0)) + ys.fetch(n0, c(0)))
        accs = [[fn.variable(acc_t) for _ in range(fn_count)] for _ in range(fm)]
        zero = asm.const_matrix_fill(acc_t, asm.const_float(32, 0.0))
        for row in accs:
            for acc in row:
                fn.do(S.OpStore, acc, zero)
        last_slice = last(Kdim) // tile.bk * tile.bk

        def k_step(k0: int) -> None:
            values = [fn.op(S.OpLoad, uvec4, var) for var in held]
            xs.store(values[:xs.count])
            ys.store(values[xs.count:])
            barrier(S.SCOPE_WORKGROUP)
            after = fn.ext(u32, G_UMIN, op(S.OpIAdd, k0, c(tile.bk)), sh.size(last_slice))
            hold(xs.fetch(m0, after) + ys.fetch(n0, after))  # in flight during the multiplies
            for kk in range(0, tile.bk, FRAGMENT):
                a = [xs.fragment(a_t, op(S.OpIAdd, sub_m0, c(i * FRAGMENT)), kk)
                     for i in range(fm)]
                b = [ys.fragment(b_t, op(S.OpIAdd, sub_n0, c(j * FRAGMENT)), kk)
                     for j in range(fn_count)]
                for i in range(fm):
                    for j in range(fn_count):
                        total = fn.op(S.OpCooperativeMatrixMulAddKHR, acc_t, a[i], b[j],
                                      fn.op(S.OpLoad, acc_t, accs[i][j]))
                        fn.do(S.OpStore, accs[i][j], total)
            barrier(S.SCOPE_WORKGROUP)

        fn.for_range(c(0), sh.size(Kdim), c(tile.bk), k_step)
        _epilogue(sh, tile, accs, scratch, op(S.OpIMul, sg, c(SCRATCH)), lane, batch_point,
                  op(S.OpIAdd, m0, sub_m0), op(S.OpIAdd, n0, sub_n0), t, unsafe, barrier)

    batch_point: list[int] = []
    fn.if_then(fn.op(S.OpULessThan, bool_, group, sh.size(groups)), body)
    return Launch(grid, (threads, 1, 1), _shared_bytes(tile))


def _shared_bytes(tile: Tile) -> int:
    return (tile.bm + tile.bn) * (tile.bk + VECTOR * PAD) * 2 + \
        tile.subgroups[0] * tile.subgroups[1] * SCRATCH * 4


def _ragged(extent, side: int) -> bool:
    """Whether tiles of ``side`` may pass ``extent`` (always, where it is a run-time size)."""
    return not is_static(extent) or extent % side != 0


def _epilogue(sh: Shader, tile: Tile, accs, scratch: int, base: int, lane: int,
              batch_point: list[int], m0: int, n0: int, t: int, unsafe: frozenset,
              barrier) -> None:
    """Each fragment through the subgroup's scratch tile: stored there by the subgroup, then read
    by its invocations an element each, ``init`` added, the epilogue applied, and stored within
    the result's bounds."""
    kernel, fn, asm, u32, bool_ = sh.kernel, sh.fn, sh.asm, sh.u32, sh.bool
    M, N = kernel.parallel_ranges[-2:]
    f32 = asm.t_float(32)
    subgroup = sh.target.subgroup_size
    acc_t = asm.t_cooperative_matrix(f32, FRAGMENT, FRAGMENT, S.MATRIX_ACCUMULATOR)
    ptr_t = asm.t_pointer(S.WORKGROUP, f32)
    final = fn.variable(t)

    def op(code: int, *args) -> int:
        return fn.op(code, u32, *args)

    for i, row in enumerate(accs):
        for j, acc in enumerate(row):
            fn.do(S.OpCooperativeMatrixStoreKHR, fn.op(S.OpAccessChain, ptr_t, scratch, base),
                  fn.op(S.OpLoad, acc_t, acc), asm.u32(S.ROW_MAJOR), asm.u32(FRAGMENT), NON_PRIVATE)
            barrier(S.SCOPE_SUBGROUP)
            for q in range(SCRATCH // subgroup):
                e = op(S.OpIAdd, lane, asm.u32(q * subgroup))
                m = op(S.OpIAdd, m0, op(S.OpIAdd, op(S.OpUDiv, e, asm.u32(FRAGMENT)),
                                        asm.u32(i * FRAGMENT)))
                n = op(S.OpIAdd, n0, op(S.OpIAdd, op(S.OpUMod, e, asm.u32(FRAGMENT)),
                                        asm.u32(j * FRAGMENT)))
                value = fn.op(S.OpLoad, f32, fn.op(S.OpAccessChain, ptr_t, scratch,
                                                   op(S.OpIAdd, base, e)), NON_PRIVATE)
                if t != f32:
                    value = fn.op(S.OpFConvert, t, value)

                def store(m=m, n=n, value=value):
                    point = batch_point + [m, n, asm.u32(0)]
                    init = ScalarLowering(sh, point, unsafe=unsafe)(kernel.results[0].init)
                    fn.do(S.OpStore, final, fn.op(129, t, init, value))  # OpFAdd
                    store_results(sh, point, [final], unsafe)

                edge = [fn.op(S.OpULessThan, bool_, m, sh.size(M))] if _ragged(M, tile.bm) else []
                edge += [fn.op(S.OpULessThan, bool_, n, sh.size(N))] if _ragged(N, tile.bn) else []
                if edge:
                    fn.if_then(edge[0] if len(edge) == 1 else
                               fn.op(S.OpLogicalAnd, bool_, *edge), store)
                else:
                    store()
            barrier(S.SCOPE_SUBGROUP)
