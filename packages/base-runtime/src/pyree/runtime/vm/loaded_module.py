"""LoadedModule: a verified module on a device -- executable loaded, constants uploaded once,
every function's command buffers recorded -- and ``load_module``, the front door."""

from __future__ import annotations

import os

from pyree.runtime.errors import InvocationError, ModuleError
from pyree.runtime.hal.device import Device
from pyree.runtime.hal.registry import get_device
from pyree.runtime.module import Module, read_module
from pyree.runtime.vm import executables
from pyree.runtime.vm.buffer_pool import BufferPool
from pyree.runtime.vm.function import Function


class LoadedModule:
    def __init__(self, module: Module, device: Device):
        self.module = module
        self.device = device
        self.pool = BufferPool(device)
        chosen = executables.select(module, device)
        self.executable = executables.load(module, chosen, device) if chosen is not None else None
        self.constants = []
        for constant in module.tree.constants:
            buffer = device.allocate(constant.data.length)
            if constant.data.length:
                buffer.write(0, module.bytes_of(constant.data))
            self.constants.append(buffer)
        self._functions = {f.name: Function(self, f) for f in module.tree.functions}

    @property
    def name(self) -> str:
        return self.module.name

    @property
    def function_names(self) -> list[str]:
        return list(self._functions)

    def __getitem__(self, name: str) -> Function:
        function = self._functions.get(name)
        if function is None:
            raise InvocationError(f"module '{self.name}' has no function '{name}'; it exports: "
                                  f"{', '.join(self._functions) or 'nothing'}")
        return function

    def __getattr__(self, name: str) -> Function:
        if name.startswith("_"):
            raise AttributeError(name)
        return self[name]

    def __contains__(self, name: str) -> bool:
        return name in self._functions

    def __repr__(self) -> str:
        return f"<LoadedModule {self.name!r} on {self.device.uri}: {', '.join(self._functions)}>"


def load_module(path_or_bytes: str | os.PathLike | bytes | bytearray | memoryview,
                device: str | Device = "local-task") -> LoadedModule:
    """Reads, verifies and loads a module file (a path, or the file's bytes) onto a device URI."""
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        data = bytes(path_or_bytes)
    else:
        try:
            with open(path_or_bytes, "rb") as f:
                data = f.read()
        except OSError as e:
            raise ModuleError(f"cannot read module file '{os.fspath(path_or_bytes)}': "
                              f"{e.strerror or e}") from None
    module = read_module(data)
    return LoadedModule(module, get_device(device) if isinstance(device, str) else device)
