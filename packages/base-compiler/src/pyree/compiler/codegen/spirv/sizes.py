"""Run-time sizes in vulkan-spirv shaders: a kernel size (``pyree.compiler.sizes``, symbol pk
push constant k) as integer arithmetic over the dispatch's push constants.

The constants arrive as a PushConstant block of uint32 members at offset 0, as the Vulkan driver
pushes them. Each size is emitted once, in the entry block (``Function.prologue``), from its
SizeExpr program (``kernel.size_code``): the program the runtime evaluates for the grid and the
binding lengths, so shader and runtime compute it alike. The arithmetic is signed 64-bit, so a
size with a negative intermediate (``n - 1``) is still exact. A flag is raised by every step whose
operands could overflow i64 (a product of operands beyond 2**31, a sum beyond 2**62), every
division by a non-positive value, every size the code uses outside [-(2**31 - 1), 2**31 - 1] and
every loop range or binding dim outside [0, 2**31 - 1]: the code works on the sizes' 32-bit
truncations, and its addresses wrap like the hardware's (``shader.py``), exact wherever the true
address is in range. The shader's body runs only where no flag is raised and every access the
compiler could not prove in range stays in its binding (``normalize.run_time_checks``); so push
constants that disagree with the buffers, or sizes beyond 32-bit addressing, never make an access
out of bounds: such a dispatch does nothing. The host program computes the constants from the
arguments' shapes, and the runtime checks every binding against its ``min_length_expr`` first.
"""

from __future__ import annotations

from pyree.compiler import sizes
from pyree.compiler.codegen.common import size_program
from pyree.compiler.codegen.common.normalize import run_time_checks
from pyree.compiler.codegen.spirv import assembler as S
from pyree.compiler.errors import CompileError
from pyree.compiler.kernel import push_constant_count
from pyree.compiler.sizes import is_static

MAX_ELEMENTS = 2**31 - 1     # addresses are 32-bit
MAX_PUSH_CONSTANTS = 32      # 128 bytes: the driver's push-constant range, Vulkan's minimum
MUL_BOUND = 1 << 31          # |operands| of a product: the product fits in 62 bits
ADD_BOUND = 1 << 62          # |operands| of a sum or difference: it fits in 63 bits
G_SMIN, G_SMAX = 39, 42
OpISub, OpIEqual, OpSGreaterThan, OpSLessThan = 130, 170, 173, 177
OpLogicalOr, OpLogicalAnd, OpLogicalNot = 166, 167, 168


class SizeValues:
    """The sizes one entry point uses: ``values(size)`` is its u32 value (an int gives a
    constant), ``values.wide(size)`` its i64 one; ``values.guard()`` the bool the body runs under."""

    def __init__(self, sh):
        self.sh, self.fn, self.asm = sh, sh.fn, sh.asm
        kernel = sh.kernel
        if not sh.target.int64:
            raise CompileError(f"{sh.where} has run-time sizes, which the vulkan-spirv target "
                               f"computes in 64-bit integers; target '{sh.target.triple}' lacks "
                               "them (shaderInt64)")
        count = push_constant_count(kernel)
        if count > MAX_PUSH_CONSTANTS:
            raise CompileError(f"{sh.where} reads {count} run-time sizes; the vulkan-spirv "
                               f"target passes at most {MAX_PUSH_CONSTANTS} (128 bytes of push "
                               "constants)")
        self.i64 = self.asm.t_int(64)
        self.block = self.asm.push_constants(count)
        self.params: dict[int, int] = {}
        self.narrow: dict = {}
        self.wide_memo: dict = {}
        self.bad: list[int] = []   # bools: true where this dispatch's sizes cannot run

    def __call__(self, value) -> int:
        if is_static(value):
            return self.asm.u32(value)
        if value not in self.narrow:
            v = self.wide(value)
            with self.fn.prologue():
                self.bad.append(self._outside(v, -MAX_ELEMENTS, MAX_ELEMENTS))
                self.narrow[value] = self.fn.op(S.OpUConvert, self.sh.u32, v)
        return self.narrow[value]

    def wide(self, value) -> int:
        if is_static(value):
            return self.asm.const_int(64, value)
        if value not in self.wide_memo:
            with self.fn.prologue():
                self.wide_memo[value] = size_program.run(
                    value, lambda c: self.asm.const_int(64, c), self._param, self._step,
                    self._select)
        return self.wide_memo[value]

    def guard(self) -> int:
        """Emitted last: no flag raised, every binding dim and loop range within 32-bit
        addressing, and every access ``run_time_checks`` lists inside its binding."""
        kernel = self.sh.kernel
        for d in sorted({d for d in (*kernel.loop_ranges, *(d for b in kernel.bindings for d in b.shape))
                         if not is_static(d)}, key=repr):
            v = self.wide(d)
            with self.fn.prologue():
                self.bad.append(self._outside(v, 0, MAX_ELEMENTS))
        for check in run_time_checks(kernel):
            lo, hi, size = self.wide(check.lo), self.wide(check.hi), self.wide(check.length)
            with self.fn.prologue():
                outside = self._or(self._lt(lo, self.asm.const_int(64, 0)),
                                   self._not(self._lt(hi, size)))
                for n in check.ranges:
                    if not is_static(n):  # an empty loop box touches nothing
                        empty = self.fn.op(OpIEqual, self.sh.bool, self.wide(n), self.asm.const_int(64, 0))
                        outside = self.fn.op(OpLogicalAnd, self.sh.bool, outside, self._not(empty))
                self.bad.append(outside)
        with self.fn.prologue():
            bad = self.asm.const_bool(False)
            for flag in self.bad:
                bad = self._or(bad, flag)
            return self._not(bad)

    # ---- arithmetic ----

    def _param(self, k: int) -> int:
        if k not in self.params:
            u32 = self.sh.u32
            ptr = self.fn.op(S.OpAccessChain, self.asm.t_pointer(S.PUSH_CONSTANT, u32), self.block,
                             self.asm.u32(k))
            self.params[k] = self.fn.op(S.OpUConvert, self.i64, self.fn.op(S.OpLoad, u32, ptr))
        return self.params[k]

    def _step(self, op: int, x: int, y: int) -> int:
        fn, i64 = self.fn, self.i64
        if op in (sizes.ADD, sizes.SUB, sizes.MUL):
            bound = MUL_BOUND if op == sizes.MUL else ADD_BOUND
            self.bad += [self._outside(x, -bound, bound), self._outside(y, -bound, bound)]
            code = {sizes.ADD: S.OpIAdd, sizes.SUB: OpISub, sizes.MUL: S.OpIMul}[op]
            return fn.op(code, i64, x, y)
        if op in (sizes.MIN, sizes.MAX):
            return fn.ext(i64, G_SMIN if op == sizes.MIN else G_SMAX, x, y)
        zero, one = self.asm.const_int(64, 0), self.asm.const_int(64, 1)
        if op in (sizes.EQ, sizes.LT, sizes.LE):
            held = fn.op(OpIEqual, self.sh.bool, x, y) if op == sizes.EQ else self._lt(x, y) \
                if op == sizes.LT else self._not(self._lt(y, x))
            return fn.op(S.OpSelect, i64, held, one, zero)
        bad = self._or(self._not(self._lt(zero, y)), self._lt(x, zero))  # floordiv, ceildiv, mod
        self.bad.append(bad)
        d = fn.op(S.OpSelect, i64, bad, one, y)
        if op == sizes.FLOORDIV:
            return fn.op(S.OpUDiv, i64, x, d)
        if op == sizes.MOD:
            return fn.op(S.OpUMod, i64, x, d)
        rest = fn.op(S.OpUMod, i64, x, d)
        up = fn.op(S.OpSelect, i64, fn.op(OpIEqual, self.sh.bool, rest, zero), zero, one)
        return fn.op(S.OpIAdd, i64, fn.op(S.OpUDiv, i64, x, d), up)

    def _select(self, c: int, a: int, b: int) -> int:
        held = self.fn.op(OpIEqual, self.sh.bool, c, self.asm.const_int(64, 0))
        return self.fn.op(S.OpSelect, self.i64, held, b, a)

    def _outside(self, v: int, lo: int, hi: int) -> int:
        """v < lo or v > hi (signed)."""
        return self._or(self._lt(v, self.asm.const_int(64, lo)),
                        self.fn.op(OpSGreaterThan, self.sh.bool, v, self.asm.const_int(64, hi)))

    def _lt(self, a: int, b: int) -> int:
        return self.fn.op(OpSLessThan, self.sh.bool, a, b)

    def _or(self, a: int, b: int) -> int:
        return self.fn.op(OpLogicalOr, self.sh.bool, a, b)

    def _not(self, a: int) -> int:
        return self.fn.op(OpLogicalNot, self.sh.bool, a)
