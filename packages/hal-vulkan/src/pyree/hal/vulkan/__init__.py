"""pyree's Vulkan HAL driver: registers ``vulkan`` in the runtime's entry-point group.

Device URIs: ``vulkan`` (the first usable device), ``vulkan://<index>``, ``vulkan://<uuid>``
(as ``--list_devices`` prints them). Needs libvulkan.so.1 and a Vulkan 1.2 driver at run time.
"""

from __future__ import annotations

__version__ = "0.1.0"

_address: int | None = None


def driver() -> int:
    """The entry point: the address of this process's ``pyree_hal_driver_v1_t`` for Vulkan."""
    global _address
    if _address is None:
        from pyree.hal.vulkan.instance import VulkanDriver
        from pyree.runtime.hal.python_driver import export_driver
        _address = export_driver(VulkanDriver())
    return _address
