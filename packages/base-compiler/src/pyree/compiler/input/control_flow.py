"""scf.if / for / while / index_switch / execute_region and stablehlo.if / case / while -> the
tensor program's ``If`` and ``While``.

Each region becomes a ``Block`` lowered by the same rules as a function body (``lower_op``);
values crossing into a block are rank-0 or full tensors like any other. ``scf.for`` is a
``While`` whose first carried value is the induction variable: ``before`` tests ``iv < ub``
(signed, as scf.for does), ``after`` runs the body and yields ``iv + step``. stablehlo.while's
``cond`` region yields only the condition, so its block forwards the carried values unchanged;
stablehlo.case and scf.index_switch are chains of Ifs on ``index == label``, the last branch
the default (for stablehlo.case: an index out of range, as the spec says). A condition or
index known at compile time lowers only the region it selects, with no branch at all.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import Binary, Compare, Const, Expr, Result
from pyree.compiler.tensor_program import Block, Generic, If, Value, While
from xdsl.ir import Block as XBlock
from xdsl.ir import Operation, Region, SSAValue

if TYPE_CHECKING:  # (xDSL's scf is imported only for a text that uses it: parser.py)
    from xdsl.dialects import scf

LowerOp = Callable[[FunctionLowering, Operation, str], None]
TERMINATORS = ("scf.yield", "scf.condition", "stablehlo.return", "flow.return")


def lower_block(fn: FunctionLowering, block: XBlock, arguments: list[Value], lower_op: LowerOp,
                where: str) -> Block:
    """``block`` as a Block whose arguments are ``arguments``, yielding its terminator's operands."""
    with fn.block() as ops:
        for arg, value in zip(block.args, arguments, strict=True):
            fn.env[arg] = value
        yielded = lower_ops(fn, block, lower_op, where)
        results = [fn.tensor(v, where) for v in yielded]
    return Block(arguments, ops, results)


def lower_ops(fn: FunctionLowering, block: XBlock, lower_op: LowerOp, where: str) -> list[SSAValue]:
    """Lowers ``block``'s ops into the current op list; what its terminator yields."""
    for inner in block.ops:
        if inner.name in TERMINATORS:
            return list(inner.operands)
        lower_op(fn, inner, location_of(inner))
    raise CompileError("a region has no terminator", where)


def block_arguments(fn: FunctionLowering, block: XBlock, where: str) -> list[Value]:
    """Fresh values for ``block``'s arguments."""
    return [fn.new_value(*tensor_type_of(a.type, where), a.name_hint) for a in block.args]


def known_condition(fn: FunctionLowering, condition: SSAValue, where: str) -> bool | None:
    entry = fn.entry(condition, where)
    return bool(entry.value) if isinstance(entry, Const) else None


def emit_if(fn: FunctionLowering, condition: SSAValue, regions: tuple[Region, Region],
            results: list[SSAValue], lower_op: LowerOp, where: str) -> None:
    """An if/else over two argument-less regions (an empty region yields nothing)."""
    known = known_condition(fn, condition, where)
    if known is not None:
        region = regions[0] if known else regions[1]
        yielded = lower_ops(fn, region.block, lower_op, where) if region.blocks else []
        for result, value in zip(results, yielded):
            fn.env[result] = fn.entry(value, where)
        return
    blocks = [lower_block(fn, r.block, [], lower_op, where) if r.blocks else Block([], [], [])
              for r in regions]
    values = [fn.result_value(r, where) for r in results]
    fn.emit(If(fn.tensor(condition, where), *blocks, values, where))


def emit_while(fn: FunctionLowering, inits: list[SSAValue], before: XBlock, after: XBlock,
               results: list[SSAValue], lower_op: LowerOp, where: str) -> None:
    init_values = [fn.tensor(v, where) for v in inits]
    before_block = lower_block(fn, before, block_arguments(fn, before, where), lower_op, where)
    after_block = lower_block(fn, after, block_arguments(fn, after, where), lower_op, where)
    values = [fn.result_value(r, where) for r in results]
    fn.emit(While(init_values, before_block, after_block, values, where))


def lower_if(fn: FunctionLowering, op: scf.IfOp, lower_op: LowerOp) -> None:
    where = location_of(op)
    emit_if(fn, op.cond, (op.true_region, op.false_region), list(op.output), lower_op, where)


def lower_while(fn: FunctionLowering, op: scf.WhileOp, lower_op: LowerOp) -> None:
    where = location_of(op)
    emit_while(fn, list(op.arguments), op.before_region.block, op.after_region.block,
               list(op.res), lower_op, where)


def lower_for(fn: FunctionLowering, op: scf.ForOp, lower_op: LowerOp) -> None:
    where = location_of(op)
    step = fn.entry(op.step, where)
    if isinstance(step, Const) and step.value <= 0:
        raise CompileError("scf.for needs a positive step (this one would never end)", where)
    body = op.body.block
    iv_type = tensor_type_of(body.args[0].type, where)
    carried = [fn.tensor(op.lb, where), *(fn.tensor(v, where) for v in op.iter_args)]

    before_args = [fn.new_value(*iv_type, "iv"), *(fn.new_value(v.dtype, v.shape, v.name)
                                                   for v in carried[1:])]
    with fn.block() as before_ops:
        more = _scalar_generic(fn, lambda inputs: Compare(
            "lt", inputs.load(before_args[0], ()), fn.scalar(op.ub, inputs, where)),
            "i1", "more", where, op.name)
    before = Block(before_args, before_ops, [more, *before_args])

    after_args = [fn.new_value(v.dtype, v.shape, v.name) for v in before_args]
    with fn.block() as after_ops:
        for arg, value in zip(body.args, after_args, strict=True):
            fn.env[arg] = value
        yielded = [fn.tensor(v, where) for v in lower_ops(fn, body, lower_op, where)]
        step = _scalar_generic(fn, lambda inputs: Binary(
            "add", inputs.load(after_args[0], ()), fn.scalar(op.step, inputs, where),
            iv_type[0]), iv_type[0], "iv_next", where, op.name)
    after = Block(after_args, after_ops, [step, *yielded])

    values = [fn.new_value(*iv_type, "iv_end"), *(fn.result_value(r, where) for r in op.res)]
    fn.emit(While(carried, before, after, values, where))


def lower_stablehlo_if(fn: FunctionLowering, op: Operation, lower_op: LowerOp) -> None:
    where = location_of(op)
    emit_if(fn, op.operands[0], (op.regions[0], op.regions[1]), list(op.results), lower_op, where)


def lower_stablehlo_while(fn: FunctionLowering, op: Operation, lower_op: LowerOp) -> None:
    where = location_of(op)
    cond, body = (r.block for r in op.regions)
    arguments = block_arguments(fn, cond, where)
    before = lower_block(fn, cond, arguments, lower_op, where)
    before.results += arguments
    after = lower_block(fn, body, block_arguments(fn, body, where), lower_op, where)
    inits = [fn.tensor(v, where) for v in op.operands]
    values = [fn.result_value(r, where) for r in op.results]
    fn.emit(While(inits, before, after, values, where))


def lower_stablehlo_case(fn: FunctionLowering, op: Operation, lower_op: LowerOp) -> None:
    """Branch k for index k; the last branch also for any index out of range (the spec)."""
    branches = list(op.regions)
    _switch(fn, op, op.operands[0], list(range(len(branches) - 1)), branches, lower_op)


def lower_index_switch(fn: FunctionLowering, op: scf.IndexSwitchOp, lower_op: LowerOp) -> None:
    _switch(fn, op, op.arg, list(op.cases.get_values()), [*op.case_regions, op.default_region],
            lower_op)


def lower_execute_region(fn: FunctionLowering, op: scf.ExecuteRegionOp, lower_op: LowerOp) -> None:
    where = location_of(op)
    if len(op.region.blocks) != 1:
        raise CompileError("scf.execute_region with more than one block is not supported", where)
    for result, value in zip(op.results, lower_ops(fn, op.region.block, lower_op, where)):
        fn.env[result] = fn.entry(value, where)


def _switch(fn: FunctionLowering, op: Operation, index: SSAValue, labels: list[int],
            branches: list[Region], lower_op: LowerOp) -> None:
    """The branch whose label the index equals, else the last (the default)."""
    where = location_of(op)
    entry = fn.entry(index, where)
    if isinstance(entry, Const):
        k = labels.index(entry.value) if entry.value in labels else len(labels)
        values = [fn.entry(v, where) for v in lower_ops(fn, branches[k].block, lower_op, where)]
    else:
        types = [tensor_type_of(r.type, where) for r in op.results]
        values = _switch_from(fn, index, labels, branches, 0, types, lower_op, where)
    for result, value in zip(op.results, values):
        fn.env[result] = value


def _switch_from(fn: FunctionLowering, index: SSAValue, labels: list[int], branches: list[Region],
                 k: int, types: list, lower_op: LowerOp, where: str) -> list[Value]:
    """What branches ``k``... yield, chosen by ``index`` (emitted into the current op list)."""
    if k == len(labels):
        return [fn.tensor(v, where) for v in lower_ops(fn, branches[k].block, lower_op, where)]
    is_k = _scalar_generic(fn, lambda inputs: Compare(
        "eq", fn.scalar(index, inputs, where), Const(labels[k], fn.entry(index, where).dtype)),
        "i1", f"is_{labels[k]}", where, "switch")
    then = lower_block(fn, branches[k].block, [], lower_op, where)
    with fn.block() as ops:
        rest = _switch_from(fn, index, labels, branches, k + 1, types, lower_op, where)
    results = [fn.new_value(dtype, shape, f"case_{labels[k]}") for dtype, shape in types]
    fn.emit(If(is_k, then, Block([], ops, rest), results, where))
    return results


def _scalar_generic(fn: FunctionLowering, build: Callable[[Inputs], Expr], dtype: str,
                    name: str, where: str, origin: str) -> Value:
    inputs = Inputs()
    expr = build(inputs)
    value = fn.new_value(dtype, (), name)
    fn.emit(Generic(inputs.values, [value], (Result(0, (), expr),), (), 0, where, origin))
    return value
