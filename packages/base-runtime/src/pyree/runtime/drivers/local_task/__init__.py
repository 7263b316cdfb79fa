"""local-task: submissions run in order, on a queue thread, or on the submitting thread when
nothing is pending; each dispatch's workgroups run on that thread and N - 1 workers, N the CPUs
this process may use (its affinity mask and cgroup CPU quota) or IREE's --task_topology_* flags
(topology.py).

A compiled kernel runs through the worker loop that the llvm-cpu compiler emits into each kernel
library (local/executable.py: WorkerLoop; workers.py): every thread claims chunks of workgroups
from one counter, none of them holding the GIL, so a hand-over costs neither a GIL wait nor a
wake-up.
A command buffer's consecutive dispatches run through the loop's execute, one native call for all
of them, so the queue thread does not come back to Python between them.
A Python callable, or any kernel before a library with the loop has been loaded, is split into
N contiguous ranges instead, one run by the queue thread and the others by Python
workers that poll for work; cffi releases the GIL while a kernel runs, so they run in parallel.
"""

from __future__ import annotations

_address: int | None = None


def driver() -> int:
    """The entry point: the address of this process's ``pyree_hal_driver_v1_t`` for local-task."""
    global _address
    if _address is None:
        from pyree.runtime.drivers.local_task.instance import LocalTaskDriver
        from pyree.runtime.hal.python_driver import export_driver
        _address = export_driver(LocalTaskDriver())
    return _address
