"""Run-time sizes: integer expressions over a function's dynamic dimensions.

A ``?`` dimension of a function argument becomes a symbol; every size that depends on it (a
dim, an element count, a byte length, an offset, a loop range, a linearized stride) is a
``Size``: a polynomial with integer coefficients over atoms, where an atom is a symbol or an
opaque ``floordiv``/``ceildiv``/``mod``/``min``/``max`` node. Polynomials are kept canonical
(sorted monomials, no zero terms), so two sizes are equal exactly when their polynomials are:
what fusion asks ("same shape?") and what kernel deduplication hashes.

A comparison of sizes that the polynomials decide (``n == n``, ``n + 1 > n``; with the symbols'
bounds, ``seq >= 1`` or ``seq <= 512``) is a plain bool (``compare``); one they do not is an atom whose
value is 0 or 1, and ``select`` of sizes on such a condition is an atom too: the host program
computes both per call, as it computes every other size (schema 1.6 opcodes).

A ``Size`` adds, subtracts and multiplies with ints and other sizes, so the compiler's
shape arithmetic (products of dims, strides, offsets) carries over unchanged; but it refuses to
become an int, a bool or an ordering (``TypeError``), so code that has not been taught about
run-time sizes fails loudly instead of deciding on a size it does not know. A result that is
an int (no atoms) is returned as a plain int. ``code`` writes the schema's SizeExpr program.
"""

from __future__ import annotations

from itertools import product

# SizeExpr opcodes (schemas/common.fbs); EQ and on: schema 1.6.
CONST, SYM, ADD, SUB, MUL, FLOORDIV, CEILDIV, MOD, MIN, MAX, EQ, LT, LE, SELECT = range(14)
MAX_CODE = 1024  # the runtime's limit on one SizeExpr (module/size_exprs.py)
LIMIT = 1 << 53  # the runtime's bound on every size and constant (module/size_exprs.py)
_OPCODES = {"floordiv": FLOORDIV, "ceildiv": CEILDIV, "mod": MOD, "min": MIN, "max": MAX,
            "eq": EQ, "lt": LT, "le": LE, "select": SELECT}


class Atom:
    """A symbol (``op`` None, ``args`` (name,)) or an opaque node over sizes: two for
    floordiv/ceildiv/mod/min/max and the comparisons eq/lt/le (0 or 1), three for select."""

    __slots__ = ("op", "args", "_key")

    def __init__(self, op: str | None, args: tuple):
        self.op, self.args = op, args
        self._key = (op or "", tuple(_key_of(a) for a in args))

    def __eq__(self, other) -> bool:
        return isinstance(other, Atom) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    def __lt__(self, other: Atom) -> bool:
        return self._key < other._key

    def __repr__(self) -> str:
        return self.args[0] if self.op is None else f"{self.op}({', '.join(map(str, self.args))})"


def _key_of(value) -> tuple:
    if isinstance(value, Size):
        return ("size", value._terms)
    if isinstance(value, Atom):
        return ("atom", value._key)
    return ("int", value)


class Size:
    """A polynomial over atoms: ``terms`` maps a monomial (sorted tuple of atoms) to its
    non-zero integer coefficient; the empty monomial is the constant."""

    __slots__ = ("_terms", "_hash")

    def __init__(self, terms: dict):
        self._terms = tuple(sorted(((m, c) for m, c in terms.items() if c), key=_monomial_key))
        self._hash = hash(self._terms)

    # ---- construction ----

    @staticmethod
    def symbol(name: str) -> Size:
        return Size({(Atom(None, (name,)),): 1})

    @staticmethod
    def _of(value) -> Size:
        return value if isinstance(value, Size) else Size({(): int(value)})

    @staticmethod
    def _simplify(terms: dict):
        size = Size(terms)
        if not size._terms:
            return 0
        if len(size._terms) == 1 and size._terms[0][0] == ():
            return size._terms[0][1]
        return size

    # ---- arithmetic ----

    def __add__(self, other):
        if not isinstance(other, (int, Size)):
            return NotImplemented
        terms = dict(self._terms)
        for m, c in Size._of(other)._terms:
            terms[m] = terms.get(m, 0) + c
        return Size._simplify(terms)

    __radd__ = __add__

    def __neg__(self):
        return Size._simplify({m: -c for m, c in self._terms})

    def __sub__(self, other):
        if not isinstance(other, (int, Size)):
            return NotImplemented
        return self + (-other)

    def __rsub__(self, other):
        return (-self) + other

    def __mul__(self, other):
        if not isinstance(other, (int, Size)):
            return NotImplemented
        terms: dict = {}
        for (m1, c1), (m2, c2) in product(self._terms, Size._of(other)._terms):
            m = tuple(sorted(m1 + m2))
            terms[m] = terms.get(m, 0) + c1 * c2
        return Size._simplify(terms)

    __rmul__ = __mul__

    def __floordiv__(self, other):
        return opaque("floordiv", self, other)

    def __rfloordiv__(self, other):
        return opaque("floordiv", other, self)

    def __mod__(self, other):
        return opaque("mod", self, other)

    def __rmod__(self, other):
        return opaque("mod", other, self)

    # ---- identity ----

    def __eq__(self, other) -> bool:
        return isinstance(other, Size) and self._terms == other._terms

    def __hash__(self) -> int:
        return self._hash

    # ---- what a run-time size cannot be ----

    def _refuse(self, *args):
        raise TypeError(f"the run-time size {self} has no value at compile time")

    __index__ = __int__ = __bool__ = __float__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = _refuse

    # ---- reading ----

    def atoms(self) -> set[Atom]:
        """Every atom, opaque nodes' operands included."""
        found: set[Atom] = set()
        for m, _ in self._terms:
            for atom in m:
                found.add(atom)
                for arg in atom.args if atom.op else ():
                    if isinstance(arg, Size):
                        found |= arg.atoms()
        return found

    def symbols(self) -> set[str]:
        return {a.args[0] for a in self.atoms() if a.op is None}

    def __repr__(self) -> str:
        parts = []
        for m, c in self._terms:
            factors = [repr(a) for a in m]
            if c != 1 or not factors:
                factors.insert(0, str(c))
            parts.append("*".join(factors))
        return " + ".join(parts).replace("+ -", "- ")


def _monomial_key(item) -> tuple:
    return (len(item[0]), tuple(a._key for a in item[0]))


def opaque(op: str, a, b):
    """``a op b`` for op in floordiv, ceildiv, mod, min, max: folded where both are ints or
    the answer is exact (division of a multiple), else an opaque atom."""
    if not isinstance(a, Size) and not isinstance(b, Size):
        return _INT_OPS[op](int(a), int(b))
    if op == "min" and any(isinstance(v, int) and v >= LIMIT for v in (a, b)):
        # every run-time size is at most LIMIT (the runtime refuses any other), and no program
        # may hold a constant past it: ONNX's "to the end" Slice gives min(dim, 2**62)
        return b if isinstance(a, int) else a
    if op in ("floordiv", "ceildiv") and isinstance(b, int) and b > 0 and isinstance(a, Size) \
            and all(c % b == 0 for _, c in a._terms):
        return Size._simplify({m: c // b for m, c in a._terms})
    if op in ("floordiv", "ceildiv") and b == 1:
        return a
    if op in ("floordiv", "ceildiv") and isinstance(a, Size) and isinstance(b, Size):
        quotient = _monomial_quotient(a, b)
        if quotient is not None:
            return quotient
    if op in ("min", "max") and a == b:
        return a
    return Size({(Atom(op, (a, b)),): 1})


def _monomial_quotient(a: Size, b: Size):
    """``a / b`` where ``b`` is one monomial (``4*s0``) that divides every term of ``a``
    (``4*s0*s0``, a reshape's product of dims over the others), else None."""
    if len(b._terms) != 1 or not b._terms[0][0]:
        return None
    (divisor, c_b), = b._terms
    terms: dict = {}
    for monomial, c in a._terms:
        rest = list(monomial)
        for atom in divisor:
            if atom not in rest:
                return None
            rest.remove(atom)
        if c % c_b:
            return None
        terms[tuple(sorted(rest))] = c // c_b
    return Size._simplify(terms)


_INT_OPS = {"floordiv": lambda a, b: a // b, "ceildiv": lambda a, b: -(-a // b),
            "mod": lambda a, b: a % b, "min": min, "max": max}


def is_static(value) -> bool:
    return not isinstance(value, Size)


def static_shape(shape) -> bool:
    return all(not isinstance(d, Size) for d in shape)


def num_elements(shape):
    """The product of a shape's dims: an int, or a Size."""
    n = 1
    for d in shape:
        n = n * d
    return n


def substitute(value, mapping: dict):
    """``value`` with each symbol named in ``mapping`` replaced by its value (int or Size)."""
    if not isinstance(value, Size):
        return value
    total = 0
    for m, c in value._terms:
        term = c
        for atom in m:
            term = term * _substitute_atom(atom, mapping)
        total = total + term
    return total


def _substitute_atom(atom: Atom, mapping: dict):
    if atom.op is None:
        return mapping.get(atom.args[0], Size({(atom,): 1}))
    args = [substitute(a, mapping) for a in atom.args]
    if atom.op == "select":
        return select(*args)
    if atom.op in _COMPARISONS:
        held = compare(atom.op, *args)
        return held if isinstance(held, Size) else int(held)
    return opaque(atom.op, *args)


def code(value, symbol_index: dict[str, int], balanced: bool = False) -> list[int]:
    """The SizeExpr program (schemas/common.fbs) of ``value``; ``symbol_index`` numbers the
    symbols as the function declares them. Every value a SizeExpr holds is a size, constants
    included (the runtime refuses a negative one), so the positive terms are summed first and
    the negative ones subtracted after: each step's value is at least the final one.

    ``balanced`` (the host's programs, which the runtime evaluates) does the same through a
    min, max, select or comparison whose operands have negative parts (``sizes.select``'s
    ``-1`` side included): ``max(n - 3, 0)`` (ONNX's ``x[:, -3:]``) is computed as
    ``max(n, 3) - 3``, and the ``- 3`` of a min or max is carried out to the sum it is a term
    of, so no step holds a negative value that the final one does not. A kernel computes in
    wrapping i64 and takes its sizes as they are (``balanced`` False, the form before)."""
    if not isinstance(value, Size):
        return [CONST, int(value)]
    if balanced:
        out = _balanced(value, symbol_index)
    else:
        positive = [(m, c) for m, c in value._terms if c > 0]
        negative = [(m, -c) for m, c in value._terms if c < 0]
        out = []
        for k, (m, c) in enumerate(positive):
            out += _term_code(m, c, symbol_index) + ([ADD] if k else [])
        out = out or [CONST, 0]
        for m, c in negative:
            out += _term_code(m, c, symbol_index) + [SUB]
    if len(out) > MAX_CODE:
        from pyree.compiler.errors import CompileError
        raise CompileError(f"a run-time size needs a program of {len(out)} entries, more than "
                           f"the {MAX_CODE} a module's SizeExpr may hold: {value}")
    return out


def _term_code(monomial: tuple, c: int, symbol_index: dict[str, int],
               balanced: bool = False) -> list[int]:
    """``c`` (> 0) times the product of ``monomial``'s atoms."""
    out = [CONST, c] if c != 1 or not monomial else []
    for j, atom in enumerate(monomial):
        out += (_balanced_atom(atom, symbol_index) if balanced else
                _atom_code(atom, symbol_index))
        if j or c != 1:
            out.append(MUL)
    return out


def _atom_code(atom: Atom, symbol_index: dict[str, int]) -> list[int]:
    if atom.op is None:
        return [SYM, symbol_index[atom.args[0]]]
    return [v for a in atom.args for v in code(a, symbol_index)] + [_OPCODES[atom.op]]


# ---- the host's programs: no negative step (code(balanced=True)) ----

_LIFTED = ("min", "max", "select")


def _balanced(value, symbol_index: dict) -> list[int]:
    """``value``'s program: its plus parts summed, then each minus part subtracted."""
    plus, minus = _parts(value, symbol_index)
    out = _summed(plus) or [CONST, 0]
    for term in minus:
        out += term + [SUB]
    return out


def _summed(codes: list[list[int]]) -> list[int]:
    out: list[int] = []
    for k, term in enumerate(codes):
        out += term + ([ADD] if k else [])
    return out


def _parts(value, symbol_index: dict) -> tuple[list, list]:
    """(plus, minus): programs of non-negative values with ``value = sum(plus) - sum(minus)``."""
    if not isinstance(value, Size):
        v = int(value)
        return ([[CONST, v]], []) if v > 0 else ([], [[CONST, -v]]) if v < 0 else ([], [])
    plus: list = []
    minus: list = []
    for m, c in value._terms:
        k = abs(c)
        if len(m) == 1 and m[0].op in _LIFTED:
            up, down = _lifted_atom(m[0], symbol_index)  # the atom is sum(up) - sum(down)
            scaled = [([CONST, k] + t + [MUL]) if k != 1 else t for t in (*up, *down)]
            up, down = scaled[:len(up)], scaled[len(up):]
            plus, minus = (plus + up, minus + down) if c > 0 else (plus + down, minus + up)
        else:
            (plus if c > 0 else minus).append(_term_code(m, k, symbol_index, balanced=True))
    return plus, minus


def _balanced_atom(atom: Atom, symbol_index: dict) -> list[int]:
    """The atom's value (a term of a product, or an operand of an atom not lifted)."""
    if atom.op in _LIFTED:
        up, down = _lifted_atom(atom, symbol_index)
        out = _summed(up)
        for term in down:
            out += term + [SUB]
        return out
    if atom.op is None:
        return [SYM, symbol_index[atom.args[0]]]
    if atom.op in ("eq", "lt", "le"):  # both sides moved up by the other's minus parts
        (pa, ma), (pb, mb) = (_parts(a, symbol_index) for a in atom.args)
        return (_summed(pa + mb) or [CONST, 0]) + (_summed(pb + ma) or [CONST, 0]) \
            + [_OPCODES[atom.op]]
    return [v for a in atom.args for v in _balanced(a, symbol_index)] + [_OPCODES[atom.op]]


def _lifted_atom(atom: Atom, symbol_index: dict) -> tuple[list, list]:
    """A min, max or select as (up, down): ``op(a + Nb, b + Na)`` and ``[Na, Nb]``, where
    ``a = Pa - Na`` and ``b = Pb - Nb``; one whose sides have no minus parts is as before."""
    sides = atom.args[1:] if atom.op == "select" else atom.args
    (pa, ma), (pb, mb) = (_parts(a, symbol_index) for a in sides)
    condition = _balanced(atom.args[0], symbol_index) if atom.op == "select" else []
    left = _summed(pa + mb) or [CONST, 0]
    right = _summed(pb + ma) or [CONST, 0]
    return [condition + left + right + [_OPCODES[atom.op]]], ma + mb


def uses_comparisons(program: list[int]) -> bool:
    """Whether a SizeExpr program needs schema 1.6's opcodes (a comparison or a select)."""
    at = 0
    while at < len(program):
        if program[at] in (CONST, SYM):
            at += 2
            continue
        if program[at] >= EQ:
            return True
        at += 1
    return False


def align_up(value, alignment: int):
    """``value`` rounded up to a multiple of ``alignment``."""
    return alignment * opaque("ceildiv", value, alignment) if isinstance(value, Size) \
        else -(-value // alignment) * alignment



def nonnegative(value) -> bool:
    """Whether ``value`` is >= 0 for every non-negative value of its symbols (dims are): true
    when every coefficient is positive and every opaque atom's operands are non-negative, a
    sufficient test, so False means "not proven", not "negative"."""
    if not isinstance(value, Size):
        return value >= 0
    return all(c > 0 and all(a.op is None or all(nonnegative(x) for x in a.args) for a in m)
               for m, c in value._terms)


def negative_part(value):
    """The sum of ``value``'s negative terms, negated (0 where it has none)."""
    if not isinstance(value, Size):
        return max(-int(value), 0)
    return Size._simplify({m: -c for m, c in value._terms if c < 0})


def signed_parts(value) -> tuple | None:
    """``value`` as ``(plus, minus)``, both sums of non-negative terms, with ``value == plus -
    minus``, where some term of it that is not a constant has a negative coefficient (``-n``,
    ``n - m``: a concatenation's offset); None where none has (``n - 1`` stays one size). A kernel
    takes run-time sizes as push constants, which the host computes as non-negative numbers: an
    index offset of ``-n`` reaches the kernel as ``n``, subtracted there."""
    if not isinstance(value, Size) or all(c > 0 for m, c in value._terms if m):
        return None
    plus = Size._simplify({m: c for m, c in value._terms if c > 0})
    minus = Size._simplify({m: -c for m, c in value._terms if c < 0})
    return plus, minus


# ---- comparisons of sizes --------------------------------------------------------------------

_COMPARISONS = ("eq", "lt", "le")


def compare(predicate: str, a, b, bounds: dict | None = None):
    """``a predicate b`` (eq, ne, lt, le, gt, ge) on sizes: a bool where it holds or fails for
    every value of the symbols within ``bounds`` (name -> (min, max or None); a symbol not
    named is >= 0), else a Size that is 1 where it holds and 0 where it does not."""
    if predicate in ("gt", "ge"):
        predicate, a, b = ("lt" if predicate == "gt" else "le"), b, a
    if predicate == "ne":
        held = compare("eq", a, b, bounds)
        return (not held) if isinstance(held, bool) else 1 - held
    proven = lambda value: proven_nonnegative(value, bounds or {})
    if predicate == "eq":
        if a == b or (proven(a - b) and proven(b - a)):
            return True
        if proven(a - b - 1) or proven(b - a - 1):
            return False
    elif predicate in ("lt", "le"):
        gap = b - a - (1 if predicate == "lt" else 0)  # holds where gap >= 0
        if proven(gap):
            return True
        if proven(-gap - 1):
            return False
    else:
        raise ValueError(f"unknown size comparison '{predicate}'")
    return _compared(predicate, a, b)


def proven_nonnegative(value, bounds: dict) -> bool:
    """Whether ``value`` >= 0 for every value of its symbols within ``bounds`` (name -> (min,
    max or None)): by ``nonnegative`` with each symbol shifted by its minimum, or by the
    polynomial's range over the bounds box (``_range``)."""
    if isinstance(value, Size):  # a constant past all that the other terms can reach
        constant = dict(value._terms).get((), 0)  # (every run-time value is within +-LIMIT)
        if constant >= LIMIT * sum(abs(c) for m, c in value._terms if m):
            return True
    shifted = {name: Size.symbol(name) + low for name, (low, _) in bounds.items() if low}
    if nonnegative(substitute(value, shifted)):
        return True
    lo, _ = _range(value, bounds)
    return lo is not None and lo >= 0


def _range(value, bounds: dict) -> tuple:
    """(lo, hi) of a polynomial over symbols alone within ``bounds`` (None where unbounded or
    where an atom is not a symbol): each monomial is monotone in each symbol, which is >= 0."""
    if not isinstance(value, Size):
        return value, value
    lo = hi = 0
    for monomial, c in value._terms:
        mlo = mhi = 1
        for atom in monomial:
            if atom.op is not None:
                return None, None
            low, high = bounds.get(atom.args[0], (0, None))
            mlo = mlo * low
            mhi = None if mhi is None or high is None else mhi * high
        low_term, high_term = (c * mlo, None if mhi is None else c * mhi) if c > 0 else \
            (None if mhi is None else c * mhi, c * mlo)
        lo = None if lo is None or low_term is None else lo + low_term
        hi = None if hi is None or high_term is None else hi + high_term
    return lo, hi


def _compared(predicate: str, a, b):
    """The 0/1 atom of an undecided comparison, folded where both sides are ints."""
    if not isinstance(a, Size) and not isinstance(b, Size):
        return int({"eq": a == b, "lt": a < b, "le": a <= b}[predicate])
    return Size({(Atom(predicate, (a, b)),): 1})


def select(condition, a, b):
    """``condition ? a : b`` on sizes, ``condition`` a 0/1 size (``compare``) or a bool."""
    if not isinstance(condition, Size):
        return a if condition else b
    if a == b:
        return a
    return Size({(Atom("select", (condition, a, b)),): 1})


def exact_quotient(a, b):
    """The int k with ``a == k * b`` as polynomials, or None (``8*n`` by ``n``: 8)."""
    if not isinstance(b, Size) or not b._terms:
        return None
    monomial, c = b._terms[-1]
    k = dict(Size._of(a)._terms).get(monomial, 0)
    if k % c or (a - (k // c) * b) != 0:
        return None
    return k // c


def equated(condition) -> tuple | None:
    """(a, b) where ``condition`` is the comparison ``a == b`` alone, else None."""
    terms = condition._terms if isinstance(condition, Size) else ()
    if len(terms) == 1 and terms[0][1] == 1 and len(terms[0][0]) == 1 \
            and terms[0][0][0].op == "eq":
        return terms[0][0][0].args
    return None
