"""DeviceArray: a tensor in a device buffer, valid once its producing work is done."""

from __future__ import annotations

import numpy as np
from pyree.runtime.element_types import element_type_of
from pyree.runtime.errors import PyreeError
from pyree.runtime.hal.device import Buffer, Device, Semaphore
from pyree.runtime.hal.ffi import PROCESS
from pyree.runtime.vm.tensor_type import TensorType


class DeviceArray:
    """``type`` values in ``buffer``, valid once ``ready`` (semaphore, value) is reached.

    ``call`` holds the producing call's other buffers and inputs until that call is seen to
    finish; then they go back to ``pool``, and so does this buffer once the array is collected
    (if no unfinished call reads it: ``readers``), pending ``ready`` if it was never waited for.
    """

    def __init__(self, buffer: Buffer, type: TensorType, ready: tuple[Semaphore, int],
                 call=None, pool=None):
        self.buffer = buffer
        self.type = type
        self.ready = ready
        self.readers = 0
        self._call = call
        self._pool = pool
        self._done = call is None

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
            self._call.on_failure(semaphore)
            raise
        self._done = True
        self._call.finished()

    def to_host(self) -> np.ndarray:
        self.wait()
        buffer = self.buffer
        if buffer.host is not None:  # a mapped buffer: the bytes are right here
            return buffer.typed(self.type.dtype, self.type.shape).copy()
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            self.buffer.read_into(0, out.reshape(-1).view(np.uint8))
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        array = self.to_host()
        return array if dtype is None else array.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<DeviceArray {self.type} on {self.device.uri}>"

    def __del__(self):
        if self._pool is None or self.readers or PROCESS.exiting:
            return
        if self._done:
            self._pool.give(self.buffer)
        else:  # dropped unwaited: reusable once its value is computed
            self._pool.give_when_reached([self.buffer], *self.ready)


def asdevicearray(device: Device, array) -> DeviceArray:
    """Copies a host array into a new buffer on ``device`` (IREE's ``asdevicearray``).

    Passing the result to functions of modules loaded on that device costs no copy per call.
    """
    array = np.ascontiguousarray(array)
    type = TensorType.of(element_type_of(array.dtype), tuple(array.shape))
    buffer = device.allocate(array.nbytes)
    if array.nbytes:
        buffer.write(0, array.reshape(-1).view(np.uint8))
    return DeviceArray(buffer, type, (device.create_semaphore(0), 0))
