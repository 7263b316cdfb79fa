"""``stablehlo.composite``: a named op (JAX's ``jax.lax.composite``, torch_xla) that a backend may
implement specially; its ``decomposition`` function says what it computes. pyree has no special
implementations, so the composite is that function inlined (as IREE does), as a ``func.call``
would be; its ``name`` and ``composite_attributes`` change nothing."""

from __future__ import annotations

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import prop
from xdsl.dialects.builtin import SymbolRefAttr
from xdsl.ir import Operation


def lower_composite(fn: FunctionLowering, op: Operation) -> None:
    from pyree.compiler.input.lowering import inline_function  # lowering imports this package

    where = location_of(op)
    ref = prop(op, "decomposition")
    name = ref.root_reference.data if isinstance(ref, SymbolRefAttr) else None
    if name not in fn.functions:
        raise CompileError(f"stablehlo.composite needs 'decomposition', a function of this module "
                           f"(not {ref})", where)
    takes = len(fn.functions[name].function_type.inputs)
    if takes != len(op.operands):
        raise CompileError(f"stablehlo.composite passes {len(op.operands)} operands to @{name}, "
                           f"which takes {takes}", where)
    returned = inline_function(fn, name, [fn.entry(v, where) for v in op.operands], where,
                               "composite")
    if len(returned) != len(op.results):
        raise CompileError(f"@{name} returns {len(returned)} values, the composite has "
                           f"{len(op.results)} results", where)
    for result, entry in zip(op.results, returned):
        fn.env[result] = entry
