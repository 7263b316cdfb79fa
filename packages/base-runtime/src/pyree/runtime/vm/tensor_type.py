"""TensorType: a function argument's or result's element type and static shape."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pyree.runtime.element_types import ITEMSIZES, NAMES, numpy_dtype, spell

_BY_DTYPE = {np.dtype(d): name for name, d in {
    "f32": np.float32, "f16": np.float16, "f64": np.float64, "i1": np.bool_, "i8": np.int8,
    "i16": np.int16, "i32": np.int32, "i64": np.int64, "ui8": np.uint8, "ui16": np.uint16,
    "ui32": np.uint32, "ui64": np.uint64}.items()}


@dataclass(frozen=True)
class TensorType:
    element_type: int            # schema ElementType value
    shape: tuple[int, ...]

    @classmethod
    def from_fb(cls, t) -> TensorType:
        return cls(t.elementType, tuple(t.dims))

    @property
    def dtype(self) -> np.dtype:
        return numpy_dtype(self.element_type)

    @property
    def element_name(self) -> str:
        return NAMES[self.element_type]

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * ITEMSIZES[self.element_type]

    def __str__(self) -> str:
        return spell(self.element_type, self.shape)


def describe(array: np.ndarray) -> str:
    """IREE-style spelling of what a caller passed: ``3xf32``, ``2x2xfloat128``."""
    name = _BY_DTYPE.get(array.dtype, str(array.dtype))
    return "x".join([*(str(d) for d in array.shape), name])
