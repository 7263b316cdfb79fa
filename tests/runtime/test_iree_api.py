"""IREE's Python runtime API on pyree (issue 12): a script written for ``iree.runtime`` runs with
its imports changed, and a DeviceArray reads like a numpy array. Every value against numpy."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pyree.compiler as pc
import pyree.runtime as rt
import pytest

# An odd shape, two results (one of them a comparison), one function per module.
SHAPE = (3, 7)
MLIR = """
func.func @main(%a: tensor<3x7xf32>, %b: tensor<3x7xf32>) -> (tensor<3x7xf32>, tensor<3x7xi1>) {
  %0 = arith.mulf %a, %b : tensor<3x7xf32>
  %1 = arith.addf %0, %a : tensor<3x7xf32>
  %2 = arith.cmpf olt, %a, %b : tensor<3x7xf32>
  return %1, %2 : tensor<3x7xf32>, tensor<3x7xi1>
}
"""
NAMED = """
module @mymod {
  func.func @neg(%a: tensor<5xf64>) -> tensor<5xf64> {
    %0 = arith.negf %a : tensor<5xf64>
    return %0 : tensor<5xf64>
  }
}
"""


def _compile(text: str) -> bytes:
    return pc.compile_str(text, pc.CompileOptions(target_backends=["llvm-cpu"]))


@pytest.fixture(scope="module")
def vmfb() -> bytes:
    return _compile(MLIR)


@pytest.fixture(scope="module")
def named_vmfb() -> bytes:
    return _compile(NAMED)


def _inputs(rng):
    """Random values with NaN, +-inf and -0 where they pass through."""
    a = rng.standard_normal(SHAPE).astype(np.float32)
    b = rng.standard_normal(SHAPE).astype(np.float32)
    a[0, :4] = [np.nan, np.inf, -np.inf, -0.0]
    b[0, :4] = [1.0, 2.0, 3.0, 0.0]
    b[2, 6] = np.nan
    return a, b


def _check_main(fn, rng) -> None:
    a, b = _inputs(rng)
    total, less = fn(a, b)
    want = a * b + a
    np.testing.assert_array_equal(total.to_host(), want)  # NaN where numpy has NaN
    assert np.array_equal(np.signbit(total.to_host()), np.signbit(want))  # -0 stays -0
    np.testing.assert_array_equal(np.asarray(less), a < b)
    assert less.dtype == np.bool_ and total.dtype == np.float32


def test_iree_docs_script_runs_with_pyree_names(vmfb, rng):
    """The shape of IREE's "Python runtime" docs: Config, SystemContext, VmModule, add_vm_module,
    ctx.modules.<module name>.<function>."""
    config = rt.Config("local-task")
    ctx = rt.SystemContext(config=config)
    vm_module = rt.VmModule.copy_buffer(ctx.instance, vmfb)
    ctx.add_vm_module(vm_module)
    assert ctx.is_dynamic and ctx.config is config
    assert list(ctx.modules) == ["module"] and vm_module.name == "module"
    _check_main(ctx.modules.module["main"], rng)
    _check_main(ctx.modules.module.main, rng)
    _check_main(getattr(ctx.modules, vm_module.name)["main"], rng)


@pytest.mark.parametrize("make", ["copy_buffer", "from_flatbuffer", "from_flatbuffer_old",
                                  "wrap_buffer", "mmap"])
def test_every_vm_module_constructor(make, vmfb, tmp_path, rng):
    instance = rt.VmInstance()
    destroyed = []
    if make == "copy_buffer":
        m = rt.VmModule.copy_buffer(instance, vmfb)
    elif make == "from_flatbuffer":
        m = rt.VmModule.from_flatbuffer(instance, vmfb, warn_if_copy=False)
    elif make == "from_flatbuffer_old":  # IREE before VmInstance arguments
        m = rt.VmModule.from_flatbuffer(vmfb)
    elif make == "wrap_buffer":
        m = rt.VmModule.wrap_buffer(instance, memoryview(vmfb),
                                    destroy_callback=lambda: destroyed.append(1))
    else:
        path = tmp_path / "m.vmfb"
        path.write_bytes(vmfb)
        m = rt.VmModule.mmap(instance, str(path), destroy_callback=lambda: destroyed.append(1))
    assert m.function_names == ["main"]
    (bound,) = rt.load_vm_modules(m, config=rt.Config("local-sync"))
    _check_main(bound["main"], rng)
    if make in ("wrap_buffer", "mmap"):
        del m, bound
        import gc
        gc.collect()
        assert destroyed == [1]


def test_load_vm_flatbuffer_and_file(vmfb, tmp_path, rng):
    _check_main(rt.load_vm_flatbuffer(vmfb, driver="local-task")["main"], rng)
    _check_main(rt.load_vm_flatbuffer(vmfb, backend="llvm-cpu").main, rng)
    path = tmp_path / "m.vmfb"
    path.write_bytes(vmfb)
    loaded = rt.load_vm_flatbuffer_file(path, driver="local-sync")
    assert loaded.device.uri == "local-sync"
    _check_main(loaded.main, rng)
    _check_main(rt.load_vm_module(rt.VmModule.mmap(rt.VmInstance(), path))["main"], rng)
    _check_main(rt.load_module(path, driver="local-sync")["main"], rng)


def test_static_context_and_config_forms(vmfb, named_vmfb, rng):
    modules = [rt.VmModule.copy_buffer(rt.VmInstance(), b) for b in (vmfb, named_vmfb)]
    ctx = rt.SystemContext(vm_modules=modules, config=rt.Config(device=rt.get_device("local-sync")))
    assert not ctx.is_dynamic and sorted(ctx.modules) == ["module", "mymod"]
    x = np.array([1.5, -0.0, np.inf, np.nan, -2.0])
    got = ctx.modules.mymod.neg(x).to_host()
    np.testing.assert_array_equal(got, -x)
    assert np.array_equal(np.signbit(got), np.signbit(-x))
    _check_main(ctx.modules.module.main, rng)
    with pytest.raises(rt.InvocationError, match="static"):
        ctx.add_vm_module(modules[0])
    assert rt.Config(device="local-sync").device is rt.get_device("local-sync")
    # IREE takes a list of drivers and uses the first that opens
    assert rt.Config("no-such-driver,local-sync").device.uri == "local-sync"
    assert rt.Config().device.uri == "local-task"


def test_function_reflection_matches_the_signature(vmfb):
    vm_module = rt.VmModule.copy_buffer(rt.VmInstance(), vmfb)
    declared = vm_module.lookup_function("main")
    loaded = rt.load_vm_module(vm_module)
    for reflection in (declared.reflection, loaded["main"].vm_function.reflection,
                       loaded.main.reflection):
        assert reflection["iree.abi.declaration"] == (
            "sync func @main(%input0: tensor<3x7xf32>, %input1: tensor<3x7xf32>) -> "
            "(%output0: tensor<3x7xf32>, %output1: tensor<3x7xi1>)")
        abi = json.loads(reflection["iree.abi"])
        assert abi["a"] == [["ndarray", "f32", 2, 3, 7]] * 2
        assert abi["r"] == [["ndarray", "f32", 2, 3, 7], ["ndarray", "i1", 2, 3, 7]]
    assert vm_module.lookup_function("nope") is None


def test_missing_names_answer_as_python_expects(vmfb):
    ctx = rt.SystemContext(vm_modules=[rt.VmModule.copy_buffer(rt.VmInstance(), vmfb)])
    module = ctx.modules.module
    assert hasattr(module, "main") and not hasattr(module, "x")
    assert not hasattr(ctx.modules, "nope")
    for error in (KeyError, rt.InvocationError):
        with pytest.raises(error, match="module 'module' has no function 'x'; it exports: main"):
            module["x"]
    with pytest.raises(AttributeError, match="no module named 'nope' in this context"):
        _ = ctx.modules.nope


def test_errors_are_clear_pyree_errors(vmfb):
    with pytest.raises(rt.DriverError, match="no HAL driver named 'nosuch' is installed"):
        rt.Config("nosuch")
    with pytest.raises(rt.DriverError, match="no HAL driver named 'nosuch'"):
        rt.load_vm_flatbuffer(vmfb, driver="nosuch")
    with pytest.raises(rt.ModuleError):
        rt.load_vm_flatbuffer(b"definitely not a module", driver="local-task")
    with pytest.raises(rt.ModuleError):
        rt.VmModule.copy_buffer(rt.VmInstance(), vmfb[:-100])
    with pytest.raises(rt.InvocationError, match="exactly one"):
        rt.load_vm_flatbuffer(vmfb)
    with pytest.raises(rt.InvocationError, match="exactly one"):
        rt.load_vm_flatbuffer(vmfb, driver="local-task", backend="llvm-cpu")
    with pytest.raises(rt.InvocationError, match="unknown target backend 'metal'"):
        rt.load_vm_flatbuffer(vmfb, backend="metal")
    with pytest.raises(rt.InvocationError, match="not both"):
        rt.load_module(vmfb, device="local-task", driver="local-sync")
    with pytest.raises(rt.InvocationError, match="not both"):
        rt.Config("local-task", device="local-sync")
    m = rt.VmModule.copy_buffer(rt.VmInstance(), vmfb)
    with pytest.raises(rt.InvocationError, match="named 'module' is already in this context"):
        rt.SystemContext(vm_modules=[m, m])


# -- DeviceArray as a numpy array ------------------------------------------------------------

@pytest.fixture(scope="module")
def result(vmfb):
    """(DeviceArray, its numpy value): a result of the module, with NaN, +-inf and -0."""
    a, b = _inputs(np.random.default_rng())
    total, _ = rt.load_vm_flatbuffer(vmfb, driver="local-task").main(a, b)
    return total, a * b + a


def test_device_array_arithmetic_and_comparisons(result):
    x, want = result
    other = np.random.default_rng().standard_normal(SHAPE).astype(np.float32)
    with np.errstate(all="ignore"):
        cases = [
            (x + 1, want + 1), (2 * x, 2 * want), (x - other, want - other),
            (other - x, other - want), (x * x, want * want), (x / 3, want / 3),
            (x ** 2, want ** 2), (-x, -want), (abs(x), abs(want)), (x // 2, want // 2),
            (x > 0, want > 0), (x <= other, want <= other), (x == want, want == want),
            (x != 0, want != 0), (np.maximum(x, other), np.maximum(want, other)),
            (np.exp(x), np.exp(want)), (np.sum(x, axis=1), np.sum(want, axis=1)),
        ]
    for got, expected in cases:
        assert isinstance(got, np.ndarray)  # numpy results, through the host copy
        np.testing.assert_array_equal(got, expected)


def test_device_array_indexing_len_iteration(result):
    x, want = result
    assert len(x) == 3 and x.shape == SHAPE and x.ndim == 2 and x.size == 21
    assert x.nbytes == want.nbytes and x.dtype == np.float32
    np.testing.assert_array_equal(x[1], want[1])
    np.testing.assert_array_equal(x[:, 2:5], want[:, 2:5])
    np.testing.assert_array_equal(x[..., ::-2], want[..., ::-2])
    np.testing.assert_array_equal(x[want > 0], want[want > 0])
    assert x[1, 3] == want[1, 3]
    for row, expected in zip(x, want, strict=True):
        np.testing.assert_array_equal(row, expected)
    np.testing.assert_array_equal(x.tolist(), want.tolist())
    np.testing.assert_array_equal(x.reshape(7, 3), want.reshape(7, 3))


def test_device_array_conversions(result):
    x, want = result
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(x.astype(np.float64), want.astype(np.float64))
        np.testing.assert_array_equal(np.asarray(x, dtype=np.float16), want.astype(np.float16))
    np.testing.assert_array_equal(x.to_host(), want)
    np.testing.assert_array_equal(np.array(x), want)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(x)), want)
    assert repr(x) == "<DeviceArray 3x7xf32 on local-task>"
    # numpy 2's copy=False: on the CPU drivers the buffer itself, no copy
    view = np.asarray(x, copy=False)
    assert view.ctypes.data == x.device.buffer_address(x.buffer)
    np.testing.assert_array_equal(view, want)
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(x, dtype=np.float64, copy=False)


def test_scalar_device_array(rng):
    text = """func.func @main(%a: tensor<f32>) -> tensor<f32> {
  %0 = arith.mulf %a, %a : tensor<f32>
  return %0 : tensor<f32>
}"""
    fn = rt.load_vm_flatbuffer(_compile(text), driver="local-sync").main
    value = np.float32(rng.standard_normal())
    y = fn(np.asarray(value))
    assert float(y) == value * value and bool(y) and y.shape == () and y.size == 1
    assert int(fn(np.asarray(np.float32(2.5)))) == 6
    with pytest.raises(TypeError, match="len"):
        len(y)


def test_asdevicearray_as_iree_calls_it(vmfb, rng):
    config = rt.Config("local-task")
    fn = rt.load_vm_module(rt.VmModule.copy_buffer(config.vm_instance, vmfb), config).main
    a, b = _inputs(rng)
    da = rt.asdevicearray(config.device, a.astype(np.float64), dtype=np.float32,
                          implicit_host_transfer=True)
    assert rt.asdevicearray(config.device, da) is da
    total, _ = fn(da, rt.asdevicearray(config.device, b))
    np.testing.assert_array_equal(total.to_host(), a * b + a)
