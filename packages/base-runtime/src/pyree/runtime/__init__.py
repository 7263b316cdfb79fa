"""pyree.runtime: loads pyree module files (.vmfb) and runs them through HAL drivers.

    import pyree.runtime as rt
    m = rt.load_module("model.vmfb", device="local-task")
    y = m["main"](x).to_host()
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

__all__ = [
    "CheckError", "CheckFailure", "DeviceArray", "DeviceInfo", "DriverError", "DriverInfo",
    "Function", "InvocationError", "LoadedModule", "Module", "ModuleError", "PyreeError",
    "TensorType", "asdevicearray", "format_array", "get_device", "list_devices", "list_drivers",
    "load_module", "read_module",
]
