"""A function body of several blocks (``cf.br``, ``cf.cond_br``) as the tensor program's If and
While -- IREE's e2e tests and TensorFlow's importers write loops and conditionals this way.

The control-flow graph is structured back, as scf would have written it:

- a block that ends in ``cf.cond_br`` is an If whose two branches run until the block's
  immediate post-dominator (the join); the join's block arguments are the If's results;
- a loop header (the target of a back edge: an edge from a block it dominates) is a While: its
  ops are the ``before`` block, its ``cf.cond_br`` the condition, the successor inside the loop
  the ``after`` block (run until it branches back to the header), the other the exit. Values of
  the header used past the loop leave it as extra results;
- ``cf.br`` to a block that is not a join simply goes on there.

Anything else -- a branch out of a loop other than at its header (``break``), a conditional one
of whose branches returns while the other goes on, a loop header that does not end in
``cf.cond_br`` -- is refused by name. ``cf.assert`` is a Check (input/lowering.py).
"""

from __future__ import annotations

from collections.abc import Callable

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import Entry, FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.kernel import Const, Result, Unary
from pyree.compiler.tensor_program import Block, Generic, If, Value, While
from xdsl.ir import Block as XBlock
from xdsl.ir import Operation, Region

LowerOp = Callable[[FunctionLowering, Operation, str], None]
_EXIT = None  # the virtual block every return leads to


class Returned(list):
    """What a walk that ended in ``func.return`` returns (the returned entries)."""


def lower_cfg(fn: FunctionLowering, region: Region, arguments: list[Entry], lower_op: LowerOp,
              where: str) -> list[Entry]:
    """Lowers ``region``'s blocks into ``fn`` (entered with ``arguments``); what it returns."""
    walker = _Walker(fn, region, lower_op, where)
    returned = walker.walk(region.blocks[0], arguments, _EXIT)
    if not isinstance(returned, Returned):
        raise CompileError("the function's blocks end without a return", where)
    return list(returned)


class _Walker:
    def __init__(self, fn: FunctionLowering, region: Region, lower_op: LowerOp, where: str):
        self.fn, self.lower_op, self.where = fn, lower_op, where
        blocks = list(region.blocks)
        self.succs = {b: self._successors(b) for b in blocks}
        self.blocks = blocks
        dom = _dominators(blocks[0], self.succs)
        back_edges = [(b, s) for b in dom for s in self.succs[b] if s in dom[b]]
        self.headers = {s for _, s in back_edges}
        self.loops = {h: self._natural_loop(h, [b for b, s in back_edges if s is h])
                      for h in self.headers}
        self.ipdom = _immediate_post_dominators(blocks, self.succs)
        self.active: list[XBlock] = []  # the loops being lowered, innermost last

    def _successors(self, block: XBlock) -> list[XBlock]:
        term = block.last_op
        if term is None or term.name == "func.return":
            return []
        if term.name not in ("cf.br", "cf.cond_br"):
            raise CompileError(f"a block ends in '{term.name}': only cf.br, cf.cond_br and "
                               "func.return end a function's blocks", location_of(term))
        return list(term.successors)

    def _natural_loop(self, header: XBlock, latches: list[XBlock]) -> set[XBlock]:
        """The header and every block that reaches a latch without passing the header."""
        body, stack = {header}, list(latches)
        while stack:
            b = stack.pop()
            if b not in body:
                body.add(b)
                stack += [p for p in self.blocks if b in self.succs[p]]
        return body

    def _home(self, op: Operation) -> XBlock:
        """The function block ``op`` is in, or whose op holds the region ``op`` is in."""
        while op.parent_block() not in self.succs:
            op = op.parent_op()
        return op.parent_block()

    # ---- walking ---------------------------------------------------------------------------

    def walk(self, block: XBlock, values: list[Entry], stop: XBlock | None) -> list[Entry]:
        """Lowers from ``block`` until ``stop`` (the entries for its arguments) or a return
        (a Returned)."""
        fn = self.fn
        while True:
            if block is stop:
                return values
            if self.active and block not in self.loops[self.active[-1]]:
                raise CompileError("a branch out of a loop other than at its header (a 'break') "
                                   "is not supported", location_of(block.last_op))
            if block in self.active:
                raise CompileError("a branch back to a loop's header that does not end the "
                                   "iteration is not supported", location_of(block.first_op))
            if block in self.headers:
                block, values = self._loop(block, values)
                continue
            for arg, value in zip(block.args, values, strict=True):
                fn.env[arg] = value
            for op in list(block.ops)[:-1]:
                self.lower_op(fn, op, location_of(op))
            term = block.last_op
            where = location_of(term)
            if term.name == "func.return":
                return Returned(fn.entry(v, where) for v in term.operands)
            if term.name == "cf.br":
                block, values = term.successor, [fn.entry(v, where) for v in term.arguments]
                continue
            block, values = self._if(term, stop, where)
            if isinstance(values, Returned):
                return values

    def _if(self, term: Operation, stop: XBlock | None, where: str):
        """``cf.cond_br`` as an If up to its join; the join and the If's results."""
        fn = self.fn
        join = self.ipdom[term.parent_block()]
        if self.active and join not in self.loops[self.active[-1]]:
            raise CompileError("a branch out of a loop other than at its header (a 'break') "
                               "is not supported", where)
        branches = [(term.then_block, term.then_arguments), (term.else_block, term.else_arguments)]
        known = fn.entry(term.cond, where)
        if isinstance(known, Const):  # a condition known at compile time: no branch
            target, args = branches[0] if known.value else branches[1]
            return target, [fn.entry(v, where) for v in args]
        blocks, ended = [], []
        for target, args in branches:
            with fn.block() as ops:
                out = self.walk(target, [fn.entry(v, where) for v in args], join)
                results = [fn.value_of(v, where) for v in out]
            blocks.append(Block([], ops, results))
            ended.append(isinstance(out, Returned))
        if ended[0] != ended[1]:
            raise CompileError("a cf.cond_br one of whose branches returns while the other goes "
                               "on (an early return) is not supported", where)
        values = [fn.new_value(v.dtype, v.shape, "if") for v in blocks[0].results]
        fn.emit(If(fn.tensor(term.cond, where), *blocks, values, where))
        return (join, Returned(values)) if ended[0] else (join, list(values))

    def _loop(self, header: XBlock, values: list[Entry]) -> tuple[XBlock, list[Entry]]:
        """The loop at ``header`` as a While; the exit block and its arguments' values."""
        fn, term = self.fn, header.last_op
        where = location_of(term)
        body = self.loops[header]
        if term.name != "cf.cond_br":
            raise CompileError("a loop whose header block does not end in cf.cond_br is not "
                               "supported", where)
        stay = term.then_block in body
        if stay == (term.else_block in body):
            raise CompileError("a loop header's cf.cond_br must leave the loop on exactly one "
                               "branch", where)
        (inner, inner_args), (out, out_args) = (
            ((term.then_block, term.then_arguments), (term.else_block, term.else_arguments))
            if stay else ((term.else_block, term.else_arguments),
                          (term.then_block, term.then_arguments)))
        escaping = [v for v in (*header.args, *(r for op in header.ops for r in op.results))
                    if any(self._home(use.operation) not in body for use in v.uses)]
        inits = [fn.value_of(v, where) for v in values]
        self.active.append(header)
        before_args = [fn.new_value(v.dtype, v.shape, a.name_hint)
                       for v, a in zip(inits, header.args)]
        with fn.block() as before_ops:
            for arg, value in zip(header.args, before_args):
                fn.env[arg] = value
            for op in list(header.ops)[:-1]:
                self.lower_op(fn, op, location_of(op))
            condition = fn.tensor(term.cond, where)
            if not stay:
                condition = _negate(fn, condition, where)
            forwarded = [fn.tensor(v, where) for v in (*inner_args, *out_args, *escaping)]
        before = Block(before_args, before_ops, [condition, *forwarded])
        after_args = [fn.new_value(v.dtype, v.shape, v.name) for v in forwarded]
        with fn.block() as after_ops:
            back = self.walk(inner, list(after_args[:len(inner_args)]), header)
            if isinstance(back, Returned):
                raise CompileError("a return inside a loop is not supported", where)
            after = Block(after_args, after_ops, [fn.value_of(v, where) for v in back])
        self.active.pop()
        results = [fn.new_value(v.dtype, v.shape, v.name) for v in forwarded]
        fn.emit(While(inits, before, after, results, where))
        n_in, n_out = len(inner_args), len(out_args)
        for ssa, value in zip(escaping, results[n_in + n_out:]):
            fn.env[ssa] = value
        return out, list(results[n_in:n_in + n_out])


def _negate(fn: FunctionLowering, condition: Value, where: str) -> Value:
    inputs = Inputs()
    value = fn.new_value("i1", (), "not")
    expr = Unary("not", inputs.load(condition, ()), "i1")
    fn.emit(Generic(inputs.values, [value], (Result(0, (), expr),), (), 0, where, "cf.cond_br"))
    return value


def _dominators(entry: XBlock, succs) -> dict[XBlock, set[XBlock]]:
    """Each reachable block's dominators."""
    reachable = _reachable(entry, succs)
    preds = {b: [p for p in reachable if b in succs[p]] for b in reachable}
    dom = {b: set(reachable) for b in reachable}
    dom[entry] = {entry}
    changed = True
    while changed:
        changed = False
        for b in reachable:
            if b is entry:
                continue
            new = {b} | set.intersection(*(dom[p] for p in preds[b])) if preds[b] else {b}
            if new != dom[b]:
                dom[b], changed = new, True
    return dom


def _immediate_post_dominators(blocks: list[XBlock], succs) -> dict[XBlock, XBlock | None]:
    """Each block's immediate post-dominator; None where that is the function's exit."""
    nodes = [*blocks, _EXIT]
    pdom = {b: set(nodes) for b in blocks}
    pdom[_EXIT] = {_EXIT}
    changed = True
    while changed:
        changed = False
        for b in blocks:
            nexts = succs[b] or [_EXIT]
            new = {b} | set.intersection(*(pdom[s] for s in nexts))
            if new != pdom[b]:
                pdom[b], changed = new, True
    ipdom = {}
    for b in blocks:
        strict = pdom[b] - {b}
        ipdom[b] = next((d for d in strict if pdom[d] == strict), _EXIT)
    return ipdom


def _reachable(entry: XBlock, succs) -> list[XBlock]:
    seen, stack = [], [entry]
    while stack:
        b = stack.pop()
        if b not in seen:
            seen.append(b)
            stack += succs[b]
    return seen

