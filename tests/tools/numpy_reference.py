"""IREE's text of values computed with numpy alone: the oracle the numpy-free formatter
(pyree.runtime.vm.formatting) is checked against. numpy's ``unique`` float printing is the
shortest text that reads back to the value in its own type (Dragon4)."""

import numpy as np


def element_text(value: np.generic) -> str:
    """One element as IREE prints it: i1 as 0/1, integers exact, floats like C's %g but never
    rounded (bf16 through f32, as ml_dtypes prints it)."""
    if isinstance(value, np.bool_):
        return "1" if value else "0"
    if isinstance(value, np.integer):
        return str(int(value))
    if not isinstance(value, np.floating):
        value = np.float32(value)
    if not np.isfinite(value):
        return "nan" if np.isnan(value) else ("inf" if value > 0 else "-inf")
    mantissa, exponent = np.format_float_scientific(value, unique=True, trim="-").split("e")
    digits = len(mantissa.lstrip("-").replace(".", ""))
    if -4 <= int(exponent) < max(digits, 6):
        return np.format_float_positional(value, unique=True, trim="-")
    return f"{mantissa}e{exponent[0]}{int(exponent[1:]):02d}"


def array_text(array: np.ndarray, spelling: str, max_elements: int = 10**9) -> str:
    """``2x3xf32=[1 2 3][4 5 6]`` (``spelling``: the element type's); past ``max_elements``
    elements each row is cut with ``...``, as IREE's --print_max_element_count does."""
    budget = [max_elements]

    def rows(a: np.ndarray) -> str:
        if a.ndim > 1:
            return "".join(f"[{rows(row)}]" for row in a)
        shown = min(budget[0], a.shape[0])
        budget[0] -= shown
        return " ".join(element_text(v) for v in a[:shown]) + ("..." if shown < a.shape[0] else "")

    return "x".join([*(str(d) for d in array.shape), spelling]) + "=" + rows(
        array.reshape(array.shape or (1,)))
