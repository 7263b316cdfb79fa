"""HostArray: a tensor's elements in host memory, without numpy.

What the tools parse ``--input`` text into and read results back as (``DeviceArray.
to_host_array``), so that a ``pyree-run-module`` with text inputs and printed results never
imports numpy. ``Function`` takes one wherever it takes a numpy array; ``to_numpy`` bridges to
numpy where a job needs it (``.npy`` files).
"""

from __future__ import annotations

import math

from pyree.runtime.element_types import element_type_of, numpy_dtype, pack, unpack
from pyree.runtime.vm.tensor_type import TensorType

TYPE_CHECKING = False  # (typing's import is not free)
if TYPE_CHECKING:
    import numpy as np


class HostArray:
    """``data``: the elements' bytes (C order, native byte order; any buffer) of a ``type``."""

    __slots__ = ("data", "type")

    def __init__(self, data, type: TensorType):
        if len(data) != type.nbytes:
            raise ValueError(f"{type} holds {type.nbytes} bytes, not {len(data)}")
        self.data = data
        self.type = type

    @classmethod
    def from_values(cls, values: list, shape: tuple[int, ...], element_type: int) -> HostArray:
        """``values`` (Python numbers, C order; one value is splatted over ``shape``, none
        zero-fills it) as an array of ``element_type``; OverflowError for a float the type
        cannot hold, MemoryError (saying how much) for an array host memory cannot hold."""
        type = TensorType.of(element_type, shape)
        count = math.prod(shape)
        data = pack(values, element_type)
        try:
            if not values:
                data = bytes(type.nbytes)
            elif len(values) == 1 and count != 1:
                data = data * count
        except (MemoryError, OverflowError):  # (OverflowError: past what an index can hold)
            raise MemoryError(f"cannot allocate {_binary_size(type.nbytes)} for a {type} "
                              "value") from None
        return cls(data, type)

    @classmethod
    def from_numpy(cls, array) -> HostArray:
        """A copy of a numpy array of a pyree element type (InvocationError for another)."""
        import numpy as np

        array = np.asarray(array)
        array = np.asarray(array, array.dtype.newbyteorder("="), order="C")  # 0-d stays 0-d
        type = TensorType.of(element_type_of(array.dtype), tuple(array.shape))
        return cls(array.reshape(-1).view(np.uint8).tobytes(), type)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def element_type(self) -> int:
        return self.type.element_type

    @property
    def size(self) -> int:
        return math.prod(self.type.shape)

    @property
    def dtype(self) -> np.dtype:
        """The numpy dtype (imports numpy)."""
        return self.type.dtype

    def values(self, count: int | None = None) -> list:
        """The first ``count`` (default: all) elements, C order, as Python values (bool for i1,
        int, float)."""
        return unpack(self.data, self.type.element_type,
                      self.size if count is None else min(count, self.size))

    def to_numpy(self) -> np.ndarray:
        """A numpy array of these elements (imports numpy)."""
        import numpy as np

        return np.frombuffer(self.data, numpy_dtype(self.type.element_type)) \
            .reshape(self.type.shape).copy()

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """numpy reads a HostArray as a copy of its values."""
        array = self.to_numpy()
        return array if dtype is None else array.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<HostArray {self.type}>"


def _binary_size(size: int) -> str:
    """``3.64 TiB``: a byte count as numpy's allocation failures give it."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if size < 1024 or unit == "PiB":
            return f"{size:.3g} {unit}" if unit != "bytes" else f"{size} bytes"
        size /= 1024
