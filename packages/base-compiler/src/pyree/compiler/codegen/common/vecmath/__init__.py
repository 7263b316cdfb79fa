"""Vectorizable f32 math functions, emitted as LLVM IR instead of calls to libm.

A call to libm's ``expf`` or ``tanhf`` inside a loop stops LLVM's loop vectorizer, so those
loops ran one element at a time. Each function here is range reduction plus a minimax
polynomial (the Cephes/SLEEF approach) written with selects instead of branches; it becomes an
internal ``alwaysinline`` function per type, which LLVM inlines before vectorizing. Results are
within a few ulp of the correctly rounded value over the whole f32 range, with IEEE behaviour
at 0, -0, inf, NaN, overflow and subnormals (``tests/codegen/llvm_cpu/test_llvm_cpu_math.py``).
pow is computed in f64 inside. f16 goes through f32; f64 keeps libm. The GPU targets run the same
algorithms as kernel IR (``codegen/common/math_expansion``): they use nothing of the builder but
``MathBuilder``'s methods and the integer and conversion instructions of its ``b``.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler.codegen.common.vecmath.builder import MathBuilder
from pyree.compiler.codegen.common.vecmath.erf import erf
from pyree.compiler.codegen.common.vecmath.exponential import exp, exp2, expm1
from pyree.compiler.codegen.common.vecmath.logarithm import log, log1p, log2
from pyree.compiler.codegen.common.vecmath.power import power
from pyree.compiler.codegen.common.vecmath.tanh import tanh

UNARY = {"exp": exp, "exp2": exp2, "expm1": expm1, "log": log, "log2": log2, "log1p": log1p,
         "tanh": tanh, "erf": erf}
BINARY = {"pow": power}


def math_function(module: ir.Module, op: str, ty: ir.Type) -> ir.Function:
    """The internal function computing ``op`` (in UNARY or BINARY) lane-wise on ``ty``, an f32
    type (float or <N x float>)."""
    suffix = f"v{ty.count}f32" if isinstance(ty, ir.VectorType) else "f32"
    name = f"pyree.{op}.{suffix}"
    fn = module.globals.get(name)
    if fn is None:
        emit = UNARY.get(op) or BINARY[op]
        fn = ir.Function(module, ir.FunctionType(ty, [ty] * (1 if op in UNARY else 2)), name)
        fn.linkage = "internal"
        fn.attributes.add("alwaysinline")
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        b.ret(emit(MathBuilder(b, ty), *fn.args))
    return fn
