"""One check of the rocm driver on the HIP-on-CUDA shim, through pyree.runtime's Python API, in a
process of its own: the driver opens libamdhip64 once per process, so only a fresh one is sure to
open the shim that $PYREE_HIP_LIBRARY names (and a GPU fault ends only that check).

    PYREE_HIP_LIBRARY=.../libamdhip64.so python3 device_checks.py CHECK MODULE_DIR DEVICE [CASE]

Exits 0 when the check holds; a failure prints its traceback. ``run`` starts one from a test.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pyree.runtime as rt

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[3])]
import numerics_cases  # noqa: E402
import rocm_on_cuda_cases as cases  # noqa: E402
from control_flow_cases import CASES as CONTROL_FLOW_CASES  # noqa: E402
from control_flow_cases import check_case  # noqa: E402


def load(folder: Path, name: str, device: str) -> rt.LoadedModule:
    """A relabelled module: it has only rocm executables, so it runs on the rocm driver or not
    at all."""
    return rt.load_module((folder / f"{name}.vmfb").read_bytes(), device=device)


def add_still_runs(folder: Path, device: str) -> None:
    """What each error check ends with: the device goes on working."""
    case(folder, device, "add_37x53")


def case(folder: Path, device: str, name: str) -> None:
    """A rocm_on_cuda_cases.CASES entry, called three times (fresh NaN/inf/-0 inputs each time)."""
    calls(load(folder, name, device), name)


def numerics(folder: Path, device: str, name: str) -> None:
    """An entry of the numerics table every device runs (tests/numerics_cases.py), called twice on
    fresh inputs and checked as on the other devices."""
    case = numerics_cases.CASES[name]()
    module = load(folder, numerics_cases.FILE_PREFIX + name, device)
    rng = np.random.default_rng()
    for _ in range(2):
        inputs = case.inputs(rng)
        numerics_cases.check(case, numerics_cases.results(module[case.function](*inputs)), inputs)


def other_thread(folder: Path, device: str, name: str) -> None:
    """A module loaded on this thread runs on another (HIP's current device is per thread)."""
    module, failures = load(folder, name, device), []

    def work():
        try:
            calls(module, name)
        except Exception as e:  # noqa: BLE001 - raised again on this thread
            failures.append(e)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join()
    if failures:
        raise failures[0]


def calls(module: rt.LoadedModule, name: str) -> None:
    fn = module[module.function_names[0]]
    _, _, reference, rtol = cases.CASES[name]
    rng = np.random.default_rng()
    for _ in range(3):
        args = cases.random_args(name, rng)
        with np.errstate(invalid="ignore", over="ignore"):
            want = reference(*[a.astype(np.float64) for a in args])
        cases.assert_matches(fn(*args).to_host(), want, rtol)


def fills(folder: Path, device: str) -> None:
    module = load(folder, "fills", device)
    x = np.random.default_rng().standard_normal(cases.COPIED).astype(np.float32)
    got = module[module.function_names[0]](x)
    want = cases.fills_expected(x)
    assert len(got) == len(want)
    for name, g, w in zip([*cases.FILLS, "copy"], got, want):
        g = g.to_host()
        assert g.dtype == w.dtype and g.shape == w.shape, (name, g.dtype, g.shape)
        assert g.tobytes() == w.tobytes(), f"{name}: first bytes {g.tobytes()[:16].hex()}"


def control_flow(folder: Path, device: str) -> None:
    module = load(folder, "control_flow", device)
    rng = np.random.default_rng(3)
    for c in CONTROL_FLOW_CASES:
        check_case(module, c, rng)


def mlp(folder: Path, device: str) -> None:
    """Module constants (the weights) uploaded through the driver; the CPU driver's answer."""
    expected = np.load(folder / "mlp_expected.npz")
    module = load(folder, "mlp", device)
    got = module[module.function_names[0]](expected["x"]).to_host()
    cases.assert_matches(got, expected["y"], 1e-5)


def wrong_shape(folder: Path, device: str) -> None:
    module = load(folder, "add_37x53", device)
    fn = module[module.function_names[0]]
    a = np.ones((37, 53), np.float32)
    try:
        fn(a, np.ones((53, 37), np.float32))
    except rt.InvocationError as e:
        assert "53x37" in str(e) and "37x53" in str(e), str(e)
    else:
        raise AssertionError("a 53x37 argument for a 37x53 parameter was accepted")
    add_still_runs(folder, device)


def damaged_code(folder: Path, device: str) -> None:
    """ptxas's own log of the damaged PTX reaches the message."""
    try:
        load(folder, "damaged", device)
    except rt.DriverError as e:
        message = str(e)
        assert re.search(r"pyree_damaged_instruction|ptxas", message), message
        assert "sm_90" in message, message
        print(message)
    else:
        raise AssertionError("a module with damaged PTX loaded")
    add_still_runs(folder, device)


def out_of_memory(folder: Path, device: str) -> None:
    gpu = rt.get_device(device)
    try:
        gpu.allocate(1 << 50)
    except rt.DriverError as e:
        assert e.status_name == "RESOURCE_EXHAUSTED", str(e)
        assert re.search(r"out of device memory.*1125899906842624 bytes", str(e)), str(e)
        print(e)
    else:
        raise AssertionError("a 1 PiB allocation succeeded")
    buffer = gpu.allocate(1024)
    values = np.arange(256, dtype=np.float32)
    buffer.write(0, values)
    assert np.array_equal(buffer.read_into(0, np.empty(256, np.float32)), values)
    add_still_runs(folder, device)


def memory_info() -> tuple[int, int]:
    """(free, total) bytes from hipMemGetInfo of the library the driver opened, on this
    thread's device."""
    import ctypes
    import os
    lib = ctypes.CDLL(os.environ["PYREE_HIP_LIBRARY"])
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    assert lib.hipMemGetInfo(ctypes.byref(free), ctypes.byref(total)) == 0
    return free.value, total.value


def free_mib() -> float:
    return memory_info()[0] / 2**20


def memory_returns(folder: Path, device: str) -> None:
    """After a failed allocation and after a module is unloaded, free device memory is what it
    was before (a fresh process: nothing else holds device memory)."""
    import gc
    gpu = rt.get_device(device)
    before = free_mib()
    too_much = memory_info()[1] + (16 << 30)  # more than the GPU has
    try:
        gpu.allocate(too_much)
    except rt.DriverError:
        pass
    else:
        raise AssertionError(f"a {too_much}-byte allocation succeeded")
    assert free_mib() >= before - 64, (free_mib(), before)
    mlp(folder, device)
    gc.collect()
    assert free_mib() >= before - 64, (free_mib(), before)


def run(env: dict, check: str, folder: Path, device: str, *rest: str) -> str:
    """Runs ``check`` in a fresh process with ``env``: its output, or AssertionError with it."""
    done = subprocess.run([sys.executable, __file__, check, str(folder), device, *rest], env=env,
                          capture_output=True, text=True, timeout=300)
    what = " ".join([check, *rest])
    assert done.returncode == 0, f"{what} on {device}:\n{done.stdout}{done.stderr}"
    return done.stdout


CHECKS = {f.__name__: f for f in (case, numerics, other_thread, fills, control_flow, mlp, wrong_shape,
                                  damaged_code, out_of_memory, memory_returns)}

if __name__ == "__main__":
    check, folder, device, *rest = sys.argv[1:]
    CHECKS[check](Path(folder), device, *rest)
