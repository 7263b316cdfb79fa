"""TensorType: a function argument's or result's element type and shape (-1 for a dynamic dim
of a declared type; a call's arguments and results have their run-time shapes)."""

from __future__ import annotations

import functools
import math
from functools import cached_property

from pyree.runtime.element_types import ITEMSIZES, NAMES, dtype_spelling, numpy_dtype, spell
from pyree.runtime.records import Record

TYPE_CHECKING = False  # (typing's import is not free)
if TYPE_CHECKING:
    import numpy as np


class TensorType(Record):
    element_type: int            # schema ElementType value
    shape: tuple[int, ...]

    @classmethod
    def from_fb(cls, t) -> TensorType:
        return cls.of(t.elementType, tuple(t.dims))

    @classmethod
    @functools.lru_cache(maxsize=4096)
    def of(cls, element_type: int, shape: tuple[int, ...]) -> TensorType:
        """One object per type, so a call's argument check is mostly an identity test (of the
        types in use: run-time sizes make new shapes without end, which must not pile up)."""
        return cls(element_type, shape)

    @cached_property  # read on every call with numpy arguments: built (numpy imported) once
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


def describe(array) -> str:
    """IREE-style spelling of what a caller passed (a numpy array or anything with ``shape`` and
    a numpy ``dtype``): ``3xf32``, ``2x2xfloat128``."""
    return "x".join([*(str(d) for d in array.shape), dtype_spelling(array.dtype)])
