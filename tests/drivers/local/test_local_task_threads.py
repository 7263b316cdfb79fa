"""local-task's thread count: the CPUs the process may use (affinity mask, cgroup v2/v1 CPU
quota of its cgroup and every ancestor) unless IREE's --task_topology_* flags say otherwise, set
from Python with IREE's ``ireert.flags.parse_flags``. Each process below is a fresh interpreter:
the threads a dispatch really runs on are counted by name after a call whose result is checked
against numpy. The cgroup reader runs on fake hierarchies, v2 and v1, as the kernel lays them
out (/proc/self/cgroup, /proc/self/mountinfo, the controller files)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest
from pyree.runtime.drivers.local_task.topology import cgroup_cpu_quota, cpu_budget
from tooling import require_tool

# A call with 24 workgroups (so every thread gets some), its result checked against numpy, then
# the names of the threads local-task started, printed for the test.
SCRIPT = """
import threading, numpy as np
import pyree.compiler as ireec, pyree.runtime as ireert
{before}
text = '''func.func @add(%a: tensor<257x1031xf32>, %b: tensor<257x1031xf32>) -> tensor<257x1031xf32> {{
  %0 = arith.addf %a, %b : tensor<257x1031xf32>
  return %0 : tensor<257x1031xf32>
}}'''
module = ireert.load_module(ireec.compile_str(text, target_backends=["llvm-cpu"]),
                            device="local-task")
rng = np.random.default_rng()
a, b = (rng.standard_normal((257, 1031)).astype(np.float32) for _ in range(2))
for _ in range(3):
    np.testing.assert_array_equal(module["add"](a, b).to_host(), a + b)
print(sorted(t.name for t in threading.enumerate() if t.name.startswith("pyree-local-task")))
"""
QUEUE = "pyree-local-task-queue"


def _threads(*prefix: str, before: str = "") -> list[str]:
    code = textwrap.dedent(SCRIPT.format(before=before))
    run = subprocess.run([*prefix, sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    return ast.literal_eval(run.stdout.strip().splitlines()[-1])


needs_two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2,
                                    reason="needs two CPUs to tell one from all")


@needs_two_cpus
def test_taskset_to_one_cpu_starts_no_workers():
    """One CPU allowed: every workgroup runs on the submitting thread, no worker is started."""
    cpu = min(os.sched_getaffinity(0))
    assert _threads(require_tool("taskset"), "-c", str(cpu)) == [QUEUE]


@needs_two_cpus
def test_all_cpus_start_a_worker_per_further_cpu():
    workers = len(os.sched_getaffinity(0)) - 1
    assert _threads() == sorted([QUEUE] + [f"pyree-local-task-native-{i}" for i in range(workers)])


def test_parse_flags_sets_the_count_for_devices_created_after():
    assert _threads(before="ireert.flags.parse_flags('--task_topology_group_count=3')") == sorted(
        [QUEUE, "pyree-local-task-native-0", "pyree-local-task-native-1"])
    assert _threads(before="ireert.flags.parse_flags('--task_topology_max_group_count=1')") == [
        QUEUE]


def test_parse_flags_refuses_what_it_does_not_know():
    from pyree.runtime import InvocationError, flags

    before = [flags.value(name) for name in flags.FLAGS]
    for bad, message in [("--task_topology_group_count=-1", "non-negative integer"),
                         ("--task_topology_group_count", "non-negative integer"),
                         ("--task_topology_mode=physical_cores", "unknown runtime flag"),
                         ("task_topology_group_count=2", "unknown runtime flag")]:
        with pytest.raises(InvocationError, match=message):
            flags.parse_flags("--task_topology_max_group_count=1", bad)
    assert [flags.value(name) for name in flags.FLAGS] == before  # a failed call sets none


def _hierarchy(tmp_path, version: int, cgroup: str, mounted: str = "/",
               files: dict[str, str] | None = None) -> str:
    """A fake root: /proc/self/{cgroup,mountinfo} naming ``cgroup`` in a hierarchy whose folder
    ``mounted`` is mounted at /sys/fs/cgroup (v2) or /sys/fs/cgroup/cpu,cpuacct (v1), and the
    controller ``files`` (paths below the root)."""
    if version == 2:
        mount, line, kind = "/sys/fs/cgroup", f"0::{cgroup}", "cgroup2 cgroup2 rw"
    else:
        mount = "/sys/fs/cgroup/cpu,cpuacct"
        line, kind = f"4:cpu,cpuacct:{cgroup}", "cgroup cgroup rw,cpu,cpuacct"
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text(f"12:pids:{cgroup}\n{line}\n")
    (tmp_path / "proc/self/mountinfo").write_text(
        "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
        f"31 23 0:28 {mounted} {mount} rw,nosuid shared:9 - {kind}\n")
    for path, text in (files or {}).items():
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(text)
    return str(tmp_path)


def test_v2_quota_is_the_smallest_of_the_cgroup_and_its_ancestors(tmp_path):
    root = _hierarchy(tmp_path, 2, "/ray/replica", files={
        "sys/fs/cgroup/cpu.max": "max 100000\n",
        "sys/fs/cgroup/ray/cpu.max": "50000 100000\n",
        "sys/fs/cgroup/ray/replica/cpu.max": "150000 100000\n"})
    assert cgroup_cpu_quota(root) == (0.5, "/sys/fs/cgroup/ray/cpu.max")
    assert cpu_budget(root)[0] == 1


def test_v2_quota_rounds_up_and_never_raises_the_affinity_count(tmp_path):
    root = _hierarchy(tmp_path, 2, "/", files={"sys/fs/cgroup/cpu.max": "150000 100000\n"})
    cpus = len(os.sched_getaffinity(0))
    assert cgroup_cpu_quota(root) == (1.5, "/sys/fs/cgroup/cpu.max")
    assert cpu_budget(root)[0] == min(2, cpus)


def test_v1_quota_in_a_container_whose_cgroup_is_the_mount(tmp_path):
    """Docker without a cgroup namespace: /proc/self/cgroup names /docker/<id>, which is the
    folder mounted at the controller's mount point."""
    root = _hierarchy(tmp_path, 1, "/docker/abc", mounted="/docker/abc", files={
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "100000\n",
        "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"})
    assert cgroup_cpu_quota(root) == (1.0, "/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us")
    budget, reason = cpu_budget(root)
    assert budget == 1 and "cpu.cfs_quota_us allows 1 CPU;" in reason


@pytest.mark.parametrize("version, files", [
    (2, {"sys/fs/cgroup/cpu.max": "max 100000\n"}),
    (2, {}),
    (1, {"sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us": "-1\n",
         "sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us": "100000\n"}),
    (2, {"sys/fs/cgroup/cpu.max": "garbage\n"}),
])
def test_no_quota_leaves_the_affinity_count(tmp_path, version, files):
    root = _hierarchy(tmp_path, version, "/", files=files)
    assert cgroup_cpu_quota(root) is None
    assert cpu_budget(root)[0] == len(os.sched_getaffinity(0))


def test_no_cgroup_files_at_all(tmp_path):
    assert cgroup_cpu_quota(str(tmp_path)) is None
