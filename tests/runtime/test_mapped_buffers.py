"""Mapped buffers (hal.h revision 1): small arguments and results are written and read in place,
with no write_buffer/read_buffer crossing; drivers without them, or built before the revision,
keep working through those crossings."""

from __future__ import annotations

import numpy as np
import pyree.runtime as rt
import pytest
from pyree.runtime.drivers.local_sync.device import LocalSyncDevice
from pyree.runtime.hal import python_driver, registry
from pyree.runtime.hal.ffi import ffi
from pyree.runtime.vm import buffer_pool

from .fake_drivers import install
from .module_factory import COLS, ROWS


class _Counting(LocalSyncDevice):
    """local-sync, counting the host-copy crossings."""

    def __init__(self):
        super().__init__()
        self.crossings = 0
        self.tables = []

    def queue_submit(self, command_buffer, binding_table, waits, signals):
        self.tables.append(tuple(map(id, binding_table)))
        super().queue_submit(command_buffer, binding_table, waits, signals)

    def write_buffer(self, buffer, offset, source):
        self.crossings += 1
        super().write_buffer(buffer, offset, source)

    def read_buffer(self, buffer, offset, target):
        self.crossings += 1
        super().read_buffer(buffer, offset, target)


class _Unmapped(_Counting):
    allocate_mapped = None  # a driver without host-addressable memory


@pytest.fixture
def drivers(monkeypatch):
    yield install(monkeypatch, {"counting": _Counting, "unmapped": _Unmapped})
    registry.reset()


def _inputs(rng):
    return [rng.standard_normal((ROWS, COLS)).astype(np.float32) for _ in range(2)]


def _calls(module, rng, count=3):
    for _ in range(count):
        a, b = _inputs(rng)
        np.testing.assert_array_equal(module.add(a, b).to_host(), a + b)


def _crossings_of_three_calls(drivers, name: str, arith_bytes, rng, mapped: bool) -> int:
    """Loads the arith module on driver ``name``, makes three numpy calls of ``add`` (checked
    against numpy) and returns how many write_buffer/read_buffer crossings they took."""
    module = rt.load_module(arith_bytes, device=name)
    assert module.device.maps_memory == mapped
    device = drivers[name].devices[0]
    before = device.crossings
    _calls(module, rng)
    return device.crossings - before


def test_small_arguments_and_results_need_no_copy_crossing(drivers, arith_bytes, rng):
    assert _crossings_of_three_calls(drivers, "counting", arith_bytes, rng, mapped=True) == 0


def test_each_call_gets_the_same_buffers_in_the_same_roles(drivers, arith_bytes, rng):
    """So a driver sees the binding table it recorded for, not buffers rotating between roles."""
    module = rt.load_module(arith_bytes, device="counting")
    _calls(module, rng, count=4)
    tables = drivers["counting"].devices[0].tables
    assert len(set(tables[1:])) == 1


def test_arguments_over_the_limit_are_copied_through_the_driver(drivers, arith_bytes, rng,
                                                                 monkeypatch):
    monkeypatch.setattr(buffer_pool, "MAPPED_MAX_BYTES", ROWS * COLS * 4 - 1)
    # the device still maps memory, but these buffers are over the limit: two uploads and one
    # read per call
    assert _crossings_of_three_calls(drivers, "counting", arith_bytes, rng, mapped=True) == 3 * 3


def test_a_driver_without_mapped_memory_copies(drivers, arith_bytes, rng):
    assert _crossings_of_three_calls(drivers, "unmapped", arith_bytes, rng, mapped=False) == 3 * 3


def test_a_driver_built_before_revision_1_is_accepted(drivers, arith_bytes, rng, monkeypatch):
    """Its device struct ends where allocate_mapped would start."""
    make_struct = python_driver._device_struct

    def revision_0(device):
        vt = make_struct(device)
        vt.struct_size = ffi.offsetof("pyree_hal_device_v1_t", "allocate_mapped")
        return vt

    monkeypatch.setattr(python_driver, "_device_struct", revision_0)
    assert _crossings_of_three_calls(drivers, "counting", arith_bytes, rng, mapped=False) == 3 * 3


def test_a_struct_of_no_revision_is_refused(drivers):
    driver = registry.get_driver("counting")
    out = ffi.new("pyree_hal_device_v1_t **")
    driver._vt.create_device(driver._vt.self, b"", out)
    full = out[0].struct_size
    out[0].struct_size -= 4
    with pytest.raises(rt.DriverError, match=f"HAL ABI version 1 .*{full - 4} bytes"):
        registry.check_struct(out[0], "pyree_hal_device_v1_t", "device")
    out[0].struct_size = full
    out[0].release(out[0].self)


SCATTER_ADD = """func.func @main(%orig: tensor<3x2xi8>, %upd: tensor<5x2xi8>, %idx: tensor<5x1xi64>)
    -> (tensor<3x2xi8>, tensor<3x2xi8>) {
  %r = iree_linalg_ext.scatter dimension_map = [0] unique_indices(false) ins(%upd, %idx : tensor<5x2xi8>, tensor<5x1xi64>) outs(%orig : tensor<3x2xi8>) {
  ^bb0(%u: i8, %o: i8):
    %s = arith.addi %u, %o : i8
    iree_linalg_ext.yield %s : i8
  } -> tensor<3x2xi8>
  %e = tensor.empty() : tensor<3x2xi8>
  %n = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>, affine_map<(i, j) -> (i, j)>],
      iterator_types = ["parallel", "parallel"]} ins(%orig : tensor<3x2xi8>) outs(%e : tensor<3x2xi8>) {
  ^bb0(%x: i8, %o: i8):
    %y = arith.subi %o, %x : i8
    linalg.yield %y : i8
  } -> tensor<3x2xi8>
  return %r, %n : tensor<3x2xi8>, tensor<3x2xi8>
}"""


def test_a_result_a_kernel_updates_in_place_stays_in_device_memory(drivers, rng):
    """A scatter's atomics read and write their result: mapped host memory would put them
    across the bus on a GPU (an i8 index_add on the H200 went past 10 s). A result kernels only
    write stays mapped."""
    from pyree.compiler import CompileOptions, compile_str
    module = rt.load_module(compile_str(SCATTER_ADD, CompileOptions(target_backends=["llvm-cpu"])),
                            device="counting")
    orig = rng.integers(-100, 100, (3, 2)).astype(np.int8)
    upd = rng.integers(-100, 100, (5, 2)).astype(np.int8)
    idx = np.array([[0], [2], [0], [-1], [3]], np.int64)   # a repeat, two places outside
    summed, negated = module.main(orig, upd, idx)
    want = orig.copy()
    np.add.at(want, (np.array([0, 0, 2, 2, 0, 0]), np.array([0, 1, 0, 1, 0, 1])),
              upd[[0, 0, 1, 1, 2, 2], [0, 1, 0, 1, 0, 1]])
    np.testing.assert_array_equal(summed.to_host(), want)
    np.testing.assert_array_equal(negated.to_host(), -orig)
    assert [mapped for _, mapped in module["main"]._plan.result_keys] == [False, True]
