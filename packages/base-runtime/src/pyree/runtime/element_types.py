"""Element types of the module schema (``ElementType``): IREE spellings, sizes, and their bytes
as Python values, without numpy.

The tools parse, print and compare values through this table alone, so a ``pyree-run-module``
with text inputs never imports numpy (a large part of a tool's start and memory). numpy dtypes are
made on demand for the Python API: i1 is one byte (numpy bool); bf16 is
``ml_dtypes.bfloat16`` when that package is installed and is refused otherwise, naming the
package to install. bf16 values are the top half of an f32: written as numpy (ml_dtypes) writes
them, through f32 and rounded to nearest even.
"""

from __future__ import annotations

import math
import struct

from pyree.runtime.errors import InvocationError

TYPE_CHECKING = False  # (typing's import is not free)
if TYPE_CHECKING:
    import numpy as np

# value -> (IREE spelling, bytes, struct code of the stored bits, numpy dtype name)
_TABLE: dict[int, tuple[str, int, str, str]] = {
    0: ("f32", 4, "f", "float32"), 1: ("f16", 2, "e", "float16"), 2: ("bf16", 2, "H", "bfloat16"),
    3: ("f64", 8, "d", "float64"), 4: ("i1", 1, "?", "bool"), 5: ("i8", 1, "b", "int8"),
    6: ("i16", 2, "h", "int16"), 7: ("i32", 4, "i", "int32"), 8: ("i64", 8, "q", "int64"),
    9: ("ui8", 1, "B", "uint8"), 10: ("ui16", 2, "H", "uint16"), 11: ("ui32", 4, "I", "uint32"),
    12: ("ui64", 8, "Q", "uint64"),
}
NAMES: dict[int, str] = {t: row[0] for t, row in _TABLE.items()}
ITEMSIZES: dict[int, int] = {t: row[1] for t, row in _TABLE.items()}
FLOAT_TYPES = frozenset({0, 1, 2, 3})
BF16 = 2
I1 = 4
# IREE's spellings in the tools, in the order error messages list them; "i" is signless and
# taken as signed, as IREE's tools do.
BY_NAME: dict[str, int] = {
    "f16": 1, "f32": 0, "f64": 3, "i1": 4, "i8": 5, "i16": 6, "i32": 7, "i64": 8,
    "si8": 5, "si16": 6, "si32": 7, "si64": 8, "ui8": 9, "ui16": 10, "ui32": 11, "ui64": 12,
    "bf16": 2,
}
# (significand bits, minimum normal exponent) of each float type's storage: a value prints as
# the shortest decimal that reads back to it there (vm/formatting.py); bf16 prints as the f32
# that holds it, as numpy (ml_dtypes) prints it.
FLOAT_FORMATS: dict[int, tuple[int, int]] = {0: (24, -126), 1: (11, -14), 2: (24, -126),
                                              3: (53, -1022)}


def integer_range(element_type: int) -> tuple[int, int]:
    """[min, max] of an integer type (i1: [0, 1])."""
    if element_type == I1:
        return 0, 1
    bits = 8 * ITEMSIZES[element_type]
    signed = _TABLE[element_type][2].islower()
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def pack(values: list, element_type: int) -> bytes:
    """The elements' bytes (native byte order); OverflowError for a float the type cannot hold
    (one that rounds past its largest finite value)."""
    code = _TABLE[element_type][2]
    if element_type == BF16:
        values = [_bf16_bits(v) for v in values]
    return struct.pack(f"={len(values)}{code}", *values)


def unpack(data, element_type: int, count: int | None = None) -> list:
    """The first ``count`` (default: all) elements of ``data`` as Python values: bool for i1,
    int for integers, float for floats (bf16 widened to the f32 that holds it)."""
    code, size = _TABLE[element_type][2], ITEMSIZES[element_type]
    count = len(data) // size if count is None else count
    values = struct.unpack_from(f"={count}{code}", data)
    if element_type == BF16:
        widened = struct.unpack(f"={count}f", struct.pack(f"={count}I", *(b << 16 for b in values)))
        return list(widened)
    return list(values)


def _bf16_bits(value: float) -> int:
    """The bf16 that ``value`` rounds to through f32 (nearest even), as the compiled kernels round."""
    bits = struct.unpack("=I", struct.pack("=f", value))[0]
    if bits & 0x7FFFFFFF > 0x7F800000:  # NaN: keep the sign, make it quiet
        return (bits >> 16) | 0x0040
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    if rounded & 0x7FFF == 0x7F80 and math.isfinite(value):
        raise OverflowError("float too large for bf16")
    return rounded


def numpy_dtype(element_type: int) -> np.dtype:
    """The numpy dtype of an element type (imports numpy; bf16 needs ml_dtypes)."""
    import numpy as np

    if element_type != BF16:
        return np.dtype(_TABLE[element_type][3])
    try:
        import ml_dtypes
    except ImportError:
        raise InvocationError("element type bf16 needs the ml_dtypes package "
                              "(pip install ml_dtypes) to be read or written from numpy") from None
    return np.dtype(ml_dtypes.bfloat16)


def spell(element_type: int, dims) -> str:
    """IREE's spelling of a tensor type: ``4x5xf32``, ``f32`` for rank 0; dynamic dims (-1)
    print as ``?``."""
    return "x".join([*("?" if d < 0 else str(d) for d in dims),
                     NAMES.get(element_type, f"type{element_type}")])


def element_type_of(dtype: np.dtype) -> int:
    """The schema ElementType of a numpy dtype; InvocationError for one the schema lacks."""
    import numpy as np

    for element_type, row in _TABLE.items():
        if element_type != BF16 and np.dtype(row[3]) == dtype:
            return element_type
    if dtype.name == "bfloat16":
        return BF16
    raise InvocationError(f"numpy dtype {dtype} has no pyree element type")


def dtype_spelling(dtype: np.dtype) -> str:
    """IREE's spelling of a numpy dtype (``f32``, ``i1``, ``ui8``); numpy's name when it has none."""
    import numpy as np

    try:
        return NAMES[element_type_of(np.dtype(dtype))]
    except InvocationError:
        return str(np.dtype(dtype))
