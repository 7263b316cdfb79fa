"""IREE's Python runtime API (``iree.runtime``'s system API) over pyree's own objects, so that a
working IREE script runs after its imports change.

``Config`` picks a device, ``VmModule`` is a read and verified module file, ``SystemContext``
loads modules onto the config's device and names them as IREE does (by the module's name:
``module`` unless the MLIR says ``module @name``); what ``ctx.modules.<name>`` returns is a
LoadedModule, and its functions are pyree Functions (IREE's FunctionInvoker). Nothing here
copies the loader: it calls ``open_module`` and ``LoadedModule``. IREE's device setup names
(``get_first_device``, ``get_driver``, ``query_available_drivers``) are here too, over
hal.registry. docs/MIGRATING_FROM_IREE.md lists what still differs.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Callable, Sequence

from pyree.runtime.errors import DriverError, InvocationError
from pyree.runtime.hal import registry
from pyree.runtime.hal.device import Device
from pyree.runtime.hal.ffi import STATUS
from pyree.runtime.module import Module, read_module
from pyree.runtime.records import Record
from pyree.runtime.vm.loaded_module import LoadedModule, open_module
from pyree.runtime.vm.reflection import reflection
from pyree.runtime.vm.tensor_type import TensorType

__all__ = ["Config", "DEFAULT_DRIVER_NAMES", "HalDriver", "SystemContext",
           "TARGET_BACKEND_TO_DRIVER", "VmFunction", "VmInstance", "VmModule", "get_driver",
           "get_first_device", "load_vm_flatbuffer", "load_vm_flatbuffer_file", "load_vm_module",
           "load_vm_modules", "query_available_drivers"]

# IREE's mapping from a compile target to the driver that runs it (plus pyree's GPU targets).
TARGET_BACKEND_TO_DRIVER = {
    "llvm-cpu": "local-task",
    "vmvx": "local-task",
    "vulkan-spirv": "vulkan",
    "cuda": "cuda",
    "rocm": "rocm",
}


# IREE's order of drivers to try when none is named (IREE_DEFAULT_DEVICE overrides it, as in IREE).
DEFAULT_DRIVER_NAMES = "local-task,cuda,vulkan"


def query_available_drivers() -> list[str]:
    """The names of the installed drivers that can run here (IREE's)."""
    return [info.name for info in registry.list_drivers() if info.available]


def get_first_device(device_uris: Sequence[str] | None = None, cache: bool = True) -> Device:
    """The first of ``device_uris`` that opens (IREE's); none given: $IREE_DEFAULT_DEVICE's
    comma-separated list, else DEFAULT_DRIVER_NAMES. The error names every failure."""
    if device_uris is None:
        device_uris = os.environ.get("IREE_DEFAULT_DEVICE", DEFAULT_DRIVER_NAMES).split(",")
    failures: list[DriverError] = []
    for uri in (u.strip() for u in device_uris if u.strip()):
        try:
            return registry.get_device(uri, cache=cache)
        except DriverError as e:
            failures.append(e)
    if not failures:
        raise DriverError("no device URI given", STATUS["INVALID_ARGUMENT"], "INVALID_ARGUMENT")
    last = failures[-1]
    raise DriverError("; ".join(map(str, failures)), last.status, last.status_name)


class HalDriver:
    """IREE's HalDriver, for what ``get_driver`` returns: a driver's devices and new ones."""

    def __init__(self, name: str):
        self.name = name
        self._driver = registry.get_driver(name)

    @staticmethod
    def query() -> list[str]:
        return query_available_drivers()

    def query_available_devices(self) -> list[dict]:
        """One dict per device, as IREE's: ``device_id`` (its index), ``path``, ``name``."""
        return [{"device_id": i, "path": registry.parse_uri(info.uri)[1], "name": info.name}
                for i, info in enumerate(self._driver.enumerate_devices())]

    def create_default_device(self) -> Device:
        return self._driver.create_device("")

    def create_device(self, device_id: int | dict) -> Device:
        """A new device for ``device_id`` (an index or a ``query_available_devices`` dict)."""
        devices = self.query_available_devices()
        if isinstance(device_id, dict):
            device_id = device_id["device_id"]
        if not 0 <= device_id < len(devices):
            raise DriverError(f"driver '{self.name}' has {len(devices)} devices; no device_id "
                              f"{device_id}", STATUS["NOT_FOUND"], "NOT_FOUND")
        return self._driver.create_device(devices[device_id]["path"])

    def create_device_by_uri(self, device_uri: str) -> Device:
        scheme, path = registry.parse_uri(device_uri)
        if scheme != self.name:
            raise DriverError(f"driver '{self.name}' cannot open '{device_uri}'",
                              STATUS["INVALID_ARGUMENT"], "INVALID_ARGUMENT")
        return self._driver.create_device(path)

    def __repr__(self) -> str:
        return f"<HalDriver {self.name}>"


def get_driver(device_uri: str) -> HalDriver:
    """The driver of a device URI or driver name (IREE's)."""
    return HalDriver(registry.parse_uri(device_uri)[0])


class VmInstance:
    """IREE's VM instance. pyree keeps no per-instance state; it is accepted where IREE wants one."""

    def __repr__(self) -> str:
        return "<VmInstance>"


class Config:
    """The device modules run on: ``Config("local-task")``, ``Config("cuda")`` (IREE takes a
    comma-separated list of drivers and uses the first that opens; so does this), or
    ``Config(device=...)`` with a device from ``get_device``. Default: ``get_first_device()``'s,
    ``local-task`` unless $IREE_DEFAULT_DEVICE says otherwise."""

    def __init__(self, driver_name: str | None = None, *, device: Device | str | None = None):
        if device is not None and driver_name is not None:
            raise InvocationError(f"Config: give a driver name or device=, not both (got "
                                  f"{driver_name!r} and {device!r})")
        self.vm_instance = VmInstance()
        self.default_vm_modules: tuple = ()
        if device is not None:
            self.device = registry.get_device(device) if isinstance(device, str) else device
        else:
            self.device = get_first_device(driver_name.split(",") if driver_name else None)

    def __repr__(self) -> str:
        return f"<Config device={self.device.uri!r}>"


class VmFunction(Record):
    """A function of a module not loaded yet (IREE's ``VmModule.lookup_function``)."""

    module_name: str
    name: str
    argument_types: tuple[TensorType, ...]
    result_types: tuple[TensorType, ...]

    @property
    def reflection(self) -> dict[str, str]:
        return reflection(self.name, self.argument_types, self.result_types)

    def __repr__(self) -> str:
        return f"<VmFunction {self.module_name}.{self.name}>"


class VmModule:
    """A verified module file, not yet on a device (IREE's VmModule). Made by the static methods
    IREE has; each takes the VmInstance first, as IREE's do (older IREE's
    ``from_flatbuffer(buffer)`` without one works too)."""

    def __init__(self, module: Module, destroy_callback: Callable[[], None] | None = None):
        self.module = module
        if destroy_callback is not None:  # once nothing holds the module (loaded copies neither)
            weakref.finalize(module, destroy_callback)

    @staticmethod
    def copy_buffer(instance, buffer=None) -> VmModule:
        """The module in a copy of ``buffer`` (bytes-like)."""
        return VmModule(read_module(bytes(_buffer_of(instance, buffer))))

    @staticmethod
    def from_flatbuffer(instance, buffer=None, warn_if_copy: bool = True) -> VmModule:
        return VmModule.copy_buffer(instance, buffer)

    @staticmethod
    def wrap_buffer(instance, buffer=None, destroy_callback=None,
                    close_buffer: bool = False) -> VmModule:
        """The module in ``buffer``; ``destroy_callback`` runs when the VmModule is collected.
        (pyree copies the bytes: a buffer the caller may change must not be verified and then
        read again.)"""
        data = bytes(_buffer_of(instance, buffer))
        if close_buffer and hasattr(buffer, "close"):
            buffer.close()
        return VmModule(read_module(data), destroy_callback)

    @staticmethod
    def mmap(instance, filepath=None, destroy_callback=None) -> VmModule:
        """The module file at ``filepath`` (read into memory of its own, as ``load_module``
        reads it: a module never depends on its file after load)."""
        if filepath is None:
            instance, filepath = None, instance
        return VmModule(open_module(os.fspath(filepath)), destroy_callback)

    @property
    def name(self) -> str:
        return self.module.name

    @property
    def version(self) -> int:
        return self.module.tree.schemaVersionMajor

    @property
    def function_names(self) -> list[str]:
        return [f.name for f in self.module.tree.functions]

    def lookup_function(self, name: str) -> VmFunction | None:
        """The exported function ``name``, or None (as IREE)."""
        for f in self.module.tree.functions:
            if f.name == name:
                return VmFunction(self.name, name,
                                  tuple(TensorType.from_fb(t) for t in f.arguments),
                                  tuple(TensorType.from_fb(t) for t in f.results))
        return None

    def __repr__(self) -> str:
        return f"<VmModule {self.name} : [{', '.join(self.function_names)}]>"


def _buffer_of(instance, buffer):
    """IREE's constructors take (instance, buffer); older IREE took (buffer)."""
    return instance if buffer is None and not isinstance(instance, VmInstance) else buffer


class BoundModules(dict):
    """Loaded modules by name, also as attributes (``ctx.modules.module``)."""

    def __getattr__(self, name: str) -> LoadedModule:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no module named '{name}' in this context; loaded: "
                                 f"{', '.join(self) or 'none'}") from None


class SystemContext:
    """Modules loaded onto ``config``'s device (IREE's SystemContext). Given ``vm_modules`` the
    context is static, as in IREE; without, modules are added with ``add_vm_module``."""

    def __init__(self, vm_modules: Sequence[VmModule] | None = None,
                 config: Config | None = None):
        self._config = config if config is not None else Config()
        self._is_dynamic = vm_modules is None
        self._modules = BoundModules()
        self._add(vm_modules or ())

    @property
    def config(self) -> Config:
        return self._config

    @property
    def instance(self) -> VmInstance:
        return self._config.vm_instance

    @property
    def is_dynamic(self) -> bool:
        return self._is_dynamic

    @property
    def modules(self) -> BoundModules:
        return self._modules

    def add_vm_modules(self, vm_modules: Sequence[VmModule]) -> None:
        if not self._is_dynamic:
            raise InvocationError("this SystemContext was made with vm_modules= and is static: "
                                  "make it without them to add modules later (as in IREE)")
        self._add(vm_modules)

    def add_vm_module(self, vm_module: VmModule) -> None:
        self.add_vm_modules((vm_module,))

    def _add(self, vm_modules: Sequence[VmModule]) -> None:
        for m in vm_modules:
            if not isinstance(m, VmModule):
                raise InvocationError(f"expected a VmModule, got {type(m).__name__}")
            if m.name in self._modules:
                raise InvocationError(f"a module named '{m.name}' is already in this context")
            self._modules[m.name] = LoadedModule(m.module, self._config.device)

    def __repr__(self) -> str:
        return f"<SystemContext on {self._config.device.uri}: {', '.join(self._modules)}>"


def load_vm_modules(*vm_modules: VmModule, config: Config | None = None) -> list[LoadedModule]:
    """The modules loaded into a new SystemContext."""
    context = SystemContext(vm_modules=vm_modules, config=config)
    return [context.modules[m.name] for m in vm_modules]


def load_vm_module(vm_module: VmModule, config: Config | None = None) -> LoadedModule:
    return load_vm_modules(vm_module, config=config)[0]


def _config(driver: str | None, backend: str | None) -> Config:
    if (driver is None) == (backend is None):
        raise InvocationError(f"give either driver= or backend= (a target backend: "
                              f"{', '.join(TARGET_BACKEND_TO_DRIVER)}), exactly one; got "
                              f"driver={driver!r}, backend={backend!r}")
    if backend is not None and backend not in TARGET_BACKEND_TO_DRIVER:
        raise InvocationError(f"unknown target backend '{backend}'; known: "
                              f"{', '.join(TARGET_BACKEND_TO_DRIVER)}")
    return Config(driver if driver is not None else TARGET_BACKEND_TO_DRIVER[backend])


def load_vm_flatbuffer(vm_flatbuffer: bytes, *, driver: str | None = None,
                       backend: str | None = None) -> LoadedModule:
    """A module file's bytes, loaded onto ``driver`` (or the driver for ``backend``)."""
    config = _config(driver, backend)
    return load_vm_module(VmModule.copy_buffer(config.vm_instance, vm_flatbuffer), config)


def load_vm_flatbuffer_file(path: str | os.PathLike, *, driver: str | None = None,
                            backend: str | None = None, destroy_callback=None) -> LoadedModule:
    """A module file, mapped and loaded onto ``driver`` (or the driver for ``backend``)."""
    config = _config(driver, backend)
    return load_vm_module(VmModule.mmap(config.vm_instance, path, destroy_callback), config)
