"""DeviceArray: a tensor in a device buffer, valid once its producing work is done.

It reads like a numpy array, as IREE's does: operators, indexing, len, iteration, astype and
numpy functions work on a host copy and return numpy results. ``__dlpack__`` hands the buffer
itself to torch, numpy or CuPy where the driver can share it (vm/dlpack.py). numpy is imported
when one of those is first used, not with the runtime: ``to_host_array`` reads the values
without it (what pyree-run-module prints).
"""

from __future__ import annotations

import math

from pyree.runtime.element_types import element_type_of
from pyree.runtime.errors import InvocationError, PyreeError
from pyree.runtime.hal.device import Buffer, Device, Semaphore
from pyree.runtime.hal.ffi import PROCESS
from pyree.runtime.vm.host_array import HostArray
from pyree.runtime.vm.tensor_type import TensorType

TYPE_CHECKING = False  # (typing's import is not free)
if TYPE_CHECKING:
    import numpy as np

# numpy.lib.mixins.NDArrayOperatorsMixin's operators (tests/runtime/test_host_arrays.py checks
# the list against it), each importing numpy when first used: inheriting the mixin would import
# numpy with the runtime.
_OPERATORS = ("lt le eq ne gt ge add radd iadd sub rsub isub mul rmul imul matmul rmatmul imatmul "
              "truediv rtruediv itruediv floordiv rfloordiv ifloordiv mod rmod imod divmod rdivmod "
              "pow rpow ipow lshift rlshift ilshift rshift rrshift irshift and rand iand xor rxor "
              "ixor or ror ior neg pos abs invert").split()


def _numpy_operator(name: str):
    def operator(self, *other):
        from numpy.lib.mixins import NDArrayOperatorsMixin

        return getattr(NDArrayOperatorsMixin, name)(self, *other)

    operator.__name__ = operator.__qualname__ = name
    return operator


# __hash__ None: as with the mixin, == is elementwise
_NumpyOperators = type("_NumpyOperators", (), {
    "__slots__": (), "__hash__": None,
    **{f"__{name}__": _numpy_operator(f"__{name}__") for name in _OPERATORS}})


class Donated:
    """What a DeviceArray holds once its buffer was donated to a call (``Function.__call__``'s
    ``donate``): that call's result owns the bytes now, so any use of the array is an error."""

    __slots__ = ("function",)

    def __init__(self, function: str):
        self.function = function

    def __getattr__(self, name):
        raise InvocationError(f"this DeviceArray was donated to a call of '{self.function}', "
                              f"whose result holds its buffer now: use that result")


class DeviceArray(_NumpyOperators):
    """``type`` values in ``buffer``, valid once ``ready`` (semaphore, value) is reached.

    ``call`` (None for an array made by asdevicearray) holds the producing call's other buffers
    and inputs until that call is seen to finish; this buffer goes back to the producing
    function once the array is collected, if no unfinished call reads it (``readers``).
    """

    __slots__ = ("buffer", "type", "ready", "readers", "_call", "_done", "__weakref__")

    def __init__(self, buffer: Buffer, type: TensorType, ready: tuple[Semaphore, int],
                 call=None):
        self.buffer = buffer
        self.type = type
        self.ready = ready
        self.readers = 0
        self._done = call is None
        self._call = call  # last: __del__ reads it alone to see that __init__ finished

    @property
    def shape(self) -> tuple[int, ...]:
        return self.type.shape

    @property
    def dtype(self) -> np.dtype:
        return self.type.dtype

    @property
    def device(self):
        return self.buffer.device

    def wait(self) -> None:
        """Blocks until the value is computed; raises the driver's error if computing it failed."""
        if self._done:
            return
        semaphore, value = self.ready
        try:
            semaphore.wait(value)
        except PyreeError:
            self._call.function._timeline_failed(semaphore)
            raise
        self._done = True
        self._call.finished()

    def to_host(self) -> np.ndarray:
        self.wait()
        buffer = self.buffer
        if buffer.host is not None:  # a mapped buffer: the bytes are right here
            return buffer.typed(self.type.dtype, self.type.shape).copy()
        import numpy as np

        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            self.buffer.read_into(0, out.reshape(-1).view(np.uint8))
        return out

    def to_host_array(self) -> HostArray:
        """The values as a HostArray: bytes in host memory, read without numpy."""
        self.wait()
        data = bytearray(self.type.nbytes)
        if data:
            self.buffer.read_into(0, data)
        return HostArray(data, self.type)

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        """A host copy; with ``copy=False`` (numpy 2's "never copy") the buffer itself, where the
        device's memory is host memory, else ValueError as numpy asks."""
        import numpy as np

        if copy is False:
            from pyree.runtime.vm import dlpack

            if dlpack.shared_device(self) != (dlpack.KDL_CPU, 0) or (
                    dtype is not None and np.dtype(dtype) != self.dtype):
                raise ValueError(f"{self!r} cannot be read as a numpy array without a copy")
            return np.from_dlpack(self)
        array = self.to_host()
        return array if dtype is None else array.astype(dtype, copy=False)

    # -- numpy's array surface, on the host copy (IREE's DeviceArray does the same) ------------
    @property
    def ndim(self) -> int:
        return len(self.type.shape)

    @property
    def size(self) -> int:
        return math.prod(self.type.shape)

    @property
    def nbytes(self) -> int:
        return self.type.nbytes

    def __len__(self) -> int:
        if not self.type.shape:
            raise TypeError("len() of a 0-d DeviceArray")
        return self.type.shape[0]

    def __getitem__(self, index):
        return self.to_host()[index]

    def __iter__(self):
        return iter(self.to_host())

    def __bool__(self) -> bool:
        return bool(self.to_host())

    def __float__(self) -> float:
        return float(self.to_host())

    def __int__(self) -> int:
        return int(self.to_host())

    def __index__(self) -> int:
        return self.to_host().__index__()

    def astype(self, dtype, casting="unsafe", copy=True) -> np.ndarray:
        return self.to_host().astype(dtype, casting=casting, copy=copy)

    def reshape(self, *shape) -> np.ndarray:
        return self.to_host().reshape(*shape)

    def tolist(self):
        return self.to_host().tolist()

    def __reduce__(self):  # pickles (and deep-copies) as its host values
        import numpy as np

        return np.asarray, (self.to_host(),)

    def __repr__(self) -> str:
        if isinstance(self.buffer, Donated):
            return f"<DeviceArray {self.type} donated to '{self.buffer.function}'>"
        return f"<DeviceArray {self.type} on {self.device.uri}>"

    # -- DLPack ---------------------------------------------------------------------------------
    def __dlpack_device__(self) -> tuple[int, int]:
        """Where ``__dlpack__`` hands the values over: the device itself where its driver shares
        memory (hal.h revision 3), else the host (kDLCPU, a copy)."""
        from pyree.runtime.vm import dlpack

        return dlpack.shared_device(self) or (dlpack.KDL_CPU, 0)

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        from pyree.runtime.vm import dlpack

        return dlpack.export(self, stream, max_version, dl_device, copy)

    def __del__(self):
        call = getattr(self, "_call", None)  # unset where Ctrl-C landed as __init__ began
        if call is not None and not self.readers and not PROCESS.exiting:
            call.function._recycle(self.buffer, self.ready, self._done)


def asdevicearray(device: Device, array, dtype=None, *, implicit_host_transfer: bool = True,
                  memory_type=None, allowed_usage=None, element_type=None) -> DeviceArray:
    """Copies an array (anything numpy reads) into a new buffer on ``device`` (IREE's
    ``asdevicearray``; a DeviceArray already there with no ``dtype`` asked comes back as is).

    Passing the result to functions of modules loaded on that device costs no copy per call.
    IREE's placement hints (``memory_type``, ``allowed_usage``, ``element_type``) are accepted
    and unused: the driver picks the memory, and implicit host transfers are always allowed.
    """
    if isinstance(array, DeviceArray) and array.device is device and dtype is None:
        return array
    import numpy as np

    array = np.asarray(array, dtype=dtype, order="C")  # (ascontiguousarray makes 0-d 1-d)
    type = TensorType.of(element_type_of(array.dtype), tuple(array.shape))
    buffer = device.allocate(array.nbytes)
    if array.nbytes:
        buffer.write(0, array.reshape(-1).view(np.uint8))
    return DeviceArray(buffer, type, (device.create_semaphore(0), 0))
