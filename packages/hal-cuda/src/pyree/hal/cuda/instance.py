"""The ``cuda`` driver: availability (with the reason when not), device enumeration and URIs."""

from __future__ import annotations

import os
import threading

from pyree.hal.cuda import symbols
from pyree.hal.cuda.symbols import check, ffi
from pyree.runtime.hal import tool_process
from pyree.runtime.hal.python_driver import DeviceInfo, HalError, PythonDriver

# CUDA's hardware work queues per device (CUDA's default 8), read once when cuInit runs.
CONNECTIONS_VARIABLE = "CUDA_DEVICE_MAX_CONNECTIONS"


class CudaDriver(PythonDriver):
    name = "cuda"

    def __init__(self):
        self._cu = None
        self._error: HalError | None = None

    def _init(self):
        """Loads libcuda, resolves the symbol table, runs cuInit and counts the devices, once."""
        if self._cu is None and self._error is None:
            one_queue()
            try:
                cu = symbols.load()
                check(_init_beside_imports(cu), "cuInit")
                if self._count(cu) == 0:
                    raise HalError("UNAVAILABLE", "the NVIDIA driver reports no CUDA devices")
                self._cu = cu
            except HalError as e:
                self._error = HalError("UNAVAILABLE", e.message)
        if self._error is not None:
            raise self._error
        return self._cu

    @staticmethod
    def _count(cu) -> int:
        count = ffi.new("int *")
        check(cu.cuDeviceGetCount(count), "cuDeviceGetCount")
        return count[0]

    def query_available(self) -> None:
        self._init()

    def _devices(self) -> list[tuple[int, int, str, str]]:
        """(ordinal, CUdevice, name, GPU-uuid) per device."""
        cu = self._init()
        dev, name, uuid = ffi.new("CUdevice *"), ffi.new("char[256]"), ffi.new("CUuuid *")
        out = []
        for ordinal in range(self._count(cu)):
            check(cu.cuDeviceGet(dev, ordinal), f"cuDeviceGet({ordinal})")
            check(cu.cuDeviceGetName(name, 256, dev[0]), "cuDeviceGetName")
            check(cu.cuDeviceGetUuid(uuid, dev[0]), "cuDeviceGetUuid")
            out.append((ordinal, dev[0], ffi.string(name).decode(errors="replace"),
                        format_uuid(bytes(ffi.buffer(uuid.bytes)))))
        return out

    def enumerate_devices(self) -> list[DeviceInfo]:
        infos = []
        for ordinal, _, name, uuid in self._devices():
            infos.append(DeviceInfo(str(ordinal), name))
            infos.append(DeviceInfo(uuid, f"{name} (= cuda://{ordinal})"))
        return infos

    def create_device(self, path: str):
        from pyree.hal.cuda.device import CudaDevice, parse_device_path
        selector, mode = parse_device_path(path)
        devices = self._devices()
        for ordinal, dev, name, uuid in devices:
            if selector in ("", str(ordinal), uuid) or selector.lower() == uuid.lower():
                return CudaDevice(self._cu, dev, ordinal, name, mode)
        known = ", ".join(f"cuda://{o} (cuda://{u})" for o, _, _, u in devices)
        raise HalError("NOT_FOUND", f"no CUDA device '{selector}'; this host has {known}")


def _init_beside_imports(cu) -> int:
    """cuInit (~100 ms on the H200 host) on a thread of its own, while this one imports the
    device's modules (~5 ms: a device is what a driver is started for); cffi lets go of the GIL
    for the call. Returns cuInit's status."""
    status = []
    init = threading.Thread(target=lambda: status.append(cu.cuInit(0)), name="cuInit")
    init.start()
    try:
        import pyree.hal.cuda.device  # noqa: F401
    finally:
        init.join()
    return status[0]


def one_queue() -> None:
    """In a tool process (hal/tool_process.py), asks CUDA for one hardware work queue per device
    unless the user chose a number: every device of this HAL runs its work on one stream, and each
    queue of CUDA's default 8 costs a context's creation and its teardown at exit, 61 and 35 ms of
    a process's start and end on the H200 host (BENCHMARKS.md, issue 13). Only there: in a library
    process, other CUDA users (torch's streams) may need the queues run side by side, and the
    variable is read once per process, by whichever cuInit runs first."""
    if os.environ.get(tool_process.VARIABLE) and CONNECTIONS_VARIABLE not in os.environ:
        os.environ[CONNECTIONS_VARIABLE] = "1"


def format_uuid(raw: bytes) -> str:
    """nvidia-smi's spelling: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
