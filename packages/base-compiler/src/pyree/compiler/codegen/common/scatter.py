"""What the scatter templates (``kernel.Scatter``) of llvm-cpu and the LLVM GPU targets share:
which combines LLVM's ``atomicrmw`` computes exactly, and the combine a scatter's value is."""

from __future__ import annotations

from typing import NamedTuple

from pyree.compiler.kernel import Acc, Binary, Expr, Select, is_float, is_unsigned, walk

# (op, kind of dtype) -> the ``atomicrmw`` operation that computes ``Binary(op)`` exactly
ATOMIC_RMW = {
    ("add", "float"): "fadd",
    **{(op, kind): op for op in ("add", "and", "or", "xor") for kind in ("signed", "unsigned")},
    ("max", "signed"): "max", ("min", "signed"): "min",
    ("max", "unsigned"): "umax", ("min", "unsigned"): "umin",
}


def dtype_kind(dtype: str) -> str | None:
    """The ``ATOMIC_RMW`` kind of a stored dtype; None where memory holds it in another form
    (bf16 as bits, i1 as a byte), which only a compare-exchange loop updates."""
    if dtype in ("bf16", "i1"):
        return None
    return "float" if is_float(dtype) else "unsigned" if is_unsigned(dtype) else "signed"


class Combine(NamedTuple):
    """How a scatter's value meets the element at its place: ``op`` (a ``Binary`` op) of the
    update and the element (``first``: the update is the op's first operand), or, where ``op``
    is None, a store of the update where ``cond`` holds (always, where it is None)."""

    op: str | None
    update: Expr
    first: bool = True
    cond: Expr | None = None


def combine_of(value: Expr) -> Combine:
    """The ``Combine`` a scatter's value is (``kernel.Scatter`` lists the forms)."""
    if not any(isinstance(e, Acc) for e in walk(value)):
        return Combine(None, value)
    if isinstance(value, Select) and isinstance(value.b, Acc):
        return Combine(None, value.a, cond=value.cond)
    assert isinstance(value, Binary), "a scatter combines Acc(0) with one op"
    first = isinstance(value.b, Acc)
    return Combine(value.op, value.a if first else value.b, first)
