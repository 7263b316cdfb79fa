"""The runtime tools' IREE device flags: --dump_devices (IREE's layout), the task topology flags
(--task_topology_group_count / --task_topology_max_group_count) and local-task's thread count
under an affinity mask (taskset) or a cgroup CPU quota (a fake hierarchy under
$PYREE_CGROUP_ROOT), each through the CLI; a run under those limits is checked against numpy."""

from __future__ import annotations

import os

import numpy as np
import pytest
from tool_process import assert_clean_error, install_broken_driver, run_tool
from tooling import require_tool

HEADER = "# " + "=" * 76
SEPARATOR = "# ===" + "-" * 70 + "==="
CPUS = len(os.sched_getaffinity(0))
MACHINE = os.cpu_count()


def _local_task_line(*args: str, **options) -> str:
    proc = run_tool("run_module", "--list_devices=local-task", *args, **options)
    assert proc.returncode == 0, proc.stderr
    (line,) = proc.stdout.splitlines()
    return line


def test_dump_devices_in_irees_layout():
    proc = run_tool("run_module", "--dump_devices")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for driver in ("local-sync", "local-task"):
        assert f"{HEADER}\n# Enumerated devices for driver '{driver}'\n{HEADER}\n\n" in out
    assert (f"{SEPARATOR}\n# --device=local-task://\n#   host CPU, {CPUS} worker "
            f"thread{'s' if CPUS > 1 else ''} ({CPUS} of {MACHINE} CPUs in the affinity mask)\n"
            f"{SEPARATOR}\n") in out
    assert f"{SEPARATOR}\n# --device=local-sync://\n#   host CPU, inline execution\n" in out


def test_dump_devices_of_one_driver_and_of_a_driver_that_cannot_run(tmp_path):
    proc = run_tool("benchmark_module", "--dump_devices=local-sync")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("Enumerated devices for driver") == 1
    assert "# --device=local-sync://" in proc.stdout
    assert_clean_error(run_tool("run_module", "--dump_devices=nope"), 1,
                       "no HAL driver named 'nope' is installed")
    broken = install_broken_driver(tmp_path)
    assert_clean_error(run_tool("run_module", "--dump_devices=broken", python_path=broken), 1,
                       "driver 'broken' is unavailable")
    listing = run_tool("run_module", "--dump_devices", python_path=broken)
    assert listing.returncode == 0, listing.stderr
    assert "# Enumerated devices for driver 'broken'" in listing.stdout
    assert "#   unavailable: ModuleNotFoundError" in listing.stdout


@pytest.mark.skipif(CPUS < 2, reason="needs two CPUs to tell one from all")
def test_taskset_to_one_cpu_gives_one_thread_and_the_run_is_right(tmp_path, single_module):
    taskset = (require_tool("taskset"), "-c", str(min(os.sched_getaffinity(0))))
    assert _local_task_line(prefix=taskset).endswith(
        f"host CPU, 1 worker thread (1 of {MACHINE} CPUs in the affinity mask)")
    _check_add_run(single_module, tmp_path, prefix=taskset)


def test_topology_flags_set_the_count():
    assert _local_task_line("--task_topology_group_count=5").endswith(
        "host CPU, 5 worker threads (--task_topology_group_count=5)")
    assert _local_task_line("--task_topology_max_group_count=1").endswith(
        f"1 worker thread (--task_topology_max_group_count=1; {CPUS} of {MACHINE} CPUs in the "
        "affinity mask)")
    # a cap above the budget changes nothing
    assert _local_task_line("--task_topology_max_group_count=4096").endswith(
        f"({CPUS} of {MACHINE} CPUs in the affinity mask)")
    for tool in ("benchmark_module", "check_module"):  # every tool that opens a device
        proc = run_tool(tool, "--list_devices=local-task", "--task_topology_group_count=2")
        assert proc.stdout.rstrip().endswith("2 worker threads (--task_topology_group_count=2)")


@pytest.mark.parametrize("flag", ["--task_topology_group_count=two",
                                  "--task_topology_max_group_count=-1"])
def test_bad_topology_values_are_usage_errors(flag, single_module):
    assert_clean_error(run_tool("run_module", f"--module={single_module}", flag), 2,
                       "the value must be a non-negative integer")


def test_a_thread_count_past_irees_limit_is_a_usage_error(single_module):
    """100000 threads had been started (a call of one exp took minutes on two CPUs)."""
    assert_clean_error(run_tool("run_module", f"--module={single_module}",
                                "--task_topology_group_count=100000"), 2, "at most 256 threads")


def _quota_root(tmp_path, cpu_max: str) -> dict[str, str]:
    """A cgroup v2 hierarchy at /sys/fs/cgroup whose root cgroup has ``cpu.max``."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_text("0::/\n")
    (tmp_path / "proc/self/mountinfo").write_text(
        "31 23 0:28 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n")
    (tmp_path / "sys/fs/cgroup").mkdir(parents=True)
    (tmp_path / "sys/fs/cgroup/cpu.max").write_text(cpu_max)
    return {"PYREE_CGROUP_ROOT": str(tmp_path)}


def test_a_cgroup_quota_of_half_a_cpu_gives_one_thread(tmp_path, single_module):
    env = _quota_root(tmp_path / "root", "50000 100000\n")
    assert _local_task_line(env=env).endswith(
        f"1 worker thread (/sys/fs/cgroup/cpu.max allows 0.5 CPUs; {CPUS} of {MACHINE} CPUs in "
        "the affinity mask)")
    assert _local_task_line("--task_topology_group_count=2", env=env).endswith(
        "2 worker threads (--task_topology_group_count=2)")  # asked for: the flag wins
    _check_add_run(single_module, tmp_path, env=env)


def test_an_unlimited_cgroup_leaves_the_affinity_count(tmp_path):
    env = _quota_root(tmp_path, "max 100000\n")
    assert _local_task_line(env=env).endswith(f"({CPUS} of {MACHINE} CPUs in the affinity mask)")


def _check_add_run(module: str, tmp_path, **options) -> None:
    rng = np.random.default_rng()
    a, b = (rng.standard_normal((37, 53)).astype(np.float32) for _ in range(2))
    a[0, :3] = [np.nan, np.inf, -0.0]
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    proc = run_tool("run_module", "--device=local-task", f"--module={module}",
                    f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}",
                    f"--output=@{tmp_path / 'sum.npy'}", **options)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "sum.npy"), a + b)
