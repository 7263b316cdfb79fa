"""The ``cuda`` driver: availability (with the reason when not), device enumeration and URIs."""

from __future__ import annotations

from pyree.hal.cuda import symbols
from pyree.runtime.hal.python_driver import DeviceInfo, HalError, PythonDriver


class CudaDriver(PythonDriver):
    name = "cuda"

    def __init__(self):
        self._cu = None
        self._error: HalError | None = None

    def _init(self):
        """Imports cuda-python, loads libcuda, runs cuInit and resolves the symbol table, once."""
        if self._cu is None and self._error is None:
            try:
                cu = symbols.import_driver_module()
                try:
                    result = cu.cuInit(0)
                except Exception as e:  # cuda-python raises when libcuda.so.1 cannot be loaded
                    raise HalError("UNAVAILABLE", f"libcuda.so.1 could not be loaded (no NVIDIA "
                                                  f"driver on this host): {e}") from None
                symbols.check(cu, result, "cuInit")
                symbols.resolve(cu)
                if symbols.check(cu, cu.cuDeviceGetCount(), "cuDeviceGetCount") == 0:
                    raise HalError("UNAVAILABLE", "the NVIDIA driver reports no CUDA devices")
                self._cu = cu
            except HalError as e:
                self._error = HalError("UNAVAILABLE", e.message)
        if self._error is not None:
            raise self._error
        return self._cu

    def query_available(self) -> None:
        self._init()

    def _devices(self):
        cu = self._init()
        out = []
        for ordinal in range(symbols.check(cu, cu.cuDeviceGetCount(), "cuDeviceGetCount")):
            dev = symbols.check(cu, cu.cuDeviceGet(ordinal), f"cuDeviceGet({ordinal})")
            name = symbols.check(cu, cu.cuDeviceGetName(256, dev), "cuDeviceGetName")
            name = name.split(b"\0", 1)[0].decode(errors="replace")
            uuid = bytes(symbols.check(cu, cu.cuDeviceGetUuid(dev), "cuDeviceGetUuid").bytes)
            out.append((ordinal, dev, name, format_uuid(uuid)))
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
