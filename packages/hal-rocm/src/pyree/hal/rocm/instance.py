"""The ``rocm`` driver (also registered as ``hip``): availability with the reason when not, device
enumeration and URIs."""

from __future__ import annotations

from pyree.hal.rocm import symbols
from pyree.hal.rocm.symbols import ffi
from pyree.runtime.hal.python_driver import DeviceInfo, HalError, PythonDriver


class RocmDriver(PythonDriver):
    def __init__(self, name: str = "rocm"):
        self.name = name  # the URI scheme: "rocm", or IREE's newer "hip" for the same driver
        self._lib = None
        self._error: HalError | None = None

    def _init(self):
        """Loads libamdhip64, resolves the table, runs hipInit and counts the devices, once."""
        if self._lib is None and self._error is None:
            try:
                lib = symbols.load()
                init_err = lib.hipInit(0)
                count = ffi.new("int *")
                count_err = lib.hipGetDeviceCount(count)
                if count_err != symbols.SUCCESS:  # hipInit may say 101 where this says 100
                    also = (f" (hipInit: {symbols.describe(init_err)})"
                            if init_err not in (symbols.SUCCESS, count_err) else "")
                    raise HalError("UNAVAILABLE", f"no usable AMD GPU: hipGetDeviceCount: "
                                                  f"{symbols.describe(count_err)}{also}")
                symbols.check(init_err, "hipInit")
                if count[0] == 0:
                    raise HalError("UNAVAILABLE", "the HIP runtime reports no devices")
                self._lib = lib
            except HalError as e:
                self._error = HalError("UNAVAILABLE", e.message)
        if self._error is not None:
            raise self._error
        return self._lib

    def query_available(self) -> None:
        self._init()

    def _devices(self) -> list[tuple[int, int, str, str]]:
        """(ordinal, hipDevice_t, name, GPU-uuid) per device."""
        lib = self._init()
        count = ffi.new("int *")
        symbols.check(lib.hipGetDeviceCount(count), "hipGetDeviceCount")
        out = []
        dev, name, uuid = ffi.new("int *"), ffi.new("char[256]"), ffi.new("hipUUID *")
        for ordinal in range(count[0]):
            symbols.check(lib.hipDeviceGet(dev, ordinal), f"hipDeviceGet({ordinal})")
            symbols.check(lib.hipDeviceGetName(name, 256, dev[0]), "hipDeviceGetName")
            symbols.check(lib.hipDeviceGetUuid(uuid, dev[0]), "hipDeviceGetUuid")
            out.append((ordinal, dev[0], ffi.string(name).decode(errors="replace"),
                        format_uuid(bytes(ffi.buffer(uuid.bytes)))))
        return out

    def enumerate_devices(self) -> list[DeviceInfo]:
        infos = []
        for ordinal, _, name, uuid in self._devices():
            infos.append(DeviceInfo(str(ordinal), name))
            infos.append(DeviceInfo(uuid, f"{name} (= {self.name}://{ordinal})"))
        return infos

    def create_device(self, path: str):
        from pyree.hal.rocm.device import RocmDevice, parse_device_path
        selector = parse_device_path(path)
        devices = self._devices()
        for ordinal, dev, name, uuid in devices:
            if selector in ("", str(ordinal)) or selector.lower() == uuid.lower():
                return RocmDevice(self._lib, dev, ordinal, name)
        known = ", ".join(f"{self.name}://{o} ({self.name}://{u})" for o, _, _, u in devices)
        raise HalError("NOT_FOUND", f"no ROCm device '{selector}'; this host has {known}")


def format_uuid(raw: bytes) -> str:
    """nvidia-smi's spelling, as the cuda driver lists GPUs: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx."""
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"
