"""Comparisons and selects of run-time sizes (``pyree.compiler.sizes``): what the compiler
decides must hold at every size within the bounds, and what it leaves to the host must compute,
in the runtime's SizeExpr evaluator (schema 1.6 opcodes), what Python computes."""

from __future__ import annotations

import itertools
import operator

import pytest
from pyree.compiler import sizes
from pyree.compiler.sizes import Size, compare, exact_quotient, select
from pyree.runtime.module import size_exprs

N, M = Size.symbol("n"), Size.symbol("m")
PYTHON = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le,
          "gt": operator.gt, "ge": operator.ge}
SIDES = [0, 1, 512, N, M, N + 1, 2 * N, N * M, N - 1, 8 * N, sizes.opaque("min", N, 512),
         sizes.opaque("floordiv", N, 2)]
BOUNDS = [None, {"n": (1, None)}, {"n": (1, 512), "m": (2, 64)}]


def _values(bounds):
    """Symbol values that meet ``bounds``: its corners and a few inside."""
    bounds = bounds or {}
    pick = lambda s: sorted({v for v in (0, 1, 2, 7, 512, 513)
                             if bounds.get(s, (0, None))[0] <= v
                             and (bounds.get(s, (0, None))[1] is None or v <= bounds[s][1])})
    return [dict(zip("nm", vs)) for vs in itertools.product(pick("n"), pick("m"))]


@pytest.mark.parametrize("bounds", BOUNDS, ids=["unbounded", "n>=1", "boxed"])
@pytest.mark.parametrize("predicate", sorted(PYTHON))
def test_a_decided_comparison_holds_at_every_size_and_an_undecided_one_computes_it(predicate,
                                                                                   bounds):
    decided = 0
    for a, b in itertools.product(SIDES, SIDES):
        held = compare(predicate, a, b, bounds)
        decided += isinstance(held, bool)
        for values in _values(bounds):
            va, vb = sizes.substitute(a, values), sizes.substitute(b, values)
            if va < 0 or vb < 0:
                continue  # not a size at these values (n - 1 at n = 0)
            want = PYTHON[predicate](va, vb)
            got = held if isinstance(held, bool) else sizes.substitute(held, values)
            assert int(got) == int(want), (predicate, a, b, values)
            if isinstance(held, Size):  # the host's program computes the same
                program = sizes.code(held, {"n": 0, "m": 1})
                assert size_exprs.evaluate(program, (values["n"], values["m"])) == int(want)
    assert decided > len(SIDES)  # the polynomials decide a good part of them


def test_what_torch_mlirs_shape_guards_need_is_decided():
    assert compare("ge", N, 0) is True                            # negative dims
    assert compare("lt", N, 0) is False
    assert compare("eq", N, N) is True                            # broadcast of equal dims
    assert compare("gt", N + 1, N) is True
    assert compare("eq", N, 0, {"n": (1, None)}) is False         # a sequence of at least 1
    assert compare("le", N, 512, {"n": (1, 512)}) is True         # torch's clamp to a bound
    assert isinstance(compare("eq", N, 1, {"n": (1, 512)}), Size)  # a broadcast test: per call
    assert exact_quotient(8 * N, 8 * N) == 1 and exact_quotient(8 * N, N) == 8  # a view's -1
    assert exact_quotient(8 * N + 1, N) is None


def test_a_select_is_one_atom_that_substitution_decides():
    chosen = select(compare("lt", N, M), N, M)
    assert chosen == select(compare("lt", N, M), N, M)  # canonical: equal selects are equal
    assert select(True, N, M) == N and select(compare("lt", N, M), N, N) == N
    assert sizes.nonnegative(chosen)
    assert sizes.substitute(chosen, {"n": 3, "m": 5}) == 3
    assert sizes.substitute(chosen, {"m": N}) == N  # unified: n < n is false, so m, which is n
    program = sizes.code(chosen, {"n": 0, "m": 1})
    assert sizes.uses_comparisons(program) and not sizes.uses_comparisons(sizes.code(N + 1, {"n": 0}))
    assert size_exprs.spell(program, ["n", "m"]) == "(n if (n < m) else m)"
    for n, m in [(0, 0), (3, 5), (5, 3), (7, 7)]:
        assert size_exprs.evaluate(program, (n, m)) == min(n, m)


def test_a_size_program_past_the_runtimes_limit_is_a_compile_error():
    """A SizeExpr the runtime would refuse at load (more than ``MAX_CODE`` entries) is refused
    when the module is written, naming the size; the runtime's limit is the compiler's."""
    from pyree.compiler import CompileError
    assert sizes.MAX_CODE == size_exprs.MAX_CODE
    long = sum((sizes.opaque("ceildiv", N * k, 7) for k in range(1, 200)), 0)
    with pytest.raises(CompileError, match=r"program of \d+ entries, more than the 1024"):
        sizes.code(long, {"n": 0})
    assert len(sizes.code(sum((sizes.opaque("ceildiv", N * k, 7) for k in range(1, 20)), 0),
                          {"n": 0})) < sizes.MAX_CODE


def test_a_division_by_a_monomial_that_divides_every_term_is_exact():
    """A reshape's dim as torch-mlir writes it, the product of the dims over the others
    (BLOOM with a run-time sequence length: ``4*s0*s0 / (4*s0)``), is the dim itself; anything
    not divided exactly stays an opaque division."""
    from pyree.compiler.sizes import Size, opaque
    s0, s1 = Size.symbol("s0"), Size.symbol("s1")
    assert opaque("floordiv", 4 * s0 * s0, 4 * s0) == s0
    assert opaque("floordiv", 4 * s0 * s1 + 8 * s0, 4 * s0) == s1 + 2
    assert opaque("ceildiv", 6 * s0 * s1, 2 * s1) == 3 * s0
    assert opaque("floordiv", 6 * s0 * s1, 2 * s0 * s1) == 3
    for a, b in ((4 * s0 * s0, 3 * s0), (s0 + 1, s0), (s0 * s1, s0 + s1)):
        assert str(opaque("floordiv", a, b)).startswith("floordiv(")
