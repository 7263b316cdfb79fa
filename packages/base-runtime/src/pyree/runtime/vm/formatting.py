"""IREE's text form of a buffer view: ``2x3xf32=[1 2 3][4 5 6]``, ``i32=7`` for a scalar."""

from __future__ import annotations

import numpy as np

MAX_ELEMENTS = 1024  # longer contents end in "..." as in IREE's tools


def _element(value) -> str:
    if isinstance(value, (float, np.floating)):
        return format(float(value), "G")
    return str(int(value))


def _nested(array: np.ndarray, budget: list[int]) -> str:
    if array.ndim == 1:
        shown = array[:max(budget[0], 0)]
        budget[0] -= len(array)
        text = " ".join(_element(v) for v in shown)
        return text + ("..." if len(shown) < len(array) else "")
    parts = []
    for row in array:
        if budget[0] <= 0:
            parts.append("...")
            break
        parts.append("[" + _nested(row, budget) + "]")
    return "".join(parts)


def format_array(array: np.ndarray, type_spelling: str) -> str:
    """``type_spelling`` is the TensorType's str(), e.g. ``4xf32``."""
    if array.ndim == 0:
        return f"{type_spelling}={_element(array[()])}"
    if array.dtype.kind not in "biuf":  # bf16 through ml_dtypes prints through float
        array = array.astype(np.float32)
    return f"{type_spelling}={_nested(array, [MAX_ELEMENTS])}"
