"""``!stablehlo.token`` values and ``after_all`` (``create_token``, its older spelling): a token
orders side effects between ops; pyree keeps the order of a function's ops anyway and runs none
of the ops that need it (infeed, outfeed, send, recv are refused), so a token is an entry that
holds nothing and that nothing computes on."""

from __future__ import annotations

from dataclasses import dataclass

from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.parser import location_of
from xdsl.ir import Operation


@dataclass(eq=False)
class Token:
    def __str__(self) -> str:
        return ("a token (pyree keeps tokens inside a function, for ordering only: not as an "
                "exported function's argument or result, nor as data)")


def lower_after_all(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    for operand in op.operands:
        if not isinstance(fn.entry(operand, where), Token):
            raise CompileError(f"'{op.name}' takes tokens, not {operand.type}", where)
    fn.env[op.results[0]] = Token()
