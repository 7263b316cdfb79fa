"""Element types of the module schema (``ElementType``) as numpy dtypes and IREE spellings.

i1 is stored as one byte (numpy bool). bf16 has no numpy dtype: it maps to ``ml_dtypes.bfloat16``
when that package is installed and is refused otherwise, naming the package to install.
"""

from __future__ import annotations

import numpy as np
from pyree.runtime.errors import InvocationError

NAMES: dict[int, str] = {
    0: "f32", 1: "f16", 2: "bf16", 3: "f64",
    4: "i1", 5: "i8", 6: "i16", 7: "i32", 8: "i64",
    9: "ui8", 10: "ui16", 11: "ui32", 12: "ui64",
}
ITEMSIZES: dict[int, int] = {
    0: 4, 1: 2, 2: 2, 3: 8, 4: 1, 5: 1, 6: 2, 7: 4, 8: 8, 9: 1, 10: 2, 11: 4, 12: 8,
}
FLOAT_TYPES = frozenset({0, 1, 2, 3})
_NUMPY = {
    0: np.float32, 1: np.float16, 3: np.float64, 4: np.bool_, 5: np.int8, 6: np.int16,
    7: np.int32, 8: np.int64, 9: np.uint8, 10: np.uint16, 11: np.uint32, 12: np.uint64,
}


def numpy_dtype(element_type: int) -> np.dtype:
    if element_type in _NUMPY:
        return np.dtype(_NUMPY[element_type])
    try:
        import ml_dtypes
    except ImportError:
        raise InvocationError("element type bf16 needs the ml_dtypes package "
                              "(pip install ml_dtypes) to be read or written from numpy") from None
    return np.dtype(ml_dtypes.bfloat16)


def spell(element_type: int, dims) -> str:
    """IREE's spelling of a tensor type: ``4x5xf32``, ``f32`` for rank 0."""
    return "x".join([*(str(d) for d in dims), NAMES.get(element_type, f"type{element_type}")])


def element_type_of(dtype: np.dtype) -> int:
    """The schema ElementType of a numpy dtype; InvocationError for one the schema lacks."""
    for element_type, numpy_type in _NUMPY.items():
        if np.dtype(numpy_type) == dtype:
            return element_type
    if dtype.name == "bfloat16":
        return 2
    raise InvocationError(f"numpy dtype {dtype} has no pyree element type")


def dtype_spelling(dtype: np.dtype) -> str:
    """IREE's spelling of a numpy dtype (``f32``, ``i1``, ``ui8``); numpy's name when it has none."""
    try:
        return NAMES[element_type_of(np.dtype(dtype))]
    except InvocationError:
        return str(np.dtype(dtype))
