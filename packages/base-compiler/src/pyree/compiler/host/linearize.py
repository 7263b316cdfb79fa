"""Structured control flow -> one straight list of steps with labels and branches.

The module's host program is a flat command list; ``If`` and ``While`` become branches around
and back over their blocks' steps, and the values that cross a block boundary move by ``Copy``:
- ``If``: each branch copies what it yields into the If's results.
- ``While``: the inits are copied into the carried values (the ``before`` block's arguments)
  once; the ``after`` block's arguments and the While's results are ``View``s of what ``before``
  forwards, so forwarding costs nothing; at the end of each iteration what ``after`` yields is
  copied into the carried values, as a parallel copy: a yielded value that lives in another
  carried value's bytes (a swap) goes through a staging copy first. A straight-line ``before``
  is rotated to the end of the iteration (``_add_while``).
Buffer planning (``host/planning.py``) then sees one program order, and a loop is the span
between a label and the branch back to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from pyree.compiler.sizes import Size
from pyree.compiler.tensor_program import (
    Check,
    Constant,
    Function,
    Generic,
    GlobalStore,
    If,
    Op,
    Value,
    View,
    While,
    blocks_of,
)


@dataclass(eq=False)
class Copy:
    source: Value
    target: Value


@dataclass(eq=False)
class Label:
    """A place a branch goes to. ``by_size``: one of a size-chosen If's (``Branch.by_size``)."""

    by_size: bool = False


@dataclass(eq=False)
class Branch:
    """Go to ``target`` when ``condition`` (None: always) is non-zero, or zero with ``if_zero``.
    ``by_size``: a size-chosen If's branch or jump, which the runtime resolves per call and
    removes, so that no wait separates the commands around it (host/program.py puts a barrier
    there instead); its ``condition`` is then a 0/1 ``Size``, or None for the jump."""

    condition: Value | Size | None
    if_zero: bool
    target: Label
    by_size: bool = False


Step = Union[Generic, Constant, View, Check, Copy, Label, Branch]


def linearize(function: Function) -> list[Step]:
    steps: list[Step] = []
    _add(function.ops, steps)
    return steps


def _add(ops: list[Op], steps: list[Step]) -> None:
    for op in ops:
        if isinstance(op, If):
            _add_if(op, steps)
        elif isinstance(op, While):
            _add_while(op, steps)
        elif isinstance(op, GlobalStore):  # into the global's module constant
            steps.append(Copy(op.source, op.target))
        else:
            steps.append(op)


def _add_if(op: If, steps: list[Step]) -> None:
    """A block that yields the If's own result value (a size-chosen If's) needs no copy."""
    by_size = not isinstance(op.condition, Value)
    otherwise, end = Label(by_size), Label(by_size)
    steps.append(Branch(op.condition, True, otherwise, by_size))
    _add(op.then.ops, steps)
    steps.extend(Copy(s, t) for s, t in zip(op.then.results, op.results) if s is not t)
    steps += [Branch(None, False, end, by_size), otherwise]
    _add(op.otherwise.ops, steps)
    steps.extend(Copy(s, t) for s, t in zip(op.otherwise.results, op.results) if s is not t)
    steps.append(end)


def _add_while(op: While, steps: list[Step]) -> None:
    """Rotated when ``before`` is straight-line code: it runs once ahead of the loop and again
    at the end of each iteration, so an iteration is one run of commands and one branch back
    (one submit and one wait) instead of two runs and two branches."""
    top, done = Label(), Label()
    carried = op.before.arguments
    condition, *forwarded = op.before.results
    rotated = not any(blocks_of(o) for o in op.before.ops)
    steps.extend(Copy(s, t) for s, t in zip(op.inits, carried))
    if rotated:
        _add(op.before.ops, steps)
        steps += [Branch(condition, True, done), top]
    else:
        steps.append(top)
        _add(op.before.ops, steps)
        steps.append(Branch(condition, True, done))
    steps.extend(View(a, f) for a, f in zip(op.after.arguments, forwarded))
    _add(op.after.ops, steps)
    _add_parallel_copy(op.after.results, carried, steps)
    if rotated:
        _add(op.before.ops, steps)
        steps += [Branch(condition, False, top), done]
    else:
        steps += [Branch(None, False, top), done]
    steps.extend(View(r, f) for r, f in zip(op.results, forwarded))


def _add_parallel_copy(sources: list[Value], targets: list[Value], steps: list[Step]) -> None:
    roots = _view_roots(steps)
    copies = []
    for source, target in zip(sources, targets):
        root, offset = roots.get(source, (source, 0))
        if root is target and offset == 0:
            continue  # already in place
        if root in targets:
            staged = Value(source.dtype, source.shape, f"{source.name}_staged")
            steps.append(Copy(source, staged))
            source = staged
        copies.append(Copy(source, target))
    steps.extend(copies)


def _view_roots(steps: list[Step]) -> dict[Value, tuple[Value, int]]:
    """For each view so far: the value whose bytes it names, and its byte offset there."""
    roots: dict[Value, tuple[Value, int]] = {}
    for step in steps:
        if isinstance(step, View):
            root, offset = roots.get(step.source, (step.source, 0))
            roots[step.result] = (root, offset + step.byte_offset)
    return roots
