"""The VM layer: a verified module on a device, its functions, their results and checks."""

from pyree.runtime.vm.checks import CheckFailure
from pyree.runtime.vm.device_array import DeviceArray, asdevicearray
from pyree.runtime.vm.formatting import format_array
from pyree.runtime.vm.function import Function
from pyree.runtime.vm.loaded_module import LoadedModule, load_module
from pyree.runtime.vm.tensor_type import TensorType

__all__ = ["CheckFailure", "DeviceArray", "asdevicearray", "Function", "LoadedModule", "TensorType",
           "format_array", "load_module"]
