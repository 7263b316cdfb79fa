"""``load_module``, the runtime's front door, in a module that imports nothing heavy, so that
``import pyree.runtime`` stays cheap. It starts the device on a thread first
(hal/device_start.py), waits only until that thread has imported its driver, then imports the VM
and the module readers and reads the file beside the driver's start. Starting the thread before
the VM's imports without that wait was measured and not kept: the driver's Python work shared the
GIL with the imports, so the cuda CLI gained nothing and the Vulkan CLI lost time (BENCHMARKS.md,
issue 13, 2026-11-27). A built-in CPU driver starts on the caller's thread: nothing in its start
waits in C, so a thread would only share the GIL. While the device is still starting, the checks
its driver will run on the module's code run beside it too (``executables.precheck``)."""

from __future__ import annotations

from pyree.runtime.errors import InvocationError
from pyree.runtime.hal.device_start import DeviceStart

TYPE_CHECKING = False
if TYPE_CHECKING:
    import os

    from pyree.runtime.hal.device import Device
    from pyree.runtime.parameters import ParameterIndex
    from pyree.runtime.vm.loaded_module import LoadedModule


def load_module(path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview,
                device: str | Device | None = None, *, driver: str | None = None,
                parameters: ParameterIndex | str | os.PathLike | list | None = None) -> LoadedModule:
    """Reads, verifies and loads a module file (a path, or the file's bytes) onto a device URI
    (``device``, or IREE's ``driver`` keyword; default ``local-task``) or a Device. A file is
    read into memory of the module's own, so rewriting or truncating it afterwards changes
    nothing (a CPU device still uses its constants in place, in that memory).
    ``parameters``: the parameter files its external constants come from, as ``--parameters``
    takes them (``"[scope=]file.irpa"``, ``.safetensors``; a path: no scope; a (scope, path)
    pair), or a ParameterIndex; a CPU device uses their tensors in place, guarded against
    changes to the files (parameters/lease.py), where the others read them at load."""
    if device is not None and driver is not None:
        raise InvocationError(f"load_module: give device= or driver=, not both (got device="
                              f"{device!r}, driver={driver!r})")
    device = device or driver or "local-task"
    started = None
    if isinstance(device, str):
        from pyree.runtime.hal.registry import BUILT_IN, get_device, parse_uri
        if parse_uri(device)[0] in BUILT_IN:
            device = get_device(device)
        else:
            started = DeviceStart(device, get_device)
    try:
        if started is not None:
            started.wait_imported()
        from pyree.runtime.vm.loaded_module import LoadedModule, open_module, parameter_index

        parameters = parameter_index(parameters) if parameters else None
        module = open_module(path_or_bytes)
        if started is not None and started.is_alive():
            from pyree.runtime.vm.executables import precheck
            precheck(module)
    except BaseException:
        if started is not None:
            started.join()  # its failure, if any, is not this one's
        raise
    if started is not None:
        device = started.result()
    return LoadedModule(module, device, parameters)
