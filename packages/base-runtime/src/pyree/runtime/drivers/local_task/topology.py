"""How many threads local-task runs a dispatch's workgroups on: the CPUs this process may use,
not the machine's.

``os.cpu_count()`` counts the machine. A process pinned with ``taskset -c 0``, or a container
given one CPU of quota (a one-CPU Ray replica), that started a worker per machine CPU would have
its workers take turns on that one CPU, each hand-over a wait for the scheduler. So the count is,
as IREE's task topology flags decide it:

  ``--task_topology_group_count=N`` (N > 0): exactly N (IREE: "ignores the set mode");
  else the CPU budget, capped by ``--task_topology_max_group_count=N`` when N > 0. The budget is
  the affinity mask's CPU count (``os.sched_getaffinity``), lowered to the CPU quota of this
  process's cgroup and each of its ancestors (cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us`` /
  ``cpu.cfs_period_us``), rounded up: 1.5 CPUs of quota keep two threads busy half the time.

Unlike IREE's default (one thread per physical core, at most 8), every CPU the process may use
counts and there is no cap unless asked for: docs/DESIGN.md says why.

The cgroup files are found as the kernel publishes them: the process's cgroup in
/proc/self/cgroup, the hierarchy's mount in /proc/self/mountinfo. ``PYREE_CGROUP_ROOT`` names
another folder to read those paths under (a test's fake hierarchy, or a host that shows the
container's files elsewhere).
"""

from __future__ import annotations

import math
import os

from pyree.runtime import flags
from pyree.runtime.records import Record

ROOT_VARIABLE = "PYREE_CGROUP_ROOT"


class Topology(Record):
    threads: int     # threads that run workgroups, the submitting one included
    reason: str      # where the count came from, for --list_devices / --dump_devices


def topology() -> Topology:
    """The thread count the flags and this process's CPU budget give."""
    exact = flags.value("task_topology_group_count")
    if exact > 0:
        return Topology(exact, f"--task_topology_group_count={exact}")
    budget, reason = cpu_budget(os.environ.get(ROOT_VARIABLE, "/"))
    cap = flags.value("task_topology_max_group_count")
    if 0 < cap < budget:
        return Topology(cap, f"--task_topology_max_group_count={cap}; {reason}")
    return Topology(budget, reason)


def cpu_budget(root: str = "/") -> tuple[int, str]:
    """(CPUs this process may keep busy, why): the affinity mask, lowered to the cgroup quota."""
    machine = os.cpu_count() or 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = machine
    reason = f"{cpus} of {machine} CPUs in the affinity mask"
    quota = cgroup_cpu_quota(root)
    if quota is not None and math.ceil(quota[0]) < cpus:
        cpus = max(1, math.ceil(quota[0]))
        reason = f"{quota[1]} allows {quota[0]:g} CPU{'' if quota[0] == 1 else 's'}; {reason}"
    return cpus, reason


def cgroup_cpu_quota(root: str = "/") -> tuple[float, str] | None:
    """(CPUs, the file that sets it): the smallest CPU quota of this process's cgroup and its
    ancestors, or None where no quota is set or no cgroup CPU controller is mounted."""
    found = []
    for mount, relative, version in _cgroup_dirs(root):
        folder = os.path.normpath(os.path.join(mount, relative.lstrip("/")))
        while True:
            quota = _read_quota(os.path.join(root, folder.lstrip("/")), version)
            if quota is not None:
                found.append((quota[0], os.path.join(folder, quota[1])))
            if folder == mount or not folder.startswith(mount):
                break
            folder = os.path.dirname(folder)
    return min(found) if found else None


def _cgroup_dirs(root: str) -> list[tuple[str, str, int]]:
    """(mount point, this process's cgroup below it, cgroup version) of each hierarchy that has
    the cpu controller (a v2 hierarchy without it has no cpu.max: nothing is found there)."""
    mounts = []  # (mount point, the hierarchy's folder mounted there, version)
    for line in _lines(root, "proc/self/mountinfo"):
        before, separator, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if not separator or len(fields) < 5 or len(tail) < 3:
            continue
        if tail[0] == "cgroup2":
            mounts.append((fields[4], fields[3], 2))
        elif tail[0] == "cgroup" and "cpu" in tail[2].split(","):
            mounts.append((fields[4], fields[3], 1))
    dirs = []
    for line in _lines(root, "proc/self/cgroup"):
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        version = 2 if hierarchy == "0" and not controllers else 1
        if version == 1 and "cpu" not in controllers.split(","):
            continue
        for mount, mounted, mount_version in mounts:
            inside = mounted.rstrip("/")
            if mount_version == version and (path == mounted or path.startswith(inside + "/")):
                dirs.append((mount, path[len(inside):], version))
                break
    return dirs


def _read_quota(folder: str, version: int) -> tuple[float, str] | None:
    """A cgroup folder's quota in CPUs, and the file it is in; None when unlimited or absent."""
    if version == 2:
        words = _text(os.path.join(folder, "cpu.max")).split()
        if len(words) == 2 and words[0] != "max" and _positive(words[0]) and _positive(words[1]):
            return int(words[0]) / int(words[1]), "cpu.max"
        return None
    quota = _text(os.path.join(folder, "cpu.cfs_quota_us")).strip()
    period = _text(os.path.join(folder, "cpu.cfs_period_us")).strip()
    if _positive(quota) and _positive(period):
        return int(quota) / int(period), "cpu.cfs_quota_us"
    return None


def _positive(text: str) -> bool:
    return text.isdigit() and int(text) > 0


def _text(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return ""


def _lines(root: str, path: str) -> list[str]:
    return _text(os.path.join(root, path)).splitlines()
