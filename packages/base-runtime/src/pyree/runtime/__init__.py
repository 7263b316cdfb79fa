"""pyree.runtime: loads pyree module files (.vmfb) and runs them through HAL drivers.

    import pyree.runtime as rt
    m = rt.load_module("model.vmfb", device="local-task")
    y = m["main"](x).to_host()

IREE's names work too (``Config``, ``SystemContext``, ``VmModule``, ``load_vm_flatbuffer``,
``get_driver``, ``benchmark_module``, ``flags.parse_flags``...; vm/system_api.py,
docs/MIGRATING_FROM_IREE.md). External weights: ``load_module(...,
parameters=["model=weights.irpa"])`` or a ``ParameterIndex`` (docs/PARAMETERS.md).

Every name but the errors is imported on first use, so ``import pyree.runtime`` costs a process
almost nothing until it loads a module (issue 13: importing the runtime does no work a call may
not need).
"""

__version__ = "0.1.0"

from pyree.runtime.errors import (
                                  CheckError,
                                  DriverError,
                                  InvocationError,
                                  ModuleError,
                                  PyreeError,
)

_LAZY = {
    "DeviceInfo": "hal.device",
    **dict.fromkeys(("DriverInfo", "get_device", "list_devices", "list_drivers"), "hal.registry"),
    **dict.fromkeys(("Module", "read_module"), "module"),
    **dict.fromkeys(("CheckFailure", "DeviceArray", "Function", "LoadedModule", "TensorType",
                     "asdevicearray", "format_array", "load_module"), "vm"),
    "Trace": "vm.trace", "trace": "vm.trace", "SizeSymbol": "vm.reflection",
    **dict.fromkeys(("Config", "DEFAULT_DRIVER_NAMES", "HalDriver", "SystemContext",
                     "TARGET_BACKEND_TO_DRIVER", "VmFunction", "VmInstance", "VmModule",
                     "get_driver", "get_first_device", "load_vm_flatbuffer",
                     "load_vm_flatbuffer_file", "load_vm_module", "load_vm_modules",
                     "query_available_drivers"), "vm.system_api"),
    **dict.fromkeys(("BenchmarkResult", "BenchmarkToolError", "benchmark_exe",
                     "benchmark_module"), "vm.benchmark"),
    "ParameterError": "parameters", "ParameterIndex": "parameters",
    "Generator": "generate",
}
__all__ = ["CheckError", "DriverError", "InvocationError", "ModuleError", "PyreeError", "flags",
           *_LAZY]


def __getattr__(name: str):
    from importlib import import_module

    if name in _LAZY:
        value = getattr(import_module(f"pyree.runtime.{_LAZY[name]}"), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    if name == "flags":  # IREE's ireert.flags.parse_flags(...), without importing it first
        return import_module("pyree.runtime.flags")
    raise AttributeError(f"module 'pyree.runtime' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
