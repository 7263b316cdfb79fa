"""Parameter expressions computed once at load, not on every call (IREE's const-eval hoisting
into ``__init``).

A dispatch region that reads nothing but constants, at least one of them a parameter, has the
same result on every call: the flow makes such regions where a weight's layout changes for its
consumer (a convolution's filter moved channels-last for an implicit GEMM, ``flow/convolution``)
or its type narrows. Its value cannot be folded at compile time (the weights are in a parameter
file, unknown here), so it moves to the module's initializer, which the runtime runs once when
it loads the module and which writes each value the functions read into a ``computed``
constant, a buffer of the loaded module's own. The functions then read that constant.

Only regions whose results take no more bytes than the constants they read move: a broadcast
of a bias would turn a small weight into a large resident one. A region inside control flow, with
run-time sizes, or storing at computed places (a scatter) stays. A region reading only inline
constants stays too: constant folding has declined it, and moving it would change modules that
have no parameters.
"""

from __future__ import annotations

import dataclasses

from pyree.compiler.tensor_program import (
    Constant,
    Function,
    Generic,
    GlobalStore,
    Op,
    Program,
    Value,
    View,
    defined_by,
    has_run_time_sizes,
    is_line_walk,
    is_scatter,
    read_by,
    walk_ops,
)

INITIALIZER = "__init"


def hoist_parameter_expressions(program: Program) -> Program:
    """``program`` with its parameter-only regions moved to ``program.initializer``."""
    init_ops: list[Op] = []
    stores: list[Op] = []
    functions = []
    count = 0
    for function in program.functions:
        function, ops, computed = _hoist(function, count)
        functions.append(function)
        init_ops += ops
        count += len(computed)
        for value, constant in computed:
            target = Value(value.dtype, value.shape, constant.name)
            stores += [Constant(target, location=constant.location, name=constant.name,
                                computed=True),
                       GlobalStore(value, target, constant.location)]
    if not stores:
        return program
    initializer = Function(INITIALIZER, [], init_ops + stores, [], program.functions[0].location)
    return dataclasses.replace(program, functions=functions, initializer=initializer)


def _hoist(function: Function, first: int) -> tuple[Function, list[Op], list[tuple[Value, Constant]]]:
    """(the function reading computed constants, the ops that move, each computed value with
    the Constant that now defines it in the function)."""
    constant_bytes: dict[Value, int] = {}   # value -> bytes of the constants it derives from
    from_parameter: set[Value] = set()
    moved: list[Op] = []
    for op in function.ops:
        if isinstance(op, Constant) and not op.mutable and not op.computed:
            constant_bytes[op.result] = 0 if op.splat is not None else op.result.num_bytes
            if op.parameter is not None:
                from_parameter.add(op.result)
        elif isinstance(op, View) and op.source in constant_bytes:
            constant_bytes[op.result] = constant_bytes[op.source]
            if op.source in from_parameter:
                from_parameter.add(op.result)
        elif _movable(op, constant_bytes, from_parameter):
            moved.append(op)
            read = sum(constant_bytes[v] for v in dict.fromkeys(op.inputs))
            for v in op.results:
                constant_bytes[v] = read
                from_parameter.add(v)
    if not moved:
        return function, [], []
    moved_set = set(moved)
    kept = [op for op in function.ops if op not in moved_set]
    needed = _reads(kept) | set(function.results)
    produced = {v for op in moved for v in op.results}
    computed: list[tuple[Value, Constant]] = []
    replacement: dict[Op, list[Op]] = {}
    for op in moved:
        defs = []
        for v in op.results:
            if v in needed:
                constant = Constant(v, location=op.location,
                                    name=f"computed_{first + len(computed)}", computed=True)
                computed.append((v, constant))
                defs.append(constant)
        replacement[op] = defs
    ops = [new for op in function.ops for new in replacement.get(op, [op])]
    # what the initializer needs: the moved regions and the constants and views they read
    init_reads = _closure(function.ops, _reads(moved) - produced)
    init_ops = [op for op in function.ops
                if op in moved_set or (isinstance(op, (Constant, View)) and op.result in init_reads)]
    return dataclasses.replace(function, ops=_live(ops, function.results)), init_ops, computed


def _movable(op: Op, constant_bytes: dict[Value, int], from_parameter: set[Value]) -> bool:
    if not isinstance(op, Generic) or is_scatter(op) or is_line_walk(op) or has_run_time_sizes(op) \
            or not op.inputs:
        return False
    if not all(v in constant_bytes for v in op.inputs):
        return False
    if not any(v in from_parameter for v in op.inputs):
        return False
    read = sum(constant_bytes[v] for v in dict.fromkeys(op.inputs))
    return sum(v.num_bytes for v in op.results) <= read


def _reads(ops: list[Op]) -> set[Value]:
    return {v for op in walk_ops(ops) for v in read_by(op)}


def _closure(ops: list[Op], values: set[Value]) -> set[Value]:
    """``values`` and the values of the views and constants they are views of."""
    out = set(values)
    for op in reversed(ops):
        if isinstance(op, View) and op.result in out:
            out.add(op.source)
    return out


def _live(ops: list[Op], results: list[Value]) -> list[Op]:
    """``ops`` without the constants and views nothing reads any more (those only the moved
    regions read): the module keeps a parameter the functions no longer read for the
    initializer alone."""
    needed = set(results)
    out: list[Op] = []
    for op in reversed(ops):
        removable = isinstance(op, View) or (isinstance(op, Constant) and not op.mutable)
        if removable and not any(v in needed for v in defined_by(op)):
            continue
        out.append(op)
        needed.update(v for inner in walk_ops([op]) for v in read_by(inner))
    return out[::-1]
