"""Long fold reductions (``acc = acc <op> f(...)`` for op in add, mul, max, min, and, or, xor):
one workgroup per output. Invocations stride over the reduction (coalesced along its innermost
dim), fold in registers, then combine through a shared-memory tree. Floats are reassociated, as
every GPU compiler does.
"""

from __future__ import annotations

import math

from pyree.compiler import kernel as K
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.pointwise import store_results
from pyree.compiler.codegen.spirv.scalar import ScalarLowering
from pyree.compiler.codegen.spirv.shader import Launch, Shader, grid_for

MIN_REDUCTION = 128


def plan(kernel: K.Kernel):
    """The per-result folds when this template applies, else None."""
    folds = K.fold_pattern(kernel.results)
    if folds is None or math.prod(kernel.reduction_ranges) < MIN_REDUCTION:
        return None
    if any(r.value.dtype == "i1" or r.init is None for r in kernel.results):
        return None
    return folds


def emit(sh: Shader, unsafe: frozenset, folds) -> Launch:
    kernel, fn, asm = sh.kernel, sh.fn, sh.asm
    par, red = kernel.parallel_ranges, kernel.reduction_ranges
    outputs, length = math.prod(par), math.prod(red)
    block = 1 << int(math.log2(min(256, sh.target.max_workgroup_invocations)))
    grid = grid_for(outputs)
    dtypes = [r.value.dtype for r in kernel.results]
    types = [sh.compute_type(d) for d in dtypes]
    shared = [asm.shared_array(t, block) for t in types]
    group, lid = sh.group_id(grid), sh.local_id()
    combine = ScalarLowering(sh, [])

    def slot(k: int, index: int) -> int:
        return fn.op(S.OpAccessChain, asm.t_pointer(S.WORKGROUP, types[k]), shared[k], index)

    def body():
        point = sh.delinearize(group, par)
        accs = [fn.variable(t) for t in types]
        for acc, (op, _), d in zip(accs, folds, dtypes):
            fn.do(S.OpStore, acc, combine.const(K.fold_identity(op, d), d))

        def step(i):
            lower = ScalarLowering(sh, point + sh.delinearize(i, red), unsafe=unsafe)
            values = [lower(f) for _, f in folds]
            for acc, (op, _), d, t, v in zip(accs, folds, dtypes, types, values):
                fn.do(S.OpStore, acc, combine.binary(op, fn.op(S.OpLoad, t, acc), v, d))

        fn.for_range(lid, asm.u32(length), asm.u32(block), step)
        for k, acc in enumerate(accs):
            fn.do(S.OpStore, slot(k, lid), fn.op(S.OpLoad, types[k], acc))
        fn.barrier()
        half = block // 2
        while half:
            def fold_pair(half=half):
                other = fn.op(S.OpIAdd, sh.u32, lid, asm.u32(half))
                for k, ((op, _), d, t) in enumerate(zip(folds, dtypes, types)):
                    a, b = fn.op(S.OpLoad, t, slot(k, lid)), fn.op(S.OpLoad, t, slot(k, other))
                    fn.do(S.OpStore, slot(k, lid), combine.binary(op, a, b, d))
            fn.if_then(fn.op(S.OpULessThan, sh.bool, lid, asm.u32(half)), fold_pair)
            fn.barrier()
            half //= 2

        def finish():
            zeros = point + [asm.u32(0)] * len(red)
            at_init = ScalarLowering(sh, zeros, unsafe=unsafe)
            for k, ((op, _), d, t, r) in enumerate(zip(folds, dtypes, types, kernel.results)):
                total = fn.op(S.OpLoad, t, slot(k, asm.u32(0)))
                fn.do(S.OpStore, accs[k], combine.binary(op, at_init(r.init), total, d))
            store_results(sh, zeros, accs, unsafe)

        fn.if_then(fn.op(170, sh.bool, lid, asm.u32(0)), finish)  # OpIEqual

    fn.if_then(fn.op(S.OpULessThan, sh.bool, group, asm.u32(outputs)), body)
    return Launch(grid, (block, 1, 1), sum(block * K.itemsize(d) for d in dtypes))
