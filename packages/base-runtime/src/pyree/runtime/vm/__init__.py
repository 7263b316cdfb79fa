"""The VM layer: a verified module on a device, its functions, their results and checks.

Its names are imported on first use: a tool reads ``vm.host_array`` or ``vm.formatting`` for its
flags without importing the functions, the module readers and the HAL behind them."""

_LAZY = {
    "CheckFailure": "checks",
    "DeviceArray": "device_array", "asdevicearray": "device_array",
    "format_array": "formatting",
    "Function": "function",
    "LoadedModule": "loaded_module", "load_module": "load",
    "TensorType": "tensor_type",
}
__all__ = list(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        from importlib import import_module

        value = getattr(import_module(f"pyree.runtime.vm.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'pyree.runtime.vm' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
