"""pyree's CUDA HAL driver: registers ``cuda`` in the runtime's entry-point group.

Device URIs: ``cuda`` (device 0), ``cuda://<ordinal>``, ``cuda://GPU-<uuid>``. The command-buffer
mode is picked per device with ``?command_buffer=direct|stream|graph`` on the URI
(``cuda://0?command_buffer=stream``) or the ``PYREE_CUDA_COMMAND_BUFFER_MODE`` environment
variable; the default is ``graph``. See README.md.
"""

from __future__ import annotations

__version__ = "0.1.0"

_address: int | None = None


def driver() -> int:
    """The entry point: the address of this process's ``pyree_hal_driver_v1_t`` for CUDA."""
    global _address
    if _address is None:
        from pyree.hal.cuda import startup
        startup.begin()  # cuInit beside the rest of this driver's imports
        from pyree.hal.cuda.instance import CudaDriver
        from pyree.runtime.hal.python_driver import export_driver
        _address = export_driver(CudaDriver())
    return _address
