"""stablehlo.rng_bit_generator, bit for bit as XLA computes it (JAX's ``rng_bit_generator``).

Both algorithms are counter based: every output element is a pure function of the state and
its own position, so the op becomes parallel Generics over the output shape (no loop-carried
state). The layouts follow XLA's expander (``RngBitGeneratorExpander`` with ``prng.cc``), checked
against JAX on CPU; DEFAULT is PHILOX there (XLA's CPU and GPU pick it), so it is here too.

- THREE_FRY (state ``[key, counter]``): Threefry-2x32 (20 rounds) keyed by the key's two
  halves, applied to ``counter + i``. 64-bit outputs take both words of element i. 32-bit
  outputs split one dim (the first even one, else the largest) into pairs: the pair's two
  elements are the two words of one block, so the counter is the row-major index over the
  half shape. The new counter is ``counter + blocks``.
- PHILOX (state ``[key, counter_lo]``, whose counter high word is the key, or ``[key,
  counter_lo, counter_hi]``): Philox-4x32 (10 rounds) on the 128-bit ``counter + v``, where
  block v holds output elements 4v..4v+3 (32-bit) or 2v, 2v+1 (64-bit), in row-major order.

The state is 64-bit words (``tensor<2xui64>``, as the spec has it, or i64: read as the same
bits) or pairs of 32-bit elements (``tensor<4xi32>``, ui32 too, and PHILOX's ``6xi32``). XLA
itself takes only 64-bit states; JAX bitcasts its 4xui32 key to 2xui64 before the op, so no XLA
program carries a 32-bit state, and the programs that do are IREE's own (its e2e ``philox`` and
``three_fry`` tests), whose reading is taken here: the key pair (low, high), each counter word
(high, low). The new state is written back in that same order, so it reads back as the next
counter (IREE writes the counter low first, which the next call would misread).
Outputs of any 32- or 64-bit type carry the unsigned bits (XLA's f32 is its ui32); 8- and 16-bit
outputs are the low bits of the 32-bit output of the same shape, and the state moves as for that
one (XLA's ``*RngBitNarrow``).

Expressions are frozen dataclasses that hash their whole tree, and Threefry's rounds reuse
both words, so one 20-round expression would be exponentially large: each stage of rounds is
its own multi-result Generic (fusion keeps those apart), the words in between materialized:
five stages of four Threefry rounds, two of five Philox rounds. Rotations read the word once:
``(x * (2**32 + 1)) >> (32 - r)`` in 64 bits.
"""

from __future__ import annotations

import math

from pyree.compiler.errors import CompileError
from pyree.compiler.input.dialects.stablehlo import HloAttr
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.parser import location_of
from pyree.compiler.input.stablehlo.common import prop, width
from pyree.compiler.input.types import tensor_type_of
from pyree.compiler.kernel import (
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Result,
    Select,
)
from pyree.compiler.tensor_program import Generic, Value
from xdsl.ir import Operation

U32, U64 = "ui32", "ui64"
_THREEFRY_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
_PHILOX_M = (0xD2511F53, 0xCD9E8D57)
_PHILOX_W = (0x9E3779B9, 0xBB67AE85)


def _b(op: str, a: Expr, b: Expr | int) -> Expr:
    if isinstance(b, int):
        b = Const(b, a.dtype)
    return Binary(op, a, b, a.dtype)


def _lo(x: Expr) -> Expr:
    return Cast("trunci", x, U32)


def _hi(x: Expr) -> Expr:
    return Cast("trunci", _b("shr", x, 32), U32)


def _wide(x: Expr) -> Expr:
    return Cast("extui", x, U64)


def _rotl(x: Expr, r: int) -> Expr:
    """32-bit rotate left reading ``x`` once: the high half of ``x:x`` shifted."""
    return _lo(_b("shr", _b("mul", _wide(x), (1 << 32) + 1), 32 - r))


def _to_u64(x: Expr) -> Expr:
    return x if x.dtype == U64 else Cast("bitcast", x, U64)


def _algorithm(op: Operation, where: str) -> str:
    attr = prop(op, "rng_algorithm")
    word = attr.data.split()[-1] if isinstance(attr, HloAttr) else "DEFAULT"
    if word not in ("DEFAULT", "THREE_FRY", "PHILOX"):
        raise CompileError(f"'{op.name}': unknown rng_algorithm {word}", where)
    return "PHILOX" if word == "DEFAULT" else word


def lower_rng_bit_generator(fn: FunctionLowering, op: Operation) -> None:
    where = location_of(op)
    algorithm = _algorithm(op, where)
    state = fn.tensor(op.operands[0], where)
    dtype, shape = tensor_type_of(op.results[1].type, where)
    bits = width(dtype)
    words = _words(state)
    if words is None:
        raise CompileError(f"'{op.name}': the state must be a 1-D tensor of 64-bit integers "
                           f"(or of 32-bit (low, high) pairs), not {state.dtype}"
                           f"{list(state.shape)}", where)
    sizes = {"THREE_FRY": (2,), "PHILOX": (2, 3)}[algorithm]
    if words not in sizes:
        raise CompileError(f"'{op.name}': {algorithm} needs a state of "
                           f"{' or '.join(map(str, sizes))} 64-bit words, not {words}", where)
    if bits not in (8, 16, 32, 64):
        raise CompileError(f"'{op.name}': {algorithm} with {dtype} outputs is not supported "
                           "(only 8-, 16-, 32- and 64-bit element types)", where)
    generate = _threefry if algorithm == "THREE_FRY" else _philox
    build, blocks = generate(fn, op, state, shape, bits, where)
    out = fn.result_value(op.results[1], where)
    rank = len(shape)
    inputs = Inputs()
    value = build(inputs)
    if bits < 32:  # the low bits of the 32-bit output
        value = Cast("trunci", value, f"ui{bits}")
    if value.dtype != dtype:  # f32, i32, ...: the same bits
        value = Cast("bitcast", value, dtype)
    fn.emit(Generic(inputs.values, [out], (Result(0, AffineExpr.identity(rank), value),), shape, rank,
                    where, op.name))
    _new_state(fn, op, state, blocks, where)


def _words(state: Value) -> int | None:
    """How many 64-bit words the state holds: one per 64-bit element, or one per pair of
    32-bit elements."""
    if len(state.shape) != 1 or state.dtype not in (U64, "i64", U32, "i32"):
        return None
    n = state.shape[0]
    return n if width(state.dtype) == 64 else (n // 2 if n % 2 == 0 else None)


def _state_word(inputs: Inputs, state: Value, k: int, rank: int) -> Expr:
    """64-bit word ``k`` of the state, read at every loop iteration."""
    if width(state.dtype) == 64:
        return _to_u64(inputs.load(state, (AffineExpr.loop(rank, None, const=k),)))
    first, second = (_wide(Cast("bitcast", x, U32) if x.dtype != U32 else x)
                     for x in (inputs.load(state, (AffineExpr.loop(rank, None, const=2 * k + h),))
                               for h in (0, 1)))
    lo, hi = (first, second) if k == 0 else (second, first)  # the key low first, counters high
    return _b("or", _b("shl", hi, 32), lo)


def _linear(shape: tuple[int, ...], index: list[Expr]) -> Expr:
    """Row-major linear index (index dtype) of ``index`` in ``shape``."""
    out: Expr = Const(0, "index")
    stride = 1
    for n, ix in reversed(list(zip(shape, index))):
        out = _b("add", out, ix if stride == 1 else _b("mul", ix, stride))
        stride *= n
    return out


def _new_state(fn: FunctionLowering, op: Operation, state: Value, blocks: int,
               where: str) -> None:
    """``[key, counter + blocks]``, carrying into a third word (PHILOX's counter high)."""
    out = fn.result_value(op.results[0], where)
    inputs = Inputs()
    key, lo = (_state_word(inputs, state, k, 1) for k in range(2))
    new_lo = _b("add", lo, blocks)
    pairs = width(state.dtype) == 32
    at = _b("div", LoopIndex(0), 2) if pairs else LoopIndex(0)
    value = Select(Compare("eq", at, Const(0, "index")), key, new_lo, U64)
    if _words(state) == 3:
        hi = _state_word(inputs, state, 2, 1)
        carry = Select(Compare("lt", new_lo, lo), Const(1, U64), Const(0, U64), U64)
        value = Select(Compare("eq", at, Const(2, "index")), _b("add", hi, carry), value, U64)
    if pairs:  # as _state_word reads them: the key's pair low first, a counter's high first
        even = Compare("eq", _b("rem", LoopIndex(0), 2), Const(0, "index"))
        lo, hi = _lo(value), _hi(value)
        value = Select(Compare("eq", at, Const(0, "index")), Select(even, lo, hi, U32),
                       Select(even, hi, lo, U32), U32)
    if out.dtype != value.dtype:
        value = Cast("bitcast", value, out.dtype)
    fn.emit(Generic(inputs.values, [out], (Result(0, (AffineExpr.loop(1, 0),), value),), out.shape, 1,
                    where, op.name))


def _stage(fn: FunctionLowering, shape: tuple[int, ...], build, count: int, where: str,
           origin: str) -> list[Value]:
    """One Generic over ``shape`` whose ``count`` results are ``build(inputs)``."""
    rank = len(shape)
    outs = [fn.new_value(U32, shape, "rng") for _ in range(count)]
    inputs = Inputs()
    values = build(inputs)
    fn.emit(Generic(inputs.values, outs,
                    tuple(Result(k, AffineExpr.identity(rank), v) for k, v in enumerate(values)),
                    shape, rank, where, origin))
    return outs


def _threefry(fn: FunctionLowering, op: Operation, state: Value, shape: tuple[int, ...],
              bits: int, where: str):
    rank = len(shape)
    loops = [LoopIndex(d) for d in range(rank)]
    lane: Expr | None = None
    if bits <= 32 and rank:
        split = next((d for d, n in enumerate(shape) if n % 2 == 0),
                     max(range(rank), key=lambda d: (shape[d], -d)))
        half = list(shape)
        half[split] = (shape[split] + 1) // 2
        lane = _b("rem", loops[split], 2)
        loops[split] = _b("div", loops[split], 2)
        blocks = math.prod(half)
    else:
        half = list(shape)
        blocks = math.prod(shape)

    def keys(inputs: Inputs) -> list[Expr]:
        key = _state_word(inputs, state, 0, rank)
        k0, k1 = _lo(key), _hi(key)
        return [k0, k1, _b("xor", _b("xor", k0, k1), 0x1BD11BDA)]

    def first(inputs: Inputs) -> list[Expr]:
        ks = keys(inputs)
        counter = _b("add", _state_word(inputs, state, 1, rank),
                     Cast("bitcast", _linear(tuple(half), loops), U64))
        x = [_b("add", _lo(counter), ks[0]), _b("add", _hi(counter), ks[1])]
        return _threefry_rounds(x, ks, 0)

    words = _stage(fn, shape, first, 2, where, op.name)
    for group in range(1, 5):
        def step(inputs: Inputs, prev=words, group=group) -> list[Expr]:
            x = [inputs.load(v, AffineExpr.identity(rank)) for v in prev]
            return _threefry_rounds(x, keys(inputs), group)
        words = _stage(fn, shape, step, 2, where, op.name)

    def result(inputs: Inputs) -> Expr:
        x0, x1 = (inputs.load(v, AffineExpr.identity(rank)) for v in words)
        if bits == 64:
            return _b("or", _b("shl", _wide(x1), 32), _wide(x0))
        if lane is None:
            return x0
        return Select(Compare("eq", lane, Const(0, "index")), x0, x1, U32)

    return result, blocks


def _threefry_rounds(x: list[Expr], ks: list[Expr], group: int) -> list[Expr]:
    """Four rounds, then the key injection that follows them (group 0..4)."""
    x0, x1 = x
    for r in _THREEFRY_ROTATIONS[group % 2]:
        x0 = _b("add", x0, x1)
        x1 = _b("xor", _rotl(x1, r), x0)
    x0 = _b("add", x0, ks[(group + 1) % 3])
    x1 = _b("add", _b("add", x1, ks[(group + 2) % 3]), group + 1)
    return [x0, x1]


def _philox(fn: FunctionLowering, op: Operation, state: Value, shape: tuple[int, ...],
            bits: int, where: str):
    rank = len(shape)
    per_block = 4 if bits <= 32 else 2
    total = math.prod(shape)
    blocks = -(-total // per_block)
    j = _linear(shape, [LoopIndex(d) for d in range(rank)])
    v, lane = _b("div", j, per_block), _b("rem", j, per_block)

    def key_of(inputs: Inputs) -> list[Expr]:
        key = _state_word(inputs, state, 0, rank)
        return [_lo(key), _hi(key)]

    def first(inputs: Inputs) -> list[Expr]:
        lo = _state_word(inputs, state, 1, rank)
        hi = _state_word(inputs, state, 2 if _words(state) == 3 else 0, rank)
        clo = _b("add", lo, Cast("bitcast", v, U64))
        chi = _b("add", hi, Select(Compare("lt", clo, lo), Const(1, U64), Const(0, U64), U64))
        return _philox_rounds([_lo(clo), _hi(clo), _lo(chi), _hi(chi)], key_of(inputs), 0, 5)

    words = _stage(fn, shape, first, 4, where, op.name)

    def second(inputs: Inputs) -> list[Expr]:
        x = [inputs.load(w, AffineExpr.identity(rank)) for w in words]
        return _philox_rounds(x, key_of(inputs), 5, 10)

    words = _stage(fn, shape, second, 4, where, op.name)

    def result(inputs: Inputs) -> Expr:
        x = [inputs.load(w, AffineExpr.identity(rank)) for w in words]
        if bits == 64:
            x = [_b("or", _b("shl", _wide(x[2 * k + 1]), 32), _wide(x[2 * k]))
                 for k in range(2)]
        out = x[-1]
        for k in range(per_block - 2, -1, -1):
            out = Select(Compare("eq", lane, Const(k, "index")), x[k], out, out.dtype)
        return out

    return result, blocks


def _philox_rounds(x: list[Expr], key: list[Expr], start: int, stop: int) -> list[Expr]:
    """Rounds ``start..stop-1``; round r uses the key raised r times by the Weyl constants."""
    key = [_b("add", k, (w * start) & 0xFFFFFFFF) if start else k
           for k, w in zip(key, _PHILOX_W)]
    for _ in range(start, stop):
        p0 = _b("mul", _wide(x[0]), _PHILOX_M[0])
        p1 = _b("mul", _wide(x[2]), _PHILOX_M[1])
        x = [_b("xor", _b("xor", _hi(p1), x[1]), key[0]), _lo(p1),
             _b("xor", _b("xor", _hi(p0), x[3]), key[1]), _lo(p0)]
        key = [_b("add", k, w) for k, w in zip(key, _PHILOX_W)]
    return x
