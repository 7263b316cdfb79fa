"""IREE's text form of a tensor: ``2x3xf32=[1 2 3][4 5 6]``, ``i32=7`` for a scalar.

Used for results printed by the tools and for the values in check failures. One formatter for
every source: a HostArray's values, or a numpy array's (``tolist``), element by element, with no
numpy of its own.
"""

from __future__ import annotations

import math

from pyree.runtime.element_types import FLOAT_FORMATS, I1, element_type_of, spell
from pyree.runtime.vm.host_array import HostArray


def format_element(value, element_type: int) -> str:
    """One element as IREE prints it: integers exact, i1 as 0/1, floats like C's %g but never
    rounded (the shortest text that reads back to the same value of the element type): 3, 0.5,
    1e+10, 1234567."""
    if element_type == I1:
        return "1" if value else "0"
    if element_type not in FLOAT_FORMATS:
        return str(int(value))
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    digits, exponent = shortest_digits(abs(value), *FLOAT_FORMATS[element_type])
    if -4 <= exponent < max(len(digits), 6):
        if exponent < 0:
            return f"{sign}0.{'0' * (-exponent - 1)}{digits}"
        whole, fraction = digits[:exponent + 1].ljust(exponent + 1, "0"), digits[exponent + 1:]
        return f"{sign}{whole}.{fraction}" if fraction else sign + whole
    mantissa = f"{digits[0]}.{digits[1:]}" if len(digits) > 1 else digits
    return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"


def shortest_digits(x: float, bits: int, min_exponent: int) -> tuple[str, int]:
    """The significant digits, and the decimal exponent of the first, of the shortest decimal
    that rounds to ``x`` (finite, > 0) in a binary format of ``bits`` significand bits and
    minimum normal exponent ``min_exponent``; of those, the one closest to ``x``. This is what
    numpy's ``format_float_*(unique=True)`` print (Steele & White / Dragon4), and Python's
    ``repr`` for f64, computed exactly in integers."""
    _, e2 = math.frexp(x)  # x = f * 2**e2, 0.5 <= f < 1
    q = max(e2 - bits, min_exponent - bits + 1)
    m = int(math.ldexp(x, -q))  # x = m * 2**q exactly
    # x and the bounds of the values that round to it, in units of 2**(q - 2): the gap below
    # a power of two is half the gap above; a bound rounds to x when m is even (ties to even)
    below = 1 if m == 1 << (bits - 1) and e2 - 1 > min_exponent else 2
    center, low, high = 4 * m, 4 * m - below, 4 * m + 2
    inclusive = m % 2 == 0
    unit_num, unit_den = (1 << (q - 2), 1) if q >= 2 else (1, 1 << (2 - q))
    top = math.floor(math.log10(x)) + 1  # >= the exponent of x's first digit, whatever log10 rounds

    def candidate(n: int) -> tuple[int, int] | None:
        """(c, t): the n-significant-digit c * 10**t in the bounds closest to x, if any."""
        t = top - n + 1
        num, den = (unit_num, unit_den * 10 ** t) if t >= 0 else (unit_num * 10 ** -t, unit_den)
        lo_n, hi_n = low * num, high * num
        c_lo, c_hi = -(-lo_n // den), hi_n // den
        if not inclusive:
            c_lo += c_lo * den == lo_n
            c_hi -= c_hi * den == hi_n
        if c_lo > c_hi:
            return None
        c, rest = divmod(center * num, den)
        c += 2 * rest > den or (2 * rest == den and c % 2)
        return min(max(c, c_lo), c_hi), t

    # A decimal of n digits fits => one of n + 1 does: bisect. No value needs more than
    # ceil(bits * log10(2)) + 1 digits (9 for f32); + 1 as ``top`` may be one too high.
    fewest, most = 1, math.ceil(bits * 0.30103) + 2
    found = candidate(most)
    while fewest < most:
        middle = (fewest + most) // 2
        fits = candidate(middle)
        if fits is None:
            fewest = middle + 1
        else:
            most, found = middle, fits
    c, t = found
    text = str(c)
    return text.rstrip("0"), t + len(text) - 1


def format_array(array, max_elements: int = 1024) -> str:
    """``2x3xf32=[1 2 3][4 5 6]`` of a HostArray or of anything numpy reads as an array of a
    pyree element type; past ``max_elements`` elements each row is cut with ``...`` as IREE's
    --print_max_element_count does."""
    budget = max(max_elements, 0)
    if isinstance(array, HostArray):
        shape, element_type, values = array.shape, array.element_type, array.values(budget)
    else:
        import numpy as np

        array = np.asarray(array)
        shape, element_type = array.shape, element_type_of(array.dtype)
        values = array.reshape(-1)[:budget].tolist()
    body = _format_rows(values, element_type, shape or (1,), 0, [budget])
    return f"{spell(element_type, shape)}={body}"


def _format_rows(values: list, element_type: int, shape: tuple, start: int,
                 budget: list[int]) -> str:
    """The rows of the ``shape`` block whose first element is ``values[start]``; only the first
    ``budget[0]`` elements of the whole array are shown (``values`` holds no more)."""
    if len(shape) > 1:
        step = math.prod(shape[1:])
        return "".join(f"[{_format_rows(values, element_type, shape[1:], start + i * step, budget)}]"
                       for i in range(shape[0]))
    shown = min(budget[0], shape[0])
    budget[0] -= shown
    text = " ".join(format_element(v, element_type) for v in values[start:start + shown])
    return text + ("..." if shown < shape[0] else "")
