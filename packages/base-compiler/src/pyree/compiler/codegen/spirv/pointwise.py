"""One invocation per point of the parallel loops: elementwise kernels, and reductions that are
short or not a plain fold (argmax-style updates), which loop serially over the reduction dims.

Always correct for any kernel, so it is also the fallback of the faster templates.
"""

from __future__ import annotations

import math

from pyree.compiler import kernel as K
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.scalar import ScalarLowering
from pyree.compiler.codegen.spirv.shader import Launch, Shader, grid_for


def emit(sh: Shader, unsafe: frozenset) -> Launch:
    kernel, fn, asm = sh.kernel, sh.fn, sh.asm
    par, red = kernel.parallel_ranges, kernel.reduction_ranges
    total = math.prod(par)
    block = min(256, sh.target.max_workgroup_invocations)
    grid = grid_for(-(-total // block))
    group = sh.group_id(grid)
    linear = fn.op(S.OpIAdd, sh.u32, fn.op(S.OpIMul, sh.u32, group, asm.u32(block)), sh.local_id())
    in_range = fn.op(S.OpULessThan, sh.bool, linear, asm.u32(total))

    def body():
        point = sh.delinearize(linear, par) + [asm.u32(0)] * len(red)
        if not red:
            lower = ScalarLowering(sh, point, unsafe=unsafe)
            values = [lower(r.value) for r in kernel.results]
            for r, v in zip(kernel.results, values):
                sh.store(r.binding, sh.address(r.index[0], point), v)
            return
        accs = [fn.variable(sh.compute_type(r.value.dtype)) for r in kernel.results]
        at_init = ScalarLowering(sh, point, unsafe=unsafe)
        for r, acc in zip(kernel.results, accs):
            fn.do(S.OpStore, acc, at_init(r.init))
        reduce_serially(sh, point, accs, unsafe, kernel.num_parallel)
        store_results(sh, point, accs, unsafe)

    fn.if_then(in_range, body)
    return Launch(grid, (block, 1, 1))


def reduce_serially(sh: Shader, point: list, accs: list, unsafe: frozenset, dim: int) -> None:
    """Nested loops over reduction dims ``dim``.. updating every accumulator at each step."""
    kernel, fn, asm = sh.kernel, sh.fn, sh.asm
    if dim == len(kernel.loop_ranges):
        lower = ScalarLowering(sh, point, accs, unsafe)
        values = [lower(r.value) for r in kernel.results]
        for acc, v in zip(accs, values):
            fn.do(S.OpStore, acc, v)
        return

    def step(i):
        reduce_serially(sh, point[:dim] + [i] + point[dim + 1:], accs, unsafe, dim + 1)

    fn.for_range(asm.u32(0), asm.u32(kernel.loop_ranges[dim]), asm.u32(1), step)


def store_results(sh: Shader, point: list, accs: list, unsafe: frozenset) -> None:
    """Epilogues (Acc(k) = the finished accumulator) stored at each result's index."""
    lower = ScalarLowering(sh, point, accs, unsafe)
    values = [lower(r.epilogue if r.epilogue is not None else K.Acc(k, r.value.dtype))
              for k, r in enumerate(sh.kernel.results)]
    for r, v in zip(sh.kernel.results, values):
        sh.store(r.binding, sh.address(r.index[0], point), v)
