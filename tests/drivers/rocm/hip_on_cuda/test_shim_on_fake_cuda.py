"""CPU-only: the HIP-on-CUDA shim under pyree's rocm driver, over fake_libcuda.c (host memory,
kernels not run) in place of libcuda.so.1: the device listing, fills of every width with a copy,
>64 MiB transfers, launches, and the JIT's error log for a damaged code object go through the
same calls as on the GPU (test_rocm_on_cuda.py, which also checks what kernels compute)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parents[2])]
from tooling import require_module, require_tool  # noqa: E402

require_module("pyree.compiler")  # the modules are compiled here
require_module("pyree.hal.rocm")

import device_checks  # noqa: E402
import rocm_on_cuda_cases as cases  # noqa: E402
from pyree.compiler import CompileOptions, compile_str  # noqa: E402
from relabel import relabel  # noqa: E402
from trace_checks import check_trace, dispatches, dispatches_per_call  # noqa: E402


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> dict:
    """A process environment whose libcuda.so.1 is the fake and whose HIP library is the shim."""
    gcc, out = require_tool("gcc"), tmp_path_factory.mktemp("fake_cuda")
    subprocess.run([gcc, "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    str(HERE / "fake_libcuda.c"), "-o", str(out / "libcuda.so.1")], check=True)
    subprocess.run(["bash", str(HERE / "build.sh"), str(out)], check=True, timeout=120)
    search = os.pathsep.join(filter(None, [str(out), os.environ.get("LD_LIBRARY_PATH")]))
    return {**os.environ, "LD_LIBRARY_PATH": search,
            "PYREE_HIP_LIBRARY": str(out / "libamdhip64.so")}


@pytest.fixture(scope="module")
def modules(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("modules")
    cuda = CompileOptions(target_backends=["cuda"], cuda_target="sm_90")
    add = compile_str(cases.CASES["add_37x53"][0], cuda)
    (out / "add_37x53.vmfb").write_bytes(relabel(add))
    (out / "damaged.vmfb").write_bytes(relabel(add, edit_code=cases.damage))
    (out / "fills.vmfb").write_bytes(relabel(compile_str(cases.fills_mlir(), cuda)))
    (out / "copy_large.vmfb").write_bytes(relabel(compile_str(cases.CASES["copy_large"][0],
                                                              cuda)))
    return out


def run_module(env: dict, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pyree.runtime.tools.run_module", *args],
                          env=env, capture_output=True, text=True, timeout=300)


def test_lists_the_device_by_ordinal_and_uuid(env):
    done = run_module(env, "--list_drivers", "--list_devices")
    lines = [ln.strip() for ln in done.stdout.splitlines()]
    assert "rocm: available" in lines and "hip: available" in lines, done.stdout
    assert any(ln.startswith("rocm://0 ") and ln.endswith("Fake CUDA device 0") for ln in lines)
    assert any(ln.startswith("rocm://GPU-00112233-4455-6677-8899-aabbccddeeff ") for ln in lines)


def test_fills_of_every_width_and_a_copy(env, modules):
    device_checks.run(env, "fills", modules, "rocm")


def test_large_transfers(env, modules):
    device_checks.run(env, "case", modules, "rocm://0", "copy_large")


def test_a_device_used_from_another_thread(env, modules):
    device_checks.run(env, "other_thread", modules, "rocm", "copy_large")


def test_a_launch_reaches_cuda(env, modules):
    done = run_module(env, "--device=hip", f"--module={modules / 'add_37x53.vmfb'}",
                      "--input=37x53xf32=1", "--input=37x53xf32=2")
    assert done.returncode == 0 and "result[0]" in done.stdout, done.stdout + done.stderr


def test_a_traced_run_times_each_command_with_hip_events(env, modules, tmp_path):
    """--pyree-trace on rocm: hipEventRecord around each command, hipEventElapsedTime for the
    times (the fake's events read the host's clock; its launches compute nothing)."""
    add = modules / "add_37x53.vmfb"
    out = tmp_path / "add.json"
    done = run_module(env, "--device=rocm", f"--module={add}", "--input=37x53xf32=1",
                      "--input=37x53xf32=2", f"--pyree-trace={out}")
    assert done.returncode == 0 and "result[0]" in done.stdout, done.stderr  # (kernels not run)
    events = dispatches(check_trace(str(out)))
    assert len(events) == dispatches_per_call(add.read_bytes()) >= 1
    assert all(e["args"]["sources"] and e["name"] == "; ".join(e["args"]["sources"])
               for e in events)
    assert "pyree trace: 1 call of @" in done.stderr
    out = tmp_path / "fills.json"
    done = run_module(env, "--device=rocm", f"--module={modules / 'fills.vmfb'}",
                      f"--input={cases.COPIED[0]}x{cases.COPIED[1]}xf32=1.5",
                      f"--pyree-trace={out}")
    assert done.returncode == 0, done.stderr
    timed = [s["cat"] for s in check_trace(str(out)) if s["cat"] in ("fill", "copy")]
    assert timed.count("fill") == len(cases.FILLS) and timed.count("copy") == 1


def test_damaged_code_object_shows_the_jit_log(env, modules):
    done = run_module(env, "--device=rocm", f"--module={modules / 'damaged.vmfb'}",
                      "--input=37x53xf32=1", "--input=37x53xf32=2")
    assert done.returncode != 0
    log = (r"ptxas application ptx input, line \d+; error : Not a name of any known "
           r"instruction: 'pyree_damaged_instruction'")
    assert re.search(log, done.stderr) and "hipErrorInvalidKernelFile" in done.stderr, done.stderr
