"""DeviceArray: a function result that stays on the device until it is read."""

from __future__ import annotations

import numpy as np
from pyree.runtime.element_types import element_type_of
from pyree.runtime.hal.device import Buffer, Device, Semaphore
from pyree.runtime.vm.tensor_type import TensorType


class DeviceArray:
    """``type`` values in ``buffer``, valid once ``ready`` (semaphore, value) is reached.

    ``keepalive`` holds the rest of the producing call's buffers (arguments, transient arena)
    until the result is gone, so no driver sees a buffer released while work on it may run.
    """

    def __init__(self, buffer: Buffer, type: TensorType, ready: tuple[Semaphore, int], keepalive=()):
        self.buffer = buffer
        self.type = type
        self.ready = ready
        self._keepalive = keepalive

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
        semaphore, value = self.ready
        semaphore.wait(value)

    def to_host(self) -> np.ndarray:
        self.wait()
        out = np.empty(self.shape, self.dtype)
        if out.nbytes:
            self.buffer.read_into(0, out.reshape(-1).view(np.uint8))
        return out

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        array = self.to_host()
        return array if dtype is None else array.astype(dtype, copy=False)

    def __repr__(self) -> str:
        return f"<DeviceArray {self.type} on {self.device.uri}>"


def asdevicearray(device: Device, array) -> DeviceArray:
    """Copies a host array into a new buffer on ``device`` (IREE's ``asdevicearray``).

    Passing the result to functions of modules loaded on that device costs no copy per call.
    """
    array = np.ascontiguousarray(array)
    type = TensorType(element_type_of(array.dtype), tuple(array.shape))
    buffer = device.allocate(array.nbytes)
    if array.nbytes:
        buffer.write(0, array.reshape(-1).view(np.uint8))
    return DeviceArray(buffer, type, (device.create_semaphore(0), 0))
