"""CPU-only: the rocm driver against a real HIP runtime with no AMD GPU (Debian's libamdhip64-5).

There is no AMD GPU where pyree is built. These tests load the real library, check that every
entry point of the driver's table resolves in it, and that a host without a GPU lists ``rocm`` and
``hip`` as unavailable with HIP's own reason, refuses ``--device=rocm`` with one clear paragraph,
and keeps the CPU drivers working. The GPU paths run on an H100 through the test-only
HIP-on-CUDA shim (tests/drivers/rocm/hip_on_cuda/).
"""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tooling import missing, require_module

require_module("pyree.hal.rocm")  # pyree-hal-rocm; CI installs it

import pyree.runtime as rt  # noqa: E402
from pyree.hal.rocm import symbols  # noqa: E402
from pyree.hal.rocm.device import parse_device_path  # noqa: E402
from pyree.hal.rocm.executable import chip_of  # noqa: E402
from pyree.hal.rocm.instance import format_uuid  # noqa: E402
from pyree.runtime.hal.python_driver import HalError  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "data"
DEBIAN_HIP = "/usr/lib/x86_64-linux-gnu/libamdhip64.so.5"  # Debian 12's libamdhip64-5

# The table of common.md (the contract with tests/drivers/rocm/hip_on_cuda/): exactly these, no more.
TABLE = {
    "hipGetErrorName", "hipGetErrorString", "hipInit", "hipGetDeviceCount", "hipDeviceGet",
    "hipDeviceGetName", "hipDeviceGetUuid", "hipSetDevice", "hipMemGetInfo",
    "hipStreamCreateWithFlags", "hipStreamDestroy", "hipStreamSynchronize",
    "hipStreamWaitEvent", "hipEventCreateWithFlags", "hipEventDestroy", "hipEventRecord",
    "hipEventSynchronize", "hipEventQuery", "hipEventElapsedTime", "hipMalloc", "hipFree", "hipHostMalloc", "hipHostFree",
    "hipMemcpyHtoDAsync", "hipMemcpyDtoHAsync", "hipMemcpyDtoDAsync", "hipMemsetD8Async",
    "hipMemsetD16Async", "hipMemsetD32Async", "hipModuleLoadDataEx", "hipModuleUnload",
    "hipModuleGetFunction", "hipModuleLaunchKernel",
}


@pytest.fixture(scope="module")
def debian_hip() -> str:
    """The path of Debian's libamdhip64.so.5; missing, the test skips (fails under CI=true)."""
    try:
        ctypes.CDLL(DEBIAN_HIP)
    except OSError as e:
        missing(f"Debian's libamdhip64-5 is not installed (apt-get install libamdhip64-5): {e}")
    return DEBIAN_HIP


def _no_gpu(library: str) -> None:
    """The tests below assume HIP finds no device; on an AMD GPU host they would test nothing."""
    lib = ctypes.CDLL(library)
    count = ctypes.c_int()
    if lib.hipGetDeviceCount(ctypes.byref(count)) == 0 and count.value:
        pytest.fail("this host has an AMD GPU: run the GPU tests, not the no-device ones")


def _run(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})


def test_list_drivers_shows_rocm_and_hip_unavailable_with_hips_reason(debian_hip):
    _no_gpu(debian_hip)
    proc = _run("pyree.runtime.tools.run_module", "--list_drivers",
                env={symbols.LIBRARY_VARIABLE: debian_hip})
    assert proc.returncode == 0, proc.stderr
    lines = {line.split(":", 1)[0].strip(): line for line in proc.stdout.splitlines()}
    for name in ("rocm", "hip"):
        assert "unavailable" in lines[name] and "hipErrorNoDevice" in lines[name], proc.stdout
        assert "hipGetDeviceCount" in lines[name], proc.stdout
    assert lines["local-task"].endswith("available") and "unavailable" not in lines["local-task"]
    devices = _run("pyree.runtime.tools.run_module", "--list_devices")
    assert devices.returncode == 0 and "local-task://" in devices.stdout, devices.stderr
    assert "rocm://" not in devices.stdout and "hip://" not in devices.stdout


def test_the_library_search_finds_debians_soname_by_itself(debian_hip):
    proc = _run("pyree.runtime.tools.run_module", "--list_drivers",
                env={symbols.LIBRARY_VARIABLE: ""})
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.strip().startswith("rocm:"))
    assert "hipErrorNoDevice" in line, line


def test_a_missing_pyree_hip_library_is_named(tmp_path):
    absent = tmp_path / "libamdhip64.so"
    code = ("import pyree.runtime as rt\n"
            "[d] = [d for d in rt.list_drivers() if d.name == 'rocm']\n"
            "print(d.available, d.reason)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, symbols.LIBRARY_VARIABLE: str(absent)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("False"), proc.stdout
    assert str(absent) in proc.stdout and "$PYREE_HIP_LIBRARY" in proc.stdout, proc.stdout


def test_a_library_without_hips_entry_points_is_named():
    """libc stands in for a HIP runtime that lacks the table's entry points."""
    code = ("import pyree.runtime as rt\n"
            "[d] = [d for d in rt.list_drivers() if d.name == 'rocm']\n"
            "print(d.available, d.reason)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, symbols.LIBRARY_VARIABLE: "libc.so.6"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("False") and "UNAVAILABLE" in proc.stdout, proc.stdout
    assert "lacks entry points the HAL needs: hipGetErrorName" in proc.stdout, proc.stdout


def test_running_a_module_on_rocm_without_a_gpu_is_one_clear_paragraph(debian_hip, tmp_path):
    _no_gpu(debian_hip)
    from pyree.compiler import CompileError
    from pyree.compiler.codegen.rocm.hsaco import lld_command
    try:
        lld_command()
    except CompileError as e:
        missing(str(e))
    vmfb = tmp_path / "add.vmfb"
    proc = _run("pyree.compiler.tools.compile", str(DATA / "add.mlir"), "-o", str(vmfb),
                "--pyree-hal-target-backends=rocm", "--iree-rocm-target-chip=gfx942")
    assert proc.returncode == 0, proc.stderr
    proc = _run("pyree.runtime.tools.run_module", "--device=rocm", f"--module={vmfb}",
                "--function=add", "--input=4xf32=1,2,3,4", "--input=4xf32=1,2,3,4",
                env={symbols.LIBRARY_VARIABLE: debian_hip})
    assert proc.returncode != 0
    message = proc.stderr.strip()
    assert "Traceback" not in proc.stderr and len(message.splitlines()) == 1, proc.stderr
    assert "rocm" in message and "unavailable" in message and "hipErrorNoDevice" in message


def test_every_symbol_of_the_table_resolves_in_debians_library(debian_hip, monkeypatch):
    assert set(symbols.SYMBOLS) == TABLE and len(symbols.SYMBOLS) == len(TABLE)
    assert symbols.SYMBOLS[:2] == ("hipGetErrorName", "hipGetErrorString")
    lib = symbols.ffi.dlopen(debian_hip)
    for name in symbols.SYMBOLS:
        assert getattr(lib, name) is not None, name
    monkeypatch.setattr(symbols, "_lib", lib)  # what load() keeps
    assert symbols.describe(symbols.NO_DEVICE).startswith("hipErrorNoDevice")


@pytest.mark.parametrize("code, status", [
    (2, "RESOURCE_EXHAUSTED"), (1, "INVALID_ARGUMENT"), (100, "UNAVAILABLE"), (101, "NOT_FOUND"),
    (500, "NOT_FOUND"), (719, "INTERNAL"), (209, "INTERNAL"),
])
def test_hip_errors_become_hal_statuses_with_hips_name(debian_hip, code, status, monkeypatch):
    monkeypatch.setattr(symbols, "_lib", symbols.ffi.dlopen(debian_hip))  # what load() keeps
    with pytest.raises(symbols.HipError) as caught:
        symbols.check(code, "what we did")
    assert caught.value.status == status and caught.value.code == code
    assert caught.value.message.startswith("what we did: hipError"), caught.value.message


def test_library_search_order(monkeypatch):
    monkeypatch.delenv(symbols.LIBRARY_VARIABLE, raising=False)
    assert symbols.library_candidates() == ("libamdhip64.so", "libamdhip64.so.7",
                                            "libamdhip64.so.6", "libamdhip64.so.5")
    monkeypatch.setenv(symbols.LIBRARY_VARIABLE, "/opt/rocm/lib/libamdhip64.so")
    assert symbols.library_candidates() == ("/opt/rocm/lib/libamdhip64.so",)


@pytest.mark.parametrize("path, selector", [
    ("", ""), ("0", "0"), ("1", "1"), ("0?command_buffer=direct", "0"),
    ("GPU-8a2f6e1c-0b3d-4e5f-9a7b-1c2d3e4f5a6b", "GPU-8a2f6e1c-0b3d-4e5f-9a7b-1c2d3e4f5a6b"),
])
def test_device_paths(path, selector):
    assert parse_device_path(path) == selector


@pytest.mark.parametrize("path, message", [
    ("0?command_buffer=graph", "ROCm command buffers are direct only"),
    ("0?command_buffer=stream", "ROCm command buffers are direct only"),
    ("0?streams=2", r"unknown rocm device parameter\(s\) \['streams'\]"),
])
def test_bad_device_parameters_are_named(path, message):
    with pytest.raises(HalError, match=message) as caught:
        parse_device_path(path)
    assert caught.value.status == "INVALID_ARGUMENT"


def test_uuids_are_spelled_like_the_cuda_drivers():
    raw = bytes.fromhex("8a2f6e1c0b3d4e5f9a7b1c2d3e4f5a6b")
    assert format_uuid(raw) == "GPU-8a2f6e1c-0b3d-4e5f-9a7b-1c2d3e4f5a6b"


def test_the_recompile_hint_names_the_devices_chip():
    assert chip_of("gfx90a:sramecc+:xnack-") == "gfx90a"
    assert chip_of("AMD Instinct MI300X") == "<the gfx name of the AMD Instinct MI300X, see rocminfo>"


def test_cpu_devices_still_work_when_rocm_is_unavailable(debian_hip):
    _no_gpu(debian_hip)
    infos = {d.name: d for d in rt.list_drivers()}
    assert not infos["rocm"].available and not infos["hip"].available
    assert "hipErrorNoDevice" in infos["rocm"].reason
    with pytest.raises(Exception, match="driver 'rocm' is unavailable"):
        rt.get_device("rocm://0")
    data = np.random.default_rng().standard_normal(4).astype(np.float32)
    buf = rt.get_device("local-task").allocate(16)
    buf.write(0, data)
    assert buf.read(0, 16) == data.tobytes()
