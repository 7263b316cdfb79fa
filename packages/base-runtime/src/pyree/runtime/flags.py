"""IREE's ``iree.runtime.flags``: process-wide runtime flags, set from Python with IREE's call

    import pyree.runtime as ireert
    ireert.flags.parse_flags("--task_topology_max_group_count=2")

and from the tools' command lines (``pyree-run-module --task_topology_max_group_count=2``),
through this same function. As in IREE, a driver reads them when it creates a device, so they
apply to devices created afterwards; a device already created (``get_device`` keeps one per
URI) keeps what it started with.

The flags pyree knows are IREE's task-topology flags, which size local-task's worker threads
(drivers/local_task/topology.py); any other flag is refused by name.
"""

from __future__ import annotations

from pyree.runtime.errors import InvocationError

# name -> (default, what it does); every value is a non-negative integer.
FLAGS = {
    "task_topology_group_count": (
        0, "local-task runs workgroups on exactly N threads (0: as many as the CPUs this "
           "process may use, see --task_topology_max_group_count)"),
    "task_topology_max_group_count": (
        0, "at most N local-task threads when their count is found from the CPUs this process "
           "may use (its affinity mask and cgroup CPU quota); 0: no cap beyond those"),
}
_values = {name: default for name, (default, _) in FLAGS.items()}
MAX_GROUPS = 256  # IREE_TASK_TOPOLOGY_MAX_GROUP_COUNT: threads --task_topology_group_count asks


def parse_flags(*flags: str) -> None:
    """Sets flags given as ``--name=value`` (IREE's spelling); raises InvocationError naming a
    flag that is unknown or has a bad value, and then sets none of them."""
    parsed = {}
    for flag in flags:
        name, has_value, text = str(flag).removeprefix("--").partition("=")
        if not str(flag).startswith("--") or name not in FLAGS:
            raise InvocationError(f"unknown runtime flag '{flag}'; pyree's runtime flags are "
                                  + ", ".join(f"--{n}=N" for n in FLAGS))
        if not has_value or not text.strip().isdigit():
            raise InvocationError(f"runtime flag '{flag}': the value must be a non-negative "
                                  f"integer, as in --{name}=2")
        parsed[name] = int(text)
        if name == "task_topology_group_count" and parsed[name] > MAX_GROUPS:
            raise InvocationError(f"runtime flag '{flag}': at most {MAX_GROUPS} threads, as "
                                  f"IREE's task topology holds (100000 had started as many)")
    _values.update(parsed)


def value(name: str) -> int:
    """The flag's current value (its default until ``parse_flags`` sets it)."""
    return _values[name]
