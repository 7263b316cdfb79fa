"""IREE's runtime names beyond the system API: device setup (``query_available_drivers``,
``get_driver`` and its HalDriver, ``get_device(uri, cache=)``, ``get_first_device`` with
$IREE_DEFAULT_DEVICE) and ``benchmark_module`` (the benchmark tool run as a process, its rows
returned as BenchmarkResults). Every device opened here runs a module against numpy."""

from __future__ import annotations

import os

import numpy as np
import pyree.compiler as pc
import pyree.runtime as ireert
import pytest

rng = np.random.default_rng()
MLIR = """
func.func @mul(%a: tensor<5x3xf32>, %b: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %0 = arith.mulf %a, %b : tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
func.func @neg(%a: tensor<5x3xf32>) -> tensor<5x3xf32> {
  %0 = arith.negf %a : tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}
"""


@pytest.fixture(scope="module")
def vmfb() -> bytes:
    return pc.compile_str(MLIR, target_backends=["llvm-cpu"])


def _check_runs_on(device, vmfb: bytes) -> None:
    a, b = (rng.standard_normal((5, 3)).astype(np.float32) for _ in range(2))
    a[0, :3] = [np.nan, -0.0, np.inf]
    module = ireert.load_module(vmfb, device=device)
    np.testing.assert_array_equal(module["mul"](a, b).to_host(),
                                  (a.astype(np.float64) * b).astype(np.float32))
    negated = module["neg"](a).to_host()
    np.testing.assert_array_equal(negated, -a)
    assert not np.signbit(negated[0, 1])   # -(-0.0)


def test_query_available_drivers_names_the_ones_that_run_here():
    names = ireert.query_available_drivers()
    assert {"local-sync", "local-task"} <= set(names)
    assert set(names) == {d.name for d in ireert.list_drivers() if d.available}


def test_get_driver_takes_a_uri_or_a_name_and_makes_devices(vmfb):
    driver = ireert.get_driver("local-task://")
    assert driver.name == "local-task" and ireert.HalDriver.query() == \
        ireert.query_available_drivers()
    (info,) = driver.query_available_devices()
    assert info["device_id"] == 0 and info["path"] == "" and "host CPU" in info["name"]
    devices = [driver.create_default_device(), driver.create_device(0),
               driver.create_device(info), driver.create_device_by_uri("local-task")]
    assert len({id(d) for d in devices}) == 4 and ireert.get_device("local-task") not in devices
    for device in devices:
        _check_runs_on(device, vmfb)
    with pytest.raises(ireert.DriverError, match="has 1 devices; no device_id 3"):
        driver.create_device(3)
    with pytest.raises(ireert.DriverError, match="driver 'local-task' cannot open 'local-sync'"):
        driver.create_device_by_uri("local-sync")
    with pytest.raises(ireert.DriverError, match="no HAL driver named 'metal'"):
        ireert.get_driver("metal://0")


def test_get_device_caches_unless_asked_not_to(vmfb):
    cached = ireert.get_device("local-sync")
    assert ireert.get_device("local-sync", cache=True) is cached
    fresh = ireert.get_device("local-sync", cache=False)
    assert fresh is not cached
    _check_runs_on(fresh, vmfb)


def test_get_first_device_tries_each_and_names_every_failure(monkeypatch):
    assert ireert.get_first_device(["metal", " local-sync"]) is ireert.get_device("local-sync")
    with pytest.raises(ireert.DriverError, match="'metal'.*'tpu'"):
        ireert.get_first_device(["metal", "tpu"])
    monkeypatch.setenv("IREE_DEFAULT_DEVICE", "metal,local-sync")
    assert ireert.get_first_device() is ireert.get_device("local-sync")
    assert ireert.Config().device is ireert.get_device("local-sync")   # IREE's Config() default
    monkeypatch.delenv("IREE_DEFAULT_DEVICE")
    assert ireert.get_first_device() is ireert.get_device("local-task")
    assert ireert.DEFAULT_DRIVER_NAMES.split(",")[0] == "local-task"


ROW_NAMES = ["BM_mul/process_time/real_time"] * 2 + [
    f"BM_mul/process_time/real_time_{s}" for s in ("mean", "median", "stddev")]


def test_benchmark_module_of_a_loaded_module_with_arrays_and_text(vmfb):
    module = ireert.load_vm_flatbuffer(vmfb, driver="local-sync")
    a = rng.standard_normal((5, 3)).astype(np.float32)
    results = ireert.benchmark_module(module, "mul", inputs=[a, "5x3xf32=2"],
                                      benchmark_min_time="7x", benchmark_repetitions=2)
    assert [r.benchmark_name for r in results] == ROW_NAMES
    assert [r.iterations for r in results] == ["7", "7", "2", "2", "2"]
    first = results[0]
    assert first.time.endswith(" ms") and float(first.time.split()[0]) > 0
    assert first.cpu_time.endswith(" ms") and first.user_counters.startswith("per_call=")
    assert isinstance(first, ireert.BenchmarkResult)


def test_benchmark_module_of_a_vm_module_on_a_named_device(vmfb):
    vm_module = ireert.VmModule.copy_buffer(ireert.VmInstance(), vmfb)
    (result,) = ireert.benchmark_module(vm_module, entry_function="neg",
                                        inputs=["5x3xf32=1.5"], device="local-task",
                                        benchmark_min_time="3x")
    assert result.benchmark_name == "BM_neg/process_time/real_time" and result.iterations == "3"


def test_benchmark_module_errors(vmfb):
    vm_module = ireert.VmModule.copy_buffer(ireert.VmInstance(), vmfb)
    with pytest.raises(ireert.InvocationError, match="exports 2: mul, neg"):
        ireert.benchmark_module(vm_module)
    with pytest.raises(ireert.InvocationError, match="has no function 'add'"):
        ireert.benchmark_module(vm_module, "add")
    with pytest.raises(ireert.BenchmarkToolError, match=r"@neg\(5x3xf32\) takes 1 inputs, 2"):
        ireert.benchmark_module(vm_module, "neg", inputs=["5x3xf32=1", "5x3xf32=1"])
    with pytest.raises(ireert.BenchmarkToolError, match="did not finish within 0.01 s"):
        ireert.benchmark_module(vm_module, "neg", inputs=["5x3xf32=1"], timeout=0.01)


def test_benchmark_exe_is_the_installed_tool_or_says_it_is_missing():
    try:
        path = ireert.benchmark_exe()
    except ireert.BenchmarkToolError as e:
        assert "pyree-benchmark-module is not installed" in str(e)
    else:
        assert os.path.basename(path) == "pyree-benchmark-module" and os.access(path, os.X_OK)
