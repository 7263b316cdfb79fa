"""A top-k by searching for its k-th key a few bits at a time: each pass reads the line once,
where counting (``sort_scan.top_k``'s plans) compares every pair of a chunk. A batch of 64
vocabulary rows' top-50 counted 10^9 pairs (10x PyTorch's radix select on the H200).

Each element's key ``u`` (unsigned, ``key_bits`` wide) orders as the top-k does and is equal
where elements tie: a float's own bits made total with integer operations alone (-0.0 as 0.0,
one NaN above +inf: NVIDIA's Vulkan driver had ordered an f16 NaN below +inf through float
compares), an integer's ``sort_order.ordinal``. The k-th smallest key ``T`` is built from the
top bit down, ``BITS`` a pass. With ``acc`` the bits decided so far, a pass counts the keys in
each of the 16 buckets ``[acc + c << s, acc + (c + 1) << s)`` (a key below ``acc`` wraps past
them): one Generic over the line in ``chunks`` (many workgroups for few lines), an element
adding one to its bucket's field of a few i64 words. Then one Generic per line (the digest)
adds the chunks' words; a multiplication sums each word's fields up to every field, the words
before and the keys below ``acc`` are added, so field ``c - 1`` holds the keys below candidate
``acc + c << s``, and every field is compared with ``k - 1`` at once (a spare top bit per
field: ``(k - 1 + 2^(f-1)) - count`` keeps it set exactly where ``count <= k - 1``). The digit
is the number of such candidates (counts grow with ``c``); the digest keeps ``acc << 32`` and
the keys below it (the picked field) for the next pass.

The top-k is then every key below ``T`` and the first ``k - #{u < T}`` equal to it in place
order (ties by place, as the counted plans keep them). Each word of 32 places holds the bits of
its keys below ``T`` and of those equal to it, and their counts; the counts scanned along the
line and the popcounts below a place give each member its slot (the members before it), where
its place is stored. The ``k`` places are ranked by key then place (counting, ``k^2``) and every
operand gathered there.
"""

from __future__ import annotations

import math

from pyree.compiler.input.body import convert
from pyree.compiler.input.function import FunctionLowering
from pyree.compiler.input.inputs import Inputs
from pyree.compiler.input.scalar import popcount
from pyree.compiler.input.sort_order import Order, ordinal, single_key
from pyree.compiler.input.tensor_ops import iota, permuted
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
    Unary,
    int_bits,
    is_float,
)
from pyree.compiler.sizes import static_shape
from pyree.compiler.tensor_program import Constant, Generic, Value

BITS = 4  # key bits a pass decides: 16 buckets, 8 passes for 32-bit keys, 4 for 16-bit ones
WORD = 32  # places whose membership one i32 word holds
WORKGROUPS = 512  # a pass's chunks over all lines: every multiprocessor of a large GPU busy
MIN_CHUNK = 1024  # elements of a chunk at least
MAX_CHUNKS = 16  # chunks of one line at most: the digest adds them in one expression
PLACE = "i32"
KEY = "i64"
# The search's time in ``sort_scan.topk_plan``'s loop steps (about 1.9 million a millisecond
# of a counted plan on the H200), fitted to bench/cuda/top_k_paths.py's runs of both forms on
# ten shapes (BENCHMARKS.md): each of its small Generics is worth ``GENERIC_STEPS`` (~2.7 µs,
# times the targets' ``dispatch_cost``), each element ``PASS_STEPS`` a pass (75 over a 32-bit
# key's eight) where the chunks fill ``FULL_WORKGROUPS`` (proportionally more where they do not).
GENERIC_STEPS = 5_000_000
PASS_STEPS = 9.4
FULL_WORKGROUPS = 256
# Generics besides two a pass: the membership, the word scan (up to three), the scatter, the
# keys, the ranks, the pick.
SMALL_GENERICS = 8


FLOAT_BITS = {"f16": (16, 0x7C00), "bf16": (16, 0x7F80), "f32": (32, 0x7F800000)}  # width, +inf


def key_bits(order: Order) -> int | None:
    """The bits an element's key spans for an order by one key of at most 32 bits; None for
    other orders. A float's key is its own bits' (16 for f16 and bf16); an integer of
    ``w < 32`` bits spans ``w + 1`` (sign or zero extended, then perhaps negated)."""
    if len(order.levels) != 1:
        return None
    dtype = order.levels[0][0].dtype
    if dtype in FLOAT_BITS:
        return FLOAT_BITS[dtype][0]
    if is_float(dtype) or ordinal(order) is None:
        return None
    width = int_bits(dtype)
    return 32 if width >= 32 else width + 1


def search_cost(n: int, k: int, lines: int, order: Order, dispatch_cost: float) -> float | None:
    """The search's time in ``sort_scan.topk_plan``'s loop steps; None where it does not
    apply."""
    bits = key_bits(order)
    if bits is None or not 1 <= k <= n:
        return None
    passes = -(-bits // BITS)
    spread = max(1.0, FULL_WORKGROUPS / (lines * _chunks(n, lines)))
    return (lines * (n * PASS_STEPS * passes * spread + 2 * k * k)
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
    ``sort_scan.emit_scan``, whose module calls this one. A line along an outer dim is moved
    innermost first (a top-50 down the columns of 32000 x 64 read each pass's chunks a column
    apart: 0.33 ms on the H200, where rows take 0.11), and the results moved back."""
    rank = len(operands[0].shape)
    if any(s != 1 for s in operands[0].shape[d + 1:]):
        order_ = [q for q in range(rank) if q != d] + [d]
        rows = [iota(fn, tuple(v.shape[q] for q in order_), rank - 1, v.dtype, where)
                if _is_place(fn, v, d) else permuted(fn, v, order_, where, origin, "topk_moved")
                for v in operands]
        back = [order_.index(q) for q in range(rank)]
        return [permuted(fn, v, back, where, origin, "topk_moved")
                for v in threshold_top_k(fn, rows, rank - 1, k, order, scan, origin, where)]
    search = _Search(fn, operands, d, k, order, origin, where)
    kth = search.kth_key()
    masks, counts = search.membership(kth)
    before = fn.new_value(KEY, counts.shape, "topk_words_scan")
    scan(fn, counts, d, lambda a, b, inputs, loops: Binary("add", a, b, KEY), None, before,
         origin, where)
    return search.in_order(search.gathered(kth, masks, counts, before))


def _i32(bits: int) -> int:
    """A 32-bit pattern as a signed value."""
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def _i64(bits: int) -> Const:
    """A 64-bit pattern as an i64 constant (two's complement)."""
    return Const(bits - (1 << 64) if bits >= 1 << 63 else bits, KEY)


def _is_place(fn: FunctionLowering, v: Value, d: int) -> bool:
    """Whether ``v`` is ``tensor_ops.iota`` along ``d``: gathered at a place, it is the place."""
    return any(isinstance(op, Generic) and len(op.results) == 1 and op.results[0] is v
               and not op.inputs
               and op.outputs[0].value == convert(LoopIndex(d), v.dtype) for op in fn.ops)


class _Search:
    def __init__(self, fn: FunctionLowering, operands: list[Value], d: int, k: int, order: Order,
                 origin: str, where: str):
        self.fn, self.operands, self.d, self.k = fn, operands, d, k
        self.origin, self.where = origin, where
        self.shape, self.rank, self.n = operands[0].shape, len(operands[0].shape), operands[0].shape[d]
        self.order, self.compared = order, order.compared
        self.bits = key_bits(order)
        self.line_shape = tuple(1 if q == d else s for q, s in enumerate(self.shape))
        self.places = [_is_place(fn, v, d) for v in operands]

    def _emit(self, inputs: Inputs, values: list[Value], results, loop_ranges, num_parallel):
        self.fn.emit(Generic(inputs.values, values, tuple(results), loop_ranges, num_parallel,
                             self.where, self.origin))

    def _key(self, elements: list[Expr | None]) -> Expr:
        """``u`` of an element (i32 in ``[0, 2^bits)``, compared unsigned)."""
        key, ascending = single_key(self.order, elements)
        if key.dtype in FLOAT_BITS:  # integer operations on the bits: no driver's float compare
            width, inf = FLOAT_BITS[key.dtype]
            t = f"i{width}"
            b = Cast("bitcast", key, t)
            magnitude = Binary("and", b, Const(2 ** (width - 1) - 1, t), t)
            b = Select(Compare("gt", magnitude, Const(inf, t)), Const(inf + 1, t),  # one NaN
                       Select(Compare("eq", magnitude, Const(0, t)), Const(0, t), b, t), t)
            b = Binary("xor", b, Binary("and", Binary("shr", b, Const(width - 1, t), t),
                                        Const(2 ** (width - 1) - 1, t), t), t)
            o = b if width == 32 else Cast("extsi", b, PLACE)
            o = o if ascending else Unary("not", o, PLACE)
        else:
            o = ordinal(self.order)(elements)
        return Cast("bitcast", Binary("add", o, Const(_i32(1 << (self.bits - 1)), PLACE), PLACE),
                    "ui32")

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
        """Per line (shaped as the line with dim ``d`` of one), ``T << 32 | #{u < T}``."""
        chunks = _chunks(self.n, math.prod(self.line_shape))
        size = -(-self.n // chunks)
        chunk_shape = tuple(chunks if q == self.d else s for q, s in enumerate(self.shape))
        field = 16 if self.n < 1 << 15 else 32  # a count and a spare top bit
        per_word, lane_bits = 64 // field, (64 // field).bit_length() - 1
        decided = None
        for shift in range(self.bits - BITS, -BITS, -BITS):
            bits, shift = BITS + min(shift, 0), max(shift, 0)
            inputs = Inputs()
            at, place = self._split(size)
            acc = Const(0, "ui32") if decided is None else \
                self._high(inputs.load(decided, self._line(self.rank + 1)))
            # the element's bucket past acc (wrapping below it: never a bucket)
            bucket = Binary("shr", Binary("sub", self._key(self._elements(inputs, at)), acc, "ui32"),
                            Const(shift, "ui32"), "ui32")
            one = Binary("shl", Const(1, KEY), Cast("extui", Binary(
                "mul", Binary("and", bucket, Const(per_word - 1, "ui32"), "ui32"),
                Const(field, "ui32"), "ui32"), KEY), KEY)
            word_of = Binary("shr", bucket, Const(lane_bits, "ui32"), "ui32")
            results, words = [], []
            for w in range(-(-(1 << bits) // per_word)):
                added = Select(Compare("eq", word_of, Const(w, "ui32")), one, Const(0, KEY), KEY)
                if chunks * size > self.n:
                    added = Select(Compare("lt", place, Const(self.n, PLACE)), added, Const(0, KEY),
                                   KEY)
                results.append(Result(w, AffineExpr.identity(self.rank + 1)[:self.rank],
                                      Binary("add", Acc(w, KEY), added, KEY), init=Const(0, KEY)))
                words.append(self.fn.new_value(KEY, chunk_shape, "topk_counts"))
            self._emit(inputs, words, results, chunk_shape + (size,), self.rank)
            decided = self._digest(decided, words, shift, bits, field, chunks)
        return decided

    @staticmethod
    def _high(decided: Expr) -> Expr:
        return Cast("bitcast", Cast("trunci", Binary("shr", decided, Const(32, KEY), KEY), PLACE),
                    "ui32")

    def _digest(self, decided: Value | None, words: list[Value], shift: int, bits: int,
                field: int, chunks: int) -> Value:
        """After a pass: the digit is the number of candidates ``acc + c << shift`` with at most
        ``k - 1`` keys below them. The chunks' words are added, each word's fields summed up
        to each field by one multiplication, the words before and the keys below ``acc``
        added to every field, and every field compared with ``k - 1`` at once (``(k - 1 +
        2^(f-1)) - count`` keeps the top bit exactly where ``count <= k - 1``)."""
        inputs, here = Inputs(), AffineExpr.identity(self.rank)
        per_word, mask = 64 // field, Const((1 << field) - 1, KEY)
        ones = sum(1 << (field * f) for f in range(per_word))
        below = Const(0, KEY) if decided is None else \
            Binary("and", inputs.load(decided, here), Const(2**32 - 1, KEY), KEY)
        counted, digit, carried = [], Const(0, KEY), below
        for w, word in enumerate(words):
            total = None
            for c in range(chunks):
                index = tuple(AffineExpr(ix.coeffs, c) if q == self.d else ix
                              for q, ix in enumerate(here))
                part = inputs.load(word, index)
                total = part if total is None else Binary("add", total, part, KEY)
            prefix = Binary("mul", total, _i64(ones), KEY)  # field j: fields 0..j added
            counts = Binary("add", prefix, Binary("mul", carried, _i64(ones), KEY), KEY)
            carried = Binary("add", carried, Binary("shr", prefix, Const(64 - field, KEY), KEY), KEY)
            counted.append(counts)
            real = min(per_word, (1 << bits) - 1 - w * per_word)  # field j counts candidate 4w+j+1
            top = sum(1 << (field * f + field - 1) for f in range(real))
            limit = sum((self.k - 1) << (field * f) for f in range(real))
            ok = Binary("and", Binary("sub", _i64(top | limit), counts, KEY), _i64(top), KEY)
            digit = Binary("add", digit, popcount(ok, KEY), KEY)
        # the keys below the chosen candidate: the field of candidate ``digit``, or ``below``
        last = Binary("sub", digit, Const(1, KEY), KEY)
        lane = Binary("mul", Binary("and", last, Const(per_word - 1, KEY), KEY), Const(field, KEY), KEY)
        new_below = below
        for w, counts in enumerate(counted):
            picked = Binary("and", Binary("shr", counts, lane, KEY), mask, KEY)
            new_below = Select(Compare("eq", Binary("shr", last, Const(per_word.bit_length() - 1, KEY),
                                                    KEY), Const(w, KEY)), picked, new_below, KEY)
        acc = Binary("shl", digit, Const(shift + 32, KEY), KEY)
        if decided is not None:
            acc = Binary("add", Binary("and", inputs.load(decided, here), _i64(~(2**32 - 1) % 2**64),
                                       KEY), acc, KEY)
        out = self.fn.new_value(KEY, self.line_shape, "topk_decided")
        self._emit(inputs, [out], [Result(0, here, Binary("or", acc, new_below, KEY))],
                   self.line_shape, self.rank)
        return out

    def membership(self, kth: Value) -> tuple[list[Value], Value]:
        """Per word of ``WORD`` places: the bits of its keys below ``T`` and of those equal
        to it, and their counts packed (below in the high half, equal in the low)."""
        rank, words = self.rank, -(-self.n // WORD)
        word_shape = tuple(words if q == self.d else s for q, s in enumerate(self.shape))
        here = AffineExpr.identity(rank + 1)[:rank]
        at, place = self._split(WORD)
        inputs = Inputs()
        t = self._high(inputs.load(kth, self._line(rank + 1)))
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

    def gathered(self, kth: Value, masks: list[Value], counts: Value, before: Value) -> Value:
        """The members' places, each stored at the number of members before it along the line
        (32-bit stores: every target scatters those)."""
        rank, k = self.rank, self.k
        words = AffineExpr.identity(rank + 1)[:rank]
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
        below_kth = inputs.load(kth, self._line(rank + 1))  # its low half: #{u < T}
        wanted = Binary("sub", Const(k, PLACE), Cast("trunci", below_kth, PLACE), PLACE)
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
        pair = Binary("or", Binary("shl", Cast("extui", key, KEY), Const(31, KEY), KEY),
                      convert(place, KEY), KEY)
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
