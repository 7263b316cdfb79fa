"""The ``cuda`` driver: availability (with the reason when not), device enumeration and URIs."""

from __future__ import annotations

from pyree.hal.cuda import startup
from pyree.hal.cuda.symbols import check, ffi
from pyree.runtime.hal.python_driver import DeviceInfo, HalError, PythonDriver


class CudaDriver(PythonDriver):
    name = "cuda"

    def __init__(self):
        self._cu = None
        self._error: HalError | None = None

    def _init(self):
        """Waits for CUDA's start (startup.py), importing the device's modules meanwhile, and
        counts the devices, once."""
        if self._cu is None and self._error is None:
            startup.begin()
            try:
                import pyree.hal.cuda.device  # noqa: F401 - what a driver is started for
                cu = startup.finish()
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


def format_uuid(raw: bytes) -> str:
    """nvidia-smi's spelling: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
