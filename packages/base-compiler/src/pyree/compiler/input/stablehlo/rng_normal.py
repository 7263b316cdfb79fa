"""stablehlo.rng with a NORMAL distribution, element for element as IREE expands it (its
StableHLO preprocessing, ``ExpandRngNormal``; its e2e ``rng_normal`` test checks the values).

At compile time, for the result's n elements (rounded up to even), pairs of uniform numbers
``u1, u2`` are drawn from C++'s ``std::mt19937`` seeded 0 through
``std::uniform_real_distribution<double>(0, 1)`` (two 32-bit draws per number, ``(a + b 2^32) /
2^64``), each rounded to f32, redrawing a pair while ``u1 <= f32 epsilon``. With
``s = f32(-2 log u1)``, ``c = f32(cos(f32(2 pi) u2))`` and the sine alike, the result's flat
elements are ``sigma sqrt(s_i) c_i + mu`` for the first half and ``sigma sqrt(s_i) sin_i + mu``
for the second, cut to n. It is stateless, as IREE's is: every call, and every NORMAL rng op of
that shape, gives the same numbers.
"""

from __future__ import annotations

import math
import random
from functools import cache

import numpy as np
from pyree.compiler.errors import CompileError
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import emit_map
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import AffineExpr, Binary, Expr, Unary
from pyree.compiler.tensor_program import Constant
from xdsl.ir import Operation


def _mt19937(seed: int) -> random.Random:
    """Python's Mersenne Twister in the state ``std::mt19937(seed)`` starts from
    (``init_genrand``; Python seeds its own with ``init_by_array``)."""
    state = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        state.append((1812433253 * (state[-1] ^ (state[-1] >> 30)) + i) & 0xFFFFFFFF)
    generator = random.Random()
    generator.setstate((3, (*state, 624), None))
    return generator


@cache
def box_muller_tables(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(s, t) for n elements: the flat result is ``sigma * sqrt(s) * t + mu``."""
    generator = _mt19937(0)
    eps, two_pi = np.finfo(np.float32).eps, np.float32(2.0 * math.pi)

    def uniform() -> np.float32:
        low, high = generator.getrandbits(32), generator.getrandbits(32)
        return np.float32((low + high * 2.0 ** 32) / 2.0 ** 64)

    s, cos, sin = [], [], []
    for _ in range((n + 1) // 2):
        u1, u2 = uniform(), uniform()
        while u1 <= eps:
            u1, u2 = uniform(), uniform()
        s.append(-2.0 * math.log(float(u1)))
        angle = float(two_pi * u2)
        cos.append(math.cos(angle))
        sin.append(math.sin(angle))
    return (np.array(s + s, np.float32)[:n], np.array(cos + sin, np.float32)[:n])


def lower_rng_normal(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    mu, sigma = (fn.tensor(v, where) for v in op.operands[:2])
    dtype, shape = tensor_type_of(op.results[0].type, where)
    if mu.shape or sigma.shape or dtype != "f32" or mu.dtype != "f32":
        raise CompileError("stablehlo.rng NORMAL takes scalar f32 mu and sigma and makes f32 "
                           "(as IREE's expansion does)", where)
    tables = []
    for name, table in zip(("rng_normal_s", "rng_normal_t"),
                           box_muller_tables(int(np.prod(shape, dtype=np.int64)))):
        value = fn.new_value("f32", shape, name)
        fn.emit(Constant(value, data=table.reshape(shape), location=where))
        tables.append(value)
    index = AffineExpr.identity(len(shape))

    def build(inputs: Inputs) -> Expr:
        s, t = (inputs.load(v, index) for v in tables)
        mag = Binary("mul", inputs.load(sigma, ()), Unary("sqrt", s, "f32"), "f32")
        return Binary("add", Binary("mul", mag, t, "f32"), inputs.load(mu, ()), "f32")

    emit_map(fn, op, build)
