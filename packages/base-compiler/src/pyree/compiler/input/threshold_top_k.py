"""A top-k by searching for its k-th key a few bits at a time: each pass reads the line once,
where counting (``sort_scan.top_k``'s plans) compares every pair of a chunk. A batch of 64
vocabulary rows' top-50 counted 10^9 pairs (10x PyTorch's radix select on the H200).

Each element's key ``u`` is its ordinal (``sort_order.ordinal``) shifted to the ``key_bits``
it spans and made unsigned: keys order as the top-k does, equal where the elements tie. The
k-th smallest key ``T`` is built from the top bit down, ``BITS`` a pass: with ``acc`` the bits
decided above, the pass counts for each candidate ``acc + c << s`` (``c = 1 .. 2^BITS - 1``)
the keys below it, and the new digit is the number of candidates whose count stays below ``k``
(counts grow with ``c``). A pass is one Generic over the line in ``chunks`` (so that every
line keeps many workgroups busy) whose counts are packed in fields of i64 words (an element
adds a run of ones to the fields of the candidates above it), then one per line that adds the
chunks' words and compares every field with ``k - 1`` at once (fields with a spare top bit:
``(k - 1 + 2^(f-1)) - count`` keeps it set exactly where ``count <= k - 1``).

The top-k is then every key below ``T`` and the first ``k - #{u < T}`` equal to it, in place
order (ties by place, as the counted plans keep them). Each word of 32 places holds the bits of
the keys below ``T`` and of those equal to it, and their counts; the counts scanned along the
line give each member its slot (the members before it), where its place is stored. The ``k``
places are ranked by ``u`` then place (counting, ``k^2``) and every operand gathered there.
"""

from __future__ import annotations

import math

from pyree.compiler.input.body import convert
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.scalar import popcount
from pyree.compiler.input.sort_order import Order, ordinal
from pyree.compiler.kernel import (
    Acc,
    AffineExpr,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    LoopIndex,
    Result,
    Scatter,
    Select,
    int_bits,
    is_float,
)
from pyree.compiler.sizes import static_shape
from pyree.compiler.tensor_program import Constant, Generic, Value

BITS = 4  # key bits a pass decides: 15 candidates, 8 passes for f32 keys
WORD = 32  # places whose membership one i32 word holds
WORKGROUPS = 512  # a pass's chunks over all lines: every multiprocessor of a large GPU busy
MIN_CHUNK = 1024  # elements of a chunk at least
MAX_CHUNKS = 32  # chunks of one line at most: the digest adds them in one expression
PLACE = "i32"
KEY = "i64"
# The search's time in ``sort_scan.topk_plan``'s loop steps (about 1.9 million a millisecond
# of a counted plan on the H200), fitted to bench/cuda/top_k_paths.py's runs of both forms on
# ten shapes (BENCHMARKS.md): each of its small Generics is worth ``GENERIC_STEPS`` (~2.7 µs,
# times the targets' ``dispatch_cost``), each element ``ELEMENT_STEPS`` over all its passes
# where the chunks fill ``FULL_WORKGROUPS`` (proportionally more where they do not).
GENERIC_STEPS = 5_000_000
ELEMENT_STEPS = 75
FULL_WORKGROUPS = 512
# Generics besides two a pass: the membership, the word scan (up to three), the scatter, the
# keys, the ranks, the pick.
SMALL_GENERICS = 8


def key_bits(order: Order) -> tuple[int, int] | None:
    """(low bits of the ordinal that every key shares, bits the rest spans) for an order that
    ``ordinal`` keys; None for other orders. f16/bf16 ordinals are f32's with 13/16 constant low
    bits (all zero, or all one where negated); an integer of ``w < 32`` bits spans ``w + 1``
    (sign or zero extended, then perhaps negated)."""
    if ordinal(order) is None:
        return None
    dtype = order.levels[0][0].dtype
    if dtype == "f16":
        return 13, 19
    if dtype == "bf16":
        return 16, 16
    width = int_bits(dtype)
    return (0, 32) if is_float(dtype) or width >= 32 else (0, width + 1)


def search_cost(n: int, k: int, lines: int, order: Order, dispatch_cost: float) -> float | None:
    """The search's time in ``sort_scan.topk_plan``'s loop steps; None where it does not
    apply."""
    bits = key_bits(order)
    if bits is None or not 1 <= k <= n or n >= 2**31:
        return None
    passes = -(-bits[1] // BITS)
    spread = max(1.0, FULL_WORKGROUPS / (lines * _chunks(n, lines)))
    return (lines * (n * ELEMENT_STEPS * spread + 2 * k * k)
            + (2 * passes + SMALL_GENERICS) * GENERIC_STEPS * dispatch_cost)


def _chunks(n: int, lines: int) -> int:
    """The chunks of a line that a pass counts in: ``WORKGROUPS`` over all lines, within
    bounds."""
    return max(1, min(MAX_CHUNKS, -(-WORKGROUPS // lines), n // MIN_CHUNK))


def applies(shape: tuple, d: int, k: int, order: Order | None) -> bool:
    return order is not None and static_shape(shape) and key_bits(order) is not None \
        and 1 <= k <= shape[d] < 2**31


def threshold_top_k(fn: FunctionLowering, operands: list[Value], d: int, k: int, order: Order,
                    scan, origin: str, where: str) -> list[Value]:
    """The first ``k`` along ``d`` of ``operands`` in ``order`` (ties by place). ``scan``:
    ``sort_scan.emit_scan``, whose module calls this one."""
    search = _Search(fn, operands, d, k, order, origin, where)
    masks, counts = search.membership(search.kth_key())
    before = fn.new_value(KEY, counts.shape, "topk_words_scan")
    scan(fn, counts, d, lambda a, b, inputs, loops: Binary("add", a, b, KEY), None, before,
         origin, where)
    return search.in_order(search.gathered(masks, counts, before))


def _i64(bits: int) -> Const:
    """A 64-bit pattern as an i64 constant (two's complement)."""
    return Const(bits - (1 << 64) if bits >= 1 << 63 else bits, KEY)


def _is_place(fn: FunctionLowering, v: Value, d: int) -> bool:
    """Whether ``v`` is ``sort_scan.iota`` along ``d``: gathered at a place, it is the place."""
    return any(isinstance(op, Generic) and len(op.results) == 1 and op.results[0] is v
               and not op.inputs
               and op.outputs[0].value == convert(LoopIndex(d), v.dtype) for op in fn.ops)


class _Search:
    def __init__(self, fn: FunctionLowering, operands: list[Value], d: int, k: int, order: Order,
                 origin: str, where: str):
        self.fn, self.operands, self.d, self.k = fn, operands, d, k
        self.origin, self.where = origin, where
        self.shape, self.rank, self.n = operands[0].shape, len(operands[0].shape), operands[0].shape[d]
        self.ordinal, self.compared = ordinal(order), order.compared
        self.drop, self.bits = key_bits(order)
        self.line_shape = tuple(1 if q == d else s for q, s in enumerate(self.shape))
        self.places = [_is_place(fn, v, d) for v in operands]

    def _emit(self, inputs: Inputs, values: list[Value], results, loop_ranges, num_parallel):
        self.fn.emit(Generic(inputs.values, values, tuple(results), loop_ranges, num_parallel,
                             self.where, self.origin))

    def _key(self, elements: list[Expr]) -> Expr:
        """``u`` of an element (i64, in ``[0, 2^bits)``)."""
        u = Cast("extsi", self.ordinal(elements), KEY)
        if self.drop:
            u = Binary("shr", u, Const(self.drop, KEY), KEY)
        return Binary("add", u, Const(1 << (self.bits - 1), KEY), KEY)

    def _elements(self, inputs: Inputs, index: tuple[AffineExpr, ...]) -> list[Expr | None]:
        """The compared operands' elements at ``index`` (None for the others)."""
        return [inputs.load(v, index) if m in self.compared else None
                for m, v in enumerate(self.operands)]

    def _line(self, num_loops: int) -> tuple[AffineExpr, ...]:
        """A per-line value's index (its dim ``d`` of one) in a nest over the line's loops."""
        loops = AffineExpr.identity(num_loops)
        return tuple(AffineExpr.loop(num_loops, None) if q == self.d else loops[q]
                     for q in range(self.rank))

    def _split(self, size: int) -> tuple[tuple[AffineExpr, ...], Expr]:
        """The element index and place of a nest whose loop ``d`` counts blocks of ``size``
        and whose last loop (``rank``) the place in a block."""
        rank = self.rank
        loops = AffineExpr.identity(rank + 1)
        at = tuple(AffineExpr(tuple(size if q == self.d else int(q == rank)
                                    for q in range(rank + 1))) if q == self.d else loops[q]
                   for q in range(rank))
        place = Binary("add", Binary("mul", convert(LoopIndex(self.d), PLACE), Const(size, PLACE),
                                     PLACE), convert(LoopIndex(rank), PLACE), PLACE)
        return at, place

    def kth_key(self) -> Value:
        """``T`` per line (shaped as the line with dim ``d`` of one)."""
        chunks = _chunks(self.n, math.prod(self.line_shape))
        size = -(-self.n // chunks)
        chunk_shape = tuple(chunks if q == self.d else s for q, s in enumerate(self.shape))
        field = 16 if self.n < 1 << 15 else 32  # a count and a spare top bit
        per_word = 64 // field
        decided = None
        for shift in range(self.bits - BITS, -BITS, -BITS):
            bits = BITS + min(shift, 0)
            shift = max(shift, 0)
            fields = (1 << bits) - 1  # candidate c (1 based) counts in field c - 1
            inputs = Inputs()
            at, place = self._split(size)
            acc = Const(0, KEY) if decided is None else inputs.load(decided, self._line(self.rank + 1))
            # the element's digit past acc: negative below it
            digit = Binary("shr", Binary("sub", self._key(self._elements(inputs, at)), acc, KEY),
                           Const(shift, KEY), KEY)
            results, words = [], []
            for w in range(-(-fields // per_word)):
                ones = Const(sum(1 << (field * f) for f in range(min(per_word, fields - w * per_word))),
                             KEY)
                skip = Binary("sub", digit, Const(w * per_word, KEY), KEY)  # fields it leaves out
                added = Select(Compare("lt", skip, Const(0, KEY)), ones,
                               Select(Compare("ge", skip, Const(per_word, KEY)), Const(0, KEY),
                                      Binary("shl", ones, Binary("mul", skip, Const(field, KEY), KEY),
                                             KEY), KEY), KEY)
                if chunks * size > self.n:
                    added = Select(Compare("lt", place, Const(self.n, PLACE)), added, Const(0, KEY),
                                   KEY)
                results.append(Result(w, AffineExpr.identity(self.rank + 1)[:self.rank],
                                      Binary("add", Acc(w, KEY), added, KEY), init=Const(0, KEY)))
                words.append(self.fn.new_value(KEY, chunk_shape, "topk_counts"))
            self._emit(inputs, words, results, chunk_shape + (size,), self.rank)
            decided = self._digest(decided, words, shift, fields, field, chunks)
        return decided

    def _digest(self, decided: Value | None, words: list[Value], shift: int, fields: int,
                field: int, chunks: int) -> Value:
        """The bits decided after a pass: its digit is the number of candidates whose count
        stays below ``k`` (the chunks' words added, then every field compared at once)."""
        inputs, here = Inputs(), AffineExpr.identity(self.rank)
        per_word = 64 // field
        digit = Const(0, KEY)
        for w, word in enumerate(words):
            total = None
            for c in range(chunks):
                index = tuple(AffineExpr(ix.coeffs, c) if q == self.d else ix
                              for q, ix in enumerate(here))
                part = inputs.load(word, index)
                total = part if total is None else Binary("add", total, part, KEY)
            used = min(per_word, fields - w * per_word)
            top = sum(1 << (field * f + field - 1) for f in range(used))
            limit = sum((self.k - 1) << (field * f) for f in range(used))
            below = Binary("and", Binary("sub", _i64(top | limit), total, KEY), _i64(top), KEY)
            digit = Binary("add", digit, popcount(below, KEY), KEY)
        acc = Binary("shl", digit, Const(shift, KEY), KEY)
        if decided is not None:
            acc = Binary("add", inputs.load(decided, here), acc, KEY)
        out = self.fn.new_value(KEY, self.line_shape, "topk_decided")
        self._emit(inputs, [out], [Result(0, here, acc)], self.line_shape, self.rank)
        return out

    def membership(self, kth: Value) -> tuple[list[Value], Value]:
        """Per word of ``WORD`` places: the bits of its keys below ``T`` and of those equal
        to it, and their counts packed (below in the high half, equal in the low)."""
        rank, words = self.rank, -(-self.n // WORD)
        word_shape = tuple(words if q == self.d else s for q, s in enumerate(self.shape))
        here = AffineExpr.identity(rank + 1)[:rank]
        at, place = self._split(WORD)
        inputs = Inputs()
        t = inputs.load(kth, self._line(rank + 1))
        key = self._key(self._elements(inputs, at))
        inside = Compare("lt", place, Const(self.n, PLACE))
        bit = Binary("shl", Const(1, PLACE), convert(LoopIndex(rank), PLACE), PLACE)
        zero = Const(0, PLACE)
        results, values = [], []
        for m, test in enumerate(("lt", "eq")):
            taken = Select(inside, Select(Compare(test, key, t), bit, zero, PLACE), zero, PLACE)
            results.append(Result(m, here, Binary("or", Acc(m, PLACE), taken, PLACE), init=zero))
            values.append(self.fn.new_value(PLACE, word_shape, "topk_words"))
        counted = Select(Compare("lt", key, t), Const(1 << 32, KEY),
                         Select(Compare("eq", key, t), Const(1, KEY), Const(0, KEY), KEY), KEY)
        counted = Select(inside, counted, Const(0, KEY), KEY)
        results.append(Result(2, here, Binary("add", Acc(2, KEY), counted, KEY), init=Const(0, KEY)))
        counts = self.fn.new_value(KEY, word_shape, "topk_word_counts")
        self._emit(inputs, values + [counts], results, word_shape + (WORD,), rank)
        return values, counts

    def gathered(self, masks: list[Value], counts: Value, before: Value) -> Value:
        """The members' places, each stored at the number of members before it along the line
        (32-bit stores: every target scatters those)."""
        rank, k = self.rank, self.k
        words = AffineExpr.identity(rank + 1)[:rank]
        last = tuple(AffineExpr(ix.coeffs[:self.d] + (0,) + ix.coeffs[self.d + 1:],
                                before.shape[self.d] - 1) if q == self.d else ix
                     for q, ix in enumerate(words))
        inputs = Inputs()
        t = convert(LoopIndex(rank), PLACE)
        lower = Binary("sub", Binary("shl", Const(1, PLACE), t, PLACE), Const(1, PLACE), PLACE)
        earlier = Binary("sub", inputs.load(before, words), inputs.load(counts, words), KEY)
        below, equal = (inputs.load(mask, words) for mask in masks)

        def has(mask: Expr) -> Expr:
            return Compare("ne", Binary("and", Binary("shr", mask, t, PLACE), Const(1, PLACE),
                                        PLACE), Const(0, PLACE))

        def rank_in(mask: Expr, half: Expr) -> Expr:  # the members of mask before the place
            return Binary("add", Cast("trunci", half, PLACE),
                          popcount(Binary("and", mask, lower, PLACE), PLACE), PLACE)

        low_half = Binary("and", earlier, Const(2**32 - 1, KEY), KEY)
        less_rank = rank_in(below, Binary("shr", earlier, Const(32, KEY), KEY))
        equal_rank = rank_in(equal, low_half)
        total_below = Binary("shr", inputs.load(before, last), Const(32, KEY), KEY)
        wanted = Binary("sub", Const(k, PLACE), Cast("trunci", total_below, PLACE), PLACE)
        member = Binary("or", has(below), Binary("and", has(equal),
                                                 Compare("lt", equal_rank, wanted), "i1"), "i1")
        slot = Binary("add", less_rank, Binary("min", equal_rank, wanted, PLACE), PLACE)
        slot = Select(member, slot, Const(k, PLACE), PLACE)  # k: past the end, not stored
        _, place = self._split(WORD)
        out_shape = tuple(k if q == self.d else s for q, s in enumerate(self.shape))
        start = self.fn.new_value(PLACE, out_shape, "topk_start")
        self.fn.emit(Constant(start, splat=0, location=self.where))
        where_to = tuple(convert(slot, "index") if q == self.d else LoopIndex(q)
                         for q in range(rank))
        places = self.fn.new_value(PLACE, out_shape, "topk_places")
        result = Result(0, (), place, scatter=Scatter(where_to, inputs.binding(start)))
        self._emit(inputs, [places], [result], counts.shape + (WORD,), rank + 1)
        return places

    def _at(self, inputs: Inputs, place: Expr, m: int) -> Expr:
        """Operand ``m`` at ``place`` along the line (the place itself for an iota)."""
        v = self.operands[m]
        if self.places[m]:
            return convert(place, v.dtype)
        index = tuple(place if q == self.d else LoopIndex(q) for q in range(self.rank))
        return inputs.gather(v, index, self.where)

    def in_order(self, places: Value) -> list[Value]:
        """Every operand at ``places`` in the order of their keys, ties by place (ranked by
        counting, then picked)."""
        rank, shape = self.rank, places.shape
        here = AffineExpr.identity(rank)
        inputs = Inputs()
        place = inputs.load(places, here)
        key = self._key([self._at(inputs, place, m) if m in self.compared else None
                         for m in range(len(self.operands))])
        pair = Binary("or", Binary("shl", key, Const(31, KEY), KEY), convert(place, KEY), KEY)
        keys = self.fn.new_value(KEY, shape, "topk_keys")
        self._emit(inputs, [keys], [Result(0, here, pair)], shape, rank)

        loops = AffineExpr.identity(rank + 1)
        here = loops[:rank]
        there = tuple(AffineExpr.loop(rank + 1, rank) if q == self.d else loops[q]
                      for q in range(rank))
        inputs = Inputs()
        before = Compare("lt", inputs.load(keys, there), inputs.load(keys, here))
        ranks = self.fn.new_value(PLACE, shape, "topk_ranks")
        self._emit(inputs, [ranks], [Result(0, here, Binary(
            "add", Acc(0, PLACE), Select(before, Const(1, PLACE), Const(0, PLACE), PLACE), PLACE),
            init=Const(0, PLACE))], shape + (shape[self.d],), rank)

        inputs = Inputs()
        hit = Compare("eq", inputs.load(ranks, there), convert(LoopIndex(self.d), PLACE))
        place = inputs.load(places, there)
        results, values = [], []
        for m, v in enumerate(self.operands):
            bits = f"i{int_bits(v.dtype)}" if is_float(v.dtype) else v.dtype
            element = self._at(inputs, place, m)
            if bits != v.dtype:
                element = Cast("bitcast", element, bits)
            none = Const(False if bits == "i1" else 0, bits)
            results.append(Result(m, here, Binary("or", Acc(m, bits),
                                                  Select(hit, element, none, bits), bits),
                                  init=none, epilogue=None if bits == v.dtype
                                  else Cast("bitcast", Acc(m, bits), v.dtype)))
            values.append(self.fn.new_value(v.dtype, shape, f"topk{m}"))
        self._emit(inputs, values, results, shape + (shape[self.d],), rank)
        return values
