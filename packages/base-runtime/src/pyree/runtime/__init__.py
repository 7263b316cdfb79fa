"""pyree.runtime: loads pyree module files (.vmfb) and runs them through HAL drivers.

    import pyree.runtime as rt
    m = rt.load_module("model.vmfb", device="local-task")
    y = m["main"](x).to_host()

IREE's names work too (``Config``, ``SystemContext``, ``VmModule``, ``load_vm_flatbuffer``...;
vm/system_api.py, docs/MIGRATING_FROM_IREE.md). External weights: ``load_module(...,
parameters=["model=weights.irpa"])`` or a ``ParameterIndex`` (docs/PARAMETERS.md).
"""

from pyree.runtime.errors import (
                                  CheckError,
                                  DriverError,
                                  InvocationError,
                                  ModuleError,
                                  PyreeError,
)
from pyree.runtime.hal.device import DeviceInfo
from pyree.runtime.hal.registry import (
                                  DriverInfo,
                                  get_device,
                                  list_devices,
                                  list_drivers,
)
from pyree.runtime.module import Module, read_module
from pyree.runtime.vm import (
                                  CheckFailure,
                                  DeviceArray,
                                  Function,
                                  LoadedModule,
                                  TensorType,
                                  asdevicearray,
                                  format_array,
                                  load_module,
)

# IREE's system API (vm/system_api.py) and external weights (parameters/) are imported on first
# use: most processes (the tools among them) use neither (~1 ms of every start, issue 13).
_LAZY = {
    **dict.fromkeys(("Config", "SystemContext", "TARGET_BACKEND_TO_DRIVER", "VmFunction",
                     "VmInstance", "VmModule", "load_vm_flatbuffer", "load_vm_flatbuffer_file",
                     "load_vm_module", "load_vm_modules"), "vm.system_api"),
    "ParameterError": "parameters", "ParameterIndex": "parameters",
}
__all__ = [
    "CheckError", "CheckFailure", "DeviceArray", "DeviceInfo", "DriverError", "DriverInfo",
    "Function", "InvocationError", "LoadedModule", "Module", "ModuleError", "PyreeError",
    "TensorType", "asdevicearray", "format_array", "get_device", "list_devices", "list_drivers",
    "load_module", "read_module", *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        return getattr(import_module(f"pyree.runtime.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'pyree.runtime' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
