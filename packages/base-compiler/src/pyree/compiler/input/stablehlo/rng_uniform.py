"""stablehlo.rng with a UNIFORM distribution, element for element as IREE lowers it (its e2e
``rng_uniform`` test checks the values): a linear congruential hash of the element's indices,

    h = 0;  for each dim d in order:  h = (i32(index_d) + h) * 1103515245 + 12345   (i32, wrapping)
    out = f32(unsigned h) * ((max - min) * 2.3283064e-10) + min

It is stateless, so every call gives the same numbers, as IREE's does. NORMAL is
``rng_normal.py``.
"""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.body import convert
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import emit_map, prop
from pyree.compiler.input.stablehlo.rng_normal import lower_rng_normal
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import Binary, Cast, Const, Expr, LoopIndex
from xdsl.ir import Operation

MULTIPLIER, INCREMENT, SCALE = 1103515245, 12345, 2.3283064e-10


def lower_rng(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    distribution = str(getattr(prop(op, "rng_distribution"), "data", prop(op, "rng_distribution")))
    if "NORMAL" in distribution:
        return lower_rng_normal(fn, op)
    if "UNIFORM" not in distribution:
        raise CompileError(f"stablehlo.rng with distribution {distribution} is not supported "
                           "(UNIFORM and NORMAL are)", where)
    low, high = (fn.tensor(v, where) for v in op.operands[:2])
    if low.shape or high.shape or low.dtype not in ("f16", "bf16", "f32", "f64"):
        raise CompileError("stablehlo.rng UNIFORM takes scalar float bounds", where)
    dtype = low.dtype

    def build(inputs: Inputs) -> Expr:
        rank = len(tensor_type_of(op.results[0].type, where)[1])
        h: Expr = Const(0, "i32")
        for d in range(rank):
            h = Binary("add", Binary("mul", Binary("add", convert(LoopIndex(d), "i32"), h, "i32"),
                                     Const(MULTIPLIER, "i32"), "i32"), Const(INCREMENT, "i32"),
                       "i32")
        lo, hi = inputs.load(low, ()), inputs.load(high, ())
        scale = Binary("mul", Binary("sub", hi, lo, dtype), Const(SCALE, dtype), dtype)
        return Binary("add", Binary("mul", Cast("uitofp", h, dtype), scale, dtype), lo, dtype)

    emit_map(fn, op, build)
