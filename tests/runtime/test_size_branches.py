"""Branches decided by a call's sizes (schema 1.8, module/instance.py): at one size the runtime
keeps the way taken as one straight run of commands, drops the way not taken and the jumps
that then land on the next command, and retargets the branches that stay (a loop on values)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from pyree.runtime.module.instance import _decide, instantiate

DISPATCH, BARRIER, BRANCH = 0, 3, 5


def dispatch(kernel: int):
    return SimpleNamespace(kind=DISPATCH, branch=None, dispatch=SimpleNamespace(
        kernel=kernel, bindings=[], pushConstants=[], pushConstantExprs=None))


def branch(target: int, size=None, condition=None, if_zero=False):
    return SimpleNamespace(kind=BRANCH, dispatch=None, branch=SimpleNamespace(
        target=target, conditionSize=size, condition=condition, ifZero=if_zero))


def shape(commands) -> list:
    """Each command as ("d", kernel) or ("b", target, has a value condition)."""
    return [("d", c.dispatch.kernel) if c.kind == DISPATCH else
            ("b", c.branch.target, c.branch.condition is not None) for c in commands]


# if (size) { A } else { B }; C -- as host/linearize.py writes it: a branch to `otherwise`
# where the condition is zero, the then-block, a jump to the end (a size branch that always
# holds), the otherwise-block.
IF_ELSE = [branch(3, size="c", if_zero=True), dispatch(1), branch(4, size="1"), dispatch(2),
           dispatch(3)]


@pytest.mark.parametrize("held, kept", [(True, [1, 3]), (False, [2, 3])])
def test_the_way_taken_is_one_straight_run(held, kept):
    # decided: the branch is taken where the condition is zero (if_zero)
    out = _decide(IF_ELSE, {0: not held, 2: True})
    assert shape(out) == [("d", k) for k in kept]


def test_a_chain_of_versions_keeps_one():
    """if (c0) {A} else { if (c1) {B} else {C} }; D"""
    commands = [branch(3, size="c0", if_zero=True), dispatch(1), branch(7, size="1"),
                branch(6, size="c1", if_zero=True), dispatch(2), branch(7, size="1"), dispatch(3),
                dispatch(4)]
    jumps = {2: True, 5: True}
    assert shape(_decide(commands, {0: False, 3: True, **jumps})) == [("d", 1), ("d", 4)]
    assert shape(_decide(commands, {0: True, 3: False, **jumps})) == [("d", 2), ("d", 4)]
    assert shape(_decide(commands, {0: True, 3: True, **jumps})) == [("d", 3), ("d", 4)]


def test_a_loop_on_values_after_the_versions_is_retargeted():
    """The loop's branch back lands on its first command at its new index; a value branch
    forward past the end lands on the end."""
    commands = [*IF_ELSE, dispatch(4), branch(5, condition="v"), branch(8, condition="w"),
                dispatch(5)]
    out = _decide(commands, {0: True, 2: True})
    assert shape(out) == [("d", 2), ("d", 3), ("d", 4), ("b", 2, True), ("b", 5, True), ("d", 5)]


def test_the_host_programs_own_jumps_stay():
    """A value's If with an empty else after a size-chosen If: its jump to the end lands on
    the next command but stays (the landing starts a command buffer the compiler counted on);
    a taken size branch whose landing is not the next command left stays as a plain jump."""
    commands = [*IF_ELSE, branch(8, condition="v", if_zero=True), dispatch(4), branch(8),
                dispatch(5)]
    out = _decide(commands, {0: False, 2: True})
    assert shape(out) == [("d", 1), ("d", 3), ("b", 5, True), ("d", 4), ("b", 5, False),
                          ("d", 5)]
    skip = [branch(2, size="1"), dispatch(1), dispatch(2)]  # a size branch over a command
    out = _decide(skip, {0: True})
    assert shape(out) == [("d", 2)]
    back = [dispatch(1), branch(0, size="1")]  # taken, landing elsewhere: a plain jump
    (_, jump) = _decide(back, {1: True})
    assert jump.branch.target == 0 and jump.branch.conditionSize is None


def test_instantiate_decides_each_size_branch_by_its_condition():
    """``instantiate`` evaluates the condition with the call's sizes (here: a stub that reads
    the code's first entry) and keeps one way."""
    function = SimpleNamespace(
        sizeChecks=None, arguments=[], results=[], resultSizeExprs=None, transientSizeExpr=None,
        symbols=[SimpleNamespace(name="n")],
        commands=[branch(3, size=SimpleNamespace(code=[7]), if_zero=True), dispatch(1),
                  branch(4, size=SimpleNamespace(code=[0, 1])), dispatch(2), dispatch(3)])
    for value, kept in ((1, [1, 3]), (0, [2, 3])):
        out = instantiate(function, lambda label, code, limit=0, value=value:
                          1 if code == [0, 1] else value, "f")
        assert shape(out.commands) == [("d", k) for k in kept]
