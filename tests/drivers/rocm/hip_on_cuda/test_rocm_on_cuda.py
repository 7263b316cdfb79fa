"""On an NVIDIA GPU, through the HIP-on-CUDA shim: pyree's rocm driver runs real work through
pyree-run-module and the Python API (device_checks.py, one process per check) on every way of
naming the device (rocm, hip, rocm://0, rocm://GPU-<uuid>), from modules relabelled from cuda
(build_modules.py: $PYREE_ROCM_ON_CUDA_MODULE_DIR, or built here when that is unset), against
numpy with NaN/inf/-0 inputs; and its errors: wrong shapes, a code object the JIT refuses, out of
device memory."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import device_checks  # noqa: E402
import numerics_cases  # noqa: E402
import rocm_on_cuda_cases as cases  # noqa: E402
from trace_checks import check_trace, dispatches  # noqa: E402

pytestmark = pytest.mark.cuda


@pytest.fixture(scope="session")
def module_dir(tmp_path_factory) -> Path:
    folder = os.environ.get("PYREE_ROCM_ON_CUDA_MODULE_DIR")
    if folder:
        return Path(folder)
    out = tmp_path_factory.mktemp("rocm_on_cuda")  # needs the compiler, which a GPU host may lack
    subprocess.run([sys.executable, str(HERE / "build_modules.py"), str(out)], check=True)
    return out


@pytest.fixture(scope="session")
def devices(cli) -> dict[str, str]:
    """--list_devices' rocm lines: URI -> name."""
    listing = cli("--list_devices")
    assert listing.returncode == 0, listing.stderr
    return dict(ln.split(maxsplit=1) for ln in listing.stdout.splitlines()
                if ln.startswith("rocm://"))


@pytest.fixture(scope="session")
def uuid_uri(devices) -> str:
    return next(uri for uri in devices if uri.startswith("rocm://GPU-"))


def test_list_drivers_shows_rocm_and_hip_available(cli):
    listing = cli("--list_drivers")
    lines = {ln.split(":")[0].strip(): ln.strip() for ln in listing.stdout.splitlines()}
    assert lines["rocm"] == "rocm: available" and lines["hip"] == "hip: available", listing.stdout


def test_list_devices_names_the_gpu_by_ordinal_and_uuid(devices, uuid_uri):
    assert "NVIDIA" in devices["rocm://0"], devices
    assert re.fullmatch(r"rocm://GPU-[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}", uuid_uri)
    assert devices[uuid_uri].startswith(devices["rocm://0"])


@pytest.mark.parametrize("device", ["rocm", "hip", "rocm://0", "uuid"])
def test_cli_runs_add_with_special_values(device, cli, module_dir, uuid_uri, tmp_path):
    device = uuid_uri if device == "uuid" else device
    a, b = cases.random_args("add_37x53", np.random.default_rng())
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    done = cli(f"--device={device}", f"--module={module_dir / 'add_37x53.vmfb'}", "--function=main",
               f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}",
               f"--output=@{tmp_path / 'sum.npy'}")
    assert done.returncode == 0, done.stdout + done.stderr
    with np.errstate(invalid="ignore"):
        want = a.astype(np.float64) + b
    cases.assert_matches(np.load(tmp_path / "sum.npy"), want, 1e-6)


def test_a_traced_run_times_its_dispatch_with_hip_events(cli, module_dir, tmp_path):
    a, b = cases.random_args("add_37x53", np.random.default_rng())
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    done = cli("--device=rocm", f"--module={module_dir / 'add_37x53.vmfb'}", "--function=main",
               f"--input=@{tmp_path / 'a.npy'}", f"--input=@{tmp_path / 'b.npy'}",
               f"--output=@{tmp_path / 'sum.npy'}", f"--pyree-trace={tmp_path / 'add.json'}")
    assert done.returncode == 0, done.stdout + done.stderr
    with np.errstate(invalid="ignore"):
        cases.assert_matches(np.load(tmp_path / "sum.npy"), a.astype(np.float64) + b, 1e-6)
    (event,) = dispatches(check_trace(str(tmp_path / "add.json")))
    assert event["dur"] > 0 and event["name"].startswith("arith.addf @ ")
    assert "pyree trace: 1 call of @main; 1 dispatch, 1 kernel" in done.stderr


@pytest.mark.parametrize("name", sorted(cases.CASES))
def test_case_matches_numpy(name, hip_env, module_dir):
    device_checks.run(hip_env, "case", module_dir, "rocm", name)


@pytest.mark.parametrize("name", sorted(set(numerics_cases.CASES) - cases.NUMERICS_LEFT_OUT))
def test_shared_case_matches_numpy(name, hip_env, module_dir):
    device_checks.run(hip_env, "numerics", module_dir, "rocm", name)


def test_case_on_the_gpu_named_by_uuid(hip_env, module_dir, uuid_uri):
    device_checks.run(hip_env, "case", module_dir, uuid_uri, "matmul_f32_37x53x29")


def test_a_module_loaded_on_one_thread_runs_on_another(hip_env, module_dir):
    device_checks.run(hip_env, "other_thread", module_dir, "rocm", "matmul_f32_37x53x29")


def test_fills_of_every_width_and_a_copy(hip_env, module_dir):
    device_checks.run(hip_env, "fills", module_dir, "rocm://0")


def test_control_flow(hip_env, module_dir):
    device_checks.run(hip_env, "control_flow", module_dir, "hip")


def test_module_constants(hip_env, module_dir):
    device_checks.run(hip_env, "mlp", module_dir, "rocm")


def test_wrong_input_shape_is_refused(hip_env, module_dir):
    device_checks.run(hip_env, "wrong_shape", module_dir, "rocm")


def test_damaged_code_object_reports_the_jit_log(hip_env, module_dir):
    device_checks.run(hip_env, "damaged_code", module_dir, "rocm")


def test_out_of_memory_is_resource_exhausted_and_the_device_recovers(hip_env, module_dir):
    device_checks.run(hip_env, "out_of_memory", module_dir, "rocm")


def test_device_memory_returns_after_out_of_memory_and_unload(hip_env, module_dir):
    device_checks.run(hip_env, "memory_returns", module_dir, "rocm")
