"""IREE's text form of a tensor: ``2x3xf32=[1 2 3][4 5 6]``, ``i32=7`` for a scalar.

Used for results printed by the tools and for the values in check failures.
"""

from __future__ import annotations

import numpy as np
from pyree.runtime.vm.tensor_type import describe


def format_element(value: np.generic) -> str:
    """One element as IREE prints it: integers exact, i1 as 0/1, floats like C's %g but never
    rounded (the shortest text that reads back to the same value): 3, 0.5, 1e+10, 1234567."""
    if isinstance(value, np.bool_):
        return "1" if value else "0"
    if isinstance(value, np.integer):
        return str(int(value))
    if not isinstance(value, np.floating):  # bf16 (ml_dtypes) prints through f32, which holds it
        value = np.float32(value)
    if not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    mantissa, exponent = np.format_float_scientific(value, unique=True, trim="-").split("e")
    digits = len(mantissa.lstrip("-").replace(".", ""))
    if -4 <= int(exponent) < max(digits, 6):
        return np.format_float_positional(value, unique=True, trim="-")
    return f"{mantissa}e{exponent[0]}{int(exponent[1:]):02d}"


def format_array(array: np.ndarray, max_elements: int = 1024) -> str:
    """``2x3xf32=[1 2 3][4 5 6]``; past ``max_elements`` elements each row is cut with ``...``
    as IREE's --print_max_element_count does."""
    budget = [max(max_elements, 0)]
    body = _format_rows(np.asarray(array).reshape(array.shape or (1,)), budget)
    return f"{describe(array)}={body}"


def _format_rows(array: np.ndarray, budget: list[int]) -> str:
    if array.ndim > 1:
        return "".join(f"[{_format_rows(row, budget)}]" for row in array)
    shown = min(budget[0], array.shape[0])
    budget[0] -= shown
    text = " ".join(format_element(v) for v in array[:shown])
    return text + ("..." if shown < array.shape[0] else "")
