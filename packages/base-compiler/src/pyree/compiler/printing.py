"""Readable text for the tensor program and for kernels (``--pyree-print-ir-after-all``).

MLIR-like, one line per op, with every scalar expression written out: loads as
``%name[d0, d1 + 2]`` (tensor program) or ``b1[d0, d1]`` (kernels), gathers as
``gather b1[expr, d1]``, loop indices as ``d0``, accumulators as ``acc0``.
"""

from __future__ import annotations

from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Final,
    Gather,
    Kernel,
    LineScan,
    LineSort,
    Load,
    LoopIndex,
    Select,
    SizeValue,
    Unary,
)
from pyree.compiler.sizes import is_static
from pyree.compiler.tensor_program import (
    Block,
    Check,
    Constant,
    Function,
    Generic,
    GlobalStore,
    If,
    Program,
    Value,
    View,
    While,
)

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "rem": "%", "and": "&", "or": "|",
          "xor": "^", "shl": "<<", "shr": ">>"}
_COMPARE = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def format_program(program: Program) -> str:
    initializer = [program.initializer] if program.initializer is not None else []
    return "\n\n".join(format_function(f) for f in initializer + program.functions) + "\n"


def format_kernels(kernels: list[Kernel]) -> str:
    return "\n\n".join(_format_kernel(k) for k in kernels) + "\n"


# ---- tensor program ----------------------------------------------------------------------------

def _type(value) -> str:
    return f"tensor<{''.join(f'{d}x' for d in value.shape)}{value.dtype}>"


def _decl(value) -> str:
    return f"%{value.name}: {_type(value)}"


def format_function(fn: Function) -> str:
    args = ", ".join(_decl(a) for a in fn.arguments)
    results = ", ".join(_type(r) for r in fn.results)
    lines = [f"func @{fn.name}({args}) -> ({results}) {{{_at(fn.location)}"]
    for op in fn.ops:
        lines.extend("  " + line for line in _format_op(op))
    lines.append(f"  return {', '.join('%' + r.name for r in fn.results)}")
    lines.append("}")
    return "\n".join(lines)


def _format_op(op) -> list[str]:
    if isinstance(op, Constant):
        what = (f"splat {op.splat}" if op.splat is not None
                else f'parameter "{op.parameter[0]}"::"{op.parameter[1]}"' if op.parameter
                else f"computed at load @{op.name}" if op.computed
                else _preview(op.data))
        return [f"{_decl(op.result)} = constant {what}{_at(op.location)}"]
    if isinstance(op, View):
        # A run-time offset (a Size) has no truth value: only the int 0 prints nothing.
        offset = "" if isinstance(op.byte_offset, int) and op.byte_offset == 0 \
            else f" + {op.byte_offset} bytes"
        return [f"{_decl(op.result)} = view %{op.source.name}{offset}{_at(op.location)}"]
    if isinstance(op, Check):
        operands = ", ".join("%" + v.name for v in (op.lhs, op.rhs) if v is not None)
        tol = f" atol={op.atol} rtol={op.rtol}" if op.kind == "expect_almost_eq" else ""
        return [f"check.{op.kind}({operands}){tol}{_at(op.location)}"]
    if isinstance(op, If):
        condition = f"%{op.condition.name}" if isinstance(op.condition, Value) \
            else f"sizes({op.condition})"
        return [f"{_names(op.results)} = if {condition} {{{_at(op.location)}",
                *_format_block(op.then), "} else {", *_format_block(op.otherwise), "}"]
    if isinstance(op, GlobalStore):
        return [f"store %{op.source.name} into %{op.target.name}{_at(op.location)}"]
    if isinstance(op, While):
        return [f"{_names(op.results)} = while ({_names(op.inits)}) {{{_at(op.location)}",
                *_format_block(op.before), "} do {", *_format_block(op.after), "}"]
    return _format_generic(op)


def _names(values) -> str:
    return ", ".join("%" + v.name for v in values)


def _format_block(block: Block) -> list[str]:
    lines = [f"^({', '.join(_decl(a) for a in block.arguments)}):"] if block.arguments else []
    lines += ["  " + line for op in block.ops for line in _format_op(op)]
    return lines + [f"  yield {_names(block.results)}"]


def _format_generic(op: Generic) -> list[str]:
    results = ", ".join(_decl(r) for r in op.results)
    ins = ", ".join("%" + v.name for v in op.inputs)
    head = (f"{results} = generic \"{op.origin}\" loops{_ranges(op.loop_ranges, op.num_parallel)}"
            f" ins({ins}) {{{_at(op.location)}")
    names = ["%" + v.name for v in op.inputs]
    outs = ["%" + v.name for v in op.results]
    return [head, *("  " + line for line in _format_attention(op.attention, names)),
            *_format_line(op.line), *("  " + line for line in _format_results(op.outputs, names, outs)),
            "}"]


def _preview(data) -> str:
    flat = data.reshape(-1)
    shown = ", ".join(str(x) for x in flat[:4].tolist())
    return f"dense<[{shown}{', ...' if flat.size > 4 else ''}]>"


def _at(location: str) -> str:
    return f"  // {location}" if location else ""


# ---- kernels -----------------------------------------------------------------------------------

def _format_kernel(kernel: Kernel) -> str:
    head = (f"kernel @{kernel.name} loops{_ranges(kernel.loop_ranges, kernel.num_parallel)}"
            f" {{{_at(kernel.location)}")
    lines = [head]
    names = [f"b{i}" for i in range(len(kernel.bindings))]
    for i, b in enumerate(kernel.bindings):
        lines.append(f"  binding b{i}: {_type(b)} {b.access}")
    lines.extend("  " + line for line in _format_attention(kernel.attention, names))
    lines.extend(_format_line(kernel.line))
    lines.extend("  " + line for line in _format_results(kernel.results, names, names))
    lines.append("}")
    return "\n".join(lines)


# ---- shared --------------------------------------------------------------------------------

def _ranges(ranges: tuple[int, ...], num_parallel: int) -> str:
    par = ", ".join(map(str, ranges[:num_parallel]))
    red = ", ".join(map(str, ranges[num_parallel:]))
    return f"({par}{' | ' + red if red else ''})"


def _format_results(results, load_names: list[str], store_names: list[str]) -> list[str]:
    lines = []
    for k, r in enumerate(results):
        target = f"{store_names[r.binding]}[{_index(r.index)}]"
        if r.scatter is not None:  # acc: the element at the place, before this update
            place = ", ".join(expr(ix, load_names) for ix in r.scatter.place)
            lines.append(f"scatter {store_names[r.binding]}[{place}] from "
                         f"{load_names[r.scatter.start]} = {expr(r.value, load_names)}")
            continue
        if r.init is None and r.epilogue is None:
            lines.append(f"{'row ' if r.row else ''}{target} = {expr(r.value, load_names)}")
            continue
        lines.append(f"{target}:")
        if r.init is not None:
            lines.append(f"  init acc{k} = {expr(r.init, load_names)}")
        lines.append(f"  acc{k} = {expr(r.value, load_names)}")
        if r.epilogue is not None:
            lines.append(f"  store {expr(r.epilogue, load_names)}")
    return lines


def _format_line(line) -> list[str]:
    """The walk a CPU target may take instead of the result's counting form (``kernel.LineSort``,
    ``kernel.LineScan``)."""
    if isinstance(line, LineSort):
        return [f"  // ranks along d{line.d} by sorting (exact below {line.k})"]
    if isinstance(line, LineScan):
        return [f"  // scan along d{line.d} as one running fold"]
    return []


def _format_attention(attention, load_names: list[str]) -> list[str]:
    """The score and softmax of an attention op (``kernel.Attention``), before its result O."""
    if attention is None:
        return []
    a = attention
    zero = " (0 where every s is -inf)" if a.masked_zero else ""
    return [f"attention over the rows, column d{a.e}, keys the first reduction loop:",
            f"  init acc0 = {expr(a.score_init, load_names)}",
            f"  acc0 = {expr(a.score_step, load_names)}",
            f"  s = {expr(a.score, load_names)}",
            f"  p = softmax(s) as {a.p_dtype}{zero}; O below folds acc0 + p * value"
            + ("; partial: stores o = acc0 + exp(s - m) * value, m, l" if a.partial else "")]


def _index(index: tuple[AffineExpr, ...]) -> str:
    return ", ".join(affine(a) for a in index)


def affine(a: AffineExpr) -> str:
    """``2*d0 + d1 - 3``; a run-time size as a coefficient or constant in parentheses
    (``(s0)*d1 + (-1 + s0)``)."""
    terms = [f"d{d}" if is_static(c) and c == 1 else f"{c}*d{d}" if is_static(c) else f"({c})*d{d}"
             for d, c in enumerate(a.coeffs) if not is_static(c) or c]
    text = " + ".join(terms)
    if not is_static(a.const):
        return f"{text} + ({a.const})" if terms else f"({a.const})"
    if a.const or not terms:
        text = f"{text} {'-' if a.const < 0 else '+'} {abs(a.const)}" if terms else str(a.const)
    return text


def expr(e: Expr, names: list[str]) -> str:
    """One expression as text; ``names[i]`` names binding/input ``i``."""
    if isinstance(e, Load):
        return f"{names[e.binding]}[{_index(e.index)}]"
    if isinstance(e, Gather):
        return f"gather {names[e.binding]}[{', '.join(expr(ix, names) for ix in e.index)}]"
    if isinstance(e, Const):
        return f"{e.value}:{e.dtype}"
    if isinstance(e, LoopIndex):
        return f"d{e.dim}"
    if isinstance(e, SizeValue):
        return f"size({e.size}):{e.dtype}"
    if isinstance(e, Acc):
        return f"acc{e.result}"
    if isinstance(e, Final):
        return f"final{e.result}"
    if isinstance(e, Unary):
        return f"{e.op}({expr(e.x, names)})"
    if isinstance(e, Binary):
        if e.op in _INFIX:
            return f"({expr(e.a, names)} {_INFIX[e.op]} {expr(e.b, names)})"
        return f"{e.op}({expr(e.a, names)}, {expr(e.b, names)})"
    if isinstance(e, Compare):
        op = _COMPARE.get(e.predicate)
        if op:
            return f"({expr(e.a, names)} {op} {expr(e.b, names)})"
        return f"cmp.{e.predicate}({expr(e.a, names)}, {expr(e.b, names)})"
    if isinstance(e, Select):
        return f"select({expr(e.cond, names)}, {expr(e.a, names)}, {expr(e.b, names)})"
    if isinstance(e, Cast):
        return f"{e.op}<{e.dtype}>({expr(e.x, names)})"
    raise TypeError(f"not an expression: {e!r}")
