"""Finds HAL drivers through the entry-point group "pyree.runtime.drivers" and opens devices by URI.

Each entry point is a callable returning the address of a ``pyree_hal_driver_v1_t``. A driver
whose import, ABI check or ``query_available`` fails is listed as unavailable with the reason;
nothing else is affected. Device URIs follow IREE: ``local-task``, ``cuda://0``,
``cuda://GPU-<uuid>`` -- the scheme is the driver name, the rest goes to ``create_device``.
"""

from __future__ import annotations

import importlib.metadata
import threading
from dataclasses import dataclass

from pyree.runtime.errors import DriverError, PyreeError
from pyree.runtime.hal.device import Device, DeviceInfo, Driver
from pyree.runtime.hal.ffi import STATUS, check_struct, ffi

ENTRY_POINT_GROUP = "pyree.runtime.drivers"


@dataclass(frozen=True)
class DriverInfo:
    name: str
    available: bool
    reason: str        # why it is unavailable; "" when available
    driver: Driver | None = None


def _entry_points():
    return importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)


def _load(entry_point) -> DriverInfo:
    name = entry_point.name
    try:
        address = entry_point.load()()
        struct = ffi.cast("pyree_hal_driver_v1_t *", address)
        check_struct(struct, "pyree_hal_driver_v1_t", f"driver '{name}'")
        driver = Driver(ffi.string(struct.name).decode() if struct.name != ffi.NULL else name, struct)
        if driver.name != name:
            raise DriverError(f"driver registered as '{name}' calls itself '{driver.name}'",
                              STATUS["FAILED_PRECONDITION"], "FAILED_PRECONDITION")
        driver.query_available()
    except Exception as e:  # a broken driver package must not break the others
        reason = str(e) if isinstance(e, PyreeError) else f"{type(e).__name__}: {e}"
        return DriverInfo(name, False, reason)
    return DriverInfo(name, True, "", driver)


_lock = threading.Lock()
_drivers: dict[str, DriverInfo] | None = None
_devices: dict[str, Device] = {}


def list_drivers() -> list[DriverInfo]:
    """Every installed driver, loaded once per process, sorted by name."""
    global _drivers
    with _lock:
        if _drivers is None:
            _drivers = {}
            for ep in _entry_points():
                _drivers.setdefault(ep.name, _load(ep))
        return sorted(_drivers.values(), key=lambda d: d.name)


def reset() -> None:
    """Forgets loaded drivers and cached devices (tests install fake entry points)."""
    global _drivers
    with _lock:
        _drivers = None
        _devices.clear()


def get_driver(name: str) -> Driver:
    infos = {d.name: d for d in list_drivers()}
    if name not in infos:
        raise DriverError(f"no HAL driver named '{name}' is installed; installed drivers: "
                          f"{', '.join(infos) or 'none'}", STATUS["NOT_FOUND"], "NOT_FOUND")
    info = infos[name]
    if not info.available:
        raise DriverError(f"driver '{name}' is unavailable: {info.reason}",
                          STATUS["UNAVAILABLE"], "UNAVAILABLE")
    return info.driver


def parse_uri(uri: str) -> tuple[str, str]:
    """``cuda://0`` -> ("cuda", "0"); ``local-task`` -> ("local-task", "")."""
    scheme, _, path = uri.partition("://")
    return scheme, path


def list_devices(driver: str | None = None) -> list[DeviceInfo]:
    names = [driver] if driver else [d.name for d in list_drivers() if d.available]
    return [info for name in names for info in get_driver(name).enumerate_devices()]


def get_device(uri: str) -> Device:
    """The device a URI names, created once per process and shared."""
    scheme, path = parse_uri(uri)
    key = f"{scheme}://{path}"
    with _lock:
        device = _devices.get(key)
    if device is None:
        device = get_driver(scheme).create_device(path)
        with _lock:
            device = _devices.setdefault(key, device)
    return device
