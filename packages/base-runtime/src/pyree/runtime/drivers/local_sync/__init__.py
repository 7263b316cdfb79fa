"""local-sync: runs every submission inline on the calling thread, one workgroup range per call.

The simplest correct executor, and the reference local-task is compared against.
"""

from __future__ import annotations

_address: int | None = None


def driver() -> int:
    """The entry point: the address of this process's ``pyree_hal_driver_v1_t`` for local-sync."""
    global _address
    if _address is None:
        from pyree.runtime.drivers.local_sync.instance import LocalSyncDriver
        from pyree.runtime.hal.python_driver import export_driver
        _address = export_driver(LocalSyncDriver())
    return _address
