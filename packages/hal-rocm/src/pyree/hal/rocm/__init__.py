"""pyree's ROCm HAL driver: registers ``rocm`` and ``hip`` (IREE's newer name for the same
driver) in the runtime's entry-point group.

Device URIs: ``rocm`` (device 0), ``rocm://<ordinal>``, ``rocm://GPU-<uuid>`` (and the same with
``hip://``). Command buffers are direct only, as in IREE's ROCm driver. See README.md.
"""

from __future__ import annotations

__version__ = "0.1.0"

_addresses: dict[str, int] = {}


def _export(name: str) -> int:
    address = _addresses.get(name)
    if address is None:
        from pyree.hal.rocm.instance import RocmDriver
        from pyree.runtime.hal.python_driver import export_driver
        address = _addresses[name] = export_driver(RocmDriver(name))
    return address


def driver() -> int:
    """The ``rocm`` entry point: the address of this process's ``pyree_hal_driver_v1_t``."""
    return _export("rocm")


def hip_driver() -> int:
    """The ``hip`` entry point: the same driver under IREE's newer name (``hip://0``)."""
    return _export("hip")
