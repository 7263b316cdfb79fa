"""One invocation per point of the parallel loops: elementwise kernels, and reductions that are
short or not a plain fold (argmax-style updates), which loop serially over the reduction dims
(a row kernel: each phase in turn, then the row results); a float sum cascades its innermost
reduction loop, as the final fold of a split sum's few dozen partials does.

Always correct for any kernel, so it is also the fallback of the faster templates.
"""

from __future__ import annotations

from pyree.compiler import kernel as K
from pyree.compiler.codegen.common.cascade import block_sizes, cascade, float_folds
from pyree.compiler.codegen.common.cascade import loop_passes as cascade_passes
from pyree.compiler.codegen.common.exports import Launch
from pyree.compiler.codegen.common.normalize import unsafe_loads
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.codegen.spirv.scalar import ScalarLowering
from pyree.compiler.codegen.spirv.shader import Shader, grid_for
from pyree.compiler.errors import CompileError
from pyree.compiler.sizes import is_static, num_elements, opaque

# Serial float sums cascade (codegen/common/cascade.py) in blocks of LEAF steps, FAN_IN blocks a level.
LEAF = 16
FAN_IN = 16
RUN_TIME_EXTENT = 1 << 31  # a run-time fold's cascade has levels for this many steps


def plan(kernel: K.Kernel, target) -> tuple[int, ...]:
    """The parallel ranges: the last template, it takes every kernel an invocation can run
    within the target's loop limit (lavapipe's); past it a wrong answer would come back, so the
    kernel is refused."""
    steps = loop_passes(kernel)
    if not target.runs(steps):
        raise CompileError(
            f"kernel '{kernel.name}' runs {steps} loop steps in one invocation, more than the "
            f"{target.loop_limit} Vulkan target '{target.triple}' allows (Mesa's lavapipe "
            "silently stops a shader's loops there, which would return a wrong answer); "
            "compile for a GPU's Vulkan target (--iree-vulkan-target=ampere, rdna3, ...) or "
            "for llvm-cpu", kernel.location)
    return kernel.parallel_ranges


def loop_passes(kernel: K.Kernel) -> int:
    """The loop passes (trips and exits) this template's invocation runs over a static
    reduction: each phase's fold (a float sum's innermost loop cascaded), then the row
    results; 0 for a run-time extent, which only the call knows."""
    red = kernel.reduction_ranges
    if not red or not is_static(num_elements(red)):
        return 0

    def nested(inner: int) -> int:  # the outer reduction loops around ``inner`` passes each
        passes, instances = 0, 1
        for extent in red[:-1]:
            passes += instances * (extent + 1)
            instances *= extent
        return passes + instances * inner

    total = 0
    for phase in K.phases(kernel.results):
        cascaded = float_folds(kernel.results, phase) is not None and red[-1] > LEAF
        sizes = block_sizes(red[-1], LEAF, FAN_IN) if cascaded else []
        total += nested(cascade_passes(red[-1], sizes))
    if any(r.row for r in kernel.results):
        total += nested(red[-1] + 1)
    return total


def block_size(target) -> int:
    return min(256, target.max_workgroup_invocations)


def emit(sh: Shader, plan: tuple[int, ...], block: int | None = None) -> Launch:
    """``block``: invocations a workgroup (default block_size's; a run-time one-row fold shares
    its tiled contraction's launch, dynamic.py)."""
    unsafe = frozenset(unsafe_loads(sh.kernel))
    kernel, fn, asm = sh.kernel, sh.fn, sh.asm
    par, red = kernel.parallel_ranges, kernel.reduction_ranges
    total = num_elements(par)
    block = block or block_size(sh.target)
    grid = grid_for(opaque("ceildiv", total, block))
    group = sh.group_id(grid)
    linear = fn.op(S.OpIAdd, sh.u32, fn.op(S.OpIMul, sh.u32, group, asm.u32(block)), sh.local_id())
    in_range = fn.op(S.OpULessThan, sh.bool, linear, sh.size(total))

    def body():
        point = sh.delinearize(linear, par) + [asm.u32(0)] * len(red)
        if not red:
            lower = ScalarLowering(sh, point, unsafe=unsafe)
            values = [lower(r.value) for r in kernel.results]
            for r, v in zip(kernel.results, values):
                sh.store(r.binding, sh.address(r.index[0], point), v)
            return
        variables: dict = {}  # the accumulators of the phase being folded, the finals before it
        for phase in K.phases(kernel.results):
            at_init = ScalarLowering(sh, point, variables, unsafe)
            inits = {k: at_init(kernel.results[k].init) for k in phase}
            for k in phase:
                variables[k] = fn.variable(sh.compute_type(kernel.results[k].value.dtype))
                fn.do(S.OpStore, variables[k], inits[k])
            folds = float_folds(kernel.results, phase)
            if folds is not None and (not is_static(red[-1]) or red[-1] > LEAF):
                _fold_cascaded(sh, point, variables, unsafe, folds)
            else:
                over_reduction(sh, point, kernel.num_parallel,
                               lambda at, phase=phase: _fold(sh, at, variables, unsafe, phase))
            keep_finals(sh, variables, store_results(sh, point, variables, unsafe, phase))
        store_rows(sh, point, variables, unsafe, kernel.num_parallel)

    fn.if_then(in_range, body)
    return Launch(grid, (block, 1, 1))


def over_reduction(sh: Shader, point: list, dim: int, body, end: int | None = None) -> None:
    """``body(point)`` at every point of the reduction dims ``dim``.. (up to ``end``), in order."""
    if dim == (len(sh.kernel.loop_ranges) if end is None else end):
        body(point)
        return

    def step(i):
        over_reduction(sh, point[:dim] + [i] + point[dim + 1:], dim + 1, body, end)

    sh.fn.for_range(sh.asm.u32(0), sh.size(sh.kernel.loop_ranges[dim]), sh.asm.u32(1), step)


def _fold_cascaded(sh: Shader, point: list, variables: dict, unsafe: frozenset, folds: dict) -> None:
    """A phase of float folds with the innermost reduction loop in cascaded blocks
    (codegen/common/cascade.py), into ``variables`` (which hold the inits)."""
    fn, asm, kernel = sh.fn, sh.asm, sh.kernel
    inner = len(kernel.loop_ranges) - 1
    extent = kernel.loop_ranges[inner]
    sizes = block_sizes(extent if is_static(extent) else RUN_TIME_EXTENT, LEAF, FAN_IN)
    types = {k: sh.compute_type(f.dtype) for k, (_, f) in folds.items()}
    levels = [{k: fn.variable(t) for k, t in types.items()} for _ in sizes] + [variables]
    combine = ScalarLowering(sh, [])

    def fresh(j):
        for k, (op, f) in folds.items():
            fn.do(S.OpStore, levels[j][k], combine.const(K.fold_identity(op, f.dtype), f.dtype))

    def combine_into(j):
        for k, (op, f) in folds.items():
            a = fn.op(S.OpLoad, types[k], levels[j + 1][k])
            b = fn.op(S.OpLoad, types[k], levels[j][k])
            fn.do(S.OpStore, levels[j + 1][k], combine.binary(op, a, b, f.dtype))

    def bound(start: int, size: int, stop: int) -> int:
        end = fn.op(S.OpIAdd, sh.u32, start, asm.u32(size))
        return fn.op(S.OpSelect, sh.u32, fn.op(S.OpULessThan, sh.bool, end, stop), end, stop)

    def row(at):
        cascade(lambda start, stop, by, body: fn.for_range(start, stop, asm.u32(by), body), bound,
                asm.u32(0), sh.size(extent), sizes,
                lambda i: _fold(sh, at[:inner] + [i] + at[inner + 1:], {**variables, **levels[0]},
                                unsafe, list(folds)),
                fresh, combine_into)

    over_reduction(sh, point, kernel.num_parallel, row, end=inner)  # the innermost: cascaded


def _fold(sh: Shader, point: list, variables: dict, unsafe: frozenset, phase: list[int]) -> None:
    lower = ScalarLowering(sh, point, variables, unsafe)
    values = [lower(sh.kernel.results[k].value) for k in phase]
    for k, v in zip(phase, values):
        sh.fn.do(S.OpStore, variables[k], v)


def store_results(sh: Shader, point: list, accs, unsafe: frozenset, which=None) -> dict[int, int]:
    """Epilogues (Acc(k) = the finished accumulator ``accs[k]``) of results ``which`` (all)
    stored at each result's index; returns the stored values."""
    values = result_values(sh, point, accs, unsafe, which)
    store_values(sh, point, values)
    return values


def result_values(sh: Shader, point: list, accs, unsafe: frozenset, which=None) -> dict[int, int]:
    results = sh.kernel.results
    lower = ScalarLowering(sh, point, accs, unsafe)
    return {k: lower(results[k].epilogue if results[k].epilogue is not None
                     else K.Acc(k, results[k].value.dtype))
            for k in (range(len(results)) if which is None else which)}


def store_values(sh: Shader, point: list, values: dict[int, int]) -> None:
    for k, v in values.items():
        r = sh.kernel.results[k]
        sh.store(r.binding, sh.address(r.index[0], point), v)


def keep_finals(sh: Shader, variables: dict, values: dict[int, int]) -> None:
    """Each stored value in a Function variable of its own, for Final(k) in what follows."""
    for k, v in values.items():
        r = sh.kernel.results[k]
        variables[k] = sh.fn.variable(sh.compute_type((r.epilogue or r.value).dtype))
        sh.fn.do(S.OpStore, variables[k], v)


def store_rows(sh: Shader, point: list, variables: dict, unsafe: frozenset, dim: int,
               start: int | None = None, step: int | None = None) -> None:
    """The row results at every reduction point (of the flattened reduction dim from ``start``
    by ``step`` when given: the workgroup strides over it)."""
    rows = [r for r in sh.kernel.results if r.row]

    def store(at):
        lower = ScalarLowering(sh, at, variables, unsafe)
        values = [lower(r.value) for r in rows]
        for r, v in zip(rows, values):
            sh.store(r.binding, sh.address(r.index[0], at), v)

    if not rows:
        return
    if start is None:
        over_reduction(sh, point, dim, store)
    else:
        red = sh.kernel.reduction_ranges
        sh.fn.for_range(start, sh.size(num_elements(red)), step,
                        lambda i: store(point[:dim] + sh.delinearize(i, red)))
