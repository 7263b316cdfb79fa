"""DLPack both ways on the CPU drivers (issue 12): results handed to torch and numpy in place,
torch/numpy tensors used as arguments in place, with the right lifetimes; and the copy where a
driver shares no memory. The CUDA side is tests/drivers/cuda/test_cuda_dlpack.py."""

from __future__ import annotations

import gc
import sys

import numpy as np
import pyree.compiler as pc
import pyree.runtime as rt
import pytest
from import_spy import record_imports
from pyree.runtime.hal import device as hal_device
from pyree.runtime.hal.ffi import check_struct, ffi
from pyree.runtime.hal.registry import get_driver
from pyree.runtime.vm import dlpack
from pyree.runtime.vm.call_plan import IMPORT_MIN_BYTES
from tooling import require_module

torch = require_module("torch")

BIG = (129, 257)   # 133 KB of f32: at least IMPORT_MIN_BYTES, read in place
SMALL = (3, 7)


def _mlir(shape) -> str:
    t = f"tensor<{'x'.join(map(str, shape))}xf32>"
    return f"""func.func @main(%a: {t}, %b: {t}) -> {t} {{
  %0 = arith.mulf %a, %b : {t}
  %1 = arith.addf %0, %a : {t}
  return %1 : {t}
}}"""


@pytest.fixture(scope="module", params=["local-task", "local-sync"])
def modules(request):
    """{shape: main} on the driver."""
    return {shape: rt.load_vm_flatbuffer(
        pc.compile_str(_mlir(shape), pc.CompileOptions(target_backends=["llvm-cpu"])),
        driver=request.param).main for shape in (BIG, SMALL)}


def _values(rng, shape):
    a = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape).astype(np.float32)
    a.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    b.flat[:4] = [1.0, 2.0, 3.0, 0.0]
    return a, b


def _check(got, a, b) -> None:
    want = a * b + a
    np.testing.assert_array_equal(np.asarray(got), want)
    assert np.array_equal(np.signbit(np.asarray(got)), np.signbit(want))


@pytest.fixture
def imports(monkeypatch):
    """Records every (address, size) a call hands the device to read in place."""
    return record_imports(monkeypatch)


# -- export: a result to torch / numpy ---------------------------------------------------------

@pytest.mark.parametrize("shape", [BIG, SMALL])
def test_results_go_to_torch_and_numpy_without_a_copy(modules, shape, rng):
    a, b = _values(rng, shape)
    result = modules[shape](a, b)
    address = result.device.buffer_address(result.buffer)
    assert result.__dlpack_device__() == (1, 0)
    t = torch.from_dlpack(result)
    n = np.from_dlpack(result)
    assert t.data_ptr() == address and n.ctypes.data == address
    assert tuple(t.shape) == shape and t.dtype == torch.float32
    _check(t.numpy(), a, b)
    _check(n, a, b)


def test_capsules_of_both_dlpack_versions(modules, rng):
    a, b = _values(rng, SMALL)
    result = modules[SMALL](a, b)
    assert '"dltensor"' in repr(result.__dlpack__())
    assert '"dltensor_versioned"' in repr(result.__dlpack__(max_version=(1, 0)))
    legacy = torch.utils.dlpack.from_dlpack(result.__dlpack__())  # torch's capsule reader
    _check(legacy.numpy(), a, b)
    del legacy
    gc.collect()
    assert not dlpack._EXPORTED  # consumed or not, every capsule let go of its array


def test_an_exported_result_outlives_its_device_array(modules, rng):
    """The consumer holds the buffer: dropping the DeviceArray and making many more calls (whose
    results come from the same pool) leaves the exported values as they were."""
    a, b = _values(rng, BIG)
    result = modules[BIG](a, b)
    t = torch.from_dlpack(result)
    del result
    gc.collect()
    for _ in range(20):
        x, y = (rng.standard_normal(BIG).astype(np.float32) for _ in range(2))
        modules[BIG](x, y).to_host()
    _check(t.numpy(), a, b)
    assert len(dlpack._EXPORTED) == 1
    del t
    gc.collect()
    assert not dlpack._EXPORTED


def test_a_copy_is_exported_when_the_driver_shares_no_memory(modules, rng, monkeypatch):
    """A driver without hal.h revision 3 (Vulkan, ROCm today): __dlpack__ hands over a host copy."""
    a, b = _values(rng, SMALL)
    result = modules[SMALL](a, b)
    monkeypatch.setattr(result.device, "dlpack", None)
    assert result.__dlpack_device__() == (1, 0)
    n = np.from_dlpack(result)
    assert n.ctypes.data != result.device.buffer_address(result.buffer)
    _check(n, a, b)
    with pytest.raises(BufferError, match="cannot be handed to CPU device 0 without a copy"):
        result.__dlpack__(copy=False)
    with pytest.raises(ValueError, match="without a copy"):
        np.asarray(result, copy=False)


def test_copy_requested_by_the_consumer(modules, rng):
    a, b = _values(rng, SMALL)
    result = modules[SMALL](a, b)
    n = np.from_dlpack(result, copy=True)
    assert n.ctypes.data != result.device.buffer_address(result.buffer)
    _check(n, a, b)
    _check(np.from_dlpack(result, device="cpu"), a, b)
    with pytest.raises(BufferError, match="cannot be handed to CUDA device 0 by pyree"):
        result.__dlpack__(dl_device=(2, 0))


# -- import: torch / numpy arguments ---------------------------------------------------------

def test_torch_cpu_tensors_are_read_in_place(modules, rng, imports):
    a, b = _values(rng, SMALL)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    _check(modules[SMALL](ta, tb), a, b)
    assert imports == [(ta.data_ptr(), a.nbytes), (tb.data_ptr(), b.nbytes)]


def test_large_numpy_arrays_are_read_in_place_small_ones_copied(modules, rng, imports):
    a, b = _values(rng, BIG)
    assert a.nbytes >= IMPORT_MIN_BYTES
    _check(modules[BIG](a, b), a, b)
    assert imports == [(a.ctypes.data, a.nbytes), (b.ctypes.data, b.nbytes)]
    imports.clear()
    a, b = _values(rng, SMALL)
    _check(modules[SMALL](a, b), a, b)
    assert imports == []


def test_arrays_read_in_place_may_change_once_the_call_returns(modules, rng):
    """As after a copy: the call has read them before it returns."""
    a, b = _values(rng, BIG)
    ta = torch.from_numpy(a.copy())
    kept_a, kept_b = a.copy(), b.copy()
    result = modules[BIG](ta, b)
    ta.zero_()
    b[...] = 7
    _check(result, kept_a, kept_b)


def test_round_trip_through_torch(modules, rng, imports):
    a, b = _values(rng, BIG)
    first = modules[BIG](a, b)
    t = torch.from_dlpack(first)
    second = modules[BIG](t, np.ones(BIG, np.float32))
    assert imports[-2][0] == t.data_ptr() == first.device.buffer_address(first.buffer)
    want = a * b + a
    np.testing.assert_array_equal(second.to_host(), want * 1 + want)


def test_strided_or_mistyped_tensors(modules, rng, imports):
    a, b = _values(rng, (SMALL[1], SMALL[0]))
    ta, tb = torch.from_numpy(a).T, torch.from_numpy(b).T  # not row-major: copied
    _check(modules[SMALL](ta, tb), a.T, b.T)
    assert imports == []
    with pytest.raises(rt.InvocationError, match=r"argument 0: expected 3x7xf32, got 3x7xf64"):
        modules[SMALL](torch.zeros(SMALL, dtype=torch.float64), tb)
    with pytest.raises(rt.InvocationError, match=r"argument 1: expected 3x7xf32, got 7x3xf32"):
        modules[SMALL](ta, torch.zeros((7, 3)))


class _OldProducer:
    """A DLPack producer from before DLPack 1.0 (no max_version), on a device it names."""

    def __init__(self, tensor, device=(1, 0)):
        self.tensor, self.device = tensor, device

    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__()

    def __dlpack_device__(self):
        return self.device


def test_legacy_producers_and_their_deleters(modules, rng, imports):
    """A pre-1.0 capsule is read too, and its deleter runs once the call is done: numpy's
    capsule holds a reference to the array until then."""
    a, b = _values(rng, SMALL)
    before = sys.getrefcount(a)
    _check(modules[SMALL](_OldProducer(a), b), a, b)
    assert imports[0] == (a.ctypes.data, a.nbytes)
    gc.collect()
    assert sys.getrefcount(a) == before


class _OneShot:
    """A producer whose tensor may be handed over once: a second __dlpack__ fails."""

    def __init__(self, array):
        self.array, self.calls = array, 0

    def __dlpack__(self, stream=None, max_version=None, **kwargs):
        self.calls += 1
        if self.calls > 1:
            raise BufferError("this tensor was already handed over")
        return self.array.__dlpack__(max_version=max_version)

    def __dlpack_device__(self):
        return (1, 0)


@pytest.mark.parametrize("layout", ["row-major", "transposed", "reversed", "float64"])
def test_a_one_shot_producer_is_asked_once(modules, rng, layout):
    """Read in place, or (not row-major, or of another dtype) copied from the capsule already
    taken: never a second __dlpack__."""
    a, b = _values(rng, SMALL)
    given = {"row-major": a, "transposed": a.T.copy().T, "reversed": a[::-1, ::-1].copy()[::-1, ::-1],
             "float64": a.astype(np.float64)}[layout]
    producer = _OneShot(given)
    if layout == "float64":
        with pytest.raises(rt.InvocationError, match=r"argument 0: expected 3x7xf32, got 3x7xf64"):
            modules[SMALL](producer, b)
    else:
        _check(modules[SMALL](producer, b), a, b)
    assert producer.calls == 1


def test_a_tensor_on_another_device_is_refused(modules, rng):
    a, b = _values(rng, SMALL)
    with pytest.raises(rt.InvocationError,
                       match=r"argument 0: the _OldProducer is on CUDA device 0, but the "
                             r"function runs on 'local-(task|sync)': move it there first"):
        modules[SMALL](_OldProducer(torch.from_numpy(a), (2, 0)), b)


def test_a_producer_whose_dlpack_fails_is_named(modules, rng):
    """A producer's own error (here numpy refusing a stream, as it does for any but None) comes
    back as the argument's InvocationError, not as the producer's exception."""
    a, b = _values(rng, SMALL)

    class Refuses:
        def __dlpack_device__(self):
            return (1, 0)

        def __dlpack__(self, stream=None, **kwargs):
            return a.__dlpack__(stream=1)

    with pytest.raises(rt.InvocationError, match="argument 0: the Refuses's __dlpack__ failed: "
                                                 ".*stream"):
        modules[SMALL](Refuses(), b)


def test_drivers_before_revision_3_still_load(monkeypatch, rng):
    """A driver struct that ends before dlpack_device (hal.h revision 2) passes the ABI check,
    and its device shares nothing: results are exported as copies."""
    struct = ffi.new("pyree_hal_device_v1_t *")
    struct.abi_version = 1
    struct.struct_size = ffi.offsetof("pyree_hal_device_v1_t", "dlpack_device")
    check_struct(struct, "pyree_hal_device_v1_t", "a revision-2 device")  # does not raise
    real = hal_device.has_field
    monkeypatch.setattr(hal_device, "has_field", lambda ptr, type_name, field:
                        field != "dlpack_device" and real(ptr, type_name, field))
    device = get_driver("local-sync").create_device("")
    assert device.dlpack is None
    a = rng.standard_normal(SMALL).astype(np.float32)
    array = rt.asdevicearray(device, a)
    n = np.from_dlpack(array)
    assert n.ctypes.data != a.ctypes.data
    np.testing.assert_array_equal(n, a)


def test_boolean_and_scalar_results_keep_their_types(rng):
    """i1 goes out as DLPack's bool (kDLBool), a 0-d result as a 0-d tensor."""
    from .test_iree_api import MLIR, SHAPE
    fn = rt.load_vm_flatbuffer(pc.compile_str(MLIR, pc.CompileOptions(
        target_backends=["llvm-cpu"])), driver="local-sync").main
    a, b = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
    _, less = fn(a, b)
    t = torch.from_dlpack(less)
    assert t.dtype == torch.bool and t.data_ptr() == less.device.buffer_address(less.buffer)
    np.testing.assert_array_equal(t.numpy(), a < b)
    scalar = rt.asdevicearray(rt.get_device("local-sync"), np.float64(-0.0))
    s = torch.from_dlpack(scalar)
    assert s.shape == () and s.dtype == torch.float64 and np.signbit(s.item())
