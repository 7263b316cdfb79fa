"""Finds HAL drivers through the entry-point group "pyree.runtime.drivers" and opens devices by URI.

Each entry point is a callable returning the address of a ``pyree_hal_driver_v1_t``. A driver
whose import, ABI check or ``query_available`` fails is listed as unavailable with the reason;
nothing else is affected. A driver is imported only when it is asked for by name (or when all are
listed): opening ``local-task`` must not pay for importing the CUDA and Vulkan packages. Device
URIs follow IREE: ``local-task``, ``cuda://0``, ``cuda://GPU-<uuid>`` -- the scheme is the driver
name, the rest goes to ``create_device``.
"""

from __future__ import annotations

import os
import sys
import threading

from pyree.runtime.errors import DriverError, PyreeError
from pyree.runtime.hal.device import Device, DeviceInfo, Driver
from pyree.runtime.hal.device_start import driver_imported
from pyree.runtime.hal.ffi import STATUS, check_struct, ffi
from pyree.runtime.records import Record

ENTRY_POINT_GROUP = "pyree.runtime.drivers"
_METADATA = (".dist-info", ".egg-info")  # a distribution's metadata folder, as importlib.metadata
# The runtime's own drivers: its pyproject.toml's entry points of the group (a test keeps the two
# equal). Asked for by name, one is loaded, through the same entry point and ABI check, without
# scanning sys.path for everyone else's, which every tool's start would pay. These names are
# the runtime's: another distribution's entry point of the same name is ignored.
BUILT_IN = {"local-sync": "pyree.runtime.drivers.local_sync:driver",
            "local-task": "pyree.runtime.drivers.local_task:driver"}


class DriverInfo(Record):
    name: str
    available: bool
    reason: str        # why it is unavailable; "" when available
    driver: Driver | None = None


class _EntryPoint:
    """One ``name = module:attr`` line of a distribution's entry_points.txt."""

    def __init__(self, name: str, value: str):
        self.name, self.value = name, value

    def load(self):
        module, _, attr = self.value.partition(":")
        __import__(module.strip())  # (importlib.import_module would import warnings too)
        obj = sys.modules[module.strip()]
        for part in filter(None, attr.split("[")[0].strip().split(".")):
            obj = getattr(obj, part)
        return obj


def _entry_points(prefix: str = "") -> list[_EntryPoint]:
    """The group's entry points of every distribution on sys.path whose normalized name starts
    with ``prefix`` (a normalized name's first letters, without a separator), as
    importlib.metadata finds them (the first distribution of a name wins), read directly:
    importing importlib.metadata (email, zipfile, csv) costs every process far more than the same
    few lines of text. A GPU host's site-packages lists hundreds of distributions: they are picked by
    their suffix and first letters before any name is normalized or sorted."""
    points, seen = [], set()
    for folder in sys.path:
        try:
            names = os.listdir(folder or ".")
        except OSError:
            continue
        for entry in sorted(name for name in names if name.endswith(_METADATA)
                            and name[:len(prefix)].lower() == prefix):
            distribution = _normalized(entry.rpartition(".")[0].split("-")[0])
            if distribution in seen or not distribution.startswith(prefix):
                continue
            seen.add(distribution)
            try:
                with open(os.path.join(folder or ".", entry, "entry_points.txt")) as f:
                    text = f.read()
            except OSError:
                continue
            group = None
            for line in text.splitlines():
                line = line.strip()
                if line.startswith("[") and line.endswith("]"):
                    group = line[1:-1].strip()
                elif group == ENTRY_POINT_GROUP and "=" in line and not line.startswith(("#", ";")):
                    name, _, value = line.partition("=")
                    points.append(_EntryPoint(name.strip(), value.strip()))
    return points


def _normalized(name: str) -> str:
    """PEP 503's normalized name, with ``_`` for the separator: runs of ``-_.`` become one."""
    name = name.lower().replace("-", "_").replace(".", "_")
    while "__" in name:
        name = name.replace("__", "_")
    return name


def _load(entry_point) -> DriverInfo:
    name = entry_point.name
    try:
        address = entry_point.load()()
        driver_imported()
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
_points: dict | None = None            # name -> entry point (the first of each name)
_own: list | None = None               # pyree's own packages' entry points, read first
_drivers: dict[str, DriverInfo] = {}   # the ones loaded so far
_devices: dict[str, Device] = {}


def _installed() -> dict:
    """Entry points by name; reading them imports no driver. Called holding ``_lock``."""
    global _points
    if _points is None:
        _points = {}
        for ep in [*_entry_points("pyree"), *_entry_points()]:  # pyree's own packages first
            _points.setdefault(ep.name, ep)
        _points.update((name, _EntryPoint(name, value)) for name, value in BUILT_IN.items())
    return _points


def _entry_point(name: str) -> _EntryPoint | None:
    """The entry point of driver ``name`` (None: not installed). Called holding ``_lock``.
    pyree's own packages (pyree-hal-*) win a name, so they are read before every other
    distribution's metadata (a GPU host with torch and jax has hundreds, each read at
    ``--device=cuda``'s start)."""
    global _own
    if _points is None:
        if name in BUILT_IN:
            return _EntryPoint(name, BUILT_IN[name])
        if _own is None:
            _own = _entry_points("pyree")
        own = next((ep for ep in _own if ep.name == name), None)
        if own is not None:
            return own
    return _installed().get(name)


def _info(name: str) -> DriverInfo:
    """The driver ``name`` (installed), loaded once per process. Called holding ``_lock``."""
    info = _drivers.get(name)
    if info is None:
        info = _drivers[name] = _load(_entry_point(name))
    return info


def list_drivers() -> list[DriverInfo]:
    """Every installed driver, loaded once per process, sorted by name."""
    with _lock:
        return [_info(name) for name in sorted(_installed())]


def reset() -> None:
    """Forgets loaded drivers and cached devices (tests install fake entry points)."""
    global _points, _own
    with _lock:
        _points = _own = None
        _drivers.clear()
        _devices.clear()


def get_driver(name: str) -> Driver:
    """The driver ``name``, importing no other driver."""
    with _lock:
        info = _info(name) if _entry_point(name) else None
        if info is None:
            installed = ", ".join(sorted(_installed())) or "none"
    if info is None:
        raise DriverError(f"no HAL driver named '{name}' is installed; installed drivers: "
                          f"{installed}", STATUS["NOT_FOUND"], "NOT_FOUND")
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


def get_device(uri: str, cache: bool = True) -> Device:
    """The device a URI names, created once per process and shared; ``cache=False`` (IREE's
    keyword) opens a new one."""
    scheme, path = parse_uri(uri)
    if not cache:
        return get_driver(scheme).create_device(path)
    key = f"{scheme}://{path}"
    with _lock:
        device = _devices.get(key)
    if device is None:
        device = get_driver(scheme).create_device(path)
        with _lock:
            device = _devices.setdefault(key, device)
    return device
