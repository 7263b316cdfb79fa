"""Versions of one computation chosen per call by its run-time sizes.

A kernel with a run-time extent is compiled once for every size, but the best plan for it may
differ by size: a product of 7 rows wants its K split over many blocks, one of 2,000 rows wants
it whole (flow/split_reduction.py). Where a pass knows the plan for each band of sizes, it
writes the bands as a chain of ``If`` ops whose conditions are 0/1 ``Size`` comparisons: the
host program decides them from the call's sizes before anything runs, and the runtime keeps
only the chosen version's commands (module/instance.py), so a call pays for no branch, no wait
and no copy: every version writes the original result values themselves (host/linearize.py).
The passes after the one that made them run inside each version too (``in_versions``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pyree.compiler.sizes import Size
from pyree.compiler.tensor_program import Block, Function, If, Op, Value, free_values

Version = list[Op]  # ops that write the results


def by_size(results: list[Value], versions: list[tuple[Size, Version]], rest: Version,
            location: str = "") -> If:
    """``versions[0]`` where its condition holds, else ``versions[1]`` where its does, ...,
    else ``rest``; each version's ops write ``results``."""
    (condition, ops), later = versions[0], versions[1:]
    otherwise = [by_size(results, later, rest, location)] if later else rest
    return If(condition, Block([], ops, list(results)), Block([], otherwise, list(results)),
              list(results), location)


def is_by_size(op: Op) -> bool:
    return isinstance(op, If) and not isinstance(op.condition, Value)


def in_versions(function: Function, run: Callable[[Function], Function]) -> Function:
    """``run`` applied inside every version of ``function``'s size-chosen ops (not to the
    function itself), each version as a function of the values it reads."""
    if not any(is_by_size(op) for op in function.ops):
        return function
    return dataclasses.replace(function, ops=[_in_versions(op, function.name, run)
                                              for op in function.ops])


def _in_versions(op: Op, name: str, run) -> Op:
    if not is_by_size(op):
        return op
    blocks = {}
    for field in ("then", "otherwise"):
        block = getattr(op, field)
        inner = Function(f"{name}_{field}", free_values(block), block.ops, block.results)
        done = run(in_versions(inner, run))
        blocks[field] = Block([], done.ops, done.results)
    return dataclasses.replace(op, **blocks)
