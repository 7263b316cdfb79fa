"""``load_module``, the runtime's front door, in a module that imports nothing heavy: it starts
the device on a thread (hal/device_start.py) before it imports the VM and the module readers, so
a GPU driver's start, which waits in C without the GIL, overlaps those imports and the file's read
(issue 13)."""

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
    mapped (copy-on-write) rather than read, so its constants need not be copied.
    ``parameters``: the parameter files its external constants come from, as ``--parameters``
    takes them (``"[scope=]file.irpa"``, ``.safetensors``; a path: no scope; a (scope, path)
    pair), or a ParameterIndex; mapped the same way."""
    if device is not None and driver is not None:
        raise InvocationError(f"load_module: give device= or driver=, not both (got device="
                              f"{device!r}, driver={driver!r})")
    device = device or driver or "local-task"
    started = DeviceStart(device) if isinstance(device, str) else None
    try:
        from pyree.runtime.vm.loaded_module import LoadedModule, open_module, parameter_index

        parameters = parameter_index(parameters) if parameters else None
        module = open_module(path_or_bytes)
    except BaseException:
        if started is not None:
            started.join()  # its failure, if any, is not this one's
        raise
    if started is not None:
        device = started.result()
    return LoadedModule(module, device, parameters)
