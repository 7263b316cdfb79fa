"""What the scatter templates (``kernel.Scatter``) of llvm-cpu and the LLVM GPU targets share:
which combines LLVM's ``atomicrmw`` computes exactly, and the combine a scatter's value is."""

from __future__ import annotations

from pyree.compiler.kernel import Acc, Binary, Expr, is_float, is_unsigned, walk

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


def combine_of(value: Expr) -> tuple[str, object, bool] | None:
    """(op, update, whether the update is the op's first operand) of a scatter value that
    combines ``Acc(0)``, or None for a plain set."""
    if not any(isinstance(e, Acc) for e in walk(value)):
        return None
    assert isinstance(value, Binary), "a scatter combines Acc(0) with one op"
    first = isinstance(value.b, Acc)
    return value.op, value.a if first else value.b, first
