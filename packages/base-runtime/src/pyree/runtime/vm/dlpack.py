"""DLPack both ways: a DeviceArray's buffer handed to torch/numpy/CuPy in place, and another
library's tensor used as a function argument in place.

Imported only when DLPack is first used (``import pyree.runtime`` stays light). The structs and
the capsule calls go through ctypes: the capsule is a CPython object, and DLPack's structs are
not part of the driver ABI. What can be shared is the driver's to say (hal.h revision 3); where it
cannot, export hands over a host copy and import copies, as before.

Lifetimes: an exported capsule holds the DeviceArray (so its buffer stays out of the pool) until
the consumer's deleter runs, and a deleter on a device with streams first makes later work wait
for what the consumer queued on the stream it named. An imported tensor's buffer holds the
producer's managed tensor, whose deleter runs when the buffer is dropped after the call.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from pyree.runtime.errors import DriverError, InvocationError
from pyree.runtime.hal.ffi import PROCESS

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_ROCM = 1, 2, 3, 10
DEVICE_NAMES = {KDL_CPU: "CPU", KDL_CUDA: "CUDA", KDL_CUDA_HOST: "CUDA host", 4: "OpenCL",
                7: "Vulkan", 8: "Metal", KDL_ROCM: "ROCm"}
# numpy dtype kind -> DLPack type code (kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6)
_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", _DELETER)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32),
                ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER),
                ("flags", ctypes.c_uint64), ("dl_tensor", DLTensor)]


# Our own function objects: setting argtypes on ctypes.pythonapi's would change them for
# every other user of that shared object.
_api = ctypes.PyDLL(None)
_P, _OBJ = ctypes.c_void_p, ctypes.py_object


def _function(name: str, restype, *argtypes):
    """A fresh function object of the C API (``_api[name]`` is not cached, unlike
    ``ctypes.pythonapi.name``, whose argtypes other libraries may set too)."""
    function = _api[name]
    function.restype, function.argtypes = restype, list(argtypes)
    return function


_capsule_new = _function("PyCapsule_New", _OBJ, _P, _P, _P)
_is_valid = _function("PyCapsule_IsValid", ctypes.c_int, _OBJ, _P)
_get_pointer = _function("PyCapsule_GetPointer", _P, _OBJ, _P)
_set_name = _function("PyCapsule_SetName", ctypes.c_int, _OBJ, _P)
# the destructor's: it is handed a borrowed pointer to the capsule, not an object
_raw_is_valid = _function("PyCapsule_IsValid", ctypes.c_int, _P, _P)
_raw_get_pointer = _function("PyCapsule_GetPointer", _P, _P, _P)


def _name(text: bytes) -> int:
    """The address of a C string kept for the process: a capsule keeps a pointer to its name."""
    buffer = ctypes.create_string_buffer(text)
    _NAMES.append(buffer)
    return ctypes.addressof(buffer)


_NAMES: list = []
_LEGACY, _VERSIONED = _name(b"dltensor"), _name(b"dltensor_versioned")
_USED = {_LEGACY: _name(b"used_dltensor"), _VERSIONED: _name(b"used_dltensor_versioned")}

# address of a managed tensor we exported -> (struct, shape array, DeviceArray, stream to wait for)
_EXPORTED: dict[int, tuple] = {}
_lock = threading.RLock()  # (reentrant: a consumer's deleter may run in the collector)


def _release_export(address: int) -> None:
    with _lock:
        entry = _EXPORTED.pop(address, None)
    if entry is None:
        return
    _, _, array, stream = entry
    # Later work must not overwrite what the consumer still reads on its stream.
    if stream is not None and not PROCESS.exiting:
        array.device.stream_wait(stream)


@_DELETER
def _deleter(address):
    _release_export(address)


def _destructor_for(versioned: bool):
    name = _VERSIONED if versioned else _LEGACY

    def destructor(capsule):
        """A capsule nobody consumed: free what it holds (a consumer renames it first)."""
        if _raw_is_valid(capsule, name):
            _release_export(_raw_get_pointer(capsule, name))
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(destructor)


_DESTRUCTORS = {False: _destructor_for(False), True: _destructor_for(True)}


def _dtype_of(dtype: np.dtype) -> DLDataType:
    code = 4 if dtype.name == "bfloat16" else _CODES[dtype.kind]
    return DLDataType(code, dtype.itemsize * 8, 1)


def shared_device(array) -> tuple[int, int] | None:
    """(DLPack device type, id) where ``array``'s buffer can be handed over in place."""
    dlpack = array.device.dlpack
    return dlpack[:2] if dlpack is not None else None


def export(array, stream=None, max_version=None, dl_device=None, copy=None):
    """``array.__dlpack__``: a capsule over its buffer, or over a host copy where the buffer
    cannot be shared (or ``copy``/``dl_device`` ask for one). The values are computed first, so
    a consumer on any stream reads finished data."""
    array.wait()
    shared = shared_device(array)
    target = tuple(dl_device) if dl_device is not None else shared or (KDL_CPU, 0)
    if target != shared or copy:
        if target != (KDL_CPU, 0) or copy is False:
            raise BufferError(f"{array!r} cannot be handed to {_place(*target)} "
                              f"{'without a copy' if copy is False else 'by pyree'}")
        host = array.to_host()
        return host.__dlpack__(max_version=max_version) if max_version else host.__dlpack__()
    versioned = max_version is not None and tuple(max_version) >= (1, 0)
    managed = (DLManagedTensorVersioned if versioned else DLManagedTensor)()
    shape = (ctypes.c_int64 * max(len(array.shape), 1))(*array.shape)
    tensor = managed.dl_tensor
    tensor.data = array.device.buffer_address(array.buffer) or None
    tensor.device = DLDevice(*shared)
    tensor.ndim, tensor.dtype, tensor.shape = len(array.shape), _dtype_of(array.dtype), shape
    tensor.strides, tensor.byte_offset = None, 0  # compact row-major
    managed.deleter = _deleter
    if versioned:
        managed.major, managed.minor = 1, 0
    address = ctypes.addressof(managed)
    # DLPack's stream: None is the legacy default stream, -1 asks for no synchronization.
    wait_for = None if shared[0] == KDL_CPU or stream == -1 else (1 if stream is None else stream)
    with _lock:
        _EXPORTED[address] = (managed, shape, array, wait_for)
    name = _VERSIONED if versioned else _LEGACY
    return _capsule_new(address, name, ctypes.cast(_DESTRUCTORS[versioned], _P))


class _Imported:
    """A producer's managed tensor, consumed: its deleter runs when this is collected."""

    def __init__(self, address: int, deleter, tensor: DLTensor):
        self._address, self._deleter, self.tensor = address, deleter, tensor

    def __del__(self):
        """At exit the producer may be torn down; where Ctrl-C landed as ``__init__`` began,
        there is no deleter to run."""
        if getattr(self, "_deleter", None) and not PROCESS.exiting:
            self._deleter(self._address)


def import_argument(obj, device, what: str, shape: tuple, dtype: np.dtype):
    """``obj`` (anything with ``__dlpack__``) for a function argument on ``device``: a buffer
    over its memory where that memory is on ``device`` and laid out as the argument is (no
    copy), else, for host memory, a numpy array of it for the caller to check and copy.
    ``__dlpack__`` is called once: a producer may hand its tensor over only once."""
    kind, index = (int(v) for v in obj.__dlpack_device__())
    here = device.dlpack
    name = type(obj).__name__
    if here is not None and (kind, index) == here[:2]:
        address, nbytes, owner, problem = _consume(obj, here, shape, dtype, what)
        if problem is None:
            if nbytes == 0:
                return np.empty(shape, dtype)
            try:
                return device.import_device(address, nbytes, owner)
            except DriverError as e:
                raise InvocationError(f"{what}: {e}") from None
        if kind != KDL_CPU:
            raise InvocationError(f"{what}: the {name} {problem}")
        return _host_copy(owner.tensor, f"{what}: the {name}")  # then its deleter runs
    if kind == KDL_CPU:
        try:
            return np.from_dlpack(obj)
        except (TypeError, BufferError, RuntimeError) as e:
            raise InvocationError(f"{what}: numpy cannot read this {name} through DLPack: "
                                  f"{e}") from None
    raise InvocationError(f"{what}: the {name} is on {_place(kind, index)}, but the function runs on "
                          f"'{device.uri}': move it there first (a torch tensor: .cpu() or "
                          f".to(...))")


def _place(kind: int, index: int) -> str:
    return f"{DEVICE_NAMES.get(kind, f'DLPack device type {kind}')} device {index}"


def _consume(obj, here: tuple[int, int, int], shape: tuple, dtype: np.dtype, what: str):
    """Takes ``obj``'s DLPack capsule for the device ``here`` (type, id, stream: the producer
    orders its pending writes before that stream): (address, bytes, owner that runs the
    deleter, None), or with a reason in place of None where the tensor is not a compact
    row-major ``shape`` of ``dtype`` on that device."""
    stream = here[2] or None
    try:
        try:
            capsule = obj.__dlpack__(stream=stream, max_version=(1, 0))
        except TypeError:  # a producer from before DLPack 1.0
            capsule = obj.__dlpack__(stream=stream)
    except (TypeError, ValueError, BufferError, RuntimeError) as e:
        raise InvocationError(f"{what}: the {type(obj).__name__}'s __dlpack__ failed: {e}") \
            from None
    name = _VERSIONED if _is_valid(capsule, _VERSIONED) else _LEGACY
    if not _is_valid(capsule, name):
        raise InvocationError(f"{what}: __dlpack__ of the {type(obj).__name__} returned no DLPack "
                              f"capsule")
    address = _get_pointer(capsule, name)
    managed = (DLManagedTensorVersioned if name == _VERSIONED else DLManagedTensor) \
        .from_address(address)
    owner = _Imported(address, managed.deleter, managed.dl_tensor)  # its deleter is ours to run
    _set_name(capsule, _USED[name])
    tensor = managed.dl_tensor
    got_shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    want = _dtype_of(dtype)
    pointer = (tensor.data or 0) + tensor.byte_offset
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    row_major = _c_strides(shape)
    problem = None
    if (tensor.device.device_type, tensor.device.device_id) != here[:2]:
        problem = (f"says it is on DLPack device {tuple(here[:2])} but its capsule puts it on "
                   f"{(tensor.device.device_type, tensor.device.device_id)}")
    elif got_shape != shape or (tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes) != (
            want.code, want.bits, 1):
        problem = (f"is {'x'.join(map(str, got_shape))} of DLPack type {tensor.dtype.code}:"
                   f"{tensor.dtype.bits}, expected {'x'.join(map(str, shape))} {dtype}")
    elif tensor.strides and any(tensor.strides[i] != row_major[i]
                                for i in range(len(shape)) if shape[i] > 1):
        problem = "is not contiguous in row-major order: pass a contiguous one (.contiguous())"
    elif pointer % dtype.itemsize:
        problem = f"has its data at {pointer:#x}, not aligned to its {dtype.itemsize}-byte elements"
    return pointer, nbytes, owner, problem


def _host_copy(tensor: DLTensor, what: str) -> np.ndarray:
    """A compact copy of a host tensor in any layout (strides in elements, possibly negative),
    made while its producer still holds it; its dtype and shape are the caller's to check."""
    code, bits, lanes = tensor.dtype.code, tensor.dtype.bits, tensor.dtype.lanes
    names = {(0, 8): "int8", (0, 16): "int16", (0, 32): "int32", (0, 64): "int64",
             (1, 8): "uint8", (1, 16): "uint16", (1, 32): "uint32", (1, 64): "uint64",
             (2, 16): "float16", (2, 32): "float32", (2, 64): "float64", (6, 8): "bool"}
    if lanes != 1 or ((code, bits) not in names and (code, bits) != (4, 16)):
        raise InvocationError(f"{what} holds DLPack type {code}:{bits}x{lanes}, which pyree does "
                              f"not read")
    from pyree.runtime.element_types import BF16, numpy_dtype

    dtype = numpy_dtype(BF16) if code == 4 else np.dtype(names[code, bits])
    shape = tuple(tensor.shape[i] for i in range(tensor.ndim))
    steps = [tensor.strides[i] for i in range(tensor.ndim)] if tensor.strides \
        else _c_strides(shape)
    if 0 in shape:
        return np.empty(shape, dtype)
    low = sum(min(0, (d - 1) * s) for d, s in zip(shape, steps)) * dtype.itemsize
    high = sum(max(0, (d - 1) * s) for d, s in zip(shape, steps)) * dtype.itemsize + dtype.itemsize
    memory = (ctypes.c_char * (high - low)).from_address((tensor.data or 0) + tensor.byte_offset
                                                         + low)
    return np.ndarray(shape, dtype, memory, -low, [s * dtype.itemsize for s in steps]).copy()


def _c_strides(shape: tuple) -> list[int]:
    """Row-major strides in elements."""
    strides, step = [], 1
    for dim in reversed(shape):
        strides.append(step)
        step *= dim
    return strides[::-1]

