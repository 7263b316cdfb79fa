"""Python values (numbers, nested lists, numpy scalars) as arrays of an argument's element type.

A numpy array of the wrong dtype is refused by Function, never cast: a cast that loses values is
a wrong answer. One exception, IREE's (``iree_hal_element_types_are_compatible``): integers of one
width stand for each other, their bits kept (``same_width``), since MLIR's integers are signless
and a model's signedness lives in its ops. Python values have no declared dtype, so they are
converted, but only where no value can change: numpy's ``same_kind`` casting (integers to
floats, never floats to integers), and every integer within the element type's range (not
wrapped modulo 2**bits). pyree.serve's JSON lists follow the same rule through this function.
"""

from __future__ import annotations

import numpy as np
from pyree.runtime.vm.tensor_type import TensorType


def convert(value, t: TensorType) -> np.ndarray:
    """``value`` as an array of ``t``'s element type (its shape is the caller's to check);
    ValueError with the reason, worded to follow "argument N: "."""
    try:
        array = np.asarray(value)
    except (TypeError, ValueError) as e:  # ragged lists
        raise ValueError(f"expected {t}, got a {type(value).__name__} that is not a rectangular "
                         f"nested list of numbers ({e})") from None
    target = t.dtype
    if array.dtype == target:
        return array
    kind = array.dtype.kind
    if kind == "O" and target.kind in "iu" and all(type(v) is int for v in array.flat):
        raise ValueError(_out_of_range(t))  # Python ints past 64 bits
    if kind not in "biuf":
        raise ValueError(f"expected {t}, got a {type(value).__name__} holding {array.dtype.name} "
                         f"values (give numbers or booleans)")
    if array.size and not np.can_cast(array.dtype, target, "same_kind"):
        wanted = {"i": "integers", "u": "integers", "b": "booleans"}.get(target.kind, "numbers")
        raise ValueError(f"expected {t}, got {array.dtype.name} values, which {t.element_name} "
                         f"cannot hold exactly (give {wanted})")
    converted = array.astype(target)
    if target.kind in "iu" and not np.array_equal(converted, array):
        raise ValueError(_out_of_range(t))
    return converted


def same_width(array: np.ndarray, t: TensorType) -> np.ndarray:
    """``array`` read as ``t``'s integer type where both are integers of one width (a uint64
    array for an i64 argument, an int8 one for ui8: the same bits, as IREE passes them);
    otherwise ``array`` itself, for the caller to refuse. Booleans are not integers here."""
    target = t.dtype
    if array.dtype.kind in "iu" and target.kind in "iu" and array.dtype.itemsize == target.itemsize:
        return array.view(target)
    return array


def _out_of_range(t: TensorType) -> str:
    info = np.iinfo(t.dtype)
    return f"expected {t}, got a value outside {t.element_name}'s range [{info.min}, {info.max}]"
