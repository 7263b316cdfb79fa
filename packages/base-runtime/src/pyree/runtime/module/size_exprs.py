"""SizeExpr (schemas/common.fbs, schema 1.5): the stack programs a module computes its run-time
sizes with, over a function's symbols (or, for a binding's minimum length, over a dispatch's
push constants). Checked once at load (``problem``), evaluated once per distinct set of symbol
values (``evaluate``), spelled for people (``spell``).

Every value the stack holds is an exact size: a negative one, one past 2^53 or a division by
zero raises SizeError, never a wrong size. The opcodes and their meaning are the schema's.
"""

from __future__ import annotations

CONSTANT, SYMBOL = 0, 1
# opcode -> (operator for people, what it computes on a, b >= 0); each pops b, then a
OPERATORS = {
    2: ("+", lambda a, b: a + b),
    3: ("-", lambda a, b: a - b),
    4: ("*", lambda a, b: a * b),
    5: ("floordiv", lambda a, b: a // b),
    6: ("ceildiv", lambda a, b: -(-a // b)),
    7: ("mod", lambda a, b: a % b),
    8: ("min", min),
    9: ("max", max),
    10: ("==", lambda a, b: int(a == b)),  # schema 1.6: comparisons, 1 or 0
    11: ("<", lambda a, b: int(a < b)),
    12: ("<=", lambda a, b: int(a <= b)),
}
SELECT = 13  # schema 1.6: pops b, a, c; pushes c ? a : b
COMPARISONS = frozenset({10, 11, 12})
DIVIDING = frozenset({5, 6, 7})
MAX_CODE = 1024          # entries of one program: a damaged file, not a size, past it
LIMIT = 1 << 53          # values past it would lose exactness in a float somewhere downstream


class SizeError(ValueError):
    """An evaluation that has no exact size; the message says what it came to, worded to follow
    "is" (an intermediate value counts: ``a - b`` with b > a is negative even inside a max)."""


def problem(code: list[int], symbols: int) -> str | None:
    """What makes ``code`` not a well-formed program over ``symbols`` symbols, or None."""
    if not code:
        return "is empty"
    if len(code) > MAX_CODE:
        return f"has {len(code)} entries, more than the {MAX_CODE} a size needs"
    depth, i = 0, 0
    while i < len(code):
        op = code[i]
        if op in (CONSTANT, SYMBOL):
            if i + 1 >= len(code):
                return f"ends inside opcode {op} at entry {i}: its operand is missing"
            operand = code[i + 1]
            if op == CONSTANT and not 0 <= operand <= LIMIT:
                return f"pushes the constant {operand} at entry {i}, outside [0, 2^53]"
            if op == SYMBOL and not 0 <= operand < symbols:
                return f"names symbol {operand} at entry {i}, but there are {symbols}"
            depth, i = depth + 1, i + 2
        elif op in OPERATORS or op == SELECT:
            needs = 3 if op == SELECT else 2
            if depth < needs:
                return (f"applies opcode {op} at entry {i} to fewer than "
                        f"{'three' if needs == 3 else 'two'} values")
            depth, i = depth - needs + 1, i + 1
        else:
            return f"has the unknown opcode {op} at entry {i}"
    return None if depth == 1 else f"leaves {depth} values on the stack, not one"


def evaluate(code: list[int], values) -> int:
    """The size a well-formed program computes with symbol k = ``values[k]``."""
    stack: list[int] = []
    i = 0
    while i < len(code):
        op = code[i]
        if op == CONSTANT:
            stack.append(code[i + 1])
            i += 2
            continue
        if op == SYMBOL:
            value = values[code[i + 1]]
            i += 2
        elif op == SELECT:
            b, a, c = stack.pop(), stack.pop(), stack.pop()
            value = a if c else b
            i += 1
        else:
            b, a = stack.pop(), stack.pop()
            if op in DIVIDING and b == 0:
                raise SizeError(f"undefined: it divides {a} by zero")
            value = OPERATORS[op][1](a, b)
            i += 1
        if not 0 <= value <= LIMIT:
            raise SizeError(f"{value}, which is negative" if value < 0 else
                            f"{value}, past 2^53")
        stack.append(value)
    return stack[0]


def symbols(code: list[int]) -> list[int]:
    """The symbols a well-formed program reads, in order."""
    out, i = [], 0
    while i < len(code):
        if code[i] in (CONSTANT, SYMBOL):
            if code[i] == SYMBOL:
                out.append(code[i + 1])
            i += 2
        else:
            i += 1
    return out


def bare_symbol(code: list[int]) -> int | None:
    """k when the program is the bare symbol ``1 k`` (one that binds from a shape), else None."""
    return code[1] if len(code) == 2 and code[0] == SYMBOL else None


def spell(code: list[int], names=None) -> str:
    """The program as a formula: ``batch * 4``, ``max(seq, 1)``, ``(n == 1)``, ``(m if (n == 1)
    else n)``; symbol k is ``names[k]`` (else ``s<k>``)."""
    stack: list[tuple[str, int | None]] = []  # (text, its operator's opcode; None: no brackets)
    i = 0
    while i < len(code):
        op = code[i]
        if op in (CONSTANT, SYMBOL):
            operand = code[i + 1]
            stack.append((str(operand) if op == CONSTANT else
                          names[operand] if names is not None else f"s{operand}", None))
            i += 2
            continue
        if op == SELECT:
            b, a, c = stack.pop(), stack.pop(), stack.pop()
            stack.append((f"({a[0]} if {c[0]} else {b[0]})", None))
            i += 1
            continue
        b, a = stack.pop(), stack.pop()
        symbol = OPERATORS[op][0]
        if op in COMPARISONS:
            stack.append((f"({a[0]} {symbol} {b[0]})", None))
        elif op in (5, 6, 8, 9):
            stack.append((f"{symbol}({a[0]}, {b[0]})", None))
        else:
            a_text, b_text = (f"({text})" if _brackets(inner, op, right) else text
                              for (text, inner), right in ((a, False), (b, True)))
            stack.append((f"{a_text} {symbol} {b_text}", op))
        i += 1
    return stack[0][0] if len(stack) == 1 else "?"


def _brackets(inner: int | None, outer: int, right: bool) -> bool:
    """Whether an operand computed by ``inner`` needs brackets inside ``outer``."""
    if inner is None or outer == 2:
        return False
    if outer == 3:
        return right and inner in (2, 3)
    if outer == 4:
        return inner != 4
    return True  # mod
