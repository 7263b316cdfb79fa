"""TensorType: a function argument's or result's element type and static shape."""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from pyree.runtime.element_types import ITEMSIZES, NAMES, dtype_spelling, numpy_dtype, spell


@dataclass(frozen=True)
class TensorType:
    element_type: int            # schema ElementType value
    shape: tuple[int, ...]

    @classmethod
    def from_fb(cls, t) -> TensorType:
        return cls.of(t.elementType, tuple(t.dims))

    @classmethod
    @functools.cache
    def of(cls, element_type: int, shape: tuple[int, ...]) -> TensorType:
        """One object per type, so a call's argument check is mostly an identity test."""
        return cls(element_type, shape)

    @cached_property  # read on every call of a function: built once per type
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
    return "x".join([*(str(d) for d in array.shape), dtype_spelling(array.dtype)])
