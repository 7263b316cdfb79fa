"""Long fold reductions (``acc = acc <op> f(...)`` for op in add, mul, max, min, and, or, xor):
one workgroup per output. Invocations stride over the reduction (coalesced along its innermost
dim), fold in registers (a float sum or product in cascaded blocks), then combine through a
shared-memory tree. Floats are reassociated, as
every GPU compiler does. A row kernel does this once per phase (every invocation then reads the
phase's totals for the next one), then the invocations stride over the row storing row results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.cascade import block_sizes, cascade, loop_passes
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.normalize import unsafe_loads
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv import elementwise
from pyree.compiler.codegen.spirv.elementwise import (
    RUN_TIME_EXTENT,
    keep_finals,
    result_values,
    store_rows,
    store_values,
)
from pyree.compiler.codegen.spirv.scalar import ScalarLowering
from pyree.compiler.codegen.spirv.shader import Shader, grid_for
from pyree.compiler.sizes import is_static, num_elements, opaque

MIN_REDUCTION = 128
# Invocations a workgroup where there are MANY_OUTPUTS or more (workgroups enough to fill a GPU
# with small ones): enough for about PER_INVOCATION terms each, from a subgroup up to 256. A
# short row on 256 invocations spent its time in the tree's barriers: SDPA's softmax rows of 512
# (three phases, 24 barriers a row) ran 98 us for 16384 rows on the H200's Vulkan driver. Fewer
# outputs (a decode step's matrix-vector products) keep 256.
PER_INVOCATION = 8
MANY_OUTPUTS = 4096
# An invocation's strided points per block of its cascaded float sums (codegen/common/cascade.py), and
# blocks per next level: no accumulator takes more than about LEAF terms.
LEAF = 16
FAN_IN = 16


@dataclass(frozen=True)
class Plan:
    folds: list
    block: int   # invocations a workgroup, a power of two


def plan(kernel: K.Kernel, target) -> Plan | None:
    """The per-result folds and the workgroup size when this template applies, else None: a
    run-time reduction extent is taken as long."""
    folds = K.fold_pattern(kernel.reductions)
    length = num_elements(kernel.reduction_ranges)
    if folds is None or (is_static(length) and length < MIN_REDUCTION):
        return None
    if any(r.init is None for r in kernel.reductions):
        return None
    outputs = num_elements(kernel.parallel_ranges)
    block = block_size(target)
    if not target.runs(elementwise.loop_passes(kernel)):  # spread, or refused
        return Plan(folds, block) if target.runs(_loop_passes(kernel, folds, block)) else None
    if is_static(outputs) and outputs >= MANY_OUTPUTS and K.reads_along_outputs(
            kernel.num_parallel, len(kernel.loop_ranges), folds, lambda b: kernel.bindings[b].shape):
        return None
    if is_static(length) and is_static(outputs) and outputs >= MANY_OUTPUTS:
        block = min(block, max(target.subgroup_size, _pow2_at_least(-(-length // PER_INVOCATION))))
    if not target.runs(_loop_passes(kernel, folds, block)):
        return None
    return Plan(folds, block)


def _loop_passes(kernel: K.Kernel, folds, block: int) -> int:
    """The loop passes (trips and exits) an invocation runs striding by ``block`` over a static
    reduction: each phase's (cascaded, for a float sum), then the row results; 0 for a
    run-time extent."""
    length = num_elements(kernel.reduction_ranges)
    if not is_static(length):
        return 0
    steps = -(-length // block)
    total = 0
    for phase in K.phases(kernel.results):
        cascaded = any(folds[k][0] in ("add", "mul") and K.is_float(kernel.results[k].value.dtype)
                       for k in phase)
        total += loop_passes(steps, block_sizes(steps, LEAF, FAN_IN) if cascaded else [])
    return total + (steps + 1 if kernel.row_results else 0)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def block_size(target) -> int:
    """The most invocations a workgroup takes (a long or run-time reduction's)."""
    return 1 << int(math.log2(min(256, target.max_workgroup_invocations)))


def emit(sh: Shader, plan: Plan) -> Launch:
    unsafe = frozenset(unsafe_loads(sh.kernel))
    kernel, fn, asm = sh.kernel, sh.fn, sh.asm
    par, red = kernel.parallel_ranges, kernel.reduction_ranges
    outputs, length = num_elements(par), num_elements(red)
    folds, block = plan.folds, plan.block
    grid = grid_for(outputs)
    dtypes = [r.value.dtype for r in kernel.reductions]
    types = [sh.compute_type(d) for d in dtypes]
    # an i1 fold (torch's "is every score of the row -inf") crosses shared memory as a u32
    shared_types = [sh.u32 if d == "i1" else t for d, t in zip(dtypes, types)]
    shared = [asm.shared_array(t, block) for t in shared_types]
    group, lid = sh.group_id(grid), sh.local_id()
    combine = ScalarLowering(sh, [])
    phases = K.phases(kernel.results)

    def bound(start: int, size: int, stop: int) -> int:
        end = fn.op(S.OpIAdd, sh.u32, start, asm.u32(size))
        return fn.op(S.OpSelect, sh.u32, fn.op(S.OpULessThan, sh.bool, end, stop), end, stop)

    def slot(k: int, index: int) -> int:
        return fn.op(S.OpAccessChain, asm.t_pointer(S.WORKGROUP, shared_types[k]), shared[k], index)

    def put(k: int, index: int, value) -> None:
        """Stores ``value()`` (called after the slot's address is formed) in slot ``index``."""
        ptr = slot(k, index)
        v = value()
        if dtypes[k] == "i1":
            v = fn.op(S.OpSelect, sh.u32, v, asm.u32(1), asm.u32(0))
        fn.do(S.OpStore, ptr, v)

    def get(k: int, index: int) -> int:
        value = fn.op(S.OpLoad, shared_types[k], slot(k, index))
        return fn.op(171, sh.bool, value, asm.u32(0)) if dtypes[k] == "i1" else value  # OpINotEqual

    def body():
        point = sh.delinearize(group, par)
        zeros = point + [asm.u32(0)] * len(red)
        first = fn.op(170, sh.bool, lid, asm.u32(0))  # OpIEqual
        variables: dict = {}  # the accumulators of the phase being folded, the finals before it
        for n, phase in enumerate(phases):
            steps = opaque("ceildiv", length, block) if is_static(length) else RUN_TIME_EXTENT // block
            sizes = block_sizes(steps, LEAF, FAN_IN) if any(
                folds[k][0] in ("add", "mul") and K.is_float(dtypes[k]) for k in phase) else []
            levels = [{k: fn.variable(types[k]) for k in phase} for _ in sizes] + [{}]
            for k in phase:
                variables[k] = levels[-1][k] = fn.variable(types[k])

            def fresh(j, phase=phase, levels=levels):
                for k in phase:
                    identity = K.fold_identity(folds[k][0], dtypes[k])
                    fn.do(S.OpStore, levels[j][k], combine.const(identity, dtypes[k]))

            def combine_into(j, phase=phase, levels=levels):
                for k in phase:
                    a = fn.op(S.OpLoad, types[k], levels[j + 1][k])
                    b = fn.op(S.OpLoad, types[k], levels[j][k])
                    fn.do(S.OpStore, levels[j + 1][k], combine.binary(folds[k][0], a, b, dtypes[k]))

            def step(i, phase=phase, levels=levels):
                lower = ScalarLowering(sh, point + sh.delinearize(i, red), variables, unsafe)
                values = [lower(folds[k][1]) for k in phase]
                for k, v in zip(phase, values):
                    old = fn.op(S.OpLoad, types[k], levels[0][k])
                    fn.do(S.OpStore, levels[0][k], combine.binary(folds[k][0], old, v, dtypes[k]))

            fresh(len(sizes))
            cascade(lambda start, stop, by, body: fn.for_range(start, stop, asm.u32(by), body),
                    bound, lid, sh.size(length), sizes, step, fresh, combine_into, step=block)
            for k in phase:
                put(k, lid, lambda k=k: fn.op(S.OpLoad, types[k], variables[k]))
            fn.barrier()
            half = block // 2
            while half:
                def fold_pair(half=half, phase=phase):
                    other = fn.op(S.OpIAdd, sh.u32, lid, asm.u32(half))
                    for k in phase:
                        a, b = get(k, lid), get(k, other)
                        put(k, lid, lambda k=k, a=a, b=b: combine.binary(folds[k][0], a, b,
                                                                         dtypes[k]))
                fn.if_then(fn.op(S.OpULessThan, sh.bool, lid, asm.u32(half)), fold_pair)
                fn.barrier()
                half //= 2

            def totals(phase=phase) -> dict[int, int]:
                at_init = ScalarLowering(sh, zeros, variables, unsafe)
                for k in phase:
                    total = get(k, asm.u32(0))
                    init = at_init(kernel.results[k].init)
                    fn.do(S.OpStore, variables[k], combine.binary(folds[k][0], init, total, dtypes[k]))
                return result_values(sh, zeros, variables, unsafe, phase)

            if n == len(phases) - 1 and not kernel.row_results:
                fn.if_then(first, lambda: store_values(sh, zeros, totals()))
            else:  # every invocation: the later phases and the row results read them
                values = totals()
                fn.if_then(first, lambda values=values: store_values(sh, zeros, values))
                keep_finals(sh, variables, values)
        store_rows(sh, point, variables, unsafe, kernel.num_parallel, lid, asm.u32(block))

    fn.if_then(fn.op(S.OpULessThan, sh.bool, group, sh.size(outputs)), body)
    return Launch(grid, (block, 1, 1), sum(block * (4 if d == "i1" else K.itemsize(d))
                                           for d in dtypes))
