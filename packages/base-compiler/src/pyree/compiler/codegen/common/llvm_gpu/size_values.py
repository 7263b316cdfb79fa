"""Run-time sizes in the LLVM GPU kernels: each size a kernel uses, as i64 LLVM IR text over its
push constants, which arrive as kernel parameters after the bindings, one 64-bit slot each (the
cuda and rocm drivers pack a u32 push constant as the low half of its slot).

Sizes are emitted into the kernel's entry block (``Function.entry_op``), which dominates every
use, once each. The arithmetic is llvm-cpu's (``llvm_cpu/size_values.py``) without its overflow
checks: it wraps, and a division by a value that is not positive divides by 1 instead of
trapping; the runtime refuses such sizes before it launches (it evaluates the same programs for
the grid and the bindings' lengths), and the kernel's own checks (``dynamic.py``) stop the rest.
"""

from __future__ import annotations

from pyree.compiler import sizes
from pyree.compiler.codegen.common import size_program
from pyree.compiler.codegen.common.llvm_gpu.llvm_text import Function

_ARITH = {sizes.ADD: "add", sizes.SUB: "sub", sizes.MUL: "mul"}
_DIVIDE = {sizes.FLOORDIV: "udiv", sizes.MOD: "urem"}
_COMPARE = {sizes.EQ: "eq", sizes.LT: "slt", sizes.LE: "sle"}


class SizeValues:
    """``values(size)``: an int stays an int, a run-time size is the i64 SSA name of its value."""

    def __init__(self, fn: Function, push_constants: int):
        self.fn = fn
        fn.sizes = self
        self.params = tuple(f"i64 %pc{k}" for k in range(push_constants))
        # the low half of each slot: a push constant is a u32 whatever its slot's high half holds
        self.constants = [fn.entry_op(f"and i64 %pc{k}, 4294967295") for k in range(push_constants)]
        self.memo: dict = {}

    def __call__(self, value):
        if sizes.is_static(value):
            return value
        if value not in self.memo:
            self.memo[value] = size_program.run(value, str, self.constants.__getitem__, self._step,
                                                self._select)
        return self.memo[value]

    def _step(self, op: int, x: str, y: str) -> str:
        op_ = self.fn.entry_op
        if op in _ARITH:
            return op_(f"{_ARITH[op]} i64 {x}, {y}")
        if op in (sizes.MIN, sizes.MAX):
            less = op_(f"icmp {'slt' if op == sizes.MIN else 'sgt'} i64 {x}, {y}")
            return op_(f"select i1 {less}, i64 {x}, i64 {y}")
        if op in _COMPARE:
            return op_(f"zext i1 {op_(f'icmp {_COMPARE[op]} i64 {x}, {y}')} to i64")
        d = op_(f"select i1 {op_(f'icmp sle i64 {y}, 0')}, i64 1, i64 {y}")
        if op in _DIVIDE:
            return op_(f"{_DIVIDE[op]} i64 {x}, {d}")
        remainder = op_(f"urem i64 {x}, {d}")
        up = op_(f"zext i1 {op_(f'icmp ne i64 {remainder}, 0')} to i64")
        return op_(f"add i64 {op_(f'udiv i64 {x}, {d}')}, {up}")

    def _select(self, c: str, a: str, b: str) -> str:
        op_ = self.fn.entry_op
        return op_(f"select i1 {op_(f'icmp ne i64 {c}, 0')}, i64 {a}, i64 {b}")


class StaticSizes:
    """The ``SizeValues`` of a kernel without run-time sizes: every size is an int already, and
    the kernel has no push-constant parameters."""

    params: tuple[str, ...] = ()

    def __call__(self, value):
        return value


STATIC = StaticSizes()
