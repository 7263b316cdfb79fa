"""Run-time sizes in llvm-cpu code: a kernel size as i64 arithmetic over the push constants.

A size (``pyree.compiler.sizes``) is emitted from its SizeExpr program (``common/size_program.py``),
the program the runtime evaluates for the same size, so kernel and runtime compute it alike.
The arithmetic wraps (no ``nsw``): an index computed modulo 2**64 is still exact wherever its
true value is in range, which is what the entry point's checks establish. The entry point
evaluates the sizes it checks with overflow detection (``overflow``) instead, so push constants
that make a size overflow are refused rather than wrapped into a small length.
"""

from __future__ import annotations

from llvmlite import ir
from pyree.compiler import sizes
from pyree.compiler.codegen.common import size_program
from pyree.compiler.codegen.llvm_cpu.loops import I64, i64

I1 = ir.IntType(1)
_ARITH = {sizes.ADD: ("add", "sadd"), sizes.SUB: ("sub", "ssub"), sizes.MUL: ("mul", "smul")}
_COMPARE = {sizes.EQ: "==", sizes.LT: "<", sizes.LE: "<="}


def emit_size(b: ir.IRBuilder, value, params: list[ir.Value],
              overflow: list[ir.Value] | None = None) -> ir.Value:
    """``value`` (a size or an int) as i64 at the builder's position; ``params[k]`` is push
    constant k as i64. With ``overflow``, each step appends an i1 that is true where it
    overflowed, or divided a negative value or by one that is not positive (SizeExpr's
    invocation errors); without, such a step gives some value and never traps."""
    if sizes.is_static(value):
        return i64(value)
    return size_program.run(value, i64, params.__getitem__,
                            lambda op, x, y: _step(b, op, x, y, overflow),
                            lambda c, x, y: b.select(b.icmp_signed("!=", c, i64(0)), x, y))


def _step(b: ir.IRBuilder, op: int, x: ir.Value, y: ir.Value, overflow) -> ir.Value:
    if op in _ARITH:
        plain, checked = _ARITH[op]
        if overflow is None:
            return getattr(b, plain)(x, y)
        name = f"llvm.{checked}.with.overflow.i64"
        fn = b.module.globals.get(name) or ir.Function(
            b.module, ir.FunctionType(ir.LiteralStructType([I64, I1]), [I64, I64]), name)
        pair = b.call(fn, [x, y])
        overflow.append(b.extract_value(pair, 1))
        return b.extract_value(pair, 0)
    if op in (sizes.MIN, sizes.MAX):
        return b.select(b.icmp_signed("<" if op == sizes.MIN else ">", x, y), x, y)
    if op in _COMPARE:
        return b.zext(b.icmp_signed(_COMPARE[op], x, y), I64)
    bad = b.icmp_signed("<=", y, i64(0))  # floordiv, ceildiv, mod: of x >= 0 by y > 0
    if overflow is not None:
        overflow.append(b.or_(bad, b.icmp_signed("<", x, i64(0))))
    d = b.select(bad, i64(1), y)
    if op == sizes.FLOORDIV:
        return b.udiv(x, d)
    if op == sizes.MOD:
        return b.urem(x, d)
    return b.add(b.udiv(x, d), b.zext(b.icmp_unsigned("!=", b.urem(x, d), i64(0)), I64))


class SizeValues:
    """The sizes one function uses, each emitted once into its entry block, which dominates
    every use: ``values(size)`` is its i64 value (an int gives a constant)."""

    def __init__(self, b: ir.IRBuilder, params: list[ir.Value]):
        self.b, self.params = b, params
        self.entry = b.function.entry_basic_block
        self.memo: dict = {}

    def __call__(self, value) -> ir.Value:
        if sizes.is_static(value):
            return i64(value)
        if value not in self.memo:
            with self.b.goto_block(self.entry):
                self.memo[value] = emit_size(self.b, value, self.params)
        return self.memo[value]
