"""A kernel size's SizeExpr program (``kernel.size_code``) run on a code generator's values: the
program the runtime evaluates for the same size, so a kernel computes its sizes exactly as the
runtime does. Each backend supplies the values and the arithmetic (llvm-cpu: llvmlite builders,
``llvm_cpu/size_values.py``; the LLVM GPU targets: LLVM IR text, ``llvm_gpu/size_values.py``)."""

from __future__ import annotations

from pyree.compiler import sizes
from pyree.compiler.kernel import size_code


def run(value, constant, push_constant, step):
    """``value`` (a size) as the backend's value: ``constant(c)`` for a CONST, ``push_constant(k)``
    for a SYM k, ``step(op, x, y)`` for each operation (sizes.ADD ... sizes.MAX) on the two
    values below the top of the stack."""
    code, stack, at = size_code(value), [], 0
    while at < len(code):
        op = code[at]
        if op in (sizes.CONST, sizes.SYM):
            stack.append(constant(code[at + 1]) if op == sizes.CONST else push_constant(code[at + 1]))
            at += 2
            continue
        y, x = stack.pop(), stack.pop()
        stack.append(step(op, x, y))
        at += 1
    return stack[0]
