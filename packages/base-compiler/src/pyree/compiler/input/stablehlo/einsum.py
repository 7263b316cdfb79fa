"""``stablehlo.einsum`` / ``unary_einsum`` (deprecated in StableHLO, still accepted by IREE):
the config (``"ab,bc->ac"``) names a loop per letter, so the op is one Generic, with the
output's letters as its parallel loops and the others summed: two operands make the same
``acc + lhs * rhs`` reduction as ``dot_general`` (a transpose and a contraction at once), one
operand a sum or a plain copy. A letter repeated in an operand reads its diagonal (``ii->i``,
a trace ``ii->``). ``...`` stands for the leading dims an operand has beyond its letters."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.scalar import zero
from pyree.compiler.input.stablehlo.common import convert, prop
from pyree.compiler.input.stablehlo.contraction import _emit_contraction
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import Acc, AffineExpr, Binary, Result
from pyree.compiler.tensor_program import Generic
from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Operation

_ELLIPSIS_LETTERS = "0123456789"  # never einsum letters: what ``...`` stands for


def _config(op: Operation, where: str) -> tuple[list[str], str]:
    attr = prop(op, "einsum_config")
    if not isinstance(attr, StringAttr) or "->" not in attr.data:
        raise CompileError(f"'{op.name}' needs an einsum_config such as \"ab,bc->ac\"", where)
    inputs, output = attr.data.replace(" ", "").split("->")
    return inputs.split(","), output


def _letters(spec: str, rank: int | None, what: str, where: str) -> str:
    """``spec`` with ``...`` replaced by one letter per dim it stands for (``rank`` None: the
    output's, which takes the most any operand has, set by the caller)."""
    if spec.count("...") > 1 or any(not (c.isalpha() or c == ".") for c in spec) or \
            spec.replace("...", "").count(".") or (rank is not None and "..." not in spec
                                                   and len(spec) != rank):
        raise CompileError(f"einsum: '{spec}' does not name each dim of the {what} once by a "
                           "letter (and '...' at most once)", where)
    if "..." not in spec:
        return spec
    extra = rank - (len(spec) - 3)
    if extra < 0 or extra > len(_ELLIPSIS_LETTERS):
        raise CompileError(f"einsum: '{spec}' has more letters than the {what} has dims", where)
    return spec.replace("...", _ELLIPSIS_LETTERS[len(_ELLIPSIS_LETTERS) - extra:])


def lower_einsum(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    specs, out_spec = _config(op, where)
    if len(specs) != len(op.operands):
        raise CompileError(f"'{op.name}': the config names {len(specs)} operands, the op has "
                           f"{len(op.operands)}", where)
    xs = [fn.tensor(v, where) for v in op.operands]
    shapes = [tensor_type_of(v.type, where)[1] for v in op.operands]
    specs = [_letters(s, len(shape), f"operand {k}", where)
             for k, (s, shape) in enumerate(zip(specs, shapes))]
    out_dtype, out_shape = tensor_type_of(op.results[0].type, where)
    out_spec = _letters(out_spec, len(out_shape), "result", where)
    sizes: dict[str, int] = {}
    for spec, shape in zip(specs, shapes):
        for c, n in zip(spec, shape):
            if sizes.setdefault(c, n) != n:
                raise CompileError(f"einsum: '{c}' is {sizes[c]} in one place and {n} in "
                                   "another", where)
    if len(set(out_spec)) != len(out_spec) or any(c not in sizes for c in out_spec):
        raise CompileError(f"einsum: the result '{out_spec}' must name each of its dims once, "
                           "by letters of the operands", where)
    if tuple(sizes[c] for c in out_spec) != tuple(out_shape):
        raise CompileError(f"einsum: '{out_spec}' makes {tuple(sizes[c] for c in out_spec)}, "
                           f"the result type says {tuple(out_shape)}", where)
    summed = [c for c in dict.fromkeys("".join(specs)) if c not in out_spec]
    loops = [*out_spec, *summed]
    n, num_parallel = len(loops), len(out_spec)
    ranges = tuple(sizes[c] for c in loops)
    index = [tuple(AffineExpr.loop(n, loops.index(c)) for c in spec) for spec in specs]
    if len(xs) == 2:
        _emit_contraction(fn, op, xs[0], xs[1], index[0], index[1], ranges, num_parallel,
                          out_dtype)
        return
    inputs = Inputs()
    element = convert(inputs.load(xs[0], index[0]), out_dtype)
    out_index = tuple(AffineExpr.loop(n, d) for d in range(num_parallel))
    output = Result(0, out_index, Binary("add", Acc(0, out_dtype), element, out_dtype),
                    zero(out_dtype)) if summed else Result(0, out_index, element)
    fn.emit(Generic(inputs.values, [fn.result_value(op.results[0], where)], (output,), ranges,
                    num_parallel, where, op.name))
