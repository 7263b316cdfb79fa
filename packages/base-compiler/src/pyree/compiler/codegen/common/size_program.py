"""A kernel size's SizeExpr program (``kernel.size_code``) run on a code generator's values: the
program the runtime evaluates for the same size, so a kernel computes its sizes exactly as the
runtime does. Each backend supplies the values and the arithmetic (llvm-cpu: llvmlite builders,
``llvm_cpu/size_values.py``; the LLVM GPU targets: LLVM IR text, ``llvm_gpu/size_values.py``)."""

from __future__ import annotations

from pyree.compiler import sizes
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import size_code


def run(value, constant, push_constant, step, select=None):
    """``value`` (a size) as the backend's value: ``constant(c)`` for a CONST, ``push_constant(k)``
    for a SYM k, ``step(op, x, y)`` for each binary operation (sizes.ADD ... sizes.LE, a
    comparison giving 1 or 0) on the two values below the top of the stack, ``select(c, a, b)``
    for a SELECT (c ? a : b). A backend that passes no ``select`` does not evaluate comparisons:
    a size with one is refused, not computed as some other operation."""
    code, stack, at = size_code(value), [], 0
    while at < len(code):
        op = code[at]
        if op in (sizes.CONST, sizes.SYM):
            stack.append(constant(code[at + 1]) if op == sizes.CONST else push_constant(code[at + 1]))
            at += 2
            continue
        if op in (sizes.EQ, sizes.LT, sizes.LE, sizes.SELECT) and select is None:
            raise CompileError(f"internal error: this target's kernels cannot compute the run-time "
                               f"size {value}: it compares sizes")
        if op == sizes.SELECT:
            b, a, c = stack.pop(), stack.pop(), stack.pop()
            stack.append(select(c, a, b))
        else:
            y, x = stack.pop(), stack.pop()
            stack.append(step(op, x, y))
        at += 1
    return stack[0]
