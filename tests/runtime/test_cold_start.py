"""Cold start (issue 13): importing the runtime and running on local-task import no GPU driver,
the vendored FFI matches the headers, and a module file's constants are mapped, not copied."""

from __future__ import annotations

import gc
import hashlib
import importlib
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.compiler.module_writer import ModuleBuilder
from pyree.runtime.hal import ffi_build

from .module_factory import BARRIER, CONST, RESULT, command, constant, copy, fill, function, ref, tensor

UI8 = 9
# never needed to run on a CPU device: GPU drivers, cffi's C parser, importlib.metadata's imports
HEAVY = ("pyree.hal.cuda", "pyree.hal.vulkan", "cuda", "pycparser", "importlib.metadata")
CONSTANT_BYTES = 64 << 20


def _python(code: str) -> str:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _heavy_modules_after(code: str, heavy: tuple[str, ...] = HEAVY) -> list[str]:
    out = _python(f"{code}\nimport sys\n"
                  f"print(sorted(k for k in sys.modules if k.startswith({heavy!r})))")
    return eval(out.strip().splitlines()[-1])


def _big_module(tmp_path) -> tuple[str, np.ndarray]:
    """One CONSTANT_BYTES constant; @ends() returns its first and last 64 bytes; @scribble()
    fills its first 64 bytes with 0x5a and returns them."""
    data = np.random.default_rng().integers(0, 256, CONSTANT_BYTES, dtype=np.uint8)
    b = ModuleBuilder("big", "test_cold_start")
    b.module.constants = [constant(b, data, UI8)]
    b.module.functions = [
        function("ends", [], [tensor(UI8, 128)], [
            copy(ref(CONST, 0, 64), ref(RESULT, 0, 64)),
            copy(ref(CONST, 0, 64, CONSTANT_BYTES - 64), ref(RESULT, 0, 64, 64))],
            result_sizes=[128]),
        function("scribble", [], [tensor(UI8, 64)], [
            fill(ref(CONST, 0, 64), 0x5A, 1), command(BARRIER),
            copy(ref(CONST, 0, 64), ref(RESULT, 0, 64))], result_sizes=[64]),
    ]
    path = tmp_path / "big.vmfb"
    path.write_bytes(b.finish())
    return str(path), data


def test_importing_the_runtime_imports_no_gpu_driver():
    """Nor the module file's readers: those come with the first module read."""
    assert _heavy_modules_after("import pyree.runtime",
                                (*HEAVY, "flatbuffers", "pyree.runtime._fb")) == []


def test_the_runtime_and_its_front_door_import_nothing_heavy():
    """``import pyree.runtime``, reaching ``load_module`` and the tools' imports bring in neither
    the VM, the HAL nor the module readers: those come with the first module loaded."""
    later = ["pyree.runtime.vm.function", "pyree.runtime.vm.loaded_module", "pyree.runtime.module",
             "pyree.runtime.hal.device", "pyree.runtime.hal.registry", "pyree.runtime._fb"]
    for code in ("import pyree.runtime as rt\nrt.load_module",
                 "from pyree.runtime.tools import run_module"):
        out = _python(f"{code}\nimport sys\nprint([m for m in {later!r} if m in sys.modules])")
        assert out.strip() == "[]", code


def test_running_on_local_task_imports_no_gpu_driver(tmp_path):
    path, _ = _big_module(tmp_path)
    assert _heavy_modules_after(
        "import pyree.runtime as rt\n"
        f"rt.load_module({path!r}, device='local-task')['ends']().to_host()") == []
    assert _heavy_modules_after(
        "from pyree.runtime.tools.run_module import _run\n"
        f"assert _run(['--device=local-task', '--module={path}', '--function=ends']) == 0") == []


def test_listing_drivers_still_loads_every_driver():
    installed = sorted({e.name for e in entry_points(group="pyree.runtime.drivers")})
    assert [d.name for d in rt.list_drivers()] == installed


def test_entry_points_are_found_as_importlib_metadata_finds_them():
    from pyree.runtime.hal import registry
    ours = sorted((e.name, e.value) for e in registry._entry_points())
    theirs = sorted((e.name, e.value) for e in entry_points(group="pyree.runtime.drivers"))
    assert ours == theirs
    # pyree's own distributions, read first: a name is compared as PEP 503 normalizes it
    own = sorted((e.name, e.value) for e in registry._entry_points("pyree"))
    assert own and own == sorted((e.name, e.value) for e in entry_points(
        group="pyree.runtime.drivers") if registry._normalized(e.dist.name).startswith("pyree"))
    assert registry._normalized("Pyree-.HAL__cuda") == "pyree_hal_cuda"


def test_the_vendored_ffi_matches_the_headers():
    assert ffi_build.TARGET.read_text() == ffi_build.source(), (
        "hal/_ffi_abi.py is stale: run python -m pyree.runtime.hal.ffi_build")


DRIVERS = ["cuda", "rocm", "vulkan"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_each_drivers_vendored_ffi_matches_its_declarations(driver):
    build = importlib.import_module(f"pyree.hal.{driver}.ffi_build")
    assert Path(build.TARGET).read_text() == build.source(), (
        f"pyree/hal/{driver}/_ffi.py is stale: run python -m pyree.hal.{driver}.ffi_build")


def test_creating_any_driver_does_not_import_pycparser():
    """Parsing C declarations at import (pycparser) cost each GPU driver ~100 ms of every
    process's start on the H100 host; the drivers' FFIs are pre-parsed like the runtime's."""
    code = ("import sys, pyree.runtime as rt\n"
            "for d in rt.list_drivers(): pass\n"
            "assert 'pycparser' not in sys.modules, sorted(m for m in sys.modules if 'cffi' in m)\n"
            f"print(sorted(d.name for d in rt.list_drivers() if d.name in {DRIVERS!r}))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == str(sorted(DRIVERS)), done.stdout


@pytest.mark.parametrize("device", ["local-task", "local-sync"])
def test_file_backed_constants_are_in_memory_once(tmp_path, device):
    """Peak RSS grows by about the module's size, not twice (read into memory, then copied)."""
    path, data = _big_module(tmp_path)
    out = _python(
        "import resource, numpy as np, pyree.runtime as rt\n"
        f"rt.get_device({device!r})\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        f"m = rt.load_module({path!r}, device={device!r})\n"
        "r = m['ends']().to_host()\n"
        "after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "print((after - before) * 1024, r.tobytes().hex())")
    grown, ends = out.split()
    assert bytes.fromhex(ends) == data[:64].tobytes() + data[-64:].tobytes()
    assert int(grown) < 1.25 * CONSTANT_BYTES, f"peak RSS grew by {int(grown) >> 20} MiB"


def test_work_that_writes_a_mapped_constant_leaves_the_file_alone(tmp_path):
    path, data = _big_module(tmp_path)
    before = hashlib.sha256(open(path, "rb").read()).hexdigest()
    module = rt.load_module(path, device="local-sync")
    assert module.constants[0]._source is not None  # used in place
    assert (module["scribble"]().to_host() == 0x5A).all()
    assert hashlib.sha256(open(path, "rb").read()).hexdigest() == before
    again = rt.load_module(path, device="local-sync")
    assert again["ends"]().to_host()[:64].tobytes() == data[:64].tobytes()


def test_bytes_are_copied_not_used_in_place(tmp_path):
    """Bytes a caller passes may change or be shared: those constants stay device copies."""
    path, data = _big_module(tmp_path)
    module = rt.load_module(open(path, "rb").read(), device="local-sync")
    assert not hasattr(module.constants[0], "_source")
    assert module["ends"]().to_host()[64:].tobytes() == data[-64:].tobytes()


def test_mapped_constants_outlive_a_module_dropped_with_calls_in_flight(tmp_path):
    """Results dropped unwaited leave work queued that reads the constants; collecting the
    module must not unmap them under it."""
    from pyree.runtime.vm import loaded_module

    path, data = _big_module(tmp_path)
    module = rt.load_module(path, device="local-task")
    for _ in range(20):
        module["ends"]()
    del module
    gc.collect()
    again = rt.load_module(path, device="local-task")  # also drops what has finished
    assert again["ends"]().to_host()[64:].tobytes() == data[-64:].tobytes()
    del again
    gc.collect()
    loaded_module._release_orphans()
    assert loaded_module._ORPHANS == []


@pytest.mark.parametrize("older_device", [False, True])
def test_a_module_collected_with_its_device_releases_the_device_last(tmp_path, older_device,
                                                                     monkeypatch):
    """A module dropped with its only device (calls in flight) is one collection; its timelines
    and the device must outlive it, so that its __del__ and later loads never ask a released
    device. CI once failed 9 tests this way, the device finalized first (an older one, or one
    gc.freeze/unfreeze during a compile had put into the module's generation)."""
    from pyree.runtime.hal.registry import get_device
    from pyree.runtime.vm import loaded_module

    finalized = []
    collect = loaded_module.LoadedModule.__del__

    def noting(self):
        finalized.append(self.device._vt is None)
        collect(self)

    monkeypatch.setattr(loaded_module.LoadedModule, "__del__", noting)
    path, data = _big_module(tmp_path)
    for freeze in (False, True):
        device = get_device("local-task", cache=False)
        if older_device:
            gc.collect()  # the device now lies in the oldest generation: finalized first
        module = rt.load_module(path, device=device)
        for _ in range(5):
            module["ends"]()
        if freeze:
            gc.freeze()
            gc.unfreeze()
        del module, device
        gc.collect()
        for pending, _ in loaded_module._ORPHANS:
            assert all(s.device._vt is not None for s, _ in pending), "device released first"
        again = rt.load_module(path, device="local-task")
        assert again["ends"]().to_host()[64:].tobytes() == data[-64:].tobytes()
        del again
        gc.collect()
    assert finalized == [False] * 4, "a module's device was released before the module"
    loaded_module._release_orphans()
    assert loaded_module._ORPHANS == []
    assert loaded_module._HELD == {}


def test_a_released_device_answers_with_an_error():
    from pyree.runtime.errors import DriverError
    from pyree.runtime.hal.registry import get_device

    device = get_device("local-task", cache=False)
    semaphore = device.create_semaphore(0)
    device.__del__()  # as the collector would, with the semaphore resurrected
    with pytest.raises(DriverError, match="local-task.*query semaphore.*released"):
        semaphore.query()
    with pytest.raises(DriverError, match="released"):
        semaphore.wait(1)


def test_collecting_mapped_modules_is_safe(tmp_path):
    """A loaded module is a reference cycle that holds exports of its file's mapping. While they
    were exports of a memoryview, pyree-check-module crashed in the collector at exit
    (tests/e2e/test_check_modules.py); this checks collection mid-run, in a subprocess so that
    a crash fails the test instead of ending the run."""
    path, data = _big_module(tmp_path)
    out = _python(
        "import gc, pyree.runtime as rt\n"
        "for device in ('local-task', 'local-sync') * 3:\n"
        f"    m = rt.load_module({path!r}, device=device)\n"
        "    r = m['ends']().to_host()\n"
        "    del m\n"
        "    gc.collect()\n"
        "print(r.tobytes().hex())")
    assert bytes.fromhex(out.strip()) == data[:64].tobytes() + data[-64:].tobytes()
